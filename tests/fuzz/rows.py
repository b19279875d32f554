"""Rows through the data path: sample values of a column type, and copying a row the
way the applier does (the row as the shard stored it, read back, inserted downstream
by column name), checked to read back equal.

The scenario tests (`tests/server/test_scenarios_mariadb.py`) and the fuzzer's oracle both
check rows with `check_rows`; the fuzzer also keeps rows downstream with `copy_row`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import pymysql

from tests.fuzz.model import (
    BLOB_CAPACITY,
    INTEGER_BITS,
    MBMAXLEN,
    TEXT_CAPACITY,
    Family,
    Table,
    Type,
    family_of,
)
from tests.fuzz.sql import Statement, quote_identifier, run, run_all

# The widest character each character set holds: a string of them at the column's
# full length is the row that breaks a narrower or smaller-charset column downstream.
# a character of most bytes in the set, and in no smaller set: utf8mb3's '中' is not in latin1
# (whose cp1252 has '€', seed 61360)
_WIDE_CHAR = {"latin1": "é", "ascii": "x", "utf8mb3": "中", "utf8mb4": "😀"}
_BIT = Type("bit")
LONG_TEXT = 300  # characters: "max length" of TEXT and above would only slow the run


def wide_char(charset: str | None) -> str:
    return _WIDE_CHAR.get(charset or "utf8mb4", "x")


def text_chars(t: Type) -> int:
    """How many of its character set's widest characters a TEXT column holds (0 for others)."""
    if getattr(t, "json", False) or t.name not in TEXT_CAPACITY:
        return 0
    return TEXT_CAPACITY[t.name] // MBMAXLEN.get(t.charset or "utf8mb4", 4)


def string_capacity(t: Type) -> int:
    """How many of the charset's widest characters fit the column."""
    if t.name in ("char", "varchar"):
        return t.length or 1
    if t.name not in TEXT_CAPACITY:
        return 60
    return min(LONG_TEXT, text_chars(t))


def sample_values(t: Type) -> list:
    """A typical value and the extremes of the type, all valid for it: the rows that
    would break a narrower downstream column."""
    f = family_of(t)
    if f == Family.INTEGER:
        bits = INTEGER_BITS[t.name]
        return [7, 2**bits - 1, 0] if t.unsigned else [7, 2 ** (bits - 1) - 1, -(2 ** (bits - 1))]
    if f == Family.DECIMAL:
        digits = (t.precision or 10) - (t.scale or 0)
        top = Decimal("9" * digits + ("." + "9" * t.scale if t.scale else "")) if digits else Decimal(0)
        typical = Decimal("1.5") if digits and t.scale else Decimal(1) if digits else Decimal(0)
        return [typical, top, Decimal(0) if t.unsigned else -top]
    if f == Family.FLOAT:
        return [1.5, 3.25e10, -0.125]
    if f == Family.BIT:
        return [1, 2 ** (t.length or 1) - 1]
    if f == Family.STRING:
        n = string_capacity(t)
        if t.name in TEXT_CAPACITY:
            # one byte more than the next smaller TEXT holds: what breaks a narrower one
            smaller = [c for c in TEXT_CAPACITY.values() if c < TEXT_CAPACITY[t.name]]
            return ["abc", wide_char(t.charset) * n, "x" * min(TEXT_CAPACITY[t.name], max(smaller, default=0) + 1)]
        # trailing spaces: a CHAR downstream would drop them
        values = ["abc"[:n], wide_char(t.charset) * n, "x" * n]
        return values + (["a" + " " * (n - 1) if n > 1 else " "] if t.name == "varchar" else [])
    if f == Family.BINARY:
        n = t.length or BLOB_CAPACITY.get(t.name, 60)
        n = min(n, LONG_TEXT)
        return [b"ab"[:n], b"\x00\xff" * (n // 2)]
    if f == Family.ENUM:
        return list(t.members)
    if f == Family.SET:
        return [",".join(t.members), "", t.members[-1]] if t.members else [""]
    if f == Family.YEAR:
        return [2024, 1901, 2155]
    if f == Family.DATE:
        return [dt.date(2024, 2, 29), dt.date(9999, 12, 31), dt.date(1000, 1, 1)]
    if f == Family.TIME:
        return [dt.timedelta(hours=12, microseconds=123456), dt.timedelta(hours=838, minutes=59, seconds=59)]
    if f == Family.DATETIME:
        return [
            dt.datetime(2024, 2, 29, 12, 30, 45, 123456),
            dt.datetime(9999, 12, 31, 23, 59, 59),
            dt.datetime(1000, 1, 1),
        ]
    if f == Family.TIMESTAMP:
        # in UTC: both sides run with time_zone '+00:00', as the applier does
        return [
            dt.datetime(2024, 2, 29, 12, 30, 45, 123456),
            dt.datetime(2038, 1, 19, 3, 14, 7),
            dt.datetime(1970, 1, 1, 0, 0, 1),
        ]
    if f == Family.JSON:
        # a long document breaks a VARCHAR or TINYTEXT it is narrowed to
        return ['{"a": [1, 2]}', "null", '"ā😀"', '"' + "x" * (LONG_TEXT - 2) + '"']
    return [None]


def varied(t: Type, value: Any, v: int) -> Any:
    """The typical `value` of `t` made the v-th of its kind (0: itself), as wide as it and
    valid wherever it is: columns of one type in one row then hold different values, so
    a value that reaches another column downstream shows. ENUM, SET and the extremes
    stay as they are (a member in use would keep shards from dropping it)."""
    v %= 8
    f = family_of(t)
    if not v or value is None:
        return value
    if f == Family.INTEGER:
        return 8 if v == 7 else 7 - v  # one digit, as 7: a CHAR(1) it is changed into takes it
    if f in (Family.DECIMAL, Family.FLOAT) and value:
        return value + v
    if f == Family.STRING:
        return chr(ord("a") + v) + value[1:] if value else value
    if f == Family.BINARY:
        return bytes([ord("a") + v]) + value[1:] if value else value
    if f == Family.YEAR:
        return value - v
    if f in (Family.DATE, Family.DATETIME, Family.TIMESTAMP):
        return value - dt.timedelta(days=v)
    if f == Family.TIME:
        return value - dt.timedelta(hours=v)
    if f == Family.JSON:
        return value.replace("2]", f"{2 + v}]") if value.endswith("2]}") else value
    return value


def varied_row(table: Table, row: dict[str, Any]) -> dict[str, Any]:
    """`row` with the j-th written column's value `varied` j times."""
    columns = [c for c in table.columns if c.generated is None and c.name in row]
    return {**row, **{c.name: varied(c.type, row[c.name], j) for j, c in enumerate(columns)}}


def sample_rows(table: Table) -> list[dict[str, Any]]:
    """Rows of the table's written (not generated) columns: the i-th row takes every
    column's i-th sample value, so each extreme appears once; then the row with NULL
    in every nullable column."""
    columns = [c for c in table.columns if c.generated is None]
    samples = [sample_values(c.type) for c in columns]
    if not columns:
        return []
    rows = [
        {c.name: vals[i % len(vals)] for c, vals in zip(columns, samples, strict=True)}
        for i in range(max(len(v) for v in samples))
    ]
    rows.append({c.name: None if c.nullable else vals[0] for c, vals in zip(columns, samples, strict=True)})
    return rows


def same_kind(value: Any, t: Type | None = None) -> Any:
    """A read-back value in one form whatever the column type: BIT comes back as
    bytes, an integer written into it as int."""
    if isinstance(value, bytes) and (t is None or family_of(t) == Family.BIT):
        return int.from_bytes(value, "big") if t is not None else value
    return value


def read_alike(value: Any, got: Any, t: Any, t_got: Any) -> bool:
    """A value of type `t` read back from a column of type `t_got` as it was."""
    if type(value) is dt.date and isinstance(got, dt.datetime):
        # a DATE in the DATETIME that holds it and a TIMESTAMP's values (docs/design.md "Rows no shard vouches for") is its midnight
        value = dt.datetime.combine(value, dt.time())
    return same_value(same_kind(value, t), same_kind(got, t_got))


def same_value(a: Any, b: Any) -> bool:
    """Equal after the documented conversion: a value keeps its meaning through a
    widened type (int to bigint, decimal scale, bit as bytes or int, a number into a
    string column)."""
    if a == b:
        return True
    if a is None or b is None:
        return False
    if (isinstance(a, bytes) and isinstance(b, int)) or (isinstance(b, bytes) and isinstance(a, int)):
        return same_kind(a, _BIT) == same_kind(b, _BIT)
    try:
        return Decimal(str(a)) == Decimal(str(b))
    except (InvalidOperation, ValueError):
        pass
    if isinstance(a, str) and isinstance(b, str):
        # a zero date comes back as text, with the column's fractional digits
        zero = re.compile(r"0000-00-00( 00:00:00(\.0+)?)?")
        return bool(zero.fullmatch(a) and zero.fullmatch(b))  # (else: a CHAR dropped spaces, ...)
    return str(a) == str(b)


@dataclass(frozen=True)
class Copied:
    """A row as the shard stored it and as the downstream table gave it back."""

    stored: dict[str, Any]
    downstream: dict[str, Any]


class RowRefused(Exception):
    """The downstream table refused a row the shard accepted (`code`: the server's
    error), or changed it (`code` 0)."""

    def __init__(self, message: str, code: int = 0):
        super().__init__(message)
        self.code = code


def store_row(
    conn, table: str, row: dict[str, Any], read_back: Sequence[str], key: Sequence[str] = ()
) -> dict[str, Any]:
    """Insert `row` into `table` (quoted name) and read the stored row back, by `key`
    (columns whose values the row gives exactly), or as the table's only row when no
    key is given (inside a transaction that emptied the table first, rolled back
    after). Raises pymysql's error when the table refuses the row."""
    _, (found,) = run_all(conn, store_statements(table, row, read_back, key))
    return dict(zip(read_back, found, strict=True))


def store_statements(
    table: str, row: dict[str, Any], read_back: Sequence[str], key: Sequence[str] = ()
) -> list[Statement]:
    """`store_row`'s INSERT and SELECT."""
    names = list(row)
    columns = ", ".join(quote_identifier(n) for n in names)
    marks = ", ".join(["%s"] * len(names))
    wanted = ", ".join(quote_identifier(n) for n in read_back)
    where = " AND ".join(f"{quote_identifier(n)} = %s" for n in key) or "TRUE"
    return [
        (f"INSERT INTO {table} ({columns}) VALUES ({marks})", [row[n] for n in names]),
        (f"SELECT {wanted} FROM {table} WHERE {where}", [row[n] for n in key]),
    ]


def stored_alone(conn, table: str, row: dict[str, Any], read_back: Sequence[str]) -> dict[str, Any]:
    """`row` stored and read back as the only row of `table`, which keeps nothing (a
    transaction emptying it first, rolled back after). Raises pymysql's error when the
    table refuses the row."""
    statements = [("START TRANSACTION", None), (f"DELETE FROM {table}", None)]
    statements += [*store_statements(table, row, read_back), ("ROLLBACK", None)]
    try:
        (found,) = run_all(conn, statements)[3]
    except pymysql.err.MySQLError:
        run(conn, "ROLLBACK")
        raise
    return dict(zip(read_back, found, strict=True))


def probe_row(
    up, down, upstream_table: str, target: str, row: dict[str, Any], shard: Table, downstream: Table
) -> Copied | None:
    """One row through both tables, neither keeping it (each in a rolled-back
    transaction, emptied first): None when the shard refuses it (not a row of this
    shard); RowRefused when the downstream refuses it or reads it back otherwise."""
    written = [c.name for c in shard.columns if c.generated is None]
    try:
        stored = stored_alone(up, upstream_table, row, written)
    except pymysql.err.MySQLError:
        return None
    return copy_row(down, target, stored, downstream, shard, alone=True)


def copy_row(
    down,
    target: str,
    stored: dict[str, Any],
    downstream: Table,
    shard: Table,
    clear: Sequence[str] = (),
    key: Sequence[str] = (),
    alone: bool = False,
) -> Copied:
    """Write a stored shard row downstream by column name, as the applier does (and
    NULL into `clear`, the old names of renames this shard finished, as the daemon
    does), then check it reads back equal; `alone`: as `stored_alone`, kept nowhere."""
    row = dict(stored)
    for name in clear:
        if downstream.column(name) is not None and name not in row:
            row[name] = None
    try:
        if alone:
            again = stored_alone(down, target, row, list(stored))
        else:
            again = store_row(down, target, row, list(stored), key)
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else -1
        raise RowRefused(f"downstream refused {_show(stored)}: {exc.args}", code) from exc
    for name, value in stored.items():
        column = shard.column(name)
        t = column.type if column is not None else None
        if not read_alike(value, again[name], t, t):
            raise RowRefused(f"column {name}: the shard stored {value!r}, downstream {again[name]!r}")
    return Copied(stored, again)


def _show(row: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in row.items()) + "}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_rows(up, down, upstream_table: str, shard: Table, target: str, downstream: Table) -> int:
    """Every sample row the shard's table accepts goes into the downstream table and
    reads back equal; returns how many were checked, raises RowRefused otherwise."""
    checked = 0
    for row in sample_rows(shard):
        if probe_row(up, down, upstream_table, target, row, shard, downstream) is not None:
            checked += 1
    return checked
