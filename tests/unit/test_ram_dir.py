"""The test runs' folder in memory (tests/ram_dir.py): made where /dev/shm is a tmpfs with room,
and the folders of runs whose process is gone removed by the next."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests import ram_dir

pytestmark = pytest.mark.skipif(not ram_dir.available(), reason="no tmpfs with room here")


def test_a_folder_is_made_in_memory_named_by_the_process():
    folder = ram_dir.make("shardmerge-unit-")
    try:
        assert folder is not None and folder.parent == ram_dir.RAM and folder.is_dir()
        assert folder.name.startswith(f"shardmerge-unit-{os.getpid()}-")
    finally:
        os.rmdir(folder)


def test_the_folders_of_processes_gone_are_removed_and_the_living_ones_kept():
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = ram_dir.RAM / f"shardmerge-unit-{ended.stdout.strip()}-abc"
    living = ram_dir.RAM / f"shardmerge-unit-{os.getpid()}-def"
    for folder in (dead, living):
        (folder / "data").mkdir(parents=True)
    try:
        ram_dir.remove_stale("shardmerge-unit-")
        assert not dead.exists() and (living / "data").is_dir()
    finally:
        for folder in (dead, living):
            subprocess.run(["rm", "-rf", str(folder)], check=True)
