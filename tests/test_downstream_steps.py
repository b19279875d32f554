"""diff's typed steps on a real MariaDB: each downstream statement comes with the
table it leaves (`DownstreamStep.after`), which the DDL journal keeps for crash
recovery. Run one at a time on a real downstream table, after EACH statement the
server's table, read back from information_schema, is that table: for every step of
every scenario in tests/scenarios, and for diffs between generated joined tables."""

from __future__ import annotations

import itertools
from pathlib import Path

import pymysql
import pytest
from hypothesis import HealthCheck, assume, given, note, settings

from lattice import DownstreamStep, JoinConflict, diff, join_all, render_table
from replicator.apply.inspect import read_table, with_server_choices
from replicator.schema.plan import load_scenario, replay
from tests.strategies import is_valid, related_tables

SCENARIOS = sorted((Path(__file__).parent / "scenarios").glob("*.yaml"))
_ids = itertools.count()


def run_steps(conn, db: str, steps: tuple[DownstreamStep, ...] | list[DownstreamStep], where: str) -> int:
    """Run the steps one by one; after each the server holds the step's table."""
    for i, step in enumerate(steps):
        with conn.cursor() as cur:
            try:
                cur.execute(step.sql)
            except pymysql.err.MySQLError as exc:
                pytest.fail(f"{where}: downstream rejected {step.sql}: {exc}")
        assert step.after is not None, f"{where}: {step.sql} leaves no table"
        actual = read_table(conn, db, "t")
        expected = with_server_choices(step.after, actual)
        assert actual == expected, (
            f"{where}, statement {i + 1} of {len(steps)}: {step.sql}\n"
            f"server:\n{render_table(actual)}\n!= step.after:\n{render_table(expected)}"
        )
    return len(steps)


@pytest.fixture
def database(sandbox):
    db = f"steps_{next(_ids)}"
    conn = sandbox.downstream.connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES'")
    try:
        yield db, conn
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE `{db}`")
        conn.close()


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_each_scenario_statement_leaves_its_table(database, path: Path):
    db, conn = database
    scenario = load_scenario(path, flavor="mariadb")
    scenario.target = f"{db}.t"
    ran = 0
    for step, decision, _ in replay(scenario):
        where = f"{path.name} step {step.index if step else 'initial'}: {decision.ddl}"
        ran += run_steps(conn, db, decision.steps, where)
    assert ran > 0


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(tables=related_tables(3, spatial=False))
def test_each_generated_statement_leaves_its_table(database, tables):
    """Between the join of one shard and the join of all three, both ways."""
    db, conn = database
    assume(all(is_valid(t) for t in tables))
    old, new = join_all(tables[:1], "mariadb"), join_all(tables, "mariadb")
    assume(not isinstance(old, JoinConflict) and not isinstance(new, JoinConflict))
    for a, b in ((old, new), (new, old)):
        with conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS `{db}`.`t`")
            cur.execute(render_table(a, "mariadb", name=f"{db}.t"))
        steps = diff(a, b, flavor="mariadb", target=f"{db}.t")
        note("\n".join(s.sql for s in steps))
        run_steps(conn, db, steps, "generated")

