"""Every step of a shard's DDL, crashed through: the daemon SIGKILLs itself at one
named crash point (`replicator.faults`), is started again, and the downstream must
then equal the shards row for row, with deletes and key-moving updates written right
after the DDL (the changes that wait behind it). Also a rename's copy step, a
conflict pause and its resolution, and the first start."""

from __future__ import annotations

import time

import pytest

from tests.replication import ReplicationTask

CREATE = ("CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, note VARCHAR(20), "
          "v VARCHAR(30) NOT NULL DEFAULT '') DEFAULT CHARSET=utf8mb4")


@pytest.fixture
def task(sandbox, tmp_path):
    t = ReplicationTask(sandbox, tmp_path, CREATE)
    yield t
    t.cleanup()


def rows(task, shard, first: int, n: int) -> None:
    values = ",".join(f"({i}, {i}.5, 'r{i}', 'v{i}')" for i in range(first, first + n))
    task.sql(shard, f"INSERT INTO {{t}} (id, amount, note, v) VALUES {values}")


def after_ddl(task, shard) -> None:
    """What lost rows before: deletes, key moves and updates right behind the DDL."""
    task.sql(shard, "DELETE FROM {t} WHERE id % 5 = 0")
    task.sql(shard, "UPDATE {t} SET id = id + 1000 WHERE id % 5 = 1")
    task.sql(shard, "UPDATE {t} SET amount = amount + 1 WHERE id % 5 = 2")
    task.sql(shard, "DELETE FROM {t} WHERE id BETWEEN 1001 AND 1010")


def ddl_story(task) -> None:
    a, b, c, d = task.shards
    for n, shard in enumerate(task.shards):
        rows(task, shard, 1, 30 + n)
    time.sleep(1.0)  # applied: what follows is the DDL and the changes right behind it
    task.sql(a, "ALTER TABLE {t} ADD COLUMN extra INT NULL")  # changes the join: a downstream DDL
    after_ddl(task, a)
    time.sleep(1.5)
    task.sql(b, "ALTER TABLE {t} MODIFY v VARCHAR(60) NOT NULL DEFAULT ''")  # a widening
    after_ddl(task, b)
    time.sleep(1.5)
    for shard in (c, d):
        rows(task, shard, 100, 10)
        after_ddl(task, shard)


@pytest.mark.parametrize("crash_at", [
    "ddl_seen",  # the daemon has read the shard's DDL
    "ddl_queued",  # handed to the group's executor; the shard's changes wait behind it
    "ddl_barrier_passed",  # the shard's earlier rows are all downstream
    "ddl_decided",  # the coordinator decided, nothing saved
    "ddl_journaled",  # decision, ddl_done and journal saved; downstream DDL not run
    "ddl_statement_ran",  # the downstream DDL ran, its journal progress not saved
    "shard_released",  # the changes that waited are handed to the applier
    "released_batch_committed",  # the first batch after the release committed
    "watermark_written",  # the first watermark after the release saved
])
def test_killed_at_each_step_of_a_shard_ddl(task, crash_at):
    task.crash_and_recover(crash_at, lambda: ddl_story(task))
    if crash_at == "ddl_statement_ran":
        # the journaled table after the statement (its DownstreamStep) is the server's
        assert "had run before the crash; skipping it" in task.log_text()


def rename_story(task) -> None:
    for n, shard in enumerate(task.shards):
        rows(task, shard, 1, 20 + n)
    for n, shard in enumerate(task.shards):
        task.sql(shard, "ALTER TABLE {t} RENAME COLUMN note TO remark")
        task.sql(shard, f"UPDATE {{t}} SET remark = 'renamed{n}' WHERE id % 3 = 0")
        after_ddl(task, shard)
        time.sleep(0.3)


def test_killed_during_the_copy_step_of_a_rename(task):
    """The last shard's rename copies the old column into the new one downstream (seed
    002): killed after the copy is written, before it commits."""
    task.crash_and_recover("ddl_copy_written", lambda: rename_story(task))
    table = task.coordinator_table()
    assert table.column("remark") is not None and table.column("note") is None


def conflict_story(task) -> None:
    a, b, _c, _d = task.shards
    for n, shard in enumerate(task.shards):
        rows(task, shard, 1, 20 + n)
    task.sql(a, "ALTER TABLE {t} ADD COLUMN p FLOAT NULL")
    task.sql(b, "ALTER TABLE {t} ADD COLUMN p DATETIME NULL")  # conflicts: b pauses
    after_ddl(task, b)
    task.sql(b, "UPDATE {t} SET p = '2026-05-01 10:00:00' WHERE id < 8")
    time.sleep(1.5)
    task.sql(a, "ALTER TABLE {t} DROP COLUMN p")  # a gives way: b resumes by itself
    after_ddl(task, a)
    time.sleep(0.5)
    after_ddl(task, b)


@pytest.mark.parametrize("crash_at", [
    "ddl_decided:3",  # the resolving DDL decided (b's block lifted), nothing saved
    "ddl_journaled:3",  # the resolution saved, b not resumed yet by the daemon
    "shard_resumed",  # b's pause removed, its rows not read again yet
])
def test_killed_while_a_conflict_resolves(task, crash_at):
    task.crash_and_recover(crash_at, lambda: conflict_story(task))
    assert task.coordinator_table().column("p").type.name == "datetime"


def late_ddl_story(task) -> None:
    conflict_story(task)
    b = task.shards[1]
    task.sql(b, "ALTER TABLE {t} ADD COLUMN q INT NULL")
    task.sql(b, "UPDATE {t} SET q = id")


def test_a_ddl_after_the_decision_that_resumed_its_shard_is_decided_after_a_crash(task):
    """Killed once the decision resuming b is saved, before the daemon said how far b's
    paused rows go: the next start replays them up to the binlog's end, which holds b's
    next DDL too, written meanwhile. That DDL was not decided while b was paused: it is
    decided now, not run on b's scratch table only (live stories L39)."""
    task.crash_and_recover("ddl_journaled:3", lambda: late_ddl_story(task))
    assert task.coordinator_table().column("q") is not None


def first_start_story(task) -> None:
    for n, shard in enumerate(task.shards):
        rows(task, shard, 1, 20 + n)
        after_ddl(task, shard)


@pytest.mark.parametrize("crash_at", ["first_start_read", "first_start_saved"])
def test_killed_during_the_first_start(task, crash_at):
    """Before any watermark exists: killed before the start position is saved (the task
    has not started: the next start takes the binlog as it is then) or right after (the
    next start resumes from that same position). Rows written meanwhile arrive."""
    task.start(crash_at=crash_at, wait=False)
    assert task.wait_exit(timeout=60) == -9, task.log_text()[-3000:]
    saved = task.meta().watermarks.load() if crash_at == "first_start_saved" else {}
    assert bool(saved) == (crash_at == "first_start_saved")
    first_start_story(task)  # while no daemon runs
    if crash_at == "first_start_read":  # never started: those rows are before its start
        for shard in task.shards:
            task.sql(shard, "DELETE FROM {t}")
    task.start()
    first_start_story(task) if crash_at == "first_start_read" else after_ddl(task, task.shards[0])
    task.wait_in_sync(timeout=90)
    assert task.stop() == 0



def rename_with_late_writes_story(task) -> None:
    for n, shard in enumerate(task.shards):
        rows(task, shard, 1, 20 + n)
    time.sleep(1.0)
    a, b, c, d = task.shards
    task.sql(a, "ALTER TABLE {t} RENAME COLUMN note TO remark")  # the first: the old name comes back
    after_ddl(task, a)
    task.sql(b, "UPDATE {t} SET note = 'late' WHERE id % 3 = 0")  # under the old name meanwhile
    time.sleep(2.0)  # (the daemon dies on the first one's last statement and is started again)
    for shard in (c, d, b):  # b last: its late values are copied into the new name
        task.sql(shard, "ALTER TABLE {t} RENAME COLUMN note TO remark")
        after_ddl(task, shard)


def test_killed_once_the_old_names_index_was_built(task):
    """The first rename's last statement indexes the old name (lattice/old_name_index.py),
    which changes no column the journal could tell it ran by: killed after it ran, before its
    progress is saved, recovery runs it again (IF NOT EXISTS) rather than skip it; the last
    rename's copy and the index's drop follow, and the rows are the shards'."""
    # (the rename's CHANGE, ADD COLUMN and ADD INDEX)
    task.crash_and_recover("ddl_statement_ran:3", lambda: rename_with_late_writes_story(task))
    log = task.log_text()
    assert "from statement 2" in log and "had run before the crash" not in log, log[-3000:]
    assert log.count("ADD INDEX IF NOT EXISTS `__shardmerge_was_") == 2
    assert "DROP INDEX IF EXISTS `__shardmerge_was_" in log
    assert task.coordinator_table().column("note") is None
