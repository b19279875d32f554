"""A batch written as its net effect leaves on a real server what its changes leave written
one by one (`replicator.apply.statements`, `replicator.apply.net`): the statements the daemon
builds, run on two copies of one table, the one change by change, the other the batch at
once. Rows deleted and made again are the upsert of their image where it names every column
(sysbench's transaction), else a DELETE and an INSERT, so what the image does not name takes
its default: both checked here against the server's own defaults."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicator.apply.inspect import read_table
from replicator.apply.statements import statements
from replicator.apply.table_refresh import update_info
from replicator.apply.target import TargetInfo
from replicator.shard_id import ShardId
from replicator.source.messages import Change

SHARD = ShardId("s1", "db", "t")
FULL = ("id", "a", "c")
SHORT = ("id", "a")  # a shard's rows that lack c: c takes its default where they are inserted
CREATE = "CREATE TABLE `{t}` (id INT PRIMARY KEY, a INT NOT NULL, c VARCHAR(8) DEFAULT 'dflt', KEY (a))"
_tables = itertools.count()


@st.composite
def stories(draw) -> tuple[list[int], list[tuple[str, int, tuple[str, ...], int]]]:
    """Rows there first, and valid changes over few keys, many per key: (op, key, columns, n)."""
    there = sorted(draw(st.sets(st.integers(0, 5))))
    present = set(there)
    changes = []
    for n in range(draw(st.integers(1, 25))):
        k = draw(st.integers(0, 5))
        columns = draw(st.sampled_from((FULL, SHORT)))
        if k not in present:
            changes.append(("I", k, columns, n))
            present.add(k)
        elif draw(st.booleans()):
            changes.append(("D", k, FULL, n))
            present.discard(k)
        else:
            changes.append(("U", k, columns, n))
    return there, changes


def _change(target: str, op: str, k: int, columns: tuple[str, ...], n: int) -> Change:
    values = tuple({"id": str(k), "a": str(n), "c": f"'v{n}'"}[c] for c in columns)
    if op == "D":
        return Change((1, 1, n), SHARD, target, "D", FULL, None, (str(k), "0", "'?'"))
    if op == "U":
        return Change((1, 1, n), SHARD, target, "U", columns, values, values)
    return Change((1, 1, n), SHARD, target, "I", columns, values)


def _table(conn, db: str, there: list[int]) -> TargetInfo:
    name = f"t{next(_tables)}"
    with conn.cursor() as cur:
        cur.execute(CREATE.format(t=f"{db}`.`{name}"))
        for k in there:
            cur.execute(f"INSERT INTO `{db}`.`{name}` VALUES ({k}, -1, 'first')")
    conn.commit()
    info = TargetInfo(f"{db}.{name}", f"`{db}`.`{name}`", {}, None, 1)
    update_info(info, read_table(conn, db, name))
    return info


def _rows(conn, info: TargetInfo) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, a, c FROM {info.quoted} ORDER BY id")
        return list(cur.fetchall())


@pytest.fixture
def conn(sandbox, scratch_db):
    c = sandbox.downstream.connect()
    yield scratch_db, c
    c.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stories())
def test_a_batchs_net_effect_leaves_what_its_changes_leave_one_by_one(conn, story):
    db, c = conn
    there, steps = story
    alone, batch = _table(c, db, there), _table(c, db, there)
    assert alone.now.sole_key and len(alone.now.columns) == len(FULL)
    with c.cursor() as cur:
        for step in steps:
            change = _change(alone.name, *step)
            for sql in statements([change], {alone.name: alone}, {alone.name: 1}, False):
                cur.execute(sql)
        c.commit()
        changes = [_change(batch.name, *step) for step in steps]
        for sql in statements(changes, {batch.name: batch}, {batch.name: 1}, False):
            cur.execute(sql)
        c.commit()
    assert _rows(c, batch) == _rows(c, alone), steps


def test_a_row_deleted_and_made_again_naming_every_column_goes_as_one_upsert(conn):
    db, c = conn
    info = _table(c, db, [1])
    changes = [_change(info.name, "U", 1, FULL, 1), _change(info.name, "D", 1, FULL, 2),
               _change(info.name, "I", 1, FULL, 3)]
    sql = statements(changes, {info.name: info}, {info.name: 1}, False)
    assert len(sql) == 1 and "ON DUPLICATE KEY UPDATE" in sql[0], sql
    short = [_change(info.name, "D", 1, FULL, 4), _change(info.name, "I", 1, SHORT, 5)]
    with c.cursor() as cur:
        for s in [*sql, *statements(short, {info.name: info}, {info.name: 1}, False)]:
            cur.execute(s)
    c.commit()
    assert _rows(c, info) == [(1, 5, "dflt")]  # (the short image's c: its default, not 'v3')
