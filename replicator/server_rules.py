"""What shardmerge does differently by the kind of server it reads or writes, as flags
(issue 72; the schema side's are lattice's `Rules`, `Flavor.rules`). Code elsewhere asks a
flag, never an engine name (`tests/unit/test_replicator_structure.py` keeps it so); a server's
kind is told from its version by `replicator.servers.flavor_of` alone."""

from __future__ import annotations

from dataclasses import dataclass

from lattice import Flavor


@dataclass(frozen=True)
class ServerRules:
    # -- as a source ----------------------------------------------------------------------
    has_binlog: bool = True  # a binlog to stream (TiDB has none a replica reads: TiCDC)
    # GTIDs are domain-server-sequence positions; the state at a file position is asked of the
    # server (BINLOG_GTID_POS) and followed event by event (source/stream.py)
    gtid_positions: bool = False
    gtid_sets: bool = False  # GTIDs are sets of source_uuid:intervals (MySQL)
    # a source's saved positions move to a promoted server of its replication by their GTIDs
    # (docs/operations/failover.md)
    moves_by_gtid: bool = False
    # row events hold the hidden hash columns of long UNIQUE keys (lattice.row_image)
    hidden_hash_columns: bool = False
    # reading binlog positions needs BINLOG MONITOR from 10.5 on (REPLICATION CLIENT before)
    binlog_monitor_privilege: bool = False
    # -- as a target ------------------------------------------------------------------------
    # row events applied as the binlog holds them, in BINLOG statements (between two such
    # servers: the source's events are the target's format)
    binlog_replay: bool = False
    # an ALTER tries ALGORITHM/LOCK clauses, best first (TiDB's DDL is online: none)
    online_alter_clauses: bool = True
    # a session may hold CHECK constraints off (`check_constraint_checks`)
    check_constraint_switch: bool = False
    client: str = "mysql"  # the command-line client an operator runs
    # -- its information_schema (apply/inspect.py) ------------------------------------------
    # column defaults are SQL (quoted literals, NULL, expressions), not bare values
    catalog_defaults_as_sql: bool = False
    # CHECK_CONSTRAINTS names each check's table and level (column or table) itself
    catalog_checks_by_table: bool = False
    read_as: str = "mysql"  # the flavor its CREATE TABLE text is read as (lattice.parse_table)


_RULES = {
    Flavor.MARIADB: ServerRules(
        gtid_positions=True,
        moves_by_gtid=True,
        hidden_hash_columns=True,
        binlog_monitor_privilege=True,
        binlog_replay=True,
        check_constraint_switch=True,
        client="mariadb",
        catalog_defaults_as_sql=True,
        catalog_checks_by_table=True,
        read_as="mariadb",
    ),
    Flavor.MYSQL: ServerRules(gtid_sets=True),
    Flavor.TIDB: ServerRules(has_binlog=False, online_alter_clauses=False),
}


def server_rules(flavor: Flavor | str) -> ServerRules:
    """The rules of a server of this kind (`flavor`: a `Flavor` or its name)."""
    return _RULES[Flavor.parse(flavor)]
