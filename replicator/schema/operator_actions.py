"""What the operator does to a shard group (docs/design.md "Operator commands", DM's binlog and
event filter commands): force a shard's schema (set-schema), replace or skip a blocked
DDL (binlog replace, binlog skip), turn DDL propagation off and on, keep dropped columns
downstream (pin)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from lattice import Column, Table
from replicator.schema.commit import commit
from replicator.schema.decision import CoordinatorError, Decision, Gave, GroupContext, state_of
from replicator.schema.evaluate import evaluate
from replicator.schema.group import Block, BlockKind, Result
from replicator.schema.group_state import GroupState
from replicator.schema.rename_book import unrename_paused
from replicator.schema.rows_plan import DecisionRows
from replicator.schema.shard_changes import add_shard, apply_change
from replicator.schema.target import as_pinned
from replicator.schema.way_out import with_later
from replicator.shard_id import ShardId
from replicator.source.tracker import change_of


def set_schema(ctx: GroupContext, group: GroupState, shard: ShardId, table: Table) -> Decision:
    """docs/design.md "Operator commands": force a shard's schema (intrusive resolution)."""
    if shard not in group.shards:
        return add_shard(ctx, group, shard, table)
    state = group.shards[shard]
    was_blocked = state.block is not None
    # (where its block stood: a conflict its table meets now is reported there, where the
    # shard waits, as any block is)
    position = state.block.position if state.block is not None else None
    state = group.update(shard, current=table)
    unknown = state.block is not None and state.block.kind == BlockKind.UNSUPPORTED
    held = state.block if unknown else None
    if unknown:
        group.set_block(shard, None)  # (the conflict under it, if any, holds it again)
    decision = evaluate(
        ctx, group, _under(held, shard, table), shard, f"(set-schema {shard})", position=position,
        was_blocked=was_blocked,
    )
    if unknown:
        _held_on_ours(group, shard)
    return decide_stacked(ctx, group, shard, held, decision)


def _under(held: Block | None, shard: ShardId, table: Table) -> DecisionRows:
    """What the conflict under `held` remembers of the shard's paused time (`Block.filled`:
    the values its rows got in the columns it added, `Block.passed`: the types they went
    through), of the columns `table` has: a conflict that holds it again keeps them, so its
    end gives its rows those values (L81: a TEXT NOT NULL it added, its rows '', was set NULL
    downstream as a later MODIFY left its default)."""
    under = held.under if held is not None else None
    if under is None or under.kind != BlockKind.CONFLICT:
        return DecisionRows()
    filled = tuple(c for c in under.filled if table.column(c.name) is not None)
    passed = tuple(c for c in under.passed if table.column(c.name) is not None)
    return DecisionRows(shard=shard, filled=filled, passed=passed)


def replace_ddl(
    ctx: GroupContext, group: GroupState, shard: ShardId, statement: str, position: str | None
) -> Decision:
    """The blocked DDL replaced by `statement` (binlog replace). Read first: a statement it
    cannot take leaves the blocked DDL as it was; on the table of the conflict a DDL we
    cannot follow came on, which holds the shard still."""
    state = state_of(group, shard)
    base = state.current if state.block is not None and state.block.under is not None else state.accepted
    change = change_of(shard, base, statement, ctx.upstream)
    unknown = state.block is not None and state.block.kind == BlockKind.UNSUPPORTED
    held = state.block if unknown else None
    _skip(ctx, group, shard)
    decision = apply_change(ctx, group, change, position=position)
    if unknown:
        _held_on_ours(group, shard)
    return decide_stacked(ctx, group, shard, held, decision)


def decide_stacked(
    ctx: GroupContext, group: GroupState, shard: ShardId, held: Block | None, decision: Decision
) -> Decision:
    """The DDLs the shard ran while `held` (a DDL we could not follow, its table unknown
    since) held it (`Block.stacked`), once the way out `decision` gave its table. Resumed, the
    shard reads its rows again from its pause with that table, and those DDLs as it reads
    them, decided then as any. Held still (by the conflict under that block, or one the
    table meets), it reads nothing till it resumes: they are taken now, in order, on that
    table, as its worker will take them (its later DDLs are taken on it too: `ours`); one
    we cannot follow holds it there, the rest stacked on it. The decision says the table
    the way out gave (`Gave`): its rows are read with it from `held`'s DDL on, not with the
    one those DDLs leave."""
    state = group.shards.get(shard)
    if held is None or not held.stacked or state is None:
        return decision
    if state.block is None:
        n = len(held.stacked)
        later = f"{n} DDL{'' if n == 1 else 's'} it ran after that one {'is' if n == 1 else 'are'}"
        return replace(decision, message=f"{decision.message}; the {later} decided as it reads them again")
    given, taken, through = state.current, 0, None
    for n, (ddl, position) in enumerate(held.stacked):
        state = group.shards[shard]
        if state.block is not None and state.block.kind == BlockKind.UNSUPPORTED:
            # (its table unknown again: the rest wait for this one's way out)
            rest = held.stacked[n:]
            stacked = (*state.block.stacked, *rest)
            reason = with_later(state.block.reason, [statement for statement, _ in stacked])
            group.set_block(shard, replace(state.block, reason=reason, stacked=stacked))
            break
        change = change_of(shard, state.current, ddl, ctx.upstream)
        decided = apply_change(ctx, group, change, position=position)
        decision = decision.then(decided, f"{' '.join(ddl.split())[:100]} (read while held)")
        taken, through = taken + 1, position
    if given is None or not taken:
        return decision  # (nothing taken on the table it gave)
    return replace(decision, gave=(*decision.gave, Gave(shard, given, through)))


def _held_on_ours(group: GroupState, shard: ShardId) -> None:
    """A shard whose DDL we could not follow, the operator gave its table (set-schema,
    binlog replace), and a conflict holds: its worker has that table only once it reads
    again from its pause, so its DDLs read meanwhile are taken on ours (live stories
    112059: a later DDL, taken on the table its worker had from before the replace,
    cleared the conflict the replace made)."""
    block = group.shards[shard].block if shard in group.shards else None
    if block is not None and block.kind == BlockKind.CONFLICT and not block.ours:
        group.set_block(shard, replace(block, ours=True))


def skip_ddl(ctx: GroupContext, group: GroupState, shard: ShardId) -> Decision:
    """The blocked DDL is skipped (binlog skip): the shard keeps its accepted schema (or the
    table of the conflict under it); the DDLs it ran after one we could not follow are
    decided then (`decide_stacked`)."""
    block = state_of(group, shard).block
    held = block if block is not None and block.kind == BlockKind.UNSUPPORTED else None
    return decide_stacked(ctx, group, shard, held, _skip(ctx, group, shard))


def _skip(ctx: GroupContext, group: GroupState, shard: ShardId) -> Decision:
    state = state_of(group, shard)
    if state.block is None:
        raise CoordinatorError(f"shard {shard} is not blocked")
    under = state.block.under
    if under is None:
        group.update(shard, current=state.accepted)
    group.set_block(shard, None)
    message = f"skipped the blocked DDL of {shard}"
    now = DecisionRows()
    if under is not None:  # (its table the conflict's: no rows are discarded, they wait with it)
        group.set_block(shard, replace(under, ours=True))
        message += f"; it is held by its conflict again: {under.reason}"
        return commit(ctx, group, now, shard, f"(skip {shard})", Result.CONFLICT, message)
    return commit(ctx, group, now, shard, f"(skip {shard})", Result.RESOLVED, message, unblocked=(shard,))


def disable_ddl_propagation(ctx: GroupContext, group: GroupState) -> Decision:
    group.propagation = False
    message = "DDL propagation disabled"
    return commit(ctx, group, DecisionRows(), None, "(disable-ddl-propagation)", Result.APPLIED, message)


def enable_ddl_propagation(ctx: GroupContext, group: GroupState) -> Decision:
    group.propagation = True
    waiting = tuple(s for s, b in group.blocks().items() if b.kind == BlockKind.WAITING)
    for shard in waiting:
        group.set_block(shard, None)
    result = Result.RESOLVED if waiting else Result.APPLIED
    ddl, message = "(enable-ddl-propagation)", "DDL propagation enabled"
    return commit(ctx, group, DecisionRows(), None, ddl, result, message, unblocked=waiting)


def pin(group: GroupState, columns: Iterable[Column]) -> list[str]:
    """DM's `drop column` event filter (replicator/schema/event_filter.py): columns a
    shard drops stay downstream for good, with the values their rows hold, also once
    no shard has them; the rows written after leave them NULL, so they are nullable
    then. A shard that adds one back has it in the join as usual. Only a column the
    downstream table has and that holds values of its own (not generated) is pinned.
    Called before the shard's change (`apply`), whose decision saves it. Returns the
    keys pinned now."""
    pinned = []
    for column in columns:
        downstream = group.target.column(column.name) if group.target is not None else None
        if column.key in group.pinned or downstream is None or downstream.generated is not None:
            continue
        group.pinned[column.key] = as_pinned(downstream)
        pinned.append(column.key)
    if pinned:
        unrename_paused(group, set(pinned))
    return pinned
