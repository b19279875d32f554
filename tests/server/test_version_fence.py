"""Two daemons of one task writing one downstream table (issue 75), on the sandbox's
downstream server: a batch commits only at the version of its table it read, locked; a DDL's
mark waits for the batches holding it and holds the others till the DDL ends; a batch built
for an older version is built again for the table as it is, never written against it."""

from __future__ import annotations

import contextlib
import queue
import time

import pytest

from replicator.apply.applier import Applier
from replicator.apply.ddl_executor import GroupExecutor
from replicator.apply.inspect import read_table
from replicator.apply.meta import Meta
from replicator.apply.table_hold import TableHold
from replicator.apply.table_refresh import update_info
from replicator.apply.target import TargetInfo
from replicator.apply.version_fence import DdlMarks, VersionFence
from replicator.schema.coordinator import Coordinator
from replicator.servers import connect_downstream
from replicator.shard_id import ShardId
from replicator.source.messages import Change
from replicator.state.coordinator_store import MetaStore
from replicator.transient import TableBusy
from tests.locks import waits_for_commit

SHARDS = (ShardId("s1", "db", "t"), ShardId("s2", "db", "t"))


def wait_for(done, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def shared_table(sandbox, scratch_db, scratch_meta):
    """A table `t` (id, a, b) beside the task's meta schema; what each daemon of the task
    makes of them: its own `Meta` and `TargetInfo` (name, connection settings, a maker of both)."""
    sandbox.downstream.execute(
        f"CREATE TABLE `{scratch_db}`.t (id INT PRIMARY KEY, a INT NOT NULL, b VARCHAR(20) NOT NULL)"
    )
    target = f"{scratch_db}.t"
    metas: list[Meta] = []

    def daemon() -> tuple[Meta, TargetInfo]:
        metas.append(scratch_meta.another())
        columns = {c: c for c in ("id", "a", "b")}
        return metas[-1], TargetInfo(target, f"`{scratch_db}`.`t`", columns, ("id",), 1, sole_key=True)

    try:
        yield target, scratch_meta.kwargs, daemon
    finally:
        for meta in metas:
            meta.close()


def test_a_ddl_mark_waits_for_the_batches_that_read_the_version_and_holds_the_next(
    sandbox, scratch_db, scratch_meta
):
    with shared_table(sandbox, scratch_db, scratch_meta) as (target, kwargs, daemon):
        meta, _ = daemon()
        versions, marks = meta.table_versions, DdlMarks(meta.table_versions, target, lambda: connect_downstream(kwargs))
        marks.end(1)  # (the table's row, at version 1)
        batch = connect_downstream(kwargs)
        held = waits_for_commit(batch, lambda cur: versions.check(cur, [target]), lambda: marks.begin(1), "the DDL's mark")
        assert {t: at.version for t, at in held.items()} == {target: 1}  # (built for the version it is at)
        with batch.cursor() as cur:
            cur.execute("START TRANSACTION")
            with pytest.raises(TableBusy, match="being changed by a DDL"):
                versions.check(cur, [target])
            cur.execute("ROLLBACK")
        marks.end(2)
        with batch.cursor() as cur:
            cur.execute("START TRANSACTION")
            assert {t: at.version for t, at in versions.check(cur, [target]).items()} == {target: 2}  # (build again)
            cur.execute("COMMIT")
        batch.close()
        assert versions.rows()[target].version == 2 and not versions.rows()[target].busy


def refused(change, error) -> None:
    pytest.fail(f"the downstream refused {change}: {error}")


def test_a_batch_built_before_another_daemons_ddl_waits_for_it_and_is_built_for_the_table_after(
    sandbox, scratch_db, scratch_meta
):
    """Daemon B's rows name `b`, which daemon A's DDL drops while they are on their way: they
    wait while A's DDL runs (its mark), then are written without `b` (B read the table again at
    its new version), none refused, none lost."""
    with shared_table(sandbox, scratch_db, scratch_meta) as (target, kwargs, daemon):
        meta_a, info_a = daemon()
        meta_b, info_b = daemon()
        fence = VersionFence(meta_b.table_versions, {target: info_b}, "mariadb")
        b = Applier(meta_b, {target: info_b}, kwargs, 2, 5, lambda changes: False, {}, refused, versions=fence)
        hold = TableHold(info_a, DdlMarks(meta_a.table_versions, target, lambda: connect_downstream(kwargs)))
        rows = 12
        b.start()
        try:
            with hold.held(False):
                for i in range(1, rows + 1):  # built for version 1: (id, a, b)
                    b.submit(Change((1, 4 + i, 0), SHARDS[i % 2], target, "I", ("id", "a", "b"), (str(i), str(i), "'x'")))
                b.flush()
                assert wait_for(lambda: any(p.retrying is not None for p in b.parts), 10.0)
                retrying = next(p.retrying for p in b.parts if p.retrying is not None)
                assert "being changed by a DDL" in retrying.error
                time.sleep(0.5)
                assert sandbox.downstream.execute(f"SELECT COUNT(*) FROM `{scratch_db}`.t")[0][0] == 0
                conn = connect_downstream(kwargs)
                with conn.cursor() as cur:
                    cur.execute(f"ALTER TABLE `{scratch_db}`.t DROP COLUMN b")
                update_info(info_a, read_table(conn, scratch_db, "t"))
                info_a.update(major=2)
                conn.close()
            b.wait_idle()
        finally:
            b.stop()
        got = sandbox.downstream.execute(f"SELECT id, a FROM `{scratch_db}`.t ORDER BY id")
        assert [(int(i), int(a)) for i, a in got] == [(i, i) for i in range(1, rows + 1)]
        assert info_b.major == 2 and "b" not in info_b.columns
        assert meta_a.table_versions.rows()[target].version == 2
        assert b.tally.applied == rows


def test_a_batch_built_before_another_daemons_rename_clears_the_new_name_its_rows_held(
    sandbox, scratch_db, scratch_meta
):
    """Live finding L65 (chaos seed 31, members): daemon A's decision renames `b` to `r`
    downstream for shard s1 (a CHANGE: every row's value moves into `r`, `b` made again
    empty), so shard s2's rows, under the old name still, read `b`, else `r`, and clear `r`
    when they write `b`. Daemon B's update of an s2 row, routed before B took that decision,
    sets `b` NULL: it must clear `r` too, or the row reads the value it had before ('x')."""
    with shared_table(sandbox, scratch_db, scratch_meta) as (target, kwargs, daemon):
        t = f"`{scratch_db}`.t"
        sandbox.downstream.execute(f"ALTER TABLE {t} MODIFY b VARCHAR(20) NULL")
        sandbox.downstream.execute(f"INSERT INTO {t} VALUES (1, 1, 'x')")
        meta_a, info_a = daemon()
        meta_b, info_b = daemon()
        hold = TableHold(info_a, DdlMarks(meta_a.table_versions, target, lambda: connect_downstream(kwargs)))
        hold.marks.end(1)  # (the table's row, at version 1)
        fence = VersionFence(meta_b.table_versions, {target: info_b}, "mariadb")
        b = Applier(meta_b, {target: info_b}, kwargs, 1, 5, lambda changes: False, {}, refused, versions=fence)
        with hold.held(False):
            conn = connect_downstream(kwargs)
            with conn.cursor() as cur:
                cur.execute(f"ALTER TABLE {t} CHANGE b r VARCHAR(20) NULL, ADD COLUMN b VARCHAR(20) NULL")
            update_info(info_a, read_table(conn, scratch_db, "t"))
            info_a.update(cleared={SHARDS[1]: ("r",)})  # (a rename is a minor change: the version stays)
            conn.close()
        b.start()
        try:  # (built for version 1, as B routed it: (id, a, b), nothing to clear)
            before = ("1", "1", "'x'")
            b.submit(Change((1, 5, 0), SHARDS[1], target, "U", ("id", "a", "b"), ("1", "2", "NULL"), before))
            b.flush()
            b.wait_idle()
        finally:
            b.stop()
        assert sandbox.downstream.execute(f"SELECT a, b, r FROM {t} WHERE id = 1") == [(2, None, None)]
        assert info_b.major == 1 and info_b.clears(SHARDS[1]) == ("r",)


@pytest.mark.parametrize("finished", [False, True], ids=["entry-unfinished", "entry-finished"])
def test_a_mark_a_dead_coordinator_left_is_cleared_once_the_next_finished_its_journal(
    sandbox, scratch_db, scratch_meta, finished
):
    """A coordinator died in its DDL, its table marked busy (the other daemons' batches wait):
    its journal entry unfinished, or finished the moment before it would have cleared the mark.
    The next coordinator's start finishes what is left, then clears the mark at the version
    the table is at."""
    target = f"{scratch_db}.t"
    sandbox.downstream.execute(f"CREATE TABLE `{scratch_db}`.t (id INT PRIMARY KEY, a INT NOT NULL)")
    meta, kwargs = scratch_meta.meta, scratch_meta.kwargs
    statement = f"ALTER TABLE `{scratch_db}`.`t` ADD COLUMN `b` INT NULL"
    meta.execute([meta.journal.sql_entry(target, 1, SHARDS[0], "2.0", [statement], [None])])
    marks = DdlMarks(meta.table_versions, target, scratch_meta.connect)
    marks.begin(1)  # (the dead coordinator's)
    if finished:
        sandbox.downstream.execute(statement)
        meta.execute([meta.journal.sql_progress(target, 1, 1, True)])
    with scratch_meta.connect() as conn:
        info = TargetInfo(target, f"`{scratch_db}`.`t`", {}, None, 1)
        update_info(info, read_table(conn, scratch_db, "t"))
    coordinator = Coordinator(target, "mariadb", MetaStore(meta, target))
    applier = Applier(meta, {target: info}, kwargs, 1, 10, lambda changes: False, {}, refused)
    executor = GroupExecutor(
        target, coordinator, MetaStore(meta, target), meta, applier, info, kwargs, queue.Queue(), marks=marks
    )
    assert meta.table_versions.rows()[target].busy
    assert executor.recover() == (0 if finished else 1, [])
    with scratch_meta.connect() as conn:
        assert read_table(conn, scratch_db, "t").column("b") is not None
    left = meta.table_versions.rows()[target]
    assert not left.busy and left.version == info.major


def test_rows_held_by_another_daemons_long_ddl_go_on_within_a_second_of_its_end(sandbox, scratch_db, scratch_meta):
    """A batch waiting on another daemon's DDL polls its table a second apart at most: once the
    DDL ends its rows commit within about that, however long the DDL ran (a doubling backoff
    would have them wait up to the DDL's length again)."""
    with shared_table(sandbox, scratch_db, scratch_meta) as (target, kwargs, daemon):
        meta_a, info_a = daemon()
        meta_b, info_b = daemon()
        fence = VersionFence(meta_b.table_versions, {target: info_b}, "mariadb")
        b = Applier(meta_b, {target: info_b}, kwargs, 1, 5, lambda changes: False, {}, refused, versions=fence)
        hold = TableHold(info_a, DdlMarks(meta_a.table_versions, target, scratch_meta.connect))
        count = f"SELECT COUNT(*) FROM `{scratch_db}`.t"
        b.start()
        try:
            with hold.held(False):
                b.submit(Change((1, 5, 0), SHARDS[0], target, "I", ("id", "a", "b"), ("1", "1", "'x'")))
                b.flush()
                time.sleep(4.0)  # (a backoff doubling from 0.2 s would try next at 6.2 s)
                assert sandbox.downstream.execute(count)[0][0] == 0
            ended = time.monotonic()
            assert wait_for(lambda: sandbox.downstream.execute(count)[0][0] == 1, 10.0)
            assert time.monotonic() - ended < 1.8
        finally:
            b.stop()
