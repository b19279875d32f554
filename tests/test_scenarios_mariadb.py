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

import itertools
from pathlib import Path

import pymysql
import pytest

from lattice.model import Table
from lattice.render import materialize
from replicator.inspect import read_table, with_server_choices
from replicator.plan import load_scenario, replay
from tests.fuzz.rows import RowRefused, check_rows, run

SCENARIOS = sorted((Path(__file__).parent / "scenarios").glob("*.yaml"))
_ids = itertools.count()


def settled(expected: Table, actual: Table) -> Table:
    return with_server_choices(expected, actual)


def check_scenario_rows(up, down, db: str, shard: Table, target: str, downstream: Table) -> int:
    """Rows the shard accepts go into the downstream table unchanged (a scratch table
    stands for the shard, which has no table of its own here); returns how many
    were checked."""
    run(up, f"DROP TABLE IF EXISTS `{db}`.`shard`")
    run(up, shard.to_sql("mariadb", name=f"{db}.shard"))
    try:
        return check_rows(up, down, f"`{db}`.`shard`", shard, target, downstream)
    except RowRefused as exc:
        pytest.fail(str(exc))


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_invariants_on_mariadb(sandbox, path: Path):
    db = f"scn_{next(_ids)}_{path.stem}"[:60]
    up, down = sandbox.upstreams[0].connect(), sandbox.downstream.connect()
    for conn in (up, down):
        run(conn, f"CREATE DATABASE `{db}`")
        run(conn, "SET SESSION sql_mode = 'STRICT_ALL_TABLES'")
        run(conn, "SET SESSION time_zone = '+00:00'")  # the TIMESTAMP samples are in UTC
    scenario = load_scenario(path, flavor="mariadb")
    scenario.target = f"{db}.t"
    target = f"`{db}`.`t`"
    rows_checked = 0
    try:
        initial = len(scenario.shards)
        for n, (step, decision, coordinator) in enumerate(replay(scenario), start=1):
            where = f"{path.name} step {step.index if step else 'initial'}: {decision.ddl}"
            for statement in decision.downstream:
                try:
                    run(down, statement)
                except pymysql.err.MySQLError as exc:
                    pytest.fail(f"{where}: downstream rejected {statement}: {exc}")
            # the initial shards are all in the coordinator before their first decision
            # comes out: check once their statements have all run
            if coordinator.propagated is None or n < initial:
                continue
            # (a)
            actual = read_table(down, db, "t")
            expected = settled(materialize(coordinator.propagated, "mariadb"), actual)
            assert actual == expected, f"{where}:\n{actual.to_sql()}\n!=\n{expected.to_sql()}"
            # (b)
            for _, state in sorted(coordinator.shards.items()):
                if state.block is None and state.accepted is not None:
                    rows_checked += check_scenario_rows(up, down, db, state.current, target, actual)
    finally:
        for conn in (up, down):
            run(conn, f"DROP DATABASE `{db}`")
            conn.close()
    assert rows_checked > 0


def test_rename_procedure_keeps_every_value(sandbox):
    """Seed 002 "Renaming columns": rows written under the old name by shards not yet
    renamed, and under the new name by renamed ones, all end up in the new column."""
    from replicator.coordinator import Coordinator

    db = f"ren_{next(_ids)}"
    down = sandbox.downstream.connect()
    run(down, f"CREATE DATABASE `{db}`")
    target = f"`{db}`.`t`"
    coordinator = Coordinator(f"{db}.t", "mariadb")
    shards = ["s1.db.t1", "s2.db.t2", "s3.db.t3"]
    try:
        for shard in shards:
            for statement in coordinator.add_shard(
                shard, "CREATE TABLE t (id INT PRIMARY KEY, a INT NOT NULL)"
            ).downstream:
                run(down, statement)
        next_id = itertools.count(1)
        written: dict[int, int] = {}

        def write_rows():
            # each shard writes a row with the column name its own schema has now
            for shard in shards:
                name = "b" if coordinator.shards[shard].current.column("b") is not None else "a"
                row_id = next(next_id)
                run(down, f"INSERT INTO {target} (id, `{name}`) VALUES (%s, %s)", (row_id, row_id * 10))
                written[row_id] = row_id * 10

        write_rows()
        for shard in shards:
            for statement in coordinator.handle_ddl(shard, "ALTER TABLE t RENAME COLUMN a TO b").downstream:
                run(down, statement)
            write_rows()
        actual = read_table(down, db, "t")
        assert actual == settled(
            Table.from_sql("CREATE TABLE t (id INT PRIMARY KEY, b INT NOT NULL)"), actual
        )
        assert dict(run(down, f"SELECT id, b FROM {target}")) == written
    finally:
        run(down, f"DROP DATABASE `{db}`")
        down.close()
