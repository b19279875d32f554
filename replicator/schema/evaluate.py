"""A shard's schema changed (a DDL, a table joining, set-schema): its current table goes
into the join if it can (`Acceptance`), alone or with the shards paused by a conflict,
and the shards whose table joins now resume; if it cannot, the shard pauses on the
conflict. With DDL propagation off, a shard whose change the downstream table lacks waits."""

from __future__ import annotations

from lattice import key
from replicator.schema.blocking import block
from replicator.schema.commit import commit, resumed
from replicator.schema.decision import Decision, GroupContext, names
from replicator.schema.group import Block, BlockKind, Result, has_column
from replicator.schema.group_state import GroupState
from replicator.schema.rename_book import record_accepted
from replicator.schema.renames import split_renames
from replicator.schema.rows_plan import DecisionRows
from replicator.schema.target_book import compute_target, differs
from replicator.shard_id import ShardId


def evaluate(
    ctx: GroupContext,
    group: GroupState,
    now: DecisionRows,
    shard: ShardId,
    ddl: str,
    *,
    position: str | None = None,
    renames: list[tuple[str, str]] = (),
    dropped: list[str] = (),
    was_blocked: bool | None = None,
) -> Decision:
    state = group.shards[shard]
    # a shard held at its TRUNCATE has its later DDLs followed, and stays held (its rows
    # downstream are still to be deleted by hand: issue 46)
    truncate = state.block if state.block is not None and state.block.kind == BlockKind.TRUNCATE else None
    if was_blocked is None:
        was_blocked = state.block is not None and state.block.kind not in (
            BlockKind.WAITING,
            BlockKind.TRUNCATE,
        )
    # renames and drops of a DDL that is still blocked take effect with this one
    if state.block is not None and state.block.kind == BlockKind.CONFLICT:
        renames = [*state.block.renames, *renames]
        dropped = [*state.block.dropped, *dropped]
    # a rename whose new name the shard dropped since is a drop of the old one: its
    # values went with it (a paused chain a to b to c, then c dropped: F83)
    moving, unmoved = split_renames(state.accepted, renames)
    if state.block is not None and state.block.kind == BlockKind.CONFLICT:
        unmoved = [*state.block.unmoved, *unmoved]
    # a rename of a pinned column moves no values downstream: they stay under its name
    # (`pin`), and the new name is a column the shard adds, the old one it drops
    renames = [r for r in moving if has_column(state.current, r[1]) and key(r[0]) not in group.pinned]
    # (and the old name's values are gone: the shard departs a pending rename of it,
    # whatever column of that name it adds again, F102)
    dropped = [*dropped, *(old for old, new in moving if (old, new) not in renames)]
    acceptance = ctx.acceptance(group, now)
    problem = group.rules().check(shard, renames, state.current) or acceptance.accept(shard, renames)
    together: list[ShardId] | None = []
    if problem is not None:
        # the DDL may complete what paused shards wait for (the non-intrusive
        # resolution): try it together with every shard paused by a conflict
        together = acceptance.accept_together(shard, renames)
        if together is None:
            return block(
                ctx, group, now, shard, ddl, BlockKind.CONFLICT, problem, position, renames, dropped, unmoved
            )
    record_accepted(group, shard, renames, dropped)
    if truncate is not None and group.shards[shard].block is None:
        group.set_block(shard, truncate)
    state = group.shards[shard]  # (accepted now: a value, replaced by each change)
    unblocked = [shard] if was_blocked and state.block is None else []
    unblocked += [s for s in together if s != shard]
    unblocked += acceptance.after_change(exclude=shard)
    unblocked = resumed(group, unblocked)
    # while propagation is off, a shard whose schema changed waits as long as the
    # downstream table lags the join: its rows may need what is not there yet
    target = compute_target(group, ctx.extract) if not group.propagation else None
    waiting = not group.propagation and (differs(target, group.target) or differs(target, group.propagated))
    if waiting:
        group.set_block(shard, Block(BlockKind.WAITING, "DDL propagation is disabled", ddl, position))
    result = Result.RESOLVED if unblocked else Result.APPLIED
    message = "schema accepted" + (f"; resumed {names(unblocked)}" if unblocked else "")
    if waiting:
        message += "; the shard waits until DDL propagation is enabled"
    return commit(
        ctx, group, now, shard, ddl, result, message, unblocked=tuple(unblocked), hint=state.accepted
    )
