"""Faults a native replica survives, survived by the daemon on real servers: servers
restarted mid-batch with the binlog rotated in between, connections killed on either
side, a binlog purged past the checkpoint, a row the downstream refuses. Each ends
with the shards compared with the downstream row for row (nothing lost, extra or
different), or, where no way on exists, with a message naming the way out."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from replicator.spark.backfill import Listener
from replicator.spark.resync import resync, shards_of_source
from tests.replication import REPO, admin_task
from tests.traffic import Writer

pytestmark = pytest.mark.timeout(300)

CREATE = (
    "CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, note VARCHAR(20)) "
    "DEFAULT CHARSET=utf8mb4"
)


@pytest.fixture
def task(sandbox, tmp_path):
    t = admin_task(sandbox, tmp_path, CREATE)
    yield t
    t.cleanup()


def status(task) -> dict:
    with urllib.request.urlopen(task.addr + "/api/v1/status", timeout=30) as response:
        return json.loads(response.read())


def shardctl(task, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli.shardctl", "--addr", task.addr, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=180,
    )


def test_servers_restarted_mid_batch_with_the_binlog_rotated_in_between(task):
    a = task.shards[0]
    task.start()
    with Writer(task):
        time.sleep(2)
        task.sandbox.restart_instance("down")  # batches in flight when it goes
        time.sleep(2)
        task.sandbox.instance(a[0]).execute("FLUSH BINARY LOGS")
        time.sleep(1)
        task.sandbox.restart_instance(a[0])
        task.sandbox.instance(a[0]).execute("FLUSH BINARY LOGS")
        time.sleep(2)
    task.wait_in_sync(timeout=120)
    data = status(task)
    assert data["downstream_reconnects"] > 0
    assert data["sources"][task.source_of(a[0])]["reconnects"] > 0
    assert task.stop() == 0


def _kill_connections(inst, where: str) -> int:
    ids = [r[0] for r in inst.execute(f"SELECT ID FROM information_schema.PROCESSLIST WHERE {where}")]
    for i in ids:
        with contextlib.suppress(Exception):  # gone already
            inst.execute(f"KILL CONNECTION {i}")
    return len(ids)


def test_connections_killed_on_either_side(task):
    a = task.shards[0]
    task.start()
    upstream, down = task.sandbox.instance(a[0]), task.sandbox.downstream
    with Writer(task):
        time.sleep(2)
        dumps = _kill_connections(upstream, "COMMAND LIKE 'Binlog Dump%'")
        time.sleep(2)
        # the daemon's downstream sessions: those in its databases, or idle between batches
        appliers = _kill_connections(
            down,
            f"ID <> CONNECTION_ID() AND USER = 'root' AND COMMAND <> 'Daemon' "
            f"AND (DB IS NULL OR DB IN ('{task.target_db}', '{task.meta_schema}'))",
        )
        time.sleep(2)
    assert dumps >= 1 and appliers >= 1
    task.wait_in_sync(timeout=120)
    metrics = urllib.request.urlopen(task.addr + "/metrics", timeout=30).read().decode()
    source = task.source_of(a[0])
    assert f'shardmerge_reconnects_total{{server="{source}"}}' in metrics
    assert "reconnecting" in task.log_text()
    assert task.stop() == 0


def test_a_binlog_purged_past_the_checkpoint_is_an_error_naming_the_source_the_file_and_the_way_out(
    task, spark
):
    """The way out, `shardmerge resync --source`, while the other source streams: its
    shards copied again (one damaged by hand downstream meanwhile), then streamed from
    where the copy began, past the purged binlogs."""
    a, b, c, _d = task.shards
    task.start()
    for shard in task.shards:
        task.sql(shard, "INSERT INTO {t} VALUES (1, 1.5, 'before')")
    task.wait_in_sync(timeout=60)
    assert task.stop() == 0
    upstream = task.sandbox.instance(a[0])
    resume_file = task.meta().watermarks.load()[task.source_of(a[0])][0].file
    task.sql(a, "INSERT INTO {t} VALUES (2, 2.5, 'lost?')")
    upstream.execute("FLUSH BINARY LOGS")
    newest = upstream.execute("SHOW MASTER STATUS")[0][0]

    def purged() -> bool:
        _kill_connections(upstream, "COMMAND LIKE 'Binlog Dump%'")  # a dump thread keeps its file
        upstream.execute(f"PURGE BINARY LOGS TO '{newest}'")
        return resume_file not in {r[0] for r in upstream.execute("SHOW BINARY LOGS")}

    task.wait_for(purged, what=f"{resume_file} purged")
    task.start()
    source = task.source_of(a[0])
    task.wait_for(lambda: "is gone from the server" in task.log_text(), timeout=60, what="the purged binlog")
    line = next(x for x in task.log_text().splitlines() if "is gone from the server" in x)
    assert f"source {source}" in line and resume_file in line and "shardmerge backfill" in line
    assert f"resync --config TASK --source {source}" in line
    assert str(task.shard_id(a)) in line and str(task.shard_id(b)) in line
    assert "ERROR" in line
    # never a silent skip: the source's row is not there, its resume position stays
    assert task.meta().watermarks.load()[source][0].file == resume_file
    assert status(task)["sources"][source]["error"].startswith("the binlog file")
    # and the other source goes on
    task.sql(c, "INSERT INTO {t} VALUES (3, 3.5, 'other source')")
    down = task.sandbox.downstream
    task.wait_for(
        lambda: down.execute(f"SELECT COUNT(*) FROM `{task.target_db}`.orders WHERE id = 3")[0][0] == 1,
        what="the other source's row",
    )
    assert down.execute(f"SELECT COUNT(*) FROM `{task.target_db}`.orders WHERE id = 2")[0][0] == 0
    shards = shards_of_source(task.config, source)
    assert shards == sorted([task.shard_id(a), task.shard_id(b)])
    down.execute(f"UPDATE `{task.target_db}`.orders SET note = 'damaged' WHERE _table = '{b[2]}'")
    task.sql(b, "INSERT INTO {t} VALUES (4, 4.5, 'before the copy')")
    others = Flowing(task, c)
    with others:
        report = resync(task.config, spark, shards, rows_per_split=1000, listener=others)
    assert report.streaming and sum(copy.copied for copy in report.shards) == 4
    assert others.seen[-1] > others.seen[0], "the other source's rows stopped while its shards were copied"
    task.sql(a, "INSERT INTO {t} VALUES (5, 5.5, 'after the copy')")
    task.wait_in_sync(timeout=120)
    assert "every shard of it resynced; it reads from" in task.log_text()
    assert task.stop() == 0


class Flowing(Listener):
    """Rows written to a shard of another source from a thread while a resync runs, and how
    many of them are downstream as each copy starts and ends."""

    def __init__(self, task, shard):
        self.task, self.shard, self.seen = task, shard, []
        self.stop, self.thread = threading.Event(), threading.Thread(target=self._write, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=30)

    def _write(self) -> None:
        n = 1000
        while not self.stop.wait(0.05):
            self.task.sql(self.shard, f"INSERT INTO {{t}} VALUES ({n}, 1.5, 'during')")
            n += 1

    def _count(self) -> None:
        down = self.task.sandbox.downstream
        table = f"`{self.task.target_db}`.orders"
        self.seen.append(down.execute(f"SELECT COUNT(*) FROM {table} WHERE _table = '{self.shard[2]}'")[0][0])

    def table_started(self, target: str, estimated_rows: int) -> None:
        self._count()

    def table_done(self, target: str, rows: int) -> None:
        self._count()


def test_a_row_the_downstream_refuses_pauses_its_shard_only_naming_table_key_and_reason(task):
    a, b, *_ = task.shards
    task.start()
    for shard in task.shards:
        task.sql(shard, "INSERT INTO {t} VALUES (1, 1.5, 'short')")
    task.wait_in_sync(timeout=60)
    down = task.sandbox.downstream
    down.execute(f"ALTER TABLE `{task.target_db}`.orders MODIFY note VARCHAR(5)")  # by hand, downstream
    task.sql(a, "INSERT INTO {t} VALUES (2, 2.5, 'far too long')")
    task.sql(a, "INSERT INTO {t} VALUES (3, 3.5, 'after')")
    task.sql(b, "INSERT INTO {t} VALUES (2, 2.5, 'ok')")
    shard = str(task.shard_id(a))
    task.wait_for(lambda: shard in status(task)["paused"], what="the shard to pause")
    reason = status(task)["paused"][shard]["reason"]
    assert f"{task.target_db}.orders" in reason and "id=2" in reason and "Data too long" in reason
    assert "handle-error" in reason
    # the other shards go on
    task.wait_for(
        lambda: (
            down.execute(
                f"SELECT COUNT(*) FROM `{task.target_db}`.orders WHERE _table = '{b[2]}' AND id = 2"
            )[0][0]
            == 1
        ),
        what="the other shard's row",
    )
    assert len(status(task)["paused"]) == 1
    # the way out: fix the downstream, resume the shard; its rows are read again
    down.execute(f"ALTER TABLE `{task.target_db}`.orders MODIFY note VARCHAR(20)")
    result = shardctl(task, "resume-shard", "--source", task.source_of(a[0]), "--table", f"{a[1]}.{a[2]}")
    assert result.returncode == 0, result.stderr
    assert "resumed" in result.stdout
    task.wait_in_sync(timeout=90)
    assert status(task)["paused"] == {}
    again = shardctl(task, "resume-shard", "--source", task.source_of(a[0]), "--table", f"{a[1]}.{a[2]}")
    assert again.returncode == 2 and "is not paused" in again.stderr
    assert task.stop() == 0


def _daemon_alter(down, task) -> int | None:
    """The id of the daemon's downstream ALTER of the merged table, while it runs or waits."""
    rows = down.execute(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE 'ALTER TABLE%' "
        f"AND INFO LIKE '%{task.target_db}%' AND ID <> CONNECTION_ID()"
    )
    return rows[0][0] if rows else None


def test_a_downstream_ddl_whose_connection_is_killed_runs_again_by_itself(task):
    """Issue 70: a downstream DDL that loses its connection mid-statement is retried after
    reconnecting, with backoff, its entry finished from where its recovery says, the shard
    never paused. Here the daemon's ALTER waits on a metadata lock a downstream
    transaction holds, and its connection is killed there; while the retried ALTER waits
    again, query-status shows `retrying` on the group, and the metric counts it. (Before,
    the shard paused with `journal retry` as its way out, for a person.)"""
    a = task.shards[0]
    task.start()
    down = task.sandbox.downstream
    holder = down.connect()
    try:
        with Writer(task):
            time.sleep(2)
            with holder.cursor() as cur:  # (a long transaction on the merged table)
                cur.execute("START TRANSACTION")
                cur.execute(f"SELECT COUNT(*) FROM `{task.target_db}`.orders")
            for shard in task.shards:
                task.sql(shard, "ALTER TABLE {t} ADD COLUMN extra INT NULL")
            deadline = time.monotonic() + 60
            while (alter := _daemon_alter(down, task)) is None:
                assert time.monotonic() < deadline, task.log_text()[-3000:]
                time.sleep(0.2)
            down.execute(f"KILL CONNECTION {alter}")
            task.wait_for(lambda: (status(task)["groups"][f"{task.target_db}.orders"] or {}).get("retrying"),
                          what="the entry to wait for its retry")
            now = status(task)
            retrying = now["groups"][f"{task.target_db}.orders"]["retrying"]
            assert retrying["stage"] == "journal" and retrying["attempt"] >= 1, retrying
            assert retrying["text"].startswith("retrying: ") and "attempt" in retrying["text"], retrying
            assert now["paused"] == {}, now["paused"]
            time.sleep(1)
        holder.commit()
    finally:
        holder.close()
    task.wait_in_sync(timeout=120)
    now = status(task)
    assert now["paused"] == {} and now["groups"][f"{task.target_db}.orders"]["retrying"] is None, now
    columns = [r[0] for r in down.execute(f"SHOW COLUMNS FROM `{task.target_db}`.orders")]
    assert "extra" in columns
    metrics = urllib.request.urlopen(task.addr + "/metrics", timeout=30).read().decode()
    retries = [ln for ln in metrics.splitlines() if ln.startswith("shardmerge_retries_total{") and 'stage="journal"' in ln]
    assert retries and sum(float(ln.rsplit(" ", 1)[1]) for ln in retries) >= 1, retries
    assert "retrying in" in task.log_text()
    assert a  # (its shards all ran the DDL)
    assert task.stop() == 0


@pytest.mark.parametrize("then", ["way out as printed", "restart"])
def test_an_entry_refused_after_it_changed_the_table_leaves_the_other_shards_rows_going_on(sandbox, tmp_path, then):
    """A rename's last entry drops the old name downstream, and the downstream refuses the
    entry after that (a fault injected there; in live stories 120004, a UNIQUE key its
    next statement added). Its shard pauses with the journal's way out; the other shards'
    rows go on naming the columns the table has now (before, the applier still named the
    dropped column: each shard's next row was refused, and each paused). The way out, run as
    printed, finishes the entry, and every row arrives. Or the daemon restarts (the fault
    not there any more): its recovery finishes the entry, and the shard paused for it
    resumes by itself (issue 70: it stayed paused, its way out answering 404)."""
    task = admin_task(sandbox, tmp_path, CREATE)
    try:
        task.start(fault_at="drop_refused_after")
        with Writer(task, rows_per_batch=20):
            time.sleep(1)
            for shard in task.shards:
                task.sql(shard, "ALTER TABLE {t} CHANGE note memo VARCHAR(20)")
            task.wait_for(lambda: status(task)["paused"], what="the last shard's entry to be refused")
            time.sleep(3)  # (the other shards' rows meanwhile)
            paused = status(task)["paused"]
            assert len(paused) == 1, paused
            ((_, pause),) = paused.items()
            assert "journal retry" in pause["reason"] and "a fault the test injected" in pause["reason"], pause
        columns = [r[0] for r in task.sandbox.downstream.execute(f"SHOW COLUMNS FROM `{task.target_db}`.orders")]
        assert "note" not in columns and "memo" in columns, columns
        printed = pause["reason"].split("`shardctl ", 1)[1].split("`", 1)[0].split()
        if then == "restart":
            assert task.stop() == 0
            task.start()
            assert "the journal entry it paused for is done; it resumes" in task.log_text()
        else:
            result = shardctl(task, *printed)
            assert result.returncode == 0, result.stdout + result.stderr
        task.wait_in_sync(timeout=120)
        assert status(task)["paused"] == {}
        assert task.stop() == 0
    finally:
        task.cleanup()
