"""Which daemon of a task writes: a lease in the downstream meta schema
(docs/operations/high-availability.md).

Two or more daemons may run one task; one holds the lease and works, the others wait as
standbys. The holder renews it every third of its time to live. Every transaction that
writes rows, checkpoints, journal entries or decisions first takes a shared lock on the
lease row as held by this daemon, with its epoch (`fence`), so the writes of a daemon
that lost the lease (frozen, cut off) can never commit: a standby takes the lease only
once it expired, with an exclusive lock on that row, bumping the epoch. A transaction of
the old holder either committed before that, or finds the epoch gone from under it and
rolls back. A frozen holder's open transaction would keep its shared lock for good, so
the standby first kills the connections the old holder registered (each of its
downstream connections registers itself as it opens: `init_command`). The holder's own
writes need no unexpired lease: while it cannot renew it (the downstream away), it can
write nothing either, and once a standby took over, its epoch is gone.

Times are the downstream server's (NOW(6)): the daemons' clocks are never compared."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pymysql
from pymysql.constants import CLIENT

from lattice import quote_string
from replicator.state import registered
from replicator.state.registered import BOOT
from replicator.state.renewal import Gone, Renewal
from replicator.transient import METADATA_LOCK_WAIT

log = logging.getLogger("shardmerge.lease")
PRUNE_EVERY = 30  # renewals between two prunings of the registered connections
REGISTERING = CLIENT.MULTI_STATEMENTS  # (the `client_flag` a connection running `registration` needs)

LEASE_SQL = [
    """CREATE TABLE IF NOT EXISTS {m}.lease (
  task VARCHAR(64) NOT NULL PRIMARY KEY, holder VARCHAR(255) NOT NULL, epoch BIGINT NOT NULL,
  expires DATETIME(6) NOT NULL, acquired DATETIME(6) NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS {m}.lease_connection (
  task VARCHAR(64) NOT NULL, epoch BIGINT NOT NULL, conn_id BIGINT UNSIGNED NOT NULL,
  booted BIGINT NULL, PRIMARY KEY (task, epoch, conn_id))""",
]


class LeaseView:
    """The task's lease as the tools see it (they hold none): whether a daemon runs it."""

    def __init__(self, db):
        self.db = db

    def holder(self) -> str | None:
        """The name the live lease is held under (None: free)."""
        db = self.db
        rows = db.rows(f"SELECT holder FROM {db.q}.lease WHERE task = {db.t} AND expires > NOW(6)")
        return str(rows[0][0]) if rows else None

    def live(self) -> bool:
        db = self.db
        rows = db.rows(f"SELECT expires > NOW(6) FROM {db.q}.lease WHERE task={db.t}")
        return bool(rows and rows[0][0])

    def lock_live(self, cur) -> bool:
        """In the caller's transaction on `cur`: the lease's row locked (a daemon starting
        meanwhile waits for it), and whether a daemon holds it unexpired."""
        db = self.db
        cur.execute(f"SELECT expires > NOW(6) FROM {db.q}.lease WHERE task={db.t} FOR UPDATE")
        row = cur.fetchone()
        return bool(row is not None and row[0])


class LeaseLost(Gone):
    """This daemon does not hold the task's lease (any more): it must not write."""


@dataclass(frozen=True)
class Holder:
    """A daemon holding (or having held) the lease, and the epoch of that holding."""

    name: str
    epoch: int


def daemon_name() -> str:
    """This daemon among the task's: its host, its process and a random part (a pid
    comes back after a restart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Lease:
    def __init__(
        self,
        connect: Callable[[], pymysql.connections.Connection],
        schema: str,
        task: str,
        ttl: float,
        name: str | None = None,
    ):
        """`schema`: the meta schema, quoted; `ttl`: seconds the lease lives unrenewed."""
        self.connect = connect
        self.q = schema
        self.task = task
        self.ttl = ttl
        self.name = name or daemon_name()
        self.held: Holder | None = None
        self._conn: pymysql.connections.Connection | None = None
        self._lock = threading.Lock()
        self._renewals = 0
        # what the daemon does once it finds the lease another's (from whichever thread)
        self.on_lost: Callable[[str], None] | None = None
        # while a standby: who holds the lease (a value the admin API's thread reads)
        self.waiting_for: Holder | None = None

    # -- taking it -----------------------------------------------------------------------
    def acquire(
        self, stopping: threading.Event, poll: float = 1.0, waiting: Callable[[], object] | None = None
    ) -> bool:
        """Wait as a standby until this daemon holds the lease; False if told to stop first.
        `waiting`: called once, when it first has to wait (a daemon that takes the lease at
        once starts no standby's admin API, only to stop it)."""
        waiting_for = None
        while not stopping.is_set():
            with contextlib.suppress(pymysql.err.MySQLError):
                holder = self._take()
                if holder is None:
                    return True
                self.waiting_for = holder
                if waiting is not None:  # (its admin API listens before the line saying it waits)
                    waiting()
                    waiting = None
                if holder != waiting_for:
                    log.info(
                        "standby: task %s is run by %s; taking over when its lease expires",
                        self.task,
                        holder.name,
                    )
                    waiting_for = holder
            if waiting is not None:
                waiting()
                waiting = None
            stopping.wait(poll)
        return False

    def try_acquire(self) -> bool:
        """Take the lease if it is free or expired, once, without waiting (a member of a task:
        the one that holds it coordinates, the others run their sources all the same)."""
        return self._take() is None

    def _take(self) -> Holder | None:
        """Take the lease if it is free or expired (None), else say who holds it. Each
        write is one statement on a condition, so of two standbys one takes it."""
        t = quote_string(self.task)
        until = f"NOW(6) + INTERVAL {int(self.ttl * 1_000_000)} MICROSECOND"
        name = quote_string(self.name)
        with self._session() as conn, conn.cursor() as cur:
            cur.execute(f"SELECT holder, epoch, expires > NOW(6) FROM {self.q}.lease WHERE task = {t}")
            row = cur.fetchone()
            # (its own name: this process held it before it started again, and takes it back
            # in a new epoch, before any other daemon, as a member does, `tenure.join`)
            again = row is not None and str(row[0]) == self.name
            if row is not None and row[2] and not again and not _gone(str(row[0])):
                return Holder(str(row[0]), int(row[1]))
            if row is None:
                epoch = 1
                taken = cur.execute(
                    f"INSERT IGNORE INTO {self.q}.lease (task, holder, epoch, expires, acquired) "
                    f"VALUES ({t}, {name}, {epoch}, {until}, NOW(6))"
                )
            else:
                old = Holder(str(row[0]), int(row[1]))
                if not old.name.endswith(RELEASED):  # (one released at a clean stop closed its own)
                    self._kill(cur, old)
                epoch = old.epoch + 1
                taken = cur.execute(
                    f"UPDATE {self.q}.lease SET holder = {name}, epoch = {epoch}, expires = {until}, "
                    f"acquired = NOW(6) WHERE task = {t} AND epoch = {old.epoch}"
                    + ("" if again or _gone(old.name) else " AND expires <= NOW(6)")
                )
            if not taken:  # another standby was faster, or the holder renewed: look again
                # (on this session: `_current` takes the session's lock, held here; chaos: a
                # standby that lost such a race waited on itself for ever, and none took over)
                cur.execute(f"SELECT holder, epoch FROM {self.q}.lease WHERE task = {t}")
                now = cur.fetchone()
                return Holder(str(now[0]), int(now[1])) if now is not None else Holder("", 0)
            cur.execute(f"DELETE FROM {self.q}.lease_connection WHERE task = {t} AND epoch < {epoch}")
        self.held = Holder(self.name, epoch)
        before = "" if row is None else str(row[0])
        if row is None or before.endswith(RELEASED):
            # (a start after a clean stop: nothing was taken from anyone)
            after = f", after {before}" if before else ""
            log.info("holding the lease of task %s (epoch %d%s)", self.task, epoch, after)
        elif again:
            log.info("holding the lease of task %s again, started again (epoch %d)", self.task, epoch)
        else:
            why = "its process on this machine is gone" if row[2] else "its lease expired"
            log.warning("took over task %s from %s (%s): epoch %d", self.task, before, why, epoch)
        return None

    def _kill(self, cur, old: Holder) -> None:
        """End the connections the old holder opened: a frozen transaction of its would
        hold its shared lock on the lease row, and the update taking it would wait."""
        cur.execute(
            f"SELECT conn_id, booted FROM {self.q}.lease_connection WHERE task = {quote_string(self.task)} "
            f"AND epoch <= {old.epoch}"
        )
        registered.kill(cur, cur.fetchall())

    def _current(self) -> Holder | None:
        now = self.holder()
        return Holder(now["holder"], now["epoch"]) if now is not None else None

    # -- holding it ----------------------------------------------------------------------
    def renew(self) -> None:
        """Push the expiry on (an expired lease too, while no standby took it: what this
        daemon wrote meanwhile did not commit); raises LeaseLost if another daemon holds it."""
        held = self._holding()
        until = f"NOW(6) + INTERVAL {int(self.ttl * 1_000_000)} MICROSECOND"
        with self._session() as conn, conn.cursor() as cur:
            changed = cur.execute(
                f"UPDATE {self.q}.lease SET expires = {until} WHERE task = {quote_string(self.task)} "
                f"AND holder = {quote_string(held.name)} AND epoch = {held.epoch}"
            )
            self._renewals += 1
            if changed and self._renewals % PRUNE_EVERY == 0:
                # the connections closed since they registered: a takeover kills none of
                # them, and the table does not grow with every reconnect over months
                cur.execute(
                    f"DELETE FROM {self.q}.lease_connection WHERE task = {quote_string(self.task)} AND "
                    f"conn_id NOT IN (SELECT ID FROM information_schema.PROCESSLIST)"
                )
        if not changed:
            self._give_up(self._lost())

    def fence(self, cur) -> None:
        """In a transaction that writes: the lease is ours till it commits, or LeaseLost."""
        held = self._holding()
        cur.execute(
            f"SELECT 1 FROM {self.q}.lease WHERE task = {quote_string(self.task)} AND holder = "
            f"{quote_string(held.name)} AND epoch = {held.epoch} LOCK IN SHARE MODE"
        )
        if cur.fetchone() is None:
            self._give_up(self._lost())

    def registration(self) -> str:
        """The statements each downstream connection of the holder runs as it opens (two:
        the connection needs `CLIENT.MULTI_STATEMENTS`, `REGISTERING`). A daemon whose epoch
        is gone registers nothing (issue 70: nothing of an old epoch commits). The lease row
        is read first by a plain read, which takes no lock (a new session's variable is NULL
        till then): an INSERT ... SELECT or a SET reading it takes a shared lock, and every
        new connection queued behind the renewal's lock, the daemon's main loop stalled."""
        held = self._holding()
        t = quote_string(self.task)
        # (a row of its id from before a restart of the downstream, which gives ids again, is
        # replaced: kept, it named the old run, and a takeover left this connection alone,
        # its transaction's lock on the lease row holding the new holder back; chaos)
        return (
            f"SELECT epoch INTO @shardmerge_epoch FROM {self.q}.lease WHERE task = {t} "
            f"AND holder = {quote_string(held.name)}; "
            f"SET STATEMENT lock_wait_timeout = {METADATA_LOCK_WAIT} FOR "
            f"INSERT INTO {self.q}.lease_connection (task, epoch, conn_id, booted) "
            f"SELECT {t}, {held.epoch}, CONNECTION_ID(), {BOOT} AND @shardmerge_epoch = {held.epoch} "
            f"ON DUPLICATE KEY UPDATE booted = VALUES(booted)"
        )

    def release(self) -> None:
        """A clean stop: the lease expires now, for a standby to take at once."""
        held = self.held
        if held is None:
            return
        with contextlib.suppress(pymysql.err.MySQLError), self._session() as conn, conn.cursor() as cur:
            cur.execute(
                f"UPDATE {self.q}.lease SET expires = NOW(6), holder = {quote_string(held.name + RELEASED)} "
                f"WHERE task = {quote_string(self.task)} AND holder = {quote_string(held.name)} "
                f"AND epoch = {held.epoch}"
            )
        self.held = None

    def holder(self) -> dict[str, Any] | None:
        """Who holds the task's lease, as the meta schema says."""
        with self._session() as conn, conn.cursor() as cur:
            cur.execute(
                f"SELECT holder, epoch, expires > NOW(6), TIMESTAMPDIFF(MICROSECOND, NOW(6), expires) "
                f"FROM {self.q}.lease WHERE task = {quote_string(self.task)}"
            )
            row = cur.fetchone()
        if row is None:
            return None
        name = str(row[0])
        released = name.endswith(RELEASED)
        return {
            "holder": name.removesuffix(RELEASED),
            "epoch": int(row[1]),
            "live": bool(row[2]),
            "expires_in": row[3] / 1e6,
            "released": released,  # at a clean stop
        }

    def _give_up(self, reason: str) -> None:
        """Found another daemon holds the lease: `on_lost` (the daemon ends), else LeaseLost."""
        if self.on_lost is not None:
            self.on_lost(reason)
        raise LeaseLost(reason)

    def _holding(self) -> Holder:
        if self.held is None:
            raise LeaseLost(f"this daemon ({self.name}) does not hold the lease of task {self.task}")
        return self.held

    def _lost(self) -> str:
        with contextlib.suppress(pymysql.err.MySQLError):
            now = self.holder()
            epoch = self.held.epoch if self.held is not None else None
            if now is not None and (now["holder"] != self.name or now["epoch"] != epoch):
                return f"task {self.task} is run by {now['holder']} now (epoch {now['epoch']})"
        return f"the lease of task {self.task} expired before this daemon ({self.name}) renewed it"

    @contextlib.contextmanager
    def _session(self):
        """One connection of its own, made again after a failure (killed, say)."""
        with self._lock:
            if self._conn is None:
                self._conn = self.connect()
                with self._conn.cursor() as cur:
                    # (taking the lease waits on a frozen holder's lock: not for long)
                    cur.execute(f"SET SESSION innodb_lock_wait_timeout = {max(1, int(self.ttl))}")
            try:
                yield self._conn
            except BaseException:
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None
                raise

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None


# the holder's name once it released the lease at a clean stop (the log and `status` say so)
RELEASED = " (released)"


def _gone(holder: str) -> bool:
    """The holder was a process of this host that is no more (a daemon restarted after a
    crash need not wait out the lease of the one it replaces)."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class Renewer(Renewal):
    """Renews the lease every third of its life (the lease's `on_lost` once another
    daemon holds it)."""

    def __init__(self, lease: Lease, count: Callable[[str, str], None] | None = None):
        """`count`: each renewal tried again, by stage and error kind (the metrics)."""
        super().__init__("lease", f"lease of task {lease.task}", lease.ttl / 3, lease.renew, count)
        self.lease = lease
