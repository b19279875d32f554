"""Downstream connections registered by the daemon that opened them, for another to end
them: a daemon cut off (or frozen) in a transaction keeps its locks on the server for as long
as the server keeps its session (`wait_timeout`, eight hours by default: it sees no close);
the daemon taking its work over first kills the sessions it registered (the lease's holder,
`lease.py`; a member whose sources are given to others, `members.py`).

A connection id names a session only on one run of the server (one restarted gives ids
anew: issue 70, a takeover after a restart of the downstream killed other applications'
sessions), so each registration keeps when the server it registered on started."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import pymysql

# when the server a connection registered on started (unix seconds): the statement's tail,
# `SELECT <columns>, {BOOT}` (a WHERE clause to add to with AND)
BOOT = (
    "UNIX_TIMESTAMP() - VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'UPTIME'"
)
BOOT_SLACK = 2  # seconds two readings of one run's start may differ by (uptime is whole seconds)


def connection_id(cur) -> int:
    cur.execute("SELECT CONNECTION_ID()")
    return int(cur.fetchone()[0])


def kill(cur, registered: Iterable[tuple[int, int | None]]) -> int:
    """End the sessions (connection id, when its server started) registered on this run of
    the server, not `cur`'s own; how many were asked to end."""
    mine = connection_id(cur)
    cur.execute(f"SELECT {BOOT}")
    booted = int(cur.fetchone()[0])
    killed = 0
    for conn_id, started in registered:
        if int(conn_id) != mine and started is not None and abs(int(started) - booted) <= BOOT_SLACK:
            with contextlib.suppress(pymysql.err.MySQLError):  # (ended meanwhile)
                cur.execute(f"KILL CONNECTION {int(conn_id)}")
                killed += 1
    return killed
