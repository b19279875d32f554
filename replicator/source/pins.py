"""The tables decisions set from a point of a source's binlog on (`messages.Pin`: an
operator's `set-schema` of a shard whose DDL its worker could not follow), still ahead of
the worker's stream: each taken in place of what the tracker had when the stream reaches it."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from lattice import Table, parse_table
from replicator.source.messages import Pin
from replicator.source.problems import Problems
from replicator.source.read_state import ReadState
from replicator.source.tracker import Tracker
from replicator.source.versions import Versions
from replicator.source.worker_setup import WorkerContext
from replicator.state.positions import Position, file_sequence

log = logging.getLogger("shardmerge.worker")


class Pins:
    def __init__(
        self,
        context: WorkerContext,
        read: ReadState,
        tracker: Tracker,
        problems: Problems,
        versions: Versions,
        pins: Iterable[Pin] = (),
    ) -> None:
        self.context, self.read, self.tracker = context, read, tracker
        self.problems, self.versions = problems, versions
        self.ahead: list[Pin] = sorted(pins)  # still ahead of the stream

    def reset(self, pins: Iterable[Pin]) -> None:
        self.ahead = sorted(pins)

    def prior(self) -> dict[str, Table | None]:
        """The tables pinned ahead, as the tracker has them now (as `take` finds them)."""
        return {p.table: self.tracker.tables.get(p.table) for p in self.ahead}

    def take(self) -> dict[str, Table]:
        """The tables decisions set from where the stream is now on (`Pin`): taken in place
        of what the tracker had, their rows read again. Those set right here (a DDL's own
        position: the table after the DDL the tracker could not follow), by table."""
        read = self.read
        here = (file_sequence(read.file), read.position.pos)
        at_here = {}
        while self.ahead and self.ahead[0].id[:2] <= here:
            pin = self.ahead.pop(0)
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
        return at_here
