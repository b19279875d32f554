"""A folder in memory for the test servers' data, where the machine has one to spare.

A MariaDB server on ext4 spends most of a DDL-heavy test in the file system: every CREATE,
ALTER and DROP of an InnoDB table creates, renames or deletes files and syncs them (the
fuzzer's regression stories: 20 s on the disk, 10 s in /dev/shm; the flush and doublewrite
options change nothing there). The sandbox's data is disposable, so `make test` keeps its
temporary folders (the sandboxes' among them) in /dev/shm when that is a tmpfs with room, and
removes them at the end. A run killed before its end leaves its folder: the next run removes
the folders of processes that are gone."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

RAM = Path("/dev/shm")
PREFIX = "shardmerge-tests-"
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> None:
    """The folders of runs whose process is gone (killed before they could remove them)."""
    for folder in RAM.glob(f"{PREFIX}*"):
        pid = folder.name[len(PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def make() -> Path | None:
    """A new folder in memory for this process's run, or None where there is no room for one
    (the tests then keep their files where pytest puts them)."""
    if not RAM.is_dir() or not _tmpfs(RAM):
        return None
    remove_stale()
    if _room(RAM) < NEEDED:
        return None
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=RAM))
