"""A source's binlog stream and where a worker is in it: opening the stream at a
transaction start (or a GTID) with the GTID state there, the binlog's format and files,
transaction ends, heartbeats, and what is kept and said when the connection is lost.

The worker reads from the start of a transaction, and says with each message where the
next transaction starts, so the daemon can always resume at a transaction boundary."""

from __future__ import annotations

import logging
import time

import pymysql
from pymysqlreplication import event as library_events
from pymysqlreplication import row_event as library_rows

from replicator.servers import Connection as ServerConnection
from replicator.servers import connect
from replicator.source import binlog_compat
from replicator.source.binlog_compat import event_bytes
from replicator.source.gtid import GtidCursor, GtidState
from replicator.source.messages import Heartbeat
from replicator.source.outbox import SEND_EVERY, SEND_INTERVAL, Outbox
from replicator.source.read_state import ReadState
from replicator.source.row_events import BinlogFormat
from replicator.source.worker_setup import WorkerContext
from replicator.state.positions import Position, file_sequence

log = logging.getLogger("shardmerge.worker")
binlog_compat.install()

EVENTS = [  # what the stream hands the worker (replicator.source.worker dispatches them)
    library_events.FormatDescriptionEvent,
    library_events.RotateEvent,
    library_events.GtidEvent,
    library_events.MariadbGtidEvent,
    library_rows.TableMapEvent,
    library_rows.WriteRowsEvent,
    library_rows.UpdateRowsEvent,
    library_rows.DeleteRowsEvent,
    library_events.XidEvent,
    library_events.QueryEvent,
    library_events.HeartbeatLogEvent,
]


class ServerMoved(Exception):
    """The source's host answers with another server than its positions are of."""


class StopRequested(Exception):
    pass


class StreamHandler:
    def __init__(self, context: WorkerContext, read: ReadState, outbox: Outbox) -> None:
        self.context, self.read, self.outbox = context, read, outbox

    def open(self) -> binlog_compat.Stream:
        """The stream from where the worker reads, with the GTID state there; what was read
        and not sent of the transaction there is let go (it is read again)."""
        read = self.read
        state = self._state_at(read.position)
        read.cursor = GtidCursor(state) if state is not None else None
        stream = self._connect()
        read.index = {}
        read.batch.clear()
        return stream

    def _connect(self) -> binlog_compat.Stream:
        context = self.context
        settings = dict(context.connection)
        settings["passwd"] = settings.pop("password", "")
        common = dict(
            connection_settings=settings,
            server_id=context.server_id,
            blocking=True,
            only_events=EVENTS,
            slave_heartbeat=context.heartbeat,
            enable_logging=False,
            pymysql_wrapper=ServerConnection,  # (its TLS context made once, see replicator.servers)
        )
        position = self.read.position
        if position is None:
            # first start from a GTID: MariaDB GTIDs need is_mariadb, MySQL GTID sets do not
            return binlog_compat.Stream(
                auto_position=self.read.gtid, is_mariadb=context.rules.gtid_positions, **common
            )
        # file/pos resume works with is_mariadb=False on both servers
        return binlog_compat.Stream(
            resume_stream=True,
            log_file=position.file,
            log_pos=position.pos,
            is_mariadb=False,
            **common,
        )

    def _state_at(self, position: Position | None) -> GtidState | None:
        """The GTID state at `position` as the server tells it (MariaDB's
        BINLOG_GTID_POS): the worker follows it from there event by event."""
        context = self.context
        conn = connect(context.connection)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@server_id")
                now, expected = int(cur.fetchone()[0]), context.upstream_server
                if expected is not None and now != expected:
                    raise ServerMoved(
                        f"source {context.source}: its server is another one now (server id {now}, was "
                        f"{expected}): its positions are the old server's; the daemon ends so that it starts "
                        'again and moves them by their GTIDs (docs/operations/failover.md)'
                    )
                if not context.rules.gtid_positions:
                    return None
                if position is None:
                    return GtidState.parse(self.read.gtid)
                cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (position.file, position.pos))
                row = cur.fetchone()
        finally:
            conn.close()
        return GtidState.parse(row[0]) if row is not None and row[0] is not None else None

    def format_description(self, event) -> None:
        self.read.form = BinlogFormat.of(event_bytes(event))

    def rotate(self, event: library_events.RotateEvent) -> None:
        read = self.read
        read.file = event.next_binlog
        if read.position is None or not read.index:
            read.position = Position(event.next_binlog, event.position)

    def transaction_end(self, end: int) -> None:
        read = self.read
        read.transaction_ended(end, bool(read.index))
        # many small transactions: send every few milliseconds, not every commit
        if read.batch and (
            len(read.batch) >= SEND_EVERY or time.monotonic() - read.last_send >= SEND_INTERVAL
        ):
            self.outbox.flush()

    def heartbeat(self) -> None:
        if self.context.daemon_gone():
            raise StopRequested  # the daemon was killed: stop streaming with its server id
        # (the heartbeat carries the position: no empty Changes, whose old event time
        # would show an idle source as lagging until the heartbeat is read)
        self.outbox.flush(force=False)
        read = self.read
        self.outbox.send(
            Heartbeat(self.context.source, str(read.position), time.time(), gtid=read.state_text())
        )

    def disconnected(self, exc: Exception, backoff: float, tables: list[str]) -> None:
        """The stream failed (`tables`: the tracked ones, to name where the binlog is gone):
        said in the log and to the daemon, before the worker reads again after `backoff`."""
        source, read = self.context.source, self.read
        gone = binlog_gone(source, read.position, exc, tables)
        log.log(
            logging.ERROR if gone else logging.WARNING,
            "source %s: %s; reconnecting in %.1fs",
            source,
            gone or exc,
            backoff,
            extra={
                "source": source,
                "position": str(read.position) if read.position else None,
            },
        )
        self._keep_completed()
        read.index = {}
        self.outbox.send(
            Heartbeat(
                source,
                str(read.position or ""),
                read.last_event_time,
                connected=False,
                error=gone or f"{type(exc).__name__}: {exc}",
            )
        )

    def _keep_completed(self) -> None:
        """Before reading again from the start of the current transaction: send what
        completed transactions produced (reading again will not see them) and drop
        what the unfinished one did (it will be read again)."""
        read = self.read
        if read.position is not None and read.file is not None:
            current = (file_sequence(read.position.file), read.position.pos)
            read.batch = [c for c in read.batch if (c.id[0], c.id[1]) != current]
        if read.batch:
            self.outbox.flush()


# The server's answer to a dump request whose binlog file or position it no longer has.
BINLOG_GONE = 1236


def binlog_gone(source: str, position: Position | None, exc: Exception, tables: list[str]) -> str | None:
    """What to tell when the binlog the source is to be read from is gone (purged or
    expired): the rows after the checkpoint can no longer be read, and retrying
    cannot help until the files are back. `tables`: its shards' (schema.table). None for
    other errors."""
    if not (isinstance(exc, pymysql.err.MySQLError) and exc.args and exc.args[0] == BINLOG_GONE):
        return None
    where = f"binlog file {position.file} (position {position.pos})" if position else "binlog position"
    shown = ", ".join(f"{source}.{t}" for t in tables[:10]) + (
        f" and {len(tables) - 10} more" if len(tables) > 10 else ""
    )
    return (
        f"the {where} that source {source} resumes from is gone from the server "
        f"({exc.args[1] if len(exc.args) > 1 else exc}); nothing after it is read or skipped. "
        "Put the file back on the server if it is kept elsewhere; otherwise copy its shards "
        f"({shown or 'none'}) again while the others stream: `shardmerge resync --config TASK "
        f'--source {source}` (the stream goes on from where the copy began; docs/operations/resync.md), '
        "or copy every shard afresh with `shardmerge backfill --config TASK --truncate`"
    )
