"""The schema lattice (seed 002): `join(a, b)` is the least compatible table that
accepts every row either table accepts, with the same effect; `compare` orders two
tables by compatibility. Built from the pieces in `lattice.algebra`:

    table   = columns × indexes × checks × options      (Product of keyed maps)
    column  = ABSENT | generated | normal               (ColumnLattice)
    normal  = name × type × nullable × default × ...     (Product)

Rules that span fields run after the pieces (`_settle`): a partial column leaves
every index and check that reads it, AUTO_INCREMENT leaves a column no key leads,
an index the widened columns make too long is dropped, and a row too wide is a
conflict. Each rule only ever removes constraints or refuses, so the join stays
commutative, associative and idempotent (checked by the hypothesis tests).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

from lattice.algebra import (
    ABSENT,
    INCOMPARABLE,
    Boolean,
    Conflict,
    Droppable,
    KeyedMap,
    Lattice,
    Minimum,
    Optional,
    Ordering,
    Product,
    Singleton,
    combine,
)
from lattice.fillers import filler_default
from lattice.flavor import Flavor
from lattice.limits import MAX_ROW_BYTES, key_problem, row_bytes
from lattice.model import Default, Index, IndexKind, Table
from lattice.sqltext import canonical_expression
from lattice.typejoin import ColumnTypes


@dataclass(frozen=True)
class JoinConflict:
    """Two schemas with no join: names the column (None for the whole table)."""

    column: str | None
    reason: str
    path: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = f"column {self.column}" if self.column else "table"
        return f"{where}: {self.reason}"


def _describe_defaults(a, b) -> str:
    return f"defaults {a.sql} and {b.sql} differ"


class ColumnLattice(Lattice):
    """One column name across shards.

    - Seed 002 "Adding and dropping columns": a normal column missing on one side
      (ABSENT) joins as present, marked partial (so it gets a default and stays out
      of every key).
    - Seed 002 "Generated columns": a generated column missing is more compatible,
      so generated ∨ ABSENT = ABSENT, and two different generated definitions meet
      at ABSENT.
    - Seed 002 "Stored generated columns": generated ∨ normal = normal, partial
      (rows from the generated side omit the column).
    """

    def __init__(self, flavor: Flavor):
        self.normal = Product(
            name=Minimum(),  # names compare case-insensitively; keep one spelling
            type=ColumnTypes(flavor),
            nullable=Boolean(top=True),  # seed 002 "Nullability": NULL is more compatible
            default=Optional(Singleton(_describe_defaults)),  # seed 002 "Defaultness"
            on_update=Droppable(top=None),  # rows carry every value, so dropping ON UPDATE loses nothing
            auto_increment=Boolean(top=False),  # kept only where every shard has it
            comment=Droppable(top=None),  # comments do not change accepted rows
            partial=Boolean(top=True),
        )

    @staticmethod
    def _is_normal(c) -> bool:
        return c is not ABSENT and c.generated is None

    def join(self, a, b):
        if a == b:
            return a
        a_normal, b_normal = self._is_normal(a), self._is_normal(b)
        if a_normal and b_normal:
            return self.normal.join(a, b)
        if a_normal or b_normal:
            return replace(a if a_normal else b, partial=True)
        return ABSENT  # generated ∨ ABSENT, or two different generated columns

    def compare(self, a, b) -> Ordering:
        if a == b:
            return 0
        a_normal, b_normal = self._is_normal(a), self._is_normal(b)
        if a_normal and b_normal:
            return self.normal.compare(a, b)
        if a_normal or b_normal:
            n = a if a_normal else b
            if not n.partial:
                return INCOMPARABLE
            return 1 if a_normal else -1
        if a is ABSENT or b is ABSENT:
            return 1 if a is ABSENT else -1
        return INCOMPARABLE


def _index_kinds(a: IndexKind, b: IndexKind) -> IndexKind:
    # A plain index accepts every row a unique one does, on the same key parts.
    if {a, b} == {IndexKind.UNIQUE, IndexKind.PLAIN}:
        return IndexKind.PLAIN
    raise Conflict(f"index kinds {a} and {b} differ")


class _IndexKind(Lattice):
    def join(self, a, b):
        return a if a == b else _index_kinds(a, b)


class TableLattice(Lattice[Table]):
    def __init__(self, flavor: Flavor):
        self.flavor = flavor
        self.column = ColumnLattice(flavor)
        self.columns = KeyedMap(self.column)
        # Seed 002 "Constraints and indices": fewer constraints are more compatible;
        # indexes and checks are matched by name and dropped where shards differ.
        self.indexes = KeyedMap(Droppable(Product(name=Minimum(), kind=_IndexKind())))
        self.checks = KeyedMap(Droppable(Product(name=Minimum(), enforced=Boolean(top=False))))
        # Table options do not change accepted rows: keep what all shards agree on.
        self.options = Product(
            engine=Droppable(top=None),
            charset=Droppable(top=None),
            collation=Droppable(top=None),
            comment=Droppable(top=None),
        )

    def join(self, a: Table, b: Table) -> Table:
        if a == b:
            return a
        try:
            columns = self.columns.join(a.column_map, b.column_map)
        except Conflict as exc:
            raise exc.at("columns") from None
        indexes = self.indexes.join(a.index_map, b.index_map)
        checks = self.checks.join(a.check_map, b.check_map)
        options = self.options.join(a.options, b.options) if a.options != b.options else a.options
        order = [c.key for c in a.columns] + [c.key for c in b.columns if c.key not in a.column_map]
        joined = Table(
            a.name,
            tuple(columns[k] for k in order if k in columns),
            _ordered(indexes, a.indexes, b.indexes),
            _ordered(checks, a.checks, b.checks),
            options,
        )
        return settle(joined)

    def compare(self, a: Table, b: Table) -> Ordering:
        if a == b:
            return 0
        parts = [
            self.columns.compare(a.column_map, b.column_map),
            self.indexes.compare(a.index_map, b.index_map),
            self.checks.compare(a.check_map, b.check_map),
            self.options.compare(a.options, b.options),
        ]
        return combine(parts)


def _ordered(joined: dict, first: tuple, second: tuple) -> tuple:
    keys = [x.key for x in first] + [x.key for x in second if x.key not in {y.key for y in first}]
    return tuple(joined[k] for k in keys if k in joined)


def settle(table: Table) -> Table:
    """The cross-field rules of a joined table (see the module docstring)."""
    columns = {c.key: c for c in table.columns}
    # Generated columns whose inputs left the table leave too (seed 002: missing
    # generated columns are more compatible); repeat, as one may feed another.
    changed = True
    while changed:
        changed = False
        for k, c in list(columns.items()):
            if c.generated is not None and not canonical_expression(c.generated.expression).columns <= set(
                columns
            ):
                del columns[k]
                changed = True
    # "outside any key": an index or check that reads a partial or missing column goes.
    full = {k for k, c in columns.items() if not c.partial}
    indexes = [ix for ix in table.indexes if _index_columns(ix) <= full]
    checks = [ch for ch in table.checks if ch.columns <= full]
    # An index the widened columns made invalid for the server goes as well (a shard's
    # own plain index becomes a prefix one on MariaDB, see
    # lattice.limits.settled_prefixes, and when every shard has that the join keeps it).
    indexes = [ix for ix in indexes if key_problem(ix, columns) is None]
    # AUTO_INCREMENT must stay in a key: the server requires it to lead one.
    leading = {ix.parts[0].column.lower() for ix in indexes if ix.parts}
    for k, c in list(columns.items()):
        if c.auto_increment and k not in leading:
            columns[k] = replace(c, auto_increment=False)
    kept = tuple(columns[c.key] for c in table.columns if c.key in columns)
    size = row_bytes(kept)
    if size > MAX_ROW_BYTES:
        raise Conflict(f"the joined row would take {size} bytes, more than the server's {MAX_ROW_BYTES}")
    if (kept, tuple(indexes), tuple(checks)) == (table.columns, table.indexes, table.checks):
        return table
    return replace(table, columns=kept, indexes=tuple(indexes), checks=tuple(checks))


def _index_columns(index: Index) -> set[str]:
    names: set[str] = set()
    for part in index.parts:
        if part.column.startswith("("):
            names |= canonical_expression(part.column).columns
        else:
            names.add(part.column.lower())
    return names


@cache
def table_lattice(flavor: Flavor | str = Flavor.MARIADB) -> TableLattice:
    return TableLattice(Flavor.parse(flavor))


def _conflict(exc: Conflict) -> JoinConflict:
    path = exc.path
    column = path[1] if len(path) > 1 and path[0] == "columns" else None
    return JoinConflict(column, exc.reason, path)


def join(a: Table, b: Table, flavor: Flavor | str = Flavor.MARIADB) -> Table | JoinConflict:
    try:
        return table_lattice(flavor).join(a, b)
    except Conflict as exc:
        return _conflict(exc)


def join_all(tables, flavor: Flavor | str = Flavor.MARIADB) -> Table | JoinConflict:
    """The join of one or more tables (the downstream schema of a shard group)."""
    lattice = table_lattice(flavor)
    tables = list(tables)
    if not tables:
        raise ValueError("join_all needs at least one table")
    result = tables[0]
    try:
        for t in tables[1:]:
            result = lattice.join(result, t)
    except Conflict as exc:
        return _conflict(exc)
    return result


def compare(a: Table, b: Table, flavor: Flavor | str = Flavor.MARIADB) -> Ordering:
    return table_lattice(flavor).compare(a, b)


def keeps_rows(old: Table, new: Table, flavor: Flavor | str = Flavor.MARIADB) -> bool:
    """Every row valid in `old` is valid in `new` (seeds 000, 001: the version bump is
    minor exactly then). Not the lattice order: a column one table lacks is partial
    in their join (it must stay out of keys), so `compare` calls T(id) and
    T(id, x NULL) incomparable, yet every row of the first fits the second. A row
    may leave out a column with a default, so a changed or dropped default breaks it
    (it reads back another value, or is refused); a default where there was none
    does not. Plain, fulltext and spatial indexes, comments and table options accept
    every row."""
    types = ColumnTypes(Flavor.parse(flavor))
    old_columns, new_columns = old.column_map, new.column_map
    for k, column in old_columns.items():
        after = new_columns.get(k)
        if column.generated is not None:
            continue  # rows do not carry it
        if after is None or after.generated is not None:
            return False  # a row's value would have nowhere to go
        if column.nullable and not after.nullable:
            return False
        if _effective_default(column) is not None and _effective_default(after) != _effective_default(column):
            return False  # a row that leaves the column out reads back another value, or is refused
        if types.compare(column.type, after.type) not in (-1, 0):
            return False
    for k, after in new_columns.items():
        if k in old_columns or after.generated is not None or after.auto_increment:
            continue
        if not after.nullable and after.default is None and not after.partial:
            return False  # rows without it are refused
    unique = (IndexKind.PRIMARY, IndexKind.UNIQUE)
    old_unique = [ix for ix in old.indexes if ix.kind in unique]
    for index in (ix for ix in new.indexes if ix.kind in unique):
        # a new unique key holds on the old rows only when an old one on the same parts,
        # or on fewer whole columns, held
        columns = _key_columns(index)
        if not any(
            was.parts == index.parts
            or (columns is not None and (held := _key_columns(was)) is not None and held <= columns)
            for was in old_unique
        ):
            return False
    old_checks = old.check_map
    return all(old_checks.get(k) == check for k, check in new.check_map.items())


def _key_columns(index: Index) -> frozenset[str] | None:
    """The columns of a unique key, None when a part is a prefix or an expression
    (it holds over fewer rows than its columns say)."""
    if any(p.length is not None or p.column.startswith("(") for p in index.parts):
        return None
    return frozenset(p.column.lower() for p in index.parts)


def _effective_default(column) -> Default | None:
    """The default a row that leaves the column out gets: a partial NOT NULL column with
    none of its own has seed 002's filler (see lattice.render)."""
    if column.default is None and column.partial and not column.nullable:
        return filler_default(column.type)
    return column.default
