"""The applier on the sandbox's downstream server: random runs of changes spread over
partitions end as the same table a one-at-a-time model gives; a paused shard's changes, and
a key move across partitions after a crash, are applied once (without a server:
tests/unit/test_applier.py)."""

from __future__ import annotations

import contextlib
import random
import time

import pytest

from replicator.apply.applier import Applier
from replicator.apply.meta import Meta
from replicator.apply.target import TargetInfo
from replicator.servers import connect_downstream
from replicator.source.messages import Change
from replicator.transient import SourcesLost
from tests.unit.test_applier import COLS, SHARD, T, applier, dele, info, ins, upd


def random_changes(rng: random.Random, count: int) -> tuple[list[Change], dict[int, tuple[int, str]]]:
    """Changes as a binlog would have them, and the table they leave (the model)."""
    rows: dict[int, tuple[int, str]] = {}
    changes = []
    for n in range(count):
        cid = (1, 4 + n // 7, n % 7)  # several changes per transaction
        roll = rng.random()
        if not rows or (roll < 0.4 and len(rows) < 50):
            key = rng.randrange(60)
            while key in rows:
                key = rng.randrange(60)
            rows[key] = (rng.randrange(100), f"v{n}")
            changes.append(
                Change(cid, SHARD, T, "I", COLS, (str(key), str(rows[key][0]), f"'{rows[key][1]}'"))
            )
            continue
        key = rng.choice(sorted(rows))
        before = (str(key), str(rows[key][0]), f"'{rows[key][1]}'")
        if roll < 0.55:
            del rows[key]
            changes.append(Change(cid, SHARD, T, "D", COLS, None, before))
            continue
        new = key
        if roll < 0.65:  # the update moves the key
            new = rng.randrange(60)
            while new in rows and new != key:
                new = rng.randrange(60)
        value = rows.pop(key)
        rows[new] = (value[0] + 1, f"u{n}")
        after = (str(new), str(rows[new][0]), f"'{rows[new][1]}'")
        changes.append(Change(cid, SHARD, T, "U", COLS, after, before))
    return changes, rows


def fail_on_error(change: Change, error: str) -> None:
    pytest.fail(f"the downstream refused {change}: {error}")


@contextlib.contextmanager
def live_table(sandbox, scratch_db):
    """A real table `t` (id, a, b) in the scratch database and a meta schema beside it:
    what an applier over them takes (meta, targets, connection)."""
    down = sandbox.downstream
    kwargs = {"host": down.host, "port": down.port, "user": down.user, "password": down.password}
    down.execute(f"CREATE TABLE `{scratch_db}`.t (id INT PRIMARY KEY, a INT NOT NULL, b VARCHAR(20) NOT NULL)")
    meta = Meta(lambda: connect_downstream(kwargs), f"{scratch_db}_meta", "task")
    meta.ensure()
    target = TargetInfo(T, f"`{scratch_db}`.`t`", {c: c for c in COLS}, ("id",), 1, sole_key=True)
    try:
        yield meta, {T: target}, kwargs
    finally:
        meta.close()
        down.execute(f"DROP DATABASE IF EXISTS `{scratch_db}_meta`")


@contextlib.contextmanager
def live_applier(sandbox, scratch_db, partitions: int, batch_size: int, safe: bool = False):
    """A started applier over a real table `t` (id, a, b) in the scratch database."""
    with live_table(sandbox, scratch_db) as (meta, targets, kwargs):
        a = Applier(meta, targets, kwargs, partitions, batch_size, lambda changes: safe, {}, fail_on_error)
        a.start()
        try:
            yield a
        finally:
            a.stop()


def table_rows(sandbox, scratch_db) -> dict[int, tuple[int, str]]:
    return {int(i): (int(x), y) for i, x, y in sandbox.downstream.execute(f"SELECT id, a, b FROM `{scratch_db}`.t")}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("safe", [False, True], ids=["normal", "safe"])
def test_random_changes_over_partitions_end_as_the_model(sandbox, scratch_db, seed, safe):
    changes, model = random_changes(random.Random(seed), 400)
    with live_applier(sandbox, scratch_db, 4, 7, safe) as a:
        for change in changes:
            a.submit(change)
        a.wait_idle()
    assert table_rows(sandbox, scratch_db) == model
    assert a.tally.applied == sum(1 + (c.op == "U" and c.values[0] != c.before[0]) for c in changes)


@pytest.mark.parametrize("seed", range(6))
def test_safe_mode_applies_changes_applied_before_again_to_the_same_table(sandbox, scratch_db, seed):
    """Safe mode's promise, after a crash: the changes from any point on, some of them
    committed before, applied again (no checkpoint says which) end as the model. Updates by
    the table's only key go as one upsert of their rows as they are after (a row deleted
    later, or never there, is put back till its own later change)."""
    rng = random.Random(seed)
    changes, model = random_changes(rng, 400)
    with live_table(sandbox, scratch_db) as (meta, targets, kwargs):
        for safe, run in ((False, changes), (True, changes[rng.randrange(len(changes)):])):
            a = Applier(meta, targets, kwargs, 4, 7, lambda _, safe=safe: safe, {}, fail_on_error)
            a.start()
            try:
                for change in run:
                    a.submit(change)
                a.wait_idle()
            finally:
                a.stop()
    assert table_rows(sandbox, scratch_db) == model


def test_a_paused_shard_keeps_what_came_before_its_pause_and_rereads_the_rest(sandbox, scratch_db):
    """A shard paused at a change (say the downstream refused it) holds the watermark
    there: its changes before it still commit, those from it on are discarded (read
    again at resume), and after a rewind the ones already committed are not applied twice."""
    ids = f"SELECT id FROM `{scratch_db}`.t"
    changes = [Change((1, 10 * i, 1), SHARD, T, "I", COLS, (str(i), str(i), "'x'")) for i in range(1, 9)]
    with live_applier(sandbox, scratch_db, 2, 100) as a:
        a.drop_from(SHARD, (1, 50, 0))
        for change in changes:
            a.submit(change)
        a.wait_idle()
        assert sorted(r[0] for r in sandbox.downstream.execute(ids)) == [1, 2, 3, 4]
        a.take_again(SHARD)  # resumed: read again from the pause
        again = [c for c in changes if not a.already_applied(c)]
        assert [c.values[0] for c in again] == ["5", "6", "7", "8"]
        for change in again:
            a.submit(change)
        a.wait_idle()
    assert sorted(r[0] for r in sandbox.downstream.execute(ids)) == list(range(1, 9))


def split_key_move(partitions: int) -> tuple[int, int]:
    """An old and a new key whose rows go to different partitions."""
    probe = applier(info(), partitions=partitions)
    return next((old, new) for old in range(1, 50) for new in range(100, 150)
                if len(probe.partitions_of(upd(old, "5", new_id=new))) == 2)


@pytest.mark.parametrize("committed", ["insert", "delete"])
def test_after_a_crash_a_key_move_is_applied_again_only_where_its_partition_had_not_committed_it(
    sandbox, scratch_db, committed
):
    """A key move is a delete in one partition and an insert in another, each committed
    with its own checkpoint. Killed when one of them had committed its half and the
    key's later change, the other nothing: read again, only the missing half may be
    applied. The committed half again would undo its partition's later change, which
    is skipped as applied: the new key deleted after the move comes back (extra rows
    in the chaos run and at crash point released_batch_committed), or a row inserted
    with the old key after the move is deleted again."""
    old, new = split_key_move(2)
    move = upd(old, "5", new_id=new, n=1)
    later = dele(new, n=2) if committed == "insert" else ins(old, a="7", n=2)
    changes = [ins(old, n=0), move, later]
    model = {} if committed == "insert" else {old: (7, "x"), new: (5, "x")}
    with live_table(sandbox, scratch_db) as (meta, targets, kwargs):
        crashed = Applier(meta, targets, kwargs, 2, 100, lambda changes: False, {}, fail_on_error)
        for change in changes:
            crashed.submit(change)
        crashed.flush()
        # the one partition commits its batch (both of its changes to the key); the
        # process dies before the other partition's batch commits
        part = crashed.partitions_of(move)[1 if committed == "insert" else 0]
        with contextlib.closing(connect_downstream(kwargs)) as conn:
            crashed.commit.apply(conn, crashed.parts[part].queue.get_nowait())
        # the next start: the checkpoints as saved, safe mode, everything read again
        again = Applier(meta, targets, kwargs, 2, 100, lambda changes: True, meta.checkpoints.load(), fail_on_error)
        again.start()
        try:
            for change in changes:
                if not again.already_applied(change):
                    again.submit(change)
            again.wait_idle()
        finally:
            again.stop()
    assert table_rows(sandbox, scratch_db) == model


def test_a_key_move_within_one_partition_commits_both_halves_in_one_batch(sandbox, scratch_db):
    """Its delete fills the batch: the insert still goes with it. In the next batch it
    would be lost to a crash between the two, as the first batch's checkpoint (the
    move's id) says the whole move is applied."""
    changes = [ins(1, n=0), upd(1, "5", new_id=2, n=1)]
    with live_table(sandbox, scratch_db) as (meta, targets, kwargs):
        crashed = Applier(meta, targets, kwargs, 1, 2, lambda changes: False, {}, fail_on_error)
        for change in changes:
            crashed.submit(change)
        crashed.flush()
        with contextlib.closing(connect_downstream(kwargs)) as conn:
            crashed.commit.apply(conn, crashed.parts[0].queue.get_nowait())  # then the crash
        again = Applier(meta, targets, kwargs, 1, 2, lambda changes: True, meta.checkpoints.load(), fail_on_error)
        assert all(again.already_applied(change) for change in changes)
    assert table_rows(sandbox, scratch_db) == {2: (5, "x")}


def test_an_abandon_gives_up_a_batch_being_retried_at_once_and_reports_no_failure(sandbox, scratch_db):
    """A daemon starting again (a member whose source moved: its batch fenced out, retried)
    must not wait out the retry's backoff: the abandon ends the partition's thread at once,
    its batch left for the next start, and the applier reports no failure."""
    with live_table(sandbox, scratch_db) as (meta, targets, kwargs):

        def fenced_out(cur) -> None:
            raise SourcesLost("member a (epoch 1) no longer reads s1")

        meta.fence = fenced_out
        a = Applier(meta, targets, kwargs, 1, 100, lambda changes: False, {}, fail_on_error, 2.0)
        a.start()
        a.submit(ins(1))
        a.flush()
        deadline = time.monotonic() + 10
        while a.parts[0].retrying is None or a.parts[0].retrying.attempt < 4:  # (its backoff at 1.6 s)
            assert time.monotonic() < deadline, "the batch was not retried"
            time.sleep(0.05)
        started = time.monotonic()
        a.abandon()
        a.stop()
        assert time.monotonic() - started < 1.0 and not a.parts[0].thread.is_alive()
        a.check()  # (no failure)
    assert table_rows(sandbox, scratch_db) == {}
