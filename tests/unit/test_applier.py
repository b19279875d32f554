"""The applier without a server: how it spreads changes over partitions, what it takes for
applied, and a partition that dies. On the sandbox's downstream server:
tests/server/test_applier_against_mariadb.py; the statements it sends:
tests/unit/test_statements.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replicator.apply.applier import Applier, ApplierFailed
from replicator.apply.meta import Meta
from replicator.apply.target import TargetInfo
from replicator.shard_id import ShardId
from replicator.source.messages import Change

T = "db.t"
SHARD = ShardId("s1", "db", "t")
COLS = ("id", "a", "b")


def info(sole_key: bool = True, key: tuple[str, ...] | None = ("id",), major: int = 1) -> TargetInfo:
    columns = {c: c for c in COLS}
    return TargetInfo(T, "`db`.`t`", columns, key, major, sole_key=sole_key)


def applier(target: TargetInfo, safe: bool = False, partitions: int = 4, **kwargs) -> Applier:
    return Applier(
        Meta(lambda: None, "m", "task"),
        {T: target},
        {},
        partitions,
        kwargs.pop("batch_size", 100),
        lambda changes: safe,
        kwargs.pop("checkpoints", {}),
        lambda change, error: None,
    )


def ins(i: int, a: str = "1", b: str = "'x'", n: int = 0, columns: tuple[str, ...] = COLS) -> Change:
    values = {"id": str(i), "a": a, "b": b, "old": "'o'"}
    return Change((1, 4, n), SHARD, T, "I", columns, tuple(values[c] for c in columns))


def upd(i: int, a: str, new_id: int | None = None, n: int = 0) -> Change:
    new = str(i if new_id is None else new_id)
    return Change((1, 4, n), SHARD, T, "U", COLS, (new, a, "'x'"), (str(i), "0", "'x'"))


def dele(i: int, n: int = 0) -> Change:
    return Change((1, 4, n), SHARD, T, "D", COLS, None, (str(i), "1", "'x'"))


def test_an_update_that_moves_its_key_is_a_delete_and_an_insert():
    a = applier(info(), partitions=1)
    a.submit(upd(1, "5", new_id=9))
    ops = [(c.op, c.before[0] if c.before else c.values[0]) for c in a.buffers.by_part[0]]
    assert ops == [("D", "1"), ("I", "9")]


def test_an_update_that_keeps_its_key_stays_one_change():
    a = applier(info(), partitions=1)
    a.submit(upd(1, "5"))
    assert [c.op for c in a.buffers.by_part[0]] == ["U"]


def test_changes_to_one_key_go_to_one_partition_and_keys_spread():
    a = applier(info(), partitions=4)
    assert {a.partitions_of(c)[0] for c in (ins(7), upd(7, "2"), dele(7))} == {a.partitions_of(ins(7))[0]}
    assert len({a.partitions_of(ins(i))[0] for i in range(100)}) == 4


@given(
    st.integers(0, 50),
    st.integers(0, 50),
    st.booleans(),
    st.sampled_from([("id",), ("a", "id"), None]),
    st.sampled_from([1, 3, 8]),
)
def test_an_update_goes_where_its_rows_delete_and_insert_go(old, new, renamed, key, partitions):
    """Whatever the key and the partitions: an update keeping its key goes to its row's one
    partition; one moving it to the before row's and the after row's (a delete and an insert)."""
    a = applier(info(key=key), partitions=partitions)
    before_columns = ("ID", "a", "b") if renamed else None  # (its row's columns named otherwise before)
    update = Change((1, 4, 0), SHARD, T, "U", COLS, (str(new), "5", "'x'"), (str(old), "5", "'x'"), before_columns)
    delete = Change((1, 4, 0), SHARD, T, "D", before_columns or COLS, None, update.before)
    insert = Change((1, 4, 0), SHARD, T, "I", COLS, update.values)
    moves = key is not None and old != new
    want = a.partitions_of(delete) + (a.partitions_of(insert) if moves else [])
    assert a.partitions_of(update) == want
    assert len(a.partitioner.halves(update)) == (2 if moves else 1)


def test_the_timer_sends_a_partial_batch_only_to_a_partition_no_batch_waits_for():
    """A partial batch behind a waiting one is left to grow (its partition is busy: it would
    only wait in the queue); one whose partition's queue is empty goes at once."""
    a = applier(info(), partitions=1)  # (not started: what is sent stays in the queue)
    queue = a.parts[0].queue
    a.submit(ins(1))
    a.flush_idle()
    assert queue.qsize() == 1 and a.buffers.by_part[0] == []
    a.submit(ins(2))
    a.flush_idle()
    assert queue.qsize() == 1 and [c.values[0] for c in a.buffers.by_part[0]] == ["2"]
    queue.get_nowait()
    a.flush_idle()
    assert [c.values[0] for c in queue.get_nowait().changes] == ["2"]
    a.submit(ins(3))
    a.flush()  # (every buffer, whatever waits: a stop, `wait_idle`)
    assert queue.qsize() == 1


def test_already_applied_compares_with_the_checkpoint_of_every_partition_a_change_goes_to():
    probe = applier(info(), partitions=4)
    moved = upd(1, "5", new_id=2, n=5)
    parts = probe.partitions_of(moved)
    assert len(parts) == 2
    only_first = {(SHARD, parts[0]): (1, 4, 5)}
    both = {(SHARD, p): (1, 4, 5) for p in parts}
    assert not applier(info(), partitions=4, checkpoints=only_first).already_applied(moved)
    assert applier(info(), partitions=4, checkpoints=both).already_applied(moved)
    assert not applier(info(), partitions=4, checkpoints=both).already_applied(moved._replace(id=(1, 4, 6)))


def test_a_partition_that_dies_is_reported_instead_of_hanging_the_daemon():
    """An unexpected error in a partition thread (a bug, not a server error) must
    surface, not leave the daemon blocked on the partition's full queue."""

    def broken(conn, batch):
        raise ZeroDivisionError("a bug")

    a = Applier(Meta(lambda: None, "m", "task"), {T: info()}, {}, 1, 1, lambda: False, {}, print)
    a.parts[0].apply_with_retries = broken
    a.start()
    with pytest.raises(ApplierFailed, match=r"(?s)partition 0: .*ZeroDivisionError: a bug"):
        for n in range(20):  # more than the queue holds
            a.submit(ins(n))
        a.wait_idle()
    a.stop()


@pytest.mark.parametrize(
    ("sources", "partitions", "want"),
    [
        # (a hash of the ids put s1 and s3 in one partition: it carried half the rows)
        (("s1", "s2", "s3", "s4"), 4, {"s1": 0, "s2": 1, "s3": 2, "s4": 3}),
        (("s4", "s3", "s2", "s1"), 4, {"s1": 0, "s2": 1, "s3": 2, "s4": 3}),  # (by id, not by config order)
        (("a", "b", "c"), 2, {"a": 0, "b": 1, "c": 0}),
        (("only",), 4, {"only": 0}),
    ],
)
def test_sources_spread_over_partitions_round_robin_by_id(sources, partitions, want):
    from replicator.apply.partitioner import Partitioner
    from replicator.state.task_state import Spread

    partitioner = Partitioner({T: info()}, partitions, Spread.of(True, sources))
    assert {s: partitioner.source_part(ShardId(s, "db", "t")) for s in sources} == want


def test_a_source_the_spread_does_not_list_and_a_spread_saved_without_the_list_go_by_hash():
    """A spread saved before the list was (its checkpoints were written under the hash of
    each id), and a source added since an unclean stop (the last run's spread is kept)."""
    import zlib

    from replicator.apply.partitioner import Partitioner
    from replicator.state.task_state import Spread

    hashed = {s: zlib.crc32(s.encode()) % 4 for s in ("s1", "s2", "s3", "s9")}
    legacy = Partitioner({T: info()}, 4, Spread(True))
    assert {s: legacy.source_part(ShardId(s, "db", "t")) for s in hashed} == hashed
    listed = Partitioner({T: info()}, 4, Spread.of(True, ["s1", "s2", "s3"]))
    assert listed.source_part(ShardId("s9", "db", "t")) == hashed["s9"]
