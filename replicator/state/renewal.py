"""A row of the meta schema renewed every third of its time to live by a thread of its own
(`Renewal`): the lease's (state/lease.py) and each member's (state/members.py). A renewal the
downstream fails (a killed connection, the server away) is said once, counted and tried again:
nothing can be written meanwhile either. One that finds the row another's ends the thread,
after `gone` is told (the daemon ends, or lets its sources go)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pymysql

from replicator.transient import error_kind

log = logging.getLogger("shardmerge.lease")


class Gone(RuntimeError):
    """The row is another's now (a standby took the lease, a member's epoch is gone)."""


class Renewal(threading.Thread):
    def __init__(
        self,
        name: str,
        what: str,
        every: float,
        renew: Callable[[], None],
        count: Callable[[str, str], None] | None = None,
        gone: Callable[[Gone], None] | None = None,
    ):
        """`renew` raises `Gone` (or a subclass) once the row is another's; `count`: each
        renewal tried again, by stage (`name`) and error kind (the metrics)."""
        super().__init__(name=name, daemon=True)
        self.what, self.every, self.renew = what, every, renew
        self.count, self.gone = count, gone
        self.done = threading.Event()

    def run(self) -> None:
        failing = False
        while not self.done.wait(self.every):
            try:
                self.renew()
            except Gone as exc:
                # (a renewal stopped while its call hung, cut off, finds its row another's once
                # healed: the start that stopped it joined again, and is told nothing of it)
                if self.gone is not None and not self.done.is_set():
                    self.gone(exc)
                return
            except pymysql.err.MySQLError as exc:
                if not failing:
                    log.warning("%s not renewed (%s); trying again", self.what, exc)
                failing = True
                if self.count is not None:
                    self.count(self.name, error_kind(exc))
            else:
                if failing:
                    log.info("%s renewed again", self.what)
                failing = False

    def stop(self) -> None:
        self.done.set()
