"""The merged table's primary key (issue 46): the union of the shards' key columns.

A primary key on more columns takes every row one on fewer of them takes, so the union
of the shards' keys is their join (docs/design.md "The lattice of compatibility": the least table taking
every shard's rows)
and a shard that widens its key (`DROP PRIMARY KEY, ADD PRIMARY KEY (id, a)`) widens the
merged one, in one ALTER downstream. The parts go in the first table's order, then the
columns the second adds; which order a key's parts come in changes no row, so tables
equal but for it are equal (`Table`'s identity), which keeps the join commutative.

A key that cannot be (a shard without one, a column of it partial or nullable in the
join, parts of one column that differ) is dropped here as before, the most compatible
table; the coordinator refuses a decision that would so lose the merged table's key
(`loses_key`): without one, every later UPDATE and DELETE downstream matches rows by all
their columns. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from lattice.algebra import ABSENT, INCOMPARABLE, Lattice, Ordering
from lattice.model import Column, Index, IndexKind, Table, key, unordered


def is_primary(value: object) -> bool:
    return isinstance(value, Index) and value.kind is IndexKind.PRIMARY


class PrimaryKeys(Lattice):
    """Primary keys (or ABSENT, the top: no key) ordered by their columns' inclusion."""

    def join(self, a, b):
        if a is ABSENT or b is ABSENT:
            return ABSENT
        if a == b:
            return a
        return union(a, b)

    def compare(self, a, b) -> Ordering:
        if a is ABSENT or b is ABSENT:
            return 0 if a is b else (1 if a is ABSENT else -1)
        j = union(a, b)
        if j is ABSENT:
            return INCOMPARABLE
        below, above = same_key(j, b), same_key(j, a)
        return 0 if below and above else -1 if below else 1 if above else INCOMPARABLE


def union(a: Index, b: Index) -> Index | object:
    """The key on the columns of both, ABSENT where a column's parts differ (a prefix of
    another length, another direction: no key takes the rows of both)."""
    parts = {key(p.column): p for p in a.parts}
    for part in b.parts:
        mine = parts.get(key(part.column))
        if mine is not None and (mine.length, mine.descending) != (part.length, part.descending):
            return ABSENT
    added = tuple(p for p in b.parts if key(p.column) not in parts)
    comment = a.comment if a.comment == b.comment else None  # (comments join as options do)
    return replace(a, parts=a.parts + added, comment=comment)


def same_key(a: Index, b: Index) -> bool:
    """Equal but for the order of the parts."""
    return unordered(a) == unordered(b)


def holds_key(index: Index, columns: Mapping[str, Column]) -> bool:
    """A primary key the server takes on these columns: each is there, in every shard
    (not partial) and NOT NULL (the server makes a key's columns NOT NULL, and a shard's
    NULL would then be refused)."""
    for name in index.columns:
        column = columns.get(name)
        if column is None or column.partial or column.nullable:
            return False
    return True


LOSES_KEY = "would lose its primary key"


def loses_key(before: Table | None, after: Table, proposed: Table | None = None) -> str | None:
    """Why the merged table would lose its primary key, or None: `before` (the join as it
    stands) has one and `after` (with `proposed`, a shard's new table, in it) has none."""
    if before is None or before.primary_key is None or after.primary_key is not None:
        return None
    had = before.primary_key
    lost = f"the merged table {after.name} {LOSES_KEY} ({_names(had)})"
    if proposed is None:
        return lost
    own = proposed.primary_key
    if own is None:
        return f"{lost}: the shard's table has no primary key"
    wanted = union(had, own)
    if wanted is ABSENT:
        return f"{lost}: the shard's key ({_names(own)}) takes a column with another prefix or order"
    for name in wanted.columns:
        column = after.column_map.get(name)
        if column is None or column.partial:
            return f"{lost}: the union of the keys ({_names(wanted)}) needs column {name} in every shard"
        if column.nullable:
            needs = f"needs column {name} NOT NULL in every shard"
            return f"{lost}: the union of the keys ({_names(wanted)}) {needs}"
    return f"{lost}: the union of the keys ({_names(wanted)}) is too long for a key"


def _names(index: Index) -> str:
    return ", ".join(p.column for p in index.parts)
