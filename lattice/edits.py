"""One downstream statement's change to the table model, without SQL: `diff`
applies each to its running model of the downstream table as it emits the
statement that makes it, so every statement comes with the table right after it.

Each function takes the table and returns the changed one, as the server changes
it: a renamed column's key parts, checks and generated expressions follow it; a
dropped column leaves the keys it was part of (a key goes with its last part) and
takes the checks that read it alone; key parts take the prefix lengths their columns
allow (see `limits.settled_prefixes`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from lattice.limits import max_key_bytes, settled_prefixes
from lattice.model import Check, Column, Index, Table, key
from lattice.sqltext import canonical_expression, quote_identifier, rename_columns_in_expression


@dataclass(frozen=True)
class Place:
    """Where ADD/MODIFY/CHANGE COLUMN puts a column: FIRST, AFTER a column, or (neither)
    at the end for ADD and where it is for MODIFY and CHANGE."""

    first: bool = False
    after: str | None = None

    @property
    def sql(self) -> str:
        if self.first:
            return " FIRST"
        return f" AFTER {quote_identifier(self.after)}" if self.after is not None else ""


UNPLACED = Place()


def add_column(table: Table, column: Column, place: Place = UNPLACED) -> Table:
    return _settled(_placed(table, list(table.columns), column, place))


def drop_column(table: Table, name: str) -> Table:
    k = key(name)
    indexes = []
    for index in table.indexes:
        parts = tuple(p for p in index.parts if key(p.column) != k)
        if parts:
            indexes.append(index if parts == index.parts else replace(index, parts=parts))
    checks = tuple(c for c in table.checks if not (c.columns and c.columns <= {k}))
    columns = tuple(c for c in table.columns if c.key != k)
    return replace(table, columns=columns, indexes=tuple(indexes), checks=checks)


def change_column(table: Table, name: str, column: Column, place: Place = UNPLACED) -> Table:
    """MODIFY (same name) or CHANGE COLUMN: `column` replaces the column called `name`."""
    k = key(name)
    columns = [column if c.key == k else c for c in table.columns]
    if column.key != k:
        table = _renamed(table, columns, k, column.name)
        columns = list(table.columns)
    if place != UNPLACED:
        columns = [c for c in columns if c.key != column.key]
        return _settled(_placed(table, columns, column, place))
    return _settled(replace(table, columns=tuple(columns)))


def drop_index(table: Table, name: str) -> Table:
    return replace(table, indexes=tuple(i for i in table.indexes if i.key != key(name)))


def rename_index(table: Table, name: str, new_name: str) -> Table:
    indexes = tuple(replace(i, name=new_name) if i.key == key(name) else i for i in table.indexes)
    return replace(table, indexes=indexes)


def add_index(table: Table, index: Index) -> Table:
    return _settled(replace(table, indexes=(*table.indexes, index)))


def replace_index(table: Table, index: Index) -> Table:
    """The index of that name, defined anew in its place."""
    return replace(table, indexes=tuple(index if i.key == index.key else i for i in table.indexes))


def drop_check(table: Table, name: str) -> Table:
    return replace(table, checks=tuple(c for c in table.checks if c.key != key(name)))


def add_check(table: Table, check: Check) -> Table:
    return replace(table, checks=(*table.checks, check))


def set_options(table: Table, **options: str | None) -> Table:
    """ALTER TABLE's table options: those given change, the others stay."""
    return replace(table, options=replace(table.options, **options))


# -- the server's rules ---------------------------------------------------------------------
def _placed(table: Table, columns: list[Column], column: Column, place: Place) -> Table:
    if place.first:
        at = 0
    elif place.after is not None:
        at = next(i for i, c in enumerate(columns) if c.key == key(place.after)) + 1
    else:
        at = len(columns)
    return replace(table, columns=(*columns[:at], column, *columns[at:]))


def _renamed(table: Table, columns: list[Column], old: str, new: str) -> Table:
    """Keys, checks and generated columns follow a column renamed from `old` (a key)."""
    indexes = tuple(
        replace(i, parts=tuple(replace(p, column=new) if key(p.column) == old else p for p in i.parts))
        if old in i.columns
        else i
        for i in table.indexes
    )
    checks = []
    for check in table.checks:
        if old in check.columns:
            expression = canonical_expression(rename_columns_in_expression(check.expression, {old: new}))
            check = replace(check, expression=expression.sql, columns=expression.columns)
        checks.append(check)
    renamed = []
    for column in columns:
        generated = column.generated
        # (the text test spares the expression parser every column that cannot read it)
        if generated is not None and column.key != key(new) and old in generated.expression.lower():
            expression = rename_columns_in_expression(generated.expression, {old: new})
            if expression != generated.expression:
                column = replace(column, generated=replace(generated, expression=expression))
        renamed.append(column)
    return replace(table, columns=tuple(renamed), indexes=indexes, checks=tuple(checks))


def _settled(table: Table) -> Table:
    """Key parts take the prefix lengths their columns allow after a column changed or
    a key is added: a plain key too long for the server becomes a prefix (MariaDB's
    note 1071)."""
    columns = table.column_map
    key_bytes = max_key_bytes(table.options.engine)
    indexes = tuple(settled_prefixes(i, columns, key_bytes) for i in table.indexes)
    return table if indexes == table.indexes else replace(table, indexes=indexes)
