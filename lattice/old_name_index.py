"""An index on a pending rename's old column, so the last shard's copy reads only its rows.

The rename procedure (docs/design.md "Renaming columns") re-adds the old name downstream, empty, for the
shards not renamed yet,
and copies it into the new name when the last shard renames: `UPDATE t SET new = old
WHERE old IS NOT NULL`. Without an index on the old column that copy reads the whole
table to find the few rows the late shards wrote meanwhile. The index is built when the
old name comes back (online, rows flowing: see the DDL executor), and dropped before the
old column goes, so that drop stays instant.

It is no part of the schema model (the join knows nothing of it): schema reads leave it
out (`is_old_name_index`), and its statements say IF [NOT] EXISTS, so a recovery may run
them again. MariaDB only: it takes a one-character prefix of any string, blob, JSON or
spatial column and keeps the index through every later change of the column's type
(a key on TEXT shortened to a prefix), where MySQL and TiDB refuse some of them.
"""

from __future__ import annotations

import hashlib

from lattice.flavor import Flavor
from lattice.model import Column, Family, key
from lattice.sqltext import quote_identifier

PREFIX = "__shardmerge_was_"

# families whose key takes a prefix: of one character, all an IS NOT NULL range needs
_PREFIXED = frozenset({Family.STRING, Family.BINARY, Family.JSON, Family.SPATIAL})


def old_name_index(column: str) -> str:
    """The index's name for a column (a digest: any column name, and within 64 characters)."""
    return PREFIX + hashlib.sha1(key(column).encode()).hexdigest()[:16]


def is_old_name_index(name: str) -> bool:
    return name.lower().startswith(PREFIX)


def add_old_name_index(table: str, column: Column, flavor: Flavor) -> str | None:
    """The statement indexing `column` of the (quoted) `table`; None where the flavor has none."""
    if not Flavor.parse(flavor).rules.index_if_not_exists:
        return None
    part = quote_identifier(column.name) + ("(1)" if column.type.family in _PREFIXED else "")
    name = quote_identifier(old_name_index(column.name))
    return f"ALTER TABLE {table} ADD INDEX IF NOT EXISTS {name} ({part})"


def drop_old_name_index(table: str, column: str, flavor: Flavor) -> str | None:
    if not Flavor.parse(flavor).rules.index_if_not_exists:
        return None
    return f"ALTER TABLE {table} DROP INDEX IF EXISTS {quote_identifier(old_name_index(column))}"


def is_old_name_index_statement(statement: str) -> bool:
    """One of the statements above: it changes no column, and may run again."""
    return f"INDEX IF NOT EXISTS `{PREFIX}" in statement or f"INDEX IF EXISTS `{PREFIX}" in statement
