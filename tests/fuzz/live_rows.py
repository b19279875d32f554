"""Rows for a shard's table as it is now, for the live stories' writers (`tests/live_stories.py`):
each column's value one of `rows.sample_values` (the typical one varied, or an extreme), NULL now
and then where the column takes it; and in the columns of a UNIQUE key a value made from the
row's id, which no other row of any shard has (ids are apart across shards), so rows of two
shards never meet in a UNIQUE key downstream, even without extract columns."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any

from pymysql.converters import escape_item

from lattice.model import INTEGER_BITS, ColumnType, Family, IndexKind, Table, key
from tests.fuzz.rows import sample_values, varied

NULL_SHARE = 0.15  # of the values of a nullable column


def written_columns(table: Table) -> list:
    """The columns a row gives: all but generated ones and the primary key's `id`."""
    return [c for c in table.columns if c.generated is None and c.key != "id"]


def unique_columns(table: Table) -> set[str]:
    return {column for ix in table.indexes if ix.kind == IndexKind.UNIQUE for column in ix.columns}


def keyed_by_id(table: Table) -> bool:
    """The writers' rows are told apart by `id`: the table's primary key is that column."""
    pk = table.primary_key
    return pk is not None and tuple(pk.columns) == (key("id"),)


def unique_value(t: ColumnType, n: int) -> Any:
    """A value of `t` made from `n` (> 0) that no other n gives, or None when `t` has too few."""
    f = t.family
    if f == Family.INTEGER:
        top = 2 ** INTEGER_BITS[t.name] - 1 if t.unsigned else 2 ** (INTEGER_BITS[t.name] - 1) - 1
        return n if n <= top else None
    if f == Family.DECIMAL:
        return Decimal(n) if n < 10 ** ((t.precision or 10) - (t.scale or 0)) else None
    if f in (Family.STRING, Family.BINARY) and t.name in ("char", "varchar", "binary", "varbinary"):
        text = f"u{n}"
        if len(text) > (t.length or 1):
            return None
        return text.encode() if f == Family.BINARY else text
    if f == Family.DATE:
        return dt.date(2000, 1, 1) + dt.timedelta(days=n)
    if f in (Family.DATETIME, Family.TIMESTAMP):
        return dt.datetime(2001, 1, 1) + dt.timedelta(seconds=n)
    return None


def column_value(r: random.Random, t: ColumnType, nullable: bool) -> Any:
    if nullable and r.random() < NULL_SHARE:
        return None
    samples = sample_values(t)
    i = r.randrange(len(samples))
    return varied(t, samples[i], r.randint(0, 7)) if i == 0 else samples[i]


def row_literals(r: random.Random, table: Table, row_id: int | None) -> dict[str, str]:
    """A row's values as SQL literals by column name; `row_id` None: an update's values,
    which leave the columns of UNIQUE keys as they are."""
    unique = unique_columns(table)
    out: dict[str, str] = {}
    for c in written_columns(table):
        if c.key in unique:
            if row_id is None:
                continue
            value = unique_value(c.type, row_id)
            if value is None:
                value = None if c.nullable else sample_values(c.type)[0]
        else:
            value = column_value(r, c.type, c.nullable)
        out[c.name] = escape_item(value, "utf8mb4")
    return out
