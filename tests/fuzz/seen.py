"""Tables as MariaDB has them: the oracle compares what MariaDB reports, never what the
product computes. A table the product says a shard or the downstream table has (its
CREATE TABLE text, from `shardmerge plan`) is created on the same server, in the story's
database (so it takes the same defaults the real one took), described by the server
(`model.read`) and dropped; what the server fills in (character sets, collations, the
engine, a key's name) is then the server's, as in the real table.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pymysql

from tests.fuzz import model
from tests.fuzz.model import Table
from tests.fuzz.sql import quote_identifier, run

SCRATCH = "fz_seen"  # the name the product's tables are made under
_NAME = re.compile(r"^\s*CREATE TABLE\s+(`(?:[^`]|``)+`(\s*\.\s*`(?:[^`]|``)+`)?|\S+)")
_COLUMN = re.compile(r"^\s+`((?:[^`]|``)+)`\s")


class Refused(Exception):
    """MariaDB refused the product's CREATE TABLE: the product believes in a table no
    server can have."""


def named(create: str, name: str) -> str:
    """A CREATE TABLE statement for another table name (`name` quoted as it should be)."""
    text, found = _NAME.subn(f"CREATE TABLE {name}", create, count=1)
    if not found:
        raise Refused(f"not a CREATE TABLE: {create[:80]}")
    return text


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
        text = named(create, scratch)
        run(self.conn, f"DROP TABLE IF EXISTS {scratch}")
        try:
            run(self.conn, text)
        except pymysql.err.MySQLError as exc:
            raise Refused(f"MariaDB refuses the product's table: {exc.args}: {create}") from exc
        try:
            return model.read(self.conn, self.db, SCRATCH)
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
