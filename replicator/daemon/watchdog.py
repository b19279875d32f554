"""Where the daemon's main thread is when it stops turning: the admin API answers 503
meanwhile, and an operator needs the place, not a guess. A thread of its own looks at the
time of the main loop's last turn (or of its last wait for the applier, where it answers
reads); past STALL seconds it logs the main thread's stack once per stall. SIGUSR1 writes
every thread's stack to stderr (Python's faulthandler) at any time."""

from __future__ import annotations

import faulthandler
import logging
import signal
import sys
import threading
import time
import traceback

log = logging.getLogger("shardmerge.daemon")
STALL = 20.0  # seconds: the admin API gives up on the main thread after 30 (CALL_TIMEOUT)


class Watchdog:
    """`turned()` from the main loop each turn; `start()`, `stop()` around the loop. The
    main thread only writes `last` (one float, replaced whole); this thread only reads it."""

    def __init__(self, stall: float = STALL):
        self.stall = stall
        self.last = time.monotonic()
        self._main = threading.main_thread().ident
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="watchdog", daemon=True)

    @staticmethod
    def dump_on_sigusr1() -> None:
        """SIGUSR1 writes every thread's stack to stderr (from the start on: a standby too)."""
        if threading.current_thread() is threading.main_thread():
            faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)

    def start(self) -> None:
        self.dump_on_sigusr1()
        self.last = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def turned(self) -> None:
        self.last = time.monotonic()

    def _watch(self) -> None:
        logged_for = None
        while not self._stopped.wait(self.stall / 4):
            last = self.last
            idle = time.monotonic() - last
            if idle < self.stall or logged_for == last:
                continue
            logged_for = last
            frame = sys._current_frames().get(self._main)
            where = "".join(traceback.format_stack(frame)) if frame is not None else "(not found)\n"
            log.warning(
                "the main loop has not turned for %.0f s (the admin API answers 503 meanwhile); "
                "the main thread is at:\n%s",
                idle,
                where.rstrip(),
            )
