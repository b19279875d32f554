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
from collections.abc import Callable, Iterable

import pymysql

from replicator.apply.meta import Meta
from replicator.config import TaskConfig
from replicator.daemon import startup
from replicator.daemon.membership import Membership, Standing
from replicator.errors import ExitCode
from replicator.metrics import Metrics
from replicator.servers import connect_downstream
from replicator.state.lease import REGISTERING, Lease, LeaseLost, Renewer, daemon_name
from replicator.state.members import Member, MemberExpired
from replicator.state.renewal import Gone, Renewal
from replicator.transient import SourcesLost

log = logging.getLogger("shardmerge.daemon")
PROCESS_LEASE_NAME = daemon_name()  # a member's, for every start of its process


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
        # as one member of the task (`join`): what this start runs with, and its row's renewal
        self.standing: Standing | None = None
        self.membership: Membership | None = None
        self.member: Member | None = None
        self.member_renewal: Renewal | None = None

    @property
    def epoch(self) -> int:
        """The epoch of the lease held, or of the member (1 without either)."""
        if self.standing is not None:
            return self.standing.member.epoch
        return self.lease.held.epoch if self.lease is not None and self.lease.held is not None else 1

    def stream_epochs(self, sources: Iterable[str]) -> dict[str, int]:
        """What each source's stream server id flips by (`startup.stream_server_id`): the
        lease's epoch (a standby taking over streams under the other id), or for a member each
        source's generation (its next reader streams under the other id)."""
        if self.standing is None or self.membership is None:
            return {s: self.epoch for s in sources}
        generations = self.membership.members.generations()
        return {s: generations.get(s, 1) for s in sources}

    @property
    def coordinates(self) -> bool:
        """Whether this daemon decides the task's DDL: its only daemon, or the member holding
        its lease."""
        return self.standing is None or self.standing.coordinator

    def acquire(self) -> bool:
        """Run the task only while holding its lease (replicator/state/lease.py): wait as a
        standby till then; from then on every downstream connection registers itself, and
        every transaction that writes checks the lease is still this daemon's. False:
        stopped while a standby."""
        self._reach_meta()
        self.lease = self._lease()
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
        self._hold()
        return True

    def join(self, membership: Membership, waits: Callable[[str], None] | None = None) -> Standing | None:
        """A member's start (issue 75; `replicator/daemon/membership.py`): joined in a new
        epoch, its row renewed; the lease taken if it is free (then this member coordinates);
        once it reads a source or coordinates, every transaction that writes checks it still
        reads its sources (and holds the lease, if it does). None: stopped while it waited.
        `waits`: told why, once, while it waits for a source."""
        self._reach_meta()
        # (one name for every start of the process: a member that starts again takes its
        # lease back, if it held it, before another member does)
        self.membership, self.lease = membership, self._lease(PROCESS_LEASE_NAME)
        member = self.member = membership.join()
        # (each downstream connection registers: cut off in a transaction, the coordinator
        # ends its session before it gives the member's sources to others)
        self._register(membership.members.registration(member))
        self.member_renewal = membership.members.renewal(
            member, self.config.options.lease_ttl, self.metrics.retries.inc, _member_gone
        )
        self.member_renewal.start()
        said = False
        while not self.stopping.is_set():
            with contextlib.suppress(pymysql.err.MySQLError):
                coordinator = self.lease.held is not None or self.lease.try_acquire()
                if coordinator and self.renewer is None:
                    self._hold()
                standing = membership.standing(member, coordinator)
                if standing.runs:
                    break
                if not said:
                    why = f"member {member.name} (epoch {member.epoch}) reads no source yet: it waits"
                    log.info(why)
                    if waits is not None:
                        waits(why)
                    said = True
            self.stopping.wait(1.0)
        else:
            return None
        self.standing = standing
        fences = [self._lease_fence] if standing.coordinator else []
        fences.append(membership.fence(standing))

        def fence(cur) -> None:
            for check in fences:
                check(cur)

        self.meta.fence = fence
        log.info(
            "member %s (epoch %d)%s reads %s",
            member.name,
            member.epoch,
            " coordinates the task and" if standing.coordinator else "",
            ", ".join(sorted(standing.sources)) or "no source",
        )
        return standing

    def _reach_meta(self) -> None:
        if not self.meta_ready:  # (lost since: the lease's first query fails, and the start goes again)
            startup.wait_for_downstream(self.down, self.stopping, self.config.options.max_backoff)
            self.meta.ensure()

    def _lease(self, name: str | None = None) -> Lease:
        ttl = self.config.options.lease_ttl
        return Lease(lambda: connect_downstream(self.down), self.meta.q, self.config.task, ttl, name)

    def _hold(self) -> None:
        """The lease held: every downstream connection registers, every write is fenced by
        it, and a thread renews it."""
        registration = self.lease.registration()
        if self.member is not None:
            registration += "; " + self.membership.members.registration(self.member)
        self._register(registration)
        self.meta.fence = self.lease.fence
        self.lease.on_lost = _lease_lost if self.member is None else self._lost_as_member
        self.renewer = Renewer(self.lease, self.metrics.retries.inc)
        self.renewer.start()

    def _register(self, registration: str) -> None:
        self.down["init_command"] = registration
        self.down["client_flag"] = self.down.get("client_flag", 0) | REGISTERING
        self.meta.close()  # (its connections so far did not register)
        if self.lease is not None:
            self.lease.close()

    def release(self) -> None:
        """At a clean stop, last: a standby takes over at once (a member's sources go to the
        others at the coordinator's next tick)."""
        if self.renewer is not None:
            self.renewer.stop()
            self.lease.release()
        if self.member_renewal is not None:
            self.member_renewal.stop()
            with contextlib.suppress(pymysql.err.MySQLError):
                self.membership.leave(self.member)

    def disarm(self) -> None:
        """Before an abandon: the lease given up must not end the process (the next start
        runs in it)."""
        if self.lease is not None:
            self.lease.on_lost = None

    def give_up(self) -> None:
        """An abandon's: the renewal stopped and the lease released, whatever fails (a member
        joins again at its next start, in a new epoch)."""
        if self.member_renewal is not None:
            self.member_renewal.stop()
            if self.renewer is not None:
                with contextlib.suppress(Exception):
                    self.renewer.stop()  # (the lease left to expire: the next start takes it back)
                return
        if self.renewer is not None:
            with contextlib.suppress(Exception):
                self.renewer.stop()
        if self.lease is not None:
            with contextlib.suppress(Exception):
                self.lease.release()


    def _lease_fence(self, cur) -> None:
        """A coordinating member's: the lease another's, its transaction commits nothing and
        is tried again (`SourcesLost`, transient) till the member starts again, as a member."""
        try:
            self.lease.fence(cur)
        except LeaseLost as exc:
            raise SourcesLost(f"{exc}: member {self.member.name} no longer coordinates") from exc

    def _lost_as_member(self, reason: str) -> None:
        """A coordinating member's lease is another's (cut off longer than its time to live,
        another member took it): every transaction of this one fails its fence from now on, and
        it starts again at its loop's next look, as a member (`Membership.tick`), rather than
        end its process as a daemon that lost its task does (issue 75: chaos with partitions).
        Called on the renewer's thread: it only puts the reason, a string, for the main one."""
        log.warning("%s; member %s stops coordinating", reason, self.member.name)
        self.membership.lost = reason


def _member_gone(gone: Gone) -> None:
    """The member's row expired (its main loop's look at its standing starts it again), or
    another daemon joined under its name: that one reads this one's sources now."""
    if isinstance(gone, MemberExpired):
        log.warning("%s", gone)
        return
    _lease_lost(str(gone))


def _lease_lost(reason: str) -> None:
    """Another daemon runs the task now (or will): this one must write nothing more. Its
    transactions in flight fail their fence; it ends at once, its state is all in the
    downstream (a supervisor may start it again: it waits as a standby)."""
    log.error("%s; this daemon stops now, writing nothing more", reason)
    logging.shutdown()
    os._exit(ExitCode.WAITING)
