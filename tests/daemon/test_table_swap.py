"""Issue 18: a table swap keeps its shard. A shard's table is rebuilt by hand the way
pt-online-schema-change, gh-ost or LHM end (a new table with one more column, the
rows copied, then the swap), while rows flow into every shard; the shard stays in
its group with the new table's schema, no row is lost, and downstream ends equal to
the shards, row for row."""

from __future__ import annotations

import itertools
import threading

import pytest

from lattice import render_table
from tests.replication import ReplicationTask

CREATE = "CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL) DEFAULT CHARSET=utf8mb4"

SWAPS = {
    "one statement": ["RENAME TABLE {t} TO {old}, {new} TO {t}"],
    "two statements": ["RENAME TABLE {t} TO {old}", "RENAME TABLE {new} TO {t}"],
}
# `ALTER TABLE t RENAME TO t_old` then `RENAME TABLE t_new TO t` leaves and comes back as the
# two statements do: the tracker's path for it runs on MariaDB in the scenario
# table_swap_alter_rename (tests/server/test_scenarios_mariadb.py), which keeps make test short.


class Writers:
    """One thread per shard inserting and updating rows; a shard's writer holds its
    lock while it writes, so a swap can take the lock and see no write in between."""

    def __init__(self, task: ReplicationTask):
        self.task = task
        self.locks = {s: threading.Lock() for s in task.shards}
        self.ids = {s: itertools.count(1) for s in task.shards}
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self._write, args=(s,)) for s in task.shards]

    def __enter__(self) -> Writers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()
        assert not self.errors, self.errors

    def _write(self, shard) -> None:
        try:
            while not self.stop.wait(0.02):
                with self.locks[shard]:
                    i = next(self.ids[shard])
                    self.task.sql(shard, f"INSERT INTO {{t}} (id, amount) VALUES ({i}, {i}.5)")
                    if i % 3 == 0:
                        self.task.sql(shard, f"UPDATE {{t}} SET amount = amount + 1 WHERE id = {i - 2}")
        except BaseException as exc:  # reported by __exit__
            self.errors.append(exc)


def _ghosts(shard) -> dict[str, str]:
    """The swap's other tables, named as pt-online-schema-change names them."""
    schema, table = shard[1], shard[2]
    return {"old": f"`{schema}`.`_{table}_old`", "new": f"`{schema}`.`_{table}_new`"}


def _rows_on(task, shard, more_than: int) -> None:
    task.wait_for(lambda: task.sql(shard, "SELECT COUNT(*) FROM {t}")[0][0] > more_than, what="rows on the shard")


@pytest.mark.parametrize("statements", list(SWAPS.values()), ids=list(SWAPS))
def test_a_swapped_table_keeps_its_shard(sandbox, tmp_path, statements):
    task = ReplicationTask(sandbox, tmp_path, CREATE)
    swapped, other = task.shards[0], task.shards[1]
    names = _ghosts(swapped)
    try:
        task.start()
        with Writers(task) as writers:
            _rows_on(task, swapped, 20)
            with writers.locks[swapped]:
                task.sql(swapped, "CREATE TABLE {new} LIKE {{t}}".format(**names))
                task.sql(swapped, "ALTER TABLE {new} ADD COLUMN c1 INT NULL".format(**names))
                task.sql(swapped, "INSERT INTO {new} (id, amount) SELECT id, amount FROM {{t}}".format(**names))
                for statement in statements:
                    task.sql(swapped, statement.format(t="{t}", **names))
            _rows_on(task, swapped, 40)
            task.sql(other, "ALTER TABLE {t} ADD COLUMN c1 INT NULL")
        task.wait_in_sync(timeout=90)
        coordinator = task.coordinator_table()
        assert coordinator.column("c1") is not None
        status = task.meta().groups.load(f"{task.target_db}.orders")
        assert task.shard_id(swapped) in status.shards  # still in the group
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_a_swap_the_others_cannot_join_pauses_only_that_shard(sandbox, tmp_path):
    """The new table's amount is VARCHAR next to the others' DECIMAL: a conflict of the
    swapped shard alone. The other shards' rows go on; once one of them makes the same
    change and the last follows, the swapped shard resumes by itself, and every row of
    it written during the pause arrives."""
    task = ReplicationTask(sandbox, tmp_path, CREATE)
    swapped, others = task.shards[0], task.shards[1:]
    names = _ghosts(swapped)
    wider = "VARCHAR(20) NOT NULL DEFAULT 'n/a'"
    try:
        task.start()
        with Writers(task) as writers:
            _rows_on(task, swapped, 20)
            with writers.locks[swapped]:
                task.sql(swapped, f"CREATE TABLE {names['new']} (id INT PRIMARY KEY, amount {wider})")
                task.sql(swapped, "INSERT INTO {new} (id, amount) SELECT id, amount FROM {{t}}".format(**names))
                task.sql(swapped, "RENAME TABLE {{t}} TO {old}, {new} TO {{t}}".format(**names))
            paused = task.shard_id(swapped)
            task.wait_for(lambda: list(task.meta().pauses.load()) == [paused], what="the swapped shard paused")
            # the others go on meanwhile
            before = {s: task.sql(s, "SELECT COUNT(*) FROM {t}")[0][0] for s in others}
            task.wait_for(lambda: task.difference() is not None and all(
                task.sql(s, "SELECT COUNT(*) FROM {t}")[0][0] > before[s] + 10 for s in others),
                what="rows of the other shards")
            assert list(task.meta().pauses.load()) == [paused]
            for shard in others:
                task.sql(shard, f"ALTER TABLE {{t}} MODIFY amount {wider}")
            task.wait_for(lambda: not task.meta().pauses.load(), timeout=60, what="the swapped shard resumed")
        task.wait_in_sync(timeout=90)
        assert "`amount` varchar(20)" in render_table(task.coordinator_table())
        assert task.stop() == 0
    finally:
        task.cleanup()
