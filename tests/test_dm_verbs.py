"""DM's verbs with DM's meaning (issue 46), on the operator's path: `shardmerge` run as a
process against the sandbox. `check-task` is `check`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.replication import REPO, admin_task

pytestmark = pytest.mark.timeout(300)

CREATE = "CREATE TABLE {table} (id INT NOT NULL PRIMARY KEY, a INT NULL, b FLOAT NULL)"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def shardmerge(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "replicator.control.cli", *args],
        capture_output=True, text=True, cwd=REPO, env=ENV, timeout=120,
    )


def test_check_task_is_check(sandbox, tmp_path):
    task = admin_task(sandbox, tmp_path, CREATE)
    try:
        check = shardmerge("check", "--config", str(task.config_path), "--json")
        alias = shardmerge("check-task", str(task.config_path), "--json")
        assert check.returncode == alias.returncode and check.returncode in (0, 2), check.stderr
        assert json.loads(alias.stdout) == json.loads(check.stdout)
        both = shardmerge("check-task", str(task.config_path), "--config", str(task.config_path))
        assert both.returncode == 2 and "give the task config once: CONFIG, or --config FILE" in both.stderr
    finally:
        task.cleanup()
