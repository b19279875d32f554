"""The daemon's watchdog (replicator/daemon/watchdog.py): a main loop that stops turning is
logged with the place its thread is at, once per stall; SIGUSR1 dumps every thread."""

from __future__ import annotations

import logging
import subprocess
import sys
import time

from replicator.daemon.watchdog import Watchdog
from tests.replication import REPO


def _stuck_here(seconds: float) -> None:
    time.sleep(seconds)


def test_a_main_loop_that_stops_turning_is_logged_with_where_it_is(caplog):
    watchdog = Watchdog(stall=0.4)
    with caplog.at_level(logging.WARNING, logger="shardmerge.daemon"):
        watchdog.start()
        try:
            for _ in range(5):  # turning: nothing logged
                watchdog.turned()
                time.sleep(0.1)
            assert not caplog.records
            _stuck_here(1.5)
            watchdog.turned()
            time.sleep(0.3)
        finally:
            watchdog.stop()
    stalls = [r.getMessage() for r in caplog.records if "has not turned" in r.getMessage()]
    assert len(stalls) == 1, stalls  # (once per stall)
    assert "_stuck_here" in stalls[0] and "test_watchdog.py" in stalls[0], stalls[0]


def test_sigusr1_writes_every_threads_stack():
    code = (
        "import os, signal, time\n"
        "from replicator.daemon.watchdog import Watchdog\n"
        "w = Watchdog(); w.start()\n"
        "os.kill(os.getpid(), signal.SIGUSR1); time.sleep(0.2); print('alive')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "alive", out
    assert "Current thread" in out.stderr and "watchdog.py" in out.stderr, out.stderr
