"""The downstream table a decision leaves, from the `GroupState` (the table itself is
target.py's), and what the decision writes down about it: the pass-through cosmetics of
a change, the fillers rows of shards lacking a column get there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from lattice import DownstreamStep, Table, TableOptions, create, diff, keeps_rows, key
from replicator.schema.extract import ExtractColumns
from replicator.schema.group_state import GroupState
from replicator.schema.target import TargetInputs, held_by_paused, target_of
from replicator.source.schema_change import SchemaChange


@dataclass(frozen=True)
class Emitted:
    """What a decision's end emits for the downstream table."""

    steps: tuple[DownstreamStep, ...] = ()
    held: Table | None = None  # the table emitted, as the flavor holds it, where it changed
    moved: frozenset[str] = frozenset()  # keys of the columns the renames' steps copy into or out of
    # old name (key) -> new name of the renames the steps start: the CHANGE moves every row's
    # value into the new name, and the old name is added again, empty
    started: Mapping[str, str] = field(default_factory=dict)


def advance(group: GroupState, extract: ExtractColumns, name: str, hint: Table | None = None) -> Emitted:
    """The group's downstream table recomputed, its version bumped, and, with DDL
    propagation on, the DDL (and the pending renames' steps) taking the table emitted
    last to it (`name`: schema.table)."""
    old = group.target
    new = compute_target(group, extract, hint)
    if new is None:
        return Emitted()
    if old is not None and new.same_rendering(old):
        new = old  # the same object: saved and compared at no cost
    steps = group.ledger.steps(old)
    group.known_columns |= set(new.column_map)
    if old is not None and (differs(new, old) or steps):
        group.version = group.version.next(compatible=keeps_rows(old, new, group.flavor))
    group.target = new
    group.moves = []
    emitted = Emitted()
    if not group.propagation:
        group.ledger.held.extend(steps)
    else:
        steps = group.ledger.held + steps
        group.ledger.held = []
        moved = frozenset(key(n) for step in steps for n in (step.old, step.new))
        started = {key(step.old): step.new for step in steps if step.stage == "start"}
        emitted = Emitted(moved=moved, started=started)
        propagated, group.propagated = group.propagated, new
        if propagated is None:
            emitted = Emitted((create(new, flavor=group.flavor, target=name),), moved=moved, started=started)
        elif differs(propagated, new) or steps:
            ddl = diff(propagated, new, flavor=group.flavor, target=name, renames=steps)
            emitted = Emitted(tuple(ddl), moved=moved, started=started)
        if differs(propagated, new):  # (a partial column may change nothing the server holds)
            held = group.materialized(new)
            note_fillers(group, held)
            before = group.materialized(propagated) if propagated is not None else None
            group.fills.follow(before, held, copied=group.ledger.keys(steps))
            emitted = replace(emitted, held=held)
    group.forget_written(new)
    return emitted


def compute_target(group: GroupState, extract: ExtractColumns, hint: Table | None = None) -> Table | None:
    """The downstream table (target.py); `retained` forgets the columns the table holds
    no more, the pending renames note their nulls."""
    if not any(s.accepted is not None for s in group.shards.values()):
        return None
    inputs = TargetInputs(
        group.join.table(),
        group.join.name,
        group.flavor,
        extract,
        target=group.target,
        propagated=group.propagated,
        paused=group.paused_tables(),
        paused_by_conflict=group.paused_tables(conflict_only=True),
        pinned=group.pinned,
        comments=group.comments,
        renames=group.renames,
        moves=group.moves,
        departed_keys=group.departed_keys,
        options=group.options,
    )
    held = [c.key for c in held_by_paused(inputs)]
    group.retained.forget_all_but([*inputs.joined.column_map, *held, *group.pinned])
    target = target_of(inputs, group.retained, group.join.agreed_options, hint)
    renamed_to = {key(r.new): r for r in group.renames}
    for k, nulls in target.nulls.items():
        renamed_to[k].nulls = nulls
    return target.table


def note_cosmetics(group: GroupState, change: SchemaChange) -> None:
    """docs/design.md "Statements that pass through": comments, column moves and table options pass
    through."""
    group.comments.update(change.comments)
    group.moves.extend((m.column, m.after) for m in change.moves)
    spec = change.options
    if spec is not None:
        base = group.options or (group.target.options if group.target else TableOptions())
        group.options = TableOptions(
            engine=spec.engine or base.engine,
            charset=spec.charset or base.charset,
            collation=spec.collation or (base.collation if not spec.charset else None),
            comment=(spec.comment or None) if spec.comment is not None else base.comment,
        )


def note_fillers(group: GroupState, held: Table) -> None:
    """Rows of shards lacking a partial column get its downstream default: a NULL or a
    value no shard's schema vouches for (retained.py). The names of a pending rename are
    left out: their NULLs are what shards without them clear (Daemon._clear_renamed), and
    go when the rename ends."""
    renaming = {key(n) for r in group.renames for n in (r.old, r.new)}
    for column in group.target.columns if group.target is not None else ():
        if not column.partial or column.generated is not None or column.key in renaming:
            continue
        downstream = held.column_map[column.key]
        lacking = group.lacking(column.key)
        if downstream.nullable and (downstream.default is None or downstream.default.is_null):
            group.retained.keep_null(downstream, lacking)
        elif downstream.default is not None and not downstream.default.is_expression:
            group.retained.keep_filler(downstream, lacking)


def differs(a: Table | None, b: Table | None) -> bool:
    """Differ in schema or in column order (which a downstream table also has)."""
    if a is None or b is None:
        return a is not b
    return not (a == b and a.columns == b.columns)
