"""Shards that leave their group (DROP TABLE) while another shard of the same source, or the
shard itself, is paused: no pause outlives the shard, and the source's watermark reaches
the end of its binlog once nothing paused is left (live stories, issue 43: seeds 5, 8225).
Real servers, the daemon as a process; rows compared at the end."""

from __future__ import annotations

import pytest

from replicator.control.status import saved_status
from tests.replication import ReplicationTask
from tests.traffic import caught_up

pytestmark = pytest.mark.timeout(240)

CREATE = "CREATE TABLE {table} (id INT PRIMARY KEY, c INT NULL DEFAULT NULL)"


@pytest.fixture
def task(sandbox, tmp_path):
    t = ReplicationTask(sandbox, tmp_path, CREATE, shards_per_server=2, extract=False)
    yield t
    t.cleanup()


def _paused(task: ReplicationTask) -> dict:
    return saved_status(task.config)["paused"]


def _downstream_ids(task: ReplicationTask) -> list[int]:
    rows = task.sandbox.downstream.execute(f"SELECT id FROM `{task.target_db}`.orders ORDER BY id")
    return [row[0] for row in rows]


@pytest.mark.parametrize("stop", ["kill", "clean"])
def test_a_shard_that_left_is_not_paused_when_its_rows_are_read_again(task, stop: str):
    """Another shard of its source is blocked, so after a restart the source is read again
    from before the DROP: the rows of the shard that left were applied, and are skipped."""
    a, b = task.shards[0], task.shards[1]  # both on the first upstream
    task.start(group=True)
    task.sql(a, "INSERT INTO {t} VALUES (1, 1)")
    task.sql(a, "ALTER TABLE {t} ALTER COLUMN c SET DEFAULT 1")  # defaults NULL and 1 differ: blocked
    task.sql(b, "INSERT INTO {t} VALUES (1001, 1), (1002, 2)")
    task.sql(b, "DROP TABLE {t}")
    gone = str(task.shard_id(b))
    group = f"{task.target_db}.orders"
    task.wait_for(lambda: gone not in saved_status(task.config)["groups"][group]["shards"], what="b to leave")
    if stop == "kill":
        task.kill(group=True)
    else:
        assert task.stop() == 0
    task.start(group=True)
    task.sql(a, "ALTER TABLE {t} ALTER COLUMN c SET DEFAULT NULL")  # it gives way: resumes
    task.sql(a, "INSERT INTO {t} VALUES (2, 2)")
    task.wait_for(lambda: caught_up(task) and not _paused(task), timeout=60, what="the source to catch up")
    assert _downstream_ids(task) == [1, 2, 1001, 1002]
    assert "not in its group" not in task.log_text()


def test_a_blocked_shard_that_leaves_is_paused_no_more(task):
    """Nothing could resume it: its pause goes with it (logged, with what is not downstream)."""
    a = task.shards[0]
    task.start()
    task.sql(a, "INSERT INTO {t} VALUES (1, 1)")
    task.sql(a, "ALTER TABLE {t} ALTER COLUMN c SET DEFAULT 1")  # blocked
    task.wait_for(lambda: str(task.shard_id(a)) in _paused(task), what="a to pause")
    task.sql(a, "INSERT INTO {t} VALUES (2, 2)")
    task.sql(a, "DROP TABLE {t}")
    task.sql(task.shards[1], "INSERT INTO {t} VALUES (1001, 1)")
    task.wait_for(lambda: caught_up(task) and not _paused(task), timeout=60, what="the source to catch up")
    assert _downstream_ids(task) == [1, 1001]  # its rows as when it paused, and the others'
    assert f"shard {task.shard_id(a)} left its group while paused" in task.log_text()
