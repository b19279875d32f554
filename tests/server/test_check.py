"""Preflight checks on the sandbox servers: every problem provoked for real and reported with
its source and table, and `shardmerge check`'s output and exit codes (the pure pieces,
table-driven: tests/unit/test_check_rules.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from replicator.cli.check import Problem, run_checks
from replicator.cli.shardmerge import main
from replicator.config import load_config
from replicator.sandbox import Instance, Sandbox
from tests.replication import REPO, free_port

# -- on the sandbox ----------------------------------------------------------------------------


def source_entry(inst: Instance, source_id: str, server_id: int, **extra: Any) -> dict[str, Any]:
    return {"id": source_id, "host": inst.host, "port": inst.port, "user": inst.user,
            "password": inst.password, "server_id": server_id, **extra}


def write_config(
    tmp_path: Path,
    sandbox: Sandbox,
    db: str,
    *,
    sources: list[dict[str, Any]] | None = None,
    extract: dict[str, str] | None = None,
    target: dict[str, Any] | None = None,
    routes: list[dict[str, Any]] | None = None,
) -> Path:
    up1, up2 = sandbox.upstreams
    down = sandbox.downstream
    route: dict[str, Any] = {"schema": db, "table": "orders_*", "target": "shop.orders"}
    if extract:
        route["extract"] = extract
    data = {
        "task": "check-test",
        "sources": sources or [source_entry(up1, "s1", 9001), source_entry(up2, "s2", 9002)],
        "target": {"host": down.host, "port": down.port, "user": down.user, "password": down.password,
                   "flavor": "mariadb", **(target or {})},
        "routes": routes or [route],
    }
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def check(path: Path) -> list[Problem]:
    return run_checks(load_config(path))


def summary(problems: list[Problem]) -> list[tuple[str, str | None, str | None, str]]:
    return [(p.level, p.source, p.table, p.message) for p in problems]



def create_shards(sandbox: Sandbox, db: str, up1: list[str], up2: list[str]) -> None:
    """`orders_N (...)` definitions, created on up1 and up2."""
    for inst, tables in zip(sandbox.upstreams, (up1, up2), strict=True):
        if tables:
            inst.execute([f"CREATE TABLE {t}" for t in tables], database=db)


def test_a_clean_config_has_no_problems(sandbox: Sandbox, scratch_db: str, tmp_path: Path) -> None:
    create_shards(sandbox, scratch_db, ["orders_1 (id INT PRIMARY KEY, a INT)"],
                  ["orders_2 (id BIGINT AUTO_INCREMENT PRIMARY KEY)", "other (a INT)"])
    path = write_config(tmp_path, sandbox, scratch_db, extract={"source": "_source", "table": "_table"})
    assert check(path) == []


@pytest.mark.parametrize(("variable", "value", "level", "message", "wanted"), [
    ("binlog_format", "STATEMENT", "error", "binlog_format is STATEMENT; the binlog must carry rows", "ROW"),
    ("binlog_format", "MIXED", "error", "binlog_format is MIXED; the binlog must carry rows", "ROW"),
    ("binlog_row_image", "MINIMAL", "error", "binlog_row_image is MINIMAL; UPDATE and DELETE events must carry whole rows", "FULL"),
    ("binlog_row_metadata", "MINIMAL", "warning", "binlog_row_metadata is MINIMAL; rows will be read with the tracked schema", "FULL"),
])
def test_binlog_settings_on_a_server(sandbox: Sandbox, scratch_db: str, tmp_path: Path, variable: str, value: str,
                                     level: str, message: str, wanted: str) -> None:
    create_shards(sandbox, scratch_db, ["orders_1 (id INT PRIMARY KEY)"], [])
    up2 = sandbox.upstreams[1]
    saved = up2.execute(f"SELECT @@GLOBAL.{variable}")[0][0]
    try:
        up2.execute(f"SET GLOBAL {variable}='{value}'")
        problems = check(write_config(tmp_path, sandbox, scratch_db))
    finally:
        up2.execute(f"SET GLOBAL {variable}='{saved}'")
    assert summary(problems) == [(level, "s2", None, message)]
    assert problems[0].fix == f"SET GLOBAL {variable}={wanted} and in my.cnf {variable}={wanted}"


def test_tables_without_a_key_that_finds_rows(sandbox: Sandbox, scratch_db: str, tmp_path: Path) -> None:
    create_shards(sandbox, scratch_db, [
        "orders_1 (id INT PRIMARY KEY, a INT)",
        "orders_2 (a INT, b INT)",
        "orders_3 (a INT, b INT, UNIQUE KEY (a))",  # NULLs repeat in a unique key
        "orders_4 (a INT NOT NULL, b INT, UNIQUE KEY (a))",
        "orders_5 (a INT NOT NULL, b INT, UNIQUE KEY (a, b))",
        "orders_6 (a INT NOT NULL, b INT NOT NULL, KEY (a), UNIQUE KEY (b, a))",
        "not_routed (a INT)",
    ], ["orders_7 (a INT)"])
    problems = check(write_config(tmp_path, sandbox, scratch_db))
    reason = "no primary key and no unique key over NOT NULL columns; UPDATE and DELETE could not find the row downstream"
    assert summary(problems) == [
        ("error", "s1", f"{scratch_db}.orders_2", reason),
        ("error", "s1", f"{scratch_db}.orders_3", reason),
        ("error", "s1", f"{scratch_db}.orders_5", reason),
        ("error", "s2", f"{scratch_db}.orders_7", reason),
    ]
    assert problems[0].fix.startswith(f"ALTER TABLE `{scratch_db}`.`orders_2` ADD PRIMARY KEY")


AUTO = "(id INT AUTO_INCREMENT PRIMARY KEY, a INT)"


@pytest.mark.parametrize(("up1", "up2", "extract", "warned"), [
    ([f"orders_1 {AUTO}"], [f"orders_2 {AUTO}"], None, [("s1", "orders_1"), ("s2", "orders_2")]),
    ([f"orders_1 {AUTO}", f"orders_2 {AUTO}"], [], None, [("s1", "orders_1"), ("s1", "orders_2")]),
    ([f"orders_1 {AUTO}"], ["orders_2 (id INT PRIMARY KEY)"], None, [("s1", "orders_1")]),
    ([f"orders_1 {AUTO}"], [f"orders_2 {AUTO}"], {"source": "_source"}, []),  # rows told apart
    ([f"orders_1 {AUTO}"], [], None, []),  # one shard: nothing to collide with
    (["orders_1 (id INT AUTO_INCREMENT, k INT, PRIMARY KEY (k, id), KEY (id))"], [f"orders_2 {AUTO}"], None,
     [("s2", "orders_2")]),  # a composite key is the user's own design
])
def test_auto_increment_keys_colliding_across_shards(sandbox: Sandbox, scratch_db: str, tmp_path: Path, up1: list[str],
                                                     up2: list[str], extract: dict[str, str] | None,
                                                     warned: list[tuple[str, str]]) -> None:
    create_shards(sandbox, scratch_db, up1, up2)
    problems = check(write_config(tmp_path, sandbox, scratch_db, extract=extract))
    assert [(p.source, p.table) for p in problems] == [(s, f"{scratch_db}.{t}") for s, t in warned]
    for p in problems:
        assert p.level == "warning"
        assert p.message == ("primary key id is AUTO_INCREMENT and 2 shards merge into shop.orders without "
                             "extract columns; equal ids of two shards would collide")
        assert "auto_increment_offset" in p.fix and "extract columns" in p.fix


def test_server_id_equal_to_a_replica_server_id(sandbox: Sandbox, scratch_db: str, tmp_path: Path) -> None:
    create_shards(sandbox, scratch_db, ["orders_1 (id INT PRIMARY KEY)"], [])
    up1, up2 = sandbox.upstreams
    # 101 is up1's own @@server_id: streaming from up2 with it clashes with up1.
    path = write_config(tmp_path, sandbox, scratch_db,
                        sources=[source_entry(up1, "s1", 9001), source_entry(up2, "s2", up1.server_id)])
    problems = check(path)
    assert summary(problems) == [
        ("error", "s1", None, f"the server's server_id {up1.server_id} is the replica server_id of source s2 in the config"),
    ]
    assert problems[0].fix == "set sources[1].server_id to an id that no server uses"


def test_the_same_server_twice(sandbox: Sandbox, scratch_db: str, tmp_path: Path) -> None:
    up1 = sandbox.upstreams[0]
    create_shards(sandbox, scratch_db, ["orders_1 (id INT PRIMARY KEY)"], [])
    path = write_config(tmp_path, sandbox, scratch_db,
                        sources=[source_entry(up1, "s1", 9001), source_entry(up1, "again", 9002)])
    assert summary(check(path)) == [
        ("error", "again", None, f"the server's server_id {up1.server_id} is also that of source s1 "
                                 "(the same server twice, or a clone)"),
    ]


def test_an_unreachable_source_does_not_hide_the_others(sandbox: Sandbox, scratch_db: str, tmp_path: Path) -> None:
    create_shards(sandbox, scratch_db, ["orders_1 (a INT)"], [])
    up1, up2 = sandbox.upstreams
    port = free_port()
    path = write_config(tmp_path, sandbox, scratch_db,
                        sources=[source_entry(up2, "s2", 9002, port=port), source_entry(up1, "s1", 9001)])
    problems = check(path)
    assert [(p.level, p.source, p.table) for p in problems] == [
        ("error", "s2", None),
        ("error", "s1", f"{scratch_db}.orders_1"),
    ]
    assert problems[0].message.startswith(f"cannot connect to 127.0.0.1:{port}: Can't connect to")
    assert problems[0].fix == "check sources[0].host and port, and that the server is running and reachable from here"


def test_wrong_password(sandbox: Sandbox, scratch_db: str, tmp_path: Path) -> None:
    create_shards(sandbox, scratch_db, ["orders_1 (id INT PRIMARY KEY)"], [])
    up1, up2 = sandbox.upstreams
    path = write_config(tmp_path, sandbox, scratch_db,
                        sources=[source_entry(up1, "s1", 9001), source_entry(up2, "s2", 9002, password="wrong")])
    problems = check(path)
    assert [(p.source, p.fix) for p in problems] == [
        ("s2", "check sources[1].user and its password (password or password_env)")]
    assert "Access denied" in problems[0].message and "wrong" not in str(problems[0])


def test_an_anonymous_account_that_shadows_the_user_is_named(
    sandbox: Sandbox, scratch_db: str, tmp_path: Path, limited_user: tuple[str, str]
) -> None:
    """The trap of a default `mariadb-install-db`: ''@'localhost' (here ''@'127.0.0.1', the
    sandbox resolving no names) is matched before 'user'@'%' and refuses the user's password."""
    create_shards(sandbox, scratch_db, ["orders_1 (id INT PRIMARY KEY)"], [])
    name, password = limited_user
    up1, up2 = sandbox.upstreams
    up1.execute([f"GRANT ALL ON *.* TO '{name}'@'%'", "CREATE USER ''@'127.0.0.1'"])
    try:
        sources = [source_entry(up1, "s1", 9001, user=name, password=password), source_entry(up2, "s2", 9002)]
        problem, *_ = check(write_config(tmp_path, sandbox, scratch_db, sources=sources))
    finally:
        up1.execute("DROP USER IF EXISTS ''@'127.0.0.1'")
    assert problem.source == "s1" and "Access denied" in problem.message
    assert "anonymous account ''@'127.0.0.1', which it matches before sources[0].user" in problem.message
    assert problem.fix.startswith("DROP USER ''@'127.0.0.1' on that server")
    assert f"create '{name}'@'127.0.0.1' with the same password and grants" in problem.fix
    assert password not in str(problem)
    # the way out, as printed: the same check finds nothing once the account is dropped
    assert check(write_config(tmp_path, sandbox, scratch_db, sources=sources)) == []


@pytest.mark.parametrize(("target", "message"), [
    ({"flavor": "mysql"}, "target.flavor is mysql but the server is mariadb ("),
    ({"flavor": "tidb"}, "target.flavor is tidb but the server is mariadb ("),
    ({"port": "FREE"}, "cannot connect to 127.0.0.1:"),
])
def test_target_problems(sandbox: Sandbox, scratch_db: str, tmp_path: Path, target: dict[str, Any], message: str) -> None:
    create_shards(sandbox, scratch_db, ["orders_1 (id INT PRIMARY KEY)"], [])
    if target.get("port") == "FREE":
        target = {"port": free_port()}
    problems = check(write_config(tmp_path, sandbox, scratch_db, target=target))
    assert [(p.level, p.source, p.table) for p in problems] == [("error", None, None)]
    assert problems[0].message.startswith(message)


def test_a_target_user_that_may_not_apply_row_events_is_warned(
    sandbox: Sandbox, scratch_db: str, tmp_path: Path
) -> None:
    create_shards(sandbox, scratch_db, ["orders_1 (id INT PRIMARY KEY)"], [])
    user = f"nobinlog_{scratch_db[-8:]}"
    down = sandbox.downstream
    down.execute([f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'",
                  f"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, DROP, INDEX ON *.* TO '{user}'@'%'"])
    try:
        problems = check(write_config(tmp_path, sandbox, scratch_db, target={"user": user, "password": "pw"}))
        assert [(p.level, p.source) for p in problems] == [("warning", None)]
        assert "may not run BINLOG statements" in problems[0].message
        assert problems[0].fix == f"GRANT BINLOG REPLAY ON *.* TO '{user}'@'%', or set options.row_events: false"
        down.execute(f"GRANT BINLOG REPLAY ON *.* TO '{user}'@'%'")
        assert check(write_config(tmp_path, sandbox, scratch_db, target={"user": user, "password": "pw"})) == []
    finally:
        down.execute(f"DROP USER IF EXISTS '{user}'@'%'")


def test_a_source_flavor_that_is_not_the_servers(sandbox: Sandbox, scratch_db: str, tmp_path: Path) -> None:
    create_shards(sandbox, scratch_db, ["orders_1 (id INT PRIMARY KEY)"], [])
    up1, up2 = sandbox.upstreams
    path = write_config(tmp_path, sandbox, scratch_db,
                        sources=[source_entry(up1, "s1", 9001, flavor="mysql"), source_entry(up2, "s2", 9002)])
    problems = check(path)
    assert [(p.level, p.source) for p in problems] == [("error", "s1")]
    assert problems[0].message.startswith("flavor is mysql in the config but the server is mariadb (10.")
    assert problems[0].fix == "set sources[0].flavor: mariadb, or leave it out to have it detected"


def test_a_route_without_tables(sandbox: Sandbox, scratch_db: str, tmp_path: Path) -> None:
    create_shards(sandbox, scratch_db, ["orders_1 (id INT PRIMARY KEY)"], [])
    routes = [{"schema": scratch_db, "table": "orders_*", "target": "shop.orders"},
              {"schema": scratch_db, "table": "Orders_*", "target": "shop.other"}]
    problems = check(write_config(tmp_path, sandbox, scratch_db, routes=routes))
    assert summary(problems) == [
        ("warning", None, "shop.other", f"routes[1] ({scratch_db}.Orders_*) matches no table on any reachable source")]


def test_a_table_whose_name_an_extract_pattern_does_not_match(sandbox: Sandbox, scratch_db: str, tmp_path: Path) -> None:
    create_shards(sandbox, scratch_db, ["orders_1 (id INT PRIMARY KEY)", "orders_x (id INT PRIMARY KEY)"], [])
    routes = [{"schema": scratch_db, "table": "orders_*", "target": "shop.orders",
               "extract": {"source": "_source", "table": {"column": "n", "regex": "orders_([0-9]+)", "type": "INT"}}}]
    problems = check(write_config(tmp_path, sandbox, scratch_db, routes=routes))
    assert [(p.level, p.source, p.table) for p in problems] == [("error", "s1", f"{scratch_db}.orders_x")]
    assert "does not match the pattern 'orders_([0-9]+)' of extract column n" in problems[0].message


@pytest.fixture
def limited_user(sandbox: Sandbox) -> Iterator[tuple[str, str]]:
    """A fresh account on up1 (name, password) and a role name, both dropped afterwards."""
    up1 = sandbox.upstreams[0]
    name = f"chk_{uuid.uuid4().hex[:8]}"
    up1.execute(f"CREATE USER '{name}'@'%' IDENTIFIED BY 'pw-{name}'")
    try:
        yield name, f"pw-{name}"
    finally:
        up1.execute([f"DROP USER IF EXISTS '{name}'@'%'", f"DROP ROLE IF EXISTS role_{name}"])


@pytest.mark.parametrize(("grants", "expected"), [
    (["GRANT SELECT ON *.* TO {user}"], [
        ("error", None, "{user} lacks REPLICATION SLAVE; it cannot stream the binlog"),
        ("error", None, "{user} lacks BINLOG MONITOR; it cannot read binlog positions (SHOW MASTER STATUS, SHOW BINARY LOGS)"),
    ]),
    (["GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO {user}", "GRANT INSERT ON `{db}`.`orders_1` TO {user}"], [
        ("error", "{db}.orders_1", "{user} lacks SELECT on the table; its schema and rows cannot be read"),
    ]),
    # REPLICATION CLIENT is BINLOG MONITOR's old name on MariaDB 10.5+; `_` in a db grant is a wildcard.
    (["GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO {user}", "GRANT SELECT ON `{db}`.* TO {user}"], []),
    (["CREATE ROLE role_{name}", "GRANT SELECT ON `{db}`.* TO role_{name}", "GRANT role_{name} TO {user}",
      "SET DEFAULT ROLE role_{name} FOR {user}", "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO {user}"], []),
    (["GRANT ALL PRIVILEGES ON *.* TO {user}"], []),
])
def test_privileges(sandbox: Sandbox, scratch_db: str, tmp_path: Path, limited_user: tuple[str, str], grants: list[str],
                    expected: list[tuple[str, str | None, str]]) -> None:
    create_shards(sandbox, scratch_db, ["orders_1 (id INT PRIMARY KEY)"], [])
    name, password = limited_user
    up1, up2 = sandbox.upstreams
    user = f"'{name}'@'%'"
    up1.execute([g.format(user=user, name=name, db=scratch_db) for g in grants])
    path = write_config(tmp_path, sandbox, scratch_db, sources=[
        source_entry(up1, "s1", 9001, user=name, password=password), source_entry(up2, "s2", 9002)])
    problems = check(path)
    assert summary(problems) == [
        (level, "s1", table.format(db=scratch_db) if table else None, message.format(user=user))
        for level, table, message in expected
    ]
    for p in problems:
        assert p.fix.startswith("GRANT ") and p.fix.endswith(f" TO {user}")


# -- the command -------------------------------------------------------------------------------


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["check", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_clean(sandbox: Sandbox, scratch_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    create_shards(sandbox, scratch_db, ["orders_1 (id INT PRIMARY KEY)"], ["orders_2 (id INT PRIMARY KEY)"])
    assert run_cli(capsys, "--config", str(write_config(tmp_path, sandbox, scratch_db))) == (0, "no problems found\n", "")


def test_cli_errors_exit_2(sandbox: Sandbox, scratch_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    create_shards(sandbox, scratch_db, ["orders_1 (a INT)"], [f"orders_2 {AUTO}", f"orders_3 {AUTO}"])
    code, out, _ = run_cli(capsys, "--config", str(write_config(tmp_path, sandbox, scratch_db)))
    assert code == 2
    lines = out.splitlines()
    assert lines[0].startswith(f"error  s1  {scratch_db}.orders_1  no primary key and no unique key over NOT NULL "
                               f"columns; UPDATE and DELETE could not find the row downstream: ALTER TABLE")
    assert lines[1].startswith(f"warning  s2  {scratch_db}.orders_2  primary key id is AUTO_INCREMENT")
    assert lines[2].startswith(f"warning  s2  {scratch_db}.orders_3  primary key id is AUTO_INCREMENT")
    assert lines[3:] == ["1 error, 2 warnings"]


def test_cli_warnings_only_exit_0_and_json(sandbox: Sandbox, scratch_db: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    create_shards(sandbox, scratch_db, [f"orders_1 {AUTO}"], [f"orders_2 {AUTO}"])
    path = str(write_config(tmp_path, sandbox, scratch_db))
    code, out, _ = run_cli(capsys, "--config", path)
    assert code == 0 and out.splitlines()[-1] == "0 errors, 2 warnings"
    code, out, _ = run_cli(capsys, "--config", path, "--json")
    report = json.loads(out)
    assert code == 0
    assert (report["task"], report["errors"], report["warnings"]) == ("check-test", 0, 2)
    assert [(p["level"], p["source"], p["table"]) for p in report["problems"]] == [
        ("warning", "s1", f"{scratch_db}.orders_1"), ("warning", "s2", f"{scratch_db}.orders_2")]
    assert set(report["problems"][0]) == {"level", "source", "table", "message", "fix"}


@pytest.mark.parametrize(("text", "message"), [
    ("task: t\nsources: []\n", "task.yaml: sources: expected at least one source"),
    ("task: [", "task.yaml: line 1, column 8: invalid YAML: expected the node content, but found '<stream end>'"),
])
def test_cli_bad_config_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                    text: str, message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "task.yaml").write_text(text)
    code, out, err = run_cli(capsys, "--config", "task.yaml")
    assert (code, out, err) == (2, "", f"shardmerge check: {message}\n")


def test_cli_missing_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "--config", str(tmp_path / "none.yaml"))
    assert code == 2 and err.strip().endswith("none.yaml: cannot read: No such file or directory")


def test_cli_warns_of_a_source_whose_user_sees_none_of_its_shards(sandbox: Sandbox, scratch_db: str,
                                                                  tmp_path: Path) -> None:
    """The tutorial's first task (docs/tutorial.md) with SELECT left out on one source: the other source's shards
    are seen, so only this warning says that s2's are not; its GRANT, run as printed, makes
    them seen. `shardmerge check` as a process."""
    create_shards(sandbox, scratch_db, ["orders_1 (id INT PRIMARY KEY)"], ["orders_2 (id INT PRIMARY KEY)"])
    up1, up2 = sandbox.upstreams
    name = f"chk_{uuid.uuid4().hex[:8]}"
    user = f"'{name}'@'%'"
    up2.execute([f"CREATE USER {user} IDENTIFIED BY 'pw'", f"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO {user}"])
    glob = scratch_db[: scratch_db.rindex("_") + 1] + "*"  # t_<test>_*: its `_` a LIKE wildcard to escape
    routes = [{"schema": glob, "table": "orders_*", "target": "shop.orders"}]
    path = write_config(tmp_path, sandbox, scratch_db, routes=routes,
                        sources=[source_entry(up1, "s1", 9001), source_entry(up2, "s2", 9002, user=name, password="pw")])

    def shardmerge_check() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "replicator.cli.shardmerge", "check", "--config", str(path)],
                              capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                              timeout=120)

    try:
        result = shardmerge_check()
        pattern = glob[:-1].replace("_", "\\_") + "%"
        grant = f"GRANT SELECT ON `{pattern}`.* TO {user}"
        assert result.returncode == 0, result.stderr  # a warning: s2 may have no shard yet
        assert result.stdout.splitlines() == [
            f"warning  s2  no table routed by routes[0] ({glob}.orders_*) is visible to {user}; the server hides "
            f"the tables a user has no privilege on, so its shards would not be replicated: if the source has "
            f"shards, {grant}",
            "0 errors, 1 warning",
        ], result.stdout
        up2.execute(grant)
        result = shardmerge_check()
        assert (result.returncode, result.stdout) == (0, "no problems found\n"), result.stdout + result.stderr
    finally:
        up2.execute(f"DROP USER IF EXISTS {user}")
