"""What the rows of a shard lacking a downstream column hold in it.

A row written by a shard that lacks a column gets the column's default downstream, and
the rows there when the column was added downstream got its default of then. While the
column keeps one definition, every such row holds that one value; once its default or
type changes, or a rename's copy writes into it, rows written before and after may hold
different values, and the record says nothing more of it. A shard adding the column then
needs no UPDATE of its rows when the value they hold is the one the shard gives them
(`RowsPlan.existing`): on a large table that UPDATE would write every row
of the shard for nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from lattice import NULL_DEFAULT, Column, Default, Table, filler_default


def row_value(column: Column) -> Default | None:
    """The value a row written without this column gets, as the server fills it (None
    where it is no one value: an expression such as CURRENT_TIMESTAMP, a generated column)."""
    if column.generated is not None:
        return None
    default = column.default
    if default is None:
        default = NULL_DEFAULT if column.nullable else filler_default(column.type)
    if default is None or default.is_expression:
        return None
    return default


@dataclass
class Fills:
    """Per downstream column key, the one value the rows no shard wrote in hold there."""

    known: dict[str, Default] = field(default_factory=dict)

    def follow(self, before: Table | None, after: Table, copied: Iterable[str] = ()) -> None:
        """The downstream table went from `before` to `after` (both as the server holds
        them); `copied`: keys of the columns a rename copied values into or out of."""
        unsure = set(copied)
        for column in after.columns:
            was = before.column(column.name) if before is not None else None
            value = row_value(column)
            if was is None:
                # (a rename's CHANGE makes its new name a column holding the values it
                # moved, not its default: a shard that adds a column of that name later, the
                # rename cancelled, has its rows set to its own value; L34)
                if value is None or column.key in unsure:
                    self.known.pop(column.key, None)
                else:
                    self.known[column.key] = value
            elif column.key in unsure or was.type != column.type or row_value(was) != value:
                self.known.pop(column.key, None)
        for gone in self.known.keys() - after.column_map.keys():
            del self.known[gone]

    def copy(self) -> Fills:
        return Fills(dict(self.known))  # (Defaults: frozen)

    def holds(self, column_key: str, value: Default) -> bool:
        """Whether the rows of a shard lacking the column hold `value` in it already."""
        return self.known.get(column_key) == value

    def to_data(self) -> dict[str, list]:
        return {k: [d.sql, d.is_expression] for k, d in sorted(self.known.items())}

    @classmethod
    def from_data(cls, data: dict[str, list] | None) -> Fills:
        """(A state saved before the record: nothing known, every fill runs.)"""
        return cls({k: Default(sql, expression) for k, (sql, expression) in (data or {}).items()})
