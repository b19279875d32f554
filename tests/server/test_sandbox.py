"""The sandbox against real MariaDB servers: binlog settings the replicator relies on, stop and
start of single instances, the `shardmerge sandbox` CLI, and cleanup after a crashed parent."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import WriteRowsEvent

from replicator.sandbox import Instance, Sandbox

pytestmark = pytest.mark.mariadb

REPO = Path(__file__).resolve().parents[2]


def variables(inst: Instance, *names: str) -> dict[str, str]:
    quoted = ", ".join(f"'{name}'" for name in names)
    return dict(inst.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({quoted})"))


def server_pids_under(root: Path) -> list[int]:
    """Live (non-zombie) mariadbd processes whose datadir is under `root`."""
    prefix = f"--datadir={root.resolve()}/"
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().decode().split("\0")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state != "Z" and any(arg.startswith(prefix) for arg in args):
            pids.append(int(entry.name))
    return pids


def wait_until(predicate: Callable[[], bool], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def test_upstreams_write_full_row_binlogs(sandbox: Sandbox) -> None:
    assert [inst.name for inst in sandbox.upstreams] == ["up1", "up2"]
    for inst in sandbox.upstreams:
        assert variables(inst, "log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata") == {
            "log_bin": "ON",
            "binlog_format": "ROW",
            "binlog_row_image": "FULL",
            "binlog_row_metadata": "FULL",
        }, inst.name


def test_every_instance_is_a_utf8mb4_server(sandbox: Sandbox) -> None:
    for inst in sandbox.instances:
        assert variables(inst, "character_set_server", "collation_server") == {
            "character_set_server": "utf8mb4",
            "collation_server": "utf8mb4_general_ci",
        }, inst.name


def test_server_ids_are_unique_and_as_recorded(sandbox: Sandbox) -> None:
    actual = {inst.name: inst.execute("SELECT @@server_id")[0][0] for inst in sandbox.instances}
    assert actual == {inst.name: inst.server_id for inst in sandbox.instances}
    assert len(set(actual.values())) == len(actual)
    assert sandbox.downstream.server_id == 1
    assert len({inst.port for inst in sandbox.instances}) == len(sandbox.instances)


def test_execute_returns_rows_of_the_last_statement(sandbox: Sandbox, scratch_db: str) -> None:
    inst = sandbox.upstreams[0]
    rows = inst.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(20));"
        "INSERT INTO t VALUES (1, 'a;b'), (2, 'ü');"
        "SELECT id, note FROM t ORDER BY id",
        database=scratch_db,
    )
    assert rows == [(1, "a;b"), (2, "ü")]
    last = inst.execute(["DELETE FROM t WHERE id = 1", "SELECT COUNT(*) FROM t"], database=scratch_db)
    assert last == [(1,)]
    assert inst.execute("DELETE FROM t", database=scratch_db) == []


def test_row_written_upstream_shows_up_in_binlog(sandbox: Sandbox, scratch_db: str) -> None:
    up1, up2 = sandbox.upstreams
    up1.execute("CREATE TABLE orders (id INT PRIMARY KEY, note VARCHAR(20))", database=scratch_db)
    log_file, log_pos = up1.execute("SHOW MASTER STATUS")[0][:2]
    up2_file, up2_pos = up2.execute("SHOW MASTER STATUS")[0][:2]

    up1.execute("INSERT INTO orders VALUES (7, 'seven')", database=scratch_db)

    events = up1.execute(f"SHOW BINLOG EVENTS IN '{log_file}' FROM {log_pos}")
    kinds = [event[2] for event in events]
    assert any(kind.startswith("Write_rows") for kind in kinds), kinds
    assert any(
        kind == "Table_map" and f"({scratch_db}.orders)" in info for _, _, kind, _, _, info in events
    ), events
    assert all(event[3] == up1.server_id for event in events)
    # The other upstream has its own binlog: nothing was written there.
    assert up2.execute("SHOW MASTER STATUS")[0][:2] == (up2_file, up2_pos)


def test_binlog_reader_sees_column_names_and_values(sandbox: Sandbox, scratch_db: str) -> None:
    inst = sandbox.upstreams[1]
    inst.execute("CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(20))", database=scratch_db)
    log_file, log_pos = inst.execute("SHOW MASTER STATUS")[0][:2]
    inst.execute("INSERT INTO t VALUES (1, 'héllo')", database=scratch_db)

    stream = BinLogStreamReader(
        connection_settings={
            "host": inst.host,
            "port": inst.port,
            "user": inst.user,
            "password": inst.password,
        },
        server_id=4242,
        log_file=log_file,
        log_pos=log_pos,
        resume_stream=True,
        only_events=[WriteRowsEvent],
        only_schemas=[scratch_db],
        blocking=False,
    )
    try:
        rows = [(event.table, row["values"]) for event in stream for row in event.rows]
    finally:
        stream.close()
    # Column names come from binlog_row_metadata=FULL, not from a lookup of the current schema.
    assert rows == [("t", {"id": 1, "note": "héllo"})]


def test_stopped_upstream_comes_back_with_its_data_and_port(sandbox: Sandbox, scratch_db: str) -> None:
    inst = sandbox.instance("up2")
    inst.execute("CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (1), (2)", database=scratch_db)
    old_pid = sandbox.pid("up2")
    assert old_pid is not None
    try:
        sandbox.stop_instance("up2")
        assert not inst.ping()
        with pytest.raises(pymysql.err.OperationalError):
            inst.connect(connect_timeout=1)
        status = {s.name: s for s in sandbox.status()}
        assert status["up2"].running is False
        assert status["up2"].pid is None
        assert status["up1"].running and status["down"].running
    finally:
        restarted = sandbox.start_instance("up2")
    assert restarted.port == inst.port
    assert sandbox.pid("up2") not in (None, old_pid)
    assert inst.execute("SELECT id FROM t ORDER BY id", database=scratch_db) == [(1,), (2,)]
    assert inst.execute("SELECT @@server_id, @@log_bin")[0] == (inst.server_id, 1)


def test_restart_after_crash_keeps_committed_rows(sandbox: Sandbox, scratch_db: str) -> None:
    down = sandbox.downstream
    down.execute("CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (1)", database=scratch_db)
    old_pid = sandbox.pid("down")
    restarted = sandbox.restart_instance("down", graceful=False)
    assert restarted == down
    assert sandbox.pid("down") not in (None, old_pid)
    assert down.execute("SELECT id FROM t", database=scratch_db) == [(1,)]


def test_up_is_idempotent(sandbox: Sandbox) -> None:
    before = {s.name: (s.pid, s.port) for s in sandbox.status()}
    again = Sandbox(sandbox.root)  # another handle, like a second process
    assert again.up() == sandbox.instances
    assert {s.name: (s.pid, s.port) for s in again.status()} == before


def shardmerge(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("shardmerge")
    # What the console script does; `-m replicator.cli.shardmerge` would load cli.py twice (once as __main__)
    # and CliError from the subcommand would then escape main() as a traceback.
    run_main = "import sys; from replicator.cli.shardmerge import main; sys.exit(main())"
    cmd = [str(script)] if script.exists() else [sys.executable, "-c", run_main]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [*cmd, *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=120, check=False
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_cli_up_status_down(tmp_path: Path) -> None:
    root = tmp_path / "cli-sandbox"
    try:
        up = shardmerge("sandbox", "up", "--dir", str(root), "--upstreams", "1")
        lines = up.stdout.splitlines()
        assert [line.split()[0] for line in lines] == ["up1", "down"]
        assert "upstream" in lines[0] and "server_id=101" in lines[0]
        assert "downstream" in lines[1] and "server_id=1" in lines[1]

        status = json.loads(shardmerge("sandbox", "status", "--dir", str(root), "--json").stdout)
        instances = {item["name"]: item for item in status["instances"]}
        assert set(instances) == {"up1", "down"}
        assert all(item["running"] and item["version"].startswith("10.") for item in instances.values())
        for item in instances.values():
            assert f"127.0.0.1:{item['port']}" in up.stdout
            inst = Sandbox.attach(root).instance(item["name"])
            assert inst.execute("SELECT @@port, @@server_id")[0] == (item["port"], item["server_id"])
        pids = set(server_pids_under(root))
        assert pids == {item["pid"] for item in instances.values()}

        # A second `up` reuses the running servers and keeps the upstream count.
        assert shardmerge("sandbox", "up", "--dir", str(root)).stdout == up.stdout
        assert set(server_pids_under(root)) == pids

        table = shardmerge("sandbox", "status", "--dir", str(root)).stdout
        header = ["NAME", "ROLE", "ADDRESS", "SERVER_ID", "PID", "RUNNING", "VERSION"]
        assert table.splitlines()[0].split() == header
        assert len(table.splitlines()) == 3

        # A stopped server shows in status (exit 1) and the next `up` brings it back.
        Sandbox.attach(root).stop_instance("up1")
        stopped = shardmerge("sandbox", "status", "--dir", str(root), "--json", check=False)
        assert stopped.returncode == 4
        assert {i["name"]: i["running"] for i in json.loads(stopped.stdout)["instances"]} == {
            "up1": False,
            "down": True,
        }
        assert shardmerge("sandbox", "up", "--dir", str(root)).stdout == up.stdout
        assert len(server_pids_under(root)) == 2

        shardmerge("sandbox", "down", "--dir", str(root))
        assert wait_until(lambda: not server_pids_under(root), timeout=5), server_pids_under(root)
        assert not (root / "up1").exists() and not (root / "down").exists()
        assert not (root / "sandbox.json").exists()

        gone = shardmerge("sandbox", "status", "--dir", str(root), check=False)
        assert gone.returncode == 2 and "no sandbox" in gone.stderr and "Traceback" not in gone.stderr
    finally:
        Sandbox(root).down()


def test_down_finds_servers_when_state_file_is_lost(tmp_path: Path) -> None:
    root = tmp_path / "lost"
    sb = Sandbox(root, upstreams=1)
    sb.up()
    try:
        assert len(server_pids_under(root)) == 2
        (root / "sandbox.json").unlink()
        Sandbox(root).down()
        assert server_pids_under(root) == []
        assert not (root / "up1").exists() and not (root / "down").exists()
    finally:
        sb.down()


def test_watchdog_stops_servers_when_parent_is_killed(tmp_path: Path) -> None:
    root = tmp_path / "orphaned"
    child = textwrap.dedent(
        f"""
        import sys, time
        from replicator.sandbox import Sandbox
        Sandbox({str(root)!r}, upstreams=1, watchdog=True).up()
        print("up", flush=True)
        time.sleep(600)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "up\n"
        assert len(server_pids_under(root)) == 2
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert wait_until(lambda: not server_pids_under(root) and not root.exists(), timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        Sandbox(root).down()
        shutil.rmtree(root, ignore_errors=True)
