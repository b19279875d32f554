"""DDL statements as data: `parse_ddl` turns one SQL statement into a typed statement
whose ALTER specs are primitive changes (`lattice.apply` applies them to a Table).

Nothing is dropped unseen: a statement is a table DDL we model, an `OtherStatement`
(not about a table's schema: BEGIN, GRANT, CREATE DATABASE ...), or an
`UnsupportedDDL` that names the statement, the reason and the position. Specs that
do not change which rows a table accepts (ALGORITHM=, FORCE, foreign keys,
partitioning) become explicit `Ignored` changes so callers can report them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from sqlglot.tokens import TokenType

from lattice.charsets import canonical_collation
from lattice.definitions import (
    DATABASE_CHARSET,
    CheckSpec,
    ColumnSpec,
    ForeignKeySpec,
    IndexSpec,
    OptionsSpec,
    index_options,
    is_table_option,
    read_charset,
    read_column,
    read_constraint,
    read_index_kind,
    read_table_options,
    starts_constraint,
)
from lattice.flavor import Flavor
from lattice.literals import RawValue, read_value
from lattice.model import IndexKind
from lattice.sqlgroups import depths, group, group_end, split, words_before_group
from lattice.sqltext import Cursor, DDLSyntaxError, describe_position, shorten, tokenize


@dataclass(frozen=True)
class TableName:
    schema: str | None
    name: str

    def qualified(self, default_schema: str | None) -> TableName:
        return self if self.schema is not None else TableName(default_schema, self.name)

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name


# -- primitive changes of one table ----------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Change:
    text: str = ""  # the spec as written, for messages
    offset: int = 0


@dataclass(frozen=True)
class Position:
    first: bool = False
    after: str | None = None


@dataclass(frozen=True, kw_only=True)
class AddColumn(Change):
    spec: ColumnSpec
    position: Position | None = None
    if_not_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class DropColumn(Change):
    name: str
    if_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class ModifyColumn(Change):
    """MODIFY (old_name == new name) and CHANGE (may rename)."""

    old_name: str
    spec: ColumnSpec
    position: Position | None = None
    if_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class RenameColumn(Change):
    old_name: str
    new_name: str
    if_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class SetDefault(Change):
    column: str
    value: RawValue
    if_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class DropDefault(Change):
    column: str
    if_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class AddIndex(Change):
    spec: IndexSpec
    if_not_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class DropIndex(Change):
    name: str
    if_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class DropPrimaryKey(Change):
    pass


@dataclass(frozen=True, kw_only=True)
class RenameIndex(Change):
    old_name: str
    new_name: str
    if_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class AddCheck(Change):
    spec: CheckSpec
    if_not_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class DropCheck(Change):
    name: str
    if_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class DropConstraint(Change):
    """DROP CONSTRAINT: a check, or a unique key, whichever has the name."""

    name: str
    if_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class AlterCheck(Change):
    name: str
    enforced: bool


@dataclass(frozen=True, kw_only=True)
class SetOptions(Change):
    options: OptionsSpec


@dataclass(frozen=True, kw_only=True)
class ConvertCharset(Change):
    charset: str
    collation: str | None = None


@dataclass(frozen=True, kw_only=True)
class RenameTo(Change):
    new_name: TableName


@dataclass(frozen=True, kw_only=True)
class Ignored(Change):
    reason: str


@dataclass(frozen=True, kw_only=True)
class AddForeignKey(Ignored):
    """ADD FOREIGN KEY. The key itself is not replicated (so this is an Ignored change
    for callers that report those), but the index the server makes for it is real."""

    spec: ForeignKeySpec
    if_not_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class DropForeignKey(Ignored):
    """DROP FOREIGN KEY: not replicated, but the table's foreign keys are followed."""

    name: str
    if_exists: bool = False


# -- statements ------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Statement:
    sql: str


@dataclass(frozen=True, kw_only=True)
class CreateTable(Statement):
    name: TableName
    columns: tuple[ColumnSpec, ...] = ()
    constraints: tuple[IndexSpec | CheckSpec, ...] = ()
    foreign_keys: tuple[ForeignKeySpec, ...] = ()  # not replicated; their indexes are
    options: OptionsSpec = field(default_factory=OptionsSpec)
    like: TableName | None = None
    if_not_exists: bool = False
    or_replace: bool = False
    ignored: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class AlterTable(Statement):
    name: TableName
    changes: tuple[Change, ...]
    if_exists: bool = False

    @property
    def names_database_charset(self) -> bool:
        """CHARACTER SET DEFAULT: applying it needs the database's character set."""
        return any(
            (isinstance(c, SetOptions) and c.options.charset == DATABASE_CHARSET)
            or (isinstance(c, ConvertCharset) and c.charset == DATABASE_CHARSET)
            for c in self.changes
        )


@dataclass(frozen=True, kw_only=True)
class DropTables(Statement):
    names: tuple[TableName, ...]
    if_exists: bool = False


@dataclass(frozen=True, kw_only=True)
class RenameTables(Statement):
    pairs: tuple[tuple[TableName, TableName], ...]


@dataclass(frozen=True, kw_only=True)
class TruncateTable(Statement):
    name: TableName


@dataclass(frozen=True, kw_only=True)
class DropDatabase(Statement):
    database: str


@dataclass(frozen=True, kw_only=True)
class OtherStatement(Statement):
    """Not about any table's schema (transaction control, users, views, databases)."""

    kind: str


@dataclass(frozen=True, kw_only=True)
class UnsupportedDDL(Statement):
    reason: str
    offset: int | None = None
    tables: tuple[TableName, ...] = ()

    @property
    def message(self) -> str:
        return (
            f"unsupported DDL: {self.reason}{describe_position(self.sql, self.offset)}: {shorten(self.sql)}"
        )

    def __str__(self) -> str:
        return self.message


TableStatement = CreateTable | AlterTable | DropTables | RenameTables | TruncateTable | DropDatabase
ParsedDDL = TableStatement | OtherStatement | UnsupportedDDL

_OTHER_OBJECTS = {
    "DATABASE",
    "SCHEMA",
    "VIEW",
    "TRIGGER",
    "PROCEDURE",
    "FUNCTION",
    "EVENT",
    "USER",
    "ROLE",
    "SEQUENCE",
    "SERVER",
    "DEFINER",
    "ALGORITHM",
    "SQL",
    "AGGREGATE",
    "LOGFILE",
    "TABLESPACE",
    "SPATIAL_REF_SYSTEM",
    "RESOURCE",
    "PACKAGE",
    "SYNONYM",
}


def parse_ddl(
    sql: str, *, default_schema: str | None = None, upstream: Flavor | str = Flavor.MARIADB
) -> ParsedDDL:
    """Parse one statement. Never raises for bad SQL: returns UnsupportedDDL instead.
    Unqualified table names stay unqualified unless `default_schema` is given.
    `upstream` (mysql or mariadb) decides which executable comments count."""
    try:
        statement = parse_strict(sql, upstream=upstream)
    except DDLSyntaxError as exc:
        statement = UnsupportedDDL(sql=sql, reason=exc.reason, offset=exc.offset, tables=_guess_tables(sql))
    if default_schema is not None:
        statement = _qualify(statement, default_schema)
    return statement


def parse_strict(sql: str, *, upstream: Flavor | str = Flavor.MARIADB) -> ParsedDDL:
    """Parse one statement, raising DDLSyntaxError where `parse_ddl` would return an
    UnsupportedDDL: for text that must be a statement we model (`apply.parse_table`)."""
    return _parse_statement(Cursor(sql, tokenize(sql, upstream=upstream)), sql)


# -- statement grammar -----------------------------------------------------------------
def _parse_statement(cur: Cursor, sql: str) -> ParsedDDL:
    while cur.accept_type(TokenType.SEMICOLON):
        pass
    # A statement may end in `;`: the specs of ALTER TABLE, RENAME TABLE ... must not see it.
    while cur.end > cur.pos and cur.tokens[cur.end - 1].token_type == TokenType.SEMICOLON:
        cur.end -= 1
    if cur.at_end:
        return OtherStatement(sql=sql, kind="empty")
    first = cur.word()
    if first == "CREATE":
        return _parse_create(cur, sql)
    if first == "ALTER":
        return _parse_alter(cur, sql)
    if first == "DROP":
        return _parse_drop(cur, sql)
    if first == "RENAME":
        cur.next()
        if not cur.accept_any("TABLE", "TABLES"):
            return OtherStatement(sql=sql, kind="RENAME " + (cur.word() or ""))
        pairs = []
        for part in split(cur):
            old = TableName(*part.qualified_name())
            part.expect("TO")
            new = TableName(*part.qualified_name())
            part.expect_end()
            pairs.append((old, new))
        if not pairs:
            raise cur.error("expected a table name")
        return RenameTables(sql=sql, pairs=tuple(pairs))
    if first == "SET" and cur.is_word("STATEMENT", ahead=1):
        return _parse_set_statement(cur, sql)
    if first == "TRUNCATE":
        cur.next()
        cur.accept("TABLE")
        name = TableName(*cur.qualified_name())
        _end(cur)
        return TruncateTable(sql=sql, name=name)
    return OtherStatement(sql=sql, kind=first or "unknown")


# Variables a `SET STATEMENT ... FOR` may set around a DDL without changing the table the DDL
# makes: timeouts, how the server runs the ALTER, checks it skips. Anything else (a character
# set, explicit_defaults_for_timestamp, ...) could change the table, and we cannot tell how.
_HARMLESS_VARIABLES = frozenset(
    {
        "SQL_MODE",
        "MAX_STATEMENT_TIME",
        "MAX_EXECUTION_TIME",
        "LOCK_WAIT_TIMEOUT",
        "INNODB_LOCK_WAIT_TIMEOUT",
        "NET_READ_TIMEOUT",
        "NET_WRITE_TIMEOUT",
        "WAIT_TIMEOUT",
        "ALTER_ALGORITHM",
        "OLD_ALTER_TABLE",
        "FOREIGN_KEY_CHECKS",
        "UNIQUE_CHECKS",
        "INNODB_STRICT_MODE",
        "SQL_NOTES",
        "SQL_WARNINGS",
        "SQL_LOG_BIN",
        "LONG_QUERY_TIME",
        "SLOW_QUERY_LOG",
        "WSREP_OSU_METHOD",
        "WSREP_ON",
        "ROWS_EXAMINED_LIMIT",
        "INNODB_DEFRAGMENT",
        "OPTIMIZER_SWITCH",
    }
)
# sql_mode values that change how the statement's text reads (quotes, `||`, escapes, which
# type REAL is, '' as NULL): we parse every DDL in the default grammar.
_GRAMMAR_MODES = frozenset(
    {
        "ANSI",
        "ANSI_QUOTES",
        "ORACLE",
        "MSSQL",
        "DB2",
        "POSTGRESQL",
        "MAXDB",
        "PIPES_AS_CONCAT",
        "NO_BACKSLASH_ESCAPES",
        "REAL_AS_FLOAT",
        "IGNORE_SPACE",
        "HIGH_NOT_PRECEDENCE",
        "EMPTY_STRING_IS_NULL",
    }
)


def _parse_set_statement(cur: Cursor, sql: str) -> ParsedDDL:
    """`SET STATEMENT var = value [, ...] FOR <statement>` is the statement, run with those
    variables: the statement when they cannot change the table it makes, else unsupported
    naming the variable (a shard whose DDL we read wrongly would be worse than a paused one)."""
    cur.expect("SET", "STATEMENT")
    for_at = next(
        (i for i, _, depth in depths(cur) if depth == 0 and cur.is_word("FOR", ahead=i - cur.pos)), None
    )
    if for_at is None:
        raise cur.error("expected FOR and a statement after SET STATEMENT's variables")
    settings = Cursor(sql, cur.tokens, cur.pos, for_at)
    inner = _parse_statement(Cursor(sql, cur.tokens, for_at + 1, cur.end), sql)
    if not isinstance(inner, TableStatement):
        return inner
    for part in split(settings):
        at = part.offset()
        variable = part.identifier("a variable name").upper()
        part.expect_type(TokenType.EQ, "=")
        value = part.sql[part.offset() : part.tokens[part.end - 1].end + 1] if not part.at_end else ""
        problem = _variable_problem(variable, value)
        if problem:
            return UnsupportedDDL(sql=sql, reason=problem, offset=at, tables=_statement_tables(inner))
    return inner


def _variable_problem(variable: str, value: str) -> str | None:
    if variable not in _HARMLESS_VARIABLES:
        return (
            f"SET STATEMENT {variable.lower()} may change the table this DDL makes, and shardmerge "
            "cannot follow it; run the DDL without it, or tell shardmerge the shard's table as it "
            "is now (shardctl set-schema)"
        )
    if variable == "SQL_MODE":
        modes = {m.strip().upper() for m in value.strip("'\"").split(",")}
        grammar = sorted(modes & _GRAMMAR_MODES)
        if grammar:
            return (
                f"SET STATEMENT sql_mode with {', '.join(grammar)} changes how the DDL reads, and "
                "shardmerge reads DDL in the default grammar; run the DDL without it, or tell "
                "shardmerge the shard's table as it is now (shardctl set-schema)"
            )
    return None


def _statement_tables(statement: TableStatement) -> tuple[TableName, ...]:
    if isinstance(statement, DropTables):
        return statement.names
    if isinstance(statement, RenameTables):
        return tuple(name for pair in statement.pairs for name in pair)
    if isinstance(statement, DropDatabase):
        return ()
    return (statement.name,)


def _merged_options(first: OptionsSpec, then: OptionsSpec) -> OptionsSpec:
    return OptionsSpec(
        engine=then.engine or first.engine,
        charset=then.charset or first.charset,
        collation=then.collation or first.collation,
        comment=then.comment if then.comment is not None else first.comment,
        ignored=first.ignored + then.ignored,
    )


def _end(cur: Cursor) -> None:
    cur.accept_type(TokenType.SEMICOLON)
    cur.expect_end()


def _parse_create(cur: Cursor, sql: str) -> ParsedDDL:
    cur.expect("CREATE")
    or_replace = cur.accept("OR", "REPLACE")
    if cur.accept("TEMPORARY"):
        return OtherStatement(sql=sql, kind="CREATE TEMPORARY TABLE")
    index_kind = read_index_kind(cur)
    cur.accept_any("ONLINE", "OFFLINE")
    if cur.accept("INDEX"):
        return _parse_create_index(cur, sql, index_kind or IndexKind.PLAIN, or_replace)
    if index_kind is not None:
        raise cur.error("expected INDEX")
    if not cur.accept("TABLE"):
        return OtherStatement(sql=sql, kind="CREATE " + (cur.word() or ""))
    if_not_exists = cur.accept("IF", "NOT", "EXISTS")
    name = TableName(*cur.qualified_name())
    if cur.accept("LIKE") or (cur.is_type(TokenType.L_PAREN) and cur.is_word("LIKE", ahead=1)):
        if cur.accept_type(TokenType.L_PAREN):
            cur.expect("LIKE")
        like = TableName(*cur.qualified_name())
        return CreateTable(sql=sql, name=name, like=like, if_not_exists=if_not_exists, or_replace=or_replace)
    if not cur.is_type(TokenType.L_PAREN):
        raise cur.error("CREATE TABLE without a column list (CREATE TABLE ... SELECT) is not supported")
    body = group(cur)
    columns: list[ColumnSpec] = []
    constraints: list[IndexSpec | CheckSpec] = []
    foreign_keys: list[ForeignKeySpec] = []
    ignored: list[str] = []
    for element in split(body):
        if starts_constraint(element):
            item = read_constraint(element)
            if isinstance(item, ForeignKeySpec):
                ignored.append(f"foreign key {item.name or ''} is not replicated".replace("  ", " "))
                foreign_keys.append(item)
            else:
                constraints.append(item)
        elif element.is_word("PERIOD") and element.is_word("FOR", ahead=1):  # a column may be `period`
            ignored.append(element.text())
            element.skip_to_end()
        else:
            columns.append(read_column(element))
        element.expect_end()
    options = read_table_options(cur)
    # MariaDB writes WITH SYSTEM VERSIONING among the options, before any PARTITION BY;
    # it must be taken before a bare WITH is read as the start of a query.
    if cur.accept("WITH", "SYSTEM", "VERSIONING"):
        ignored.append("WITH SYSTEM VERSIONING")
        options = _merged_options(options, read_table_options(cur))
    ignored.extend(options.ignored)
    if cur.is_word("PARTITION"):
        ignored.append("partitioning is not replicated")
        cur.skip_to_end()
    if cur.accept_any("AS", "SELECT", "IGNORE", "REPLACE", "WITH"):
        raise cur.error("CREATE TABLE ... SELECT is not supported")
    _end(cur)
    if not columns:
        raise DDLSyntaxError("a table needs at least one column", sql, 0)
    return CreateTable(
        sql=sql,
        name=name,
        columns=tuple(columns),
        constraints=tuple(constraints),
        foreign_keys=tuple(foreign_keys),
        options=options,
        if_not_exists=if_not_exists,
        or_replace=or_replace,
        ignored=tuple(ignored),
    )


def _parse_create_index(cur: Cursor, sql: str, kind: IndexKind, or_replace: bool = False) -> AlterTable:
    """CREATE INDEX as the ALTER TABLE ADD INDEX it is; OR REPLACE drops one of that name
    first (MariaDB: the new one comes last among the keys)."""
    offset = cur.offset()
    if_not_exists = cur.accept("IF", "NOT", "EXISTS")
    index_name = cur.identifier("an index name")
    hashed = False
    if cur.accept("USING"):
        hashed = cur.word() == "HASH"
        cur.next()
    cur.expect("ON")
    table = TableName(*cur.qualified_name())
    start = cur.pos
    # Reuse the constraint grammar: `KEY name (parts) options`.
    keyword = {
        IndexKind.UNIQUE: "UNIQUE KEY",
        IndexKind.FULLTEXT: "FULLTEXT KEY",
        IndexKind.SPATIAL: "SPATIAL KEY",
    }.get(kind, "KEY")
    parts_end = group_end(cur)
    rest = Cursor(f"{keyword} `{index_name}` {cur.text(start, parts_end)}")
    spec = read_constraint(rest)
    cur.pos = parts_end
    options = index_options(cur)
    spec = replace(spec, comment=options.comment, hashed=hashed or options.hashed)
    changes: list[Change] = [AddIndex(spec=spec, if_not_exists=if_not_exists, text=sql, offset=offset)]
    if or_replace:
        changes.insert(0, DropIndex(name=index_name, if_exists=True, text=sql, offset=offset))
    changes.extend(_trailing_algorithm_options(cur))
    _end(cur)
    return AlterTable(sql=sql, name=table, changes=tuple(changes))


def _trailing_algorithm_options(cur: Cursor) -> list[Change]:
    ignored: list[Change] = []
    while not cur.at_end and cur.word() in (
        "ALGORITHM",
        "LOCK",
        "USING",
        "COMMENT",
        "KEY_BLOCK_SIZE",
        "VISIBLE",
        "INVISIBLE",
        "WAIT",
        "NOWAIT",
    ):
        start = cur.pos
        cur.next()
        cur.accept_equals()
        if not cur.at_end and cur.peek().token_type != TokenType.SEMICOLON:
            cur.next()
        ignored.append(Ignored(text=cur.text(start, cur.pos), reason="execution option"))
    return ignored


def _parse_drop(cur: Cursor, sql: str) -> ParsedDDL:
    cur.expect("DROP")
    if cur.accept("TEMPORARY"):
        return OtherStatement(sql=sql, kind="DROP TEMPORARY TABLE")
    if cur.accept("INDEX"):
        offset = cur.offset()
        if_exists = cur.accept("IF", "EXISTS")
        index_name = cur.identifier("an index name")
        cur.expect("ON")
        table = TableName(*cur.qualified_name())
        changes: list[Change] = [DropIndex(name=index_name, if_exists=if_exists, text=sql, offset=offset)]
        changes.extend(_trailing_algorithm_options(cur))
        _end(cur)
        return AlterTable(sql=sql, name=table, changes=tuple(changes))
    if cur.accept_any("DATABASE", "SCHEMA"):
        cur.accept("IF", "EXISTS")
        database = cur.identifier("a database name")
        _end(cur)
        return DropDatabase(sql=sql, database=database)
    if not cur.accept_any("TABLE", "TABLES"):
        return OtherStatement(sql=sql, kind="DROP " + (cur.word() or ""))
    if_exists = cur.accept("IF", "EXISTS")
    cur.accept_any("WAIT", "NOWAIT")
    names = []
    for part in split(cur):
        names.append(TableName(*part.qualified_name()))
        part.accept_any("RESTRICT", "CASCADE")
        part.expect_end()
    if not names:
        raise cur.error("expected a table name")
    return DropTables(sql=sql, names=tuple(names), if_exists=if_exists)


def _parse_alter(cur: Cursor, sql: str) -> ParsedDDL:
    cur.expect("ALTER")
    cur.accept_any("ONLINE", "OFFLINE")
    cur.accept("IGNORE")
    if not cur.accept("TABLE"):
        return OtherStatement(sql=sql, kind="ALTER " + (cur.word() or ""))
    if_exists = cur.accept("IF", "EXISTS")
    name = TableName(*cur.qualified_name())
    cur.accept_any("WAIT", "NOWAIT")
    if cur.accept_type(TokenType.SEMICOLON) or cur.at_end:
        return AlterTable(sql=sql, name=name, changes=(), if_exists=if_exists)
    changes: list[Change] = []
    specs = split(cur)
    for spec in specs:
        if spec.is_word("ORDER") and spec.is_word("BY", ahead=1):
            # ORDER BY a, b: its commas are its own (the last specification there is)
            whole = Cursor(spec.sql, spec.tokens, spec.pos, specs[-1].end)
            changes.append(Ignored(reason="no schema effect", text=whole.text(), offset=whole.offset()))
            break
        changes.extend(_parse_spec(spec))
    return AlterTable(sql=sql, name=name, changes=tuple(changes), if_exists=if_exists)


_DESTRUCTIVE_PARTITION_OPS = {"DROP", "TRUNCATE", "EXCHANGE", "DISCARD", "IMPORT"}


def _parse_spec(cur: Cursor) -> list[Change]:
    """One specification of an ALTER TABLE, by its first word (`_CLAUSES`), else table options."""
    start = cur.pos
    meta = {"text": cur.text(), "offset": cur.offset()}
    clause = _CLAUSES.get(cur.word())
    if clause is not None:
        word = cur.word()
        cur.next()
        return clause(cur, word, meta)
    if is_table_option(cur):
        options = read_table_options(cur)
        cur.expect_end()
        return [SetOptions(options=options, **meta)]
    cur.pos = start
    raise cur.error("unknown ALTER TABLE specification")


def _done(cur: Cursor, change: Change) -> list[Change]:
    cur.accept_type(TokenType.SEMICOLON)
    cur.expect_end()
    return [change]


def _add(cur: Cursor, word: str, meta: dict) -> list[Change]:
    if cur.is_word("PARTITION"):
        return [Ignored(reason="partitioning is not replicated", **meta)]
    if cur.is_word("SYSTEM") or cur.is_word("PERIOD"):
        return [Ignored(reason="system versioning is not replicated", **meta)]
    if starts_constraint(cur) or cur.word() in ("INDEX", "KEY"):
        return _add_constraint(cur, meta)
    cur.accept("COLUMN")
    if_not_exists = cur.accept("IF", "NOT", "EXISTS")
    if cur.is_type(TokenType.L_PAREN):  # ADD COLUMN (a INT, b INT, KEY ...)
        changes: list[Change] = []
        for element in split(group(cur)):
            element_meta = {"text": element.text(), "offset": element.offset()}
            if starts_constraint(element):
                changes.extend(_add_constraint(element, element_meta))
            else:
                changes.append(
                    AddColumn(spec=read_column(element), if_not_exists=if_not_exists, **element_meta)
                )
                element.expect_end()
        cur.expect_end()
        return changes
    spec = read_column(cur)
    position = _position(cur)
    return _done(cur, AddColumn(spec=spec, position=position, if_not_exists=if_not_exists, **meta))


def _drop(cur: Cursor, word: str, meta: dict) -> list[Change]:
    if cur.accept("PRIMARY", "KEY"):
        return _done(cur, DropPrimaryKey(**meta))
    if cur.accept_any("INDEX", "KEY"):
        if_exists = cur.accept("IF", "EXISTS")
        return _done(cur, DropIndex(name=cur.identifier("an index name"), if_exists=if_exists, **meta))
    if cur.accept("FOREIGN", "KEY"):
        if_exists = cur.accept("IF", "EXISTS")
        name = cur.identifier("a foreign key name")
        reason = "foreign keys are not replicated"
        return _done(cur, DropForeignKey(name=name, if_exists=if_exists, reason=reason, **meta))
    if cur.accept("CHECK"):
        if_exists = cur.accept("IF", "EXISTS")
        return _done(cur, DropCheck(name=cur.identifier("a check name"), if_exists=if_exists, **meta))
    if cur.accept("CONSTRAINT"):
        if_exists = cur.accept("IF", "EXISTS")
        if cur.accept("PRIMARY", "KEY"):  # MariaDB takes it for DROP PRIMARY KEY
            return _done(cur, DropPrimaryKey(**meta))
        name = cur.identifier("a constraint name")
        return _done(cur, DropConstraint(name=name, if_exists=if_exists, **meta))
    if cur.is_word("PARTITION"):
        raise cur.error("DROP PARTITION deletes rows without row events; not supported")
    if cur.is_word("SYSTEM"):
        return [Ignored(reason="system versioning is not replicated", **meta)]
    cur.accept("COLUMN")
    if_exists = cur.accept("IF", "EXISTS")
    name = cur.identifier("a column name")
    cur.accept_any("RESTRICT", "CASCADE")
    return _done(cur, DropColumn(name=name, if_exists=if_exists, **meta))


def _modify(cur: Cursor, word: str, meta: dict) -> list[Change]:
    """MODIFY, and CHANGE, which names the column anew."""
    cur.accept("COLUMN")
    if_exists = cur.accept("IF", "EXISTS")
    old_name = cur.identifier("a column name")
    spec = read_column(cur, None if word == "CHANGE" else old_name)
    position = _position(cur)
    return _done(
        cur, ModifyColumn(old_name=old_name, spec=spec, position=position, if_exists=if_exists, **meta)
    )


def _rename(cur: Cursor, word: str, meta: dict) -> list[Change]:
    for kinds, made, what in (
        (("COLUMN",), RenameColumn, "a column name"),
        (("INDEX", "KEY"), RenameIndex, "an index name"),
    ):
        if cur.accept_any(*kinds):
            if_exists = cur.accept("IF", "EXISTS")
            old = cur.identifier(what)
            cur.expect("TO")
            new_name = cur.identifier(what)
            return _done(cur, made(old_name=old, new_name=new_name, if_exists=if_exists, **meta))
    cur.accept_any("TO", "AS")
    return _done(cur, RenameTo(new_name=TableName(*cur.qualified_name()), **meta))


def _alter(cur: Cursor, word: str, meta: dict) -> list[Change]:
    if cur.accept_any("CHECK", "CONSTRAINT"):
        name = cur.identifier("a check name")
        enforced = not cur.accept("NOT", "ENFORCED")
        if enforced:
            cur.expect("ENFORCED")
        return _done(cur, AlterCheck(name=name, enforced=enforced, **meta))
    if cur.accept_any("INDEX", "KEY"):
        cur.identifier("an index name")
        cur.skip_to_end()
        return [Ignored(reason="index visibility does not change accepted rows", **meta)]
    cur.accept("COLUMN")
    if_exists = cur.accept("IF", "EXISTS")
    column = cur.identifier("a column name")
    if cur.accept("SET", "DEFAULT"):
        return _done(cur, SetDefault(column=column, value=read_value(cur), if_exists=if_exists, **meta))
    if cur.accept("DROP", "DEFAULT"):
        return _done(cur, DropDefault(column=column, if_exists=if_exists, **meta))
    if cur.accept("SET", "VISIBLE") or cur.accept("SET", "INVISIBLE"):
        return _done(cur, Ignored(reason="column visibility does not change accepted rows", **meta))
    raise cur.error("expected SET DEFAULT or DROP DEFAULT")


def _convert(cur: Cursor, word: str, meta: dict) -> list[Change]:
    cur.expect("TO")
    if not (cur.accept("CHARACTER", "SET") or cur.accept("CHARSET")):
        raise cur.error("expected CHARACTER SET")
    charset = read_charset(cur, of_table=True)
    collation = None
    if cur.accept("COLLATE") and not cur.accept("DEFAULT"):
        collation = canonical_collation(cur.name("a collation"))
    return _done(cur, ConvertCharset(charset=charset, collation=collation, **meta))


def _execution_option(cur: Cursor, word: str, meta: dict) -> list[Change]:
    """ALGORITHM = ..., LOCK = ...: how the server runs the ALTER, not what it makes."""
    cur.accept_equals()
    cur.next()
    return _done(cur, Ignored(reason="execution option", **meta))


def _no_schema_effect(cur: Cursor, word: str, meta: dict) -> list[Change]:
    """FORCE, ORDER BY, partition maintenance, ...: the table's rows and columns stay; but
    not the partition operations that change rows without row events."""
    if word in ("TRUNCATE", "EXCHANGE") or (word in ("DISCARD", "IMPORT") and cur.is_word("PARTITION")):
        cur.pos -= 1  # (the error points at the word)
        raise cur.error(f"{word} PARTITION changes rows without row events; not supported")
    cur.skip_to_end()
    reason = "partitioning is not replicated" if "PARTITION" in meta["text"].upper() else "no schema effect"
    return [Ignored(reason=reason, **meta)]


# an ALTER TABLE specification's parser, by its first word (read past when it is called)
_CLAUSES: dict[str, Callable[[Cursor, str, dict], list[Change]]] = {
    "ADD": _add,
    "DROP": _drop,
    "MODIFY": _modify,
    "CHANGE": _modify,
    "RENAME": _rename,
    "ALTER": _alter,
    "CONVERT": _convert,
    "ALGORITHM": _execution_option,
    "LOCK": _execution_option,
    **dict.fromkeys(
        (
            "FORCE",
            "ENABLE",
            "DISABLE",
            "ORDER",
            "WITH",
            "WITHOUT",
            "DISCARD",
            "IMPORT",
            "REMOVE",
            "COALESCE",
            "REORGANIZE",
            "ANALYZE",
            "CHECK",
            "OPTIMIZE",
            "REBUILD",
            "REPAIR",
            "PARTITION",
            "TRUNCATE",
            "EXCHANGE",
            "UPGRADE",
        ),
        _no_schema_effect,
    ),
}


def _add_constraint(cur: Cursor, meta: dict) -> list[Change]:
    # MariaDB takes IF NOT EXISTS after the key's kind: ADD INDEX IF NOT EXISTS i (a),
    # ADD UNIQUE KEY IF NOT EXISTS, ADD PRIMARY KEY IF NOT EXISTS, ADD CONSTRAINT c UNIQUE
    # IF NOT EXISTS: read without it, as the definition it guards
    at = words_before_group(cur, "IF", "NOT", "EXISTS")
    if at is not None:
        cur = Cursor(cur.sql, cur.tokens[:at] + cur.tokens[at + 3 :], cur.pos, cur.end - 3)
    return [_constraint_change(read_constraint(cur), meta, if_not_exists=at is not None)]


def _constraint_change(
    item: IndexSpec | CheckSpec | ForeignKeySpec, meta: dict, if_not_exists: bool
) -> Change:
    if isinstance(item, IndexSpec):
        return AddIndex(spec=item, if_not_exists=if_not_exists, **meta)
    if isinstance(item, CheckSpec):
        return AddCheck(spec=item, if_not_exists=if_not_exists, **meta)
    return AddForeignKey(
        spec=item, if_not_exists=if_not_exists, reason="foreign keys are not replicated", **meta
    )


def _position(cur: Cursor) -> Position | None:
    if cur.accept("FIRST"):
        return Position(first=True)
    if cur.accept("AFTER"):
        return Position(after=cur.identifier("a column name"))
    return None


# -- helpers -------------------------------------------------------------------------------
def _qualify(statement: ParsedDDL, schema: str) -> ParsedDDL:
    if isinstance(statement, CreateTable):
        like = statement.like.qualified(schema) if statement.like else None
        return replace(statement, name=statement.name.qualified(schema), like=like)
    if isinstance(statement, AlterTable):
        changes = tuple(
            replace(c, new_name=c.new_name.qualified(schema)) if isinstance(c, RenameTo) else c
            for c in statement.changes
        )
        return replace(statement, name=statement.name.qualified(schema), changes=changes)
    if isinstance(statement, DropTables):
        return replace(statement, names=tuple(n.qualified(schema) for n in statement.names))
    if isinstance(statement, RenameTables):
        return replace(
            statement, pairs=tuple((a.qualified(schema), b.qualified(schema)) for a, b in statement.pairs)
        )
    if isinstance(statement, TruncateTable):
        return replace(statement, name=statement.name.qualified(schema))
    if isinstance(statement, UnsupportedDDL):
        return replace(statement, tables=tuple(t.qualified(schema) for t in statement.tables))
    return statement


def _guess_tables(sql: str) -> tuple[TableName, ...]:
    """Best effort: which table an unparseable statement is about, so the caller can
    block the right shard."""
    try:
        cur = Cursor(sql)
    except DDLSyntaxError:
        return ()
    try:
        if cur.accept("ALTER"):
            cur.accept_any("ONLINE", "OFFLINE")
            cur.accept("IGNORE")
            if cur.accept("TABLE"):
                cur.accept("IF", "EXISTS")
                return (TableName(*cur.qualified_name()),)
        elif cur.accept("CREATE"):
            cur.accept("OR", "REPLACE")
            cur.accept_any("UNIQUE", "FULLTEXT", "SPATIAL")
            if cur.accept("TABLE"):
                cur.accept("IF", "NOT", "EXISTS")
                return (TableName(*cur.qualified_name()),)
            if cur.accept("INDEX"):
                while not cur.at_end and not cur.accept("ON"):
                    cur.next()
                return (TableName(*cur.qualified_name()),)
        elif cur.accept("TRUNCATE"):
            cur.accept("TABLE")
            return (TableName(*cur.qualified_name()),)
        elif cur.accept("DROP", "INDEX"):
            while not cur.at_end and not cur.accept("ON"):
                cur.next()
            return (TableName(*cur.qualified_name()),)
    except DDLSyntaxError:
        return ()
    return ()
