"""A source's tables as they are at the current binlog position.

The worker applies every DDL of a watched schema to its tracker, so rows are
always read with the columns their table had when they were written (the binlog
may carry no column names at all), and the coordinator gets each shard's schema
after each DDL. Tables are keyed "schema.table".

It is also where a DDL's meaning is read, once: `TrackedDDL.change_for` turns what
a statement did to one table into the typed `SchemaChange` the rest consumes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from lattice import (
    AddColumn,
    AlterTable,
    CreateTable,
    DropColumn,
    DropDatabase,
    DropTables,
    ModifyColumn,
    OptionsSpec,
    OtherStatement,
    ParsedDDL,
    RenameColumn,
    RenameTables,
    RenameTo,
    SchemaError,
    SetOptions,
    Table,
    TableName,
    TruncateTable,
    UnsupportedDDL,
    apply,
    build_table,
    key,
    parse,
)
from replicator.shard_id import ShardId, table_key
from replicator.source.schema_change import ChangeKind, ColumnMove, ColumnRename, SchemaChange


@dataclass
class TrackedDDL:
    """What one statement did to the tracked tables."""

    statement: ParsedDDL
    after: dict[str, Table | None] = field(default_factory=dict)  # key -> table after (None: gone)
    before: dict[str, Table | None] = field(default_factory=dict)  # key -> table before (None: absent)
    renamed: dict[str, str] = field(default_factory=dict)  # old key -> new key
    problem: str | None = None  # the statement could not be followed (names the reason)
    touched: list[str] = field(default_factory=list)  # every key the statement names, in order

    def changes(self, shard_of: Callable[[str], ShardId | None]) -> list[tuple[str, SchemaChange]]:
        """(key, change) for each table the statement names that is a shard
        (`shard_of` maps a key to its shard id, None when it is not one)."""
        out = []
        for k in self.touched:
            shard = shard_of(k)
            if shard is not None:
                out.append((k, self.change_for(k, shard)))
        return out

    def change_for(self, k: str, shard: ShardId) -> SchemaChange:
        """The statement's net effect on table `k`, which is shard `shard`."""
        sql = self.statement.sql
        before = self.before.get(k)
        if self.problem is not None:
            return SchemaChange(shard, ChangeKind.UNSUPPORTED, sql, before=before, problem=self.problem)
        if k not in self.after:
            kind = ChangeKind.TRUNCATE if isinstance(self.statement, TruncateTable) else ChangeKind.NONE
            return SchemaChange(shard, kind, sql)
        after = self.after[k]
        if after is None:
            return SchemaChange(shard, ChangeKind.DROP, sql, before=before)
        if before is None:
            return SchemaChange(shard, ChangeKind.CREATE, sql, after=after)
        statement = self.statement
        if not isinstance(statement, AlterTable) or k in self.renamed.values():
            # replaced within one statement (a table swap): a new schema, no column history
            return SchemaChange(shard, ChangeKind.ALTER, sql, before=before, after=after)
        return SchemaChange(
            shard,
            ChangeKind.ALTER,
            sql,
            before=before,
            after=after,
            renames=_renames(statement, before, after),
            recreated=_recreated(statement),
            moves=_moves(statement),
            comments=tuple(
                (key(c.spec.column.name), c.spec.column.comment)
                for c in statement.changes
                if isinstance(c, AddColumn | ModifyColumn)
            ),
            options=_options(statement),
        )


class Tracker:
    def __init__(
        self,
        tables: dict[str, Table],
        watches: Callable[[str], bool] = lambda schema: True,
        upstream: str = "mariadb",
        schema_charset: Callable[[str], tuple[str, str | None] | None] = lambda schema: None,
    ):
        self.tables = dict(tables)
        self.watches = watches  # is this schema's DDL tracked
        self.upstream = upstream
        # a database's default character set and collation (None: unknown), which a
        # CREATE TABLE that names none takes
        self.schema_charset = schema_charset

    def get(self, schema: str, table: str) -> Table | None:
        return self.tables.get(table_key(schema, table))

    def reset(self, tables: dict[str, Table]) -> None:
        self.tables = dict(tables)

    def apply(self, sql: str, default_schema: str | None) -> TrackedDDL:
        statement = parse(sql, default_schema=default_schema, upstream=self.upstream)
        result = TrackedDDL(statement)
        if isinstance(statement, OtherStatement):
            return result
        if isinstance(statement, UnsupportedDDL):
            result.touched = [self._key(t) for t in statement.tables]
            result.problem = statement.message
            for k in result.touched:
                result.before[k] = self.tables.get(k)
            return result
        try:
            self._apply(statement, result)
        except (SchemaError, ValueError) as exc:
            result.problem = f"the DDL does not apply to the tracked schema: {exc}"
            for k in _named(statement):
                if k not in result.before:
                    result.before[k] = self.tables.get(k)
                    result.touched.append(k)
        return result

    def _key(self, name: TableName) -> str:
        return table_key(name.schema or "", name.name)

    def _set(self, result: TrackedDDL, k: str, table: Table | None) -> None:
        if k not in result.before:
            result.before[k] = self.tables.get(k)
            result.touched.append(k)
        if table is None:
            self.tables.pop(k, None)
        else:
            self.tables[k] = table
        result.after[k] = table

    def _apply(self, statement: ParsedDDL, result: TrackedDDL) -> None:
        if isinstance(statement, CreateTable):
            k = self._key(statement.name)
            if not self.watches(statement.name.schema or ""):
                return
            if k in self.tables and statement.if_not_exists:
                result.touched.append(k)
                return
            if statement.like is not None:
                source = self.tables.get(self._key(statement.like))
                if source is None:
                    result.touched.append(k)
                    result.problem = f"CREATE TABLE ... LIKE {statement.like}: that table is not tracked"
                    return
                self._set(result, k, source.copied(statement.name.name))
                return
            charset = self.schema_charset(statement.name.schema or "")
            self._set(result, k, build_table(statement, upstream=self.upstream, schema_charset=charset))
        elif isinstance(statement, AlterTable):
            k = self._key(statement.name)
            table = self.tables.get(k)
            if table is None:
                if self.watches(statement.name.schema or ""):
                    result.touched.append(k)
                    result.problem = f"ALTER TABLE of {k}, which is not tracked"
                return
            charset = None
            if statement.names_database_charset:  # (asked of the server only then)
                charset = self.schema_charset(statement.name.schema or "")
            altered = apply(table, statement.changes, upstream=self.upstream, schema_charset=charset)
            rename = next((c.new_name for c in statement.changes if isinstance(c, RenameTo)), None)
            if rename is not None:
                self._set(result, k, None)
                new = self._key(rename.qualified(statement.name.schema))
                result.renamed[k] = new
                if self.watches(rename.schema or statement.name.schema or ""):
                    self._set(result, new, altered.renamed(rename.name))
            else:
                self._set(result, k, altered)
        elif isinstance(statement, DropTables):
            for name in statement.names:
                k = self._key(name)
                if k in self.tables:
                    self._set(result, k, None)
        elif isinstance(statement, RenameTables):
            for old, new in statement.pairs:
                ko, kn = self._key(old), self._key(new)
                table = self.tables.get(ko)
                if table is not None:
                    self._set(result, ko, None)
                    result.renamed[ko] = kn
                    if self.watches(new.schema or ""):
                        self._set(result, kn, table.renamed(new.name))
                elif self.watches(new.schema or ""):
                    result.touched.append(kn)
                    result.problem = f"RENAME TABLE {old} TO {new}: {old} is not tracked"
        elif isinstance(statement, TruncateTable):
            result.touched.append(self._key(statement.name))
        elif isinstance(statement, DropDatabase):
            prefix = statement.database + "."
            for k in [k for k in self.tables if k.startswith(prefix)]:
                self._set(result, k, None)


def change_of(shard: ShardId, table: Table | None, sql: str, upstream: str = "mariadb") -> SchemaChange:
    """What `sql`, run on shard `shard` whose table is `table`, does to it: an
    operator's replacement for a shard's blocked DDL."""
    k = table_key(shard.schema, shard.table)
    tracked = Tracker({k: table} if table is not None else {}, upstream=upstream).apply(sql, shard.schema)
    return tracked.change_for(k, shard)


def _named(statement: ParsedDDL) -> list[str]:
    """The tables a statement names (the shards a failure to follow it concerns)."""
    if isinstance(statement, CreateTable | AlterTable | TruncateTable):
        names = [statement.name]
    elif isinstance(statement, DropTables):
        names = list(statement.names)
    elif isinstance(statement, RenameTables):
        names = [name for pair in statement.pairs for name in pair]
    else:
        names = []
    return [table_key(n.schema or "", n.name) for n in names]


def _renames(statement: AlterTable, before: Table, after: Table) -> tuple[ColumnRename, ...]:
    """The statement's column renames that move values: not one to the column's own name
    (or to it in other case: names are case-insensitive), nor one of a generated column,
    whose values are computed, never written (docs/design.md "Generated columns": it is one
    dropped and one added)."""
    renames = []
    for change in statement.changes:
        if isinstance(change, RenameColumn):
            old, new = change.old_name, change.new_name
        elif isinstance(change, ModifyColumn):
            old, new = change.old_name, change.spec.column.name
        else:
            continue
        columns = (before.column(old), after.column(new))
        if key(old) != key(new) and not any(c is not None and c.generated is not None for c in columns):
            renames.append(ColumnRename(old, new))
    return tuple(renames)


def _recreated(statement: AlterTable) -> tuple[str, ...]:
    dropped, again = set(), []
    for change in statement.changes:
        if isinstance(change, DropColumn):
            dropped.add(key(change.name))
        elif isinstance(change, AddColumn) and key(change.spec.column.name) in dropped:
            again.append(key(change.spec.column.name))
    return tuple(again)


def _moves(statement: AlterTable) -> tuple[ColumnMove, ...]:
    return tuple(
        ColumnMove(key(c.spec.column.name), None if c.position.first else key(c.position.after or ""))
        for c in statement.changes
        if isinstance(c, ModifyColumn) and c.position is not None
    )


def _options(statement: AlterTable) -> OptionsSpec | None:
    """The table options an ALTER sets, its option clauses taken in order."""
    merged = None
    for change in statement.changes:
        if not isinstance(change, SetOptions):
            continue
        spec, base = change.options, merged or OptionsSpec()
        merged = OptionsSpec(
            engine=spec.engine or base.engine,
            charset=spec.charset or base.charset,
            collation=spec.collation or (base.collation if not spec.charset else None),
            comment=spec.comment if spec.comment is not None else base.comment,
        )
    return merged
