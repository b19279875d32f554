"""MariaDB's hash keys: a UNIQUE key too long for a B-tree (`limits.btree_too_long`), or
written USING HASH, is checked through a hash of its values, kept in a hidden column
(`DB_ROW_HASH_1`, …) after the table's columns. SHOW CREATE TABLE shows none of those
columns, yet the binlog's rows carry them: a row event of such a table has one column more
per hash key than the table, which decoding must read past.

The server decides again at every ALTER TABLE: a key widened past the limit becomes a hash
key, one narrowed back a B-tree, and a USING HASH written for a key a B-tree holds is
forgotten (`apply.apply_changes`)."""

from __future__ import annotations

from dataclasses import replace

from lattice.limits import btree_too_long
from lattice.model import Column, ColumnType, Family, Generated, Index, IndexKind, Table

_HASH_TYPE = ColumnType(Family.INTEGER, "bigint")


def hash_keys(table: Table) -> tuple[Index, ...]:
    """The table's UNIQUE keys MariaDB keeps as hashes, in the table's order."""
    columns = table.column_map
    return tuple(
        i for i in table.indexes if i.kind == IndexKind.UNIQUE and (i.hashed or btree_too_long(i, columns))
    )


def row_image(table: Table) -> Table:
    """The table as a MariaDB row event holds it: its columns, then one generated column
    per hash key (generated: read from the event and left out, like the table's own)."""
    count = len(hash_keys(table))
    if not count:
        return table
    hidden = tuple(
        Column(f"DB_ROW_HASH_{n}", _HASH_TYPE, generated=Generated("hash", stored=False))
        for n in range(1, count + 1)
    )
    return replace(table, columns=(*table.columns, *hidden))
