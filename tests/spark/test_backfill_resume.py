"""A backfill interrupted in the middle continues from its unfinished chunks, on the
sandbox with a real local SparkSession: killed (SIGKILL of the driver's process
group, the JVM with it) and run again from the command line; interrupted in process
(Ctrl-C after some chunks) with a chunk committed but not recorded, string keys
whose chunks are hash buckets, a plan that changed, rows no extract column tells
apart, a merge policy whose decisions changed. Each ends with the downstream table
equal to the union of the shards, row for row."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replicator.spark.backfill import Listener, MergePolicy, backfill, backfill_lock
from replicator.spark.shards import JobError
from tests.replication import REPO, ReplicationTask
from tests.spark.test_backfill import CREATE, fill, overlapping, shardmerge

pytestmark = pytest.mark.timeout(600)


class Interrupts(Listener):
    """Ctrl-C once `after` chunks of a table are copied: the run stops as a killed one
    does (no failure recorded), its finished chunks recorded."""

    def __init__(self, after: int):
        self.after = after
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)

    def table_progress(self, target: str, rows: int, chunks_done: int | None = None) -> None:
        if chunks_done is not None and chunks_done >= self.after:
            raise KeyboardInterrupt


class Notes(Listener):
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.chunks: list[tuple[int, int, int]] = []

    def note(self, text: str) -> None:
        self.notes.append(text)

    def table_chunks(self, target: str, total: int, done: int = 0, rows_done: int = 0) -> None:
        self.chunks.append((total, done, rows_done))


def chunk_counts(task: ReplicationTask) -> tuple[int, int]:
    """(finished, all) chunks the meta schema holds for the task."""
    rows = task.sandbox.downstream.execute(
        f"SELECT COUNT(copied), COUNT(*) FROM `{task.meta_schema}`.backfill_chunk WHERE task = '{task.name}'"
    )
    return int(rows[0][0]), int(rows[0][1])


def states(task: ReplicationTask) -> set[str]:
    return {r.state for r in task.meta().backfill.load().values()}


def alive_in_group(pgid: int) -> list[str]:
    """The processes of a process group not dead (a zombie is dead, waiting for its
    parent, here whatever adopted the JVM, to reap it)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its ")"
            name, rest = stat.read_text().rsplit(")", 1)
            state, _, group = rest.split()[:3]
            if int(group) == pgid and state != "Z":
                alive.append(name.split("(", 1)[1])
    return alive


def analyzed(task: ReplicationTask) -> None:
    """Fresh statistics, so the chunk count planned from them is the one intended."""
    for shard in task.shards:
        task.sql(shard, "ANALYZE TABLE {t}")


def interrupt(task: ReplicationTask, spark, rows_per_split: int, after: int, **options) -> None:
    """A backfill of the shards as they are, interrupted once `after` chunks are copied."""
    analyzed(task)
    with pytest.raises(KeyboardInterrupt):
        backfill(task.config, spark, rows_per_split=rows_per_split, listener=Interrupts(after), **options)


def filled_and_interrupted(task: ReplicationTask, spark, rows: int, rows_per_split: int, after: int) -> None:
    for n, shard in enumerate(task.shards):
        fill(task, shard, rows, n * 1_000_000)
    interrupt(task, spark, rows_per_split, after)


@pytest.fixture
def task(sandbox, tmp_path):
    t = ReplicationTask(sandbox, tmp_path, CREATE)
    yield t
    t.cleanup()


# -- killed: the command line, SIGKILL of the driver and its JVM ------------------------------------
@pytest.mark.long
def test_a_killed_backfill_continues_from_its_unfinished_chunks_row_for_row(task):
    for n, shard in enumerate(task.shards):
        fill(task, shard, 12_000, n * 1_000_000)
    analyzed(task)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    log = task.workdir / "killed.log"
    with log.open("w") as out:
        driver = subprocess.Popen(
            [sys.executable, "-m", "replicator.cli.shardmerge", "backfill", "--config", str(task.config_path),
             "--rows-per-split", "300"],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 240
        done, total = 0, 0
        while time.monotonic() < deadline and driver.poll() is None:
            with contextlib.suppress(Exception):  # the meta schema is made by the driver
                done, total = chunk_counts(task)
            if total and 15 <= done <= total // 2:
                break
            time.sleep(0.05)
        assert driver.poll() is None, f"the backfill ended before it could be killed:\n{log.read_text()[-3000:]}"
        assert total >= 150 and 15 <= done < total, (done, total)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)  # the driver and its JVM
        driver.wait(timeout=30)
    deadline = time.monotonic() + 30  # a killed JVM takes a moment to be torn down
    while alive_in_group(driver.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive_in_group(driver.pid) == []  # the JVM went with the driver
    assert states(task) == {"running"}  # killed, not failed: the daemon would refuse to start
    done, total = chunk_counts(task)
    assert 0 < done < total
    (p0,) = {f"{file}:{pos}" for file, pos in task.sandbox.downstream.execute(
        f"SELECT file, pos FROM `{task.meta_schema}`.backfill_start WHERE task = '{task.name}' AND source = 's1'")}

    again = shardmerge("backfill", "--config", str(task.config_path), "--rows-per-split", "5000")
    assert again.returncode == 0, again.stderr
    assert f"continuing the interrupted backfill of task {task.name}: {done} of {total} chunks" in again.stderr
    assert f"{done:,} of {total:,} chunks" in again.stderr and "were copied before" in again.stderr
    assert f"continued an interrupted backfill: {total - done} of {total} chunks copied by this run" in again.stdout
    assert f"source s1: read from {p0}" in again.stdout  # the first run's P0
    assert task.difference() is None  # row for row, every column
    rows = task.sandbox.downstream.execute(f"SELECT COUNT(*) FROM `{task.target_db}`.orders")[0][0]
    assert rows == 48_000  # once each
    assert states(task) == {"done"} and chunk_counts(task) == (0, 0)  # nothing left to continue
    task.start()  # the daemon takes the backfill and streams from its P0
    try:
        fill(task, task.shards[2], 100, 2_500_000)
        task.wait_in_sync(timeout=90)
        assert "safe mode until s1 passes" in task.log_text()
    finally:
        assert task.stop() == 0


# -- interrupted in process: what is kept, what is copied again ---------------------------------------
def test_a_chunk_committed_but_not_recorded_is_deleted_and_copied_again_and_p0_kept(task, spark):
    filled_and_interrupted(task, spark, 2_000, 200, after=12)
    done, total = chunk_counts(task)
    assert 12 <= done < total and states(task) == {"running"}
    down, meta = task.sandbox.downstream, f"`{task.meta_schema}`.backfill_chunk"
    first, second = (str(task.shard_id(s)) for s in task.shards[:2])
    finished = set(down.execute(f"SELECT shard, chunk FROM {meta} WHERE copied IS NOT NULL"))
    assert {(first, 0), (second, 0)} <= finished  # (every shard's first chunks go first)
    # the first shard's first chunk committed downstream, killed before its record was written
    down.execute(f"UPDATE {meta} SET copied = NULL WHERE shard = '{first}' AND chunk = 0")
    task.sql(task.shards[0], "DELETE FROM {t} WHERE id < 5")
    # changes after P0 to rows of a finished chunk: only the stream from P0 brings them
    task.sql(task.shards[1], "UPDATE {t} SET amount = amount + 500 WHERE id < 1000100")
    task.sql(task.shards[1], "DELETE FROM {t} WHERE id BETWEEN 1000100 AND 1000109")
    notes = Notes()
    report = backfill(task.config, spark, rows_per_split=50_000, listener=notes)
    assert report.resumed and notes.notes[0].startswith("continuing the interrupted backfill")
    (table,) = report.tables
    assert table.chunks == total and table.resumed_chunks == done - 1 and table.restarted is None
    assert notes.chunks == [(total, done - 1, notes.chunks[0][2])] and notes.chunks[0][2] > 0
    # the recopied chunk holds the rows as they are now; the finished one as they were
    assert down.execute(f"SELECT COUNT(*) FROM `{task.target_db}`.orders WHERE id < 5")[0][0] == 0
    assert down.execute(f"SELECT COUNT(*) FROM `{task.target_db}`.orders")[0][0] == 8_000 - 5
    assert task.difference() is not None
    task.start()
    try:
        task.wait_in_sync(timeout=90)  # streamed from the first run's P0
    finally:
        assert task.stop() == 0


DECIMAL_KEY = "CREATE TABLE {table} (code DECIMAL(12,2) NOT NULL PRIMARY KEY, n INT NOT NULL, note VARCHAR(20) NULL)"


def test_keys_that_are_no_integers_are_chunked_by_hash_alike_upstream_and_downstream(sandbox, tmp_path, spark):
    task = ReplicationTask(sandbox, tmp_path, DECIMAL_KEY)
    try:
        # a wider key on one shard: downstream 1.2500 where that shard says 1.25; the buckets
        # hash the key's canonical text, so a chunk's rows are found downstream all the same
        task.sql(task.shards[1], "ALTER TABLE {t} MODIFY code DECIMAL(14,4) NOT NULL")
        for shard in task.shards:
            task.sql(shard, f"INSERT INTO {{t}} SELECT seq + 0.25, seq, NULL FROM `{shard[1]}`.seq_0_to_1499")
        interrupt(task, spark, 150, after=10)
        down, meta = task.sandbox.downstream, f"`{task.meta_schema}`.backfill_chunk"
        assert down.execute(f"SELECT COUNT(*) FROM {meta} WHERE buckets IS NULL")[0][0] == 0
        # every finished chunk but each shard's first taken for one committed before its record:
        # its rows are deleted (by the hash of the key downstream) before it is copied again
        down.execute(f"UPDATE {meta} SET copied = NULL WHERE chunk > 0")
        report = backfill(task.config, spark)
        assert report.resumed and report.tables[0].rows == 6_000
        assert task.difference() is None
    finally:
        task.cleanup()


def test_a_changed_plan_is_refused_with_the_fix_and_restart_starts_over(task, spark):
    filled_and_interrupted(task, spark, 1_000, 100, after=5)
    task.sql(task.shards[1], "ALTER TABLE {t} ADD COLUMN extra INT NULL")
    with pytest.raises(JobError) as refused:
        backfill(task.config, spark)
    message = str(refused.value)
    assert "an interrupted backfill of task" in message and "cannot be continued" in message
    assert f"the schema of shard {task.shard_id(task.shards[1])} changed" in message
    assert f"--restart` (which empties the tables it copies; drop {task.target_db}.orders first" in message
    with pytest.raises(JobError, match=r"interrupted backfill copies \S+\.orders; this one would copy "):
        _refused_tables(task, spark)
    assert states(task) == {"running"}  # refusals leave it to be continued
    task.sandbox.downstream.execute(f"DROP TABLE `{task.target_db}`.orders")
    report = backfill(task.config, spark, restart=True)
    assert not report.resumed and report.tables[0].rows == 4_000 and report.tables[0].resumed_chunks == 0
    assert task.difference() is None


def _refused_tables(task: ReplicationTask, spark) -> None:
    """The same task with a second route: the plan's tables differ."""
    text = task.config_path.read_text()
    route = (f"  - schema: \"{task.name}_db1\"\n    table: \"orders_10\"\n"
             f"    target: {task.target_db}.orders_one\n")
    other = task.workdir / "two-routes.yaml"
    other.write_text(text.replace("routes:\n", "routes:\n" + route))  # (the first route that matches)
    from replicator.config import load_config

    backfill(load_config(other), spark)


def test_a_concurrent_backfill_of_the_task_is_refused(task, spark):
    fill(task, task.shards[0], 10, 0)
    with backfill_lock(task.config.target.connection_kwargs(), task.config), \
            pytest.raises(JobError, match=rf"a backfill of task {task.name} is running now"):
        backfill(task.config, spark)


@pytest.fixture
def unextracted(sandbox, tmp_path):
    t = ReplicationTask(sandbox, tmp_path, CREATE, extract=False)
    yield t
    t.cleanup()


def test_rows_no_extract_column_tells_apart_are_copied_again_from_scratch(unextracted, spark):
    task = unextracted
    filled_and_interrupted(task, spark, 1_000, 100, after=8)
    notes = Notes()
    report = backfill(task.config, spark, listener=notes)
    (table,) = report.tables
    assert report.resumed and table.resumed_chunks == 0 and "do not say which shard" in table.restarted
    assert any("copied again from scratch" in n for n in notes.notes)
    assert table.rows == 4_000 and task.difference() is None


@pytest.mark.long  # (keep-first in make test: tests/spark/test_backfill.py; an interruption: the tests above)
def test_keep_first_across_an_interruption_keeps_what_an_uninterrupted_run_keeps(sandbox, tmp_path, spark):
    task = ReplicationTask(sandbox, tmp_path, CREATE, extract=False)
    try:
        overlapping(task)  # shards 0 and 2 share ids 95..99
        s = task.shards
        fill(task, s[1], 900, 1_000_200)
        fill(task, s[3], 900, 3_000_200)
        keep_first = MergePolicy("keep-first")
        interrupt(task, spark, 50, after=4, policy=keep_first)
        task.sql(s[2], "INSERT INTO {t} (id, customer, amount) VALUES (42, 7, 1)")  # now collides with shard 0
        report = backfill(task.config, spark, policy=keep_first)
        (table,) = report.tables
        assert report.resumed and "the rows the merge policy (keep-first) drops" in table.restarted
        rows = dict(task.sandbox.downstream.execute(f"SELECT id, customer FROM `{task.target_db}`.orders"))
        assert rows[42] == 42 and rows[95] == 95 and rows[104] == 4242  # shard 0's, then shard 2's
        assert table.rows == 305 + 1_800 and len(rows) == table.rows
    finally:
        task.cleanup()


def test_the_daemon_names_an_interrupted_backfill_and_how_to_continue_it(task, spark):
    filled_and_interrupted(task, spark, 500, 100, after=3)
    process = task.start(wait=False)
    assert process.wait(timeout=60) == 4
    log = task.log_text()
    assert "did not finish (source s1: running" in log and "an interrupted one continues" in log
    task.process = None
    status = json.loads(shardmerge("status", "--config", str(task.config_path), "--json").stdout)
    done, total = chunk_counts(task)
    (rows,) = task.sandbox.downstream.execute(
        f"SELECT SUM(copied) FROM `{task.meta_schema}`.backfill_chunk WHERE task = '{task.name}'")[0]
    assert status["phase"] == "backfill running" and 3 <= done < total
    assert status["backfill"] == {f"{task.target_db}.orders": {"chunks": total, "done": done, "rows": int(rows)}}
    text = shardmerge("status", "--config", str(task.config_path)).stdout
    assert f"backfill of {task.target_db}.orders: {done} of {total} chunks copied ({int(rows):,} rows)" in text
