"""The watermark rule (`replicator.apply.watermark`): each holder reports exactly the smallest
id it holds, whatever order changes reach it in, and the watermark is the least of
them and the read position."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lattice import Flavor
from replicator.apply.ddl_job import DDLJob
from replicator.apply.gate import DDLGate
from replicator.apply.watermark import watermark
from replicator.shard_id import ShardId
from replicator.source.messages import Change, DDLEvent
from replicator.source.schema_change import ChangeKind, SchemaChange
from replicator.source.source_state import SourceState
from tests.unit.test_applier import COLS, T, applier, info

SHARDS = tuple(map(ShardId.parse, ("s1.db.a", "s1.db.b", "s2.db.a")))
A = SHARDS[0]
ids = st.tuples(st.integers(1, 3), st.integers(4, 5000), st.integers(0, 5))


def change(shard: ShardId, cid, key: int) -> Change:
    return Change(cid, shard, T, "I", COLS, (str(key), "1", "'x'"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(SHARDS), ids), min_size=1, max_size=60), st.integers(0, 3))
def test_the_applier_holds_the_smallest_id_not_committed(items, flushes):
    """Changes that waited behind a DDL reach the buffers after newer ones of other
    shards: the held id is the smallest, not the first in the buffer."""
    a = applier(info(), partitions=3, batch_size=10_000)
    for n, (shard, cid) in enumerate(items):
        a.submit(change(shard, cid, n))
        if flushes and n % (len(items) // flushes + 1) == 0:
            a.flush()  # some in batches sent to partitions, some still buffered
    for source in ("s1", "s2", "s3"):
        held = [cid for shard, cid in items if shard.source == source]
        assert a.oldest(source) == (min(held) if held else None)


def ddl(shard: ShardId, cid) -> DDLJob:
    return DDLJob(shard, DDLEvent(shard.source, cid, "f.1:4", "f.1:5", T, SchemaChange(shard, ChangeKind.ALTER, "ALTER")))


@given(st.dictionaries(st.sampled_from(SHARDS), st.lists(st.tuples(ids, st.booleans()), min_size=1, max_size=8)))
def test_the_gate_holds_a_running_ddl_and_what_waits_behind_it(stories):
    gate = DDLGate()
    for shard, story in stories.items():
        story = sorted(story)  # a shard's items come in binlog order
        gate.start(ddl(shard, story[0][0]))
        for cid, is_ddl in story[1:]:
            gate.hold(shard, ddl(shard, cid) if is_ddl else change(shard, cid, 0))
    for source in ("s1", "s2"):
        mine = [cid for shard, story in stories.items() if shard.source == source for cid, _ in story]
        assert gate.oldest(source) == (min(mine) if mine else None)


def test_finishing_a_ddl_hands_over_the_changes_up_to_the_next_ddl():
    gate = DDLGate()
    gate.start(ddl(A, (1, 10, 0)))
    gate.hold(A, change(A, (1, 20, 1), 1))
    gate.hold(A, ddl(A, (1, 30, 0)))
    gate.hold(A, change(A, (1, 40, 1), 2))
    changes, next_job = gate.finish(A)
    assert [c.id for c in changes] == [(1, 20, 1)] and next_job.change.id == (1, 30, 0)
    assert gate.oldest("s1") == (1, 40, 1)  # the next DDL is not running until started
    gate.start(next_job)
    assert gate.oldest("s1") == (1, 30, 0)
    gate.drop_changes(A)  # paused: its changes will be read again
    assert gate.finish(A) == ([], None) and gate.oldest("s1") is None


def test_a_ddl_read_again_while_it_waits_is_not_taken_twice():
    """Another shard's resume has the source read from before a shard's DDLs that are
    at the executor or waiting behind it: read again, each is the same DDL, to be decided
    once (live stories L41: the second decision set the shard's rows' new column to its
    filler)."""
    from replicator.daemon.ddl_path import DDLPath
    from replicator.shard_flow import ShardFlows

    class Executor(list):  # what the group's executor was handed
        submit = list.append

    gate, executor = DDLGate(), Executor()
    path = DDLPath(ShardFlows(), gate, {T: executor}, None, None, None, None, None)
    state = SourceState("s1", Flavor.MARIADB)
    first, second = ddl(A, (1, 10, 0)).change, ddl(A, (1, 30, 0)).change
    for event in (first, second, first, second):  # the last two read again
        path.schema_change(state, event)
    assert [job.change for job in executor] == [first]
    assert gate.running[A].change is first and [job.change for job in gate.waiting[A]] == [second]


def test_the_watermark_is_the_least_of_the_read_position_and_the_holders():
    holders = [lambda s: None, lambda s: (1, 50, 2) if s == "s1" else None, lambda s: (1, 70, 0)]
    assert watermark("s1", (1, 90, 0), holders) == (1, 50, 2)
    assert watermark("s2", (1, 60, 0), holders) == (1, 60, 0)
    assert watermark("s3", (1, 90, 0), []) == (1, 90, 0)
