"""The park table (replicator/state/park.py) on a real downstream: a paused shard's
messages written in batches come back in their order, with their sizes; a batch of
another format version is refused, not misread."""

from __future__ import annotations

import uuid

import pytest

from lattice import parse_table
from replicator.daemon.parking import rows_in
from replicator.shard_id import ShardId
from replicator.source.messages import Change, DDLEvent
from replicator.source.schema_change import ChangeKind, SchemaChange
from replicator.state.db import MetaDb
from replicator.state.park import PARK_SQL, ParkError, ParkSize, ParkStore

pytestmark = pytest.mark.mariadb

SHARD, OTHER = ShardId("s1", "db", "t1"), ShardId("s1", "db", "t2")
COLS = ("id", "a")


def change(n: int, shard: ShardId = SHARD) -> Change:
    return Change((1, 400 + n, n), shard, "shop.t", "I", COLS, (str(n), f"'v{n}'"))


@pytest.fixture
def park(sandbox):
    schema = f"park_{uuid.uuid4().hex[:8]}"
    down = sandbox.downstream
    down.execute([f"CREATE DATABASE `{schema}`", PARK_SQL.format(m=f"`{schema}`")])
    yield ParkStore(MetaDb(down.connect, schema, "task")), down, schema
    down.execute(f"DROP DATABASE `{schema}`")


def test_parked_batches_come_back_in_their_order(park):
    store, down, _ = park
    before = parse_table("CREATE TABLE t1 (id INT PRIMARY KEY, a VARCHAR(10))")
    after = parse_table("CREATE TABLE t1 (id INT PRIMARY KEY, a VARCHAR(10), b INT)")
    ddl = DDLEvent(
        "s1", (1, 900, 0), "b.000001:900", "b.000001:990", "shop.t",
        SchemaChange(SHARD, ChangeKind.ALTER, "ALTER TABLE t1 ADD b INT", before=before, after=after),
        gtid="0-101-9", gtid_before="0-101-8",
    )
    first = [change(1), change(2), ddl]
    second = [change(3)]
    sql1, size1 = store.sql_batch(SHARD, 1, first, rows_in(first))
    sql2, size2 = store.sql_batch(SHARD, 2, second, rows_in(second))
    sql3, _ = store.sql_batch(OTHER, 1, [change(7, OTHER)], 1)
    down.execute([sql1, sql2, sql3])
    assert (size1.rows, size2.rows) == (2, 1) and size1.bytes > 0
    conn = down.connect()
    try:
        with conn.cursor() as cur:
            got = [item for batch in store.batches(cur, SHARD) for item in batch]
            assert got == [*first, *second]
            assert got[2].change.after == after
    finally:
        conn.close()
    sizes = store.load_sizes()
    assert sizes[SHARD] == (size1 + size2, 3, (1, 403, 3))
    assert sizes[OTHER][0] == ParkSize(1, sizes[OTHER][0].bytes, 1)
    down.execute(store.sql_drop(SHARD))
    assert down.execute(f"SELECT DISTINCT shard FROM {store.q}.park") == [(str(OTHER),)]


def test_a_batch_of_another_format_is_refused(park):
    store, down, _ = park
    sql, _ = store.sql_batch(SHARD, 1, [change(1)], 1)
    down.execute([sql, f"UPDATE {store.q}.park SET format = 99"])
    conn = down.connect()
    try:
        with conn.cursor() as cur, pytest.raises(ParkError, match="format 99, this one reads 1"):
            list(store.batches(cur, SHARD))
    finally:
        conn.close()
