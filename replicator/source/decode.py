"""Rows from the binlog, read with the tracked schema and written as SQL literals.

python-mysql-replication decodes a row with the column list of the table map event
that precedes it. Without full row metadata that list has no names, no signedness
and no character sets (binary bytes then fail to decode as text), so before any
row is read we give the table map our tracked schema (`patch_table_map`). Then
each value is turned into the literal the downstream takes (`Encoder`), undoing
the library's habits: BIT as a string of bits, BINARY(n) without its zero
padding, SET as a Python set, empty SETs and zero dates as None, YEAR 0 as 1900.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from pymysql.converters import escape_string

from lattice import Column, ColumnType, Family, Table, render_type
from replicator.source import field_types as FIELD_TYPE
from replicator.source.fraction import fraction

Literal = str
NULL = "NULL"


class SchemaMismatch(ValueError):
    """The binlog's table has a different shape from the tracked one."""


def patch_table_map(columns: list, table: Table, null_bits: bytes | None = None) -> None:
    """Give the table map event's column objects our names, signedness, character
    sets and ENUM/SET members, so its rows decode right with any row metadata.
    `null_bits`: the event's bitmap of the columns that take NULL, compared with the
    tracked table's (a NULL read into a NOT NULL column it tracks wrongly would be
    written as something else downstream: a TIMESTAMP's current time, live stories
    120046, after a skipped DDL that made the column NULL-able)."""
    if len(columns) != len(table.columns):
        raise SchemaMismatch(
            f"the binlog has {len(columns)} columns for {table.name}, the tracked schema {len(table.columns)}"
        )
    for i, (col, ours) in enumerate(zip(columns, table.columns, strict=True)):
        if col.name and col.name.lower() != ours.name.lower():
            raise SchemaMismatch(
                f"the binlog names column {col.name!r} where the tracked schema has {ours.name!r}"
            )
        t = ours.type
        problem = binlog_type_problem(col, t)
        if problem is None and null_bits is not None and not ours.nullable and _takes_null(null_bits, i):
            problem = f"NULL-able, the tracked schema {_spelled(t)} NOT NULL"
        if problem is not None:
            raise SchemaMismatch(f"the binlog has column {ours.name!r} of {table.name} as {problem}")
        col.name = ours.name
        col.unsigned = t.unsigned
        if t.family == Family.BINARY:
            col.character_set_name = "binary"  # undecodable as text: the library keeps bytes
        elif t.family in (Family.STRING, Family.ENUM, Family.SET, Family.JSON):
            col.character_set_name = t.charset or col.character_set_name or "utf8mb4"
        if t.family == Family.ENUM and not col.enum_values:
            col.enum_values = ["", *t.members]
        elif t.family == Family.SET and not col.set_values:
            col.set_values = list(t.members)


_INTEGERS = {
    FIELD_TYPE.TINY: "tinyint",
    FIELD_TYPE.SHORT: "smallint",
    FIELD_TYPE.INT24: "mediumint",
    FIELD_TYPE.LONG: "int",
    FIELD_TYPE.LONGLONG: "bigint",
}
_TEMPORAL = {
    FIELD_TYPE.TIMESTAMP: Family.TIMESTAMP,
    FIELD_TYPE.TIMESTAMP2: Family.TIMESTAMP,
    FIELD_TYPE.DATETIME: Family.DATETIME,
    FIELD_TYPE.DATETIME2: Family.DATETIME,
    FIELD_TYPE.TIME: Family.TIME,
    FIELD_TYPE.TIME2: Family.TIME,
    FIELD_TYPE.DATE: Family.DATE,
    FIELD_TYPE.NEWDATE: Family.DATE,
    FIELD_TYPE.YEAR: Family.YEAR,
}
_STRINGS = frozenset({Family.STRING, Family.BINARY, Family.OTHER})
_BLOBS = frozenset({Family.STRING, Family.BINARY, Family.JSON})
_FAMILIES = {
    FIELD_TYPE.FLOAT: frozenset({Family.FLOAT}),
    FIELD_TYPE.DOUBLE: frozenset({Family.FLOAT}),
    FIELD_TYPE.DECIMAL: frozenset({Family.DECIMAL}),
    FIELD_TYPE.NEWDECIMAL: frozenset({Family.DECIMAL}),
    FIELD_TYPE.BIT: frozenset({Family.BIT}),
    FIELD_TYPE.ENUM: frozenset({Family.ENUM}),
    FIELD_TYPE.SET: frozenset({Family.SET}),
    FIELD_TYPE.JSON: frozenset({Family.JSON}),
    FIELD_TYPE.GEOMETRY: frozenset({Family.SPATIAL}),
    # (MariaDB's INET6 and UUID are fixed-length strings in the binlog; its JSON a LONGTEXT)
    **dict.fromkeys((FIELD_TYPE.VARCHAR, FIELD_TYPE.VAR_STRING, FIELD_TYPE.STRING), _STRINGS),
    **dict.fromkeys(
        (FIELD_TYPE.TINY_BLOB, FIELD_TYPE.MEDIUM_BLOB, FIELD_TYPE.LONG_BLOB, FIELD_TYPE.BLOB), _BLOBS
    ),
}


def _takes_null(null_bits: bytes, i: int) -> bool:
    return i // 8 < len(null_bits) and bool(null_bits[i // 8] >> (i % 8) & 1)


def binlog_type_problem(col: Any, t: ColumnType) -> str | None:
    """What the table map's column type (its field type and metadata) says that the tracked
    type `t` does not, or None. A tracked schema that has a column of another type than the
    binlog (a DDL skipped by the operator, one we followed wrongly) would have its values
    read and written converted, silently: the shard pauses instead. Only what decides how a
    value is read is compared (a VARCHAR's length is not: a value too long for the column
    downstream is refused there)."""
    code = col.type
    if code in _INTEGERS:
        got, name = _INTEGERS[code], t.name if t.family == Family.INTEGER else None
        return None if got == name else f"{got}, the tracked schema {_spelled(t)}"
    if code in _TEMPORAL:
        family = _TEMPORAL[code]
        fsp = getattr(col, "fsp", None)
        if t.family != family or (fsp is not None and t.fsp is not None and fsp != t.fsp):
            got = f"{family.value}({fsp})" if fsp else family.value
            return f"{got}, the tracked schema {_spelled(t)}"
        return None
    families = _FAMILIES.get(code)
    if families is None:
        return None  # (a type we read as the library does: nothing to compare)
    if t.family not in families:
        return f"{_FIELD_NAMES.get(code, code)}, the tracked schema {_spelled(t)}"
    if code == FIELD_TYPE.NEWDECIMAL and (col.precision, col.decimals) != (t.precision, t.scale):
        return f"decimal({col.precision},{col.decimals}), the tracked schema {_spelled(t)}"
    if code == FIELD_TYPE.BIT and getattr(col, "bits", t.length) != (t.length or 1):
        return f"bit({col.bits}), the tracked schema {_spelled(t)}"
    return None


_FIELD_NAMES = {
    v: k.lower()
    for k, v in vars(FIELD_TYPE).items()
    if k.isupper() and isinstance(v, int) and k not in ("CHAR", "INTERVAL")
}


def _spelled(t: ColumnType) -> str:
    return render_type(t, "mariadb")


# -- literals ----------------------------------------------------------------------------
def _string(value: Any) -> Literal:
    if isinstance(value, bytes):
        return _bytes(value)
    return "'" + escape_string(str(value)) + "'"


def _bytes(value: bytes) -> Literal:
    return "x'" + value.hex() + "'" if value else "''"


def _number(value: Any) -> Literal:
    return str(value)


def _float(value: Any) -> Literal:
    return repr(float(value))


def _datetime(value: dt.datetime, fsp: int | None = None) -> Literal:
    """`fsp`: the column's (its digits written); None: as many as the value needs."""
    if fsp is None:
        return f"'{value.isoformat(sep=' ')}'"
    return f"'{value.strftime('%Y-%m-%d %H:%M:%S')}{fraction(value.microsecond, fsp)}'"


def _date(value: dt.date) -> Literal:
    return f"'{value.isoformat()}'"


def _time(value: dt.timedelta, fsp: int | None = None) -> Literal:
    total = value.days * 86400 + value.seconds
    sign = "-" if total < 0 or (total == 0 and value.days < 0) else ""
    micro = value.microseconds
    if total < 0 and micro:
        total, micro = total + 1, 1_000_000 - micro
    total = abs(total)
    text = f"{sign}{total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}"
    if fsp is not None:
        return f"'{text}{fraction(micro, fsp)}'"
    return f"'{text}.{micro:06d}'" if micro else f"'{text}'"


def _library_time(value: dt.timedelta) -> dt.timedelta:
    """python-mysql-replication reads a negative TIME with a fraction as if the
    fraction counted away from zero: -01:02:03.2 comes back as -01:02:03.8. Undo it
    (the codec in rowcodec.py reads these right; this is for tables it leaves to
    the library)."""
    if value >= dt.timedelta(0) or not value.microseconds:
        return value
    total = -value // dt.timedelta(microseconds=1)
    whole, fraction = divmod(total, 1_000_000)
    return -dt.timedelta(seconds=whole, microseconds=1_000_000 - fraction)


def literal(value: Any) -> Literal:
    """A Python value as a MySQL literal (for values that need no column context)."""
    if value is None:
        return NULL
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, dt.datetime):
        return _datetime(value)
    if isinstance(value, dt.date):
        return _date(value)
    if isinstance(value, dt.timedelta):
        return _time(value)
    if isinstance(value, bytes | bytearray):
        return _bytes(bytes(value))
    if isinstance(value, dict | list):
        return _string(json.dumps(value, separators=(",", ":")))
    return _string(value)


_EPOCH = dt.datetime(1970, 1, 1)
_ZERO = {
    Family.DATE: "'0000-00-00'",
    Family.DATETIME: "'0000-00-00 00:00:00'",
    Family.TIMESTAMP: "'0000-00-00 00:00:00'",
}


def _encoder(column: Column) -> Callable[[Any, str | None], Literal]:
    """One function per column, chosen once per schema: rows are many, columns few."""
    t = column.type
    f = t.family
    if f == Family.BIT:
        return lambda v, src: NULL if v is None else (str(int(v, 2)) if isinstance(v, str) else literal(v))
    if f == Family.BINARY and t.name == "binary":
        width = t.length or 1

        def binary(v: Any, src: str | None) -> Literal:
            if v is None:
                return NULL
            raw = v if isinstance(v, bytes) else str(v).encode()
            return _bytes(raw.ljust(width, b"\0"))  # the binlog drops BINARY(n)'s zero padding

        return binary
    if f == Family.SET:
        members = list(t.members)

        def set_value(v: Any, src: str | None) -> Literal:
            if v is None:
                return "''" if src == "empty set" else NULL
            if isinstance(v, set | frozenset):
                v = ",".join(m for m in members if m in v)
            return _string(v)

        return set_value
    if f == Family.ENUM:
        members = list(t.members)

        def enum_value(v: Any, src: str | None) -> Literal:
            if v is None:
                return NULL
            if isinstance(v, int):
                return _string(members[v - 1]) if 0 < v <= len(members) else "''"
            return _string(v)

        return enum_value
    fsp = t.fsp or 0
    if f == Family.TIME:
        return lambda v, src: NULL if v is None else _time(_library_time(v), fsp)
    if f == Family.YEAR:
        return lambda v, src: (
            NULL if v is None else ("0" if v == 1900 else str(v))
        )  # the library reads 0 as 1900
    if f in _ZERO:
        zero = _ZERO[f] if f == Family.DATE else _ZERO[f][:-1] + fraction(0, fsp) + "'"

        def moment(v: Any, src: str | None) -> Literal:
            if v is None:
                return zero if src and "range" in src else NULL
            if f == Family.TIMESTAMP and v == _EPOCH:  # (the zero TIMESTAMP, read as its seconds)
                return zero
            return _datetime(v, fsp) if isinstance(v, dt.datetime) else literal(v)

        return moment
    if f == Family.FLOAT:
        return lambda v, src: NULL if v is None else _float(v)
    if f in (Family.INTEGER, Family.DECIMAL):
        return lambda v, src: NULL if v is None else _number(v)
    return lambda v, src: literal(v)


class Encoder:
    """Turns decoded rows of one table version into {column: literal}, skipping
    generated columns (the downstream computes them, docs/design.md "Generated columns")."""

    def __init__(self, table: Table):
        self.table = table
        self.columns = [(c.name, _encoder(c)) for c in table.columns if c.generated is None]
        self.names = tuple(name for name, _ in self.columns)

    def encode(
        self, values: dict[str, Any], none_sources: dict[str, str] | None = None
    ) -> dict[str, Literal]:
        sources = none_sources or {}
        out = {}
        for name, fn in self.columns:
            out[name] = fn(values.get(name), sources.get(name))
        return out
