"""Errors a retry can cure (issue 70), and how long to wait before each retry.

A connection lost or killed, a server shutting down, restarting or refusing more
connections, a lock wait timeout or deadlock, a server read-only for a while: none of them
needs a person. The work is tried again after reconnecting, with capped backoff, and what
waits says so (`Retrying`: query-status, the log, `shardmerge_retries`). Only an error a
retry cannot cure, the server refusing the statement itself, pauses a shard."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pymysql

# 1040 too many connections, 1053 server shutdown, 1205 lock wait timeout, 1213 deadlock,
# 1290 --read-only, 1792/1836 read-only transaction or mode, 1927 connection killed, 2002/2003
# cannot connect, 2006 gone away, 2013 lost during query, 2055 lost at an I/O, 4031 the server
# closed an idle connection
TRANSIENT = frozenset({1040, 1053, 1205, 1213, 1290, 1792, 1836, 1927, 2002, 2003, 2006, 2013, 2055, 4031})


def transient(exc: BaseException) -> bool:
    """Whether `exc` is an error a retry after reconnecting can cure."""
    if isinstance(exc, pymysql.err.InterfaceError):  # (a connection closed under us)
        return True
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    return isinstance(exc, pymysql.err.MySQLError) and bool(exc.args) and exc.args[0] in TRANSIENT


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
