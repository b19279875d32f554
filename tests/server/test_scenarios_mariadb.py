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

from lattice import Table, materialize, parse_table, render_table
from replicator.apply.inspect import read_table, with_server_choices
from replicator.schema.plan import load_scenario, replay
from replicator.shard_id import ShardId
from tests.fuzz import model
from tests.fuzz.rows import RowRefused, check_rows, run

SCENARIOS = sorted((Path(__file__).parent.parent / "scenarios").glob("*.yaml"))
_ids = itertools.count()


def settled(expected: Table, actual: Table) -> Table:
    return with_server_choices(expected, actual)


def check_scenario_rows(up, down, db: str, shard: Table, target: str, downstream: Table) -> int:
    """Rows the shard accepts go into the downstream table unchanged (a scratch table
    stands for the shard, which has no table of its own here); returns how many
    were checked."""
    run(up, f"DROP TABLE IF EXISTS `{db}`.`shard`")
    run(up, render_table(shard, "mariadb", name=f"{db}.shard"))
    try:
        # (the rows module reads tables as the server describes them, as the fuzzer's oracle does)
        down_db, down_table = (n.strip("`") for n in target.split("."))
        seen_shard, seen_down = model.read(up, db, "shard"), model.read(down, down_db, down_table)
        return check_rows(up, down, f"`{db}`.`shard`", seen_shard, target, seen_down)
    except RowRefused as exc:
        pytest.fail(str(exc))


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_invariants_on_mariadb(sandbox, path: Path):
    db = f"scn_{next(_ids)}_{path.stem}"[:60]
    up, down = sandbox.upstreams[0].connect(), sandbox.downstream.connect()
    scenario = load_scenario(path, flavor="mariadb")
    charset = ""
    if scenario.schema_charset is not None:  # what a CREATE TABLE naming none takes
        name, collation = scenario.schema_charset
        charset = f" CHARACTER SET {name}" + (f" COLLATE {collation}" if collation else "")
    for conn in (up, down):
        run(conn, f"CREATE DATABASE `{db}`{charset}")
        run(conn, "SET SESSION sql_mode = 'STRICT_ALL_TABLES'")
        run(conn, "SET SESSION time_zone = '+00:00'")  # the TIMESTAMP samples are in UTC
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
            assert actual == expected, f"{where}:\n{render_table(actual)}\n!=\n{render_table(expected)}"
            # (b)
            for _, state in sorted(coordinator.shards.items()):
                if state.block is None and state.accepted is not None:
                    rows_checked += check_scenario_rows(up, down, db, state.current, target, actual)
    finally:
        for conn in (up, down):
            run(conn, f"DROP DATABASE `{db}`")
            conn.close()
    assert rows_checked > 0


@pytest.mark.parametrize("default", ["", " DEFAULT 5"])
def test_rename_procedure_keeps_every_value(sandbox, default):
    """docs/design.md "Renaming columns": rows written under the old name by shards not yet
    renamed, and under the new name by renamed ones, all end up in the new column.
    Renamed shards' rows set the old name NULL as the daemon does (Daemon._clear_renamed),
    so with a DEFAULT on the column too."""
    from replicator.schema.plan import Player

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
    from replicator.schema.plan import Player

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


def test_a_renamed_away_old_name_is_added_back_null_in_a_grouped_alter(sandbox):
    """t1 renames c1 to r8 while t2 keeps c1, and the downstream statements that start
    it run as one ALTER (the AUTO_INCREMENT id leads no key meanwhile): the rows' values
    move to r8 and the c1 added back is NULL in every row, not c1's default (live
    stories L40), so a row's c1 is read in r8 till the rename ends."""
    path = Path(__file__).parent.parent / "scenarios" / "renamed_away_old_name_added_back_null_in_a_grouped_alter.yaml"
    scenario = load_scenario(path, flavor="mariadb")
    db = f"grouped_{next(_ids)}"
    scenario.target = f"{db}.t"
    target = f"`{db}`.`t`"
    down = sandbox.downstream.connect()
    run(down, f"CREATE DATABASE `{db}`")
    try:
        for step, decision, _ in replay(scenario):
            if step is not None and step.index == 0:
                run(down, f"INSERT INTO {target} (_source, _schema, _table, id, c1) VALUES "
                          "('s1', 'db', 't2', 1, '2004-05-23'), ('s1', 'db', 't2', 2, NULL)")
            for statement in decision.downstream:
                run(down, statement)
        rows = run(down, f"SELECT id, c1, r8 FROM {target} ORDER BY id")
        assert [tuple(map(str, r)) for r in rows] == [("1", "None", "2004-05-23"), ("2", "None", "None")]
    finally:
        run(down, f"DROP DATABASE `{db}`")
        down.close()
