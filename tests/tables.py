"""Tables in the product's model for the tests that check the product itself (the live
stories, the DDL corpus, read_table): read back from SHOW CREATE TABLE, and what differs
between two of them, shown as the oracle shows its own (tests/fuzz/oracle.py)."""

from __future__ import annotations

import functools

from lattice import parse_table
from lattice.model import Table
from lattice.render import render_column, render_index
from lattice.sqltext import quote_identifier
from tests.fuzz import oracle
from tests.fuzz.sql import run


def show_create(conn, db: str, table: str) -> Table:
    """The table as SHOW CREATE TABLE gives it, parsed back into the product's model."""
    (row,) = run(conn, f"SHOW CREATE TABLE {quote_identifier(db)}.{quote_identifier(table)}")
    return _parsed(row[1])


@functools.lru_cache(maxsize=4096)
def _parsed(create: str) -> Table:
    # most reads find a table as it was: its text comes again (a Table is immutable)
    return parse_table(create)


def differences(a: Table, b: Table) -> str:
    return oracle.differences(a, b, _column_sql, _index_sql)


def _column_sql(c) -> str:
    if c is None:
        return "(none)"
    return render_column(c) + (" [partial]" if c.partial else "")


def _index_sql(ix) -> str:
    return "(none)" if ix is None else render_index(ix)
