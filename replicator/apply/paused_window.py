"""The rows a shard wrote while it was paused, read again once it resumes, replayed DDL by DDL.

Upstream, every ALTER the shard ran while paused converted its rows in place (a DECIMAL
made a SET, a NOT NULL column added with its implicit default, a column renamed); the
binlog's row events keep the values as they were written. So the rows of that time go first
into a scratch table downstream, in the meta schema, shaped as the shard's table was when it
paused: each row event is applied there, and each of the shard's DDLs is run there as the
statements that turn its table then into its table after (`lattice.diff`), which convert the
rows the server's way. Rows deleted meanwhile stay as markers, so the deletes reach the
target too. Once the source is read past the point the shard resumed at, the scratch rows,
now in the shard's table as the coordinator accepted it, are merged into the target in one
transaction with the shard's checkpoints and the end of its pause (`merge`).

The scratch table keeps only the shard's primary key (another unique key could make one
row's marker take another's place); a shard without one is replayed row by row as before
(`Daemon._replayed`)."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pymysql

from lattice import (
    Column,
    ColumnType,
    Default,
    Family,
    Index,
    RenameStep,
    Table,
    diff,
    key,
    render_table,
)
from lattice import quote_identifier as q
from replicator.server_rules import server_rules
from replicator.servers import DOWNSTREAM_SQL_MODE
from replicator.shard_id import ShardId
from replicator.source.messages import Change
from replicator.state.positions import ChangeId

DELETED = "__shardmerge_deleted"
_FLAG = Column(DELETED, ColumnType(Family.INTEGER, "tinyint"), nullable=False, default=Default("0"))
# the scratch rows of deleted markers may hold values an ALTER cannot convert (they were gone
# upstream when it ran): the shard's DDLs convert them the lenient way, as outside strict mode
LENIENT = "SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'"
# and the rows themselves go in as the target's are written: a value the scratch table cannot
# hold is refused, not cut. The table is the shard's as tracked, which holds every row its
# binlog has, unless the operator said otherwise (a `binlog skip` of a DDL that widened a
# column upstream: L61, whose rows of the paused time lost all but a character
# of their values); refused, the window fails and the shard pauses again (`Windows._failed`).
STRICT = f"SET {DOWNSTREAM_SQL_MODE}"
# and values their table's checks refuse: MariaDB gives the rows a JSON NOT NULL column is
# added to '', which json_valid refuses, and a row deleted later carries it (L11).
# The scratch table only holds them: the merge into the target checks what it keeps.
UNCHECKED = "SET SESSION check_constraint_checks = 0"


class WindowFailed(Exception):
    """The paused window cannot be replayed (a DDL the scratch table cannot follow)."""


def scratch_table(table: Table) -> Table | None:
    """The shard's table as the scratch holds it: its written columns, its primary key
    only, and the deleted flag; None without a primary key."""
    primary = table.index("PRIMARY")
    if primary is None:
        return None
    columns = tuple(c for c in table.columns if c.generated is None)
    keys = {key(p.column) for p in primary.parts}
    if not keys <= {c.key for c in columns}:
        return None
    return replace(
        table,
        columns=(*columns, _FLAG),
        indexes=(Index(primary.name, primary.kind, primary.parts),),
        checks=(),
    )


class PausedWindow:
    """One resumed shard's rows of its paused time, from `hold` (its first change not applied)
    up to `until` (where its source was read when it resumed)."""

    def __init__(
        self, shard: ShardId, table: Table, hold: ChangeId, until: tuple[int, int], schema: str, flavor
    ):
        scratch = scratch_table(table)
        if scratch is None:
            raise WindowFailed(f"{shard}'s table has no primary key")
        self.shard, self.hold, self.until, self.flavor = shard, hold, until, flavor
        self.table = scratch
        digest = hashlib.sha1(str(shard).encode()).hexdigest()[:16]
        self.name = f"{schema}.__shardmerge_window_{digest}"
        self.last: ChangeId | None = None  # the last change put in the scratch table
        self.last_ddl: ChangeId | None = None
        self.statements: list[tuple[bool, str]] = []  # (lenient, SQL) not run yet (`flush`)

    @property
    def quoted(self) -> str:
        schema, table = self.name.split(".", 1)
        return f"{q(schema)}.{q(table)}"

    def covers(self, cid: ChangeId) -> bool:
        """Read while the shard was paused (and before it resumed)."""
        return cid[:2] < self.until

    def create_sql(self) -> list[str]:
        return [f"DROP TABLE IF EXISTS {self.quoted}", render_table(self.table, self.flavor, name=self.name)]

    @property
    def primary(self) -> tuple[str, ...]:
        return tuple(p.column for p in self.table.index("PRIMARY").parts)

    # -- rows ----------------------------------------------------------------------------------
    def row(self, change: Change) -> None:
        """One row change of the window, applied to the scratch table (when `flush`ed)."""
        if change.op == "I":
            self._put(change.columns, change.values, deleted=False)
        elif change.op == "D":
            self._put(change.before_columns or change.columns, change.before, deleted=True)
        else:
            before = dict(zip(change.before_columns or change.columns, change.before, strict=True))
            after = dict(zip(change.columns, change.values, strict=True))
            if any(_value(before, k) != _value(after, k) for k in self.primary):
                self._put(change.before_columns or change.columns, change.before, deleted=True)
            self._put(change.columns, change.values, deleted=False)
        self.last = change.id

    def _put(self, columns: tuple[str, ...], values: tuple[str, ...], deleted: bool) -> None:
        kept = [
            (c, v)
            for c, v in zip(columns, values, strict=True)
            if self.table.column(c) is not None and c != DELETED
        ]
        names = ", ".join(q(self.table.column(c).name) for c, _ in kept)
        literals = ", ".join(v for _, v in kept)
        flag = "1" if deleted else "0"
        verb = "INSERT" if deleted else "REPLACE"
        tail = f" ON DUPLICATE KEY UPDATE {q(DELETED)} = 1" if deleted else ""
        self.statements.append(
            (False, f"{verb} INTO {self.quoted} ({names}, {q(DELETED)}) VALUES ({literals}, {flag}){tail}")
        )

    # -- the shard's DDLs ----------------------------------------------------------------------
    def alter(
        self, after: Table, renames: tuple[tuple[str, str], ...], recreated: tuple[str, ...], cid: ChangeId
    ):
        """The shard's table became `after`: the scratch table follows, its rows converted."""
        new = scratch_table(after)
        if new is None:
            raise WindowFailed(f"{self.shard}'s table lost its primary key while paused")
        steps = diff(
            self.table,
            new,
            flavor=self.flavor,
            target=self.name,
            renames=[RenameStep(old, new_name, "whole") for old, new_name in renames],
        )
        self.statements.extend((True, step.sql) for step in steps)
        # a column dropped and added again in one statement is new: its rows get its default
        self.statements.extend(
            (True, f"UPDATE {self.quoted} SET {q(c)} = DEFAULT({q(c)})")
            for c in recreated
            if new.column(c) is not None
        )
        self.table = new
        self.last_ddl = cid

    def flush(self, conn: pymysql.connections.Connection) -> None:
        if not self.statements:
            return
        with conn.cursor() as cur:
            if server_rules(self.flavor).check_constraint_switch:
                cur.execute(UNCHECKED)
            mode = None
            for lenient, statement in self.statements:
                if lenient != mode:
                    cur.execute(LENIENT if lenient else STRICT)
                    mode = lenient
                cur.execute(statement)
            cur.execute(STRICT)  # (the connection's own mode, `servers.DOWNSTREAM_SESSION`)
        conn.commit()
        self.statements.clear()

    # -- the merge -----------------------------------------------------------------------------
    def merge_sql(
        self,
        target: str,
        downstream: dict[str, str],
        extract: dict[str, str],
        cleared: tuple[str, ...],
        sole_key: bool = False,
    ) -> list[str]:
        """The scratch rows into the target: the deleted ones deleted (by the shard's key and
        extract columns), the others written over what the target has of them (their columns
        only: what other shards' columns hold stays, as a row's update leaves it). `downstream`:
        the target's columns (key -> name); `extract`: extract column -> literal; `cleared`:
        columns the shard's writes set NULL (a pending rename); `sole_key`: the target's key
        is its only unique one (`TargetTable.sole_key`)."""
        table = ".".join(q(p) for p in target.split(".", 1))
        scratch = self.quoted
        written = [c.name for c in self.table.columns if c.name != DELETED and c.key in downstream]
        # (no aliases: MariaDB resolves a multi-table DELETE's in the default database, of which
        # the meta session has none)
        on = [f"{table}.{q(downstream[key(k)])} <=> {scratch}.{q(k)}" for k in self.primary]
        on += [f"{table}.{q(name)} = {value}" for name, value in extract.items()]
        present = {key(w) for w in written}
        nulls = [downstream[key(c)] for c in cleared if key(c) in downstream and key(c) not in present]
        names = [downstream[key(c)] for c in written] + list(extract) + nulls
        selected = [f"{scratch}.{q(c)}" for c in written] + list(extract.values()) + ["NULL"] * len(nulls)
        joined, kept = " AND ".join(on), f"{scratch}.{q(DELETED)} = 0"
        deletes = f"DELETE {table} FROM {table} JOIN {scratch} ON {joined} WHERE {scratch}.{q(DELETED)} = 1"
        columns = ", ".join(q(n) for n in names)
        insert = f"INSERT INTO {table} ({columns}) SELECT {', '.join(selected)} FROM {scratch}"
        if sole_key:
            updates = ", ".join(f"{q(n)} = VALUES({q(n)})" for n in names)
            return [deletes, f"{insert} WHERE {kept} ON DUPLICATE KEY UPDATE {updates}"]
        # Another unique key: an upsert meeting a row there would write over that row, another
        # shard's maybe, where the applier's statements refuse it. The rows the target has are
        # updated by the shard's key, the others inserted: one meeting another row on a unique
        # key is refused, and the shard pauses again for the operator (`Windows._failed`).
        sets = ", ".join(f"{table}.{q(n)} = {v}" for n, v in zip(names, selected, strict=True))
        return [
            deletes,
            f"UPDATE {table} JOIN {scratch} ON {joined} SET {sets} WHERE {kept}",
            f"{insert} WHERE {kept} AND NOT EXISTS (SELECT 1 FROM {table} WHERE {joined})",
        ]

    def drop_sql(self) -> str:
        return f"DROP TABLE IF EXISTS {self.quoted}"


def _value(row: dict[str, str], name: str) -> str | None:
    k = key(name)
    return next((v for c, v in row.items() if key(c) == k), None)
