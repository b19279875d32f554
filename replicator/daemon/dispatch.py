"""What reaches the main loop, routed: what the source workers send (a batch of changes to
the row path, a DDL to the DDL path, a heartbeat, a worker's failure), what a resumed
shard's park feeds, a running shard's rows its worker could not read, and what other
threads hand the loop: the DDL executors' results and the rows the downstream refused.

Threads: the main loop's only. The DDL executors' and the apply threads' hand-offs come
through their `queue.Queue`s, taken here at the loop's turn (and at the stop)."""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable, Mapping
from typing import TypeVar

from replicator.apply.ddl_executor import GroupExecutor
from replicator.apply.ddl_job import DDLResult
from replicator.apply.refused import Refused
from replicator.daemon.ddl_path import DDLPath
from replicator.daemon.parking import Parked
from replicator.daemon.pauses import Pauses
from replicator.daemon.row_path import UNEXPLAINED_DROP, RowPath
from replicator.metrics import Metrics
from replicator.schema import way_out
from replicator.schema.way_out import with_way_out
from replicator.shard_flow import ShardFlows
from replicator.source.messages import Changes, DDLEvent, Dropped, Heartbeat, WorkerFailed
from replicator.source.schema_change import ChangeKind, SchemaChange
from replicator.source.source_state import SourceState
from replicator.state.pauses import Pause
from replicator.state.positions import Position

log = logging.getLogger("shardmerge.daemon")

T = TypeVar("T")


class Dispatch:
    def __init__(
        self,
        sources: Mapping[str, SourceState],
        flows: ShardFlows,
        executors: Mapping[str, GroupExecutor],
        pauses: Pauses,
        rows: RowPath,
        ddls: DDLPath,
        metrics: Metrics,
        worker_failed: Callable[[SourceState, WorkerFailed], None],
        results: queue.Queue[DDLResult],
        errors: queue.Queue[Refused],
    ):
        """`results`: the groups' executors' (their threads put them); `errors`: the rows
        the downstream refused (the apply threads put them)."""
        self.sources, self.flows, self.executors, self.pauses = sources, flows, executors, pauses
        self.rows, self.ddls, self.metrics, self.worker_failed = rows, ddls, metrics, worker_failed
        self.results, self.errors = results, errors

    def message(self, state: SourceState, message) -> None:
        """What a source's worker sent."""
        if state.stale(message):
            return
        if isinstance(message, Changes):
            state.took_changes(message)
            self.metrics.events_read.inc(state.id, amount=len(message.items))
            for change in message.items:
                self.rows.change(change)
            if message.filtered:
                self.rows.rows_filtered(message.filtered)
        elif isinstance(message, DDLEvent):
            state.took_ddl(message)
            self.ddls.schema_change(state, message)
        elif isinstance(message, Heartbeat):
            if state.took_heartbeat(message):
                self.metrics.reconnects.inc(state.id)
        elif isinstance(message, WorkerFailed):
            self.worker_failed(state, message)

    def parked(self, item: Parked) -> None:
        """A resumed shard's parked change or DDL, as its source sent it."""
        if isinstance(item, DDLEvent):
            self.ddls.schema_change(self.sources[item.source], item)
        else:
            self.rows.change(item)

    def unreadable(self, drop: Dropped) -> None:
        """A running shard's rows its worker could not read (`RowPath.dropped`): it pauses
        there as one whose rows cannot be read (`Coordinator.pause_shard`), its way out
        `set-schema`, which has them read again; never left out silently."""
        state = self.sources[drop.shard.source]
        position = str(state.position_of(drop.id))
        problem = f"its worker could not read its rows at {position} ({drop.reason or 'no reason given'})"
        log.error(
            "shard %s: %d %s: %s; it pauses there",
            drop.shard,
            drop.events,
            UNEXPLAINED_DROP,
            problem,
            extra={"shard": drop.shard, "source": drop.shard.source, "position": position},
        )
        change = SchemaChange(drop.shard, ChangeKind.UNREADABLE, "", problem=problem)
        event = DDLEvent(drop.shard.source, drop.id, position, position, drop.target, change)
        if self.flows[drop.shard].decided_before(drop.id) or drop.target not in self.executors:
            # (no decision can be asked for it: paused by the daemon, `resume-shard` reads it again)
            reason = with_way_out(problem, way_out.unreadable_rows(drop.shard))
            self.pauses.set(Pause(drop.shard, Position.parse(position), drop.id, reason), readable=False)
            return
        self.ddls.schema_change(state, event)

    def take_results(self) -> None:
        """What the groups' executors finished so far: their decisions, and their answers to operators."""
        _drain(self.results, self.ddls.result)

    def take_refused(self) -> None:
        """The rows the downstream refused so far: each pauses its shard for the operator's word."""
        _drain(self.errors, self.pauses.refused)


def _drain(items: queue.Queue[T], handle: Callable[[T], object]) -> None:
    """Handle what other threads put in `items` so far."""
    while True:
        try:
            item = items.get_nowait()
        except queue.Empty:
            return
        handle(item)
