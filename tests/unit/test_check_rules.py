"""Preflight checks without a server (`replicator.cli.check`, `replicator.cli.grants`), table-driven:
problem lines, binlog settings, failover readiness, grants and privileges, server flavors and
versions, and the warning for a source whose user may see none of its shards. The checks on the
sandbox servers and `shardmerge check` itself: tests/server/test_check.py."""

from __future__ import annotations

import pytest

from replicator.cli.check import (
    Problem,
    binlog_problems,
    failover_problems,
    hidden_shard_problems,
    privilege_problems,
    version_tuple,
)
from replicator.cli.grants import Grant, Grants, parse_grant, parse_role_grant
from replicator.config import Route
from replicator.servers import flavor_of


@pytest.mark.parametrize(("problem", "line"), [
    (Problem("error", "s1", None, "binlog_format is STATEMENT; the binlog must carry rows",
             "SET GLOBAL binlog_format=ROW and in my.cnf binlog_format=ROW"),
     "error  s1  binlog_format is STATEMENT; the binlog must carry rows: "
     "SET GLOBAL binlog_format=ROW and in my.cnf binlog_format=ROW"),
    (Problem("warning", "s2", "shop_01.orders_1", "m", "f"), "warning  s2  shop_01.orders_1  m: f"),
    (Problem("error", None, None, "m", "f"), "error  target  m: f"),
    (Problem("warning", None, "shop.orders", "m", "f"), "warning  target  shop.orders  m: f"),
])
def test_problem_line(problem: Problem, line: str) -> None:
    assert str(problem) == line


FULL = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL", "binlog_row_metadata": "FULL"}


@pytest.mark.parametrize(("changes", "expected"), [
    ({}, []),
    ({"log_bin": "OFF"}, [("error", "log_bin is OFF; the server writes no binlog")]),
    ({"binlog_format": "STATEMENT"}, [("error", "binlog_format is STATEMENT; the binlog must carry rows")]),
    ({"binlog_format": "MIXED"}, [("error", "binlog_format is MIXED; the binlog must carry rows")]),
    ({"binlog_row_image": "MINIMAL"}, [("error", "binlog_row_image is MINIMAL; UPDATE and DELETE events must carry whole rows")]),
    ({"binlog_row_image": "NOBLOB"}, [("error", "binlog_row_image is NOBLOB; UPDATE and DELETE events must carry whole rows")]),
    ({"binlog_row_image": None}, []),  # before MySQL 5.6: images are always full
    ({"binlog_row_metadata": "MINIMAL"}, [("warning", "binlog_row_metadata is MINIMAL; rows will be read with the tracked schema")]),
    ({"binlog_row_metadata": None}, [("warning", "binlog_row_metadata does not exist on this server (before MySQL 8.0.1 and MariaDB 10.5); rows will be read with the tracked schema")]),
])
def test_binlog_settings(changes: dict[str, str | None], expected: list[tuple[str, str]]) -> None:
    variables = {k: v for k, v in {**FULL, **changes}.items() if v is not None}
    problems = binlog_problems("s1", variables)
    assert [(p.level, p.message) for p in problems] == expected
    assert all(p.source == "s1" and p.fix for p in problems)


@pytest.mark.parametrize(("flavor", "variables", "expected"), [
    ("mariadb", {"log_slave_updates": "ON", "gtid_binlog_pos": "0-101-7"}, []),
    ("mariadb", {"log_slave_updates": "ON", "gtid_binlog_pos": ""}, []),  # nothing written yet
    ("mariadb", {"log_slave_updates": "OFF", "gtid_binlog_pos": "0-101-7"},
     ["log_slave_updates is OFF: a server without it keeps no binlog of what it replicates, so a source "
      "cannot move to it once it is promoted"]),
    ("mariadb", {"log_slave_updates": "ON", "gtid_binlog_pos": "0-101-7,1-102-3"},
     ["the binlog has 2 GTID domains (0, 1); a source moves to another server by the GTIDs of one domain only"]),
    ("mysql", {"log_slave_updates": "ON", "gtid_binlog_pos": ""},
     ["a source moves to another server by GTID on MariaDB only; after a failover of this server its "
      "positions cannot be found on the promoted one"]),
])
def test_failover_readiness(flavor: str, variables: dict[str, str], expected: list[str]) -> None:
    problems = failover_problems("s1", flavor, variables)
    assert [p.message for p in problems] == expected
    assert all(p.level == "warning" and p.source == "s1" and p.fix for p in problems)


@pytest.mark.parametrize(("line", "grant", "roles"), [
    ("GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION", Grant(frozenset({"ALL"}), "*", "*"), []),
    ("GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '*D8'",
     Grant(frozenset({"REPLICATION SLAVE", "BINLOG MONITOR"}), "*", "*"), []),
    ("GRANT SELECT ON `shop\\_01`.* TO `u`@`%`", Grant(frozenset({"SELECT"}), "shop\\_01", "*"), []),
    ("GRANT SELECT (`id`, `a`), INSERT ON `db`.`t` TO `u`@`%`", Grant(frozenset({"INSERT"}), "db", "t"), []),
    ("GRANT SELECT ON `we``ird`.`t.1` TO `u`@`%`", Grant(frozenset({"SELECT"}), "we`ird", "t.1"), []),
    ("GRANT SELECT ON TABLE `db`.`t` TO `u`@`%`", Grant(frozenset({"SELECT"}), "db", "t"), []),
    ("GRANT USAGE ON *.* TO `u`@`%`", None, []),
    ("GRANT PROXY ON ``@`%` TO `root`@`127.0.0.1` WITH GRANT OPTION", None, []),
    ("GRANT EXECUTE ON PROCEDURE `db`.`p` TO `u`@`%`", None, []),
    ("GRANT `reader` TO `u`@`%`", None, ["`reader`"]),
    ("GRANT `r1`@`%`,`r2`@`%` TO `u`@`%` WITH ADMIN OPTION", None, ["`r1`@`%`", "`r2`@`%`"]),
    ("SET DEFAULT ROLE `reader` FOR `u`@`%`", None, []),
])
def test_grant_lines(line: str, grant: Grant | None, roles: list[str]) -> None:
    assert parse_grant(line) == grant
    assert parse_role_grant(line) == roles


@pytest.mark.parametrize(("lines", "schema", "table", "can_select"), [
    (["GRANT ALL PRIVILEGES ON *.* TO `u`@`%`"], "any", "t", True),
    (["GRANT SELECT ON *.* TO `u`@`%`"], "any", "t", True),
    (["GRANT SELECT ON `shop\\_01`.* TO `u`@`%`"], "shop_01", "t", True),
    (["GRANT SELECT ON `shop\\_01`.* TO `u`@`%`"], "shopX01", "t", False),  # escaped: a literal _
    (["GRANT SELECT ON `shop_01`.* TO `u`@`%`"], "shopX01", "t", True),  # unescaped _: any character
    (["GRANT SELECT ON `shop%`.* TO `u`@`%`"], "shop_42", "t", True),
    (["GRANT SELECT ON `shop%`.* TO `u`@`%`"], "Shop_42", "t", False),
    (["GRANT ALL PRIVILEGES ON `db`.* TO `u`@`%`"], "db", "t", True),
    (["GRANT SELECT ON `db`.`t` TO `u`@`%`"], "db", "t", True),
    (["GRANT SELECT ON `db`.`t` TO `u`@`%`"], "db", "t2", False),
    (["GRANT SELECT (`id`) ON `db`.`t` TO `u`@`%`"], "db", "t", False),  # some columns are not the row
    (["GRANT INSERT ON `db`.* TO `u`@`%`"], "db", "t", False),
])
def test_select_privilege(lines: list[str], schema: str, table: str, can_select: bool) -> None:
    assert Grants.parse(lines).can_select(schema, table) is can_select


@pytest.mark.parametrize(("lines", "flavor", "version", "missing"), [
    (["GRANT ALL PRIVILEGES ON *.* TO `u`@`%`"], "mariadb", (10, 11, 6), []),
    (["GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `u`@`%`"], "mariadb", (10, 11, 6), []),
    (["GRANT SELECT ON *.* TO `u`@`%`"], "mariadb", (10, 11, 6), ["REPLICATION SLAVE", "BINLOG MONITOR"]),
    (["GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`"], "mariadb", (10, 4, 30), []),
    (["GRANT REPLICATION SLAVE ON *.* TO `u`@`%`"], "mariadb", (10, 4, 30), ["REPLICATION CLIENT"]),
    (["GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`"], "mysql", (8, 0, 36), []),
    (["GRANT REPLICATION REPLICA, REPLICATION CLIENT ON *.* TO `u`@`%`"], "mysql", (8, 4, 0), []),
    (["GRANT BINLOG MONITOR ON *.* TO `u`@`%`"], "mysql", (8, 0, 36), ["REPLICATION SLAVE", "REPLICATION CLIENT"]),
    # Replication privileges only exist globally.
    (["GRANT ALL PRIVILEGES ON `db`.* TO `u`@`%`"], "mysql", (8, 0, 36), ["REPLICATION SLAVE", "REPLICATION CLIENT"]),
])
def test_replication_privileges(lines: list[str], flavor: str, version: tuple[int, ...], missing: list[str]) -> None:
    problems = privilege_problems("s1", Grants.parse(lines), [], "u@%", flavor, version, [])
    assert [p.message.split(" lacks ")[1].split(";")[0] for p in problems] == missing
    assert all(p.level == "error" and p.fix.endswith(" ON *.* TO 'u'@'%'") for p in problems)


def test_roles_whose_grants_cannot_be_read_turn_errors_into_warnings() -> None:
    problems = privilege_problems("s1", Grants.parse([]), ["`r1`"], "u@%", "mariadb", (10, 11), [])
    assert {p.level for p in problems} == {"warning"}
    assert all("unless granted through role `r1`" in p.message for p in problems)


@pytest.mark.parametrize(("version", "flavor", "numbers"), [
    ("10.11.6-MariaDB-0+deb12u1-log", "mariadb", (10, 11, 6)),
    ("5.5.5-10.4.32-MariaDB", "mariadb", (10, 4, 32)),
    ("8.0.36", "mysql", (8, 0, 36)),
    ("8.0.11-TiDB-v7.5.0", "tidb", (8, 0, 11)),
    ("5.7.44-log", "mysql", (5, 7, 44)),
])
def test_server_flavor_and_version(version: str, flavor: str, numbers: tuple[int, ...]) -> None:
    assert flavor_of(version) == flavor
    assert version_tuple(version) == numbers


SHOP = Route("shop_*", "orders_*", "shop", "orders")
LIKE_SHOP = "GRANT SELECT ON `shop\\_%`.* TO 'u'@'%'"


@pytest.mark.parametrize(("lines", "routes", "fix"), [
    # no SELECT at all: the shards may be hidden; the grant is the route's glob as a LIKE pattern
    (["GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `u`@`%`"], [SHOP], LIKE_SHOP),
    (["GRANT SELECT ON `crm`.* TO `u`@`%`"], [SHOP], LIKE_SHOP),
    (["GRANT SELECT ON `shop_01`.`orders_1` TO `u`@`%`"], [SHOP], LIKE_SHOP),  # a table: not every shard
    (["GRANT INSERT ON `shop\\_%`.* TO `u`@`%`"], [SHOP], LIKE_SHOP),
    (["GRANT USAGE ON *.* TO `u`@`%`"], [Route("a%b?_*", "t", "x", "t")], "GRANT SELECT ON `a\\%b_\\_%`.* TO 'u'@'%'"),
    (["GRANT USAGE ON *.* TO `u`@`%`"], [Route("shop", "t", "x", "t"), SHOP],
     "GRANT SELECT ON `shop`.* TO 'u'@'%'; " + LIKE_SHOP),
    (["GRANT USAGE ON *.* TO `u`@`%`"], [Route("*", "t", "x", "t", schema_regex="shop_[0-9]+")],
     "GRANT SELECT ON `<each schema shop_[0-9]+ matches>`.* TO 'u'@'%'"),
    # a SELECT that covers the route's schemas: the tables are truly not there (no shard yet)
    (["GRANT SELECT ON *.* TO `u`@`%`"], [SHOP], None),
    (["GRANT ALL PRIVILEGES ON *.* TO `u`@`%`"], [SHOP], None),
    (["GRANT SELECT ON `shop\\_%`.* TO `u`@`%`"], [SHOP], None),
    (["GRANT ALL PRIVILEGES ON `shop`.* TO `u`@`%`"], [Route("shop", "t", "x", "t")], None),
    (["GRANT SELECT ON `sh%`.* TO `u`@`%`"], [Route("shop", "t", "x", "t")], None),
])
def test_a_source_whose_user_may_see_no_routed_table_is_warned_with_the_grant(
    lines: list[str], routes: list[Route], fix: str | None
) -> None:
    problems = hidden_shard_problems("s2", Grants.parse(lines), "u@%", routes)
    if fix is None:
        assert problems == []
        return
    assert [(p.level, p.source, p.table) for p in problems] == [("warning", "s2", None)]
    assert problems[0].message.startswith("no table routed by routes[0] (")
    assert " is visible to 'u'@'%'; the server hides the tables" in problems[0].message
    assert problems[0].fix == f"if the source has shards, {fix}"
