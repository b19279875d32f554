"""One partition of the applier (`Partition`): a thread that takes its batches in order and
commits each on its own downstream connection, retrying what a retry cures; a batch the
server refuses goes one change at a time, so only the shard of a row it refuses stops."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
import traceback
from dataclasses import replace

import pymysql

from replicator.apply.batch import Batch
from replicator.apply.commit import BatchCommit
from replicator.apply.drops import Drops
from replicator.apply.pending import Pending
from replicator.apply.row_refusals import RowRefusals
from replicator.apply.tally import Tally
from replicator.servers import connect_downstream
from replicator.transient import Retrying, TableBusy, error_kind, lost, transient

log = logging.getLogger("shardmerge.applier")
BUSY_POLL = 1.0  # seconds at most between two tries of a batch whose table another daemon's DDL changes


class Abandoned(Exception):
    """The daemon started again while a batch waited to be tried again: it ends there."""


class Partition:
    """Threads: the daemon's thread puts batches into `queue` (and None to stop it); all
    else is this partition's thread's: its connection, and `retrying`, a value it replaces
    that query-status reads as it is."""

    def __init__(
        self,
        part: int,
        commit: BatchCommit,
        refusals: RowRefusals,
        drops: Drops,
        pending: Pending,
        tally: Tally,
        connection: dict,
        max_backoff: float,
    ):
        self.part = part
        self.commit = commit
        self.refusals = refusals
        self.drops = drops
        self.pending = pending
        self.tally = tally
        self.connection = connection
        self.max_backoff = max_backoff
        self.queue: queue.Queue[Batch | None] = queue.Queue(maxsize=4)
        # its batch waiting on an error a retry cures (query-status); None: none
        self.retrying: Retrying | None = None
        # set by an abandon (the daemon starts again): a batch being retried is given up
        self.abandoned = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"apply-{part}", daemon=True)

    def stop(self) -> None:
        """Its thread ends after the batches queued before (the caller joins it)."""
        # (a partition that died may still be alive a moment, its queue full: no put
        # waits on a queue nobody takes from)
        while self.thread.is_alive():
            try:
                self.queue.put(None, timeout=0.2)
                break
            except queue.Full:
                continue

    def _run(self) -> None:
        try:
            self._serve()
        except Abandoned:
            log.info("partition %d: its batch given up, the daemon starts again", self.part)
        except BaseException:
            failure = f"partition {self.part}: {traceback.format_exc()}"
            log.error("applier %s", failure)
            self.pending.failed(failure)

    def _serve(self) -> None:
        conn = self._first_connection()
        while True:
            batch = self.queue.get()
            if batch is None:
                break
            started = time.perf_counter()
            conn = self.apply_with_retries(conn, batch)
            self.tally.batch_took(time.perf_counter() - started)
            self.pending.done(batch.changes, batch.seq)
        if conn is not None:
            conn.close()

    def _first_connection(self):
        """Its connection opened as its thread starts, while the workers open their streams:
        the first batch does not wait for it. Best effort: one that fails here is opened
        again by the first batch, which retries with backoff and says so (status, metrics)."""
        try:
            return connect_downstream(self.connection)
        except Exception as exc:
            log.debug("partition %d: no connection at its start (%s): its first batch's", self.part, exc)
            return None

    def _connect(self, conn):
        if conn is not None:
            try:
                conn.ping(reconnect=False)
                return conn
            except Exception:
                self.tally.lost_connection()
                with contextlib.suppress(Exception):
                    conn.close()
        return connect_downstream(self.connection)

    def apply_with_retries(self, conn, batch: Batch, uncertain: bool = False):
        """Apply a batch; an error a retry cures (replicator/transient.py: the connection
        lost or killed, the server restarting, read-only or refusing connections for a while,
        a lock wait timeout, a deadlock) is retried with capped backoff, said in status
        (`retrying`) and metrics, and never pauses a shard; only rows the server refuses do."""
        backoff = 0.2
        retrying: Retrying | None = None
        while True:
            try:
                conn = self._connect(conn)
                if uncertain and self.commit.committed(conn, batch):
                    break
                try:
                    self.commit.apply(conn, batch)
                except pymysql.err.MySQLError as exc:
                    if transient(exc):
                        raise
                    _rollback(conn)
                    if self.commit.decoded_instead(batch, exc):
                        batch = replace(batch, as_is=False)
                        continue  # (the same rows again, another way)
                    conn = self._isolate(conn, batch, exc)
                break
            except (pymysql.err.MySQLError, ConnectionError, TimeoutError) as exc:
                if not transient(exc):
                    raise
                if lost(exc):
                    # the connection cannot be trusted: reconnect, and find out from the
                    # checkpoint whether the batch committed
                    uncertain = True
                    self.tally.lost_connection()
                    with contextlib.suppress(Exception):
                        conn.close()
                    conn = None
                else:
                    _rollback(conn)
                error = f"{type(exc).__name__}: {exc}"
                what = f"rows of partition {batch.part}"
                first = Retrying("rows", what, error, time.time(), 1)
                retrying = retrying.again(error) if retrying is not None else first
                self.retrying = retrying
                self.tally.retried(error_kind(exc))
                busy = isinstance(exc, TableBusy)
                # (another daemon's DDL: waited for by a poll a second at most, so the rows go
                # on soon after it ends however long it ran, said once, not at every poll)
                log.log(
                    logging.DEBUG if busy and retrying.attempt > 1 else logging.WARNING,
                    "partition %d: downstream %s (%s); retrying in %.1fs (attempt %d)",
                    batch.part,
                    "unavailable" if lost(exc) else "refused the batch for a while",
                    error,
                    backoff,
                    retrying.attempt,
                )
                if self.abandoned.wait(backoff):
                    raise Abandoned from exc  # (crash-only: the next start reads it again)
                backoff = min(backoff * 2, BUSY_POLL if busy else self.max_backoff)
        if retrying is not None:
            self.retrying = None
            log.info("partition %d: applied after %d retries", batch.part, retrying.attempt)
        return conn

    def _isolate(self, conn, batch: Batch, exc: Exception):
        """A batch the server refuses: apply its changes one by one, pause the shard
        of each change that fails (with the error), and let the rest through."""
        log.warning("partition %d: batch refused (%s); applying its changes one by one", batch.part, exc)
        for change in self.commit.as_applied(batch.changes, replace(batch, as_is=False)):
            if self.drops.discards(change):
                continue
            single = Batch(batch.part, [change], batch.majors, batch.seq)
            try:
                self.commit.apply(conn, single)
            except pymysql.err.MySQLError as one:
                _rollback(conn)
                if transient(one):
                    # this change alone is tried again (the ones before it committed, each
                    # with its checkpoint: the batch again would apply them twice)
                    if lost(one):
                        with contextlib.suppress(Exception):
                            conn.close()
                        conn = self.apply_with_retries(None, single, uncertain=True)
                    else:
                        conn = self.apply_with_retries(conn, single)
                    continue
                statement = "; ".join(self.commit.statements([change], batch.majors))
                self.refusals.refused(conn, change, batch.part, statement, one)
        return conn


def _rollback(conn) -> None:
    try:
        with conn.cursor() as cur:
            cur.execute("ROLLBACK")
    except Exception:
        pass
