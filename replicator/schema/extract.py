"""DM's extract columns of a shard group: where a row came from, filled in by the worker.

They join every primary and unique key, so equal keys of different shards stay apart: they
lead the primary key, so one shard's rows are one range of it and a statement on them (a
fill, a shard's TRUNCATE, backfill recovery, verify, a conversion) reads those rows only;
unique keys take them last, where lookups by the shards' own columns still use the key. A
table made with them last (before this layout) keeps them so: moving a primary key rebuilds
the table (README "Keys with extract columns")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from lattice import (
    Column,
    ColumnType,
    Default,
    Family,
    Index,
    IndexKind,
    IndexPart,
    Table,
    filler_default,
    key,
    parse_table,
    quote_identifier,
    quote_string,
    without_stray_auto_increment,
)
from replicator.shard_id import ShardId

PARTS = ("source", "schema", "table")
# a column of the name (source id, schema or table): what one holds unless configured otherwise
NAME_TYPE = ColumnType(Family.STRING, "varchar", length=64, charset="utf8mb4", collation="utf8mb4_bin")


@dataclass(frozen=True)
class ExtractColumns:
    names: Mapping[str, str] = field(default_factory=dict)  # "source", "schema", "table" -> column
    types: Mapping[str, ColumnType] = field(default_factory=dict)  # column key -> type, where configured
    # the kinds whose column holds what a pattern captured, not the whole name: such columns
    # need not tell the shards apart (no statement on one shard's rows by them)
    captured: frozenset[str] = frozenset()
    leads: bool = True  # they lead the primary key (a table made before: `led_in` says)

    @classmethod
    def configured(
        cls, names: Mapping[str, str] | None, types: Mapping[str, str] | None, captured: Iterable[str] = ()
    ) -> ExtractColumns:
        """From the task's route: `types` as SQL text, where not a VARCHAR of the name."""
        typed = {key(c): _column_type(t) for c, t in (types or {}).items()}
        return cls(dict(names or {}), typed, frozenset(captured))

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(key(c) for c in self.names.values())

    def origin(self, shard: ShardId) -> str | None:
        """The WHERE clause of a shard's rows downstream: None without all three columns,
        or where one holds only what a pattern captured."""
        if not set(PARTS) <= self.names.keys() or self.captured:
            return None
        parts = shard.parts().items()
        return " AND ".join(f"{quote_identifier(self.names[p])} = {quote_string(v)}" for p, v in parts)

    def added_to(self, columns: list[Column], joined: Table) -> tuple[list[Column], Table]:
        """The joined table's columns with the extract columns they lack, and the joined
        table with its keys keyed apart."""
        names = [self.names[p] for p in PARTS if p in self.names]
        if not names:
            return columns, joined
        present = {c.key for c in columns}
        added = []
        for n in names:
            if key(n) in present:
                continue
            type_ = self.types.get(key(n))
            if type_ is None:
                added.append(Column(n, NAME_TYPE, nullable=False, default=Default("''")))
            else:
                added.append(Column(n, type_, nullable=False, default=filler_default(type_)))
        indexes = tuple(self._keyed_apart(ix, names) for ix in joined.indexes)
        # (an AUTO_INCREMENT id the extract columns now lead keeps its values, not the attribute:
        # every row downstream comes with its id)
        columns = list(without_stray_auto_increment((*columns, *added), indexes))
        return columns, replace(joined, indexes=indexes)

    def _keyed_apart(self, index: Index, names: list[str]) -> Index:
        if index.kind not in (IndexKind.PRIMARY, IndexKind.UNIQUE):
            return index
        extra = tuple(IndexPart(n) for n in names if key(n) not in index.columns)
        if index.kind == IndexKind.PRIMARY and self.leads:
            return replace(index, parts=extra + index.parts)
        return replace(index, parts=index.parts + extra)

    def led_in(self, table: Table | None) -> ExtractColumns:
        """As they are in a table made downstream already (a new one: leading)."""
        primary = table.primary_key if table is not None else None
        if primary is None or not self.names:
            return replace(self, leads=True)
        first = primary.parts[0].column if primary.parts else ""
        return replace(self, leads=key(first) in self.keys)


def _column_type(sql: str) -> ColumnType:
    """A configured extract column's type, as the model has it."""
    return parse_table(f"CREATE TABLE t (c {sql} NOT NULL)").columns[0].type
