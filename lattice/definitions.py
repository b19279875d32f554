"""The grammar of what goes inside CREATE TABLE and ALTER TABLE: data types, column
definitions with their inline constraints, index and check definitions, and table
options. Each reader consumes tokens from a `Cursor` and returns model pieces or
specs; naming of unnamed indexes and checks happens when a spec meets a table."""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot.tokens import TokenType

from lattice.charsets import (
    canonical_charset,
    canonical_collation,
    charset_of_collation,
    decoded_as_server,
    default_collation,
    mbmaxlen,
)
from lattice.flavor import Flavor
from lattice.literals import DefaultError, RawValue, canonical_default, now_fsp, now_sql, read_value
from lattice.model import (
    BLOB_CAPACITY,
    NULL_DEFAULT,
    SPATIAL_TYPES,
    TEXT_CAPACITY,
    Column,
    ColumnType,
    Family,
    Generated,
    IndexKind,
    IndexPart,
)
from lattice.sqlgroups import group, split
from lattice.sqltext import Cursor, DDLSyntaxError, canonical_expression

_INTEGER_ALIASES = {
    "TINYINT": "tinyint",
    "INT1": "tinyint",
    "BOOL": "tinyint",
    "BOOLEAN": "tinyint",
    "SMALLINT": "smallint",
    "INT2": "smallint",
    "MEDIUMINT": "mediumint",
    "INT3": "mediumint",
    "MIDDLEINT": "mediumint",
    "INT": "int",
    "INTEGER": "int",
    "INT4": "int",
    "BIGINT": "bigint",
    "INT8": "bigint",
}
_DECIMAL_ALIASES = {"DECIMAL", "DEC", "NUMERIC", "FIXED"}
_TEMPORAL = {"TIME": Family.TIME, "DATETIME": Family.DATETIME, "TIMESTAMP": Family.TIMESTAMP}
# Types MariaDB or MySQL know that the lattice treats as opaque singletons.
_OPAQUE = {"INET6", "INET4", "UUID", "VECTOR"}


@dataclass(frozen=True)
class TypeSpec:
    """A parsed data type plus what only the surrounding table can settle: the
    character set and collation when they were not written out."""

    type: ColumnType
    binary_collation: bool = False  # `VARCHAR(10) BINARY`: the _bin collation of the charset
    serial: bool = False  # SERIAL = BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE


# `CHARACTER SET DEFAULT` of a table (or CONVERT TO): the database's character set and
# collation, which only the table's database tells (`apply_changes`'s `schema_charset`)
DATABASE_CHARSET = "(the database's)"


# The engines' names as the server shows them, whatever the spelling written (HEAP is
# MEMORY's old name, MERGE MRG_MyISAM's); others are kept as written.
_ENGINES = ("InnoDB", "MyISAM", "MEMORY", "Aria", "CSV", "ARCHIVE", "MRG_MyISAM", "BLACKHOLE", "SEQUENCE")
_ENGINE_NAMES = {name.upper(): name for name in _ENGINES} | {"HEAP": "MEMORY", "MERGE": "MRG_MyISAM"}


def canonical_engine(name: str) -> str:
    return _ENGINE_NAMES.get(name.upper(), name)


def read_charset(cur: Cursor, *, of_table: bool = False) -> str:
    """A character set name; `DEFAULT`, for a table, DATABASE_CHARSET (a column has no
    such spelling: the server refuses it)."""
    if cur.is_word("DEFAULT"):
        if not of_table:
            raise cur.error("CHARACTER SET DEFAULT is the database's character set, for a table only")
        cur.next()
        return DATABASE_CHARSET
    return canonical_charset(cur.name("a character set"))


def _int_arg(cur: Cursor) -> int:
    return cur.integer("a length")


def _args(cur: Cursor) -> list[int]:
    if not cur.is_type(TokenType.L_PAREN):
        return []
    inner = group(cur)
    values = []
    for part in split(inner):
        values.append(_int_arg(part))
        part.expect_end()
    return values


def _members(cur: Cursor) -> tuple[str, ...]:
    inner = group(cur)
    members = []
    for part in split(inner):
        members.append(_member(part))
        part.expect_end()
    return tuple(members)


def _member(cur: Cursor) -> str:
    """A member, written as a string or as bytes (0xFFFF, x'61', b'1100011'): their bytes
    not UTF-8 are kept as surrogates till the column's character set reads them
    (`settle_column`)."""
    if cur.is_type(TokenType.HEX_STRING) or cur.is_type(TokenType.BIT_STRING):
        value = read_value(cur).value
        data = (
            value
            if isinstance(value, bytes)
            else int(str(value)).to_bytes((int(str(value)).bit_length() + 7) // 8 or 1)
        )
        return data.decode("utf-8", "surrogateescape")
    return cur.string("a member")


def read_type(cur: Cursor) -> TypeSpec:
    start = cur.offset()
    word = cur.word()
    if word is None:
        raise cur.error("expected a data type")
    cur.next()
    # multi-word spellings
    if word == "DOUBLE":
        cur.accept("PRECISION")
    if word == "NATIONAL":
        word = "N" + (cur.accept_any("CHAR", "CHARACTER", "VARCHAR") or "CHAR")
        if word == "NCHARACTER":
            word = "NCHAR"
    if word in ("CHAR", "CHARACTER", "NCHAR") and cur.accept("VARYING"):
        word = "NVARCHAR" if word == "NCHAR" else "VARCHAR"
    elif word == "NCHAR" and cur.accept("VARCHAR"):  # NCHAR VARCHAR(n): MariaDB's NVARCHAR
        word = "NVARCHAR"
    if word == "LONG":
        word = "LONGVARBINARY" if cur.accept("VARBINARY") else "LONGTEXTALIAS"
        cur.accept("VARCHAR")
    if word == "SERIAL":
        return TypeSpec(ColumnType(Family.INTEGER, "bigint", unsigned=True), serial=True)

    ctype: ColumnType
    if word in _INTEGER_ALIASES:
        _args(cur)  # display width: no effect on values
        name = _INTEGER_ALIASES[word]
        ctype = ColumnType(Family.INTEGER, name)
    elif word in _DECIMAL_ALIASES:
        args = _args(cur)
        precision = args[0] if args else 10
        precision = precision or 10  # DECIMAL(0,0) is MariaDB's DECIMAL(10,0)
        scale = args[1] if len(args) > 1 else 0
        ctype = ColumnType(Family.DECIMAL, "decimal", precision=precision, scale=scale)
    elif word in ("FLOAT", "FLOAT4", "DOUBLE", "REAL", "FLOAT8"):
        args = _args(cur)
        name = "float" if word in ("FLOAT", "FLOAT4") else "double"
        precision = scale = None
        if name == "float" and len(args) == 1:
            name = "float" if args[0] <= 24 else "double"
        elif len(args) == 2:
            precision, scale = args
        ctype = ColumnType(Family.FLOAT, name, precision=precision, scale=scale)
    elif word == "BIT":
        args = _args(cur)
        ctype = ColumnType(Family.BIT, "bit", length=(args[0] if args else 1) or 1)  # BIT(0) is BIT(1)
    elif word in ("CHAR", "CHARACTER", "NCHAR", "VARCHAR", "NVARCHAR", "VARCHARACTER"):
        args = _args(cur)
        varying = word in ("VARCHAR", "NVARCHAR", "VARCHARACTER")
        if varying and not args:
            raise cur.error("VARCHAR needs a length")
        length = args[0] if args else 1
        charset = "utf8mb3" if word.startswith("N") else None
        ctype = ColumnType(Family.STRING, "varchar" if varying else "char", length=length, charset=charset)
    elif word in ("TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "LONGTEXTALIAS"):
        args = _args(cur)
        name = "mediumtext" if word == "LONGTEXTALIAS" else word.lower()
        # TEXT(M) is the smallest TEXT type that holds M characters; settled with the charset
        length = args[0] if (args and name == "text") else None
        ctype = ColumnType(Family.STRING, name, length=length)
    elif word in ("BINARY", "VARBINARY"):
        args = _args(cur)
        if word == "VARBINARY" and not args:
            raise cur.error("VARBINARY needs a length")
        ctype = ColumnType(Family.BINARY, word.lower(), length=args[0] if args else 1)
    elif word in ("TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB", "LONGVARBINARY"):
        args = _args(cur)
        name = "mediumblob" if word == "LONGVARBINARY" else word.lower()
        if args and name == "blob":
            name = _smallest(BLOB_CAPACITY, args[0])
        ctype = ColumnType(Family.BINARY, name)
    elif word in ("ENUM", "SET"):
        family = Family.ENUM if word == "ENUM" else Family.SET
        ctype = ColumnType(family, word.lower(), members=_members(cur))
    elif word == "YEAR":
        _args(cur)
        ctype = ColumnType(Family.YEAR, "year")
    elif word == "DATE":
        ctype = ColumnType(Family.DATE, "date")
    elif word in _TEMPORAL:
        args = _args(cur)
        ctype = ColumnType(_TEMPORAL[word], word.lower(), fsp=args[0] if args else 0)
    elif word == "JSON":
        ctype = ColumnType(Family.JSON, "json")
    elif word.lower() in SPATIAL_TYPES:
        ctype = ColumnType(Family.SPATIAL, word.lower())
    elif word in _OPAQUE:
        ctype = ColumnType(Family.OTHER, word.lower())
    else:
        raise DDLSyntaxError(f"unknown data type {word}", cur.sql, start)
    return _type_modifiers(cur, ctype)


def _smallest(capacities: dict[str, int], needed: int) -> str:
    for name, cap in capacities.items():
        if needed <= cap:
            return name
    return next(reversed(capacities))


def _type_modifiers(cur: Cursor, ctype: ColumnType) -> TypeSpec:
    binary_collation = False
    while True:
        w = cur.word()
        if w == "UNSIGNED" and ctype.family in (Family.INTEGER, Family.DECIMAL, Family.FLOAT):
            cur.next()
            ctype = replace(ctype, unsigned=True)
        elif w == "SIGNED" and ctype.family in (Family.INTEGER, Family.DECIMAL, Family.FLOAT):
            cur.next()
        elif w == "ZEROFILL" and ctype.family in (Family.INTEGER, Family.DECIMAL, Family.FLOAT):
            cur.next()
            ctype = replace(ctype, zerofill=True, unsigned=True)  # ZEROFILL implies UNSIGNED
        elif w in ("CHARACTER", "CHARSET") and ctype.is_character:
            cur.next()
            if w == "CHARACTER":
                cur.expect("SET")
            ctype = replace(ctype, charset=read_charset(cur))
        elif w == "COLLATE" and ctype.is_character:
            cur.next()
            ctype = replace(ctype, collation=canonical_collation(cur.name("a collation")))
        elif w == "BINARY" and ctype.is_character:
            cur.next()
            binary_collation = True
        elif w == "BYTE" and ctype.family == Family.STRING:
            cur.next()
            ctype = replace(ctype, charset="binary")
        elif w == "ASCII" and ctype.is_character:
            cur.next()
            ctype = replace(ctype, charset="latin1")
        elif w == "UNICODE" and ctype.is_character:
            cur.next()
            ctype = replace(ctype, charset="ucs2")
        else:
            break
    if ctype.collation and not ctype.charset:
        ctype = replace(ctype, charset=charset_of_collation(ctype.collation))
    return TypeSpec(ctype, binary_collation=binary_collation)


# -- column definitions ------------------------------------------------------------
@dataclass(frozen=True)
class InlineCheck:
    name: str | None
    expression: str
    enforced: bool = True


@dataclass(frozen=True)
class ColumnSpec:
    """A column as written in CREATE/ALTER, before the table settles its character
    set: the column itself plus its inline key and check clauses."""

    column: Column
    binary_collation: bool = False
    primary_key: bool = False
    unique: bool = False
    checks: tuple[InlineCheck, ...] = ()
    raw_default: RawValue | None = None
    explicit_null: bool = False
    ignored: tuple[str, ...] = ()
    offset: int = 0
    # An inline `REFERENCES t (c)`: MariaDB makes it a foreign key (with its index),
    # MySQL 8 parses and drops it.
    references: bool = False


_COLUMN_END = {"FIRST", "AFTER"}


def _column_name(cur: Cursor) -> str:
    """A column's name where it is defined: MariaDB also takes it qualified by its table
    (`t.c`, `db.t.c`, `.c`)."""
    cur.accept_type(TokenType.DOT)
    name = cur.identifier("a column name")
    while cur.accept_type(TokenType.DOT):
        name = cur.identifier("a column name")
    return name


def _settled_member(member: str, charset: str | None) -> str:
    """A member as the column's character set keeps it: bytes written for it read in the
    set; trailing spaces dropped ('b ' is 'b', ' ' is ''), but not in a binary set, where
    a space is a byte like any other."""
    if any("\udc80" <= ch <= "\udcff" for ch in member):
        member = decoded_as_server(member.encode("utf-8", "surrogateescape"), charset)
    return member if charset == "binary" else member.rstrip(" ")


def read_column(cur: Cursor, name: str | None = None) -> ColumnSpec:
    """Read `name type attributes...`; stops before FIRST/AFTER or the end."""
    offset = cur.offset()
    if name is None:
        name = _column_name(cur)
    tspec = read_type(cur)
    ctype = tspec.type
    nullable: bool | None = None
    raw_default: RawValue | None = None
    on_update: str | None = None
    auto_increment = tspec.serial
    generated: Generated | None = None
    comment: str | None = None
    primary = False
    unique = tspec.serial
    checks: list[InlineCheck] = []
    ignored: list[str] = []
    explicit_null = False
    references = False
    if tspec.serial:
        nullable = False

    while not cur.at_end and cur.word() not in _COLUMN_END:
        w = cur.word()
        if cur.accept("NOT", "NULL"):
            nullable = False
        elif cur.accept("NULL"):
            nullable = True
            explicit_null = True
        elif cur.accept("DEFAULT"):
            raw_default = read_value(cur)
        elif cur.accept("ON", "UPDATE"):
            value = read_value(cur)
            if value.kind != "now":
                raise cur.error("ON UPDATE takes CURRENT_TIMESTAMP")
            written = None if value.value is None else int(str(value.value))
            on_update = now_sql(now_fsp(written, ctype.fsp))
        elif cur.accept("AUTO_INCREMENT"):
            auto_increment = True
        elif cur.accept("SERIAL", "DEFAULT", "VALUE"):
            nullable, auto_increment, unique = False, True, True
        elif cur.accept("UNIQUE"):
            cur.accept_any("KEY", "INDEX")
            unique = True
        elif cur.accept("PRIMARY", "KEY") or cur.accept("KEY"):
            primary = True
        elif cur.accept("COMMENT"):
            comment = cur.string("a comment")
        elif w in ("COLLATE", "CHARACTER", "CHARSET") and ctype.is_character:
            ctype = _type_modifiers(cur, ctype).type
        elif w == "GENERATED" or w == "AS":
            if cur.accept("GENERATED"):
                cur.expect("ALWAYS")
            cur.expect("AS")
            if cur.is_word("ROW"):
                raise cur.error("a system-versioned table's own ROW START/END columns are not supported")
            expression = canonical_expression(group(cur).text()).sql
            kind = cur.accept_any("VIRTUAL", "STORED", "PERSISTENT")
            generated = Generated(expression, stored=kind in ("STORED", "PERSISTENT"))
        elif w == "CHECK" or w == "CONSTRAINT":
            check_name = None
            if cur.accept("CONSTRAINT") and cur.word() != "CHECK":
                check_name = cur.identifier("a constraint name")
            cur.expect("CHECK")
            expr = group(cur).text()
            enforced = _read_enforced(cur)
            checks.append(InlineCheck(check_name, expr, enforced))
        elif cur.accept("COLUMN_FORMAT") or cur.accept("STORAGE"):
            cur.next()
        elif cur.accept_any("VISIBLE", "INVISIBLE", "COMPRESSED"):
            ignored.append(w)
        elif cur.accept("SRID"):
            cur.integer("an SRID")
        elif w in ("WITH", "WITHOUT") and cur.is_word("SYSTEM", ahead=1):
            cur.next()
            cur.next()
            cur.expect("VERSIONING")
            ignored.append(f"{w} SYSTEM VERSIONING")
        elif w in ("ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE"):
            cur.next()
            cur.accept_equals()
            cur.string()
        elif w == "REFERENCES":
            _skip_references(cur)
            references = True
            ignored.append("REFERENCES (foreign keys are not replicated)")
        else:
            raise cur.error(f"unexpected column attribute in definition of {name!r}")

    if generated is not None and nullable is None:
        nullable = True
    if nullable is None:
        nullable = not primary
    column = Column(
        name=name,
        type=ctype,
        nullable=nullable,
        default=None,
        on_update=on_update,
        auto_increment=auto_increment,
        generated=generated,
        comment=comment,
    )
    return ColumnSpec(
        column=column,
        binary_collation=tspec.binary_collation,
        primary_key=primary,
        unique=unique,
        checks=tuple(checks),
        raw_default=raw_default,
        explicit_null=explicit_null,
        ignored=tuple(ignored),
        offset=offset,
        references=references,
    )


def settle_column(
    spec: ColumnSpec, table_charset: str | None, table_collation: str | None, upstream: Flavor | str
) -> Column:
    """Give a parsed column its character set, collation and canonical default, as
    the server does when the column meets its table."""
    rules = Flavor.parse(upstream).rules
    column = spec.column
    ctype = column.type
    if ctype.is_character or (ctype.family == Family.STRING):
        charset, collation = ctype.charset, ctype.collation
        if charset is None:
            charset, collation = table_charset, collation or table_collation
        elif collation is None:
            collation = (
                table_collation
                if charset == table_charset and table_collation
                else default_collation(charset, upstream)
            )
        if spec.binary_collation and charset:
            collation = "binary" if charset == "binary" else f"{charset}_bin"
        ctype = replace(ctype, charset=charset, collation=collation)
        if ctype.members:
            ctype = replace(ctype, members=tuple(_settled_member(m, charset) for m in ctype.members))
        if charset == "binary" and ctype.family == Family.STRING:
            ctype = as_binary_type(ctype)
        elif ctype.name == "text" and ctype.length is not None:
            ctype = replace(
                ctype, name=_smallest(TEXT_CAPACITY, ctype.length * mbmaxlen(charset)), length=None
            )
    if ctype.family == Family.STRING and ctype.name in TEXT_CAPACITY:
        ctype = replace(ctype, length=None)
    # MariaDB spells JSON as LONGTEXT with a json_valid() check on the column.
    checks = spec.checks
    json_check = canonical_expression(f"json_valid(`{column.name}`)").sql
    is_json_check = [canonical_expression(c.expression).sql == json_check for c in checks]
    if ctype.name == "longtext" and any(is_json_check):
        ctype = ColumnType(Family.JSON, "json")
    elif ctype.family == Family.JSON and checks and not any(is_json_check) and rules.json_is_checked_longtext:
        # a check of its own takes the place of JSON's json_valid(): what is left is the
        # LONGTEXT that JSON spells, and the column takes any text
        ctype = ColumnType(Family.STRING, "longtext", charset="utf8mb4", collation="utf8mb4_bin")
    column = replace(column, type=ctype)

    default = None
    if spec.raw_default is not None:
        try:
            default = canonical_default(spec.raw_default, ctype, rules.now_default_any_type)
        except DefaultError as exc:
            raise ValueError(f"column {column.name!r}: {exc}") from exc
    nullable = column.nullable
    if default is not None and default.is_null and not nullable and not column.auto_increment:
        # NOT NULL (written, or implied by an inline PRIMARY KEY) with DEFAULT NULL: the
        # server refuses the column (ER_INVALID_DEFAULT).
        raise ValueError(f"column {column.name!r}: invalid default value NULL for a NOT NULL column")
    if nullable and default is None and column.generated is None:
        default = NULL_DEFAULT  # a nullable column's default is NULL unless said otherwise
    if column.generated is not None:
        default = None
    if column.auto_increment:
        # The server makes an AUTO_INCREMENT column NOT NULL, even when declared NULL.
        nullable = False
        default = None if default is None or default.is_null else default
    return replace(column, default=default, nullable=nullable)


def column_checks(spec: ColumnSpec) -> tuple[InlineCheck, ...]:
    """The inline checks that remain checks (MariaDB's json_valid() is part of JSON)."""
    json_check = canonical_expression(f"json_valid(`{spec.column.name}`)").sql
    return tuple(c for c in spec.checks if canonical_expression(c.expression).sql != json_check)


def as_binary_type(ctype: ColumnType) -> ColumnType:
    """A character type in the `binary` character set is the binary type."""
    names = {
        "char": "binary",
        "varchar": "varbinary",
        "tinytext": "tinyblob",
        "text": "blob",
        "mediumtext": "mediumblob",
        "longtext": "longblob",
    }
    length = ctype.length if ctype.name in ("char", "varchar") else None
    return ColumnType(Family.BINARY, names[ctype.name], length=length)


def _read_enforced(cur: Cursor) -> bool:
    if cur.accept("NOT", "ENFORCED"):
        return False
    cur.accept("ENFORCED")
    return True


def _skip_references(cur: Cursor) -> None:
    cur.expect("REFERENCES")
    cur.qualified_name()
    if cur.is_type(TokenType.L_PAREN):
        group(cur)
    while not cur.at_end:
        if cur.accept("MATCH"):
            cur.next()
        elif cur.accept("ON"):
            cur.accept_any("DELETE", "UPDATE")
            if not (cur.accept("SET", "NULL") or cur.accept("SET", "DEFAULT") or cur.accept("NO", "ACTION")):
                cur.next()
        else:
            break


# -- index and check definitions ------------------------------------------------------
@dataclass(frozen=True)
class IndexSpec:
    name: str | None  # None: the server names it after its first column
    kind: IndexKind
    parts: tuple[IndexPart, ...]
    offset: int = 0
    comment: str | None = None
    hashed: bool = False  # written USING HASH


@dataclass(frozen=True)
class CheckSpec:
    name: str | None
    expression: str
    enforced: bool = True
    offset: int = 0
    column: str | None = None  # the column whose definition holds it (MariaDB)


@dataclass(frozen=True)
class ForeignKeySpec:
    """A foreign key. Not replicated, but the server gives it an index on its columns
    when no other key starts with them, and that index is real."""

    name: str | None  # the CONSTRAINT symbol
    text: str
    index_name: str | None = None  # `FOREIGN KEY name (...)`
    parts: tuple[IndexPart, ...] = ()
    offset: int = 0


def _read_index_parts(cur: Cursor) -> tuple[IndexPart, ...]:
    inner = group(cur)
    parts = []
    for part in split(inner):
        if part.is_type(TokenType.L_PAREN):
            expression = canonical_expression(group(part).text())
            descending = part.accept_any("ASC", "DESC") == "DESC"
            part.expect_end()
            parts.append(IndexPart(column=f"({expression.sql})", descending=descending))
            continue
        column = part.identifier("a key column")
        length = None
        if part.is_type(TokenType.L_PAREN):
            g = group(part)
            length = g.integer("a prefix length")
            g.expect_end()
        descending = part.accept_any("ASC", "DESC") == "DESC"
        part.expect_end()
        parts.append(IndexPart(column=column, length=length, descending=descending))
    return tuple(parts)


@dataclass(frozen=True)
class IndexOptions:
    comment: str | None = None
    hashed: bool = False  # USING HASH


def index_options(cur: Cursor) -> IndexOptions:
    """An index's options: its COMMENT (None: none) and a USING HASH are kept, the others
    change no row."""
    comment = None
    hashed = False
    while not cur.at_end:
        if cur.accept("USING"):
            hashed = cur.word() == "HASH"
            cur.next()
        elif cur.accept("KEY_BLOCK_SIZE"):
            cur.accept_equals()
            cur.next()
        elif cur.accept("WITH", "PARSER"):
            cur.next()
        elif cur.accept("COMMENT"):
            comment = cur.string("a comment") or None  # (COMMENT '' is none)
        elif cur.accept_any("VISIBLE", "INVISIBLE", "IGNORED") or cur.accept("NOT", "IGNORED"):
            pass
        elif cur.word() in ("ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE", "CLUSTERING"):
            cur.next()
            cur.accept_equals()
            cur.next()
        else:
            break
    return IndexOptions(comment, hashed)


def starts_constraint(cur: Cursor) -> bool:
    """Does a table element / ADD spec at the cursor define a key or a check?"""
    return cur.word() in (
        "CONSTRAINT",
        "PRIMARY",
        "UNIQUE",
        "KEY",
        "INDEX",
        "FULLTEXT",
        "SPATIAL",
        "FOREIGN",
        "CHECK",
    )


_KIND_WORDS = {"UNIQUE": IndexKind.UNIQUE, "FULLTEXT": IndexKind.FULLTEXT, "SPATIAL": IndexKind.SPATIAL}


def read_index_kind(cur: Cursor) -> IndexKind | None:
    """UNIQUE, FULLTEXT or SPATIAL before KEY/INDEX; None when absent."""
    word = cur.accept_any(*_KIND_WORDS)
    return _KIND_WORDS[word] if word else None


def read_constraint(cur: Cursor) -> IndexSpec | CheckSpec | ForeignKeySpec:
    offset = cur.offset()
    symbol = None
    if cur.accept("CONSTRAINT") and cur.word() not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
        symbol = cur.identifier("a constraint name")
    if cur.accept("CHECK"):
        expr = group(cur).text()
        return CheckSpec(symbol, expr, _read_enforced(cur), offset)
    if cur.accept("FOREIGN", "KEY"):
        start = cur.pos
        cur.accept("IF", "NOT", "EXISTS")
        index_name = None
        if not cur.is_type(TokenType.L_PAREN):
            index_name = cur.identifier("an index name")
        parts = _read_index_parts(cur)
        if not cur.is_word("REFERENCES"):
            raise cur.error("expected REFERENCES")
        cur.skip_to_end()
        return ForeignKeySpec(symbol, cur.text(start, cur.pos), index_name, parts, offset)
    if cur.accept("PRIMARY", "KEY"):
        kind, name = IndexKind.PRIMARY, "PRIMARY"
        if not cur.is_type(TokenType.L_PAREN) and not cur.is_word("USING"):
            cur.identifier("an index name")  # a primary key's own name is ignored (warning 1280)
        before = index_options(cur)
    else:
        kind = read_index_kind(cur)
        if kind is None:
            kind = IndexKind.PLAIN
            if not cur.accept_any("KEY", "INDEX"):
                raise cur.error("expected a key definition")
        else:
            cur.accept_any("KEY", "INDEX")
        name = None
        if not cur.is_type(TokenType.L_PAREN) and not cur.is_word("USING"):
            name = cur.identifier("an index name")
        name = name or symbol
        before = index_options(cur)
    parts = _read_index_parts(cur)
    after = index_options(cur)
    cur.expect_end()
    return IndexSpec(name, kind, parts, offset, after.comment, before.hashed or after.hashed)


# -- table options --------------------------------------------------------------------
@dataclass(frozen=True)
class OptionsSpec:
    engine: str | None = None
    charset: str | None = None
    collation: str | None = None
    comment: str | None = None
    ignored: tuple[str, ...] = ()


_VALUE_OPTIONS = {
    "AUTO_INCREMENT",
    "AVG_ROW_LENGTH",
    "CHECKSUM",
    "TABLE_CHECKSUM",
    "COMPRESSION",
    "CONNECTION",
    "DELAY_KEY_WRITE",
    "ENCRYPTION",
    "ENCRYPTED",
    "ENCRYPTION_KEY_ID",
    "INSERT_METHOD",
    "KEY_BLOCK_SIZE",
    "MAX_ROWS",
    "MIN_ROWS",
    "PACK_KEYS",
    "PASSWORD",
    "ROW_FORMAT",
    "STATS_AUTO_RECALC",
    "STATS_PERSISTENT",
    "STATS_SAMPLE_PAGES",
    "TABLESPACE",
    "PAGE_CHECKSUM",
    "PAGE_COMPRESSED",
    "PAGE_COMPRESSION_LEVEL",
    "TRANSACTIONAL",
    "IETF_QUOTES",
    "SEQUENCE",
    "ENGINE_ATTRIBUTE",
    "SECONDARY_ENGINE",
    "SECONDARY_ENGINE_ATTRIBUTE",
    "AUTOEXTEND_SIZE",
    "START",
}


def _engine_defined_option(cur: Cursor) -> bool:
    """`name`=value: an option the engine defines, as SHOW CREATE TABLE writes one it
    does not know as its own (`page_compressed`='1' once the table is not InnoDB's)."""
    return cur.is_type(TokenType.IDENTIFIER) and cur.is_type(TokenType.EQ, ahead=1)


def is_table_option(cur: Cursor) -> bool:
    if _engine_defined_option(cur):
        return True
    w = cur.word()
    if w == "DEFAULT":
        w = cur.word(1)
    return w in (
        "ENGINE",
        "TYPE",
        "CHARACTER",
        "CHARSET",
        "COLLATE",
        "COMMENT",
        "UNION",
        "DATA",
        "INDEX",
    ) or (w in _VALUE_OPTIONS)


def read_table_options(cur: Cursor) -> OptionsSpec:
    """Read table options until something that is not one. Options that do not
    change which rows a table accepts are recorded as ignored, never dropped unseen."""
    engine = charset = collation = comment = None
    ignored: list[str] = []
    while not cur.at_end:
        cur.accept_type(TokenType.COMMA)
        if not is_table_option(cur):
            break
        start = cur.pos
        cur.accept("DEFAULT")
        w = cur.word()
        if cur.accept_any("ENGINE", "TYPE"):
            cur.accept_equals()
            engine = canonical_engine(cur.identifier("an engine"))
        elif cur.accept("CHARACTER", "SET") or cur.accept("CHARSET"):
            cur.accept_equals()
            charset = read_charset(cur, of_table=True)
        elif cur.accept("COLLATE"):
            cur.accept_equals()
            # DEFAULT: the character set's default collation (None)
            collation = None if cur.accept("DEFAULT") else canonical_collation(cur.name("a collation"))
        elif cur.accept("COMMENT"):
            cur.accept_equals()
            comment = cur.string("a comment")
        elif cur.accept("UNION"):
            cur.accept_equals()
            group(cur)
            ignored.append(cur.text(start, cur.pos))
        elif cur.accept_any("DATA", "INDEX"):
            cur.expect("DIRECTORY")
            cur.accept_equals()
            cur.string()
            ignored.append(cur.text(start, cur.pos))
        elif w in _VALUE_OPTIONS or _engine_defined_option(cur):
            cur.next()
            cur.accept_equals()
            cur.next()
            ignored.append(cur.text(start, cur.pos))
        else:
            break
    if collation and not charset:
        charset = charset_of_collation(collation)
    return OptionsSpec(engine, charset, collation, comment, tuple(ignored))
