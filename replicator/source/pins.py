"""The tables decisions set from a point of a source's binlog on (`messages.Pin`: an
operator's `set-schema` of a shard whose DDL its worker could not follow), still ahead of
the worker's stream: each taken in place of what the tracker had when the stream reaches it."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from lattice import Table, parse_table, render_table
from replicator.shard_id import ShardId, split_table_key
from replicator.source.messages import DDLEvent, Pin
from replicator.source.outbox import Outbox
from replicator.source.problems import Problems
from replicator.source.read_state import ReadState
from replicator.source.schema_change import ChangeKind, SchemaChange
from replicator.source.tracker import Tracker
from replicator.source.versions import Versions
from replicator.source.worker_setup import WorkerContext
from replicator.state.positions import ChangeId, Position, file_sequence

log = logging.getLogger("shardmerge.worker")


class Pins:
    def __init__(
        self,
        context: WorkerContext,
        read: ReadState,
        tracker: Tracker,
        problems: Problems,
        versions: Versions,
        outbox: Outbox,
        pins: Iterable[Pin] = (),
    ) -> None:
        self.context, self.read, self.tracker, self.outbox = context, read, tracker, outbox
        self.problems, self.versions = problems, versions
        self.ahead: list[Pin] = []  # still ahead of the stream
        self.at_start: list[Pin] = []  # right where it starts (`reset`)
        self.reset(pins)

    def reset(self, pins: Iterable[Pin]) -> None:
        """The pins from where the stream starts now (`read.position`) on. Those right there
        (a way out's, which its shard decided on: `SourceState.pins_from`) the tracker holds
        already (`SourceState.schemas_at`): they stand only for a DDL there it cannot follow
        (L75: the DDL the way out gave the table for, where a start after a restart read from),
        taken at that DDL, dropped at anything else read first."""
        start = self.read.position
        here = (file_sequence(start.file), start.pos) if start is not None else None
        pins = sorted(pins)
        self.at_start = [p for p in pins if p.id[:2] == here]
        self.ahead = [p for p in pins if p.id[:2] != here]

    def prior(self) -> dict[str, Table | None]:
        """The tables pinned ahead, as the tracker has them now (as `take` finds them)."""
        return {p.table: self.tracker.tables.get(p.table) for p in (*self.at_start, *self.ahead)}

    def take(self) -> dict[str, Table]:
        """The tables decisions set from where the stream is now on (`Pin`): taken in place
        of what the tracker had, their rows read again. Those set right here (a DDL's own
        position: the table after the DDL the tracker could not follow), by table."""
        read = self.read
        here = (file_sequence(read.file), read.position.pos)
        at_start, self.at_start = self.at_start, []
        started = {p.table: parse_table(p.create, shown=True) for p in at_start if p.id[:2] == here}
        return {**started, **self._take()[1]}

    def take_said(self) -> None:
        """At a table map or a rows event: the pins reached taken, each said as a pinned DDL
        of its shard where it holds from (before the transaction's rows). A resumed shard's
        rows of its paused time go through a scratch table shaped as its table at the pause:
        one set by a decision from a row on (the first its worker could not read, after a
        skipped DDL) must reshape it there, or the rows' columns it lacks are lost (live
        stories 610888: a column set-schema gave the shard, its values of then lost)."""
        self.at_start = []  # (rows first: no DDL right at the start)
        prior = self.prior()
        taken, _ = self._take()
        read = self.read
        if taken:
            self.outbox.flush(force=True)  # (the changes read before it go first)
        for table, pin in taken.items():
            start = Position(read.file, pin.id[1])
            cid = (pin.id[0], pin.id[1], 0)
            self.say({table: self.tracker.tables[table]}, prior, cid, str(start), start,
                     f"/* {table} as a decision set it (set-schema) */")

    def say(
        self,
        pinned: dict[str, Table],
        prior: dict[str, Table | None],
        cid: ChangeId,
        start: str,
        end: Position,
        query: str,
    ) -> None:
        """A `ChangeKind.PINNED` DDLEvent for each routed table a pin stands for here."""
        upstream = self.context.upstream
        for k, table in pinned.items():
            schema, name = split_table_key(k)
            route = self.context.router.route(schema, name)
            if route is None:
                continue
            shard = ShardId(self.context.source, schema, name)
            change = SchemaChange(shard, ChangeKind.PINNED, query, before=prior.get(k), after=table)
            self.outbox.send(
                DDLEvent(
                    source=self.context.source,
                    id=cid,
                    position=start,
                    next_position=str(end),
                    target=route.target,
                    change=change,
                    tables={k: render_table(table, upstream)},
                )
            )

    def _take(self) -> tuple[dict[str, Pin], dict[str, Table]]:
        """The pins reached, taken (by table), and the tables of those set right here."""
        read = self.read
        here = (file_sequence(read.file), read.position.pos)
        taken, at_here = {}, {}
        while self.ahead and self.ahead[0].id[:2] <= here:
            pin = self.ahead.pop(0)
            taken[pin.table] = pin
            self.tracker.tables[pin.table] = parse_table(pin.create, shown=True)
            if pin.id[:2] == here:
                at_here[pin.table] = self.tracker.tables[pin.table]
            self.problems.clear(pin.table)
            self.versions.forget()
            log.info(
                "source %s: %s is taken as set at %s (%s)",
                self.context.source,
                pin.table,
                Position(read.file, pin.id[1]),
                " ".join(pin.create.split())[:120],
                extra={"source": self.context.source},
            )
        return taken, at_here
