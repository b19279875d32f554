"""parse_ddl, one row per statement form: what each CREATE / ALTER / RENAME / DROP /
TRUNCATE reads as, which statements are not about a table's schema, and how a
statement we cannot read is reported (reason, line and column, statement, table).

Column definitions are checked on the Table that `parse_table` builds, since a
column's character set, collation and canonical default are only settled there."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest

from lattice import (
    NULL_DEFAULT,
    Check,
    Column,
    ColumnType,
    Default,
    Family,
    Generated,
    Index,
    IndexKind,
    IndexPart,
    Table,
    TableOptions,
    parse_table,
    recast_default,
)
from lattice.ddl import (
    AddCheck,
    AddColumn,
    AddForeignKey,
    AddIndex,
    AlterCheck,
    AlterTable,
    ConvertCharset,
    CreateTable,
    DropCheck,
    DropColumn,
    DropConstraint,
    DropDatabase,
    DropDefault,
    DropForeignKey,
    DropIndex,
    DropPrimaryKey,
    DropTables,
    Ignored,
    ModifyColumn,
    OtherStatement,
    Position,
    RenameColumn,
    RenameIndex,
    RenameTables,
    RenameTo,
    SetDefault,
    SetOptions,
    TableName,
    TruncateTable,
    UnsupportedDDL,
    parse_ddl,
)
from lattice.definitions import CheckSpec, IndexSpec
from lattice.literals import RawValue
from lattice.sqltext import canonical_expression, quote_string, shorten

U8 = {"charset": "utf8mb4", "collation": "utf8mb4_general_ci"}


def ctype(family: Family, name: str, **kw: Any) -> ColumnType:
    return ColumnType(family, name, **kw)


def col(name: str, ctype: ColumnType, *, nullable: bool = True, default: Default | None = None, **kw: Any):
    if nullable and default is None and "generated" not in kw:
        default = NULL_DEFAULT
    return Column(name, ctype, nullable=nullable, default=default, **kw)


INT = ctype(Family.INTEGER, "int")
VC10 = ctype(Family.STRING, "varchar", length=10, **U8)


def attr(obj: object, path: str) -> object:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def one_column(definition: str) -> Column:
    table = parse_table(f"CREATE TABLE t ({definition}) DEFAULT CHARSET=utf8mb4")
    return table.columns[0]


# -- column definitions: (what the row checks, definition, expected column) ------------------
COLUMNS = [
    ("int is nullable with default NULL", "a int", col("a", INT)),
    ("display width dropped", "a int(11) NOT NULL", col("a", INT, nullable=False)),
    ("integer alias", "a integer", col("a", INT)),
    (
        "tinyint unsigned zerofill",
        "a tinyint(3) unsigned zerofill",
        col("a", ctype(Family.INTEGER, "tinyint", unsigned=True, zerofill=True)),
    ),
    (
        "zerofill implies unsigned",
        "a smallint zerofill",
        col("a", ctype(Family.INTEGER, "smallint", unsigned=True, zerofill=True)),
    ),
    ("mediumint", "a mediumint", col("a", ctype(Family.INTEGER, "mediumint"))),
    ("bigint unsigned", "a bigint unsigned", col("a", ctype(Family.INTEGER, "bigint", unsigned=True))),
    (
        "bool is tinyint, true is 1",
        "a bool default true",
        col("a", ctype(Family.INTEGER, "tinyint"), default=Default("1")),
    ),
    (
        "negative integer default",
        "a int not null default -5",
        col("a", INT, nullable=False, default=Default("-5")),
    ),
    ("quoted integer default", "a int default '7'", col("a", INT, default=Default("7"))),
    ("decimal(10,2)", "a decimal(10,2)", col("a", ctype(Family.DECIMAL, "decimal", precision=10, scale=2))),
    (
        "numeric defaults to (10,0)",
        "a numeric",
        col("a", ctype(Family.DECIMAL, "decimal", precision=10, scale=0)),
    ),
    ("dec(5) is (5,0)", "a dec(5)", col("a", ctype(Family.DECIMAL, "decimal", precision=5, scale=0))),
    (
        "negative decimal default",
        "a decimal(5,2) default -1.50",
        col("a", ctype(Family.DECIMAL, "decimal", precision=5, scale=2), default=Default("-1.5")),
    ),
    (
        "decimal default rounds to the scale",
        "a decimal(5,1) default '2.25'",
        col("a", ctype(Family.DECIMAL, "decimal", precision=5, scale=1), default=Default("2.3")),
    ),
    ("float", "a float", col("a", ctype(Family.FLOAT, "float"))),
    ("float(30) is double", "a float(30)", col("a", ctype(Family.FLOAT, "double"))),
    (
        "float(7,3) unsigned",
        "a float(7,3) unsigned",
        col("a", ctype(Family.FLOAT, "float", precision=7, scale=3, unsigned=True)),
    ),
    (
        "double precision (a merged sqlglot token) is double",
        "a double precision",
        col("a", ctype(Family.FLOAT, "double")),
    ),
    ("REAL is DOUBLE", "a real", col("a", ctype(Family.FLOAT, "double"))),
    (
        "negative double default",
        "a double default -0.25",
        col("a", ctype(Family.FLOAT, "double"), default=Default("-0.25")),
    ),
    (
        "bit default b'..'",
        "a bit(5) default b'101'",
        col("a", ctype(Family.BIT, "bit", length=5), default=Default("b'101'")),
    ),
    (
        "bit defaults to bit(1), number default",
        "a bit default 1",
        col("a", ctype(Family.BIT, "bit", length=1), default=Default("b'1'")),
    ),
    ("char takes the table charset", "a char(3)", col("a", ctype(Family.STRING, "char", length=3, **U8))),
    ("char defaults to char(1)", "a char", col("a", ctype(Family.STRING, "char", length=1, **U8))),
    (
        "BINARY attribute is the _bin collation",
        "a varchar(20) binary",
        col("a", ctype(Family.STRING, "varchar", length=20, charset="utf8mb4", collation="utf8mb4_bin")),
    ),
    (
        "charset and collate",
        "a varchar(5) character set latin1 collate latin1_bin",
        col("a", ctype(Family.STRING, "varchar", length=5, charset="latin1", collation="latin1_bin")),
    ),
    (
        "charset alone takes its default collation",
        "a varchar(5) charset latin1",
        col("a", ctype(Family.STRING, "varchar", length=5, charset="latin1", collation="latin1_swedish_ci")),
    ),
    (
        "collate alone implies its charset",
        "a varchar(5) collate utf8mb4_unicode_ci",
        col(
            "a", ctype(Family.STRING, "varchar", length=5, charset="utf8mb4", collation="utf8mb4_unicode_ci")
        ),
    ),
    (
        "utf8 means utf8mb3",
        "a varchar(5) character set utf8 collate utf8_bin",
        col("a", ctype(Family.STRING, "varchar", length=5, charset="utf8mb3", collation="utf8mb3_bin")),
    ),
    (
        "national char is utf8mb3",
        "a nchar(4)",
        col("a", ctype(Family.STRING, "char", length=4, charset="utf8mb3", collation="utf8mb3_general_ci")),
    ),
    (
        "char varying (a merged sqlglot token) is varchar",
        "a char varying(7)",
        col("a", ctype(Family.STRING, "varchar", length=7, **U8)),
    ),
    (
        "char ... character set binary is binary",
        "a char(4) character set binary",
        col("a", ctype(Family.BINARY, "binary", length=4)),
    ),
    (
        "varchar ... character set binary is varbinary",
        "a varchar(9) charset binary",
        col("a", ctype(Family.BINARY, "varbinary", length=9)),
    ),
    (
        "binary with x'..' default of printable bytes",
        "a binary(3) default x'414243'",
        col("a", ctype(Family.BINARY, "binary", length=3), default=Default("'ABC'")),
    ),
    (
        "varbinary with x'..' default of other bytes",
        "a varbinary(10) default x'00ff'",
        col("a", ctype(Family.BINARY, "varbinary", length=10), default=Default("x'00ff'")),
    ),
    ("tinytext", "a tinytext", col("a", ctype(Family.STRING, "tinytext", **U8))),
    ("text", "a text", col("a", ctype(Family.STRING, "text", **U8))),
    ("mediumtext", "a mediumtext", col("a", ctype(Family.STRING, "mediumtext", **U8))),
    ("longtext", "a longtext", col("a", ctype(Family.STRING, "longtext", **U8))),
    ("text(60) in utf8mb4 is tinytext", "a text(60)", col("a", ctype(Family.STRING, "tinytext", **U8))),
    ("text(100) in utf8mb4 is text", "a text(100)", col("a", ctype(Family.STRING, "text", **U8))),
    ("long varchar is mediumtext", "a long varchar", col("a", ctype(Family.STRING, "mediumtext", **U8))),
    ("tinyblob", "a tinyblob", col("a", ctype(Family.BINARY, "tinyblob"))),
    ("blob", "a blob", col("a", ctype(Family.BINARY, "blob"))),
    ("blob(300) is blob", "a blob(300)", col("a", ctype(Family.BINARY, "blob"))),
    ("mediumblob", "a mediumblob", col("a", ctype(Family.BINARY, "mediumblob"))),
    ("longblob", "a longblob", col("a", ctype(Family.BINARY, "longblob"))),
    (
        "text with a default",
        "a text default 'x'",
        col("a", ctype(Family.STRING, "text", **U8), default=Default("'x'")),
    ),
    (
        "enum with a default",
        "a enum('x','y','z') default 'y'",
        col("a", ctype(Family.ENUM, "enum", members=("x", "y", "z"), **U8), default=Default("'y'")),
    ),
    (
        "set default in member order",
        "a set('a','b','c') default 'c,a'",
        col("a", ctype(Family.SET, "set", members=("a", "b", "c"), **U8), default=Default("'a,c'")),
    ),
    (
        "enum NOT NULL has no default",
        "a enum('p','q') not null",
        col("a", ctype(Family.ENUM, "enum", members=("p", "q"), **U8), nullable=False),
    ),
    ("year", "a year(4) default 2020", col("a", ctype(Family.YEAR, "year"), default=Default("2020"))),
    (
        "date default is zero-padded",
        "a date default '2020-1-2'",
        col("a", ctype(Family.DATE, "date"), default=Default("'2020-01-02'")),
    ),
    (
        "time(2) default drops trailing zeros",
        "a time(2) default '12:34:56.70'",
        col("a", ctype(Family.TIME, "time", fsp=2), default=Default("'12:34:56.7'")),
    ),
    (
        "negative time default",
        "a time default '-12:00:00'",
        col("a", ctype(Family.TIME, "time", fsp=0), default=Default("'-12:00:00'")),
    ),
    (
        "datetime default from a date",
        "a datetime default '2020-01-01'",
        col("a", ctype(Family.DATETIME, "datetime", fsp=0), default=Default("'2020-01-01 00:00:00'")),
    ),
    (
        "TIMESTAMP stays TIMESTAMP, CURRENT_TIMESTAMP(n), ON UPDATE",
        "a timestamp(3) not null default current_timestamp(3) on update current_timestamp(3)",
        col(
            "a",
            ctype(Family.TIMESTAMP, "timestamp", fsp=3),
            nullable=False,
            default=Default("current_timestamp(3)", is_expression=True),
            on_update="current_timestamp(3)",
        ),
    ),
    (
        "CURRENT_TIMESTAMP without a precision takes the column's, ON UPDATE too",
        "a datetime(3) default current_timestamp on update now()",
        col(
            "a",
            ctype(Family.DATETIME, "datetime", fsp=3),
            default=Default("current_timestamp(3)", is_expression=True),
            on_update="current_timestamp(3)",
        ),
    ),
    (
        "CURRENT_TIMESTAMP(n) is clipped to the column's precision",
        "a datetime default current_timestamp(3)",
        col(
            "a",
            ctype(Family.DATETIME, "datetime", fsp=0),
            default=Default("current_timestamp()", is_expression=True),
        ),
    ),
    (
        "a smaller CURRENT_TIMESTAMP precision is kept",
        "a timestamp(3) null default current_timestamp(2)",
        col(
            "a",
            ctype(Family.TIMESTAMP, "timestamp", fsp=3),
            default=Default("current_timestamp(2)", is_expression=True),
        ),
    ),
    (
        "(NOW()) is CURRENT_TIMESTAMP",
        "a datetime(2) default (now())",
        col(
            "a",
            ctype(Family.DATETIME, "datetime", fsp=2),
            default=Default("current_timestamp(2)", is_expression=True),
        ),
    ),
    (
        "a parenthesised literal is the literal",
        "a varchar(5) default ('x')",
        col("a", ctype(Family.STRING, "varchar", length=5, **U8), default=Default("'x'")),
    ),
    (
        "a parenthesised negative number is the number",
        "a int default (-1)",
        col("a", INT, default=Default("-1")),
    ),
    (
        "now() is current_timestamp()",
        "a datetime default now()",
        col(
            "a",
            ctype(Family.DATETIME, "datetime", fsp=0),
            default=Default("current_timestamp()", is_expression=True),
        ),
    ),
    (
        "timestamp NULL DEFAULT NULL",
        "a timestamp null default null",
        col("a", ctype(Family.TIMESTAMP, "timestamp", fsp=0)),
    ),
    (
        "expression default",
        "a int default (1 + 2)",
        col("a", INT, default=Default("1 + 2", is_expression=True)),
    ),
    (
        "NOW() inside an expression default is CURRENT_TIMESTAMP()",
        "a datetime default (now() + interval 1 day)",
        col(
            "a",
            ctype(Family.DATETIME, "datetime", fsp=0),
            default=Default("CURRENT_TIMESTAMP() + INTERVAL '1' DAY", is_expression=True),
        ),
    ),
    (
        "doubled quote in a string",
        "a varchar(10) default 'it''s'",
        col("a", VC10, default=Default("'it''s'")),
    ),
    ("backslash-escaped quote", "a varchar(10) default 'it\\'s'", col("a", VC10, default=Default("'it''s'"))),
    (
        "backslash n is a newline",
        "a varchar(10) default 'a\\nb'",
        col("a", VC10, default=Default(quote_string("a\nb"))),
    ),
    (
        "backslash t and backslash backslash",
        "a varchar(10) default 'a\\tb\\\\c'",
        col("a", VC10, default=Default(quote_string("a\tb\\c"))),
    ),
    ("double-quoted string", 'a varchar(10) default "dq"', col("a", VC10, default=Default("'dq'"))),
    ("charset introducer", "a varchar(10) default _utf8mb4'x'", col("a", VC10, default=Default("'x'"))),
    (
        "char default loses trailing spaces",
        "a char(5) default 'ab  '",
        col("a", ctype(Family.STRING, "char", length=5, **U8), default=Default("'ab'")),
    ),
    (
        "YEAR: a two-digit number",
        "a year default 99",
        col("a", ctype(Family.YEAR, "year"), default=Default("1999")),
    ),
    (
        "YEAR: a small number is 20xx",
        "a year default 5",
        col("a", ctype(Family.YEAR, "year"), default=Default("2005")),
    ),
    (
        "YEAR: the string '0' is 2000",
        "a year default '0'",
        col("a", ctype(Family.YEAR, "year"), default=Default("2000")),
    ),
    (
        "YEAR: the number 0 is 0000",
        "a year default 0",
        col("a", ctype(Family.YEAR, "year"), default=Default("0")),
    ),
    (
        "FLOAT(M,D) default is rounded to D decimals",
        "a float(5,2) default 3.145",
        col("a", ctype(Family.FLOAT, "float", precision=5, scale=2), default=Default("3.15")),
    ),
    (
        "BINARY(n) default is padded with zero bytes",
        "a binary(4) default 'ab'",
        col("a", ctype(Family.BINARY, "binary", length=4), default=Default("x'61620000'")),
    ),
    (
        "TIME default from a number is HHMMSS",
        "a time default 120",
        col("a", ctype(Family.TIME, "time", fsp=0), default=Default("'00:01:20'")),
    ),
    (
        "TIME default with days",
        "a time default '1 10:00'",
        col("a", ctype(Family.TIME, "time", fsp=0), default=Default("'34:00:00'")),
    ),
    (
        "negative TIME default from a number",
        "a time default -120",
        col("a", ctype(Family.TIME, "time", fsp=0), default=Default("'-00:01:20'")),
    ),
    (
        "TIME fraction cut to the column's precision",
        "a time(1) default '12:34:56.789'",
        col("a", ctype(Family.TIME, "time", fsp=1), default=Default("'12:34:56.7'")),
    ),
    (
        "DATE default from a number",
        "a date default 20200102",
        col("a", ctype(Family.DATE, "date"), default=Default("'2020-01-02'")),
    ),
    (
        "DATE default with a two-digit year and slashes",
        "a date default '70/1/2'",
        col("a", ctype(Family.DATE, "date"), default=Default("'1970-01-02'")),
    ),
    (
        "DATETIME default from digits",
        "a datetime default '200102030405'",
        col("a", ctype(Family.DATETIME, "datetime", fsp=0), default=Default("'2020-01-02 03:04:05'")),
    ),
    (
        "DATETIME fraction cut to the column's precision",
        "a datetime(1) default '2020-01-02T03:04:05.96'",
        col("a", ctype(Family.DATETIME, "datetime", fsp=1), default=Default("'2020-01-02 03:04:05.9'")),
    ),
    (
        "TIMESTAMP(6) default with trailing zeros",
        "a timestamp(6) null default '2020-01-02 03:04:05.100000'",
        col("a", ctype(Family.TIMESTAMP, "timestamp", fsp=6), default=Default("'2020-01-02 03:04:05.1'")),
    ),
    ("json", "a json", col("a", ctype(Family.JSON, "json"))),
    (
        "MariaDB's JSON: longtext with json_valid() check is JSON",
        "a longtext charset utf8mb4 collate utf8mb4_bin default null check (json_valid(`a`))",
        col("a", ctype(Family.JSON, "json")),
    ),
    ("point", "a point not null", col("a", ctype(Family.SPATIAL, "point"), nullable=False)),
    ("geometry", "a geometry", col("a", ctype(Family.SPATIAL, "geometry"))),
    ("linestring", "a linestring", col("a", ctype(Family.SPATIAL, "linestring"))),
    ("polygon", "a polygon", col("a", ctype(Family.SPATIAL, "polygon"))),
    ("multipoint", "a multipoint", col("a", ctype(Family.SPATIAL, "multipoint"))),
    ("multilinestring", "a multilinestring", col("a", ctype(Family.SPATIAL, "multilinestring"))),
    ("multipolygon", "a multipolygon", col("a", ctype(Family.SPATIAL, "multipolygon"))),
    ("geometrycollection", "a geometrycollection", col("a", ctype(Family.SPATIAL, "geometrycollection"))),
    ("inet6 is an opaque type", "a inet6", col("a", ctype(Family.OTHER, "inet6"))),
    (
        "auto_increment primary key is NOT NULL",
        "a int auto_increment primary key",
        col("a", INT, nullable=False, auto_increment=True),
    ),
    (
        "auto_increment is NOT NULL even when NULL is written",
        "a int null auto_increment unique",
        col("a", INT, nullable=False, auto_increment=True),
    ),
    (
        "inline PRIMARY KEY (merged sqlglot token, split over lines) is NOT NULL",
        "a int primary\n  key",
        col("a", INT, nullable=False),
    ),
    ("NULL PRIMARY KEY is still NOT NULL", "a int null primary key", col("a", INT, nullable=False)),
    (
        "serial",
        "a serial",
        col("a", ctype(Family.INTEGER, "bigint", unsigned=True), nullable=False, auto_increment=True),
    ),
    (
        "stored generated column",
        "a int generated always as (b + 1) stored, b int",
        col("a", INT, generated=Generated("`b` + 1", stored=True)),
    ),
    (
        "virtual generated column (AS shorthand)",
        "a int as (b * 2) virtual, b int",
        col("a", INT, generated=Generated("`b` * 2", stored=False)),
    ),
    (
        "persistent is stored",
        "a int as (b) persistent, b int",
        col("a", INT, generated=Generated("`b`", stored=True)),
    ),
    ("comment", "a varchar(10) comment 'hi there'", col("a", VC10, comment="hi there")),
    (
        "NOT NULL with a string default",
        "a varchar(10) not null default ''",
        col("a", VC10, nullable=False, default=Default("''")),
    ),
]


@pytest.mark.parametrize(("definition", "expected"), [r[1:] for r in COLUMNS], ids=[r[0] for r in COLUMNS])
def test_column_definition(definition: str, expected: Column) -> None:
    assert one_column(definition) == expected


# -- table-level parts of CREATE TABLE: (what, statement, expected Table) ---------------------
def idx(name: str, kind: IndexKind, *parts: str | IndexPart) -> Index:
    return Index(name, kind, tuple(p if isinstance(p, IndexPart) else IndexPart(p) for p in parts))


def chk(name: str, expression: str, *columns: str, enforced: bool = True) -> Check:
    return Check(name, expression, enforced, frozenset(columns))


NO_OPTIONS = TableOptions()


def table(*columns: Column, indexes=(), checks=(), options: TableOptions = NO_OPTIONS) -> Table:
    return Table("t", tuple(columns), tuple(indexes), tuple(checks), options)


A, B, C = col("a", INT), col("b", INT), col("c", INT)
NN = {"nullable": False}

CREATE_TABLES = [
    (
        "inline PRIMARY KEY",
        "create table t (a int primary key, b int)",
        table(col("a", INT, **NN), B, indexes=[idx("PRIMARY", IndexKind.PRIMARY, "a")]),
    ),
    (
        "inline KEY means PRIMARY KEY",
        "create table t (a int key, b int)",
        table(col("a", INT, **NN), B, indexes=[idx("PRIMARY", IndexKind.PRIMARY, "a")]),
    ),
    (
        "inline UNIQUE is named after the column",
        "create table t (a int unique, b int unique key)",
        table(A, B, indexes=[idx("a", IndexKind.UNIQUE, "a"), idx("b", IndexKind.UNIQUE, "b")]),
    ),
    (
        "inline CHECK is named after the column (MariaDB)",
        "create table t (a int check (a > 0), b int)",
        table(A, B, checks=[chk("a", "`a` > 0", "a")]),
    ),
    (
        "table PRIMARY KEY makes its columns NOT NULL",
        "create table t (a int, b int, primary key (a, b))",
        table(
            col("a", INT, **NN), col("b", INT, **NN), indexes=[idx("PRIMARY", IndexKind.PRIMARY, "a", "b")]
        ),
    ),
    (
        "prefix lengths and DESC",
        "create table t (a int, b varchar(10), key k (b(4), a desc)) charset utf8mb4",
        table(
            A,
            col("b", VC10),
            indexes=[idx("k", IndexKind.PLAIN, IndexPart("b", 4), IndexPart("a", descending=True))],
            options=TableOptions(None, **U8),
        ),
    ),
    (
        "unnamed keys: first column, then _2",
        "create table t (a int, b int, key (a), unique (a, b), index (b))",
        table(
            A,
            B,
            indexes=[
                idx("a", IndexKind.PLAIN, "a"),
                idx("a_2", IndexKind.UNIQUE, "a", "b"),
                idx("b", IndexKind.PLAIN, "b"),
            ],
        ),
    ),
    (
        "unnamed keys are named in written order, inline ones too",
        "create table t (a int, key (b), b int unique)",
        table(A, B, indexes=[idx("b", IndexKind.PLAIN, "b"), idx("b_2", IndexKind.UNIQUE, "b")]),
    ),
    (
        "CONSTRAINT name UNIQUE names the key",
        "create table t (a int, constraint uq unique (a))",
        table(A, indexes=[idx("uq", IndexKind.UNIQUE, "a")]),
    ),
    (
        "fulltext and spatial keys",
        "create table t (a text, g point not null, fulltext key ft (a), spatial key (g)) charset utf8mb4",
        table(
            col("a", ctype(Family.STRING, "text", **U8)),
            col("g", ctype(Family.SPATIAL, "point"), **NN),
            indexes=[idx("ft", IndexKind.FULLTEXT, "a"), idx("g", IndexKind.SPATIAL, "g")],
            options=TableOptions(None, **U8),
        ),
    ),
    (
        "CONSTRAINT ... CHECK and unnamed CHECKs (CONSTRAINT_n)",
        "create table t (a int, b int, constraint pos check (a > 0), check (b > 0), check (a < b))",
        table(
            A,
            B,
            checks=[
                chk("pos", "`a` > 0", "a"),
                chk("CONSTRAINT_1", "`b` > 0", "b"),
                chk("CONSTRAINT_2", "`a` < `b`", "a", "b"),
            ],
        ),
    ),
    (
        "FOREIGN KEY gets the server's index, named after the first column",
        "create table t (a int, b int, foreign key (b) references u (x) on delete cascade)",
        table(A, B, indexes=[idx("b", IndexKind.PLAIN, "b")]),
    ),
    (
        "FOREIGN KEY's index is named after the constraint",
        "create table t (a int, b int, constraint fk foreign key (b) references u (x))",
        table(A, B, indexes=[idx("fk", IndexKind.PLAIN, "b")]),
    ),
    (
        "FOREIGN KEY needs no index when a key starts with its columns",
        "create table t (a int, b int, foreign key (a) references u (x), key ab (a, b))",
        table(A, B, indexes=[idx("ab", IndexKind.PLAIN, "a", "b")]),
    ),
    (
        "inline REFERENCES is a foreign key on MariaDB",
        "create table t (a int, b int references u (x))",
        table(A, B, indexes=[idx("b", IndexKind.PLAIN, "b")]),
    ),
    (
        "table options",
        "create table t (a int) engine=InnoDB default charset=latin1 comment='it''s'",
        table(A, options=TableOptions("InnoDB", "latin1", "latin1_swedish_ci", "it's")),
    ),
    (
        "table options without = and with commas",
        "create table t (a int) engine InnoDB, character set utf8, collate utf8_bin",
        table(A, options=TableOptions("InnoDB", "utf8mb3", "utf8mb3_bin")),
    ),
    (
        "collation alone sets the charset",
        "create table t (a int) collate=utf8mb4_unicode_ci",
        table(A, options=TableOptions(None, "utf8mb4", "utf8mb4_unicode_ci")),
    ),
    (
        "columns take the table's charset",
        "create table t (a varchar(10)) default charset latin1 collate latin1_bin",
        table(
            col("a", ctype(Family.STRING, "varchar", length=10, charset="latin1", collation="latin1_bin")),
            options=TableOptions(None, "latin1", "latin1_bin"),
        ),
    ),
    (
        "PARTITION BY is ignored",
        "create table t (a int) engine=InnoDB partition by hash (a) partitions 4",
        table(A, options=TableOptions("InnoDB")),
    ),
    ("WITH SYSTEM VERSIONING is ignored", "create table t (a int) with system versioning", table(A)),
    (
        "PERIOD FOR is ignored",
        "create table t (a int, s date, e date, period for p (s, e))",
        table(A, col("s", ctype(Family.DATE, "date")), col("e", ctype(Family.DATE, "date"))),
    ),
    (
        "non-reserved keywords as column names",
        "create table t (period int, date date, first int, after int)",
        table(
            col("period", INT), col("date", ctype(Family.DATE, "date")), col("first", INT), col("after", INT)
        ),
    ),
]


@pytest.mark.parametrize(
    ("sql", "expected"), [r[1:] for r in CREATE_TABLES], ids=[r[0] for r in CREATE_TABLES]
)
def test_create_table(sql: str, expected: Table) -> None:
    assert parse_table(sql) == expected


def test_create_table_mysql_names_checks_after_the_table() -> None:
    sql = "create table t1 (a int check (a > 0), b int, check (b > 0))"
    got = parse_table(sql, upstream="mysql")
    assert {c.name for c in got.checks} == {"t1_chk_1", "t1_chk_2"}


# CURRENT_TIMESTAMP as the default of a column neither DATETIME nor TIMESTAMP, per server:
# (column, the default MariaDB shows, or None where MySQL and TiDB refuse it)
NOW_ELSEWHERE = [
    ("a varchar(60) default current_timestamp(3)", "current_timestamp(3)"),
    ("a int not null default current_timestamp", "current_timestamp()"),
    ("a char(30) default now(6)", "current_timestamp(6)"),
    ("a date default current_timestamp", "current_timestamp()"),
]


@pytest.mark.parametrize(("column", "shown"), NOW_ELSEWHERE)
@pytest.mark.parametrize("flavor", ["mariadb", "mysql", "tidb"])
def test_current_timestamp_is_a_default_of_any_type_on_mariadb_only(
    column: str, shown: str, flavor: str
) -> None:
    """(L52) MariaDB keeps the precision written, the column having none of its own."""
    sql = f"create table t ({column})"
    if flavor != "mariadb":
        with pytest.raises(ValueError, match="only a default for DATETIME and TIMESTAMP"):
            parse_table(sql, upstream=flavor)
        return
    default = parse_table(sql, upstream=flavor).column("a").default
    assert (default.sql, default.is_expression) == (shown, True)


@pytest.mark.parametrize(("flavor", "kept"), [("mariadb", True), ("mysql", False), ("tidb", False)])
def test_a_datetimes_current_timestamp_recast_for_a_varchar_holding_its_rows(flavor: str, kept: bool) -> None:
    """(L52) the retained-rows rule keeps a VARCHAR where a shard made a DATETIME: its
    default goes with it only where the server takes it there."""
    now = parse_table("create table t (a datetime(3) default current_timestamp(3))").column("a").default
    varchar = parse_table("create table t (a varchar(60))").column("a").type
    assert recast_default(now, varchar, flavor) == (now if kept else None)


# (what, statement, attribute path, expected value)
CREATE_STATEMENT = [
    ("name", "create table t (a int)", "name", TableName(None, "t")),
    ("qualified name", "create table `db`.`t` (a int)", "name", TableName("db", "t")),
    ("IF NOT EXISTS", "create table if not exists t (a int)", "if_not_exists", True),
    ("OR REPLACE", "create or replace table t (a int, b varchar(3) default 'x')", "or_replace", True),
    ("LIKE", "create table t like db.u", "like", TableName("db", "u")),
    ("(LIKE)", "create table t (like u)", "like", TableName(None, "u")),
    (
        "foreign key reported as ignored",
        "create table t (a int, constraint fk foreign key (a) references u (b))",
        "ignored",
        ("foreign key fk is not replicated",),
    ),
    (
        "foreign key kept with its columns",
        "create table t (a int, constraint fk foreign key (a) references u (b))",
        "foreign_keys.0.parts",
        (IndexPart("a"),),
    ),
    (
        "partitioning reported as ignored",
        "create table t (a int) partition by key (a)",
        "ignored",
        ("partitioning is not replicated",),
    ),
    (
        "table options that do not matter are reported",
        "create table t (a int) auto_increment=5 row_format=dynamic",
        "options.ignored",
        ("auto_increment=5", "row_format=dynamic"),
    ),
    (
        "inline REFERENCES reported as ignored",
        "create table t (a int references u (b))",
        "columns.0.ignored",
        ("REFERENCES (foreign keys are not replicated)",),
    ),
]


@pytest.mark.parametrize(
    ("sql", "path", "expected"), [r[1:] for r in CREATE_STATEMENT], ids=[r[0] for r in CREATE_STATEMENT]
)
def test_create_table_statement(sql: str, path: str, expected: object) -> None:
    statement = parse_ddl(sql)
    assert isinstance(statement, CreateTable)
    if path.startswith("foreign_keys.0."):
        statement = statement.foreign_keys[0]
        path = path.removeprefix("foreign_keys.0.")
    if path.startswith("columns.0."):
        statement = statement.columns[0]
        path = path.removeprefix("columns.0.")
    assert attr(statement, path) == expected


# -- ALTER TABLE specs: (what, statement, [(change class, {attribute path: value})]) ----------
ALTERS = [
    (
        "ADD COLUMN FIRST",
        "alter table t add column b int first",
        [(AddColumn, {"spec.column.name": "b", "position": Position(first=True)})],
    ),
    (
        "ADD without COLUMN, AFTER",
        "alter table t add c varchar(3) not null after b",
        [
            (
                AddColumn,
                {"spec.column.name": "c", "spec.column.nullable": False, "position": Position(after="b")},
            )
        ],
    ),
    ("ADD COLUMN at the end", "alter table t add column c int", [(AddColumn, {"position": None})]),
    (
        "ADD COLUMN IF NOT EXISTS",
        "alter table t add column if not exists c int",
        [(AddColumn, {"spec.column.name": "c", "if_not_exists": True})],
    ),
    (
        "ADD COLUMN (a, b)",
        "alter table t add column (d int, e varchar(3) default 'x')",
        [
            (AddColumn, {"spec.column.name": "d"}),
            (AddColumn, {"spec.column.name": "e", "spec.raw_default": RawValue("string", "x")}),
        ],
    ),
    (
        "ADD COLUMN with inline UNIQUE and CHECK",
        "alter table t add column c int unique check (c > 0)",
        [(AddColumn, {"spec.unique": True, "spec.checks.0.expression": "c > 0"})],
    ),
    ("DROP COLUMN", "alter table t drop column b", [(DropColumn, {"name": "b", "if_exists": False})]),
    ("DROP without COLUMN", "alter table t drop b", [(DropColumn, {"name": "b"})]),
    (
        "DROP COLUMN IF EXISTS",
        "alter table t drop column if exists b",
        [(DropColumn, {"name": "b", "if_exists": True})],
    ),
    (
        "MODIFY keeps the name",
        "alter table t modify b bigint not null default 3",
        [
            (
                ModifyColumn,
                {
                    "old_name": "b",
                    "spec.column.name": "b",
                    "spec.column.type.name": "bigint",
                    "spec.raw_default": RawValue("number", "3"),
                    "position": None,
                },
            )
        ],
    ),
    (
        "MODIFY COLUMN ... FIRST",
        "alter table t modify column b int first",
        [(ModifyColumn, {"old_name": "b", "position": Position(first=True)})],
    ),
    (
        "MODIFY ... AFTER",
        "alter table t modify b int after c",
        [(ModifyColumn, {"position": Position(after="c")})],
    ),
    (
        "CHANGE renames",
        "alter table t change b c int unsigned",
        [(ModifyColumn, {"old_name": "b", "spec.column.name": "c", "spec.column.type.unsigned": True})],
    ),
    (
        "CHANGE COLUMN IF EXISTS ... AFTER",
        "alter table t change column if exists b c int after a",
        [
            (
                ModifyColumn,
                {
                    "old_name": "b",
                    "spec.column.name": "c",
                    "if_exists": True,
                    "position": Position(after="a"),
                },
            )
        ],
    ),
    (
        "RENAME COLUMN",
        "alter table t rename column a to b",
        [(RenameColumn, {"old_name": "a", "new_name": "b"})],
    ),
    (
        "ALTER COLUMN SET DEFAULT",
        "alter table t alter column a set default 5",
        [(SetDefault, {"column": "a", "value": RawValue("number", "5")})],
    ),
    (
        "ALTER SET DEFAULT negative",
        "alter table t alter a set default -1",
        [(SetDefault, {"value": RawValue("number", "-1")})],
    ),
    (
        "ALTER SET DEFAULT string",
        "alter table t alter a set default 'x''y'",
        [(SetDefault, {"value": RawValue("string", "x'y")})],
    ),
    (
        "ALTER COLUMN DROP DEFAULT",
        "alter table t alter column a drop default",
        [(DropDefault, {"column": "a"})],
    ),
    (
        "ADD INDEX",
        "alter table t add index idx (a)",
        [(AddIndex, {"spec": IndexSpec("idx", IndexKind.PLAIN, (IndexPart("a"),), offset=18)})],
    ),
    (
        "ADD KEY unnamed, prefix, DESC",
        "alter table t add key (a, b(10) desc)",
        [
            (
                AddIndex,
                {
                    "spec.name": None,
                    "spec.kind": IndexKind.PLAIN,
                    "spec.parts": (IndexPart("a"), IndexPart("b", 10, descending=True)),
                },
            )
        ],
    ),
    (
        "ADD UNIQUE",
        "alter table t add unique (a)",
        [(AddIndex, {"spec.name": None, "spec.kind": IndexKind.UNIQUE})],
    ),
    (
        "ADD UNIQUE KEY name",
        "alter table t add unique key uk (a)",
        [(AddIndex, {"spec.name": "uk", "spec.kind": IndexKind.UNIQUE})],
    ),
    (
        "ADD UNIQUE INDEX name",
        "alter table t add unique index uk (a)",
        [(AddIndex, {"spec.name": "uk", "spec.kind": IndexKind.UNIQUE})],
    ),
    (
        "ADD CONSTRAINT name UNIQUE",
        "alter table t add constraint uk unique (a)",
        [(AddIndex, {"spec.name": "uk", "spec.kind": IndexKind.UNIQUE})],
    ),
    (
        "ADD PRIMARY KEY (a merged sqlglot token)",
        "alter table t add primary key (a, b)",
        [
            (
                AddIndex,
                {
                    "spec.name": "PRIMARY",
                    "spec.kind": IndexKind.PRIMARY,
                    "spec.parts": (IndexPart("a"), IndexPart("b")),
                },
            )
        ],
    ),
    (
        "ADD CONSTRAINT ... PRIMARY KEY",
        "alter table t add constraint pk primary key (a)",
        [(AddIndex, {"spec.name": "PRIMARY", "spec.kind": IndexKind.PRIMARY})],
    ),
    (
        "ADD FULLTEXT",
        "alter table t add fulltext (body)",
        [(AddIndex, {"spec.name": None, "spec.kind": IndexKind.FULLTEXT})],
    ),
    (
        "ADD FULLTEXT KEY name",
        "alter table t add fulltext key ft (body)",
        [(AddIndex, {"spec.name": "ft", "spec.kind": IndexKind.FULLTEXT})],
    ),
    (
        "ADD SPATIAL INDEX",
        "alter table t add spatial index sp (g)",
        [(AddIndex, {"spec.name": "sp", "spec.kind": IndexKind.SPATIAL})],
    ),
    (
        "ADD INDEX IF NOT EXISTS",
        "alter table t add index if not exists i (a)",
        [(AddIndex, {"spec.name": "i", "if_not_exists": True})],
    ),
    (
        "ADD INDEX USING BTREE",
        "alter table t add index i using btree (a)",
        [(AddIndex, {"spec.name": "i", "spec.parts": (IndexPart("a"),)})],
    ),
    ("DROP INDEX", "alter table t drop index i", [(DropIndex, {"name": "i", "if_exists": False})]),
    ("DROP KEY", "alter table t drop key i", [(DropIndex, {"name": "i"})]),
    (
        "DROP INDEX IF EXISTS",
        "alter table t drop index if exists i",
        [(DropIndex, {"name": "i", "if_exists": True})],
    ),
    ("DROP PRIMARY KEY", "alter table t drop primary key", [(DropPrimaryKey, {})]),
    (
        "RENAME INDEX",
        "alter table t rename index a to b",
        [(RenameIndex, {"old_name": "a", "new_name": "b"})],
    ),
    ("RENAME KEY", "alter table t rename key a to b", [(RenameIndex, {"old_name": "a", "new_name": "b"})]),
    (
        "ADD CHECK",
        "alter table t add check (a > 0)",
        [(AddCheck, {"spec": CheckSpec(None, "a > 0", True, offset=18)})],
    ),
    (
        "ADD CONSTRAINT ... CHECK NOT ENFORCED",
        "alter table t add constraint c check (a > 0) not enforced",
        [(AddCheck, {"spec.name": "c", "spec.enforced": False})],
    ),
    ("DROP CHECK", "alter table t drop check c", [(DropCheck, {"name": "c", "if_exists": False})]),
    (
        "DROP CHECK IF EXISTS",
        "alter table t drop check if exists c",
        [(DropCheck, {"name": "c", "if_exists": True})],
    ),
    (
        "DROP CONSTRAINT",
        "alter table t drop constraint c",
        [(DropConstraint, {"name": "c", "if_exists": False})],
    ),
    (
        "DROP CONSTRAINT IF EXISTS",
        "alter table t drop constraint if exists c",
        [(DropConstraint, {"if_exists": True})],
    ),
    (
        "ALTER CHECK NOT ENFORCED",
        "alter table t alter check c not enforced",
        [(AlterCheck, {"name": "c", "enforced": False})],
    ),
    (
        "ALTER CONSTRAINT ENFORCED",
        "alter table t alter constraint c enforced",
        [(AlterCheck, {"name": "c", "enforced": True})],
    ),
    (
        "DEFAULT CHARSET =",
        "alter table t default charset = latin1",
        [(SetOptions, {"options.charset": "latin1", "options.collation": None})],
    ),
    (
        "CHARACTER SET utf8 is utf8mb3",
        "alter table t character set utf8",
        [(SetOptions, {"options.charset": "utf8mb3"})],
    ),
    (
        "COLLATE alone",
        "alter table t collate utf8mb4_bin",
        [(SetOptions, {"options.charset": "utf8mb4", "options.collation": "utf8mb4_bin"})],
    ),
    ("COMMENT", "alter table t comment 'x'", [(SetOptions, {"options.comment": "x"})]),
    ("ENGINE", "alter table t engine = MyISAM", [(SetOptions, {"options.engine": "MyISAM"})]),
    (
        "AUTO_INCREMENT is reported as ignored",
        "alter table t auto_increment = 100",
        [(SetOptions, {"options.ignored": ("auto_increment = 100",)})],
    ),
    (
        "CONVERT TO CHARACTER SET",
        "alter table t convert to character set utf8mb4",
        [(ConvertCharset, {"charset": "utf8mb4", "collation": None})],
    ),
    (
        "CONVERT TO CHARSET ... COLLATE, utf8 spelling",
        "alter table t convert to charset utf8 collate utf8_bin",
        [(ConvertCharset, {"charset": "utf8mb3", "collation": "utf8mb3_bin"})],
    ),
    (
        "ALGORITHM= and LOCK= are ignored",
        "alter table t algorithm=inplace, lock = none",
        [(Ignored, {"reason": "execution option"}), (Ignored, {"reason": "execution option"})],
    ),
    ("FORCE is ignored", "alter table t force", [(Ignored, {"reason": "no schema effect"})]),
    (
        "ADD FOREIGN KEY is ignored (and carries its columns)",
        "alter table t add constraint fk foreign key (a) references u (b)",
        [
            (
                AddForeignKey,
                {
                    "reason": "foreign keys are not replicated",
                    "spec.name": "fk",
                    "spec.parts": (IndexPart("a"),),
                },
            )
        ],
    ),
    (
        "DROP FOREIGN KEY is not replicated, but followed",
        "alter table t drop foreign key if exists fk",
        [(DropForeignKey, {"reason": "foreign keys are not replicated", "name": "fk", "if_exists": True})],
    ),
    (
        "ADD PARTITION is ignored",
        "alter table t add partition (partition p3 values less than (30))",
        [(Ignored, {"reason": "partitioning is not replicated"})],
    ),
    (
        "ALTER INDEX visibility is ignored",
        "alter table t alter index i invisible",
        [(Ignored, {"reason": "index visibility does not change accepted rows"})],
    ),
    ("RENAME TO", "alter table t rename to u", [(RenameTo, {"new_name": TableName(None, "u")})]),
    ("RENAME AS qualified", "alter table t rename as db.u", [(RenameTo, {"new_name": TableName("db", "u")})]),
    (
        "several specs keep their order",
        "alter table t add column c int, drop column b, algorithm=inplace, rename column a to z",
        [
            (AddColumn, {"spec.column.name": "c"}),
            (DropColumn, {"name": "b"}),
            (Ignored, {}),
            (RenameColumn, {"new_name": "z"}),
        ],
    ),
    ("a trailing semicolon", "alter table t add column b int;", [(AddColumn, {"spec.column.name": "b"})]),
    (
        "comments",
        "alter table t /* why */ add column b int -- because\n, drop c",
        [(AddColumn, {"spec.column.name": "b"}), (DropColumn, {"name": "c"})],
    ),
    ("ALTER ONLINE IGNORE TABLE", "alter online ignore table t drop b", [(DropColumn, {"name": "b"})]),
    ("no specs", "alter table t", []),
]


@pytest.mark.parametrize(("sql", "expected"), [r[1:] for r in ALTERS], ids=[r[0] for r in ALTERS])
def test_alter_table(sql: str, expected: list[tuple[type, dict[str, object]]]) -> None:
    statement = parse_ddl(sql)
    assert isinstance(statement, AlterTable), statement
    assert statement.name == TableName(None, "t")
    assert [type(c) for c in statement.changes] == [cls for cls, _ in expected]
    for change, (_, attributes) in zip(statement.changes, expected, strict=True):
        for path, value in attributes.items():
            if ".checks.0." in path:
                head, tail = path.split(".checks.0.")
                assert attr(attr(change, head).checks[0], tail) == value
            else:
                assert attr(change, path) == value, path


def test_alter_specs_know_their_text_and_offset() -> None:
    sql = "ALTER TABLE t\n  ADD COLUMN c INT AFTER a,\n  DROP COLUMN b"
    statement = parse_ddl(sql)
    assert isinstance(statement, AlterTable)
    assert [(c.text, sql[c.offset :].startswith(c.text)) for c in statement.changes] == [
        ("ADD COLUMN c INT AFTER a", True),
        ("DROP COLUMN b", True),
    ]


def test_alter_if_exists() -> None:
    statement = parse_ddl("alter table if exists t drop column b")
    assert isinstance(statement, AlterTable) and statement.if_exists


# -- CREATE INDEX / DROP INDEX are ALTERs of their table --------------------------------------
INDEX_STATEMENTS = [
    (
        "CREATE INDEX",
        "create index i on t (a)",
        TableName(None, "t"),
        [(AddIndex, {"spec.name": "i", "spec.kind": IndexKind.PLAIN, "spec.parts": (IndexPart("a"),)})],
    ),
    (
        "CREATE UNIQUE INDEX",
        "create unique index i on t (a, b)",
        TableName(None, "t"),
        [(AddIndex, {"spec.kind": IndexKind.UNIQUE, "spec.parts": (IndexPart("a"), IndexPart("b"))})],
    ),
    (
        "CREATE FULLTEXT INDEX",
        "create fulltext index i on t (body)",
        TableName(None, "t"),
        [(AddIndex, {"spec.kind": IndexKind.FULLTEXT})],
    ),
    (
        "CREATE SPATIAL INDEX",
        "create spatial index i on t (g)",
        TableName(None, "t"),
        [(AddIndex, {"spec.kind": IndexKind.SPATIAL})],
    ),
    (
        "CREATE INDEX IF NOT EXISTS",
        "create index if not exists i on t (a)",
        TableName(None, "t"),
        [(AddIndex, {"if_not_exists": True})],
    ),
    (
        "CREATE INDEX USING, prefix and DESC on a qualified table",
        "create index i using btree on db.t (a(10) desc)",
        TableName("db", "t"),
        [(AddIndex, {"spec.parts": (IndexPart("a", 10, descending=True),)})],
    ),
    (
        "CREATE INDEX ... ALGORITHM LOCK",
        "create index i on t (a) algorithm=inplace lock=none",
        TableName(None, "t"),
        [
            (AddIndex, {"spec.name": "i"}),
            (Ignored, {"reason": "execution option"}),
            (Ignored, {"reason": "execution option"}),
        ],
    ),
    (
        "DROP INDEX ... ON",
        "drop index i on t",
        TableName(None, "t"),
        [(DropIndex, {"name": "i", "if_exists": False})],
    ),
    (
        "DROP INDEX IF EXISTS ... ON qualified",
        "drop index if exists i on db.t",
        TableName("db", "t"),
        [(DropIndex, {"name": "i", "if_exists": True})],
    ),
    (
        "DROP INDEX `PRIMARY`",
        "drop index `PRIMARY` on t",
        TableName(None, "t"),
        [(DropIndex, {"name": "PRIMARY"})],
    ),
    (
        "DROP INDEX ... ALGORITHM",
        "drop index i on t algorithm=inplace",
        TableName(None, "t"),
        [(DropIndex, {"name": "i"}), (Ignored, {"reason": "execution option"})],
    ),
]


@pytest.mark.parametrize(
    ("sql", "name", "expected"), [r[1:] for r in INDEX_STATEMENTS], ids=[r[0] for r in INDEX_STATEMENTS]
)
def test_index_statements(sql: str, name: TableName, expected: list[tuple[type, dict[str, object]]]) -> None:
    statement = parse_ddl(sql)
    assert isinstance(statement, AlterTable), statement
    assert statement.name == name
    assert [type(c) for c in statement.changes] == [cls for cls, _ in expected]
    for change, (_, attributes) in zip(statement.changes, expected, strict=True):
        for path, value in attributes.items():
            assert attr(change, path) == value, path


# -- other table statements: (what, statement, class, {attribute: value}) ------------------------
STATEMENTS = [
    (
        "RENAME TABLE (sqlglot swallows it as a command)",
        "RENAME TABLE a TO b",
        RenameTables,
        {"pairs": ((TableName(None, "a"), TableName(None, "b")),)},
    ),
    (
        "RENAME TABLE several pairs, qualified",
        "rename table a to b, db.c to db2.d",
        RenameTables,
        {
            "pairs": (
                (TableName(None, "a"), TableName(None, "b")),
                (TableName("db", "c"), TableName("db2", "d")),
            )
        },
    ),
    (
        "RENAME TABLE with quoted names, comments and ;",
        "rename /* x */ table `a b` to `c``d`;",
        RenameTables,
        {"pairs": ((TableName(None, "a b"), TableName(None, "c`d")),)},
    ),
    (
        "RENAME TABLES",
        "rename tables a to b",
        RenameTables,
        {"pairs": ((TableName(None, "a"), TableName(None, "b")),)},
    ),
    ("DROP TABLE", "drop table a", DropTables, {"names": (TableName(None, "a"),), "if_exists": False}),
    (
        "DROP TABLE IF EXISTS a, b",
        "drop table if exists a, db.b",
        DropTables,
        {"names": (TableName(None, "a"), TableName("db", "b")), "if_exists": True},
    ),
    (
        "DROP TABLES ... CASCADE",
        "drop tables a, b cascade",
        DropTables,
        {"names": (TableName(None, "a"), TableName(None, "b"))},
    ),
    ("TRUNCATE TABLE", "truncate table db.t", TruncateTable, {"name": TableName("db", "t")}),
    ("TRUNCATE without TABLE", "truncate t", TruncateTable, {"name": TableName(None, "t")}),
    ("DROP DATABASE", "drop database shard1", DropDatabase, {"database": "shard1"}),
    ("DROP SCHEMA IF EXISTS", "drop schema if exists `shard 2`", DropDatabase, {"database": "shard 2"}),
    ("BEGIN", "BEGIN", OtherStatement, {"kind": "BEGIN"}),
    ("COMMIT", "commit", OtherStatement, {"kind": "COMMIT"}),
    ("CREATE DATABASE", "create database x", OtherStatement, {"kind": "CREATE DATABASE"}),
    ("GRANT", "grant all on *.* to 'u'@'%'", OtherStatement, {"kind": "GRANT"}),
    ("CREATE VIEW", "create view v as select 1", OtherStatement, {"kind": "CREATE VIEW"}),
    (
        "CREATE OR REPLACE VIEW",
        "create or replace view v as select 1",
        OtherStatement,
        {"kind": "CREATE VIEW"},
    ),
    ("ALTER VIEW", "alter view v as select 2", OtherStatement, {"kind": "ALTER VIEW"}),
    ("DROP VIEW", "drop view v", OtherStatement, {"kind": "DROP VIEW"}),
    (
        "CREATE TEMPORARY TABLE",
        "create temporary table tmp (a int)",
        OtherStatement,
        {"kind": "CREATE TEMPORARY TABLE"},
    ),
    ("DROP TEMPORARY TABLE", "drop temporary table tmp", OtherStatement, {"kind": "DROP TEMPORARY TABLE"}),
    ("empty statement", " ; ", OtherStatement, {"kind": "empty"}),
]


@pytest.mark.parametrize(
    ("sql", "cls", "attributes"), [r[1:] for r in STATEMENTS], ids=[r[0] for r in STATEMENTS]
)
def test_statement(sql: str, cls: type, attributes: dict[str, object]) -> None:
    statement = parse_ddl(sql)
    assert type(statement) is cls, statement
    assert statement.sql == sql
    for path, value in attributes.items():
        assert attr(statement, path) == value, path


# -- unsupported statements: (what, statement, reason fragment, line, column, token there, tables)
UNSUPPORTED = [
    (
        "a system-versioned table's own period columns",
        "CREATE TABLE t (\n  a INT,\n  s BIGINT UNSIGNED GENERATED ALWAYS AS ROW START INVISIBLE,\n"
        "  e BIGINT UNSIGNED GENERATED ALWAYS AS ROW END INVISIBLE,\n  PERIOD FOR SYSTEM_TIME (s, e)\n"
        ") WITH SYSTEM VERSIONING",
        "a system-versioned table's own ROW START/END columns are not supported",
        3,
        41,
        "ROW START",
        (TableName(None, "t"),),
    ),
    (
        "typo'd type",
        "CREATE TABLE t (\n  a INT,\n  b INTT\n)",
        "unknown data type INTT",
        3,
        5,
        "INTT",
        (TableName(None, "t"),),
    ),
    (
        "typo'd type in ALTER",
        "ALTER TABLE db.t ADD COLUMN b VARCHR(3)",
        "unknown data type VARCHR",
        1,
        31,
        "VARCHR",
        (TableName("db", "t"),),
    ),
    (
        "unknown ALTER spec",
        "ALTER TABLE db.t ADD COLUMN b INT,\n  FROBNICATE c",
        "unknown ALTER TABLE specification",
        2,
        3,
        "FROBNICATE",
        (TableName("db", "t"),),
    ),
    (
        "unknown column attribute",
        "alter table t add b varchar(10) notnull",
        "unexpected column attribute",
        1,
        33,
        "notnull",
        (TableName(None, "t"),),
    ),
    (
        "CREATE TABLE ... AS SELECT",
        "create table t as select 1 as a",
        "CREATE TABLE ... SELECT",
        1,
        16,
        "as",
        (TableName(None, "t"),),
    ),
    (
        "CREATE TABLE (...) SELECT",
        "create table t (a int) select 1 as a",
        "CREATE TABLE ... SELECT is not supported",
        1,
        31,
        "1",
        (TableName(None, "t"),),
    ),
    (
        "TRUNCATE PARTITION",
        "alter table t truncate partition p0",
        "TRUNCATE PARTITION",
        1,
        15,
        "truncate",
        (TableName(None, "t"),),
    ),
    (
        "DROP PARTITION",
        "alter table t drop partition p0",
        "DROP PARTITION",
        1,
        20,
        "partition",
        (TableName(None, "t"),),
    ),
    (
        "EXCHANGE PARTITION",
        "alter table t exchange partition p0 with table u",
        "EXCHANGE PARTITION",
        1,
        15,
        "exchange",
        (TableName(None, "t"),),
    ),
    (
        "DEFAULT without a value",
        "create table t (a int default)",
        "expected a value",
        1,
        30,
        ")",
        (TableName(None, "t"),),
    ),
    (
        "MODIFY without a column",
        "alter table t modify",
        "expected a column name",
        1,
        21,
        "",
        (TableName(None, "t"),),
    ),
    (
        "AFTER without a column",
        "alter table t add b int after",
        "expected a column name",
        1,
        30,
        "",
        (TableName(None, "t"),),
    ),
    (
        "a column's CHARACTER SET DEFAULT (a table's is its database's; the server refuses a column's)",
        "alter table t add b varchar(5) character set default",
        "CHARACTER SET DEFAULT is the database's character set, for a table only",
        1,
        46,
        "default",
        (TableName(None, "t"),),
    ),
    (
        "VARCHAR without a length",
        "create table t (a varchar)",
        "VARCHAR needs a length",
        1,
        26,
        ")",
        (TableName(None, "t"),),
    ),
    (
        "CREATE INDEX with trailing junk",
        "create index i on db.t (a) bogus",
        "unexpected text",
        1,
        28,
        "bogus",
        (TableName("db", "t"),),
    ),
    (
        "DROP INDEX with trailing junk",
        "drop index i on t bogus",
        "unexpected text",
        1,
        19,
        "bogus",
        (TableName(None, "t"),),
    ),
    (
        "a table without columns",
        "create table t (key (a))",
        "a table needs at least one column",
        1,
        1,
        "create",
        (TableName(None, "t"),),
    ),
]


@pytest.mark.parametrize(
    ("sql", "reason", "line", "column", "token", "tables"),
    [r[1:] for r in UNSUPPORTED],
    ids=[r[0] for r in UNSUPPORTED],
)
def test_unsupported(
    sql: str, reason: str, line: int, column: int, token: str, tables: tuple[TableName, ...]
) -> None:
    statement = parse_ddl(sql)
    assert isinstance(statement, UnsupportedDDL), statement
    assert reason in statement.reason
    assert statement.tables == tables
    message = statement.message
    assert reason in message
    assert f"at line {line}, column {column}" in message
    assert shorten(sql) in message  # the message names the statement
    assert sql.split("\n")[line - 1][column - 1 :].startswith(token)


# -- garbage: (what, statement) -- reported as unsupported, naming the statement, never raised --
GARBAGE = [
    ("unterminated string", "create table t (a varchar(3) default 'abc)"),
    ("ALTER TABLE without a table", "alter table"),
    ("CREATE TABLE without a table", "create table"),
    ("DROP TABLE without a table", "drop table"),
    ("RENAME TABLE without tables", "rename table"),
    ("ADD without a column", "alter table t add"),
]


@pytest.mark.parametrize("sql", [r[1] for r in GARBAGE], ids=[r[0] for r in GARBAGE])
def test_unsupported_never_raises_on_garbage(sql: str) -> None:
    statement = parse_ddl(sql)
    assert isinstance(statement, UnsupportedDDL), sql
    assert sql.split()[0] in statement.message


# -- names: unqualified, qualified, default_schema -------------------------------------------
NAMES = [
    ("unqualified stays unqualified", "alter table t drop b", None, "name", TableName(None, "t")),
    ("default_schema qualifies", "alter table t drop b", "db", "name", TableName("db", "t")),
    (
        "a qualified name keeps its schema",
        "alter table other.t drop b",
        "db",
        "name",
        TableName("other", "t"),
    ),
    ("quoted names with dots", "alter table `my.db`.`t.1` drop b", None, "name", TableName("my.db", "t.1")),
    ("CREATE TABLE", "create table t (a int)", "db", "name", TableName("db", "t")),
    ("CREATE TABLE LIKE", "create table t like u", "db", "like", TableName("db", "u")),
    ("CREATE INDEX", "create index i on t (a)", "db", "name", TableName("db", "t")),
    ("ALTER ... RENAME TO", "alter table t rename to u", "db", "changes.0.new_name", TableName("db", "u")),
    (
        "RENAME TABLE",
        "rename table a to b, x.c to d",
        "db",
        "pairs",
        ((TableName("db", "a"), TableName("db", "b")), (TableName("x", "c"), TableName("db", "d"))),
    ),
    ("DROP TABLE", "drop table a, x.b", "db", "names", (TableName("db", "a"), TableName("x", "b"))),
    ("TRUNCATE", "truncate t", "db", "name", TableName("db", "t")),
    ("UnsupportedDDL.tables", "alter table t frobnicate", "db", "tables", (TableName("db", "t"),)),
]


@pytest.mark.parametrize(
    ("sql", "schema", "path", "expected"), [r[1:] for r in NAMES], ids=[r[0] for r in NAMES]
)
def test_names(sql: str, schema: str | None, path: str, expected: object) -> None:
    statement = parse_ddl(sql, default_schema=schema)
    if path.startswith("changes.0."):
        statement = statement.changes[0]  # type: ignore[union-attr]
        path = path.removeprefix("changes.0.")
    assert attr(statement, path) == expected


# -- expressions: (what, as written in DDL, as MariaDB shows it in SHOW CREATE TABLE) --------------
SAME_EXPRESSIONS = [
    ("parentheses around comparisons under AND", "(a > 1) and (b < 'x')", "`a` > 1 and `b` < 'x'"),
    ("AND under OR", "(a > 1 and a < 5) or b = 'x'", "`a` > 1 and `a` < 5 or `b` = 'x'"),
    ("parentheses around a column", "((a)) > 1", "`a` > 1"),
    ("a product under a sum", "a + (a * 2) > 0", "`a` + `a` * 2 > 0"),
    ("a comparison as the left operand of =", "(a > 1) = 1", "`a` > 1 = 1"),
    ("a parenthesised literal", "a = (1)", "`a` = 1"),
    ("unary minus of a column", "-(a) < 1", "-`a` < 1"),
    ("the whole expression in parentheses", "(a + 1)", "`a` + 1"),
    ("NOT of a comparison is the opposite comparison", "not (a > 5)", "`a` <= 5"),
    ("! is NOT", "!(a >= 1)", "`a` < 1"),
    ("NOT (=) is <>", "not (a = 1)", "`a` <> 1"),
    ("De Morgan", "not (a > 5 and b < 'x')", "`a` <= 5 or `b` >= 'x'"),
    ("NOT of a column is = 0", "not a", "`a` = 0"),
    ("NOT NOT of a condition is the condition", "not not (a > 1)", "`a` > 1"),
    ("NOT (IS NULL) is IS NOT NULL", "not (a is null)", "`a` is not null"),
    ("NOT (LIKE) is NOT LIKE", "not (b like 'x')", "`b`  not like 'x'"),
    ("NOT (IN) is NOT IN", "not (a in (1,2))", "`a` not in (1,2)"),
    ("NOT (BETWEEN) is NOT BETWEEN", "not (a between 1 and 2)", "`a` not between 1 and 2"),
    ("IN of one value is =", "a in (7)", "`a` = 7"),
    ("NOT IN of one value is <>", "a not in (7)", "`a` <> 7"),
    ("NOT REGEXP", "b not regexp 'x'", "!(`b` regexp 'x')"),
    ("<=> has no opposite", "not (a <=> 1)", "!(`a` <=> 1)"),
    ("NOW() is CURRENT_TIMESTAMP()", "now() + interval 1 day", "current_timestamp() + interval 1 day"),
    ("upper/lower case and backticks", "A + `b`", "`a` + `B`"),
]


@pytest.mark.parametrize(
    ("written", "shown"), [r[1:] for r in SAME_EXPRESSIONS], ids=[r[0] for r in SAME_EXPRESSIONS]
)
def test_expression_as_the_server_stores_it(written: str, shown: str) -> None:
    assert canonical_expression(written).sql == canonical_expression(shown).sql


DIFFERENT_EXPRESSIONS = [
    ("a sum under a product", "(a + 1) * 2", "a + 1 * 2"),
    ("a difference as the right operand", "a - (b - c)", "a - b - c"),
    ("OR under AND", "a > 1 and (b > 1 or c > 1)", "a > 1 and b > 1 or c > 1"),
    ("a comparison as the right operand of =", "a = (b > 1)", "a = b > 1"),
    ("a quotient as the right operand", "a / (b * c)", "a / b * c"),
]


@pytest.mark.parametrize(
    ("one", "other"), [r[1:] for r in DIFFERENT_EXPRESSIONS], ids=[r[0] for r in DIFFERENT_EXPRESSIONS]
)
def test_parentheses_that_matter_stay(one: str, other: str) -> None:
    assert canonical_expression(one).sql != canonical_expression(other).sql
    # and the canonical text reads back as the same expression
    assert canonical_expression(canonical_expression(one).sql).sql == canonical_expression(one).sql


def test_regexp_is_written_as_mariadb_reads_it() -> None:
    assert canonical_expression("b rlike '^x'").sql == "`b` REGEXP '^x'"


# -- every statement the optimistic shard-DDL proposal writes (docs/design.md): (where, statement, class, changes) -
SEED = [
    (
        "DDL awareness: drop column",
        "alter table tbl01 drop column col2;",
        AlterTable,
        [(DropColumn, {"name": "col2"})],
    ),
    (
        "DDL awareness: insert is no DDL",
        "insert into tbl01 (col1, col3) values (11, 13);",
        OtherStatement,
        [],
    ),
    (
        "CRDTs: modify column",
        "alter table tbl modify column col2 int default null;",
        AlterTable,
        [(ModifyColumn, {"old_name": "col2", "spec.raw_default": RawValue("null")})],
    ),
    (
        "schema diffs: change ... after",
        "alter table T change column a d int after c;",
        AlterTable,
        [(ModifyColumn, {"old_name": "a", "spec.column.name": "d", "position": Position(after="c")})],
    ),
    (
        "schema diffs: drop and add",
        "alter table T drop column a, add column d int;",
        AlterTable,
        [(DropColumn, {"name": "a"}), (AddColumn, {"spec.column.name": "d"})],
    ),
    (
        "schema diffs: rename chain",
        "alter table T rename column a to b, rename column b to c, rename column c to d;",
        AlterTable,
        [
            (RenameColumn, {"new_name": "b"}),
            (RenameColumn, {"new_name": "c"}),
            (RenameColumn, {"new_name": "d"}),
        ],
    ),
    (
        "error handling: add float",
        "alter table tbl02 add column b float;",
        AlterTable,
        [(AddColumn, {"spec.column.type.name": "float"})],
    ),
    (
        "error handling: add datetime",
        "alter table tbl01 add column b datetime;",
        AlterTable,
        [(AddColumn, {"spec.column.type.name": "datetime"})],
    ),
    (
        "error handling: modify to text",
        "alter table tbl01 modify column c text;",
        AlterTable,
        [(ModifyColumn, {"spec.column.type.name": "text"})],
    ),
    (
        "modifying types: set default",
        "alter table tbl01 alter column col2 set default (1 + 1);",
        AlterTable,
        [(SetDefault, {"column": "col2", "value": RawValue("expr", "1 + 1")})],
    ),
    (
        "modifying types: drop default",
        "alter table tbl01 alter column col2 drop default;",
        AlterTable,
        [(DropDefault, {"column": "col2"})],
    ),
    (
        "modifying types: change to itself",
        "alter table tbl01 change column col2 col2 bigint;",
        AlterTable,
        [(ModifyColumn, {"old_name": "col2", "spec.column.name": "col2"})],
    ),
    (
        "checks: add check",
        "alter table tbl01 add check (col2 > 0);",
        AlterTable,
        [(AddCheck, {"spec.name": None})],
    ),
    (
        "checks: drop check",
        "alter table tbl01 drop check tbl01_chk_1;",
        AlterTable,
        [(DropCheck, {"name": "tbl01_chk_1"})],
    ),
    (
        "checks: alter check not enforced",
        "alter table tbl01 alter check c not enforced;",
        AlterTable,
        [(AlterCheck, {"enforced": False})],
    ),
    (
        "indices: add spatial key",
        "alter table tbl01 add spatial key name (cols);",
        AlterTable,
        [(AddIndex, {"spec.kind": IndexKind.SPATIAL, "spec.name": "name"})],
    ),
    (
        "indices: add fulltext key",
        "alter table tbl01 add fulltext key name (cols);",
        AlterTable,
        [(AddIndex, {"spec.kind": IndexKind.FULLTEXT})],
    ),
    (
        "indices: add unique key",
        "alter table tbl01 add unique key name (cols);",
        AlterTable,
        [(AddIndex, {"spec.kind": IndexKind.UNIQUE})],
    ),
    ("indices: drop key", "alter table tbl01 drop key name;", AlterTable, [(DropIndex, {"name": "name"})]),
    (
        "indices: create spatial index",
        "create spatial index name on tbl01 (cols);",
        AlterTable,
        [(AddIndex, {"spec.kind": IndexKind.SPATIAL})],
    ),
    (
        "indices: create index",
        "create index name on tbl01 (cols);",
        AlterTable,
        [(AddIndex, {"spec.kind": IndexKind.PLAIN})],
    ),
    ("indices: drop index", "drop index name on tbl01;", AlterTable, [(DropIndex, {"name": "name"})]),
    (
        "indices: modify ... unique",
        "alter table tbl01 modify column col02 int unique;",
        AlterTable,
        [(ModifyColumn, {"spec.unique": True})],
    ),
    (
        "indices: rename key",
        "alter table tbl01 rename key old_name to new_name;",
        AlterTable,
        [(RenameIndex, {"old_name": "old_name", "new_name": "new_name"})],
    ),
    (
        "adding columns: not null unique",
        "alter table tbl01 add column col5 int not null unique;",
        AlterTable,
        [(AddColumn, {"spec.unique": True, "spec.column.nullable": False})],
    ),
    (
        "adding columns: not null default",
        "alter table tbl add column col6 int not null default 3;",
        AlterTable,
        [(AddColumn, {"spec.raw_default": RawValue("number", "3")})],
    ),
    (
        "adding columns: add unique key",
        "alter table tbl add unique key col5 (col5);",
        AlterTable,
        [(AddIndex, {"spec.name": "col5"})],
    ),
    ("renaming: update is no DDL", "update tbl set b = a where a is not null;", OtherStatement, []),
    (
        "generated: add generated",
        "alter table tbl01 add column b int as (100 / a);",
        AlterTable,
        [(AddColumn, {"spec.column.generated": Generated("100 / `a`", stored=False)})],
    ),
    (
        "stored generated: modify to stored",
        "alter table tbl01 modify column b int as (a - 1) stored;",
        AlterTable,
        [(ModifyColumn, {"spec.column.generated": Generated("`a` - 1", stored=True)})],
    ),
    (
        "stored generated: set default null",
        "alter table tbl alter column b set default null;",
        AlterTable,
        [(SetDefault, {"value": RawValue("null")})],
    ),
    ("tables: create", "create table tbl99 (a int);", CreateTable, []),
    ("tables: drop", "drop table tbl02;", DropTables, []),
    ("tables: recover (TiDB) is no table DDL of ours", "recover table tbl02;", OtherStatement, []),
    ("tables: rename", "rename table tbl01 to irrelevant_table;", RenameTables, []),
]


@pytest.mark.parametrize(("sql", "cls", "expected"), [r[1:] for r in SEED], ids=[r[0] for r in SEED])
def test_seed_statement(sql: str, cls: type, expected: list[tuple[type, dict[str, object]]]) -> None:
    statement = parse_ddl(sql)
    assert type(statement) is cls, statement
    if isinstance(statement, AlterTable):
        assert [type(c) for c in statement.changes] == [c for c, _ in expected]
        for change, (_, attributes) in zip(statement.changes, expected, strict=True):
            for path, value in attributes.items():
                assert attr(change, path) == value, path


# A DDL under `SET STATEMENT ... FOR` is the DDL when the variables cannot change the table it
# makes; else unsupported, naming the variable and the way out (the shard pauses on it).
SET_STATEMENT = [
    # id, sql, the statement it is (or None: unsupported), what the reason names
    ("timeout", "SET STATEMENT max_statement_time=60 FOR ALTER TABLE t ADD c INT", AlterTable, None),
    (
        "strict-modes-and-lock-wait",
        "set statement sql_mode='STRICT_TRANS_TABLES,NO_ZERO_DATE', lock_wait_timeout = 5 "
        "for create table t (a int)",
        CreateTable,
        None,
    ),
    ("foreign-key-checks", "SET STATEMENT foreign_key_checks=0 FOR DROP TABLE t, u", DropTables, None),
    (
        "ansi-quotes",
        "SET STATEMENT sql_mode='ANSI_QUOTES' FOR ALTER TABLE t ADD c INT",
        None,
        "sql_mode with ANSI_QUOTES",
    ),
    (
        "explicit-defaults",
        "SET STATEMENT explicit_defaults_for_timestamp=0 FOR ALTER TABLE t ADD c TIMESTAMP",
        None,
        "SET STATEMENT explicit_defaults_for_timestamp",
    ),
    ("not-a-table", "SET STATEMENT max_statement_time=1 FOR GRANT ALL ON *.* TO x", OtherStatement, None),
]


@pytest.mark.parametrize(
    ("sql", "cls", "names"), [r[1:] for r in SET_STATEMENT], ids=[r[0] for r in SET_STATEMENT]
)
def test_a_ddl_under_set_statement_is_the_ddl_or_says_which_variable_it_cannot_follow(
    sql: str, cls: type | None, names: str | None
) -> None:
    statement = parse_ddl(sql, default_schema="db")
    inner = parse_ddl(sql[sql.upper().index(" FOR ") + 5 :], default_schema="db")
    if cls is None:
        assert isinstance(statement, UnsupportedDDL), statement
        assert names in statement.reason and "shardctl set-schema" in statement.reason
        assert statement.tables == (TableName("db", "t"),)  # the shard that made it pauses
        return
    assert isinstance(statement, cls), statement
    assert statement.sql == sql
    # the same statement but for offsets, which count in the whole text
    assert re.sub(r"offset=\d+", "", repr(replace(statement, sql=""))) == re.sub(
        r"offset=\d+", "", repr(replace(inner, sql=""))
    )
    if isinstance(statement, AlterTable):
        assert all(sql[c.offset :].startswith(c.text) for c in statement.changes)
