"""Faults of the downstream a retry cures (issue 70), each with rows flowing: the daemon
waits them out by itself, says so in status (`retrying`, query-status) and in
`shardmerge_retries`, pauses no shard, and every row arrives.

- a long transaction downstream holding rows of the merged table past the lock wait
  timeout (1205);
- the downstream `read_only` for a few seconds (1290), for a user without READ ONLY ADMIN;
- `FLUSH TABLES WITH READ LOCK` held for a few seconds: writes wait, nothing fails;
- a journal entry's connection lost between two of its statements: the rows wait for it."""

from __future__ import annotations

import contextlib
import http.client
import threading
import time
import urllib.request

import pymysql
import pytest

from tests.replication import admin_task
from tests.spark.test_faults import CREATE, shardctl, status
from tests.traffic import Writer

pytestmark = pytest.mark.timeout(300)

USER, PASSWORD = "sm_heals", "heals-pw"
GRANTS = "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, REPLICATION SLAVE, BINLOG MONITOR, RELOAD"


def retries(task, stage: str, error: str) -> float:
    with urllib.request.urlopen(task.addr + "/metrics", timeout=30) as response:
        text = response.read().decode()
    prefix = f'shardmerge_retries_total{{error="{error}",stage="{stage}"}} '
    return sum(float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix))


class Holding:
    """A downstream session holding something for `seconds` (a thread), watching status
    meanwhile for what the daemon says."""

    def __init__(self, task, start: list[str], end: list[str], seconds: float):
        self.task, self.start, self.end, self.seconds = task, start, end, seconds
        self.seen: list[dict] = []
        self.printed: list[str] = []
        self.slowest = 0.0  # seconds: the slowest answer of status meanwhile

    def run(self) -> None:
        down = self.task.sandbox.downstream
        conn = pymysql.connect(host=down.host, port=down.port, user=down.user, password=down.password)
        try:
            with conn.cursor() as cur:
                for statement in self.start:
                    cur.execute(statement)
                deadline = time.monotonic() + self.seconds
                while time.monotonic() < deadline:
                    asked = time.monotonic()
                    with contextlib.suppress(Exception):
                        self.seen += status(self.task)["retrying"]
                    self.slowest = max(self.slowest, time.monotonic() - asked)
                    if self.seen and not self.printed:
                        self.printed.append(shardctl(self.task, "query-status").stdout)
                    time.sleep(0.3)
                for statement in self.end:
                    cur.execute(statement)
        finally:
            conn.close()


def _flowing(task, holding: Holding) -> None:
    """Rows written throughout `holding`; then in sync, no shard paused."""
    with Writer(task, rows_per_batch=20):
        time.sleep(1.5)
        thread = threading.Thread(target=holding.run)
        thread.start()
        thread.join(timeout=120)
        time.sleep(1)
    task.wait_in_sync(timeout=120)
    assert status(task)["paused"] == {}
    assert status(task)["retrying"] == []


def test_a_long_transaction_holding_the_merged_rows_is_waited_out(sandbox, tmp_path):
    down = sandbox.downstream
    was = down.execute("SELECT @@GLOBAL.innodb_lock_wait_timeout")[0][0]
    down.execute("SET GLOBAL innodb_lock_wait_timeout = 1")  # (the daemon's sessions take it)
    task = admin_task(sandbox, tmp_path, CREATE)
    try:
        task.start()
        with Writer(task, rows_per_batch=20):
            time.sleep(1.5)
        task.wait_in_sync(timeout=60)
        table = f"`{task.target_db}`.orders"
        holding = Holding(task, ["BEGIN", f"SELECT COUNT(*) FROM {table} FOR UPDATE"], ["ROLLBACK"], 6)
        _flowing(task, holding)
        assert any(r["stage"] == "rows" and "1205" in r["error"] for r in holding.seen), holding.seen
        assert "retrying: OperationalError: (1205" in holding.printed[0], holding.printed
        assert retries(task, "rows", "1205") >= 1
        assert task.stop() == 0
    finally:
        down.execute(f"SET GLOBAL innodb_lock_wait_timeout = {was}")
        task.cleanup()


def test_a_downstream_read_only_for_a_while_is_waited_out(sandbox, tmp_path, monkeypatch):
    for inst in sandbox.instances:
        inst.execute(
            [f"CREATE USER IF NOT EXISTS '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'", f"GRANT {GRANTS} ON *.* TO '{USER}'@'%'"]
        )
    monkeypatch.setenv("SM_HEALS_PW", PASSWORD)
    task = admin_task(sandbox, tmp_path, CREATE, user=(USER, "SM_HEALS_PW"))
    try:
        task.start()
        holding = Holding(task, ["SET GLOBAL read_only = 1"], ["SET GLOBAL read_only = 0"], 4)
        try:
            _flowing(task, holding)
        finally:
            sandbox.downstream.execute("SET GLOBAL read_only = 0")
        assert any(r["stage"] == "rows" and "1290" in r["error"] for r in holding.seen), holding.seen
        assert retries(task, "rows", "1290") >= 1
        assert task.stop() == 0
    finally:
        task.cleanup()
        for inst in sandbox.instances:
            inst.execute(f"DROP USER IF EXISTS '{USER}'@'%'")


def test_a_global_read_lock_held_for_a_while_is_waited_out(sandbox, tmp_path):
    task = admin_task(sandbox, tmp_path, CREATE)
    try:
        task.start()
        before = status(task)["applied"]
        holding = Holding(task, ["FLUSH TABLES WITH READ LOCK"], ["UNLOCK TABLES"], 4)
        _flowing(task, holding)
        # (the main thread waits for the lock seconds at most, its writes and its new
        # connections alike: an operator sees status under a backup's lock; it was 30 s)
        assert holding.slowest < 5, f"status took {holding.slowest:.1f} s under the global read lock"
        assert status(task)["applied"] > before
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_an_entry_broken_off_between_its_statements_holds_the_other_shards_rows_till_it_is_finished(
    sandbox, tmp_path
):
    """A rename's first entry renames the column downstream, then adds the old name back
    for the shards that have not renamed. Its connection lost between the two (a fault
    point; in chaos, `KILL CONNECTION` there), the entry is retried; meanwhile the table
    lacks the old name the other shards' rows still name. Those rows wait till the entry
    is finished: none is refused, no shard pauses (before, they went on and each shard
    that wrote one paused for a person)."""
    task = admin_task(sandbox, tmp_path, CREATE)
    try:
        task.start(fault_at="lost_between_statements")
        with Writer(task, rows_per_batch=20):
            time.sleep(1.5)
            task.sql(task.shards[0], "ALTER TABLE {t} CHANGE note memo VARCHAR(20)")
            task.wait_for(lambda: retries(task, "journal", "2013") >= 1, what="the entry's retry")
            time.sleep(2)  # (the other shards' rows meanwhile)
        task.wait_in_sync(timeout=120)
        assert status(task)["paused"] == {}
        assert "refused" not in task.log_text(), task.log_text()[-3000:]
        columns = [r[0] for r in sandbox.downstream.execute(f"SHOW COLUMNS FROM `{task.target_db}`.orders")]
        assert "memo" in columns and "note" in columns, columns
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_a_start_that_loses_the_downstream_starts_again_by_itself(sandbox, tmp_path):
    """The downstream lost at the end of a start, with the workers, the applier and the
    executors running (a fault point; in chaos, a downstream restart or `KILL CONNECTION`
    while a daemon starts): what had started stops, and the daemon starts again by itself
    after a backoff (before, `shardmerge run` exited 3 for a supervisor or a person)."""
    task = admin_task(sandbox, tmp_path, CREATE)
    try:
        task.start(fault_at="start_lost")
        assert task.process.poll() is None, task.log_text()[-3000:]
        assert "the daemon met an error a retry cures" in task.log_text(), task.log_text()[-3000:]
        with Writer(task, rows_per_batch=20):
            time.sleep(1.5)
        task.wait_in_sync(timeout=120)
        assert status(task)["paused"] == {}
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_a_pause_and_a_resume_whose_saves_lose_the_downstream_start_the_daemon_again_with_rows_flowing(
    sandbox, tmp_path
):
    """Writes of the main loop itself (issue 70): a shard's pause is lost as it is saved
    (the shard paused in memory only), then the operator's resume (the shard running in
    memory only). Each time the daemon drops what it holds in memory and starts again in
    its process, from what is saved, as after a SIGKILL (before, it exited 3): the refused
    row pauses its shard again, the resume call is answered 503 and asked again works, and
    every row arrives, the other shards' rows flowing meanwhile."""
    task = admin_task(sandbox, tmp_path, CREATE)
    a = task.shards[0]
    down = task.sandbox.downstream
    try:
        task.start(fault_at="pause_saved_lost,resume_saved_lost")
        with Writer(task, rows_per_batch=10) as writer:  # (notes 'n1' .. 'n99999' fit VARCHAR(6))
            task.wait_for(lambda: writer.next_id > 100, what="rows flowing")
            down.execute(f"ALTER TABLE `{task.target_db}`.orders MODIFY note VARCHAR(6)")  # by hand, downstream
            task.sql(a, "INSERT INTO {t} VALUES (900001, 1.5, 'far too long')")
            shard = str(task.shard_id(a))
            task.wait_for(lambda: shard in _paused(task), what="the shard paused", timeout=120)
            log = task.log_text()
            assert "a write of the main loop lost the downstream" in log, log[-3000:]
            assert task.process.poll() is None
            assert "id=900001" in status(task)["paused"][shard]["reason"]
            down.execute(f"ALTER TABLE `{task.target_db}`.orders MODIFY note VARCHAR(20)")
            way_out = ("resume-shard", "--source", task.source_of(a[0]), "--table", f"{a[1]}.{a[2]}")
            lost = shardctl(task, *way_out)
            assert lost.returncode != 0 and "ask again in a while" in lost.stderr, lost.stderr + lost.stdout
            # (memory dropped: the shard is paused as saved, and the same call works now)
            task.wait_for(lambda: shard in _paused(task), what="the start again")
            again = shardctl(task, *way_out)
            assert again.returncode == 0, again.stderr
            time.sleep(1)
        task.wait_in_sync(timeout=120)
        assert status(task)["paused"] == {}
        assert task.process.poll() is None
        assert retries(task, "start", "2013") == 2
        assert task.stop() == 0
    finally:
        task.cleanup()


def _paused(task) -> dict:
    """The paused shards the admin API reports, or none while the daemon starts again (one
    call: its API may go away between two)."""
    try:
        return status(task)["paused"]
    except (OSError, ValueError, http.client.HTTPException):  # (refused, reset, a cut answer)
        return {}
