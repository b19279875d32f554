"""The MySQL schema model: immutable tables, columns, indexes and checks.

Names of columns, indexes and checks are case-insensitive in MySQL, so every lookup
goes through `key()`. A table's equality ignores column order and the table's own
name (docs/design.md "The lattice of compatibility": column order is not a concern; the name is a label,
the schema is
what the lattice orders), while rendering keeps the order.

The model knows neither SQL parsing nor rendering: `lattice.parse_table` and
`lattice.render_table` (in `apply` and `render`, above it) do that.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property


def key(name: str) -> str:
    return name.lower()


class Family(StrEnum):
    INTEGER = "integer"
    DECIMAL = "decimal"
    FLOAT = "float"
    BIT = "bit"
    STRING = "string"  # char, varchar, *text
    BINARY = "binary"  # binary, varbinary, *blob
    ENUM = "enum"
    SET = "set"
    YEAR = "year"
    DATE = "date"
    TIME = "time"
    DATETIME = "datetime"
    TIMESTAMP = "timestamp"
    JSON = "json"
    SPATIAL = "spatial"
    OTHER = "other"  # types such as INET6 or UUID, joined only with themselves


# the families holding a calendar day: a DATE converts to its midnight in the others
DAYS = frozenset({Family.DATE, Family.DATETIME, Family.TIMESTAMP})


INTEGER_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}
INTEGER_BY_BITS = {bits: name for name, bits in INTEGER_BITS.items()}


def integer_range(t: ColumnType) -> tuple[int, int]:
    """The smallest and largest value of an integer type."""
    bits = INTEGER_BITS[t.name]
    return (0, 2**bits - 1) if t.unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


TEXT_CAPACITY = {"tinytext": 255, "text": 65535, "mediumtext": 16777215, "longtext": 4294967295}
BLOB_CAPACITY = {"tinyblob": 255, "blob": 65535, "mediumblob": 16777215, "longblob": 4294967295}
SPATIAL_TYPES = (
    "geometry",
    "point",
    "linestring",
    "polygon",
    "multipoint",
    "multilinestring",
    "multipolygon",
    "geometrycollection",
)


@dataclass(frozen=True)
class ColumnType:
    """A normalised column type. `name` is the canonical base type (`int`,
    `varchar`, `mediumtext`, `double`, `point`...); the other fields are set only
    where the family uses them, so two spellings of one type compare equal."""

    family: Family
    name: str
    length: int | None = None  # char/varchar/binary/varbinary length, bit width
    precision: int | None = None  # decimal M, float/double M of (M,D)
    scale: int | None = None  # decimal D, float/double D of (M,D)
    fsp: int | None = None  # fractional seconds of time/datetime/timestamp
    unsigned: bool = False
    zerofill: bool = False
    charset: str | None = None  # string, enum and set only; None = server default
    collation: str | None = None
    members: tuple[str, ...] = ()  # enum/set members, in order

    @property
    def is_text_kind(self) -> bool:
        return self.name in TEXT_CAPACITY or self.name in BLOB_CAPACITY

    @property
    def is_character(self) -> bool:
        return self.family in (Family.STRING, Family.ENUM, Family.SET)


@dataclass(frozen=True)
class Default:
    """A column default as canonical SQL text: `NULL`, `0`, `'abc'`, `b'101'`,
    or an expression such as `current_timestamp(3)` (is_expression=True)."""

    sql: str
    is_expression: bool = False

    @property
    def is_null(self) -> bool:
        return self.sql == "NULL"


NULL_DEFAULT = Default("NULL")


@dataclass(frozen=True)
class Generated:
    expression: str  # canonical SQL
    stored: bool


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    nullable: bool = True
    default: Default | None = None  # None: no default (NOT NULL columns only)
    on_update: str | None = None
    auto_increment: bool = False
    generated: Generated | None = None
    comment: str | None = None
    # Only in joined tables: the column is absent from some shard, so rows from that
    # shard get its default; a NOT NULL partial column with no default of its own gets
    # a filler default (docs/design.md "Adding a column") when rendered.
    partial: bool = False

    # Cached, as the join looks columns up by key and counts them by value, a thousand
    # shards of a hundred columns at a time (the dataclass is frozen: these never change).
    @cached_property
    def key(self) -> str:
        return key(self.name)

    def __hash__(self) -> int:
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash(
                (
                    self.name,
                    self.type,
                    self.nullable,
                    self.default,
                    self.on_update,
                    self.auto_increment,
                    self.generated,
                    self.comment,
                    self.partial,
                )
            )
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict:
        # a string's hash differs between processes: a pickled column must not carry one
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state


class IndexKind(StrEnum):
    PRIMARY = "primary"
    UNIQUE = "unique"
    PLAIN = "plain"
    FULLTEXT = "fulltext"
    SPATIAL = "spatial"


@dataclass(frozen=True)
class IndexPart:
    column: str
    length: int | None = None  # prefix length
    descending: bool = False


@dataclass(frozen=True)
class Index:
    name: str
    kind: IndexKind
    parts: tuple[IndexPart, ...]
    comment: str | None = None  # (no rows depend on it)
    # Written USING HASH (MariaDB): a UNIQUE key then checked through a hash of its values,
    # kept in a hidden column the binlog's rows carry (`lattice.hash_keys`). No rows depend
    # on how a key is kept, and the server forgets it at the table's next ALTER
    hashed: bool = field(default=False, compare=False)
    # Made by the server for a foreign key (MariaDB's HA_GENERATED_KEY): a later key
    # that starts with its columns replaces it, whether or not the foreign key is still
    # there; RENAME INDEX makes it an ordinary key. SHOW CREATE TABLE does not tell
    generated: bool = field(default=False, compare=False)

    @cached_property
    def key(self) -> str:
        return key(self.name)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(key(p.column) for p in self.parts)


PRIMARY = "PRIMARY"


def unordered(index: Index) -> Index:
    """An index as a table's equality sees it: a primary key's parts in one order (by
    column), as which order they come in changes no row (the join of two keys is on the
    columns of both: `lattice.keys`)."""
    if index.kind is not IndexKind.PRIMARY or len(index.parts) < 2:
        return index
    return replace(index, parts=tuple(sorted(index.parts, key=lambda p: key(p.column))))


def numbered_foreign_key(table: str, n: int) -> str:
    """The name InnoDB gives a table's n-th unnamed foreign key."""
    return f"{table}_ibfk_{n}"


def foreign_key_number(name: str, table: str) -> int | None:
    """n where `name` is `numbered_foreign_key(table, n)`."""
    prefix = key(table) + "_ibfk_"
    tail = key(name)[len(prefix) :] if key(name).startswith(prefix) else ""
    return int(tail) if tail.isdigit() else None


def renamed_foreign_key(name: str, old: str, new: str) -> str:
    n = foreign_key_number(name, old)
    return name if n is None else numbered_foreign_key(new, n)


@dataclass(frozen=True)
class Check:
    name: str
    expression: str  # canonical SQL
    enforced: bool = True
    columns: frozenset[str] = frozenset()  # lower-cased names the expression reads
    # MariaDB: the column (key) whose definition holds the check (`b INT CHECK (b > 0)`),
    # which a MODIFY or CHANGE of it without one drops. Where it is written changes no row:
    # no part of equality, and rendered as a table's check
    column: str | None = field(default=None, compare=False)

    @cached_property
    def key(self) -> str:
        return key(self.name)


@dataclass(frozen=True)
class TableOptions:
    engine: str | None = None
    charset: str | None = None
    collation: str | None = None
    comment: str | None = None


@dataclass(frozen=True, eq=False)
class Table:
    name: str
    columns: tuple[Column, ...]
    indexes: tuple[Index, ...] = ()
    checks: tuple[Check, ...] = ()
    options: TableOptions = field(default_factory=TableOptions)
    # The names of its foreign keys. They are not replicated, but a statement's IF NOT
    # EXISTS and the numbers of unnamed ones (`<table>_ibfk_<n>`) depend on them.
    foreign_keys: tuple[str, ...] = field(default=(), compare=False)

    # -- lookups -----------------------------------------------------------------
    @cached_property
    def column_map(self) -> Mapping[str, Column]:
        return {c.key: c for c in self.columns}

    @cached_property
    def index_map(self) -> Mapping[str, Index]:
        return {i.key: i for i in self.indexes}

    @cached_property
    def check_map(self) -> Mapping[str, Check]:
        return {c.key: c for c in self.checks}

    def column(self, name: str) -> Column | None:
        return self.column_map.get(key(name))

    def index(self, name: str) -> Index | None:
        return self.index_map.get(key(name))

    def check(self, name: str) -> Check | None:
        return self.check_map.get(key(name))

    @property
    def primary_key(self) -> Index | None:
        return self.index(PRIMARY)

    # -- schema equality: order-free, name-free ------------------------------------
    @cached_property
    def _identity(self) -> tuple:
        return (
            frozenset(self.columns),
            frozenset(map(unordered, self.indexes)),
            frozenset(self.checks),
            self.options,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Table):
            return NotImplemented
        if (self.columns, self.indexes, self.checks) == (other.columns, other.indexes, other.checks):
            return self.options == other.options  # (the common case, without building sets)
        return self._identity == other._identity

    def __hash__(self) -> int:
        return hash(self._identity)

    def same_rendering(self, other: Table) -> bool:
        """Equal including name and column order."""
        return self == other and self.name == other.name and self.columns == other.columns

    # -- construction helpers ----------------------------------------------------
    def evolve(self, **changes) -> Table:
        return replace(self, **changes)

    def renamed(self, name: str) -> Table:
        """The table under a new name (RENAME TABLE): InnoDB renames the foreign keys it
        numbered after the old name too."""
        return replace(
            self,
            name=name,
            foreign_keys=tuple(renamed_foreign_key(f, self.name, name) for f in self.foreign_keys),
        )

    def copied(self, name: str) -> Table:
        """A new table made LIKE this one: its foreign keys are not copied."""
        return replace(self, name=name, foreign_keys=())

    def with_columns(self, columns: Iterable[Column]) -> Table:
        return replace(self, columns=tuple(columns))
