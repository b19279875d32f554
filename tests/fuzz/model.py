"""Tables as MariaDB describes them, in the oracle's own terms: read from
information_schema (COLUMNS, STATISTICS, CHECK_CONSTRAINTS, TABLES), never parsed by the
product's SQL parser nor typed by its lattice. Everything here is what the server says,
plus the type facts of the MariaDB manual the sample rows need (sizes and ranges:
"Data Type Storage Requirements", "Numeric Data Type Overview", "String Data Types").

A value of this module is what the oracle compares: two tables are the same when the
server describes them alike (their names aside; keys and checks as sets).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from tests.fuzz.sql import quote_identifier, run_all


class Family(enum.Enum):
    """The manual's chapters of data types: what a sample value of a type looks like."""

    # "Date and Time Data Types"
    DATE = "date"
    DATETIME = "datetime"
    TIMESTAMP = "timestamp"
    TIME = "time"
    YEAR = "year"
    # "String Data Types" (JSON: a LONGTEXT alias with a check, "JSON Data Type")
    STRING = "string"
    BINARY = "binary"
    ENUM = "enum"
    SET = "set"
    JSON = "json"
    # "Numeric Data Types"
    INTEGER = "integer"
    DECIMAL = "decimal"
    FLOAT = "float"
    BIT = "bit"
    OTHER = "other"  # none the fuzzer makes (spatial, UUID, INET6...)


# the manual's "Numeric Data Type Overview": bits of each integer type
INTEGER_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}
# bytes a TEXT or BLOB type holds ("String Data Types": L < 2^8, 2^16, 2^24, 2^32)
TEXT_CAPACITY = {"tinytext": 255, "text": 65535, "mediumtext": 16777215, "longtext": 4294967295}
BLOB_CAPACITY = {"tinyblob": 255, "blob": 65535, "mediumblob": 16777215, "longblob": 4294967295}
# bytes of a character at most, per character set ("Supported Character Sets and Collations")
MBMAXLEN = {
    "latin1": 1,
    "ascii": 1,
    "binary": 1,
    "utf8mb3": 3,
    "utf8": 3,
    "utf8mb4": 4,
    "ucs2": 2,
    "utf16": 4,
}

_FAMILIES = {
    **dict.fromkeys(INTEGER_BITS, Family.INTEGER),
    "decimal": Family.DECIMAL,
    "float": Family.FLOAT,
    "double": Family.FLOAT,
    "bit": Family.BIT,
    **dict.fromkeys(("char", "varchar", *TEXT_CAPACITY), Family.STRING),
    **dict.fromkeys(("binary", "varbinary", *BLOB_CAPACITY), Family.BINARY),
    "enum": Family.ENUM,
    "set": Family.SET,
    "year": Family.YEAR,
    "date": Family.DATE,
    "time": Family.TIME,
    "datetime": Family.DATETIME,
    "timestamp": Family.TIMESTAMP,
}


@dataclass(frozen=True)
class Type:
    name: str  # information_schema's DATA_TYPE: int, varchar, longtext, ...
    json: bool = False  # a LONGTEXT holding JSON (MariaDB's JSON: a json_valid() check)
    unsigned: bool = False
    zerofill: bool = False
    length: int | None = None  # characters of a CHAR/VARCHAR, bytes of a BINARY/VARBINARY, bits of a BIT
    precision: int | None = None
    scale: int | None = None
    fsp: int | None = None  # fractional seconds of a TIME, DATETIME, TIMESTAMP
    members: tuple[str, ...] = ()  # of an ENUM or SET
    charset: str | None = None
    collation: str | None = None
    text: str = ""  # COLUMN_TYPE as the server shows it: what a column of this type is made with

    @property
    def family(self) -> Family:
        return Family.JSON if self.json else _FAMILIES.get(self.name, Family.OTHER)

    @property
    def is_character(self) -> bool:
        return self.charset is not None

    @property
    def is_text_kind(self) -> bool:
        return self.name in TEXT_CAPACITY or self.name in BLOB_CAPACITY or self.json

    def sql(self) -> str:
        """The type as a column definition takes it, with its character set."""
        if self.json:
            return "json"
        if self.charset is None:
            return self.text
        return f"{self.text} CHARACTER SET {self.charset} COLLATE {self.collation}"


@dataclass(frozen=True)
class Default:
    sql: str  # COLUMN_DEFAULT: NULL, a quoted literal, a number, b'101', or an expression

    @property
    def is_null(self) -> bool:
        return self.sql.upper() == "NULL"

    @property
    def is_expression(self) -> bool:
        return not (
            self.is_null or self.sql.startswith("'") or self.sql.startswith("b'") or _NUMBER.match(self.sql)
        )


@dataclass(frozen=True)
class Generated:
    expression: str
    stored: bool

    @property
    def reads(self) -> frozenset[str]:
        """The columns the expression reads (the server writes them in backquotes), as keys."""
        return frozenset(m.replace("``", "`").lower() for m in _QUOTED.findall(self.expression))


@dataclass(frozen=True)
class Column:
    name: str
    type: Type
    nullable: bool
    default: Default | None = None
    generated: Generated | None = None
    auto_increment: bool = False
    on_update: str | None = None
    comment: str = ""
    invisible: bool = False

    @property
    def key(self) -> str:
        return self.name.lower()

    def sql(self, name: str | None = None) -> str:
        """The column's definition (as ALTER TABLE ... MODIFY takes it), under `name`."""
        parts = [quote_identifier(name or self.name), self.type.sql()]
        if self.generated is not None:
            kind = "STORED" if self.generated.stored else "VIRTUAL"
            return " ".join([*parts, f"AS ({self.generated.expression}) {kind}"])
        parts.append("NULL" if self.nullable else "NOT NULL")
        if self.default is not None:
            parts.append(f"DEFAULT {self.default.sql}")
        if self.on_update:
            parts.append(f"ON UPDATE {self.on_update}")
        return " ".join(parts)


class IndexKind(enum.Enum):
    PRIMARY = "PRIMARY"
    UNIQUE = "UNIQUE"
    KEY = "KEY"
    FULLTEXT = "FULLTEXT"
    SPATIAL = "SPATIAL"


@dataclass(frozen=True)
class Index:
    name: str
    kind: IndexKind
    parts: tuple[tuple[str, int | None], ...]  # (column key, prefix length)
    comment: str = ""
    ignored: bool = False

    @property
    def key(self) -> str:
        return self.name.lower()

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.parts)

    def sql(self) -> str:
        cols = ", ".join(quote_identifier(c) + (f"({n})" if n else "") for c, n in self.parts)
        kind = (
            "PRIMARY KEY"
            if self.kind == IndexKind.PRIMARY
            else f"{self.kind.value} KEY {quote_identifier(self.name)}"
        )
        return f"{kind.replace('KEY KEY', 'KEY')} ({cols})"


@dataclass(frozen=True)
class Options:
    engine: str | None
    charset: str | None
    collation: str | None
    comment: str = ""


@dataclass(frozen=True)
class Table:
    columns: tuple[Column, ...]
    indexes: frozenset[Index] = frozenset()
    checks: frozenset[tuple[str, str]] = frozenset()  # (name, clause)
    options: Options = field(default_factory=lambda: Options(None, None, None))

    @cached_property
    def column_map(self) -> Mapping[str, Column]:
        return {c.key: c for c in self.columns}

    def column(self, name: str) -> Column | None:
        return self.column_map.get(name.lower())

    def index(self, name: str) -> Index | None:
        return next((ix for ix in self.indexes if ix.key == name.lower()), None)

    @property
    def primary(self) -> tuple[str, ...] | None:
        return next((ix.columns for ix in self.indexes if ix.kind == IndexKind.PRIMARY), None)


def read(conn, db: str, table: str) -> Table:
    """The table as information_schema describes it (one round trip where the connection
    takes several statements)."""
    where = "TABLE_SCHEMA = %s AND TABLE_NAME = %s"
    columns, indexes, checks, options = run_all(
        conn,
        [
            (
                "SELECT COLUMN_NAME, COLUMN_TYPE, DATA_TYPE, IS_NULLABLE, COLUMN_DEFAULT, EXTRA,"
                " GENERATION_EXPRESSION, CHARACTER_SET_NAME, COLLATION_NAME, CHARACTER_MAXIMUM_LENGTH,"
                " NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, COLUMN_COMMENT, IS_GENERATED"
                f" FROM information_schema.COLUMNS WHERE {where} ORDER BY ORDINAL_POSITION",
                (db, table),
            ),
            (
                "SELECT INDEX_NAME, NON_UNIQUE, COLUMN_NAME, SUB_PART, INDEX_TYPE, IGNORED, INDEX_COMMENT"
                f" FROM information_schema.STATISTICS WHERE {where} ORDER BY INDEX_NAME, SEQ_IN_INDEX",
                (db, table),
            ),
            (
                "SELECT CONSTRAINT_NAME, LEVEL, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS"
                " WHERE CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s",
                (db, table),
            ),
            (
                "SELECT t.ENGINE, c.CHARACTER_SET_NAME, t.TABLE_COLLATION, t.TABLE_COMMENT"
                " FROM information_schema.TABLES t LEFT JOIN information_schema.COLLATIONS c"
                f" ON c.COLLATION_NAME = t.TABLE_COLLATION WHERE t.{where}",
                (db, table),
            ),
        ],
    )
    if not columns:
        raise LookupError(f"no table {db}.{table}")
    # MariaDB's JSON is a LONGTEXT with a check json_valid(`column`) ("JSON Data Type"); the
    # check keeps the name the column had when it was made, through renames
    json_checks = {
        (name, clause) for name, level, clause in checks if level == "Column" and _JSON.match(clause)
    }
    json_checked = {_JSON.match(clause).group(1).replace("``", "`").lower() for _, clause in json_checks}
    table_checks = frozenset(
        (name, clause) for name, _, clause in checks if (name, clause) not in json_checks
    )
    return Table(
        tuple(_column(row, json_checked) for row in columns),
        frozenset(_indexes(indexes)),
        table_checks,
        Options(*options[0][:3], options[0][3] or ""),
    )


def _column(row: tuple, json_checked: set[str]) -> Column:
    (
        name,
        column_type,
        data_type,
        nullable,
        default,
        extra,
        expression,
        charset,
        collation,
        char_length,
        precision,
        scale,
        fsp,
        comment,
        generated,
    ) = row
    words = column_type.lower().split()
    data_type = data_type.lower()
    json = data_type == "longtext" and name.lower() in json_checked
    length = None
    if data_type in ("char", "varchar", "binary", "varbinary"):
        length = char_length
    elif data_type == "bit":
        length = precision
    if data_type in ("decimal",):
        precision_, scale_ = precision, scale
    elif data_type in ("float", "double") and "(" in column_type:
        precision_, scale_ = (int(n) for n in re.findall(r"\d+", column_type.split(")")[0])[:2])
    else:
        precision_ = scale_ = None
    members = (
        tuple(m.replace("''", "'") for m in _MEMBER.findall(column_type))
        if data_type in ("enum", "set")
        else ()
    )
    extra_l = (extra or "").lower()
    on_update = re.search(r"on update (\S+)", extra or "", re.I)
    return Column(
        name=name,
        type=Type(
            data_type,
            json=json,
            unsigned="unsigned" in words,
            zerofill="zerofill" in words,
            length=length,
            precision=precision_,
            scale=scale_,
            fsp=fsp if data_type in ("time", "datetime", "timestamp") else None,
            members=members,
            charset=None if json else charset,
            collation=None if json else collation,
            text=column_type,
        ),
        nullable=nullable == "YES",
        default=None if default is None else Default(default),
        generated=Generated(expression, "stored" in extra_l) if generated == "ALWAYS" else None,
        auto_increment="auto_increment" in extra_l,
        on_update=on_update.group(1) if on_update else None,
        comment=comment or "",
        invisible="invisible" in extra_l,
    )


def _indexes(rows) -> list[Index]:
    grouped: dict[str, list[tuple]] = {}
    for row in rows:
        grouped.setdefault(row[0], []).append(row)
    out = []
    for name, parts in grouped.items():
        _, non_unique, _, _, index_type, ignored, comment = parts[0]
        if name == "PRIMARY":
            kind = IndexKind.PRIMARY
        elif index_type in ("FULLTEXT", "SPATIAL"):
            kind = IndexKind(index_type)
        else:
            kind = IndexKind.KEY if int(non_unique) else IndexKind.UNIQUE
        out.append(
            Index(
                name,
                kind,
                tuple((c.lower(), sub) for _, _, c, sub, *_ in parts),
                comment or "",
                ignored == "YES",
            )
        )
    return out


def family_of(t) -> Family:
    """The family of a type: of this model's, or of another naming its family in the same
    words (the live stories write rows for tables they read with the product's parser)."""
    try:
        return Family(getattr(t.family, "value", t.family))
    except ValueError:
        return Family.OTHER


def key(name: str) -> str:
    """A column's or key's name as the server compares them: without case."""
    return name.lower()


def table_of(shard: str) -> str:
    """A shard's table name: `source.schema.table`'s last part (the fuzzer's names hold no dot)."""
    return shard.split(".")[2]


_NUMBER = re.compile(r"^-?\d+(\.\d+)?(e[+-]?\d+)?$", re.I)
_QUOTED = re.compile(r"`((?:[^`]|``)+)`")
_JSON = re.compile(r"^json_valid\(`((?:[^`]|``)+)`\)$")
_MEMBER = re.compile(r"'((?:[^']|'')*)'")
