"""One process per upstream source: tail its binlog, keep its tables' schemas, and
send the daemon changes of routed tables (as SQL literals) and every DDL.

Decoding is CPU-bound, so each source gets a process of its own. The worker reads
from the start of a transaction, and says with each message where the next
transaction starts, so the daemon can always resume at a transaction boundary.
It reconnects with backoff when the server goes away, re-reading from the start of
the transaction it was in (the daemon drops what it has already seen). On Rewind
it reads again from an older position with the schemas of that position, which is
how a paused shard's rows come back.

`Worker` is the loop: it hands each event to its handler (`stream`: positions, GTIDs,
transaction ends and heartbeats; `table_maps`; `rows`; `ddl`) and takes the daemon's
commands between events. The handlers share the frozen `WorkerContext`, the one
`ReadState` of the process and its `Outbox`, and what each needs of the others is
passed to it when it is made.
"""

from __future__ import annotations

import contextlib
import time
from multiprocessing.connection import Connection

from pymysqlreplication.constants.BINLOG import MARIADB_GTID_EVENT, TABLE_MAP_EVENT, XID_EVENT
from pymysqlreplication.event import (
    FormatDescriptionEvent,
    GtidEvent,
    HeartbeatLogEvent,
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    XidEvent,
)
from pymysqlreplication.row_event import DeleteRowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent

from lattice import Table, parse_table
from replicator.logs import configure
from replicator.source import binlog_compat
from replicator.source.binlog_compat import LightEvent, name_text
from replicator.source.ddl import DdlHandler, SchemaCharsets
from replicator.source.messages import NativeTargets, Rewind, Rewound, Stop, WorkerFailed
from replicator.source.outbox import Outbox
from replicator.source.pins import Pins
from replicator.source.problems import Problems
from replicator.source.read_state import ReadState
from replicator.source.row_events import ROWS_OPS
from replicator.source.rows import RowsHandler
from replicator.source.stream import ServerMoved, StopRequested, StreamHandler
from replicator.source.table_maps import TableMapHandler
from replicator.source.tracker import Tracker
from replicator.source.versions import Versions
from replicator.source.worker_setup import WorkerContext, WorkerSetup
from replicator.state.positions import Position

COMMAND_INTERVAL = 0.005  # seconds between looks for the daemon's commands while events flow


class RewindRequested(Exception):
    pass


class Worker:
    def __init__(self, setup: WorkerSetup, pipe: Connection):
        context = self.context = WorkerContext.of(setup)
        self.pipe = pipe
        read = self.read = ReadState(setup.position, setup.gtid)
        outbox = self.outbox = Outbox(setup.source, read, pipe.send)
        versions = self.versions = Versions()
        charsets = SchemaCharsets(context.connection)
        self.tracker = Tracker(
            _tables(setup.schemas),
            watches=context.router.watches_schema,
            upstream=setup.upstream,
            schema_charset=charsets,
        )
        problems = self.problems = Problems(context, read, outbox)
        pins = self.pins = Pins(context, read, self.tracker, problems, versions, outbox, setup.pins)
        self.stream = StreamHandler(context, read, outbox)
        self.table_maps = TableMapHandler(context, self.tracker, pins, problems, versions)
        self.rows = RowsHandler(
            context, read, outbox, self.table_maps, pins, problems, versions, setup.native
        )
        self.ddl = DdlHandler(context, read, outbox, self.tracker, pins, problems, versions, charsets)

    # -- the loop ---------------------------------------------------------------------
    def run(self) -> None:
        backoff = 0.5
        while True:
            try:
                self._stream()
                backoff = 0.5
            except RewindRequested:
                continue
            except StopRequested:
                return
            except ServerMoved as exc:
                self.outbox.send(WorkerFailed(self.context.source, str(exc), server_moved=True))
                return
            except (BrokenPipeError, EOFError, ConnectionResetError):
                return  # the daemon is gone: a worker outliving it would hold our replica server id
            except Exception as exc:  # the server went away, or decoding failed: retry after a pause
                if self.context.daemon_gone():
                    return
                self.stream.disconnected(exc, backoff, sorted(self.tracker.tables))
                deadline = time.monotonic() + backoff
                while time.monotonic() < deadline:
                    try:
                        self._commands(timeout=min(0.2, backoff))
                    except RewindRequested:
                        break
                    except StopRequested:
                        return
                backoff = min(backoff * 2, self.context.max_backoff)

    def _stream(self) -> None:
        stream = self.stream.open()
        try:
            next_poll = 0.0
            light, other, poll, clock = self._light, self._event, self.pipe.poll, time.monotonic
            for event in stream:
                if isinstance(event, LightEvent):
                    light(event, stream)
                else:
                    other(event, stream)
                # the daemon's commands, every few milliseconds: a poll per event is a
                # system call per event
                now = clock()
                if now >= next_poll:
                    next_poll = now + COMMAND_INTERVAL
                    if poll():
                        self._commands()
        finally:
            stream.close()

    # -- events -----------------------------------------------------------------------------
    def _event(self, event, stream: binlog_compat.Stream) -> None:
        if isinstance(event, LightEvent):
            self._light(event, stream)
            return
        if isinstance(event, FormatDescriptionEvent):
            self.stream.format_description(event)
            return
        if isinstance(event, RotateEvent):
            self.stream.rotate(event)
            return
        end = event.packet.log_pos  # where the next event starts
        self.read.seen(end, event.timestamp)
        if isinstance(event, GtidEvent | MariadbGtidEvent):
            self.read.gtid = str(event.gtid)
        elif isinstance(event, TableMapEvent):
            self.table_maps.table_map(event, stream.library_tables)
        elif isinstance(event, WriteRowsEvent | UpdateRowsEvent | DeleteRowsEvent):
            self.rows.rows(event, name_text(event.schema), name_text(event.table))
        elif isinstance(event, XidEvent):
            self.stream.transaction_end(end)
        elif isinstance(event, QueryEvent):
            query = event.query.strip()
            upper = query[:8].upper()
            if upper.startswith("BEGIN") or upper.startswith("XA "):
                return
            if upper.startswith("COMMIT"):
                self.stream.transaction_end(end)
                return
            self.ddl.ddl(query, name_text(event.schema), end)
        elif isinstance(event, HeartbeatLogEvent):
            self.stream.heartbeat()

    def _light(self, event: LightEvent, stream: binlog_compat.Stream) -> None:
        """An event read from its bytes (binlog_compat.LIGHT): as `_event` would the
        library's event of it."""
        end = event.log_pos
        self.read.seen(end, event.timestamp)
        kind = event.event_type
        if kind in ROWS_OPS:
            if self.rows.planned(event):
                return
            names = self.table_maps.table_ids.get(event.table_id)
            if names is not None:  # (else not a routed table)
                self.rows.rows(event, *names)
        elif kind == TABLE_MAP_EVENT:
            self.table_maps.table_map(event, stream.library_tables)
        elif kind == XID_EVENT:
            self.stream.transaction_end(end)
        elif kind == MARIADB_GTID_EVENT:
            self.read.gtid = event.gtid
        else:
            self.stream.heartbeat()

    # -- the daemon's commands ------------------------------------------------------------------
    def _commands(self, timeout: float = 0.0) -> None:
        if not self.pipe.poll(timeout):
            return
        command = self.pipe.recv()
        if isinstance(command, NativeTargets):
            self.rows.retarget(command.shapes)
            return
        if isinstance(command, Stop):
            self.outbox.flush(force=True)
            raise StopRequested
        if isinstance(command, Rewind):
            self.read.position = Position.parse(command.position)
            self.tracker.reset(_tables(command.schemas))
            self.versions.forget()
            self.problems.reset()
            self.pins.reset(command.pins)
            self.read.drop_unsent()
            self.outbox.send(Rewound(self.context.source, command.seq))
            raise RewindRequested


def _tables(schemas: dict[str, str]) -> dict[str, Table]:
    return {k: parse_table(sql, shown=True) for k, sql in schemas.items()}


def worker_main(setup: WorkerSetup, pipe: Connection) -> None:
    """Entry point of the worker process."""
    configure(setup.task, setup.log_level, setup.log_format)
    try:
        Worker(setup, pipe).run()
    except (EOFError, BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        pass  # the daemon is gone (a demoted one ends at once): nothing to report, nobody to tell
    except Exception as exc:  # report, so the daemon can say which source stopped and why
        with contextlib.suppress(Exception):
            pipe.send(WorkerFailed(setup.source, f"{type(exc).__name__}: {exc}"))
        raise
