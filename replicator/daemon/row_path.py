"""A shard's row changes from its worker to the applier: admitted by the shard's flow
(`ShardFlow.admit`: not applied already, its shard not paused, not waiting behind its
own DDL, its table in its group), then submitted as the flow says they must be: read
again after a pause, under the names its renames gave its columns since (or through a
scratch window), with the columns of pending renames it does not write set NULL."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from replicator.apply.applier import Applier
from replicator.apply.ddl_executor import GroupExecutor
from replicator.apply.gate import DDLGate
from replicator.apply.meta import Meta
from replicator.apply.target import TargetInfo
from replicator.apply.windows import Windows
from replicator.daemon.pauses import Pauses
from replicator.metrics import Metrics
from replicator.schema.event_filter import ROW_KINDS
from replicator.shard_flow import Admission, ShardFlow, ShardFlows
from replicator.shard_id import ShardId
from replicator.source.messages import Change, Dropped, RowEvent
from replicator.source.row_events import ROWS_OPS
from replicator.state.pauses import ReplayRename

# what the daemon's log says of each row event a worker dropped unexplained: a run's checks count
# it, whatever restarts happened (never expected; the shard pauses there)
UNEXPLAINED_DROP = "row events dropped unexplained"


class RowPath:
    def __init__(
        self,
        flows: ShardFlows,
        gate: DDLGate,
        executors: Mapping[str, GroupExecutor],
        applier: Applier,
        windows: Windows,
        pauses: Pauses,
        meta: Meta,
        infos: Mapping[str, TargetInfo],
        metrics: Metrics,
    ):
        self.flows = flows
        self.gate = gate
        self.executors = executors
        self.applier = applier
        self.windows = windows
        self.pauses = pauses
        self.meta = meta
        self.infos = infos
        self.metrics = metrics
        self.counts: dict[ShardId, dict[str, int]] = {}  # events filters.events ignored, per kind
        self.row_counts: dict[ShardId, dict[str, int]] = {}  # rows filters.rows dropped, per kind
        # row events workers could not read, per shard and what they are (`dropped`)
        self.dropped_counts: dict[ShardId, dict[str, int]] = {}
        # a running shard's rows its worker cannot read: it pauses (`Dispatch.unreadable`)
        self.unreadable: Callable[[Dropped], None] = lambda drop: None
        self._row_asks = RowAsks(executors, applier, gate)
        self._drop_asks = DropAsks(executors, applier, gate)

    def change(self, change: Change | RowEvent | Dropped) -> None:
        if type(change) is Dropped:
            self.dropped(change)
            return
        shard = change.shard
        flow = self.flows[shard]
        admission = flow.admit(change.id, op_of(change), self._row_asks, change)
        if admission.routed:
            flow.routed = change.id
        if admission is Admission.PAUSED and self.pauses.parking is not None:
            self.pauses.parking.take(shard, change)
        elif admission is Admission.SUBMIT:
            self.submit(flow, change)
        elif admission is Admission.HELD:
            self.gate.hold(shard, change)  # cleared on release: its DDL may start a rename
        elif admission is Admission.FILTERED:
            self.filtered(shard, ROW_KINDS[op_of(change)])
        elif admission is Admission.LEFT:
            self.pauses.outside(change)

    def dropped(self, drop: Dropped) -> None:
        """Row events of a shard its worker could not read. Each is accounted for: of its
        paused time (its park holds its source's binlog from before them, read again when
        it resumes), had before (read again), or waiting behind its DDL under way, whose
        decision says. A running shard's are unexplained: it pauses there, as for rows that
        cannot be read, so none is lost silently (issue 76)."""
        shard = drop.shard
        flow = self.flows[shard]
        admission = flow.admit(drop.id, drop.op, self._drop_asks, drop)
        if admission is Admission.HELD:
            self.gate.hold(shard, drop)  # (submitted when its DDL is decided, if it still runs)
            return
        if admission is Admission.SUBMIT:
            self._unexplained(drop)
            return
        if admission is Admission.PAUSED or admission is Admission.LEFT:
            if self.pauses.parking is not None:
                self.pauses.parking.hold(shard)  # (its park cannot hold them: read again)
            if admission is Admission.LEFT:
                self.pauses.outside(drop)
            self._count(drop, "paused")
            return
        self._count(drop, "had")

    def _unexplained(self, drop: Dropped) -> None:
        self._count(drop, "unexplained")
        self.unreadable(drop)

    def behind_watermark(self, shard: ShardId) -> None:
        """A start found the shard's paused rows not merged yet behind its source's saved
        watermark, no park holding them (`starting._windows_read_from_their_pause`): read again
        from its pause all the same, and counted unexplained, so the runs' checks catch the
        bug that left the watermark there."""
        counts = self.dropped_counts.setdefault(shard, {})
        counts["unexplained"] = counts.get("unexplained", 0) + 1
        self.metrics.dropped_events.inc(str(shard), "unexplained")

    def _count(self, drop: Dropped, why: str) -> None:
        counts = self.dropped_counts.setdefault(drop.shard, {})
        counts[why] = counts.get(why, 0) + drop.events
        self.metrics.dropped_events.inc(str(drop.shard), why, amount=drop.events)

    def filtered(self, shard: ShardId, kind: str) -> None:
        counts = self.counts.setdefault(shard, {})
        counts[kind] = counts.get(kind, 0) + 1
        self.metrics.filtered_events.inc(str(shard), kind)

    def rows_filtered(self, counted: Mapping[tuple[ShardId, str], int]) -> None:
        """Rows a worker's row filters dropped (it decides: they never come here)."""
        for (shard, kind), n in counted.items():
            counts = self.row_counts.setdefault(shard, {})
            counts[kind] = counts.get(kind, 0) + n
            self.metrics.filtered_rows.inc(str(shard), kind, amount=n)

    def submit(self, flow: ShardFlow, change: Change | RowEvent) -> None:
        """To the applier; a row event as its rows where the shard clears a column of a
        pending rename (its events hold no such thing), those not applied already."""
        if type(change) is Dropped:  # (it waited behind its shard's DDL, which left it running)
            self._unexplained(change)
            return
        if flow.window is not None and self.windows.take(flow, change):
            return
        if flow.replay_to is not None and change.id[:2] > flow.replay_to:
            flow.replay_to, flow.replayed = None, ()
            self.meta.execute([self.meta.pauses.sql_replayed(flow.shard)])
        if flow.replay_to is not None:
            rows = change.codec.changes(change) if isinstance(change, RowEvent) else [change]
            info = self.infos[change.target]
            for row in rows:
                if not self.applier.already_applied(row):
                    self.applier.submit(clear_renamed(flow, replayed(row, flow.replayed, info.columns)))
        elif not isinstance(change, RowEvent):
            self.applier.submit(clear_renamed(flow, change))
        elif not flow.cleared:
            self.applier.submit(change)
        else:
            for row in change.codec.changes(change):
                if not self.applier.already_applied(row):
                    self.applier.submit(clear_renamed(flow, row))


class RowAsks:
    """What admission asks of a change (`ShardFlow.admit`), from the daemon's parts."""

    def __init__(self, executors: Mapping[str, GroupExecutor], applier: Applier, gate: DDLGate):
        self.executors, self.applier, self.gate = executors, applier, gate

    def in_group(self, change: Change | RowEvent | Dropped) -> bool:
        # (a row of a shard its group does not have, its table dropped or renamed away,
        # must not reach the applier: the downstream table is not its join)
        executor = self.executors.get(change.target)
        return executor is None or change.shard in executor.view.shards

    def applied(self, change: Change | RowEvent) -> bool:
        return self.applier.already_applied(change)

    def gate_closed(self, change: Change | RowEvent | Dropped) -> bool:
        return self.gate.closed(change.shard)


class DropAsks(RowAsks):
    """Of row events a worker could not read: applied where every partition's checkpoint of
    their shard is past them."""

    def applied(self, change: Dropped) -> bool:
        return self.applier.applied_below(change.shard, change.id)


def op_of(change: Change | RowEvent) -> str:
    """I, U or D: a row event's is its type's."""
    return ROWS_OPS[change.event[4]] if isinstance(change, RowEvent) else change.op


def replayed(change: Change, renames: tuple[ReplayRename, ...], downstream: dict[str, str]) -> Change:
    """A row a shard wrote while paused, read again once it resumed, in the downstream table
    as it is now: under the names its renames made meanwhile gave its columns (`c4` is `r1`
    once it renamed c4 to r1: the rename may have finished downstream, c4 gone), and without
    the columns no longer there (it dropped them meanwhile, or renamed them away)."""

    def moved(columns: tuple[str, ...]) -> tuple[str, ...]:
        names = list(columns)
        for rename in renames:
            old, new = rename.old.lower(), rename.new
            lower = [n.lower() for n in names]
            # (a row that has the new name, after the shard added the old one again, is not
            # renamed; a held column's values go where the others' do while it is downstream)
            if old in lower and new.lower() not in lower and not (rename.held and old in downstream):
                names[lower.index(old)] = new
        return tuple(names)

    def kept(columns: tuple[str, ...], values: tuple[str, ...] | None):
        pairs = [
            (c, v)
            for c, v in zip(columns, values or (None,) * len(columns), strict=True)
            if c.lower() in downstream
        ]
        return tuple(c for c, _ in pairs), None if values is None else tuple(v for _, v in pairs)

    columns, values = kept(moved(change.columns), change.values)
    before_columns, before = change.before_columns, change.before
    if change.before is not None:
        before_columns, before = kept(moved(change.before_columns or change.columns), change.before)
    return change._replace(columns=columns, values=values, before_columns=before_columns, before=before)


def clear_renamed(flow: ShardFlow, change: Change) -> Change:
    """While a rename is pending, a shard's writes set NULL the column of the rename
    it does not write (GroupState.cleared says which and why)."""
    names = flow.cleared
    if not names or change.values is None:
        return change
    present = {k.lower() for k in change.columns}
    # not values: by the time the row is written the rename may have finished and
    # the column be gone; the applier clears it only if it is still there
    return change._replace(clear=tuple(n for n in names if n.lower() not in present))
