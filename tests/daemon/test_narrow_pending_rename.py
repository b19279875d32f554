"""A shard narrows a column whose rename it ran while the rename is still pending on other
shards (its rows from before its rename held under the old name downstream): the values the
narrowing converted upstream are converted downstream too, the rows held under the old name
included, and the last shard's rename leaves every row as its shard has it. The second test
is live stories 611052: the narrowing shard's was the only wide column, so the downstream
column narrowed itself, and its rows held under the old name kept their fraction (a shard
that left holds the old name wide, so the last rename's copy widened the new name again and
brought them back unconverted). The third is L73: the narrowing shard had not renamed, and its
values the rename moved under the new name kept their fraction through the cancel's copy back."""

from __future__ import annotations

import time

import pytest

from tests.replication import ReplicationTask

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]

CREATE = "CREATE TABLE {table} (id INT PRIMARY KEY, t TIMESTAMP(6) NULL DEFAULT NULL) DEFAULT CHARSET=utf8mb4"


def test_a_narrowing_while_its_rename_is_pending_converts_the_rows_held_under_the_old_name(sandbox, tmp_path):
    task = ReplicationTask(sandbox, tmp_path, CREATE)
    try:
        story(task)
    finally:
        task.cleanup()


def story(task: ReplicationTask) -> None:
    task.start()
    first, second, *rest = task.shards
    for shard in task.shards:
        task.sql(shard, "INSERT INTO {t} VALUES (1, '2024-02-24 12:30:45.123456'), (2, '2024-02-25 01:02:03.5')")
    task.wait_in_sync(timeout=60)
    task.sql(first, "ALTER TABLE {t} RENAME COLUMN t TO r")
    task.sql(second, "ALTER TABLE {t} RENAME COLUMN t TO r")
    task.sql(second, "ALTER TABLE {t} MODIFY COLUMN r TIMESTAMP NULL DEFAULT NULL")
    time.sleep(5)  # (decided while the rename is pending: the comparison waits for its end)
    for shard in rest:
        task.sql(shard, "ALTER TABLE {t} RENAME COLUMN t TO r")
    settled(task)


def settled(task: ReplicationTask) -> None:
    """The shards' rows downstream as upstream, and a clean stop."""
    task.wait_in_sync(timeout=60)
    assert task.difference() is None
    assert task.stop() == 0


NARROW = "CREATE TABLE {table} (id INT PRIMARY KEY, t TIMESTAMP NULL DEFAULT NULL) DEFAULT CHARSET=utf8mb4"


def test_a_narrowing_of_the_only_wide_shard_while_its_rename_is_pending(sandbox, tmp_path):
    """Fails on the code before: rows 2 and 3 of the second shard keep .123456 and .5."""
    task = ReplicationTask(sandbox, tmp_path, NARROW)
    try:
        task.start()
        first, second, gone, last = task.shards
        for shard in task.shards:
            task.sql(shard, "INSERT INTO {t} VALUES (1, '2024-02-24 12:30:45')")
        task.sql(first, "ALTER TABLE {t} RENAME COLUMN t TO r")
        task.sql(second, "ALTER TABLE {t} MODIFY COLUMN t TIMESTAMP(6) NULL DEFAULT NULL")
        task.sql(second, "INSERT INTO {t} VALUES (2, '2024-02-24 12:30:45.123456'), (3, '2024-02-25 01:02:03.5')")
        task.sql(gone, "INSERT INTO {t} VALUES (2, '2024-02-24 12:30:45')")
        time.sleep(3)
        task.sql(gone, "DROP TABLE {t}")  # its rows under the old name stay, held as TIMESTAMP(6)
        task.shards = [first, second, last]
        task.sql(second, "ALTER TABLE {t} CHANGE COLUMN t r TIMESTAMP(6) NULL DEFAULT NULL")
        task.sql(second, "ALTER TABLE {t} MODIFY COLUMN r TIMESTAMP NULL DEFAULT NULL")
        time.sleep(5)
        task.sql(last, "ALTER TABLE {t} RENAME COLUMN t TO r")
        settled(task)
    finally:
        task.cleanup()


WIDE = "CREATE TABLE {table} (id INT PRIMARY KEY, t DATETIME(6) NOT NULL) DEFAULT CHARSET=utf8mb4"


@pytest.mark.parametrize("end", ["cancelled", "finished"])
def test_a_narrowing_by_a_shard_that_has_not_renamed_converts_its_rows_moved_under_the_new_name(
    sandbox, tmp_path, end
):
    """L73: another shard's rename moved the second shard's values into the new name; the
    second then narrowed its column (fractions cut upstream), which narrowed the old name
    downstream too, but not the moved values. Fails on the code before: the rename's end
    (a cancel's copy back, or the last shard's copy) brings them back with their fraction."""
    task = ReplicationTask(sandbox, tmp_path, WIDE)
    try:
        task.start()
        first, second, *rest = task.shards
        for shard in task.shards:
            task.sql(shard, "INSERT INTO {t} VALUES (1, '2024-02-24 12:30:45.123456'), (2, '2024-02-25 01:02:03.5')")
        for shard in [first, *rest]:
            task.sql(shard, "ALTER TABLE {t} MODIFY COLUMN t DATETIME NULL DEFAULT NULL")
        task.sql(first, "ALTER TABLE {t} RENAME COLUMN t TO r")
        time.sleep(3)  # (the rename starts downstream: the values move into r)
        task.sql(second, "ALTER TABLE {t} MODIFY COLUMN t DATETIME NULL DEFAULT NULL")
        task.sql(second, "INSERT INTO {t} VALUES (3, '2024-02-26 04:05:06')")
        time.sleep(3)
        if end == "cancelled":
            task.sql(first, "ALTER TABLE {t} DROP COLUMN r")
            task.sql(first, "ALTER TABLE {t} ADD COLUMN t DATETIME NULL DEFAULT NULL")
        else:
            for shard in [*rest, second]:
                task.sql(shard, "ALTER TABLE {t} RENAME COLUMN t TO r")
        settled(task)
    finally:
        task.cleanup()
