"""Tables as MariaDB has them: the oracle compares what MariaDB reports, never what the
product computes. A table the product says a shard or the downstream table has (its
CREATE TABLE text, from `shardmerge plan --json`) is created on the same server, in the
story's database (so it takes the same defaults the real one took), read back with
SHOW CREATE TABLE and dropped; what the server fills in (character sets, collations, the
engine, a key's name) is then the server's, as in the real table.
"""

from __future__ import annotations

import functools
import re
from dataclasses import replace

import pymysql

from lattice import parse_table
from lattice.model import Table
from lattice.sqltext import quote_identifier
from tests.fuzz.rows import run

SCRATCH = "fz_seen"  # the name the product's tables are made under
_NAME = re.compile(r"^\s*CREATE TABLE\s+(`(?:[^`]|``)+`(\s*\.\s*`(?:[^`]|``)+`)?|\S+)")


class Refused(Exception):
    """MariaDB refused the product's CREATE TABLE: the product believes in a table no
    server can have."""


def show_create(conn, db: str, table: str) -> Table:
    """The table as SHOW CREATE TABLE gives it, parsed back into our model."""
    (row,) = run(conn, f"SHOW CREATE TABLE {quote_identifier(db)}.{quote_identifier(table)}")
    return _parsed(row[1])


@functools.lru_cache(maxsize=4096)
def _parsed(create: str) -> Table:
    # most steps leave most tables as they were: their text comes again (a Table is immutable)
    return parse_table(create)


class Seen:
    """The product's CREATE TABLE texts as made on one server, each once."""

    def __init__(self, conn, db: str):
        self.conn, self.db = conn, db
        self._made: dict[str, Table] = {}

    def __call__(self, create: str) -> Table:
        table = self._made.get(create)
        if table is None:
            table = self._made[create] = self._make(create)
        return table

    def _make(self, create: str) -> Table:
        scratch = f"{quote_identifier(self.db)}.{quote_identifier(SCRATCH)}"
        text, found = _NAME.subn(f"CREATE TABLE {scratch}", create, count=1)
        if not found:
            raise Refused(f"not a CREATE TABLE: {create[:80]}")
        run(self.conn, f"DROP TABLE IF EXISTS {scratch}")
        try:
            run(self.conn, text)
        except pymysql.err.MySQLError as exc:
            raise Refused(f"MariaDB refuses the product's table: {exc.args}: {create}") from exc
        try:
            return show_create(self.conn, self.db, SCRATCH)
        finally:
            run(self.conn, f"DROP TABLE IF EXISTS {scratch}")


def as_chosen(create: str, made: Table, actual: Table) -> Table:
    """`made` (the product's `create` as MariaDB made it) where the text leaves a choice to
    the server, as the server chose in `actual`: a string column naming no character set
    or collation is made in the table's of its day (a later ALTER TABLE ... DEFAULT
    CHARSET does not convert it: MariaDB manual, ALTER TABLE "Character sets"), and a
    table naming no engine or character set takes the server's."""
    lines = create.splitlines()
    open_columns = {
        m.group(1).replace("``", "`").lower()
        for line in lines
        if (m := _COLUMN.match(line))
        and "CHARACTER SET" not in line.upper()
        and "COLLATE" not in line.upper()
    }
    columns = []
    for c in made.columns:
        got = actual.column(c.name)
        if c.key in open_columns and got is not None and c.type.is_character and got.type.is_character:
            c = replace(c, type=replace(c.type, charset=got.type.charset, collation=got.type.collation))
        columns.append(c)
    tail = lines[-1].upper() if lines else ""
    o = made.options
    options = replace(
        o,
        engine=o.engine if "ENGINE=" in tail else actual.options.engine,
        charset=o.charset if "CHARSET=" in tail or "CHARACTER SET" in tail else actual.options.charset,
        collation=o.collation if "CHARSET=" in tail or "COLLATE" in tail else actual.options.collation,
    )
    return replace(made, columns=tuple(columns), options=options)


_COLUMN = re.compile(r"^\s+`((?:[^`]|``)+)`\s")


def same(a: Table, b: Table) -> bool:
    """Equal but for the table's name and the order of its keys and checks (which the
    server shows in the order they were made)."""
    return comparable(a) == comparable(b)


def comparable(t: Table) -> Table:
    return replace(
        t,
        name="",
        indexes=tuple(sorted(t.indexes, key=lambda i: i.key)),
        checks=tuple(sorted(t.checks, key=lambda c: c.key)),
    )
