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
from hypothesis import strategies as st

from lattice import DownstreamStep, JoinConflict, diff, join_all, parse_table, render_table
from replicator.apply.inspect import read_table, with_server_choices
from replicator.schema.plan import load_scenario, replay
from tests.strategies import is_valid, related_tables

SCENARIOS = sorted((Path(__file__).parent.parent / "scenarios").glob("*.yaml"))
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



@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    kind=st.sampled_from(["varchar(21)", "char(20)", "tinytext", "varbinary(20)"]),
    values=st.lists(st.one_of(st.integers(0, 2**64 - 1), st.integers(2**63 - 2, 2**64 - 1)), min_size=1,
                    max_size=12, unique=True),
)
def test_a_string_column_made_bigint_unsigned_downstream_keeps_every_value(database, kind, values):
    """L47: the server's own MODIFY of a string to BIGINT UNSIGNED reads each value as a
    signed 64-bit integer (2**64 - 1 comes out as 2**63 - 1); the diff's steps keep them."""
    db, conn = database
    before = parse_table(f"CREATE TABLE t (id INT PRIMARY KEY, n {kind} NOT NULL, KEY k (n))")
    after = parse_table("CREATE TABLE t (id INT PRIMARY KEY, n bigint unsigned NOT NULL, KEY k (n))")
    with conn.cursor() as cur:
        cur.execute(f"USE `{db}`")
        cur.execute("DROP TABLE IF EXISTS t")
        cur.execute(render_table(before))
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, str(v)) for i, v in enumerate(values)])
    run_steps(conn, db, diff(before, after, flavor="mariadb", target=f"{db}.t"), f"{kind} to bigint unsigned")
    with conn.cursor() as cur:
        cur.execute("SELECT n FROM t ORDER BY id")
        assert [row[0] for row in cur.fetchall()] == values


def test_the_servers_own_modify_of_a_string_to_bigint_unsigned_clips_where_the_steps_do_not(database):
    # (the rule the steps follow: if MariaDB stops clipping, the DECIMAL step is no longer needed)
    db, conn = database
    with conn.cursor() as cur:
        cur.execute(f"USE `{db}`")
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, n varchar(21) NOT NULL)")
        cur.execute("INSERT INTO t VALUES (1, '18446744073709551615')")
        with pytest.raises(pymysql.err.OperationalError, match=r"1292|Truncated incorrect INTEGER"):
            cur.execute("ALTER TABLE t MODIFY n bigint unsigned NOT NULL")  # (strict mode)
        cur.execute("SET STATEMENT sql_mode = '' FOR ALTER TABLE t MODIFY n bigint unsigned NOT NULL")
        cur.execute("SELECT n FROM t")
        assert cur.fetchone()[0] == 2**63 - 1
