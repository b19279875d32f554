"""Errors a retry can cure (issue 70), and how long to wait before each retry.

A connection lost or killed, a server shutting down, restarting or refusing more
connections, a lock wait timeout or deadlock, a server read-only for a while: none of them
needs a person. The work is tried again after reconnecting, with capped backoff, and what
waits says so (`Retrying`: query-status, the log, `shardmerge_retries`). Only an error a
retry cannot cure, the server refusing the statement itself, pauses a shard."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import pymysql

log = logging.getLogger("shardmerge.retry")
T = TypeVar("T")

# 1040 too many connections, 1053 server shutdown, 1205 lock wait timeout, 1213 deadlock,
# 1290 --read-only, 1792/1836 read-only transaction or mode, 1927 connection killed, 2002/2003
# cannot connect, 2006 gone away, 2013 lost during query, 2055 lost at an I/O, 4031 the server
# closed an idle connection
TRANSIENT = frozenset({1040, 1053, 1205, 1213, 1290, 1792, 1836, 1927, 2002, 2003, 2006, 2013, 2055, 4031})


class TableBusy(pymysql.err.OperationalError):
    """A batch's table is being changed by a DDL (`state.table_versions`, a task of many
    daemons): the batch committed nothing and is tried again. (A server error's kind, so that
    every handler of them takes it; its first argument names it, not a server's number.)"""

    def __init__(self, target: str) -> None:
        super().__init__("table busy", f"{target} is being changed by a DDL")


class SourcesLost(pymysql.err.OperationalError):
    """A member's batch names a source it no longer reads (reassigned, or the member's epoch
    is gone, `state.members`): it commits nothing, and is tried again till the member, told
    by its tick, starts again without the source."""

    def __init__(self, message: str) -> None:
        super().__init__("sources lost", message)

    def __str__(self) -> str:
        return self.args[1]


def transient(exc: BaseException) -> bool:
    """Whether `exc` is an error a retry after reconnecting can cure."""
    # (a connection closed under us; a table a DDL changes; a member's source moved)
    if isinstance(exc, pymysql.err.InterfaceError | TableBusy | SourcesLost):
        return True
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    return isinstance(exc, pymysql.err.MySQLError) and bool(exc.args) and exc.args[0] in TRANSIENT


# seconds a write of the daemon's own (a watermark, a connection's registration) waits for a
# metadata lock, a global read lock held downstream by a backup say, before it fails with 1205
# and is tried again: the main loop never waits it out
# (tests/daemon/test_downstream_faults_retried.py: status unanswered 30 s)
METADATA_LOCK_WAIT = 2

# the connection is gone, or cannot be trusted: whether its transaction committed is unknown
LOST = frozenset({1053, 1927, 2002, 2003, 2006, 2013, 2055, 4031})


def lost(exc: BaseException) -> bool:
    """Whether `exc` lost the connection (else the server refused the statement for a while:
    lock wait, deadlock, read-only, too many connections; the transaction is rolled back)."""
    if isinstance(exc, pymysql.err.InterfaceError | ConnectionError | TimeoutError):
        return True
    return isinstance(exc, pymysql.err.MySQLError) and bool(exc.args) and exc.args[0] in LOST


def error_kind(exc: BaseException) -> str:
    """A short label for the metrics: the server's error number, else the exception's type."""
    if isinstance(exc, pymysql.err.MySQLError) and exc.args and isinstance(exc.args[0], int):
        return str(exc.args[0])
    return type(exc).__name__


@dataclass(frozen=True)
class Backoff:
    """Doubling waits from `first` seconds, capped at `cap`."""

    first: float = 0.5
    cap: float = 30.0

    def delay(self, attempt: int) -> float:
        return min(self.cap, self.first * 2 ** max(0, attempt - 1))


@dataclass(frozen=True)
class Retrying:
    """Work waiting on a transient error: what, since when, which attempt comes next."""

    stage: str  # "journal", ...
    what: str  # the work, as an operator names it ("shop.orders journal entry 5 of s1.db.t1")
    error: str
    since: float  # (time.time() of the first failure)
    attempt: int

    def again(self, error: str) -> Retrying:
        return Retrying(self.stage, self.what, error, self.since, self.attempt + 1)

    def to_data(self) -> dict:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return {
            "stage": self.stage,
            "what": self.what,
            "error": self.error,
            "since": since,
            "attempt": self.attempt,
            "text": f"retrying: {self.error} since {since}, attempt {self.attempt}",
        }


class Stopped(Exception):
    """The daemon stops while work waits to be retried: the next start takes it up from
    what is saved (nothing is paused for it)."""


@dataclass(frozen=True)
class Retrier:
    """Runs work till it succeeds or an error a retry cannot cure comes: each transient
    error waits its backoff, says so (`report`: the Retrying, None once it ran; `count`:
    the metrics' stage and error kind), and runs the work again with `again=True`, for work
    that must first see where it stands (a journal entry's recovery)."""

    stage: str
    stopping: threading.Event
    report: Callable[[Retrying | None], None] = lambda retrying: None
    count: Callable[[str, str], None] = lambda stage, kind: None
    backoff: Backoff = Backoff()

    def run(self, what: str, work: Callable[[bool], T]) -> T:
        retrying: Retrying | None = None
        while True:
            try:
                value = work(retrying is not None)
                break
            except Stopped:
                raise
            except Exception as exc:
                if not transient(exc):
                    raise
                if self.stopping.is_set():
                    raise Stopped from exc
                error = f"{type(exc).__name__}: {exc}"
                first = Retrying(self.stage, what, error, time.time(), 1)
                retrying = retrying.again(error) if retrying else first
                self.report(retrying)
                self.count(self.stage, error_kind(exc))
                delay = self.backoff.delay(retrying.attempt)
                log.warning("%s: %s; retrying in %.1fs (attempt %d)", what, error, delay, retrying.attempt)
                if self.stopping.wait(delay):
                    raise Stopped from exc
        if retrying is not None:
            log.info("%s: done after %d retries", what, retrying.attempt)
            self.report(None)
        return value
