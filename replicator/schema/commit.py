"""The end of every decision: the downstream table recomputed and the DDL taking the table
emitted last to it (`target_book.advance`), the fixes of the shards' rows the decision
gathered (`DecisionRows`) placed among those statements, and the history entry, saved
with the shards the decision touched (`GroupState.save`). The caller commits what the
store queued (replicator/apply/decision_commit.py)."""

from __future__ import annotations

from collections.abc import Iterable

from lattice import DownstreamStep, Table, key
from replicator.schema.decision import Decision, GroupContext
from replicator.schema.group import Result
from replicator.schema.group_state import GroupState
from replicator.schema.row_fixes import RowsFix
from replicator.schema.rows_plan import DecisionRows, with_fixes
from replicator.schema.target_book import advance
from replicator.shard_id import ShardId


def resumed(group: GroupState, shards: Iterable[ShardId]) -> tuple[ShardId, ...]:
    """The shards whose block cleared: not one that cleared to the TRUNCATE hold under
    it (`GroupState.set_block`), which stays held."""
    return tuple(s for s in shards if s not in group.shards or group.shards[s].block is None)


def commit(
    ctx: GroupContext,
    group: GroupState,
    now: DecisionRows,
    shard: ShardId | None,
    ddl: str,
    result: Result,
    message: str,
    *,
    unblocked: tuple[ShardId, ...] = (),
    hint: Table | None = None,
) -> Decision:
    unblocked = resumed(group, unblocked)
    before = group.materialized(group.propagated) if group.propagated is not None else None
    emitted = advance(group, ctx.extract, ctx.target_name, hint)
    downstream = emitted.steps
    through: list[tuple[ShardId, RowsFix]] = []
    if emitted.held is not None and before is not None:
        through = ctx.rows(group).rendered_through(before, emitted.held, now.tables, emitted.moved)
    state = group.shards.get(shard) if shard is not None else None
    own = group.propagation and state is not None and state.block is None  # its rows go on
    fixes = now.take(own, through)
    fixes = fixes if group.propagation else []
    if fixes or (own and now.renamed):
        table = group.materialized(group.propagated)
        downstream = with_fixes(downstream, fixes, before, table, ctx.flavor, emitted.moved, emitted.started)
        if own:
            pending = {key(n) for r in group.renames if r.started for n in (r.old, r.new)}
            downstream = (*downstream, *now.take_cleared(pending, table))
    return record(ctx, group, shard, ddl, result, message, downstream, unblocked, before)


def record(
    ctx: GroupContext,
    group: GroupState,
    shard: ShardId | None,
    ddl: str,
    result: Result,
    message: str,
    steps: Iterable[DownstreamStep] = (),
    unblocked: tuple[ShardId, ...] = (),
    before: Table | None = None,
) -> Decision:
    """The decision as it stands, and its history entry saved with the group."""
    decision = Decision(
        result=result,
        shard=shard,
        ddl=ddl,
        message=message,
        steps=tuple(steps),
        joined=group.target if group.target is not None else Table(group.name, ()),
        version=group.version,
        blocked=tuple(group.blocks()),
        unblocked=unblocked,
        before=before,
    )
    entry = {
        "version": str(group.version),
        "shard": str(shard) if shard is not None else None,
        "ddl": ddl,
        "result": result,
        "message": message,
        "downstream": list(decision.downstream),
        "time": ctx.clock(),
    }
    group.save(ctx.store, entry)
    return decision
