"""What a decision writes down of the pending renames (docs/design.md "Renaming columns"): a
shard's renames and drops recorded when it is accepted, renames finished or cancelled
once no shard holds a name, and what the values they move need downstream (`Retained`)
and which shards' rows hold them (`ShardState.wrote`). The questions come from
`RenameRules`; these functions change the `GroupState` with the answers."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import replace

from lattice import key
from replicator.schema.group import ShardState, has_column
from replicator.schema.group_state import GroupState
from replicator.schema.renames import RenameRecord
from replicator.shard_id import ShardId


def settle_renames(group: GroupState, deciding: ShardId | None) -> None:
    """A rename finishes when no shard has the old name any more; it is cancelled
    when no shard has the new name any more (the renamed shards dropped it) while
    some still have the old one: the values it moved go back to the old name.
    `deciding`: the shard whose change the decision is about."""
    for record in list(group.renames):
        if not group.rules().holds_old(record):
            group.ledger.finish(record)
            others = _others_moved(group, record)
            if record.started and others:
                # the old name is the one the procedure re-added, nullable for its own
                # sake: what its NULLs mean is the shards' to say (one done in one step
                # moved what it moves when recorded)
                retain_moved(group, record.old, record.new, nulls=False)
            elif record.started:
                # every value it moved is a row of a shard that made the rename, which
                # MariaDB checked against its new definition: nothing to keep for them
                # (a rename there and back, then a narrowing, held the width: issue 43)
                move_written(group, record.old, record.new)
            if record.started:
                # the copy takes the old column's values into the new name and the diff drops
                # it: a column of that name a shard has now is added afresh, holding none of
                # them (a JSON the text of a shard that left kept a LONGTEXT: F167)
                group.retained.forget(key(record.old))
            group.retained.settle(key(record.new), vouched=not others)
            _carry_on(group, record)
            # a shard that dropped the old name while the rename was pending writes neither
            # name (`cleared_columns`): its rows since got NULL in both, and the last shard's
            # copy (WHERE old IS NOT NULL) leaves them NULL in the new one, which stays
            # nullable for them till they vouch for the column (L13:
            # MODIFY ... NOT NULL refused, 1265). The shard whose DDL drops it now, the last
            # holder, has written no row without it: its rows get the new name's default
            # from now on, as any shard's lacking a column (F172)
            _keep_nulls(group, record.new, record.departed - {deciding}, without=(record.new,))
        elif group.join.presence(key(record.new)) == 0 and not group.rules().awaited(record):
            group.ledger.cancel(record)
            # the copy back leaves NULL where the renamed shards' rows had cleared the old name
            retain_moved(group, record.new, record.old, nulls=record.nulls)
            if record.started:
                # and their rows hold values of their own in the old name again: a shard
                # that dropped the new name and adds the old one later gives them its
                # default there (L06)
                move_written(group, record.new, record.old)
            # and the new name, if a shard has it still (added it, paused), keeps the NULL
            # the others' rows were written with while the rename was pending (F72)
            moved = group.propagated.column(record.new) if group.propagated is not None else None
            if moved is not None and moved.generated is None:
                group.retained.keep_null(moved)
            # a shard that made it and dropped the new name, or dropped the old name while it
            # was pending (`departed`), writes neither name: its rows since got NULL in the old
            # one (cleared), and the copy back (WHERE old IS NULL AND new IS NOT NULL) leaves
            # them so: the old name stays nullable for them till they vouch for it (L28,
            # L31: MODIFY ... NOT NULL refused, 1265). The shard whose
            # DDL drops it now has written no row without it.
            writers = (record.shards | record.departed) - {deciding}
            _keep_nulls(group, record.old, writers, without=(record.old, record.new))


def _carry_on(group: GroupState, record: RenameRecord) -> None:
    """A rename finished in this decision, and a rename of its new name starting in it
    (recorded before it or after): the start's CHANGE moves the values the finishing
    copy brings into that name too, of the type they had under the old one (t2's
    SET('x','y','z') into the SET('x','y') t1's chain makes the newest name: F165)."""
    moved = group.propagated.column(record.old) if group.propagated is not None else None
    if moved is None or moved.generated is not None or not record.started:
        return
    for onward in group.renames:
        if not onward.started and key(onward.old) == key(record.new):
            group.retained.keep([replace(moved, name=onward.new)], pending=True)


def _keep_nulls(group: GroupState, name: str, shards: Collection[ShardId], without: tuple[str, ...]) -> None:
    """The downstream column `name` keeps NULL for the rows of those of `shards` that
    have none of the columns `without` (and for good for one that left)."""
    column = group.propagated.column(name) if group.propagated is not None else None
    if column is None or column.generated is not None or not shards:
        return
    if any(s not in group.shards for s in shards):
        group.retained.keep_null(column)  # (a shard that left: None, no present shard's)
    lacking = [
        str(s)
        for s in sorted(shards)
        if s in group.shards and not any(has_column(group.shards[s].accepted, n) for n in without)
    ]
    if lacking:
        group.retained.keep_null(column, lacking)


def _others_moved(group: GroupState, record: RenameRecord) -> bool:
    """A finished rename moved values of rows no shard that made it vouches for: of a
    shard that dropped the old name instead, or left, or that only the old name's
    record in `retained` keeps."""
    old = key(record.old)
    return bool(record.departed) or group.retained.strangers or old in group.retained.orphaned


def record_accepted(
    group: GroupState, shard: ShardId, renames: list[tuple[str, str]], dropped: list[str]
) -> None:
    """What an accepted shard's DDLs did to the pending renames. A shard that drops
    the old name of one it has not made holds none of the values it moves any more,
    whatever column of that name it adds; then its own renames."""
    gone = set(dropped)
    accepted = group.shards[shard].accepted
    for record in group.renames:
        if shard in record.shards:
            continue
        if key(record.old) in gone:
            record.departed.add(shard)
        if (
            shard in record.departed
            and has_column(accepted, record.old)
            and group.rules().holds_old(record, besides=shard)  # (a walk of every shard: last)
        ):
            # but a column of that name it adds while another shard still has the old
            # one is that shard's downstream column, which its rows write too: the
            # rename moves their values as well (F116)
            record.departed.discard(shard)
    _record_renames(group, shard, renames)
    group.touched.add(shard)


def _record_renames(group: GroupState, shard: ShardId, renames: list[tuple[str, str]]) -> None:
    for old, new in renames:
        record = next((r for r in group.renames if (key(r.old), key(r.new)) == (key(old), key(new))), None)
        if record is not None:
            record.shards.add(shard)
            continue
        # the NULLs of a pending (or just finished) rename's new name are the rows its
        # last copy fills, unless NULL is a value of it (F70: a chain a→b→c)
        before = group.ledger.of_new_name(old)
        nulls = before[0].nulls if before else True
        record = RenameRecord(old, new, {shard})
        group.ledger.begin(record)
        if group.rules().holds_old(record):
            retain_moved(group, record.old, record.new, nulls=nulls, held=False, pending=True)
            for finished in before:
                if finished in group.ledger.finished:
                    _carry_on(group, finished)
        else:
            # done in one step: every value it moves is in a row of a shard that has the
            # new name and vouches for it; what the old name kept for rows no shard
            # vouches for moves as kept (F89), its NULLs too (F92); a
            # column of the old name that stays is a new one, holding none of them
            # (F103)
            group.retained.move(key(record.old), record.new)
            group.retained.forget(key(record.old))
            move_written(group, record.old, record.new)


def retain_moved(
    group: GroupState,
    source: str,
    target: str,
    *,
    nulls: bool = True,
    held: bool = True,
    pending: bool = False,
) -> None:
    """A rename (docs/design.md "Renaming columns") moves a column's values into another (the old into the new
    at the first shard by CHANGE COLUMN and at the last by copying; the new back into
    the old when cancelled): the target keeps a type that holds them, as a dropped
    column does (retained.py), and the type the source keeps for rows no shard vouches
    for (a rename that finishes in the decision that starts the next one moved values
    in: F78). `nulls`: and their NULLs; `held`: and the NULLs the source keeps
    for them; `pending`: a rename starting, which may end with every shard vouching for
    them (`Retained.settle`)."""
    move_written(group, source, target)
    downstream = group.propagated  # the values that move are the downstream table's
    column = downstream.column(source) if downstream is not None else None
    if column is None:
        return
    if not nulls:
        column = replace(column, nullable=False)
    group.retained.move(column.key, target, nulls=held)
    group.retained.keep([replace(column, name=target)], pending=pending)


def move_written(group: GroupState, source: str, target: str) -> None:
    """The values a rename moves go with it: rows that held them in `source` hold them
    in `target`, and in `source` only the values their shard writes there still (a
    column of that name re-added downstream holds none of the moved ones)."""
    s, t = key(source), key(target)
    for shard, state in group.shards.items():
        if s in state.wrote:
            still = {s} if has_column(state.accepted, source) else set()
            group.update(shard, wrote=(state.wrote - {s}) | still | {t})
            group.unsettled.add(shard)
            group.touched.add(shard)
    group.departed = {(written - {s}) | {t} if s in written else written for written in group.departed}
    group.departed_keys = [
        frozenset((on - {s}) | {t} if s in on else on for on in unique) for unique in group.departed_keys
    ]


def unrename_paused(group: GroupState, keys: set[str]) -> None:
    """A paused shard's renames of columns pinned now (keys) are drops, as a decision
    takes a rename of a pinned column."""
    for shard in sorted(group.blocked):
        block = group.shards[shard].block
        gone = tuple(old for old, _ in block.renames if key(old) in keys)
        if gone:
            renames = tuple(r for r in block.renames if key(r[0]) not in keys)
            group.set_block(shard, replace(block, renames=renames, dropped=(*block.dropped, *gone)))


def keep_dropped(group: GroupState, state: ShardState, gone: Iterable[str]) -> None:
    """The shard's rows downstream keep the values of the columns it drops (keys), though
    it may add one back, narrower, before it resumes: paused already (F66) or by
    this very DDL (F118); as they were written, under its accepted schema (F66
    too), by the name they have there: the new name of a rename it made while
    paused is its old name downstream (F104)."""
    if state.accepted is None or not gone:
        return
    back = {key(new): key(old) for old, new in state.block.renames} if state.block is not None else {}
    accepted = set()
    for name in gone:
        seen = {name}
        while name in back and back[name] not in seen:
            name = back[name]
            seen.add(name)
        accepted.add(name)
    group.retained.keep(c for c in state.accepted.columns if c.key in accepted)
