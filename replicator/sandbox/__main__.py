"""The watchdog process (`python -m replicator.sandbox --watch PARENT_PID ROOT`, started by
watchdog.start_watchdog)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from replicator.sandbox.lifecycle import Sandbox
from replicator.sandbox.state import STATE_FILE


def _watch(parent: int, root: Path) -> int:
    """Run by the watchdog process: once `parent` is gone, tear the sandbox down."""
    state_file = root / STATE_FILE
    while os.getppid() == parent and state_file.exists():
        time.sleep(0.5)
    if state_file.exists():
        Sandbox(root).down()
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--watch":
        sys.exit(_watch(int(sys.argv[2]), Path(sys.argv[3])))
    sys.exit(f"usage: {sys.argv[0]} --watch PARENT_PID ROOT")
