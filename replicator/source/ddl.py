"""A source's DDL, as its worker reads it: each statement applied to the schema tracker,
and a `DDLEvent` sent for each routed table it touched (or one for the statement), with
the tables as they are after it; a DDL a pin stands for (`Pins`), and one the tracker
could not follow (its tables' rows cannot be read until their schema is set again)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lattice import DropDatabase, OtherStatement, render_table
from replicator.servers import connect
from replicator.shard_id import ShardId, split_table_key
from replicator.source.messages import DDLEvent
from replicator.source.outbox import Outbox
from replicator.source.pins import Pins
from replicator.source.problems import Problems
from replicator.source.read_state import ReadState
from replicator.source.tracker import Tracker
from replicator.source.upstream import schema_charset
from replicator.source.versions import Versions
from replicator.source.worker_setup import WorkerContext
from replicator.state.positions import Position


class SchemaCharsets:
    """A database's default character set, asked of the server the first time a
    CREATE TABLE in it names none (the binlog does not carry it)."""

    def __init__(self, connection: Mapping[str, Any]) -> None:
        self.connection = connection
        self._known: dict[str, tuple[str, str | None] | None] = {}

    def __call__(self, schema: str) -> tuple[str, str | None] | None:
        if schema not in self._known:
            conn = connect(self.connection)
            try:
                with conn.cursor() as cur:
                    self._known[schema] = schema_charset(cur, schema)
            finally:
                conn.close()
        return self._known[schema]

    def clear(self) -> None:
        self._known.clear()


class DdlHandler:
    def __init__(
        self,
        context: WorkerContext,
        read: ReadState,
        outbox: Outbox,
        tracker: Tracker,
        pins: Pins,
        problems: Problems,
        versions: Versions,
        charsets: SchemaCharsets,
    ) -> None:
        self.context, self.read, self.outbox, self.tracker = context, read, outbox, tracker
        self.pins, self.problems, self.versions, self.charsets = pins, problems, versions, charsets

    def ddl(self, query: str, schema: str | None, end: int) -> None:
        """A statement that is its transaction (a DDL), the next one starting at `end`."""
        read = self.read
        self.outbox.flush(force=True)
        cid = read.transaction_id()
        start = str(read.position)
        prior = self.pins.prior()  # (as `Pins.take` finds them)
        pinned = self.pins.take() if self.pins.ahead or self.pins.at_start else {}
        result = self.tracker.apply(query, schema)
        if result.problem and pinned and set(result.touched) <= pinned.keys():
            # the DDL a decision gave its table for, read again (from a pause before it: a
            # shard paused by a conflict ran it then; or after a restart): that table stands
            # for it, decided already; said in its place, for the rows of its paused time
            # replayed on scratch (live stories 112040: the column it added lost there)
            self.tracker.tables.update(pinned)
            self.versions.forget()
            self.pins.say(pinned, prior, cid, start, Position(read.file, end), query)
            read.transaction_ended(end, False)
            return
        if isinstance(result.statement, OtherStatement | DropDatabase) and "DATABASE" in query.upper():
            self.charsets.clear()  # a database's default character set may have changed
        self.versions.forget()
        upstream = self.context.upstream
        tables = {k: (render_table(t, upstream) if t is not None else None) for k, t in result.after.items()}
        routes, shards = {}, {}
        for k in result.touched:
            schema, table = split_table_key(k)
            route = self.context.router.route(schema, table)
            if route is not None:
                routes[k], shards[k] = route, ShardId(self.context.source, schema, table)
        changes = result.changes(shards.get)
        before, gtid = read.state_text(), read.gtid
        read.transaction_ended(end, False)  # a DDL is a transaction of its own
        for k in result.after:
            self.problems.clear(k)
        if result.problem:
            # the tracker could not follow: this table's rows cannot be read until its
            # schema is set again; the coordinator hears of it through this DDL
            self.problems.mark(result.touched, f"a DDL it could not follow: {result.problem}")
        if not changes and not tables:
            return
        for k, change in changes or [(None, None)]:
            route = routes.get(k)
            self.outbox.send(
                DDLEvent(
                    source=self.context.source,
                    id=cid,
                    position=start,
                    next_position=str(read.position),
                    target=route.target if route else None,
                    change=change,
                    tables=tables,
                    gtid=gtid if before is not None else None,
                    gtid_before=before,
                )
            )
