"""What one DDL did to one shard: the typed value the tracker makes of a statement,
and everything after the tracker (coordinator, journal, `plan`) consumes. The SQL
text rides along for logs and history only; nothing after the tracker reads it.

The tracker judges a statement by its net effect on each table it names, so a
`RENAME TABLE t TO t_old, t_new TO t` is one change of `t` (its table replaced),
not a shard leaving and another arriving.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from lattice import OptionsSpec, Table
from replicator.shard_id import ShardId


class ChangeKind(StrEnum):
    CREATE = "create"  # a table arrives under the shard's name (CREATE TABLE, a rename into it)
    ALTER = "alter"  # the shard's table changes, or is replaced by another within one statement
    DROP = "drop"  # the shard's table goes (DROP TABLE, DROP DATABASE, a rename away)
    TRUNCATE = "truncate"
    NONE = "none"  # named, but not changed (CREATE TABLE IF NOT EXISTS of an existing table)
    UNSUPPORTED = "unsupported"  # the tracker could not follow the statement: `problem` says why
    UNREADABLE = "unreadable"  # no statement: the shard's rows cannot be read (`problem` says why)
    # a statement the tracker could not follow, read again after a decision set the table it
    # made (`Pin`): `after` is that table; decided already, it goes to no coordinator
    PINNED = "pinned"


@dataclass(frozen=True)
class ColumnRename:
    old: str
    new: str


@dataclass(frozen=True)
class ColumnMove:
    """docs/design.md "Statements that pass through": a column moved with FIRST or AFTER passes through."""

    column: str
    after: str | None  # None: FIRST


@dataclass(frozen=True)
class SchemaChange:
    shard: ShardId
    kind: ChangeKind
    statement: str  # the DDL as read from the binlog (for logs and history)
    before: Table | None = None
    after: Table | None = None
    renames: tuple[ColumnRename, ...] = ()
    # columns the statement dropped and added again (DROP COLUMN b, ADD b INT): new ones,
    # whose existing rows the server gave the new column's default, under an old name
    recreated: tuple[str, ...] = ()
    moves: tuple[ColumnMove, ...] = ()
    comments: tuple[tuple[str, str | None], ...] = ()  # (column, comment) set by ADD/MODIFY/CHANGE
    options: OptionsSpec | None = None  # table options the statement set
    problem: str | None = None
