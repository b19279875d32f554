"""A shard paused by a decision (docs/design.md "Conflicts", "Unsupported DDLs"): by a
conflict, by a DDL or rows it cannot follow (until set-schema or a skip), or at a TRUNCATE
whose rows downstream cannot be told apart; a TRUNCATE that can is the rows' deletion.
Each is a `Block` set on the shard (`GroupState.set_block`), and the decision it ends."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from lattice import DownstreamStep
from replicator.schema.commit import commit, record, resumed
from replicator.schema.decision import Decision, GroupContext, names
from replicator.schema.group import Block, BlockKind, Result, ShardState
from replicator.schema.group_state import GroupState
from replicator.schema.rows_plan import DecisionRows
from replicator.schema.shard_rows import Unkeyed, truncate_statement
from replicator.schema.way_out import with_later
from replicator.shard_id import ShardId


def block(
    ctx: GroupContext,
    group: GroupState,
    now: DecisionRows,
    shard: ShardId,
    ddl: str,
    kind: BlockKind,
    reason: str,
    position: str | None,
    renames: Iterable[tuple[str, str]] = (),
    dropped: Iterable[str] = (),
    unmoved: Iterable[tuple[str, str]] = (),
    under: Block | None = None,
) -> Decision:
    filled, passed = (now.filled, now.passed) if shard == now.shard else ((), ())
    renamed, gone = tuple(renames), tuple(dropped)
    was = group.shards[shard].block if shard in group.shards else None
    paused = Block(
        kind,
        reason,
        ddl,
        position,
        renamed,
        gone,
        filled,
        passed,
        unmoved=tuple(unmoved),
        under=under,
        ours=kind == BlockKind.CONFLICT and was is not None and was.ours,
    )
    group.set_block(shard, paused)
    # a paused shard that drops the new name of a rename it made no longer awaits it:
    # the rename may be cancelled now, its values copied back (F67); one that
    # makes it finishes it, which resumes a shard that waited for that (it had the old
    # name again, `RenameRules`: F150)
    unblocked = resumed(group, ctx.acceptance(group, now).after_change(exclude=shard))
    result = Result.CONFLICT if kind == BlockKind.CONFLICT else Result.UNSUPPORTED
    # (the reason as the block holds it: with its way out)
    reason = group.shards[shard].block.reason if shard in group.blocked else reason
    resumes = f" (resumed {names(unblocked)})" if unblocked else ""
    message = f"{shard} paused{resumes}: {reason}"
    return commit(ctx, group, now, shard, ddl, result, message, unblocked=unblocked)


def block_unsupported(
    ctx: GroupContext,
    group: GroupState,
    now: DecisionRows,
    shard: ShardId,
    ddl: str,
    reason: str,
    position: str | None,
) -> Decision:
    state = group.shards.get(shard)
    if state is None:
        state = group.shards[shard] = ShardState(None, None)
    if state.block is not None and state.block.kind == BlockKind.UNSUPPORTED:
        return _stack(ctx, group, shard, state.block, ddl, reason, position)
    # held by a conflict already: that stays under this block, and so does the table it
    # left the shard (its rows up to this DDL are of it)
    was = state.block
    under = was if was is not None and was.kind == BlockKind.CONFLICT else was and was.under
    if under is None:
        group.update(shard, current=None)
    return block(ctx, group, now, shard, ddl, BlockKind.UNSUPPORTED, reason, position, under=under)


def _stack(
    ctx: GroupContext,
    group: GroupState,
    shard: ShardId,
    held: Block,
    ddl: str,
    reason: str,
    position: str | None,
) -> Decision:
    """A DDL of a shard whose table is unknown since a DDL we could not follow (`held`), which
    we cannot follow either, or cannot take on a table we do not know: its block stays that
    one's, where the table was lost, this DDL stacked on it (`Block.stacked`), decided once
    that one's way out gave the table. Took it that one's place, its way out took this DDL on
    the table from before both: what that one changed was lost (a column's type: its rows
    could not be read then, the shard paused again). One read again (a restart, or the DDLs
    a way out decided, read again from the pause) is on it already."""
    if position is not None and position in (held.position, *(at for _, at in held.stacked)):
        return record(ctx, group, shard, ddl, Result.UNSUPPORTED, f"{shard} is already paused: {held.reason}")
    stacked = (*held.stacked, (ddl, position))
    later = with_later(held.reason, [statement for statement, _ in stacked])
    group.set_block(shard, replace(held, reason=later, stacked=stacked))
    message = (
        f"{shard} is already paused at a DDL it could not follow ({' '.join(held.ddl.split())[:100]} at "
        f"{held.position or '?'}), its table unknown since: this one ({reason}) is decided once that "
        f"one's way out gave it; {group.shards[shard].block.reason}"
    )
    return record(ctx, group, shard, ddl, Result.UNSUPPORTED, message)


def pause_shard(
    ctx: GroupContext,
    group: GroupState,
    shard: ShardId,
    reason: str,
    ddl: str = "",
    position: str | None = None,
) -> Decision:
    """Pause a shard whose rows cannot be read (its schema is unknown to the worker):
    like an unsupported DDL, it waits for set-schema or a skip. Rows of a table that left
    the group (DROP TABLE, RENAME TABLE away), read again from before it left (its source
    read again from its old pause, or from an older watermark after a restart), went with
    their table (docs/design.md "Creating and dropping tables"): they pause nothing, as its
    DROP read again decides nothing. Blocked, the shard would be back in its group with no
    table, and a table of its name created later would be pinned at those old rows (L62)."""
    state = group.shards.get(shard)
    if state is None:
        return record(ctx, group, shard, ddl, Result.IGNORED, "the table is not in the group")
    if state.block is not None and state.block.kind != BlockKind.CONFLICT:
        why = f"{shard} is already paused: {state.block.reason}"
        return record(ctx, group, shard, ddl, Result.UNSUPPORTED, why)
    # Held by a conflict, the shard's DDLs read meanwhile are decided when it clears: those
    # after these rows must wait for their way out instead, as after a DDL it could not
    # follow (the conflict stays under their block). Else a decision took them past rows
    # its worker then paused at, read again: the shard's rows downstream converted by a
    # DDL of after its pause (live stories, L79)
    return block_unsupported(ctx, group, DecisionRows(), shard, ddl or f"(rows of {shard})", reason, position)


def truncate(
    ctx: GroupContext, group: GroupState, now: DecisionRows, shard: ShardId, ddl: str, position: str | None
) -> Decision:
    """A shard's TRUNCATE changes no schema: where its rows downstream say their shard
    (extract columns an index leads with), they are deleted, in batches
    (`truncate_statement`) run in the shard's binlog order (the DDL path's barrier);
    elsewhere the shard pauses (`BlockKind.TRUNCATE`), its schema still known."""
    table = group.materialized(group.propagated) if group.propagated is not None else None
    statement = truncate_statement(ctx.extract, shard, ctx.target_name, table, others=group.shards)
    if isinstance(statement, Unkeyed):
        return block(ctx, group, now, shard, ddl, BlockKind.TRUNCATE, statement.reason, position)
    step = DownstreamStep(statement, table)  # rows only: the table stays as it is
    return record(ctx, group, shard, ddl, Result.APPLIED, "rows of this shard deleted downstream", (step,))
