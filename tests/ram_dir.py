"""A folder in memory for the test servers' data, where the machine has one to spare.

A MariaDB server on ext4 spends most of a DDL-heavy test in the file system: every CREATE,
ALTER and DROP of an InnoDB table creates, renames or deletes files and syncs them (the
fuzzer's regression stories: 20 s on the disk, 10 s in /dev/shm; the flush and doublewrite
options change nothing there). The sandbox's data is disposable, so `make test` keeps its
temporary folders (the sandboxes' among them) in /dev/shm when that is a tmpfs with room, and
removes them at the end; so does `make fuzz` with its sandbox. A run killed before its end
leaves its folder: the next run removes the folders of processes that are gone."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from replicator.sandbox.pids import pid_alive

RAM = Path("/dev/shm")
TESTS = "shardmerge-tests-"
NEEDED = 6 << 30  # bytes free: four workers' sandboxes and daemons take about 2 GiB


def _tmpfs(path: Path) -> bool:
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return False
    return any(line.split()[1:3] == [str(path), "tmpfs"] for line in mounts if len(line.split()) > 2)


def _room(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def remove_stale(prefix: str) -> None:
    """The folders of runs whose process is gone (killed before they could remove them)."""
    for folder in RAM.glob(f"{prefix}*"):
        pid = folder.name[len(prefix) :].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def available() -> bool:
    """Whether /dev/shm is a tmpfs with room for a run."""
    return RAM.is_dir() and _tmpfs(RAM) and _room(RAM) >= NEEDED


def make(prefix: str = TESTS) -> Path | None:
    """A new folder in memory for this process's run (named `prefix`, its pid, a suffix), or
    None where there is no room for one (the caller keeps its files on disk then)."""
    if not RAM.is_dir() or not _tmpfs(RAM):
        return None
    remove_stale(prefix)
    if not available():
        return None
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=RAM))
