"""One process per upstream source: tail its binlog, keep its tables' schemas, and
send the daemon changes of routed tables (as SQL literals) and every DDL.

Decoding is CPU-bound, so each source gets a process of its own. The worker reads
from the start of a transaction, and says with each message where the next
transaction starts, so the daemon can always resume at a transaction boundary.
It reconnects with backoff when the server goes away, re-reading from the start of
the transaction it was in (the daemon drops what it has already seen). On Rewind
it reads again from an older position with the schemas of that position, which is
how a paused shard's rows come back.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import pymysql
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

from lattice import Column, DropDatabase, Flavor, OtherStatement, Table, parse_table, render_table, row_image
from replicator.faults import fault_point, faults_armed
from replicator.identity_memo import IdentityMemo
from replicator.logs import configure
from replicator.server_rules import server_rules
from replicator.servers import Connection as ServerConnection
from replicator.servers import connect
from replicator.shard_id import ShardId, split_table_key, table_key
from replicator.source import binlog_compat
from replicator.source.binlog_compat import LightEvent
from replicator.source.column_names import ColumnNames
from replicator.source.decode import Encoder, SchemaMismatch, literal, patch_table_map
from replicator.source.gtid import GtidCursor, GtidState, TxnGtids
from replicator.source.messages import (
    Change,
    Changes,
    DDLEvent,
    Dropped,
    Heartbeat,
    NativeTargets,
    Pin,
    Rewind,
    Rewound,
    RowEvent,
    Stop,
    WorkerFailed,
)
from replicator.source.routing import Router
from replicator.source.row_events import (
    CHECKSUM,
    HEADER,
    ROWS_OPS,
    BinlogFormat,
    EventCodec,
    Origin,
    RowShape,
    RowsLayout,
    append_changes,
    fits,
    row_shape,
    rows_layout,
)
from replicator.source.row_extend import (
    Extended,
    Extension,
    count_rows,
    extend_rows,
    extend_table_map,
    extended_map_columns,
    extended_shape,
    extended_table,
    skippers,
)
from replicator.source.row_filter import KINDS as ROW_FILTER_KINDS
from replicator.source.row_filter import RowFilterError, TableRowFilter, compile_filters
from replicator.source.rowcodec import RowCodec, Unsupported, present_columns, rows_body
from replicator.source.schema_change import ChangeKind, SchemaChange
from replicator.source.tracker import Tracker
from replicator.source.upstream import schema_charset
from replicator.state.positions import ChangeId, Position, event_end, file_sequence, row_index

log = logging.getLogger("shardmerge.worker")
binlog_compat.install()

EVENTS = [
    FormatDescriptionEvent,
    RotateEvent,
    GtidEvent,
    MariadbGtidEvent,
    TableMapEvent,
    WriteRowsEvent,
    UpdateRowsEvent,
    DeleteRowsEvent,
    XidEvent,
    QueryEvent,
    HeartbeatLogEvent,
]
SEND_EVERY = 500  # changes per message: big enough to amortise the pipe, small enough to flow
SEND_INTERVAL = 0.01  # seconds: how long changes of committed transactions may wait in the worker
COMMAND_INTERVAL = 0.005  # seconds between looks for the daemon's commands while events flow


@dataclass
class WorkerSetup:
    source: str
    connection: dict[str, Any]  # pymysql connect kwargs of the source
    server_id: int  # the replica server id we stream with
    router: Router
    position: Position | None  # a transaction start; None: start from `gtid`
    gtid: str | None
    schemas: dict[str, str]  # "schema.table" -> CREATE TABLE at `position`
    upstream: Flavor = Flavor.MARIADB
    upstream_server: int | None = None  # the id of the server the positions are in (None: any)
    heartbeat: float = 1.0
    max_backoff: float = 30.0
    task: str = ""
    log_format: str = "text"
    log_level: str = "INFO"
    native: dict[str, RowShape] = field(default_factory=dict)  # see NativeTargets
    pins: tuple[Pin, ...] = ()  # tables decisions set from `position` on (`SourceState.pins_from`)


class RewindRequested(Exception):
    pass


class ServerMoved(Exception):
    """The source's host answers with another server than its positions are of."""


class StopRequested(Exception):
    pass


class Worker:
    def __init__(self, setup: WorkerSetup, pipe: Connection):
        self.setup = setup
        self.rules = server_rules(setup.upstream)  # (asked per row event: looked up once)
        self.pipe = pipe
        self.router = setup.router
        self.tracker = Tracker(
            _tables(setup.schemas),
            watches=self.router.watches_schema,
            upstream=setup.upstream,
            schema_charset=self._schema_charset,
        )
        self._charsets: dict[str, tuple[str, str | None] | None] = {}
        self.position = setup.position  # start of the transaction being read
        self.gtid = setup.gtid
        # the GTID state where `position` is (None: not known, or not a MariaDB server),
        # and of the transactions read since the last message that had changes or a DDL,
        # their GTID and the state before (replicator/source/gtid.py)
        self.state: GtidCursor | None = None
        self.txns = TxnGtids()
        self.file = setup.position.file if setup.position else None
        # row events read in the current transaction, per table: an id must not depend
        # on whether another table's rows could be decoded (positions.row_index)
        self.index: dict[str, int] = {}
        self.batch: list[Change] = []
        self.encoders: dict[int, Encoder] = {}
        self.codecs: dict[tuple[int, int], RowCodec | None] = {}  # (tracked table, table id) -> codec
        self.event_codecs: dict[tuple[int, int], EventCodec] = {}  # likewise, for events sent as they are
        self.shapes: dict[int, RowShape | None] = {}  # id(tracked table) -> row_shape
        self.fits = IdentityMemo(fits)  # (a table version's shape: one object)
        # (an event codec: one object per table version and table map) -> its columns' skippers
        self.skips = IdentityMemo(lambda codec: skippers(codec.columns))
        self.images: dict[int, tuple[Table, Table]] = {}  # id(tracked table) -> it, its row image
        self.native = dict(setup.native)  # target -> shape: events of tables holding it go as they are
        self.form: BinlogFormat | None = None  # the binlog's format description event
        self.maps: dict[int, bytes] = {}  # table id -> its last table map event
        self.table_ids: dict[int, tuple[str, str]] = {}  # table id -> routed (schema, table)
        self.stream: binlog_compat.Stream | None = None
        self._extras: dict[ShardId, tuple[object, tuple]] = {}  # shard -> (its route, _extra)
        # (table version, table map, shard, target shape) -> how its events carry its extract columns
        self.extended: dict[tuple, Extended | None] = {}
        # table id -> (the parsed map, the tracked table) it was last patched for
        self.patched: dict[int, tuple[object, Table]] = {}
        self.column_names = ColumnNames()
        # keys of tables whose rows cannot be read -> why: their rows go as `Dropped`, and the
        # daemon hears of each once (`_problem`, or the DDL it could not follow)
        self.problems: dict[str, str] = {}
        self.pins: list[Pin] = sorted(setup.pins)  # still ahead of the stream
        # shard -> (the table version, its filters.rows compiled for it)
        self.row_filters: dict[ShardId, tuple[Table, TableRowFilter | None]] = {}
        self.filtered: dict[tuple[ShardId, str], int] = {}  # rows filters.rows dropped, since the last send
        # shard -> the last row filters.rows dropped that was counted (kept across rewinds)
        self.counted_to: dict[ShardId, ChangeId] = {}
        self.last_event_time = 0.0
        self.last_send = 0.0
        self.parent = os.getppid()

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
                self._send(WorkerFailed(self.setup.source, str(exc), server_moved=True))
                return
            except (BrokenPipeError, EOFError, ConnectionResetError):
                return  # the daemon is gone: a worker outliving it would hold our replica server id
            except Exception as exc:  # the server went away, or decoding failed: retry after a pause
                if os.getppid() != self.parent:
                    return
                gone = binlog_gone(self.setup.source, self.position, exc, sorted(self.tracker.tables))
                log.log(
                    logging.ERROR if gone else logging.WARNING,
                    "source %s: %s; reconnecting in %.1fs",
                    self.setup.source,
                    gone or exc,
                    backoff,
                    extra={
                        "source": self.setup.source,
                        "position": str(self.position) if self.position else None,
                    },
                )
                self._keep_completed()
                self.index = {}
                self._send(
                    Heartbeat(
                        self.setup.source,
                        str(self.position or ""),
                        self.last_event_time,
                        connected=False,
                        error=gone or f"{type(exc).__name__}: {exc}",
                    )
                )
                deadline = time.monotonic() + backoff
                while time.monotonic() < deadline:
                    try:
                        self._commands(timeout=min(0.2, backoff))
                    except RewindRequested:
                        break
                    except StopRequested:
                        return
                backoff = min(backoff * 2, self.setup.max_backoff)

    def _open(self) -> binlog_compat.Stream:
        settings = dict(self.setup.connection)
        settings["passwd"] = settings.pop("password", "")
        common = dict(
            connection_settings=settings,
            server_id=self.setup.server_id,
            blocking=True,
            only_events=EVENTS,
            slave_heartbeat=self.setup.heartbeat,
            enable_logging=False,
            pymysql_wrapper=ServerConnection,  # (its TLS context made once, see replicator.servers)
        )
        if self.position is None:
            # first start from a GTID: MariaDB GTIDs need is_mariadb, MySQL GTID sets do not
            return binlog_compat.Stream(
                auto_position=self.gtid, is_mariadb=self.rules.gtid_positions, **common
            )
        # file/pos resume works with is_mariadb=False on both servers
        return binlog_compat.Stream(
            resume_stream=True,
            log_file=self.position.file,
            log_pos=self.position.pos,
            is_mariadb=False,
            **common,
        )

    def _stream(self) -> None:
        state = self._state_at(self.position)
        self.state = GtidCursor(state) if state is not None else None
        stream = self.stream = self._open()
        self.index = {}
        self.batch.clear()
        try:
            next_poll = 0.0
            for event in stream:
                self._event(event, stream)
                # the daemon's commands, every few milliseconds: a poll per event is a
                # system call per event
                now = time.monotonic()
                if now >= next_poll:
                    next_poll = now + COMMAND_INTERVAL
                    if self.pipe.poll():
                        self._commands()
        finally:
            stream.close()

    def _state_at(self, position: Position | None) -> GtidState | None:
        """The GTID state at `position` as the server tells it (MariaDB's
        BINLOG_GTID_POS): the worker follows it from there event by event."""
        conn = connect(self.setup.connection)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@server_id")
                now, expected = int(cur.fetchone()[0]), self.setup.upstream_server
                if expected is not None and now != expected:
                    raise ServerMoved(
                        f"source {self.setup.source}: its server is another one now (server id {now}, was "
                        f"{expected}): its positions are the old server's; the daemon ends so that it starts "
                        'again and moves them by their GTIDs (README "Upstream failover")'
                    )
                if not self.rules.gtid_positions:
                    return None
                if position is None:
                    return GtidState.parse(self.gtid)
                cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (position.file, position.pos))
                row = cur.fetchone()
        finally:
            conn.close()
        return GtidState.parse(row[0]) if row is not None and row[0] is not None else None

    def _state_text(self) -> str | None:
        return self.state.text if self.state is not None else None

    def _passed(self, start: Position | None, routed: bool) -> None:
        """The transaction that started at `start` (its GTID in `self.gtid`) is read:
        the state moves past it; `routed`: it had changes or a DDL sent."""
        state, gtid = self.state, self.gtid
        if state is None or not gtid or start is None:
            return
        if routed:
            self.txns.add((file_sequence(start.file), start.pos), gtid, state.text)
        state.passed(gtid)
        self.gtid = None

    # -- events -----------------------------------------------------------------------------
    def _event(self, event, stream: binlog_compat.Stream) -> None:
        if isinstance(event, LightEvent):
            self._light(event)
            return
        if isinstance(event, FormatDescriptionEvent):
            self.form = BinlogFormat.of(_raw(event))
            return
        if isinstance(event, RotateEvent):
            self.file = event.next_binlog
            if self.position is None or not self.index:
                self.position = Position(event.next_binlog, event.position)
            return
        end = event.packet.log_pos  # where the next event starts
        self.last_event_time = float(event.timestamp or self.last_event_time)
        if self.position is None and self.file:
            self.position = Position(self.file, end)
        if isinstance(event, GtidEvent | MariadbGtidEvent):
            self.gtid = str(event.gtid)
        elif isinstance(event, TableMapEvent):
            self._table_map(event)
        elif isinstance(event, WriteRowsEvent | UpdateRowsEvent | DeleteRowsEvent):
            self._rows(event, _text(event.schema), _text(event.table))
        elif isinstance(event, XidEvent):
            self._transaction_end(end)
        elif isinstance(event, QueryEvent):
            query = event.query.strip()
            upper = query[:8].upper()
            if upper.startswith("BEGIN") or upper.startswith("XA "):
                return
            if upper.startswith("COMMIT"):
                self._transaction_end(end)
                return
            self._ddl(query, _text(event.schema), end)
        elif isinstance(event, HeartbeatLogEvent):
            self._heartbeat()

    def _light(self, event: LightEvent) -> None:
        """An event read from its bytes (binlog_compat.LIGHT): as `_event` would the
        library's event of it."""
        end = event.log_pos
        self.last_event_time = float(event.timestamp or self.last_event_time)
        if self.position is None and self.file:
            self.position = Position(self.file, end)
        kind = event.event_type
        if kind in ROWS_OPS:
            names = self.table_ids.get(event.table_id)
            if names is not None:  # (else not a routed table)
                self._rows(event, *names)
        elif kind == TABLE_MAP_EVENT:
            self._table_map(event)
        elif kind == XID_EVENT:
            self._transaction_end(end)
        elif kind == MARIADB_GTID_EVENT:
            self.gtid = event.gtid
        else:
            self._heartbeat()

    def _heartbeat(self) -> None:
        if os.getppid() != self.parent:
            raise StopRequested  # the daemon was killed: stop streaming with its server id
        # (the heartbeat carries the position: no empty Changes, whose old event time
        # would show an idle source as lagging until the heartbeat is read)
        self._flush(force=False)
        self._send(Heartbeat(self.setup.source, str(self.position), time.time(), gtid=self._state_text()))

    def _keep_completed(self) -> None:
        """Before reading again from the start of the current transaction: send what
        completed transactions produced (reading again will not see them) and drop
        what the unfinished one did (it will be read again)."""
        if self.position is not None and self.file is not None:
            current = (file_sequence(self.position.file), self.position.pos)
            self.batch = [c for c in self.batch if (c.id[0], c.id[1]) != current]
        if self.batch:
            self._flush()

    def _transaction_end(self, end: int) -> None:
        self._passed(self.position, bool(self.index))
        self.position = Position(self.file, end)
        self.index = {}
        # many small transactions: send every few milliseconds, not every commit
        if self.batch and (
            len(self.batch) >= SEND_EVERY or time.monotonic() - self.last_send >= SEND_INTERVAL
        ):
            self._flush()

    def _table_map(self, event: TableMapEvent) -> None:
        schema, table = _text(event.schema), _text(event.table)
        if self.router.route(schema, table) is None:
            return
        if self.pins:
            self._pinned()
        self.table_ids[event.table_id] = (schema, table)
        tracked = self._image(schema, table)
        if tracked is None:
            return
        raw = _raw(event)
        known = self.maps.get(event.table_id)
        if known is None or known[HEADER:-CHECKSUM] != raw[HEADER:-CHECKSUM]:
            # the same table map's bytes again, where the table is the same: applied
            # downstream, one renamed copy serves every event of it (only the header's
            # position and time differ)
            self.maps[event.table_id] = raw
        seen = self.patched.get(event.table_id)
        if seen is None or seen[0] is not event.table_obj or seen[1] is not tracked:
            try:
                patch_table_map(event.columns, tracked, getattr(event, "null_bitmask", None))
            except SchemaMismatch as exc:
                self._problem(schema, table, str(exc))
                return
            self.patched[event.table_id] = (event.table_obj, tracked)
        # (a DDL of another table cleared the codecs: the same map needs one again)
        cached = (id(tracked), event.table_id)
        if cached not in self.codecs:
            try:
                self.codecs[cached] = RowCodec(tracked, event.columns)
                self.event_codecs[cached] = EventCodec.of(tracked, event.columns)
            except Unsupported as exc:
                log.info(
                    "source %s: %s.%s is decoded by the library (%s)", self.setup.source, schema, table, exc
                )
                self.codecs[cached] = None
        if self.codecs[cached] is None:
            self.stream.library_tables.add(event.table_id)  # its rows the library's way
        else:
            self.stream.library_tables.discard(event.table_id)

    def _image(self, schema: str, table: str) -> Table | None:
        """The tracked table as its row events hold it (`lattice.row_image`: MariaDB's
        hidden hash columns after its own), one object per tracked version."""
        tracked = self.tracker.get(schema, table)
        if tracked is None or not self.rules.hidden_hash_columns:
            return tracked
        known = self.images.get(id(tracked))
        if known is None or known[0] is not tracked:
            known = self.images[id(tracked)] = (tracked, row_image(tracked))
        return known[1]

    def _rows(self, event, schema: str, table: str) -> None:
        """A rows event of the table: the library's, or one read from its bytes."""
        route = self.router.route(schema, table)
        if route is None:
            return
        key = table_key(schema, table)
        if self.pins:
            self._pinned()
        if _FAULTS and fault_point("worker_loses_table"):  # (a worker that stops reading a table: tests)
            self.problems[key] = "a fault the test injected"
        if key in self.problems:
            self._drop(route, schema, table, key)
            return
        tracked = self._image(schema, table)
        if tracked is None:
            self._problem(schema, table, f"rows for {key}, whose schema is not tracked")
            self._drop(route, schema, table, key)
            return
        shard = ShardId(self.setup.source, schema, table)  # interned: one object per table
        try:
            row_filter = self._row_filter(shard, tracked)
        except RowFilterError as exc:
            self._problem(schema, table, exc.pause_reason(shard))
            self._drop(route, schema, table, key)
            return
        extra = self._extra(route, shard)
        seq = file_sequence(self.file)
        start = self.position.pos
        codec = self.codecs.get((id(tracked), event.table_id))
        # (a filtered table's rows are decoded: the filter reads their values)
        shape = self._as_is(event, route, tracked) if codec is not None and row_filter is None else None
        decoded = len(self.batch)
        light = type(event) is LightEvent
        # as it is: (its bytes, table map, codec, shape, its rows), None: decoded
        unit = None
        event_codec = self.event_codecs.get((id(tracked), event.table_id))
        # (its rows are counted, for query-status and the metrics: the server does not say)
        skips = self.skips(event_codec) if shape is not None else None
        if skips is not None:
            raw = event.raw if light else _raw(event)
            rows = count_rows(raw, self.form.checksum, skips)
            unit = (raw, self.maps[event.table_id], event_codec, shape, rows)
        elif codec is not None and row_filter is None:
            extended = self._extended(event, route, tracked, shard)
            if extended is not None:
                raw = event.raw if light else _raw(event)
                wide, rows = extend_rows(raw, self.form.checksum, extended.skips, extended.extension)
                # (fewer rows: decoded, a batch of small events folds per key, apply.net, faster)
                if rows >= EXTEND_MIN_ROWS:
                    unit = (wide, extended.table_map, extended.codec, extended.shape, rows)
        if unit is not None:
            k = self.index[key] = self.index.get(key, 0) + 1
            self.batch.append(
                RowEvent(
                    (seq, start, event_end(k)), shard, route.target, unit[0], unit[1], self.form, *unit[2:]
                )
            )
        elif codec is not None:
            self._rows_fast(event, codec, key, shard, route.target, extra, seq, start)
        elif light:  # (its table id is the library's: binlog_compat.Stream.library_tables)
            self._problem(schema, table, "its rows were read without the library that decodes them")
        else:
            self._rows_library(event, tracked, key, shard, route.target, extra, seq, start)
        if row_filter is not None and len(self.batch) > decoded:
            self._drop_filtered(row_filter, decoded)
        if len(self.batch) >= SEND_EVERY:
            self._flush(force=True)

    def _drop(self, route, schema: str, table: str, key: str) -> None:
        """A row event of a table whose rows cannot be read: left out, and said so in its
        place in the stream (one `Dropped` per shard and transaction)."""
        shard = ShardId(self.setup.source, schema, table)
        cid = (file_sequence(self.file), self.position.pos, 0)
        last = self.batch[-1] if self.batch else None
        if type(last) is Dropped and last.id == cid and last.shard == shard:
            self.batch[-1] = last._replace(events=last.events + 1)
        else:
            self.batch.append(Dropped(cid, shard, route.target, 1, self.problems.get(key, "")))

    def _pinned(self) -> dict[str, Table]:
        """The tables decisions set from where the stream is now on (`Pin`): taken in place
        of what the tracker had, their rows read again. Those set right here (a DDL's own
        position: the table after the DDL the tracker could not follow), by table."""
        here = (file_sequence(self.file), self.position.pos)
        at_here = {}
        while self.pins and self.pins[0].id[:2] <= here:
            pin = self.pins.pop(0)
            self.tracker.tables[pin.table] = parse_table(pin.create, shown=True)
            if pin.id[:2] == here:
                at_here[pin.table] = self.tracker.tables[pin.table]
            self.problems.pop(pin.table, None)
            self._forget_versions()
            log.info(
                "source %s: %s is taken as set at %s (%s)",
                self.setup.source,
                pin.table,
                Position(self.file, pin.id[1]),
                " ".join(pin.create.split())[:120],
                extra={"source": self.setup.source},
            )
        return at_here

    def _row_filter(self, shard: ShardId, tracked: Table) -> TableRowFilter | None:
        """The row filters covering the shard, compiled for this version of its table
        (once); RowFilterError where a condition reads a column it no longer has."""
        cached = self.row_filters.get(shard)
        if cached is None or cached[0] is not tracked:
            found = compile_filters(self.router.filters.rows, shard, tracked)
            cached = self.row_filters[shard] = (tracked, found)
        return cached[1]

    def _drop_filtered(self, row_filter: TableRowFilter, first: int) -> None:
        """The rows decoded from `first` on that the filter ignores, dropped and counted."""
        kept = []
        for change in self.batch[first:]:
            if not row_filter.ignores(change):
                kept.append(change)
                continue
            last = self.counted_to.get(change.shard)
            if last is None or change.id > last:  # (read again after a rewind: counted once)
                self.counted_to[change.shard] = change.id
                counted = (change.shard, ROW_FILTER_KINDS[change.op])
                self.filtered[counted] = self.filtered.get(counted, 0) + 1
        self.batch[first:] = kept

    def _as_is(self, event, route, tracked: Table) -> RowShape | None:
        """The shape of the table's rows if this event may go as the binlog holds it
        (`replicator.source.row_events`): its target holds the same, no extract column
        is added, and it is a version 1 rows event of a binlog whose format we have."""
        target = self.native.get(route.target)
        if target is None or route.extract or self.form is None or event.event_type not in ROWS_OPS:
            return None
        if event.table_id not in self.maps:
            return None
        shape = self.shapes.get(id(tracked), False)
        if shape is False:
            shape = self.shapes[id(tracked)] = row_shape(tracked, self.setup.upstream)
        return shape if self.fits(shape, target) else None

    def _extended(self, event, route, tracked: Table, shard: ShardId) -> Extended | None:
        """How this event goes as it is though its route adds extract columns: their values
        appended to it (`replicator.source.row_extend`), where the target holds the shard's
        columns and then them, as VARCHARs the values fit."""
        target = self.native.get(route.target)
        if target is None or not route.extract or self.form is None or event.event_type not in ROWS_OPS:
            return None
        table_map = self.maps.get(event.table_id)
        if table_map is None:
            return None
        cached = (id(tracked), id(table_map), shard, id(target))
        if cached in self.extended:
            return self.extended[cached]
        found = self.extended[cached] = self._extension(event, route, tracked, shard, target, table_map)
        return found

    def _extension(
        self, event, route, tracked: Table, shard: ShardId, target, table_map: bytes
    ) -> Extended | None:
        shape = self.shapes.get(id(tracked), False)
        if shape is False:
            shape = self.shapes[id(tracked)] = row_shape(tracked, self.setup.upstream)
        names = tuple(route.extract.values())
        wide = extended_shape(shape, target, names) if shape is not None else None
        if wide is None or not self.fits(wide, target):
            return None
        added = wide[len(shape) :]
        columns = [Column(n, entry[1], nullable=entry[2]) for n, entry in zip(names, added, strict=True)]
        extension = Extension.of(route.extract_values(shard.parts()), columns)
        event_codec = self.event_codecs[(id(tracked), event.table_id)]
        mapped_columns = event_codec.columns
        skips = self.skips(event_codec)
        if extension is None or skips is None:
            return None
        map_columns = extended_map_columns(mapped_columns, extension)
        codec = EventCodec.of(extended_table(tracked, columns), map_columns, self._extra(route, shard)[1])
        mapped = extend_table_map(table_map, self.form.checksum, extension)
        return Extended(wide, extension, skips, mapped, codec)

    def _extra(self, route, shard: ShardId) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Extract columns (DM's): names and literals of where the rows come from (the
        same for every event of the shard: made once)."""
        found = self._extras.get(shard)
        if found is None or found[0] is not route:
            names = tuple(route.extract.values())
            literals = tuple(literal(v) for v in route.extract_values(shard.parts()))
            found = self._extras[shard] = (route, (names, literals))
        return found[1]

    def _rows_library(
        self, event, tracked: Table, key: str, shard: ShardId, target: str, extra, seq: int, start: int
    ) -> None:
        """Rows decoded by python-mysql-replication (tables our codec leaves to it)."""
        encoder = self.encoders.get(id(tracked))
        if encoder is None:
            encoder = self.encoders[id(tracked)] = Encoder(tracked)
        try:
            rows = event.rows
        except Exception as exc:  # a column type the library cannot decode: pause this shard only
            reason = f"its rows cannot be decoded ({type(exc).__name__}: {exc})"
            self._problem(shard.schema, shard.table, reason)
            return
        names, literals = extra
        columns = (*encoder.names, *names)
        k = self.index[key] = self.index.get(key, 0) + 1
        for n, row in enumerate(rows, start=1):
            cid = (seq, start, row_index(k, n))
            if isinstance(event, WriteRowsEvent):
                values = (*encoder.encode(row["values"], row.get("none_sources")).values(), *literals)
                self.batch.append(Change(cid, shard, target, "I", columns, values))
            elif isinstance(event, UpdateRowsEvent):
                before = (
                    *encoder.encode(row["before_values"], row.get("before_none_sources")).values(),
                    *literals,
                )
                after = (
                    *encoder.encode(row["after_values"], row.get("after_none_sources")).values(),
                    *literals,
                )
                self.batch.append(Change(cid, shard, target, "U", columns, after, before))
            else:
                before = (*encoder.encode(row["values"], row.get("none_sources")).values(), *literals)
                self.batch.append(Change(cid, shard, target, "D", columns, None, before))

    def _rows_fast(
        self, event, codec: RowCodec, key: str, shard: ShardId, target: str, extra, seq: int, start: int
    ) -> None:
        """The rows of an event through our codec, straight from the bytes."""
        if type(event) is LightEvent:
            body = event.raw
            layout = rows_layout(body, self.form.checksum)
        else:
            body = rows_body(event)
            count = event.number_of_columns
            op = ROWS_OPS[_V1.get(event.event_type, event.event_type)]
            after = _present(event.columns_present_bitmap2, count) if op == "U" else None
            layout = RowsLayout(op, count, _present(event.columns_present_bitmap, count), after, 0, len(body))
        names, literals = extra
        k = self.index[key] = self.index.get(key, 0) + 1
        append_changes(
            self.batch,
            body,
            layout,
            codec,
            Origin(shard, target, names, literals),
            (seq, start),
            k,
            lambda present: self.column_names.of(codec, present, names),
        )

    def _forget_versions(self) -> None:
        """What was made for the tables' versions of before a DDL or a rewind: both make
        new versions, and these are keyed by the ids of the old ones' objects."""
        self.encoders.clear()
        self.codecs.clear()
        self.event_codecs.clear()
        self.shapes.clear()
        self.images.clear()
        self.extended.clear()
        self.column_names.clear()

    def _ddl(self, query: str, schema: str | None, end: int) -> None:
        self._flush(force=True)
        cid = (file_sequence(self.file), self.position.pos, 0)
        start = str(self.position)
        prior = {p.table: self.tracker.tables.get(p.table) for p in self.pins}  # (as `_pinned` finds them)
        pinned = self._pinned() if self.pins else {}
        result = self.tracker.apply(query, schema)
        if result.problem and pinned and set(result.touched) <= pinned.keys():
            # the DDL a decision gave its table for, read again (from a pause before it: a
            # shard paused by a conflict ran it then; or after a restart): that table stands
            # for it, decided already; said in its place, for the rows of its paused time
            # replayed on scratch (live stories 112040: the column it added lost there)
            self.tracker.tables.update(pinned)
            self._forget_versions()
            self._pinned_ddl(query, cid, start, Position(self.file, end), pinned, prior)
            self._passed(self.position, False)
            self.position = Position(self.file, end)
            self.index = {}
            return
        if isinstance(result.statement, OtherStatement | DropDatabase) and "DATABASE" in query.upper():
            self._charsets.clear()  # a database's default character set may have changed
        self._forget_versions()
        upstream = self.setup.upstream
        tables = {k: (render_table(t, upstream) if t is not None else None) for k, t in result.after.items()}
        routes, shards = {}, {}
        for k in result.touched:
            schema, table = split_table_key(k)
            route = self.router.route(schema, table)
            if route is not None:
                routes[k], shards[k] = route, ShardId(self.setup.source, schema, table)
        changes = result.changes(shards.get)
        before, gtid = self._state_text(), self.gtid
        self._passed(self.position, False)
        self.position = Position(self.file, end)  # a DDL is a transaction of its own
        self.index = {}
        for k in result.after:
            self.problems.pop(k, None)
        if result.problem:
            # the tracker could not follow: this table's rows cannot be read until its
            # schema is set again; the coordinator hears of it through this DDL
            why = f"a DDL it could not follow: {result.problem}"
            self.problems.update(dict.fromkeys(result.touched, why))
        if not changes and not tables:
            return
        for k, change in changes or [(None, None)]:
            route = routes.get(k)
            self._send(
                DDLEvent(
                    source=self.setup.source,
                    id=cid,
                    position=start,
                    next_position=str(self.position),
                    target=route.target if route else None,
                    change=change,
                    tables=tables,
                    gtid=gtid if before is not None else None,
                    gtid_before=before,
                )
            )

    def _pinned_ddl(
        self,
        query: str,
        cid: ChangeId,
        start: str,
        end: Position,
        pinned: dict[str, Table],
        prior: dict[str, Table],
    ) -> None:
        """A `ChangeKind.PINNED` DDLEvent for each routed table a pin stands for here."""
        upstream = self.setup.upstream
        for k, table in pinned.items():
            schema, name = split_table_key(k)
            route = self.router.route(schema, name)
            if route is None:
                continue
            shard = ShardId(self.setup.source, schema, name)
            change = SchemaChange(shard, ChangeKind.PINNED, query, before=prior.get(k), after=table)
            self._send(
                DDLEvent(
                    source=self.setup.source,
                    id=cid,
                    position=start,
                    next_position=str(end),
                    target=route.target,
                    change=change,
                    tables={k: render_table(table, upstream)},
                )
            )

    def _problem(self, schema: str, table: str, reason: str) -> None:
        """A routed table we cannot read: the daemon pauses its shard (once)."""
        key = table_key(schema, table)
        if key in self.problems:
            return
        self.problems[key] = reason
        self._flush(force=True)
        route = self.router.route(schema, table)
        shard = ShardId(self.setup.source, schema, table)
        self._send(
            DDLEvent(
                source=self.setup.source,
                id=(file_sequence(self.file), self.position.pos, 0),
                position=str(self.position),
                next_position=str(self.position),
                target=route.target if route else None,
                change=SchemaChange(shard, ChangeKind.UNREADABLE, "", problem=reason),
            )
        )

    def _schema_charset(self, schema: str) -> tuple[str, str | None] | None:
        """A database's default character set, asked of the server the first time a
        CREATE TABLE in it names none (the binlog does not carry it)."""
        if schema not in self._charsets:
            conn = connect(self.setup.connection)
            try:
                with conn.cursor() as cur:
                    self._charsets[schema] = schema_charset(cur, schema)
            finally:
                conn.close()
        return self._charsets[schema]

    # -- the pipe -----------------------------------------------------------------------------
    def _flush(self, force: bool = True) -> None:
        if not self.batch and not force:
            return
        state = self._state_text()
        if self.index and state is not None and self.gtid and self.position is not None:
            # (a transaction sent in parts: its changes may be applied before it ends)
            self.txns.add((file_sequence(self.position.file), self.position.pos), self.gtid, state)
        self._send(
            Changes(
                self.setup.source,
                self.batch,
                str(self.position),
                self.last_event_time,
                state,
                self.txns,
                self.filtered,
            )
        )
        self.batch, self.txns, self.filtered = [], TxnGtids(), {}
        self.last_send = time.monotonic()

    def _send(self, message) -> None:
        self.pipe.send(message)

    def _commands(self, timeout: float = 0.0) -> None:
        if not self.pipe.poll(timeout):
            return
        command = self.pipe.recv()
        if isinstance(command, NativeTargets):
            self.native = command.shapes
            self.extended.clear()  # (made for the shapes of before)
            return
        if isinstance(command, Stop):
            self._flush(force=True)
            raise StopRequested
        if isinstance(command, Rewind):
            self.position = Position.parse(command.position)
            self.tracker.reset(_tables(command.schemas))
            self._forget_versions()
            self.problems.clear()
            self.pins = sorted(command.pins)
            self.batch.clear()
            self.txns = TxnGtids()
            self.index = {}
            self._send(Rewound(self.setup.source, command.seq))
            raise RewindRequested


_FAULTS = faults_armed()  # (tests only: no call per row event otherwise)
_V1 = {30: 23, 31: 24, 32: 25}  # a version 2 rows event's type, as version 1
_PRESENT: dict[tuple[bytes, int], tuple[int, ...]] = {}


def _present(bitmap: bytes, count: int) -> tuple[int, ...]:
    """Column indexes a row image holds (all of them with binlog_row_image=FULL)."""
    found = _PRESENT.get((bitmap, count))
    if found is None:
        found = _PRESENT[(bitmap, count)] = tuple(present_columns(bitmap, count))
    return found


# Rows an event needs to go as it is with extract values appended: OLTP's one-row events cost
# the daemon and the server more as events than decoded and folded with their batch (sysbench:
# 21,000 rows/s against 24,600-30,000), bulk ones far less (172,000 rows/s against 49,000).
# (SHARDMERGE_EXTEND_MIN_ROWS: a test's way to send every event so, as `make chaos` can)
EXTEND_MIN_ROWS = int(os.environ.get("SHARDMERGE_EXTEND_MIN_ROWS", "8"))


def _raw(event) -> bytes:
    """An event's bytes as the binlog holds them (the packet's, past its OK byte)."""
    if isinstance(event, LightEvent):
        return event.raw
    return bytes(event.packet.packet._data[1:])


def _tables(schemas: dict[str, str]) -> dict[str, Table]:
    return {k: parse_table(sql, shown=True) for k, sql in schemas.items()}


def _text(value) -> str | None:
    if value is None:
        return None
    text = value.decode() if isinstance(value, bytes) else str(value)
    return text or None  # a query run with no default database


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
        f'--source {source}` (the stream goes on from where the copy began; README "Resync a shard"), '
        "or copy every shard afresh with `shardmerge backfill --config TASK --truncate`"
    )


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
