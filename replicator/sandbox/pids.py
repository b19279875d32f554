"""mariadbd processes by their pid: whether one is alive (a zombie is not), which datadir it
serves, the ones serving a datadir under a root, and stopping them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Orphans are reaped by pid 1, which in some containers never does it: a zombie is dead.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.decode(errors="replace").split("\0")


def is_server_for(pid: int, datadir: Path) -> bool:
    args = _cmdline(pid)
    if args is None:
        # No /proc (not Linux): trust the pid.
        return not Path("/proc/self").exists()
    return f"--datadir={datadir}" in args


def servers_under(root: Path) -> list[int]:
    """Pids of mariadbd processes whose datadir lies under `root`."""
    prefix = f"--datadir={root}{os.sep}"
    pids = []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            args = _cmdline(int(entry.name))
            if args and any(arg.startswith(prefix) for arg in args) and pid_alive(int(entry.name)):
                pids.append(int(entry.name))
    return pids


def terminate(pids: list[int], timeout: float, procs: Iterable[subprocess.Popen[bytes]]) -> None:
    """SIGTERM, wait up to `timeout`, then SIGKILL whatever is left."""
    children = {proc.pid: proc for proc in procs}

    def alive(pid: int) -> bool:
        proc = children.get(pid)
        if proc is not None:
            return proc.poll() is None
        return pid_alive(pid)

    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        for pid in pids:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not any(alive(pid) for pid in pids):
            return
