"""The watchdog: a small process that tears a sandbox down once the process that brought it up
is gone, even SIGKILLed (its loop is `python -m replicator.sandbox --watch`, __main__.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def start_watchdog(root: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    package_parent = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    # Its own session, so the Ctrl-C that interrupts the parent leaves it alive to clean up.
    return subprocess.Popen(
        [sys.executable, "-m", "replicator.sandbox", "--watch", str(os.getpid()), str(root)],
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
