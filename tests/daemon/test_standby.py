"""Two daemons of one task (issue 45, docs/operations/high-availability.md): one holds the task's
lease and runs it, the other waits as a standby and takes over once the lease expires.
Rows flow throughout; at the end the downstream equals the shards (0 lost, 0 extra, 0
different), and a daemon that lost the lease wrote nothing after."""

from __future__ import annotations

import contextlib
import html
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from replicator.daemon.startup import stream_server_id
from tests.replication import REPO, ReplicationTask, SideDaemon, admin_task, free_port
from tests.traffic import Writer

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]

CREATE = (
    "CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, note VARCHAR(20)) "
    "DEFAULT CHARSET=utf8mb4"
)
TTL = 3.0  # the lease's life in these tests (the default is 6 s)


@pytest.fixture
def task(sandbox, tmp_path):
    t = ReplicationTask(sandbox, tmp_path, CREATE, options=f"  lease_ttl: {TTL}\n")
    yield t
    t.cleanup()


class Standby(SideDaemon):
    """A second daemon of the task, waiting as a standby."""

    def __init__(self, task: ReplicationTask, name: str = "standby", config: Path | None = None):
        super().__init__(task, name, config=config)


def lease(task: ReplicationTask) -> tuple[str, int]:
    (row,) = task.sandbox.downstream.execute(
        f"SELECT holder, epoch FROM `{task.meta_schema}`.lease WHERE task = '{task.name}'"
    )
    return str(row[0]), int(row[1])


@pytest.mark.long
def test_a_standby_takes_over_within_10s_when_the_active_is_killed_under_load(task):
    task.start(group=True)
    standby = Standby(task)
    try:
        standby.wait_for("standby: task", timeout=60)
        holder, epoch = lease(task)
        with Writer(task):
            time.sleep(2)
            task.kill(group=True)
            took = standby.wait_for(" running: ", timeout=30)
            time.sleep(2)
        assert took < 10, f"the standby took {took:.1f}s to take over"
        assert "took over task" in standby.text()
        now, after = lease(task)
        assert now != holder and after == epoch + 1
        task.wait_in_sync(timeout=120)
        assert standby.stop() == 0
    finally:
        standby.kill()


@pytest.mark.long
def test_a_frozen_active_past_its_lease_writes_nothing_once_the_standby_took_over(task):
    task.start(group=True)
    standby = Standby(task)
    try:
        standby.wait_for("standby: task", timeout=60)
        with Writer(task):
            time.sleep(2)
            os.killpg(task.process.pid, signal.SIGSTOP)  # frozen: a GC pause, a VM paused
            standby.wait_for(" running: ", timeout=30)
            time.sleep(2)
            os.killpg(task.process.pid, signal.SIGCONT)
            # it finds the lease taken and ends, writing nothing more
            code = task.wait_exit(timeout=30)
            time.sleep(1)
        assert code == 4, f"the old active did not step down (exit {code}):\n{task.log_text()[-3000:]}"
        assert "this daemon stops now, writing nothing more" in task.log_text()
        time.sleep(2)  # (its workers' ends logged)
        assert "Traceback" not in task.log_text(), task.log_text()[-3000:]  # a demotion ends quietly
        task.wait_in_sync(timeout=120)
        assert standby.stop() == 0
    finally:
        standby.kill()


def test_the_lease_connection_killed_is_made_again_and_the_lease_kept(task):
    task.start()
    holder, epoch = lease(task)
    down = task.sandbox.downstream
    with Writer(task):
        time.sleep(2)
        ids = [
            r[0]
            for r in down.execute(
                f"SELECT conn_id FROM `{task.meta_schema}`.lease_connection WHERE task = '{task.name}'"
            )
        ]
        for conn_id in ids:
            with contextlib.suppress(Exception):  # (one closed since it registered)
                down.execute(f"KILL CONNECTION {conn_id}")
        time.sleep(TTL * 2)  # past the lease's life: renewed on a new connection
    assert ids
    assert lease(task) == (holder, epoch)
    task.wait_in_sync(timeout=120)
    assert task.stop() == 0


@pytest.mark.long  # (a downstream restart, 66 s; a run's registrations told by boot: tests/server/test_lease.py)
def test_a_takeover_after_a_downstream_restart_kills_no_other_clients_session(task):
    """Issue 70: the connections a daemon registers outlive a restart of the downstream,
    which then gives their ids to other sessions. A takeover kills only the old holder's:
    those registered on this run of the server. Here idle sessions of another application
    connect after the restart, and those taking ids the old registrations name stay; the
    active is killed, the standby takes over, and every one of those sessions lives on
    (before, all of them that took such an id were killed)."""
    task.start(group=True)
    standby = Standby(task)
    others = []
    try:
        standby.wait_for("standby: task", timeout=60)
        down = task.sandbox.downstream
        with Writer(task):
            time.sleep(2)
            before = {int(r[0]) for r in down.execute(f"SELECT conn_id FROM `{task.meta_schema}`.lease_connection")}
            task.sandbox.restart_instance("down")
            for _ in range(max(before) + 100):  # (sessions till the ids pass the registered ones; those kept)
                conn = down.connect()
                with conn.cursor() as cur:
                    cur.execute("SELECT CONNECTION_ID()")
                    got = int(cur.fetchone()[0])
                if got in before:
                    others.append(conn)
                else:
                    conn.close()
                if got > max(before):
                    break
            assert others, f"no session took a registered id ({sorted(before)})"
            time.sleep(3)  # (the active reconnected meanwhile)
            task.kill(group=True)
            standby.wait_for(" running: ", timeout=30)
            time.sleep(2)
        assert "took over task" in standby.text()
        for conn in others:
            with conn.cursor() as cur:
                cur.execute("SELECT 1")
                assert cur.fetchone() == (1,)
        task.wait_in_sync(timeout=120)
        assert standby.stop() == 0
    finally:
        for conn in others:
            with contextlib.suppress(Exception):
                conn.close()
        standby.kill()


def _get(addr: str, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(addr + path, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_standby_answers_its_probes_and_query_status_and_takes_over_its_admin_api(sandbox, tmp_path):
    """Issue 70: a standby served no admin API (`/healthz` refused, `shardctl health` exit 3,
    so a HEALTHCHECK marked a healthy standby unhealthy for ever). Now it answers: alive with
    role standby, not ready (it runs nothing), `health` exits 0 saying it is a standby, and
    `query-status` names the daemon that runs the task. Once it takes over, its admin API is
    the active one's. (Here on one machine: the standby's config has a port of its own.)"""
    task = admin_task(sandbox, tmp_path, CREATE, options=f"  lease_ttl: {TTL}\n")
    standby = None
    try:
        task.start(group=True)
        port = free_port()
        config = Path(task.workdir) / "standby.yaml"
        mine = task.addr.rsplit(":", 1)[1]
        config.write_text(task.config_path.read_text().replace(f"port: {mine}", f"port: {port}"))
        standby = Standby(task, config=config)
        standby.wait_for("standby: task", timeout=60)
        addr = f"http://127.0.0.1:{port}"
        holder, epoch = lease(task)
        assert _get(addr, "/healthz") == (200, {"status": "alive", "role": "standby"})
        code, ready = _get(addr, "/readyz")
        assert code == 503 and ready["role"] == "standby" and ready["not_ready"] == ["standby"], ready
        ctl = [sys.executable, "-m", "replicator.cli.shardctl", "--addr", addr]
        health = subprocess.run([*ctl, "health"], capture_output=True, text=True, cwd=REPO, timeout=60)
        assert health.returncode == 0 and health.stdout.startswith("standby: "), health.stdout + health.stderr
        shown = subprocess.run([*ctl, "query-status"], capture_output=True, text=True, cwd=REPO, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert f"is run by {holder} (lease epoch {epoch})" in shown.stdout, shown.stdout
        # a browser opening the standby's live view is told where the task runs (not a JSON 404)
        with pytest.raises(urllib.error.HTTPError) as page:
            urllib.request.urlopen(addr + "/", timeout=10)
        text = page.value.read().decode()
        assert page.value.code == 503 and page.value.headers["Content-Type"].startswith("text/html")
        assert f"the task is run by {holder} (epoch {epoch})" in html.unescape(text), text
        task.kill(group=True)
        standby.wait_for(" running: ", timeout=30)
        deadline = time.monotonic() + 60
        while _get(addr, "/readyz")[0] != 200:
            assert time.monotonic() < deadline, _get(addr, "/readyz")
            time.sleep(0.5)
        assert _get(addr, "/healthz") == (200, {"status": "alive", "role": "active"})
        assert standby.stop() == 0
    finally:
        if standby is not None:
            standby.kill()
        task.cleanup()


@pytest.mark.parametrize("configured", [1, 9001, 9002, 2**31 - 1, 2**31 + 1, 4200000001, 2**32 - 1])
def test_consecutive_holders_stream_with_server_ids_of_their_own(configured):
    """Issue 70: both daemons streamed with the configured server_id, so the new active's
    dumps ended the frozen one's (MariaDB 4052) and woken, it would end theirs. The holder
    of an odd epoch streams with the configured id, of an even one with another, never 0,
    and two sources' ids stay apart under either."""
    odd, even = stream_server_id(configured, 1), stream_server_id(configured, 2)
    assert odd == configured == stream_server_id(configured, 3)
    assert even != odd and 1 <= even < 2**32 and even == stream_server_id(configured, 4)
    other = configured - 1 if configured > 1 else 2
    assert stream_server_id(other, 2) != even
