"""SQL the Spark jobs push down to the servers. Pure: no Spark, no connections.

- Projection: one shard's rows as the joined schema's columns, each in a form that
  crosses JDBC unchanged. Text for almost everything (the server's own rendering of
  DECIMAL(65,30), TIME, YEAR, zero dates, unsigned BIGINT and TIMESTAMP in UTC is
  exact, where Connector/J's typed getters are not); FLOAT and DOUBLE natively (the
  server prints them with too few digits); binary strings as bytes; BIT as a number
  (a string into a BIT column would be taken as bytes).
- Keys: the target's primary and unique keys as text that is equal exactly when
  the downstream index would call two rows duplicates (collation weights, the joined
  decimal scale, the joined fractional seconds).
- Row hashes: a 60-bit hash of a row's columns as the joined schema renders them, so
  a shard and the downstream table can be summed per chunk and compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from lattice import (
    Column,
    ColumnType,
    ColumnTypes,
    Family,
    Flavor,
    Index,
    IndexKind,
    Table,
    quote_identifier,
    quote_string,
    render_type,
)
from replicator.config import Extract, extracted
from replicator.shard_id import ShardId

TEXT, FLOAT, DOUBLE, BYTES, BIT = "text", "float", "double", "bytes", "bit"
SHARD_COLUMN = "__shard"  # which shard a row came from, in the Spark plans


class ProjectionError(ValueError):
    """A shard's rows cannot be written into the downstream table as it is."""


def transport(ctype: ColumnType) -> str:
    """How values of a downstream column travel from the shard to the downstream."""
    if ctype.family == Family.FLOAT:
        return DOUBLE if ctype.name == "double" else FLOAT
    if ctype.family in (Family.BINARY, Family.SPATIAL):
        return BYTES
    if ctype.family == Family.BIT:
        return BIT
    return TEXT


def _read(expr: str, kind: str, shard_type: ColumnType | None) -> str:
    if kind == TEXT:
        return f"CAST({expr} AS CHAR)"
    if kind == BIT:
        return f"CAST({expr} AS DECIMAL(20,0))"  # BIGINT would turn BIT(64) values over 2^63 negative
    if kind == DOUBLE and shard_type is not None and shard_type.name != "double":
        return f"CAST({expr} AS DOUBLE)"  # the float's exact value, as the stream writes it
    return expr


def writable(table: Table) -> list[Column]:
    """The columns a backfill writes: generated columns compute themselves."""
    return [c for c in table.columns if c.generated is None]


@dataclass(frozen=True)
class Projection:
    """The SELECT list that reads one shard as the downstream table's columns."""

    shard: ShardId
    columns: tuple[str, ...]  # downstream column names, in the target's order
    kinds: tuple[str, ...]  # transport() of each
    select: tuple[str, ...]  # one "expr AS `name`" per column
    missing: tuple[str, ...]  # target columns the shard lacks (given the joined default)

    @property
    def from_table(self) -> str:
        return f"{quote_identifier(self.shard.schema)}.{quote_identifier(self.shard.table)}"


def extract_values(extract: Mapping[str, str] | Iterable[Extract], shard: ShardId) -> dict[str, str | None]:
    """Extract column (lower-cased) -> the value it gets for this shard: `extract` maps what
    is extracted (source, schema, table) to the column, or is the route's `Extract`s."""
    return extracted(extract, shard.parts())


def project(
    shard: ShardId,
    shard_table: Table,
    target: Table,
    extract: Mapping[str, str] | Iterable[Extract],
    flavor: str = "mariadb",
) -> Projection:
    """How to read `shard_table` as rows of `target`. Raises ProjectionError naming
    the shard and column when a value of the shard may not fit the target column."""
    fixed = extract_values(extract, shard)
    types = ColumnTypes(Flavor.parse(flavor))
    names, kinds, select, missing = [], [], [], []
    for column in writable(target):
        kind = transport(column.type)
        alias = quote_identifier(column.name)
        mine = shard_table.column(column.name)
        if column.key in fixed:
            value = fixed[column.key]
            expr = quote_string(value) if value is not None else "NULL"
        elif mine is not None and mine.generated is None:
            _check_fits(shard, mine, column, types)
            expr = _read(quote_identifier(mine.name), kind, mine.type)
        else:
            expr = _default_value(shard, column, kind)
            missing.append(column.name)
        names.append(column.name)
        kinds.append(kind)
        select.append(f"{expr} AS {alias}")
    return Projection(shard, tuple(names), tuple(kinds), tuple(select), tuple(missing))


def _check_fits(shard: ShardId, mine: Column, target: Column, types: ColumnTypes) -> None:
    ours, theirs = mine.type, target.type
    if ours.is_character and theirs.is_character and theirs.charset in (None, "utf8mb4", ours.charset):
        # values convert to the target's character set on insert; to utf8mb4 without loss
        ours = replace(ours, charset=None, collation=None)
        theirs = replace(theirs, charset=None, collation=None)
    if not types.leq(ours, theirs):
        raise ProjectionError(
            f"shard {shard}: column {mine.name} is {render_type(mine.type)}, which does not fit the "
            f"downstream column {target.name} {render_type(target.type)} (its values could change)"
        )
    if mine.nullable and not target.nullable:
        raise ProjectionError(
            f"shard {shard}: column {mine.name} may be NULL, the downstream column {target.name} is NOT NULL"
        )


def _default_value(shard: ShardId, column: Column, kind: str) -> str:
    """The joined default of a column the shard lacks, evaluated by the shard's server
    (a session in UTC, as the downstream's)."""
    if column.default is None or column.default.is_null:
        if not column.nullable:
            raise ProjectionError(
                f"shard {shard} has no column {column.name}, which is NOT NULL without a default downstream"
            )
        return "NULL"
    return _read(f"({column.default.sql})", kind, None)


# -- keys -------------------------------------------------------------------------------
def unique_keys(target: Table) -> list[Index]:
    return [ix for ix in target.indexes if ix.kind in (IndexKind.PRIMARY, IndexKind.UNIQUE)]


def key_text(index: Index, shard_table: Table, target: Table, fixed: Mapping[str, str]) -> str:
    """SQL giving one text per row, equal for two rows exactly when `index` of the
    target would hold them as duplicates; NULL when a part is NULL (unique keys let
    NULLs repeat)."""
    parts = []
    for part in index.parts:
        column = target.column(part.column)
        if column is None or part.column.startswith("("):
            raise ProjectionError(
                f"key {index.name} of {target.name} is on an expression; cannot compare keys"
            )
        if column.key in fixed:
            value = fixed[column.key]
            expr = quote_string(value) if value is not None else "NULL"
        elif shard_table.column(column.name) is None:
            expr = f"({column.default.sql})" if column.default is not None else "NULL"
        else:
            expr = quote_identifier(shard_table.column(column.name).name)
        parts.append(f"HEX({_key_part(expr, column.type, part.length, target)})")
    return "CONCAT(" + ", ':', ".join(parts) + ")" if len(parts) > 1 else parts[0]


def _key_part(expr: str, ctype: ColumnType, length: int | None, target: Table) -> str:
    if length is not None:
        expr = f"LEFT({expr}, {length})"
    family = ctype.family
    if ctype.is_character:
        charset = ctype.charset or target.options.charset or "utf8mb4"
        collation = ctype.collation or target.options.collation
        converted = f"CONVERT({expr} USING {charset})"
        if collation is None:
            return converted
        if "nopad" not in collation and not collation.endswith("_bin"):
            converted = f"CONVERT(TRIM(TRAILING ' ' FROM {expr}) USING {charset})"
        return f"WEIGHT_STRING({converted} COLLATE {collation})"
    if family == Family.DECIMAL:
        return f"CAST({expr} AS DECIMAL({ctype.precision},{ctype.scale}))"
    return canonical(expr, ctype)


def canonical(expr: str, ctype: ColumnType) -> str:
    """A column's value as text in the form a column of type `ctype` shows it, so
    a narrower shard column and the joined downstream column render alike."""
    family = ctype.family
    if family == Family.DECIMAL:
        return f"CAST(CAST({expr} AS DECIMAL({ctype.precision},{ctype.scale})) AS CHAR)"
    if family == Family.FLOAT:
        return f"CAST(CAST({expr} AS DOUBLE) AS CHAR)" if ctype.name == "double" else f"CAST({expr} AS CHAR)"
    if family in (Family.DATETIME, Family.TIMESTAMP):
        return f"CAST(CAST({expr} AS DATETIME({ctype.fsp or 0})) AS CHAR)"
    if family == Family.TIME:
        return f"CAST(CAST({expr} AS TIME({ctype.fsp or 0})) AS CHAR)"
    if family == Family.BIT:
        return f"CAST({expr} AS UNSIGNED)"
    if family in (Family.BINARY, Family.SPATIAL):
        return f"HEX({expr})"
    if ctype.is_character:
        return f"CONVERT({expr} USING utf8mb4)"
    return f"CAST({expr} AS CHAR)"


# -- row hashes -------------------------------------------------------------------------
def row_hash(columns: list[tuple[str, ColumnType, bool]]) -> str:
    """SQL for a 60-bit hash of a row (sums of them do not overflow: the server sums
    integers as DECIMAL). `columns`: (quoted expression, joined type, whether the
    expression already has the joined type). Each value is length-prefixed, NULL is
    its own marker, so no two different rows run together into the same text."""
    parts = []
    for expr, ctype, same in columns:
        text = (
            f"CAST({expr} AS CHAR)"
            if same and ctype.family not in _ALWAYS_CANONICAL
            else canonical(expr, ctype)
        )
        parts.append(f"IFNULL(CONCAT(LENGTH({text}), ':', {text}), 'N')")
    return f"CAST(CONV(SUBSTR(MD5(CONCAT({', '.join(parts)})), 1, 15), 16, 10) AS UNSIGNED)"


# These hash through canonical() on both sides even when the shard has the joined type:
# a FLOAT shard column must hash as the DOUBLE it becomes downstream, binary values need
# not be valid text, and BIT's plain text is its bytes.
_ALWAYS_CANONICAL = frozenset({Family.FLOAT, Family.BINARY, Family.SPATIAL, Family.BIT})
