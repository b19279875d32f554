"""docs/design.md "The lattice of compatibility": C(S) ⊆ C(S1 ∨ S2), checked on a real MariaDB. For generated pairs of
shard tables that join, every row a shard's table accepts under STRICT_ALL_TABLES
is accepted by the joined table, with the same stored values. Rows are inserted the
way replication inserts them: the values the shard stored, all columns named."""

from __future__ import annotations

import datetime as dt
import itertools
from decimal import Decimal

import pymysql
import pytest
from hypothesis import HealthCheck, assume, event, given, note, settings
from hypothesis import strategies as st

from lattice import JoinConflict, join, quote_identifier, render_table
from lattice.model import INTEGER_BITS, Column, ColumnType, Family, Table
from tests.strategies import is_valid, related_tables

_counter = itertools.count()
TEXT_ALPHABET = st.sampled_from([*"abcXYZ 09_'\\", "é", "ж", "中", "😀"])


def values(ctype: ColumnType) -> st.SearchStrategy:
    """Values for a column, some of them out of the type's range (the shard refuses those)."""
    f = ctype.family
    if f == Family.INTEGER:
        bits = INTEGER_BITS[ctype.name]
        lo, hi = (0, 2**bits - 1) if ctype.unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        return st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, lo - 1, hi + 1, 0]))
    if f == Family.DECIMAL:
        digits = (ctype.precision or 10) - (ctype.scale or 0)
        bound = Decimal(10) ** digits - 1
        lo = Decimal(0) if ctype.unsigned else -bound
        return st.decimals(lo, bound, places=ctype.scale or 0, allow_nan=False, allow_infinity=False)
    if f == Family.FLOAT:
        return st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, width=32).map(lambda v: round(v, 3))
    if f == Family.BIT:
        return st.integers(0, 2 ** (ctype.length or 1) - 1)
    if f == Family.STRING:
        limit = ctype.length if ctype.length else 40
        return st.text(TEXT_ALPHABET, max_size=limit + 2)
    if f == Family.BINARY:
        return st.binary(max_size=(ctype.length or 20) + 2)
    if f == Family.ENUM:
        return st.sampled_from(list(ctype.members))
    if f == Family.SET:
        return st.lists(st.sampled_from(list(ctype.members)), unique=True).map(",".join)
    if f == Family.YEAR:
        return st.integers(1901, 2155)
    if f == Family.DATE:
        return st.dates(dt.date(1000, 1, 1), dt.date(9999, 12, 31))
    if f == Family.TIME:
        return st.timedeltas(-dt.timedelta(hours=838), dt.timedelta(hours=838))
    if f == Family.DATETIME:
        return st.datetimes(dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31))
    if f == Family.TIMESTAMP:
        return st.datetimes(dt.datetime(1970, 1, 2), dt.datetime(2038, 1, 18))
    if f == Family.JSON:
        return st.sampled_from(['{"a": 1}', "[1, 2]", '"x"', "null", "3.5"])
    raise AssertionError(f"no values for {ctype}")


def comparable(value, ctype: ColumnType):
    if ctype.family == Family.BIT and isinstance(value, bytes):
        return int.from_bytes(value, "big")
    return value


@st.composite
def rows(draw, table: Table) -> list[dict]:
    cols = [c for c in table.columns if c.generated is None and c.name != "id"]
    out = []
    for i in range(draw(st.integers(1, 6))):
        row = {"id": i + 1}
        for c in cols:
            row[c.name] = None if c.nullable and draw(st.integers(0, 4)) == 0 else draw(values(c.type))
        out.append(row)
    return out


@pytest.fixture(scope="module")
def conn(sandbox):
    db = f"prop_{next(_counter)}_{id(object())}"
    inst = sandbox.downstream
    inst.execute(f"CREATE DATABASE `{db}`")
    connection = inst.connect(db)
    with connection.cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES'")
    yield connection
    connection.close()
    inst.execute(f"DROP DATABASE `{db}`")


def create(cur, table: Table, name: str) -> None:
    cur.execute(f"DROP TABLE IF EXISTS `{name}`")
    cur.execute(render_table(table, "mariadb", name=name))


def insert(cur, name: str, row: dict) -> None:
    cols = ", ".join(quote_identifier(c) for c in row)
    marks = ", ".join(["%s"] * len(row))
    cur.execute(f"INSERT INTO `{name}` ({cols}) VALUES ({marks})", list(row.values()))


def read(cur, name: str, columns: list[Column], key: int) -> dict:
    # a FLOAT read as a DOUBLE: the text of a FLOAT with no (M,D) has 6 digits, so 1000.375,
    # stored exactly, read 1000.38 from the join where the shard's FLOAT(7,3) read 1000.375
    names = ", ".join(
        f"{quote_identifier(c.name)} + 0e0" if c.type.family == Family.FLOAT else quote_identifier(c.name)
        for c in columns
    )
    cur.execute(f"SELECT {names} FROM `{name}` WHERE id = %s", (key,))
    found = cur.fetchone()
    assert found is not None, f"row {key} missing from {name}"
    return dict(zip([c.name for c in columns], found, strict=True))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
@given(data=st.data(), tables=related_tables(2, spatial=False))
def test_rows_a_shard_accepts_fit_the_join(conn, data, tables):
    a, b = tables
    assume(is_valid(a) and is_valid(b))
    joined = join(a, b, "mariadb")
    assume(not isinstance(joined, JoinConflict))
    n = next(_counter)
    with conn.cursor() as cur:
        create(cur, joined, f"j{n}")  # must work: the join is a table the server holds
        checked = 0
        for side, shard in (("a", a), ("b", b)):
            create(cur, shard, f"s{n}{side}")
            cur.execute(f"TRUNCATE TABLE `j{n}`")
            columns = [c for c in shard.columns if c.generated is None]
            for row in data.draw(rows(shard), label=f"rows of {side}"):
                try:
                    insert(cur, f"s{n}{side}", row)
                except pymysql.err.MySQLError:
                    continue  # the shard refuses it: not in C(shard)
                stored = read(cur, f"s{n}{side}", columns, row["id"])
                note(f"{side} stored {stored}")
                insert(cur, f"j{n}", stored)  # must be accepted
                again = read(cur, f"j{n}", columns, row["id"])
                for c in columns:
                    assert comparable(again[c.name], c.type) == comparable(stored[c.name], c.type), (
                        f"column {c.name}: shard {shard.column(c.name).type} stored {stored[c.name]!r}, "
                        f"joined {joined.column(c.name).type} stored {again[c.name]!r}"
                    )
                checked += 1
            cur.execute(f"DROP TABLE `s{n}{side}`")
        cur.execute(f"DROP TABLE `j{n}`")
    event(f"rows checked: {min(checked, 5)}{'+' if checked >= 5 else ''}")
    event("widened or partial" if joined != a or joined != b else "equal shards")
