"""A source's table map events, as its worker keeps them: which routed table each table id
is, the last map's bytes (for events sent as they are), the tracked table as its row events
hold it, and the codecs its rows are read with (or that the library decodes them)."""

from __future__ import annotations

import logging

from lattice import Table, row_image
from replicator.shard_id import table_key
from replicator.source.binlog_compat import event_bytes, name_text
from replicator.source.decode import SchemaMismatch, patch_table_map
from replicator.source.pins import Pins
from replicator.source.problems import Problems
from replicator.source.row_events import CHECKSUM, HEADER, EventCodec
from replicator.source.rowcodec import RowCodec, Unsupported
from replicator.source.tracker import Tracker
from replicator.source.versions import Versions
from replicator.source.worker_setup import WorkerContext

log = logging.getLogger("shardmerge.worker")


class TableMapHandler:
    def __init__(
        self, context: WorkerContext, tracker: Tracker, pins: Pins, problems: Problems, versions: Versions
    ) -> None:
        self.context, self.tracker, self.pins, self.problems = context, tracker, pins, problems
        self.maps: dict[int, bytes] = {}  # table id -> its last table map event
        self.table_ids: dict[int, tuple[str, str]] = {}  # table id -> routed (schema, table)
        # table id -> (the parsed map, the tracked table) it was last patched for
        self.patched: dict[int, tuple[object, Table]] = {}
        self.codecs: dict[tuple[int, int], RowCodec | None] = {}  # (tracked table, table id) -> codec
        self.event_codecs: dict[tuple[int, int], EventCodec] = {}  # likewise, for events sent as they are
        self.images: dict[int, tuple[Table, Table]] = {}  # id(tracked table) -> it, its row image
        # table id -> (the parsed map, "schema.table", the tracker's table, the stream's library
        # tables) its last map was handled for: the same again needs nothing done (every
        # transaction has its table maps, the same bytes, parsed once: binlog_compat)
        self.steady: dict[int, tuple[object, str, Table, set[int]]] = {}
        versions.kept_by(self.forget_versions)

    def forget_versions(self) -> None:
        self.codecs.clear()
        self.event_codecs.clear()
        self.images.clear()
        self.steady.clear()

    def table_map(self, event, library_tables: set[int]) -> None:
        """A table map event (the library's, or `binlog_compat.LightTableMap`);
        `library_tables`: the open stream's table ids whose rows the library decodes."""
        steady = self.steady.pop(event.table_id, None)
        if (
            steady is not None
            and steady[0] is getattr(event, "table_obj", None)
            and steady[3] is library_tables
            and steady[2] is self.tracker.tables.get(steady[1])
            and not self.pins.ahead
        ):
            self.steady[event.table_id] = steady
            return
        schema, table = name_text(event.schema), name_text(event.table)
        if self.context.router.route(schema, table) is None:
            # (the id is another table's now: its rows are not a routed table's)
            self.table_ids.pop(event.table_id, None)
            return
        if self.pins.ahead:
            self.pins.take_said()
        self.table_ids[event.table_id] = (schema, table)
        tracked = self.image(schema, table)
        if tracked is None:
            return
        raw = event_bytes(event)
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
                self.problems.report(schema, table, str(exc))
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
                    "source %s: %s.%s is decoded by the library (%s)", self.context.source, schema, table, exc
                )
                self.codecs[cached] = None
        if self.codecs[cached] is None:
            library_tables.add(event.table_id)  # its rows the library's way
        else:
            library_tables.discard(event.table_id)
        key = table_key(schema, table)
        if event.table_obj is not None:
            self.steady[event.table_id] = (event.table_obj, key, self.tracker.tables.get(key), library_tables)

    def image(self, schema: str, table: str) -> Table | None:
        """The tracked table as its row events hold it (`lattice.row_image`: MariaDB's
        hidden hash columns after its own), one object per tracked version."""
        tracked = self.tracker.get(schema, table)
        if tracked is None or not self.context.rules.hidden_hash_columns:
            return tracked
        known = self.images.get(id(tracked))
        if known is None or known[0] is not tracked:
            known = self.images[id(tracked)] = (tracked, row_image(tracked))
        return known[1]
