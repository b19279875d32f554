"""The meta schema's connection: the one way every store of `replicator/state/` reads and
writes its table in the downstream (`shardmerge_meta` by default).

Connections are kept for the next call (the daemon calls often; a new connection costs
tens of ms); one that fails is closed, not kept, so an unfinished transaction dies with it.
A store's `sql_*` methods return statements for a caller's transaction (`execute`), which
the lease's fence opens where a daemon holds it: a write commits only while the lease is
this daemon's."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import pymysql

from lattice import quote_identifier, quote_string
from replicator.state.positions import ChangeId


class Gtids(Protocol):
    """The GTIDs of a source's positions as the daemon read them (`GtidTrail`)."""

    def own(self, source: str, change: ChangeId) -> str | None:
        """The GTID of the transaction holding `change`."""

    def before(self, source: str, change: ChangeId) -> str | None:
        """The GTID state where `change`'s transaction starts."""


def gtid_literal(text: str | None) -> str:
    return quote_string(text) if text else "NULL"


class MetaDb:
    """The meta schema of one task: its connections, its transactions, and its tables made."""

    def __init__(self, connect: Callable[[], pymysql.connections.Connection], schema: str, task: str):
        self.connect = connect
        self.schema = schema
        self.q = quote_identifier(schema)
        self.task = task
        self.t = quote_string(task)
        self._idle: list[pymysql.connections.Connection] = []
        self._lock = threading.Lock()
        # run first in every transaction that writes: the lease is this daemon's till it
        # commits (replicator/state/lease.py); None where no lease is held (the tools)
        self.fence: Callable[[Any], None] | None = None
        # the GTIDs saved beside positions (None: the tools, which save none)
        self.gtids: Gtids | None = None

    def own_gtid(self, source: str, change: ChangeId) -> str:
        """The literal of the GTID of `change`'s transaction (NULL where none is known)."""
        return gtid_literal(self.gtids.own(source, change) if self.gtids is not None else None)

    def gtid_before(self, source: str, change: ChangeId) -> str:
        """The literal of the GTID state where `change`'s transaction starts (or NULL)."""
        return gtid_literal(self.gtids.before(source, change) if self.gtids is not None else None)

    @contextlib.contextmanager
    def session(self) -> Iterator[pymysql.connections.Connection]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is not None:
            try:
                conn.ping(reconnect=False)
            except pymysql.err.MySQLError:
                with contextlib.suppress(Exception):
                    conn.close()
                conn = None
        conn = conn or self.connect()
        try:
            yield conn
        except BaseException:
            with contextlib.suppress(Exception):
                conn.close()
            raise
        with self._lock:
            self._idle.append(conn)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(Exception):
                conn.close()

    def make_tables(self, tables: Iterable[str], added_columns: Iterable[tuple[str, str, str]]) -> None:
        """The tables (CREATE TABLE statements naming the schema `{m}`), those missing made
        (every one on a first start), and the columns later versions added, (table, column,
        definition) (one query when all is there: a restart)."""
        with self.session() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=%s",
                (self.schema,),
            )
            present = {(str(t).lower(), str(c).lower()) for t, c in cur.fetchall()}
            made = {t for t, _ in present}
            if not made:
                cur.execute(f"CREATE DATABASE IF NOT EXISTS {self.q}")
            for statement in tables:
                if _table_of(statement) not in made:
                    cur.execute(statement.format(m=self.q))
            for table, column, definition in added_columns:
                if table in made and (table, column) not in present:  # made by an earlier version
                    cur.execute(f"ALTER TABLE {self.q}.{table} ADD COLUMN {column} {definition}")

    def rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self.session() as conn, conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    def read_together(self, queries: Iterable[tuple[str, tuple]]) -> list[list[tuple]]:
        """Each query's rows, all read in one snapshot (a transaction that writes between them
        is seen by all or by none)."""
        with self.session() as conn, conn.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            found = []
            for sql, args in queries:
                cur.execute(sql, args)
                found.append(list(cur.fetchall()))
            cur.execute("COMMIT")
            return found

    def execute(self, statements: Iterable[str], lock_wait: int | None = None) -> None:
        """Run statements in one transaction; `lock_wait`: seconds each may wait for a
        metadata lock (a global read lock, a DDL's) before it fails with 1205, instead of
        the server's day."""
        with self.session() as conn, conn.cursor() as cur:
            if lock_wait is not None:
                cur.execute(f"SET SESSION lock_wait_timeout = {int(lock_wait)}")
            cur.execute("BEGIN")
            if self.fence is not None:
                self.fence(cur)
            for statement in statements:
                cur.execute(statement)
            cur.execute("COMMIT")
            if lock_wait is not None:  # (a connection that failed is closed: this one goes back)
                cur.execute("SET SESSION lock_wait_timeout = DEFAULT")


def _table_of(statement: str) -> str:
    return statement.split("{m}.", 1)[1].split(None, 1)[0].strip("(").lower()
