"""A source's rows events, as its worker reads them into its batch: each goes as the binlog
holds it where its target takes it (`row_events`, with extract values appended where its
route adds them: `row_extend`), or its rows are decoded (by our codec from the bytes, or by
the library); rows a row filter ignores are dropped and counted, and the rows of a table
that cannot be read go as `Dropped`."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

from pymysqlreplication.row_event import UpdateRowsEvent, WriteRowsEvent

from lattice import Column, Table
from replicator.faults import fault_point, faults_armed
from replicator.identity_memo import IdentityMemo
from replicator.shard_id import ShardId, table_key
from replicator.source.binlog_compat import LightEvent, event_bytes
from replicator.source.column_names import ColumnNames
from replicator.source.decode import Encoder, literal
from replicator.source.messages import Change, Dropped, RowEvent
from replicator.source.outbox import SEND_EVERY, Outbox
from replicator.source.pins import Pins
from replicator.source.problems import Problems
from replicator.source.read_state import ReadState
from replicator.source.row_events import (
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
from replicator.source.rowcodec import RowCodec, present_columns, rows_body
from replicator.source.table_maps import TableMapHandler
from replicator.source.versions import Versions
from replicator.source.worker_setup import WorkerContext
from replicator.state.positions import ChangeId, event_end, file_sequence, row_index

# Rows an event needs to go as it is with extract values appended: OLTP's one-row events cost
# the daemon and the server more as events than decoded and folded with their batch (sysbench:
# 21,000 rows/s against 24,600-30,000), bulk ones far less (172,000 rows/s against 49,000).
# (SHARDMERGE_EXTEND_MIN_ROWS: a test's way to send every event so, as `make chaos` can)
EXTEND_MIN_ROWS = int(os.environ.get("SHARDMERGE_EXTEND_MIN_ROWS", "8"))
# Bytes of an event up to which it is decoded first, and extended only where it turns out to have
# EXTEND_MIN_ROWS rows; a bigger one is extended first (decoded where it has fewer rows)
EXTEND_PROBE_BYTES = 1024


ColumnsOf = Callable[[tuple[int, ...]], tuple[str, ...]]  # a row image's value names, by its columns


class EventPlan(NamedTuple):
    """What `RowsHandler.rows` decides for a table's rows event, and the objects it decides
    from: the tracked table (`source`, the tracker's), the table map, the binlog's format,
    the targets that take events as they are (`native`). While each is the same object, and
    no pin or problem asks to look again, the next event of the table id is decided alike."""

    key: str  # "schema.table"
    source: Table | None
    table_map: bytes | None
    form: BinlogFormat | None
    native: dict[str, RowShape]
    origin: Origin  # the shard, its target, the extract columns' names and literals
    columns_of: ColumnsOf | None  # (for rows it decodes)
    codec: RowCodec | None  # None: decoded by the library
    event_codec: EventCodec | None
    shape: RowShape | None  # as the binlog holds them, where the target takes that
    skips: tuple | None  # (then) the skippers its rows are counted with
    extended: Extended | None  # with extract values appended


class RowsHandler:
    def __init__(
        self,
        context: WorkerContext,
        read: ReadState,
        outbox: Outbox,
        tables: TableMapHandler,
        pins: Pins,
        problems: Problems,
        versions: Versions,
        native: dict[str, RowShape],
    ) -> None:
        self.context, self.read, self.outbox = context, read, outbox
        self.tables, self.pins, self.problems = tables, pins, problems
        self.native = dict(native)  # target -> shape: events of tables holding it go as they are
        self.encoders: dict[int, Encoder] = {}
        self.shapes: dict[int, RowShape | None] = {}  # id(tracked table) -> row_shape
        self.fits = IdentityMemo(fits)  # (a table version's shape: one object)
        # (an event codec: one object per table version and table map) -> its columns' skippers
        self.skips = IdentityMemo(lambda codec: skippers(codec.columns))
        self._extras: dict[ShardId, tuple[object, tuple]] = {}  # shard -> (its route, _extra)
        # (table version, table map, shard, target shape) -> how its events carry its extract columns
        self.extended: dict[tuple, Extended | None] = {}
        self.column_names = ColumnNames()
        # shard -> (the table version, its filters.rows compiled for it)
        self.row_filters: dict[ShardId, tuple[Table, TableRowFilter | None]] = {}
        # shard -> the last row filters.rows dropped that was counted (kept across rewinds)
        self.counted_to: dict[ShardId, ChangeId] = {}
        # table id -> what `rows` decided for its last event (`EventPlan`), taken again for the
        # next while it holds: a transaction of one row is four events, and deciding again
        # from the route to the codec was a third of a worker's CPU
        self.plans: dict[int, EventPlan] = {}
        versions.kept_by(self.forget_versions)

    def forget_versions(self) -> None:
        self.encoders.clear()
        self.shapes.clear()
        self.extended.clear()
        self.column_names.clear()
        self.plans.clear()

    def retarget(self, native: dict[str, RowShape]) -> None:
        """The targets whose rows may go as events now (`NativeTargets`)."""
        self.native = native
        self.extended.clear()  # (made for the shapes of before)
        self.plans.clear()

    def rows(self, event, schema: str, table: str) -> None:
        """A rows event of the table: the library's, or one read from its bytes."""
        if type(event) is LightEvent and self.planned(event):
            return
        route = self.context.router.route(schema, table)
        if route is None:
            return
        key = table_key(schema, table)
        if self.pins.ahead:
            self.pins.take_said()
        if _FAULTS and fault_point("worker_loses_table"):  # (a worker that stops reading a table: tests)
            self.problems.mark([key], "a fault the test injected")
        if key in self.problems:
            self._drop(route, schema, table, key)
            return
        tracked = self.tables.image(schema, table)
        if tracked is None:
            self.problems.report(schema, table, f"rows for {key}, whose schema is not tracked")
            self._drop(route, schema, table, key)
            return
        shard = ShardId(self.context.source, schema, table)  # interned: one object per table
        try:
            row_filter = self._row_filter(shard, tracked)
        except RowFilterError as exc:
            self.problems.report(schema, table, exc.pause_reason(shard))
            self._drop(route, schema, table, key)
            return
        codec = self.tables.codecs.get((id(tracked), event.table_id))
        # (a filtered table's rows are decoded: the filter reads their values)
        plain = codec is not None and row_filter is None
        shape = self._as_is(event, route, tracked) if plain else None
        event_codec = self.tables.event_codecs.get((id(tracked), event.table_id))
        extra = self._extra(route, shard)
        # (its rows are counted, for query-status and the metrics: the server does not say)
        skips = self.skips(event_codec) if shape is not None else None
        plan = EventPlan(
            key,
            self.tables.tracker.tables.get(key),
            self.tables.maps.get(event.table_id),
            self.read.form,
            self.native,
            Origin(shard, route.target, *extra),
            self._columns_of(codec, extra[0]) if codec is not None else None,
            codec,
            event_codec,
            shape,
            skips,
            self._extended(event, route, tracked, shard) if plain and skips is None else None,
        )
        light = type(event) is LightEvent
        if light and plain and not _FAULTS:
            self.plans[event.table_id] = plan
        decoded = len(self.read.batch)
        self._emit(plan, event, light)
        if row_filter is not None and len(self.read.batch) > decoded:
            self._drop_filtered(row_filter, decoded)
        if len(self.read.batch) >= SEND_EVERY:
            self.outbox.flush(force=True)

    def planned(self, event: LightEvent) -> bool:
        """A rows event read from its bytes, in the batch as its table id's last one went,
        where that decision holds (`_holds`); False where it must be decided (`rows`)."""
        plan = self.plans.get(event.table_id)
        if plan is None or not self._holds(plan, event.table_id):
            return False
        self._emit(plan, event, True)
        if len(self.read.batch) >= SEND_EVERY:
            self.outbox.flush(force=True)
        return True

    def _holds(self, plan: EventPlan, table_id: int) -> bool:
        """Whether `plan` is what `rows` would decide for this event of its table id: made
        from the objects it was made from, and nothing since asks to look again (a pin to
        take, the table's rows found unreadable)."""
        return (
            plan.form is self.read.form
            and plan.native is self.native
            and plan.table_map is self.tables.maps.get(table_id)
            and plan.source is self.tables.tracker.tables.get(plan.key)
            and not self.pins.ahead
            and plan.key not in self.problems
        )

    def _emit(self, plan: EventPlan, event, light: bool) -> None:
        """The event's rows in the batch, as `plan` says: as the binlog holds them, with
        extract values appended, or decoded."""
        read = self.read
        unit = None
        if plan.skips is not None:
            raw = event.raw if light else event_bytes(event)
            rows = count_rows(raw, plan.form.checksum, plan.skips)
            unit = (raw, plan.table_map, plan.event_codec, plan.shape, rows)
        seq = file_sequence(read.file)
        start = read.position.pos
        if plan.extended is not None:
            # fewer rows: decoded, as a batch of small events folds per key (apply.net), faster.
            # A small event is decoded first (OLTP's have one row: one extended or counted
            # first was work done twice), a big one extended first (a bulk UPDATE's first rows
            # decoded cost more than all of it extended); what turns out the other way is let go
            raw = event.raw if light else event_bytes(event)
            extended = plan.extended
            if len(raw) <= EXTEND_PROBE_BYTES:
                batch = read.batch
                decoded = len(batch)
                if self._rows_fast(event, plan, seq, start, EXTEND_MIN_ROWS) < EXTEND_MIN_ROWS:
                    return
                del batch[decoded:]
                read.index[plan.key] -= 1
            wide, rows = extend_rows(raw, plan.form.checksum, extended.skips, extended.extension)
            if rows >= EXTEND_MIN_ROWS:
                unit = (wide, extended.table_map, extended.codec, extended.shape, rows)
        if unit is not None:
            k = read.index[plan.key] = read.index.get(plan.key, 0) + 1
            cid = (seq, start, event_end(k))
            shard, target = plan.origin.shard, plan.origin.target
            read.batch.append(RowEvent(cid, shard, target, unit[0], unit[1], plan.form, *unit[2:]))
        elif plan.codec is not None:
            self._rows_fast(event, plan, seq, start)
        elif light:  # (its table id is the library's: binlog_compat.Stream.library_tables)
            reason = "its rows were read without the library that decodes them"
            self.problems.report(plan.origin.shard.schema, plan.origin.shard.table, reason)
        else:
            shard, target = plan.origin.shard, plan.origin.target
            tracked = self.tables.image(shard.schema, shard.table)
            extra = (plan.origin.extra_names, plan.origin.extra)
            self._rows_library(event, tracked, plan.key, shard, target, extra, seq, start)

    def _drop(self, route, schema: str, table: str, key: str) -> None:
        """A row event of a table whose rows cannot be read: left out, and said so in its
        place in the stream (one `Dropped` per shard and transaction)."""
        batch = self.read.batch
        shard = ShardId(self.context.source, schema, table)
        cid = self.read.transaction_id()
        last = batch[-1] if batch else None
        if type(last) is Dropped and last.id == cid and last.shard == shard:
            batch[-1] = last._replace(events=last.events + 1)
        else:
            batch.append(Dropped(cid, shard, route.target, 1, self.problems.reason(key)))

    def _row_filter(self, shard: ShardId, tracked: Table) -> TableRowFilter | None:
        """The row filters covering the shard, compiled for this version of its table
        (once); RowFilterError where a condition reads a column it no longer has."""
        cached = self.row_filters.get(shard)
        if cached is None or cached[0] is not tracked:
            found = compile_filters(self.context.router.filters.rows, shard, tracked)
            cached = self.row_filters[shard] = (tracked, found)
        return cached[1]

    def _drop_filtered(self, row_filter: TableRowFilter, first: int) -> None:
        """The rows decoded from `first` on that the filter ignores, dropped and counted."""
        read = self.read
        kept = []
        for change in read.batch[first:]:
            if not row_filter.ignores(change):
                kept.append(change)
                continue
            last = self.counted_to.get(change.shard)
            if last is None or change.id > last:  # (read again after a rewind: counted once)
                self.counted_to[change.shard] = change.id
                counted = (change.shard, ROW_FILTER_KINDS[change.op])
                read.filtered[counted] = read.filtered.get(counted, 0) + 1
        read.batch[first:] = kept

    def _shape(self, tracked: Table) -> RowShape | None:
        shape = self.shapes.get(id(tracked), False)
        if shape is False:
            shape = self.shapes[id(tracked)] = row_shape(tracked, self.context.upstream)
        return shape

    def _as_is(self, event, route, tracked: Table) -> RowShape | None:
        """The shape of the table's rows if this event may go as the binlog holds it
        (`replicator.source.row_events`): its target holds the same, no extract column
        is added, and it is a version 1 rows event of a binlog whose format we have."""
        target = self.native.get(route.target)
        if target is None or route.extract or self.read.form is None or event.event_type not in ROWS_OPS:
            return None
        if event.table_id not in self.tables.maps:
            return None
        shape = self._shape(tracked)
        return shape if self.fits(shape, target) else None

    def _extended(self, event, route, tracked: Table, shard: ShardId) -> Extended | None:
        """How this event goes as it is though its route adds extract columns: their values
        appended to it (`replicator.source.row_extend`), where the target holds the shard's
        columns and then them, as VARCHARs the values fit."""
        target = self.native.get(route.target)
        if target is None or not route.extract or self.read.form is None or event.event_type not in ROWS_OPS:
            return None
        table_map = self.tables.maps.get(event.table_id)
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
        shape = self._shape(tracked)
        names = tuple(route.extract.values())
        wide = extended_shape(shape, target, names) if shape is not None else None
        if wide is None or not self.fits(wide, target):
            return None
        added = wide[len(shape) :]
        columns = [Column(n, entry[1], nullable=entry[2]) for n, entry in zip(names, added, strict=True)]
        extension = Extension.of(route.extract_values(shard.parts()), columns)
        event_codec = self.tables.event_codecs[(id(tracked), event.table_id)]
        mapped_columns = event_codec.columns
        skips = self.skips(event_codec)
        if extension is None or skips is None:
            return None
        map_columns = extended_map_columns(mapped_columns, extension)
        codec = EventCodec.of(extended_table(tracked, columns), map_columns, self._extra(route, shard)[1])
        mapped = extend_table_map(table_map, self.read.form.checksum, extension)
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
            self.problems.report(shard.schema, shard.table, reason)
            return
        names, literals = extra
        columns = (*encoder.names, *names)
        read = self.read
        k = read.index[key] = read.index.get(key, 0) + 1
        for n, row in enumerate(rows, start=1):
            cid = (seq, start, row_index(k, n))
            if isinstance(event, WriteRowsEvent):
                values = (*encoder.encode(row["values"], row.get("none_sources")).values(), *literals)
                read.batch.append(Change(cid, shard, target, "I", columns, values))
            elif isinstance(event, UpdateRowsEvent):
                before = (
                    *encoder.encode(row["before_values"], row.get("before_none_sources")).values(),
                    *literals,
                )
                after = (
                    *encoder.encode(row["after_values"], row.get("after_none_sources")).values(),
                    *literals,
                )
                read.batch.append(Change(cid, shard, target, "U", columns, after, before))
            else:
                before = (*encoder.encode(row["values"], row.get("none_sources")).values(), *literals)
                read.batch.append(Change(cid, shard, target, "D", columns, None, before))

    def _rows_fast(self, event, plan: EventPlan, seq: int, start: int, most: int = 0) -> int:
        """The rows of an event through our codec, straight from the bytes (`most`: as
        `append_changes`); how many."""
        read = self.read
        if type(event) is LightEvent:
            body = event.raw
            layout = rows_layout(body, plan.form.checksum)
        else:
            body = rows_body(event)
            count = event.number_of_columns
            op = ROWS_OPS[_V1.get(event.event_type, event.event_type)]
            before = present_columns(event.columns_present_bitmap, count)
            after = present_columns(event.columns_present_bitmap2, count) if op == "U" else None
            layout = RowsLayout(op, count, before, after, 0, len(body))
        k = read.index[plan.key] = read.index.get(plan.key, 0) + 1
        return append_changes(
            read.batch, body, layout, plan.codec, plan.origin, (seq, start), k, plan.columns_of, most
        )

    def _columns_of(self, codec: RowCodec, names: tuple[str, ...]) -> ColumnsOf:
        """The names of a row image's values decoded by `codec`, by the columns it holds."""
        of = self.column_names.of
        return lambda present: of(codec, present, names)


_FAULTS = faults_armed()  # (tests only: no call per row event otherwise)
_V1 = {30: 23, 31: 24, 32: 25}  # a version 2 rows event's type, as version 1
