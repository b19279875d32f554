"""Resync of one shard (issue 45, docs/operations/resync.md): `shardmerge resync` copies one
shard's rows again with Spark while the daemon streams the others, on the sandbox's
servers with a real local SparkSession: the shard's rows damaged downstream by hand come
back equal to its upstream table, rows written to it and to the others meanwhile
included, and the other shards never stop."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time

import pytest

from replicator.schema.way_out import WAY_OUT
from replicator.shard_id import ShardId
from replicator.spark.backfill import Listener
from replicator.spark.resync import resync
from replicator.spark.shards import JobError
from replicator.spark.verify import verify
from tests.daemon.test_operator import shardctl
from tests.replication import REPO, ReplicationTask, admin_task

pytestmark = pytest.mark.timeout(600)

CREATE = (
    "CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, note VARCHAR(20) NULL) "
    "DEFAULT CHARSET=utf8mb4"
)
ROWS = 1200


def write(task: ReplicationTask, shard, first: int, count: int) -> None:
    for start in range(first, first + count, 1000):
        values = ",".join(
            f"({i}, {i % 1000}.25, 'n{i % 97}')" for i in range(start, min(start + 1000, first + count))
        )
        task.sql(shard, f"INSERT INTO {{t}} VALUES {values}")


def filled(task: ReplicationTask) -> None:
    """The daemon started, every shard given ROWS rows, all of them downstream."""
    task.start()
    for shard in task.shards:
        write(task, shard, 1, ROWS)
    task.wait_in_sync(timeout=120)


def origin(task: ReplicationTask, shard) -> str:
    source = task.source_of(shard[0])
    return f"_source = '{source}' AND _schema = '{shard[1]}' AND _table = '{shard[2]}'"


def count(task: ReplicationTask, shard) -> int:
    ((n,),) = task.sandbox.downstream.execute(
        f"SELECT COUNT(*) FROM `{task.target_db}`.orders WHERE {origin(task, shard)}"
    )
    return int(n)


def damage(task: ReplicationTask, shard) -> None:
    """By hand, downstream: rows deleted, values changed, rows the shard never had."""
    table, where = f"`{task.target_db}`.orders", origin(task, shard)
    source = task.source_of(shard[0])
    task.sandbox.downstream.execute(
        [
            f"DELETE FROM {table} WHERE {where} AND id BETWEEN 1 AND 100",
            f"UPDATE {table} SET amount = -1, note = 'damaged' WHERE {where} AND id BETWEEN 200 AND 299",
            f"INSERT INTO {table} (id, amount, note, _source, _schema, _table) VALUES "
            + ",".join(
                f"({900_000 + i}, 0, 'never', '{source}', '{shard[1]}', '{shard[2]}')" for i in range(50)
            ),
        ]
    )


class Writer(threading.Thread):
    """Inserts, updates and deletes on every shard till stopped."""

    def __init__(self, task: ReplicationTask):
        super().__init__(daemon=True)
        self.task, self.stop_event, self.error = task, threading.Event(), None
        self.next_id = 100_000

    def run(self) -> None:
        rng = random.Random(7)
        try:
            while not self.stop_event.is_set():
                for shard in self.task.shards:
                    n = self.next_id
                    self.task.sql(shard, f"INSERT INTO {{t}} VALUES ({n}, 1.5, 'live'), ({n + 1}, 2.5, NULL)")
                    self.task.sql(
                        shard, f"UPDATE {{t}} SET amount = amount + 1 WHERE id = {rng.randrange(1, ROWS)}"
                    )
                    self.task.sql(shard, f"DELETE FROM {{t}} WHERE id = {rng.randrange(1, ROWS)}")
                self.next_id += 2
                self.stop_event.wait(0.05)
        except Exception as exc:  # reported by the test
            self.error = exc


class Watch(Listener):
    """The other shards' rows downstream when the copy starts and when it is done."""

    def __init__(self, task: ReplicationTask, others):
        self.task, self.others, self.counts = task, others, []

    def table_started(self, target: str, estimated_rows: int) -> None:
        self.counts.append(sum(count(self.task, s) for s in self.others))

    def table_done(self, target: str, rows: int) -> None:
        self.counts.append(sum(count(self.task, s) for s in self.others))


def test_a_shard_damaged_downstream_is_copied_again_while_the_others_stream(sandbox, spark, tmp_path):
    task = ReplicationTask(sandbox, tmp_path, CREATE)
    try:
        filled(task)
        damaged, *others = task.shards
        damage(task, damaged)
        assert task.difference() is not None
        writer = Writer(task)
        writer.start()
        watch = Watch(task, others)
        report = resync(task.config, spark, [task.shard_id(damaged)], rows_per_split=500, listener=watch)
        writer.stop_event.set()
        writer.join()
        assert writer.error is None, writer.error
        (copy,) = report.shards
        assert copy.deleted >= ROWS - 100 + 50 and copy.copied >= ROWS - 100 and report.streaming
        assert watch.counts[1] > watch.counts[0], "the other shards stopped while the shard was copied"
        task.wait_in_sync(timeout=180)
        assert "resynced: it streams from" in task.log_text()
        # forgotten once its source's watermark is past the copy's end
        task.wait_for(
            lambda: (
                task.sandbox.downstream.execute(f"SELECT COUNT(*) FROM `{task.meta_schema}`.resync") == [(0,)]
            ),
            timeout=60,
            what="the resync forgotten",
        )
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_a_daemon_killed_as_it_takes_a_copy_over_streams_the_shard_from_it_once_started_again(
    sandbox, spark, tmp_path
):
    """Killed between the resync saved as streaming and the shard's resume: the next start
    resumes it from the copy."""
    task = ReplicationTask(sandbox, tmp_path, CREATE, shards_per_server=1)
    try:
        task.start(crash_at="resync_streaming")
        damaged, *_ = task.shards
        for shard in task.shards:
            write(task, shard, 1, ROWS)
        task.wait_in_sync(timeout=120)
        damage(task, damaged)
        task.sql(damaged, "DELETE FROM {t} WHERE id BETWEEN 700 AND 799")
        resync(task.config, spark, [task.shard_id(damaged)], rows_per_split=500)
        assert task.wait_exit(timeout=60) == -9, "no crash at resync_streaming"
        write(task, damaged, ROWS + 1, 100)
        task.start()
        task.wait_in_sync(timeout=120)  # (paused still, its rows after the copy would not come)
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_a_resync_whose_pause_and_resume_lose_the_downstream_as_they_are_saved_ends_equal_with_rows_flowing(
    sandbox, spark, tmp_path
):
    """The shard's pause for its copy and its resume from it each lost as saved (issue 70):
    the resync's step used to swallow the error, the shard running in memory while paused
    in the meta schema, its paused rows never read again. The daemon starts again from what
    is saved instead, and the copy is taken over as after a crash, the others streaming."""
    task = ReplicationTask(sandbox, tmp_path, CREATE)
    try:
        task.start(fault_at="pause_saved_lost,resume_saved_lost")
        for shard in task.shards:
            write(task, shard, 1, ROWS)
        task.wait_in_sync(timeout=120)
        damaged = task.shards[0]
        damage(task, damaged)
        writer = Writer(task)
        writer.start()
        report = resync(task.config, spark, [task.shard_id(damaged)], rows_per_split=500)
        time.sleep(1)
        writer.stop_event.set()
        writer.join()
        assert writer.error is None, writer.error
        assert report.streaming
        task.wait_in_sync(timeout=180)
        log = task.log_text()
        assert log.count("a write of the main loop lost the downstream") == 2, log[-4000:]
        assert task.process.poll() is None and "resynced: it streams from" in log
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_a_shard_is_resynced_while_no_daemon_runs_and_streams_from_the_copy_once_one_starts(
    sandbox, spark, tmp_path
):
    task = ReplicationTask(sandbox, tmp_path, CREATE, shards_per_server=1)
    try:
        filled(task)
        damaged, *_ = task.shards
        assert task.stop() == 0
        damage(task, damaged)
        task.sql(damaged, f"UPDATE {{t}} SET note = 'while down' WHERE id <= {ROWS // 2}")
        task.sql(damaged, "DELETE FROM {t} WHERE id BETWEEN 500 AND 599")
        report = resync(task.config, spark, [task.shard_id(damaged)], rows_per_split=500)
        assert not report.streaming
        write(task, damaged, ROWS + 1, 100)  # after the copy: streamed once the daemon starts
        task.start()
        task.wait_in_sync(timeout=120)
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_resync_is_refused_where_rows_do_not_say_their_shard(sandbox, spark, tmp_path):
    task = ReplicationTask(sandbox, tmp_path, CREATE, extract=False)
    try:
        task.start()
        task.wait_in_sync()
        with pytest.raises(JobError, match=r"do not say they are its .* `shardmerge backfill --truncate`"):
            resync(task.config, spark, [task.shard_id(task.shards[0])])
        with pytest.raises(JobError, match=r"no route of task .* takes shard s1\.nowhere\.t"):
            resync(task.config, spark, [ShardId("s1", "nowhere", "t")])
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_shardctl_resync_has_the_daemon_run_the_copy(sandbox, tmp_path):
    task = admin_task(sandbox, tmp_path, CREATE, shards_per_server=1)
    try:
        filled(task)
        damaged = task.shards[0]
        damage(task, damaged)
        shard = task.shard_id(damaged)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "replicator.cli.shardctl",
                "--addr",
                task.addr,
                "resync",
                "--source",
                shard.source,
                "--table",
                shard.table_key,
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
        )
        assert done.returncode == 0 and "started by the daemon" in done.stdout, done.stderr
        task.wait_for(
            lambda: f"resync --shard {shard} ended (exit status 0)" in task.log_text(),
            timeout=300,
            what="the resync job",
        )
        task.wait_in_sync(timeout=120)
        assert f"resync --shard {shard}: shard {shard}: " in task.log_text()  # (its output, relayed)
        assert task.stop() == 0
    finally:
        task.cleanup()


# issue 71: a shard written on AUTO_INCREMENT keys (every insert moves SHOW CREATE TABLE's
# AUTO_INCREMENT=N, which the check for a DDL during the copy compared: it never finished)
AUTO = (
    "CREATE TABLE {table} (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, "
    "note VARCHAR(20) NULL) DEFAULT CHARSET=utf8mb4"
)
BIG = 100_000


class AutoWriter(Writer):
    """Inserts on AUTO_INCREMENT keys, updates and deletes of rows anywhere, on every shard."""

    def run(self) -> None:
        rng = random.Random(71)
        try:
            while not self.stop_event.is_set():
                for shard in self.task.shards:
                    self.task.sql(shard, "INSERT INTO {t} (amount, note) VALUES (1.5, 'live'), (2.5, NULL)")
                    row = rng.randrange(1, BIG)
                    self.task.sql(shard, f"UPDATE {{t}} SET amount = amount + 1, note = 'upd' WHERE id = {row}")
                    self.task.sql(shard, f"DELETE FROM {{t}} WHERE id = {rng.randrange(1, BIG)}")
                self.stop_event.wait(0.02)
        except Exception as exc:  # reported by the test
            self.error = exc


def auto_filled(task: ReplicationTask, big, rows: int = BIG) -> None:
    task.start()
    for shard in task.shards:
        n = rows if shard == big else 1000
        task.sql(shard, f"INSERT INTO {{t}} (amount, note) SELECT seq % 1000 + 0.25, 'n' FROM `{shard[1]}`.seq_1_to_{n}")
    task.wait_in_sync(timeout=300)


@pytest.mark.long  # (100,000 rows: `make test-long`)
def test_a_shard_written_on_auto_increment_keys_throughout_its_copy_is_resynced_equal(sandbox, spark, tmp_path):
    """A resync of a 100,000-row shard whose inserts (AUTO_INCREMENT), updates and deletes
    go on throughout its copy, as on every other shard: it finishes, the others stream all
    along, and every row ends equal."""
    task = ReplicationTask(sandbox, tmp_path, AUTO)
    try:
        big, *others = task.shards
        auto_filled(task, big)
        damage(task, big)
        writer = AutoWriter(task)
        writer.start()
        time.sleep(1)
        watch = Watch(task, others)
        report = resync(task.config, spark, [task.shard_id(big)], rows_per_split=20_000, listener=watch)
        time.sleep(2)  # (rows after the copy, streamed)
        writer.stop_event.set()
        writer.join()
        assert writer.error is None, writer.error
        (copy,) = report.shards
        assert copy.copied >= BIG - 1000 and report.streaming
        assert watch.counts[1] > watch.counts[0], "the other shards stopped while the shard was copied"
        ((upstream_max,),) = task.sql(big, "SELECT MAX(id) FROM {t}")
        assert upstream_max > BIG, "no insert during the copy"
        task.wait_in_sync(timeout=300)
        assert task.stop() == 0
    finally:
        task.cleanup()


class AlterDuringCopy(Listener):
    """A DDL on the shard upstream while its rows are copied (the first copy only)."""

    def __init__(self, task: ReplicationTask, shard):
        self.task, self.shard, self.done = task, shard, False

    def table_started(self, target: str, estimated_rows: int) -> None:
        if not self.done:
            self.done = True
            self.task.sql(self.shard, "ALTER TABLE {t} ADD COLUMN extra INT NULL")


def test_a_resync_that_fails_says_so_with_its_way_out_which_run_as_printed_ends_equal(sandbox, spark, tmp_path):
    """A DDL during the copy fails the resync (its copy is of the table before it):
    query-status says `resync failed: ...` with the way out, not "being copied" for good;
    the shard stays paused, the others stream, and the way out run as printed (the daemon
    runs the copy) brings every row, with traffic on every shard throughout."""
    task = admin_task(sandbox, tmp_path, AUTO, shards_per_server=1)
    try:
        big, *_ = task.shards
        auto_filled(task, big, rows=5000)
        writer = AutoWriter(task)
        writer.start()
        shard = task.shard_id(big)
        with pytest.raises(JobError, match="the table changed while it was copied"):
            resync(task.config, spark, [shard], rows_per_split=50_000, listener=AlterDuringCopy(task, big))

        def paused_reason() -> str:
            return json.loads(shardctl(task, "--json", "query-status").stdout)["paused"][str(shard)]["reason"]

        # (the daemon reads the resync's state at its next look at the resync table)
        task.wait_for(lambda: paused_reason().startswith("resync failed: "), what="the failed resync shown")
        status = json.loads(shardctl(task, "--json", "query-status").stdout)
        reason = status["paused"][str(shard)]["reason"]
        assert WAY_OUT in reason, reason
        assert status["resyncs"][str(shard)]["state"] == "failed"
        printed = next(p for p in reason.split(WAY_OUT, 1)[1].split("`") if p.startswith("shardctl resync "))
        done = shardctl(task, *printed.split()[1:])
        assert done.returncode == 0 and "started by the daemon" in done.stdout, done.stdout + done.stderr
        task.wait_for(lambda: f"resync --shard {shard} ended (exit status 0)" in task.log_text(), timeout=300,
                      what="the resync job")
        writer.stop_event.set()
        writer.join()
        assert writer.error is None, writer.error
        task.wait_in_sync(timeout=180)
        assert str(shard) not in json.loads(shardctl(task, "--json", "query-status").stdout)["paused"]
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_verify_during_a_pending_rename_with_traffic_reports_only_the_row_changed_by_hand(sandbox, spark, tmp_path):
    """Issue 71: one shard of four renamed a column, the others not yet: downstream the
    rename moved their values to the new name, as designed, and rows flow on every shard.
    verify compares as the group means it (a pending rename's value is COALESCE(old, new))
    and looks at a differing row again once the stream has passed it: it reports exactly the
    row changed by hand downstream, and its fix SQL, run, leaves the table equal, the rename
    still pending. (It reported thousands of false differences, and its fix would have put
    the moved values back.)"""
    task = ReplicationTask(sandbox, tmp_path, CREATE)
    try:
        filled(task)
        renamed, plain, *_ = task.shards
        for shard in task.shards:
            write(task, shard, 5000, 10)  # (rows the writer never touches)
        task.sql(renamed, "ALTER TABLE {t} RENAME COLUMN note TO remark")
        task.wait_for(lambda: task.downstream_table().column("remark") is not None, what="the rename downstream")
        time.sleep(2)
        writer = Writer(task)
        writer.start()
        where = f"{origin(task, plain)} AND id = 5005"
        task.sandbox.downstream.execute(f"UPDATE `{task.target_db}`.orders SET amount = -1 WHERE {where}")
        report = verify(task.config, spark, chunk_rows=500, fix=True)
        (table,) = report.tables
        assert (table.missing, table.extra) == ([], []), (table.missing[:3], table.extra[:3])
        assert [(s, v[0]) for s, v in table.different] == [(task.shard_id(plain), "5005")], table.different[:5]
        fixes = [s for s in report.fix_sql if not s.startswith("--")]
        assert len(fixes) == 1 and fixes[0].startswith("REPLACE INTO"), report.fix_sql
        task.sandbox.downstream.execute(fixes)
        again = verify(task.config, spark, chunk_rows=500)
        assert again.equal, (again.tables[0].missing[:3], again.tables[0].extra[:3], again.tables[0].different[:3])
        assert task.downstream_table().column("note") is not None  # (the rename still pending)
        writer.stop_event.set()
        writer.join()
        assert writer.error is None, writer.error
        assert task.stop() == 0
    finally:
        task.cleanup()
