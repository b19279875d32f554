"""DM's extract columns of a shard group: where a row came from, filled in by the worker.

They join every primary and unique key, so equal keys of different shards stay apart: they
lead the primary key, so one shard's rows are one range of it and a statement on them (a
fill, a shard's TRUNCATE, backfill recovery, verify, a conversion) reads those rows only;
unique keys take them last, where lookups by the shards' own columns still use the key. A
table made with them last (before this layout) keeps them so: moving a primary key rebuilds
the table (docs/operations/schema-changes.md "Keys with extract columns")."""

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
from replicator.config import Extract
from replicator.shard_id import ShardId

PARTS = ("source", "schema", "table")
# a column of the name (source id, schema or table): what one holds unless configured otherwise
NAME_TYPE = ColumnType(Family.STRING, "varchar", length=64, charset="utf8mb4", collation="utf8mb4_bin")


@dataclass(frozen=True)
class ExtractColumns:
    names: Mapping[str, str] = field(default_factory=dict)  # "source", "schema", "table" -> column
    types: Mapping[str, ColumnType] = field(default_factory=dict)  # column key -> type, where configured
    # the kinds whose column holds what a pattern captured, not the whole name -> the pattern
    # (DM's extract-*, what import-dm writes): such columns need not tell the shards apart, so a
    # statement on one shard's rows by them is checked against the group's other shards
    captured: Mapping[str, str] = field(default_factory=dict)
    leads: bool = True  # they lead the primary key (a table made before: `led_in` says)

    @classmethod
    def configured(
        cls,
        names: Mapping[str, str] | None,
        types: Mapping[str, str] | None,
        captured: Mapping[str, str] | None = None,
    ) -> ExtractColumns:
        """From the task's route: `types` as SQL text, where not a VARCHAR of the name."""
        typed = {key(c): _column_type(t) for c, t in (types or {}).items()}
        return cls(dict(names or {}), typed, dict(captured or {}))

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(key(c) for c in self.names.values())

    def origin(self, shard: ShardId, others: Iterable[ShardId] = ()) -> str | None:
        """The WHERE clause of a shard's rows downstream: None without all three columns, or
        where patterns captured the values and another of the group's shards (`others`) has
        the same ones, or a pattern does not match its name."""
        if not set(PARTS) <= self.names.keys():
            return None
        values = self.values(shard)
        if None in values.values():
            return None
        if self.captured and any(o != shard and self.values(o) == values for o in others):
            return None
        named = values.items()
        return " AND ".join(f"{quote_identifier(self.names[p])} = {quote_string(v)}" for p, v in named)

    def values(self, shard: ShardId) -> dict[str, str | None]:
        """What each of the shard's extract columns holds (a pattern's first group, or the
        whole name), as the worker fills them."""
        parts = shard.parts()
        return {part: Extract(part, "", self.captured.get(part)).value(parts) for part in parts}

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
