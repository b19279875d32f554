"""A shard's own changes, in binlog order: it joins the group (the group's first tables,
CREATE TABLE upstream), it leaves it (DROP TABLE), or its table changes (`apply_change`:
a schema change as the tracker read it, which may also be a TRUNCATE, a DDL we cannot
follow or rows we cannot read)."""

from __future__ import annotations

from lattice import Table, key
from replicator.schema.blocking import block_unsupported, pause_shard, truncate
from replicator.schema.commit import commit, record, resumed
from replicator.schema.decision import CoordinatorError, Decision, GroupContext, state_of
from replicator.schema.evaluate import evaluate
from replicator.schema.group import BlockKind, Result, ShardState
from replicator.schema.group_state import GroupState
from replicator.schema.rename_book import keep_dropped
from replicator.schema.row_fixes import filled_while_paused, passed_while_paused
from replicator.schema.rows_plan import DecisionRows
from replicator.schema.target import unique_on
from replicator.schema.target_book import note_cosmetics
from replicator.shard_id import ShardId
from replicator.source.schema_change import ChangeKind, SchemaChange
from replicator.source.tracker import change_of


def add_shard(
    ctx: GroupContext, group: GroupState, shard: ShardId, table: Table, position: str | None = None
) -> Decision:
    """A shard joins the group (the group's first tables, or CREATE TABLE upstream)."""
    if shard in group.shards:
        raise CoordinatorError(f"shard {shard} is already in the group")
    group.shards[shard] = ShardState(None, table)
    return evaluate(ctx, group, DecisionRows(), shard, f"(shard {shard} joins)", position=position)


def remove_shard(ctx: GroupContext, group: GroupState, shard: ShardId, ddl: str = "") -> Decision:
    state_of(group, shard)
    state = group.shards.pop(shard)
    group.blocked.discard(shard)
    group.touched.add(shard)
    if len(state.wrote) > 1:
        group.departed.add(state.wrote)
    if state.accepted is not None:
        group.departed_keys.append(unique_on(ctx.extract, state.accepted, group.propagated))
    for rename in group.renames:
        # a table created again under its name is a shard of its own: its columns are
        # the group's by name, a rename's old name too (F107)
        rename.shards.discard(shard)
        rename.departed.discard(shard)
    if state.accepted is not None:
        group.join.remove(state.accepted)
        group.retained.keep(state.accepted.columns)
        group.retained.left(str(shard))
        # what the shard passed through and no shard holds now gives way to the join
        # (F14); a paused shard's table holds what it passed through meanwhile
        paused = group.paused_tables()
        group.options = group.join.held_options(group.options, paused) if group.options else None
        group.comments = group.join.held_comments(group.comments, paused)
    now = DecisionRows()
    unblocked = resumed(group, ctx.acceptance(group, now).after_change(exclude=None))
    return commit(
        ctx,
        group,
        now,
        shard,
        ddl or f"(shard {shard} leaves)",
        Result.RESOLVED if unblocked else Result.APPLIED,
        f"shard {shard} left the group",
        unblocked=unblocked,
    )


def apply_change(
    ctx: GroupContext, group: GroupState, change: SchemaChange, position: str | None = None
) -> Decision:
    """One shard's schema change, in binlog order, as the tracker read it."""
    shard, ddl, kind = change.shard, change.statement, change.kind
    if kind is ChangeKind.NONE:
        return record(
            ctx, group, shard, ddl, Result.IGNORED, "the statement does not change the shard's table"
        )
    if kind is ChangeKind.UNREADABLE:
        return pause_shard(ctx, group, shard, change.problem or "its rows cannot be read", position=position)
    if kind is ChangeKind.UNSUPPORTED:
        why = change.problem or "a DDL that cannot be followed"
        return block_unsupported(ctx, group, DecisionRows(), shard, ddl, why, position)
    if kind is ChangeKind.TRUNCATE:
        return truncate(ctx, group, DecisionRows(), shard, ddl, position)
    if kind is ChangeKind.DROP:
        if shard in group.shards:
            return remove_shard(ctx, group, shard, ddl)
        return record(ctx, group, shard, ddl, Result.IGNORED, "the table was not in the group")
    assert change.after is not None
    state = group.shards.get(shard)
    if state is None:
        return add_shard(ctx, group, shard, change.after, position=position)
    # a shard whose DDL was skipped (binlog skip) keeps its table from before it here,
    # while its worker follows its table upstream: its next DDL is taken on the table
    # kept, so its rows downstream convert from what they were written as (its rows of the
    # skipped DDL's type went in as the server converted them: issue 71)
    skipped = state.block is None and _columns_differ(state.current, change.before)
    ours = state.block is not None and state.block.ours and state.current is not None
    if (ours or skipped) and kind is ChangeKind.ALTER:
        change = change_of(shard, state.current, ddl, ctx.upstream)
        if change.kind is not ChangeKind.ALTER or change.after is None:
            why = change.problem or "a DDL that cannot be followed"
            return block_unsupported(ctx, group, DecisionRows(), shard, ddl, why, position)
    held = state.block is not None and state.block.kind == BlockKind.UNSUPPORTED
    unknown = state.current is None or held  # (held: the table of the conflict under it, not this DDL's)
    if unknown and kind is ChangeKind.ALTER:
        reason = "the shard's schema is unknown after an unsupported DDL"
        return block_unsupported(ctx, group, DecisionRows(), shard, ddl, reason, position)
    state = group.update(shard, current=change.after)
    note_cosmetics(group, change)
    renames = [(r.old, r.new) for r in change.renames]
    gone: set[str] = set()
    if change.before is not None:
        kept = change.after.column_map.keys() | {key(old) for old, _ in renames}
        gone = change.before.column_map.keys() - kept
    keep_dropped(group, state, gone)
    rows = ctx.rows(group)
    tables = rows.tables_of(shard, change)
    now = DecisionRows(
        shard,
        existing=rows.existing(shard, change),
        tables={shard: tables} if tables is not None else {},
        renamed=rows.renamed_cleared(shard, change),
        filled=filled_while_paused(state.block, change),
        passed=passed_while_paused(state.block, change),
    )
    return evaluate(ctx, group, now, shard, ddl, position=position, renames=renames, dropped=sorted(gone))


def _columns_differ(kept: Table | None, before: Table | None) -> bool:
    """Whether the table a DDL came on has other columns (names or types) than the one the
    group keeps for the shard."""
    if kept is None or before is None:
        return False
    types = [{k: c.type for k, c in t.column_map.items()} for t in (kept, before)]
    return types[0] != types[1]
