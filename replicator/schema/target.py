"""The downstream table a shard group asks for: its shards' join (docs/design.md "The lattice of
compatibility"), with what the
rows already downstream need beyond it (the columns paused shards and pins hold, the width
retained for rows no shard vouches for, the names of pending renames nullable), in the
order the downstream table has its columns.

A function of the group's state (`TargetInputs`); the coordinator keeps the state and
applies what the computation found (`Target.nulls`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from lattice import (
    NULL_DEFAULT,
    Column,
    Flavor,
    Index,
    IndexKind,
    Table,
    TableOptions,
    fitted_prefixes,
    key,
    key_problem,
    without_generated_reading,
)
from replicator.schema.extract import ExtractColumns
from replicator.schema.renames import RenameRecord
from replicator.schema.retained import Retained


@dataclass(frozen=True)
class TargetInputs:
    """What the downstream table is computed from, as the coordinator holds it."""

    joined: Table  # the join of the accepted schemas
    name: str
    flavor: Flavor
    extract: ExtractColumns
    target: Table | None = None  # the last one computed
    propagated: Table | None = None  # the last one DDL was emitted for
    paused: Sequence[Table] = ()  # the current tables of the blocked shards
    paused_by_conflict: Sequence[Table] = ()  # of those a conflict blocks
    pinned: Mapping[str, Column] = field(default_factory=dict)
    comments: Mapping[str, str | None] = field(default_factory=dict)
    renames: Sequence[RenameRecord] = ()  # pending
    moves: Sequence[tuple[str, str | None]] = ()  # (key, after key or None = first)
    departed_keys: Sequence[frozenset[frozenset[str]]] = ()  # see `without_unsure_keys`
    options: TableOptions | None = None  # table options last set by a DDL (pass-through)


@dataclass(frozen=True)
class Target:
    table: Table
    # the new name of each pending rename: whether the shards' column there is nullable
    nulls: Mapping[str, bool] = field(default_factory=dict)


def held_by_paused(inputs: TargetInputs) -> list[Column]:
    """Columns downstream that no shard in the join has any more, but a shard paused
    by a conflict has: they stay as they are, with the values of the shards that
    dropped them, rather than go and come back empty when it resumes (F53)."""
    if inputs.target is None or not inputs.paused_by_conflict:
        return []
    joined = inputs.joined.column_map
    return [
        c
        for c in inputs.target.columns
        if c.key not in joined
        and c.generated is None
        and any(t.column(c.name) is not None for t in inputs.paused_by_conflict)
    ]


def pinned_only(inputs: TargetInputs, kept: Sequence[Column]) -> list[Column]:
    """Pinned columns no shard has (nor holds, paused): as downstream has them, nullable."""
    present = inputs.joined.column_map.keys() | {c.key for c in kept}
    columns = []
    for k, pinned in inputs.pinned.items():
        if k in present:
            continue
        now = inputs.target.column(k) if inputs.target is not None else None
        # (one a shard made generated since is what it was when pinned: no shard computes it now)
        columns.append(as_pinned(now if now is not None and now.generated is None else pinned))
    return columns


def as_pinned(column: Column) -> Column:
    """A pinned column as downstream keeps it when no shard has it: its type, and NULL for
    the rows written since (partial: the coordinator notes they hold NULL, which a shard
    adding it back NOT NULL must not narrow away); nothing fills it any more (an
    AUTO_INCREMENT needs a key it is in no longer, an ON UPDATE would make values up)."""
    return replace(
        column, nullable=True, default=NULL_DEFAULT, auto_increment=False, on_update=None, partial=True
    )


def target_of(
    inputs: TargetInputs,
    retained: Retained,
    agreed_options: Callable[[TableOptions, Sequence[Table]], TableOptions],
    hint: Table | None = None,
) -> Target:
    """The downstream table; `retained` as it is once it forgot the columns neither in
    the join nor held (`held_by_paused`, `pinned_only`); `agreed_options` the join's
    (`IncrementalJoin.agreed_options`); `hint` the schema of the shard whose change this
    is, which places the columns it adds."""
    joined = inputs.joined
    kept = held_by_paused(inputs)
    pinned = pinned_only(inputs, kept)
    columns = []
    renaming = {key(r.old) for r in inputs.renames}
    renamed_to = {key(r.new): r for r in inputs.renames}
    nulls: dict[str, bool] = {}
    held = {c.key for c in kept}
    # (most columns of a large group need none of what follows: they stay as joined)
    touched = retained.held.keys() | inputs.comments.keys() | renaming | renamed_to.keys()
    for column in [*joined.columns, *kept, *pinned]:
        if column.key not in touched:
            columns.append(column)
            continue
        if column.key not in held:  # (one held by a paused shard stays as it is downstream)
            column = retained.hold(column, inputs.propagated)
        if column.key in inputs.comments:
            column = replace(column, comment=inputs.comments[column.key])
        if column.key in renaming and column.generated is None:
            # the old name of a pending rename comes back nullable (docs/design.md "Renaming columns"),
            # keeping its
            # default: shards not renamed yet may rely on it (renamed shards' rows set the
            # old name NULL explicitly, see Daemon._clear_renamed, so the last shard's copy
            # cannot pick the default up)
            column = replace(column, nullable=True, default=column.default or NULL_DEFAULT, partial=True)
        elif column.key in renamed_to and column.generated is None:
            # and the new name takes NULL from the shards without it, whose old name may
            # hold NULL: with a default instead a cancel's copy back would take it for a
            # value (F47)
            nulls[column.key] = column.nullable
            # (a nullable column without a default has DEFAULT NULL on the server; a
            # partial one keeps its filler for the rows of shards with neither name)
            default = column.default or (None if column.partial else NULL_DEFAULT)
            column = replace(column, nullable=True, default=default)
        columns.append(column)
    columns, joined = inputs.extract.added_to(columns, joined)
    ordered = keep_order(columns, inputs.target, hint, inputs.renames)
    for moved, after in inputs.moves:
        ordered = move(ordered, moved, after)
    table = replace(joined, name=inputs.name, columns=tuple(ordered))
    # a generated column reading a column held in another family than the shards have
    # it would compute over other values downstream (`c1 % 89` over a SET's text, not
    # its number: F141): it joins as absent, as differing expressions do
    recast = {
        k
        for k in retained.held.keys() & joined.column_map.keys()
        if table.column_map[k].type.family != joined.column_map[k].type.family
    }
    if recast:
        table = without_generated_reading(table, recast)
    # a column held wider than the shards' may be too long for a key: MariaDB gives a
    # plain key a prefix on it (lattice.limits, F100), short enough for the key
    table = replace(table, indexes=tuple(fitted_prefixes(ix, table.column_map) for ix in table.indexes))
    # and a column held nullable takes no SPATIAL key (lattice.limits `key_problem`)
    if any(ix.kind == IndexKind.SPATIAL for ix in table.indexes):
        columns_there = table.column_map
        indexes = tuple(ix for ix in table.indexes if key_problem(ix, columns_there, inputs.flavor) is None)
        table = replace(table, indexes=indexes)
    table = without_unsure_keys(table, retained, inputs.departed_keys, inputs.extract)
    if inputs.options is not None:
        table = replace(table, options=agreed_options(inputs.options, inputs.paused))
    return Target(table, nulls)


def without_unsure_keys(
    table: Table,
    retained: Retained,
    departed_keys: Sequence[frozenset[frozenset[str]]],
    extract: ExtractColumns,
) -> Table:
    """The table less the unique keys the rows downstream may break, which the server
    would refuse over them (1062):
    - the rows of a shard that left hold for a key only on the columns of one their
      shard's table or the downstream table had when it left (MariaDB and the downstream
      checked them on those), or on more (L09: a UNIQUE key the
      leaving shard had dropped came back over its rows);
    - rows given a default while their shard lacked the column, kept for a shard that
      left or has not vouched for them since, repeat that value (L08: the
      shards' UNIQUE key came back over a departed shard's fillers)."""
    filled = {k for k, h in retained.held.items() if h.filler not in (None, NULL_DEFAULT.sql)}
    if not departed_keys and not filled:
        return table

    def sure(ix: Index) -> bool:
        on = set(ix.columns) - extract.keys
        if filled & on:
            return False
        return all(any(sets <= on for sets in unique) for unique in departed_keys)

    kept = tuple(ix for ix in table.indexes if ix.kind != IndexKind.UNIQUE or sure(ix))
    return table if len(kept) == len(table.indexes) else replace(table, indexes=kept)


def unique_on(extract: ExtractColumns, *tables: Table | None) -> frozenset[frozenset[str]]:
    """The column sets (extract columns left out) the tables' unique keys are on."""
    return frozenset(
        frozenset(ix.columns) - extract.keys
        for table in tables
        if table is not None
        for ix in table.indexes
        if ix.kind in (IndexKind.PRIMARY, IndexKind.UNIQUE)
    )


def move(columns: list, moved: str, after: str | None) -> list:
    """docs/design.md "Statements that pass through": a column move passes through."""
    column = next((c for c in columns if c.key == moved), None)
    keys = [c.key for c in columns]
    if column is None or (after is not None and after not in keys):
        return columns
    rest = [c for c in columns if c.key != moved]
    at = 0 if after is None else [c.key for c in rest].index(after) + 1
    return [*rest[:at], column, *rest[at:]]


def keep_order(
    columns: list, previous: Table | None, hint: Table | None, renames: Sequence[RenameRecord] = ()
) -> list:
    """Keep the downstream column order. A renamed column takes its old name's place
    (the re-added old name follows it); any other new column goes after the column
    it follows in `hint` (the schema of the shard that added it), else at the end."""
    if previous is None:
        return columns
    rank = {c.key: float(i) for i, c in enumerate(previous.columns)}
    for record in renames:
        old, new = key(record.old), key(record.new)
        if old in rank and new not in rank:
            rank[new], rank[old] = rank[old], rank[old] + 0.5
    ordered = sorted((c for c in columns if c.key in rank), key=lambda c: rank[c.key])
    if len(ordered) == len(columns):
        return ordered  # (most DDLs of a large group: no new column to place)
    hint_keys = [c.key for c in hint.columns] if hint is not None else []
    for column in columns:
        if column.key in rank:
            continue
        keys = [c.key for c in ordered]
        at = len(ordered)
        if column.key in hint_keys:
            before = hint_keys[: hint_keys.index(column.key)]
            placed = [k for k in reversed(before) if k in keys]
            at = keys.index(placed[0]) + 1 if placed else (0 if not before else len(ordered))
        ordered.insert(at, column)
    return ordered
