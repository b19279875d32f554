"""A shard paused by a conflict goes on writing and changing its table; when it resumes, its
rows of that time are read again and written downstream under the table as it is now: a
column it renamed meanwhile under its new name (the rename may have finished downstream, the
old name gone), a column it dropped meanwhile left out (live stories, issue 43: seeds 7104,
9329). Real servers, the daemon as a process; rows compared at the end."""

from __future__ import annotations

import pytest

from replicator.control.status import saved_status
from tests.replication import ReplicationTask
from tests.traffic import caught_up

pytestmark = pytest.mark.timeout(240)

CREATE = "CREATE TABLE {table} (id INT PRIMARY KEY, c4 INT NULL, v INT NULL DEFAULT 1)"


@pytest.fixture(params=[True, False], ids=["extract", "no-extract"])
def task(sandbox, tmp_path, request):
    t = ReplicationTask(sandbox, tmp_path, CREATE, shards_per_server=2, extract=request.param)
    yield t
    t.cleanup()


def _settled(task: ReplicationTask) -> bool:
    return caught_up(task) and not saved_status(task.config)["paused"]


def _rows(task: ReplicationTask, columns: str) -> list[tuple]:
    return task.sandbox.downstream.execute(f"SELECT {columns} FROM `{task.target_db}`.orders ORDER BY id")


def test_rows_written_before_a_rename_made_while_paused_arrive_under_the_new_name(task):
    a, others = task.shards[0], task.shards[1:]
    task.start()
    for k, shard in enumerate(task.shards):
        task.sql(shard, f"INSERT INTO {{t}} VALUES ({k * 100 + 1}, 7, 0)")
    task.sql(others[0], "ALTER TABLE {t} RENAME COLUMN c4 TO r1")  # a rename starts
    task.sql(a, "ALTER TABLE {t} ALTER COLUMN v SET DEFAULT 2")  # defaults 1 and 2 differ: a blocked
    task.wait_for(lambda: str(task.shard_id(a)) in saved_status(task.config)["paused"], what="a to pause")
    task.sql(a, "INSERT INTO {t} VALUES (2, 8, 0)")  # written under c4
    task.sql(a, "UPDATE {t} SET c4 = 9 WHERE id = 1")
    task.sql(a, "ALTER TABLE {t} RENAME COLUMN c4 TO r1")  # still blocked (v's default)
    task.sql(a, "INSERT INTO {t} VALUES (3, 10, 0)")  # under r1
    for shard in others[1:]:
        task.sql(shard, "ALTER TABLE {t} RENAME COLUMN c4 TO r1")  # the last one: the rename ends
    task.sql(a, "ALTER TABLE {t} ALTER COLUMN v SET DEFAULT 1")  # it gives way: resumed
    task.wait_for(lambda: _settled(task), timeout=90, what="every shard to catch up")
    assert _rows(task, "id, r1") == [(1, 9), (2, 8), (3, 10), (101, 7), (201, 7), (301, 7)]
    assert task.union_difference() is None
    assert "Unknown column" not in task.log_text()


def test_rows_written_before_a_drop_made_while_paused_arrive_without_the_column(task):
    a = task.shards[0]
    task.start()
    task.sql(a, "INSERT INTO {t} VALUES (1, 7, 0)")
    task.sql(a, "ALTER TABLE {t} ALTER COLUMN v SET DEFAULT 2")  # blocked
    task.wait_for(lambda: str(task.shard_id(a)) in saved_status(task.config)["paused"], what="a to pause")
    task.sql(a, "INSERT INTO {t} VALUES (2, 8, 0)")
    task.sql(a, "ALTER TABLE {t} DROP COLUMN c4")
    for shard in task.shards[1:]:
        task.sql(shard, "ALTER TABLE {t} DROP COLUMN c4")  # c4 goes downstream
    task.sql(a, "ALTER TABLE {t} ALTER COLUMN v SET DEFAULT 1")  # resumed
    task.wait_for(lambda: _settled(task), timeout=90, what="every shard to catch up")
    assert _rows(task, "id, v") == [(1, 0), (2, 0)]
    assert task.union_difference() is None
