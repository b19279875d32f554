"""The daemon's tenure under its task's lease (replicator/state/lease.py): it runs the task
only while it holds the lease. It waits as a standby till then (its admin API answering
who runs the task); from then on every downstream connection registers itself, every
transaction that writes checks the lease is still this daemon's, and a thread renews it.
Released at a clean stop (a standby takes over at once), given up when the daemon starts
again in its process, and lost when another daemon took the task: then the process ends.

Threads: the main thread (the one that runs `Daemon.run`) acquires, releases and gives up
the lease. The renewer's own thread renews it, and calls `Lease.on_lost` when it is lost
(`_lease_lost`: the process ends, nothing of the daemon's state is touched from there);
`disarm` unsets that, on the main thread, before an abandon gives the lease up."""

from __future__ import annotations

import contextlib
import logging
import os
import threading

from replicator.apply.meta import Meta
from replicator.config import TaskConfig
from replicator.daemon import startup
from replicator.errors import ExitCode
from replicator.metrics import Metrics
from replicator.servers import connect_downstream
from replicator.state.lease import REGISTERING, Lease, Renewer

log = logging.getLogger("shardmerge.daemon")


class Tenure:
    def __init__(
        self,
        config: TaskConfig,
        down: dict,
        meta: Meta,
        metrics: Metrics,
        stopping: threading.Event,
        meta_ready: bool = False,
    ):
        """`down`: the daemon's downstream connection settings, which every connection of
        it reads: the lease, once held, has them register. `meta_ready`: the downstream was
        reached and the meta schema's tables made just before (`apply/early_meta.py`)."""
        self.config, self.down, self.meta, self.metrics, self.stopping = config, down, meta, metrics, stopping
        self.meta_ready = meta_ready
        self.lease: Lease | None = None  # this daemon runs the task while it holds it
        self.renewer: Renewer | None = None

    @property
    def epoch(self) -> int:
        """The epoch of the lease held (1 without one): the workers' stream server ids."""
        return self.lease.held.epoch if self.lease is not None and self.lease.held is not None else 1

    def acquire(self) -> bool:
        """Run the task only while holding its lease (replicator/state/lease.py): wait as a
        standby till then; from then on every downstream connection registers itself, and
        every transaction that writes checks the lease is still this daemon's. False:
        stopped while a standby."""
        options = self.config.options
        if not self.meta_ready:  # (lost since: the lease's first query fails, and the start goes again)
            startup.wait_for_downstream(self.down, self.stopping, options.max_backoff)
            self.meta.ensure()
        self.lease = Lease(
            lambda: connect_downstream(self.down), self.meta.q, self.config.task, options.lease_ttl
        )
        standby = []  # its admin API while it waits, if it has to

        def waiting() -> None:
            lease = self.lease
            standby.append(startup.start_standby_admin(self.config, lambda: lease.waiting_for, lease.name))

        try:
            if not self.lease.acquire(self.stopping, waiting=waiting):
                return False
        finally:
            for admin in standby:
                if admin is not None:
                    admin.stop()  # (the active's admin API starts in `Daemon.setup`)
        self.down["init_command"] = self.lease.registration()
        self.down["client_flag"] = self.down.get("client_flag", 0) | REGISTERING
        self.meta.close()  # (its connections so far did not register)
        self.lease.close()
        self.meta.fence = self.lease.fence
        self.lease.on_lost = _lease_lost
        self.renewer = Renewer(self.lease, self.metrics.retries.inc)
        self.renewer.start()
        return True

    def release(self) -> None:
        """At a clean stop, last: a standby takes over at once."""
        if self.renewer is not None:
            self.renewer.stop()
            self.lease.release()

    def disarm(self) -> None:
        """Before an abandon: the lease given up must not end the process (the next start
        runs in it)."""
        if self.lease is not None:
            self.lease.on_lost = None

    def give_up(self) -> None:
        """An abandon's: the renewal stopped and the lease released, whatever fails."""
        if self.renewer is not None:
            with contextlib.suppress(Exception):
                self.renewer.stop()
        if self.lease is not None:
            with contextlib.suppress(Exception):
                self.lease.release()


def _lease_lost(reason: str) -> None:
    """Another daemon runs the task now (or will): this one must write nothing more. Its
    transactions in flight fail their fence; it ends at once, its state is all in the
    downstream (a supervisor may start it again: it waits as a standby)."""
    log.error("%s; this daemon stops now, writing nothing more", reason)
    logging.shutdown()
    os._exit(ExitCode.WAITING)
