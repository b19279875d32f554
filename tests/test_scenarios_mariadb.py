"""The coordinator's two invariants, on real MariaDB, at every step of every
scenario in tests/scenarios:

(a) running the step's downstream statements, in order, on the downstream table as
    it stood yields exactly the table the coordinator reports (the joined table, or
    while propagation is disabled the last propagated one), read back from
    information_schema: columns, types, nullability, defaults, indexes, checks;
(b) every row that a non-blocked shard's current table accepts under
    STRICT_ALL_TABLES is accepted by the downstream table with the same values.
"""

from __future__ import annotations

import datetime as dt
import itertools
from decimal import Decimal
from pathlib import Path

import pymysql
import pytest

from lattice import materialize, parse_table, quote_identifier, render_table
from lattice.model import INTEGER_BITS, ColumnType, Family, Table
from replicator.inspect import read_table, with_server_choices
from replicator.plan import load_scenario, replay
from replicator.shard_id import ShardId

SCENARIOS = sorted((Path(__file__).parent / "scenarios").glob("*.yaml"))
_ids = itertools.count()


def sample_values(t: ColumnType) -> list:
    """A typical value and the extremes of the type: the rows that would break a
    narrower downstream column."""
    f = t.family
    if f == Family.INTEGER:
        bits = INTEGER_BITS[t.name]
        return [7, 2**bits - 1, 0] if t.unsigned else [7, 2 ** (bits - 1) - 1, -(2 ** (bits - 1))]
    if f == Family.DECIMAL:
        digits = (t.precision or 10) - (t.scale or 0)
        top = Decimal("9" * digits + ("." + "9" * t.scale if t.scale else "")) if digits else Decimal(0)
        return [Decimal("1.5"), top, Decimal(0) if t.unsigned else -top]
    if f == Family.FLOAT:
        return [1.5, 3.25e10, -0.125]
    if f == Family.BIT:
        return [1, 2 ** (t.length or 1) - 1]
    if f == Family.STRING:
        n = t.length or 60
        return ["abc", "é" * n, "x" * n + "y"]
    if f == Family.BINARY:
        n = t.length or 60
        return [b"ab", b"\x00\xff" * (n // 2)]
    if f == Family.ENUM:
        return list(t.members)
    if f == Family.SET:
        return [",".join(t.members), ""]
    if f == Family.YEAR:
        return [2024, 1901, 2155]
    if f == Family.DATE:
        return [dt.date(2024, 2, 29), dt.date(9999, 12, 31)]
    if f == Family.TIME:
        return [dt.timedelta(hours=12, microseconds=123456), dt.timedelta(hours=838, minutes=59, seconds=59)]
    if f in (Family.DATETIME, Family.TIMESTAMP):
        return [dt.datetime(2024, 2, 29, 12, 30, 45, 123456), dt.datetime(2038, 1, 1, 1, 1, 1)]
    if f == Family.JSON:
        return ['{"a": [1, 2]}', "null"]
    return [None]


def same_kind(value, t: ColumnType):
    return int.from_bytes(value, "big") if t.family == Family.BIT and isinstance(value, bytes) else value


def settled(expected: Table, actual: Table) -> Table:
    return with_server_choices(expected, actual)


def run(conn, statement: str, args=None):
    with conn.cursor() as cur:
        cur.execute(statement, args)
        return cur.fetchall()


def check_rows(up, down, db: str, shard: Table, target: str) -> int:
    """Rows the shard accepts go into the downstream table unchanged; returns how
    many were checked."""
    columns = [c for c in shard.columns if c.generated is None]
    names = ", ".join(quote_identifier(c.name) for c in columns)
    marks = ", ".join(["%s"] * len(columns))
    run(up, f"DROP TABLE IF EXISTS `{db}`.`shard`")
    run(up, render_table(shard, "mariadb", name=f"{db}.shard"))
    samples = [sample_values(c.type) for c in columns]
    rows = [[vals[i % len(vals)] for vals in samples] for i in range(max(len(v) for v in samples))]
    rows.append([None if c.nullable else vals[0] for c, vals in zip(columns, samples, strict=True)])
    checked = 0
    for row in rows:
        run(up, f"DELETE FROM `{db}`.`shard`")
        try:
            run(up, f"INSERT INTO `{db}`.`shard` ({names}) VALUES ({marks})", row)
        except pymysql.err.MySQLError:
            continue  # not a row of this shard
        (stored,) = run(up, f"SELECT {names} FROM `{db}`.`shard`")
        run(down, f"DELETE FROM {target}")
        run(down, f"INSERT INTO {target} ({names}) VALUES ({marks})", list(stored))
        (again,) = run(down, f"SELECT {names} FROM {target}")
        for c, a, b in zip(columns, stored, again, strict=True):
            assert same_kind(a, c.type) == same_kind(b, c.type), (
                f"column {c.name}: the shard stored {a!r}, downstream {b!r}"
            )
        checked += 1
    run(down, f"DELETE FROM {target}")
    return checked


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_invariants_on_mariadb(sandbox, path: Path):
    db = f"scn_{next(_ids)}_{path.stem}"[:60]
    up, down = sandbox.upstreams[0].connect(), sandbox.downstream.connect()
    for conn in (up, down):
        run(conn, f"CREATE DATABASE `{db}`")
        run(conn, "SET SESSION sql_mode = 'STRICT_ALL_TABLES'")
    scenario = load_scenario(path, flavor="mariadb")
    scenario.target = f"{db}.t"
    target = f"`{db}`.`t`"
    rows_checked = 0
    try:
        for step, decision, coordinator in replay(scenario):
            where = f"{path.name} step {step.index if step else 'initial'}: {decision.ddl}"
            for statement in decision.downstream:
                try:
                    run(down, statement)
                except pymysql.err.MySQLError as exc:
                    pytest.fail(f"{where}: downstream rejected {statement}: {exc}")
            if coordinator.propagated is None:
                continue
            # (a)
            actual = read_table(down, db, "t")
            expected = settled(materialize(coordinator.propagated, "mariadb"), actual)
            assert actual == expected, f"{where}:\n{render_table(actual)}\n!=\n{render_table(expected)}"
            # (b)
            for _, state in sorted(coordinator.shards.items()):
                if state.block is None and state.accepted is not None:
                    rows_checked += check_rows(up, down, db, state.current, target)
    finally:
        for conn in (up, down):
            run(conn, f"DROP DATABASE `{db}`")
            conn.close()
    assert rows_checked > 0


@pytest.mark.parametrize("default", ["", " DEFAULT 5"])
def test_rename_procedure_keeps_every_value(sandbox, default):
    """Seed 002 "Renaming columns": rows written under the old name by shards not yet
    renamed, and under the new name by renamed ones, all end up in the new column.
    Renamed shards' rows set the old name NULL as the daemon does (Daemon._clear_renamed),
    so with a DEFAULT on the column too."""
    from replicator.plan import Player

    db = f"ren_{next(_ids)}"
    down = sandbox.downstream.connect()
    run(down, f"CREATE DATABASE `{db}`")
    target = f"`{db}`.`t`"
    player = Player(f"{db}.t", "mariadb")
    coordinator = player.coordinator
    shards = [ShardId(f"s{i}", "db", f"t{i}") for i in (1, 2, 3)]
    try:
        create = f"CREATE TABLE t (id INT PRIMARY KEY, a INT NOT NULL{default})"
        for decision in player.start({s: create for s in shards}):
            for statement in decision.downstream:
                run(down, statement)
        next_id = itertools.count(1)
        written: dict[int, int] = {}

        def write_rows():
            # each shard writes a row with the column name its own schema has now
            for shard in shards:
                name = "b" if coordinator.shards[shard].current.column("b") is not None else "a"
                clear = ", `a`" if name == "b" and coordinator.renames else ""
                row_id = next(next_id)
                run(
                    down,
                    f"INSERT INTO {target} (id, `{name}`{clear}) VALUES (%s, %s{', NULL' if clear else ''})",
                    (row_id, row_id * 10),
                )
                written[row_id] = row_id * 10

        write_rows()
        for shard in shards:
            for statement in player.ddl(shard, f"ALTER TABLE {shard.table} RENAME COLUMN a TO b").downstream:
                run(down, statement)
            write_rows()
        actual = read_table(down, db, "t")
        assert actual == settled(
            parse_table(f"CREATE TABLE t (id INT PRIMARY KEY, b INT NOT NULL{default})"), actual
        )
        assert dict(run(down, f"SELECT id, b FROM {target}")) == written
    finally:
        run(down, f"DROP DATABASE `{db}`")
        down.close()


def test_cancelled_rename_gives_the_values_back(sandbox):
    """A shard renames a to b, then drops b, while the other shard keeps a: the other
    shard's rows written before the rename have their a again (issue 12 defect)."""
    from replicator.plan import Player

    db = f"cancel_{next(_ids)}"
    down = sandbox.downstream.connect()
    run(down, f"CREATE DATABASE `{db}`")
    target = f"`{db}`.`t`"
    player = Player(f"{db}.t", "mariadb")
    try:
        create = "CREATE TABLE t (id INT PRIMARY KEY, a INT NOT NULL DEFAULT 5)"
        t1, t2 = ShardId("s1", "db", "t1"), ShardId("s1", "db", "t2")
        for decision in player.start({t1: create, t2: create}):
            for statement in decision.downstream:
                run(down, statement)
        run(down, f"INSERT INTO {target} (id, a) VALUES (1, 10), (2, 20)")
        for ddl in ("ALTER TABLE t1 RENAME COLUMN a TO b", "ALTER TABLE t1 DROP COLUMN b"):
            for statement in player.ddl(t1, ddl).downstream:
                run(down, statement)
        assert dict(run(down, f"SELECT id, a FROM {target}")) == {1: 10, 2: 20}
        assert player.coordinator.renames == []
    finally:
        run(down, f"DROP DATABASE `{db}`")
        down.close()
