"""A source's tables as they are at the current binlog position.

The worker applies every DDL of a watched schema to its tracker, so rows are
always read with the columns their table had when they were written (the binlog
may carry no column names at all), and the coordinator gets each shard's schema
after each DDL. Tables are keyed "schema.table".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lattice import (
    AlterTable,
    CreateTable,
    DropDatabase,
    DropTables,
    OtherStatement,
    ParsedDDL,
    RenameTables,
    RenameTo,
    SchemaError,
    Table,
    TableName,
    TruncateTable,
    UnsupportedDDL,
    apply,
    build_table,
    parse,
)


def table_key(schema: str, table: str) -> str:
    return f"{schema}.{table}"


@dataclass
class TrackedDDL:
    """What one statement did to the tracked tables."""

    statement: ParsedDDL
    after: dict[str, Table | None] = field(default_factory=dict)  # key -> table after (None: gone)
    before: dict[str, Table | None] = field(default_factory=dict)  # key -> table before (None: absent)
    renamed: dict[str, str] = field(default_factory=dict)  # old key -> new key
    problem: str | None = None  # the statement could not be followed (names the reason)
    touched: list[str] = field(default_factory=list)  # every key the statement names, in order


class Tracker:
    def __init__(self, tables: dict[str, Table], watches=lambda schema: True, upstream: str = "mariadb"):
        self.tables = dict(tables)
        self.watches = watches  # schema -> bool: is this schema's DDL tracked
        self.upstream = upstream

    def get(self, schema: str, table: str) -> Table | None:
        return self.tables.get(table_key(schema, table))

    def reset(self, tables: dict[str, Table]) -> None:
        self.tables = dict(tables)

    def apply(self, sql: str, default_schema: str | None) -> TrackedDDL:
        statement = parse(sql, default_schema=default_schema)
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
                self._set(result, k, source.evolve(name=statement.name.name))
                return
            self._set(result, k, build_table(statement, upstream=self.upstream))
        elif isinstance(statement, AlterTable):
            k = self._key(statement.name)
            table = self.tables.get(k)
            if table is None:
                if self.watches(statement.name.schema or ""):
                    result.touched.append(k)
                    result.problem = f"ALTER TABLE of {k}, which is not tracked"
                return
            altered = apply(table, statement.changes, upstream=self.upstream)
            rename = next((c.new_name for c in statement.changes if isinstance(c, RenameTo)), None)
            if rename is not None:
                self._set(result, k, None)
                new = self._key(rename.qualified(statement.name.schema))
                result.renamed[k] = new
                if self.watches(rename.schema or statement.name.schema or ""):
                    self._set(result, new, altered.evolve(name=rename.name))
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
                        self._set(result, kn, table.evolve(name=new.name))
                elif self.watches(new.schema or ""):
                    result.touched.append(kn)
                    result.problem = f"RENAME TABLE {old} TO {new}: {old} is not tracked"
        elif isinstance(statement, TruncateTable):
            result.touched.append(self._key(statement.name))
        elif isinstance(statement, DropDatabase):
            prefix = statement.database + "."
            for k in [k for k in self.tables if k.startswith(prefix)]:
                self._set(result, k, None)
