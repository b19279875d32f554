"""lattice.apply (apply.apply_changes), one row per rule: a statement applied to a small table gives the
table the server would hold (written as the CREATE TABLE it would show), or the
server's error code. Agreement with a real MariaDB is in tests/server/test_ddl_against_mariadb.py;
the rows marked "permissive" are where MariaDB refuses and we follow MySQL on purpose."""

from __future__ import annotations

import pytest

from lattice import (
    AlterTable,
    CreateTable,
    SchemaError,
    Table,
    apply,
    build_table,
    parse,
    parse_table,
    render_table,
)

UPSTREAMS = ("mariadb", "mysql")

BASE = """CREATE TABLE t (
  id int NOT NULL AUTO_INCREMENT,
  a int DEFAULT NULL,
  b varchar(20) DEFAULT NULL,
  c int NOT NULL DEFAULT 0,
  PRIMARY KEY (id),
  KEY ab (a, b),
  UNIQUE KEY c (c),
  CONSTRAINT ck CHECK (a > 0)
) DEFAULT CHARSET=utf8mb4"""

# A table whose columns are referenced by a generated column, a key and two checks.
REFS = """CREATE TABLE t (
  a int, b int, c int, g int AS (a + b) VIRTUAL,
  KEY ka (a), KEY kab (a, b),
  CONSTRAINT ca CHECK (a > 0), CONSTRAINT cab CHECK (a < b)
) DEFAULT CHARSET=utf8mb4"""

TWO = "CREATE TABLE t (a int, b int) DEFAULT CHARSET=utf8mb4"
LATIN1 = """CREATE TABLE t (
  a tinytext, b text, c mediumtext, d varchar(100), e char(10) NOT NULL DEFAULT 'x',
  f enum('p','q'), g varchar(20000), h varbinary(10), i int
) DEFAULT CHARSET=latin1"""


def alter(before: str, statement: str, upstream: str = "mariadb") -> Table:
    table = parse_table(before, upstream=upstream)
    parsed = parse(statement)
    assert isinstance(parsed, AlterTable), parsed
    return apply(table, parsed.changes, upstream=upstream)


def expect(sql: str, upstream: str = "mariadb") -> Table:
    return parse_table(sql, upstream=upstream)


# (what, table before, statement, table after)
ROWS = [
    # -- columns
    (
        "ADD COLUMN: nullable with default NULL",
        TWO,
        "alter table t add column c int",
        "create table t (a int, b int, c int default null) default charset=utf8mb4",
    ),
    (
        "ADD COLUMN NOT NULL: no default",
        TWO,
        "alter table t add c varchar(3) not null",
        "create table t (a int, b int, c varchar(3) not null) default charset=utf8mb4",
    ),
    (
        "ADD COLUMN (c, d)",
        TWO,
        "alter table t add column (c int not null default 1, d text)",
        "create table t (a int, b int, c int not null default 1, d text) default charset=utf8mb4",
    ),
    (
        "ADD COLUMN IF NOT EXISTS of an existing column is a no-op",
        TWO,
        "alter table t add column if not exists a bigint",
        TWO,
    ),
    (
        "ADD COLUMN with inline PRIMARY KEY, UNIQUE and CHECK (named after the column on MariaDB)",
        TWO,
        "alter table t add column c int primary key, add d int unique check (d > 0)",
        "create table t (a int, b int, c int not null, d int, primary key (c), unique key d (d),"
        " constraint d check (d > 0)) default charset=utf8mb4",
    ),
    (
        "ADD COLUMN AUTO_INCREMENT PRIMARY KEY",
        TWO,
        "alter table t add id int auto_increment primary key first",
        "create table t (id int not null auto_increment, a int, b int, primary key (id)) default charset=utf8mb4",
    ),
    ("DROP COLUMN", TWO, "alter table t drop column b", "create table t (a int) default charset=utf8mb4"),
    (
        "DROP COLUMN IF EXISTS of a missing column is a no-op",
        TWO,
        "alter table t drop column if exists z",
        TWO,
    ),
    (
        "DROP COLUMN drops its single-column key and its own check",
        REFS,
        "alter table t drop column g, drop column c",
        "create table t (a int, b int, key ka (a), key kab (a, b), constraint ca check (a > 0),"
        " constraint cab check (a < b)) default charset=utf8mb4",
    ),
    (
        "DROP COLUMN shrinks a multi-column key (permissive: MySQL)",
        BASE,
        "alter table t drop column b",
        BASE.replace("  b varchar(20) DEFAULT NULL,\n", "").replace("KEY ab (a, b)", "KEY ab (a)"),
    ),
    (
        "DROP COLUMN removes a key whose columns all go",
        REFS,
        "alter table t drop column g, drop column a, drop column b",
        "create table t (c int) default charset=utf8mb4",
    ),
    (
        "DROP COLUMN and DROP INDEX of its key in one statement",
        TWO.replace("b int", "b int, key (a), key (b)"),
        "alter table t drop column a, drop index a",
        "create table t (b int, key b (b)) default charset=utf8mb4",
    ),
    (
        "DROP COLUMN with a check on it alone drops the check",
        BASE,
        "alter table t drop column a",
        BASE.replace("  a int DEFAULT NULL,\n", "")
        .replace("KEY ab (a, b)", "KEY ab (b)")
        .replace(",\n  CONSTRAINT ck CHECK (a > 0)", ""),
    ),
    (
        "DROP COLUMN of every column a check reads drops the check",
        REFS,
        "alter table t drop column g, drop column a, drop column b, add column d int",
        "create table t (c int, d int) default charset=utf8mb4",
    ),
    (
        "DROP COLUMN then a check on it in the same statement",
        REFS,
        "alter table t drop column g, drop constraint cab, drop column a",
        "create table t (b int, c int, key kab (b)) default charset=utf8mb4",
    ),
    (
        "DROP COLUMN and re-ADD: keys follow the new column (MariaDB), the check on it alone goes",
        REFS,
        "alter table t drop column c, drop column g, drop constraint cab, drop column a, add column a int",
        "create table t (b int, a int, key ka (a), key kab (a, b)) default charset=utf8mb4",
    ),
    (
        "DROP a column a generated column reads, with the generated column",
        REFS,
        "alter table t drop column a, drop column g, drop constraint ca, drop constraint cab",
        "create table t (b int, c int, key kab (b)) default charset=utf8mb4",
    ),
    (
        "MODIFY type, NULL, default",
        TWO,
        "alter table t modify a bigint unsigned not null default 5",
        "create table t (a bigint unsigned not null default 5, b int) default charset=utf8mb4",
    ),
    (
        "MODIFY ... UNIQUE adds a key named after the column",
        TWO,
        "alter table t modify b int unique",
        "create table t (a int, b int, unique key b (b)) default charset=utf8mb4",
    ),
    (
        "MODIFY a PRIMARY KEY column to NULL keeps it NOT NULL",
        BASE,
        "alter table t modify id int null auto_increment",
        BASE,
    ),
    (
        "CHANGE renames in keys, checks and generated columns",
        REFS,
        "alter table t change a z bigint",
        "create table t (z bigint, b int, c int, g int as (z + b) virtual, key ka (z), key kab (z, b),"
        " constraint ca check (z > 0), constraint cab check (z < b)) default charset=utf8mb4",
    ),
    (
        "RENAME COLUMN renames in keys, checks and generated columns",
        REFS,
        "alter table t rename column b to y",
        "create table t (a int, y int, c int, g int as (a + y) virtual, key ka (a), key kab (a, y),"
        " constraint ca check (a > 0), constraint cab check (a < y)) default charset=utf8mb4",
    ),
    (
        "CHANGE a b, CHANGE b a swaps two columns everywhere",
        REFS,
        "alter table t change a b bigint, change b a int",
        "create table t (b bigint, a int, c int, g int as (b + a) virtual, key ka (b), key kab (b, a),"
        " constraint ca check (b > 0), constraint cab check (b < a)) default charset=utf8mb4",
    ),
    (
        "RENAME COLUMN a TO b, b TO a swaps",
        REFS,
        "alter table t rename column a to b, rename column b to a",
        "create table t (b int, a int, c int, g int as (b + a) virtual, key ka (b), key kab (b, a),"
        " constraint ca check (b > 0), constraint cab check (b < a)) default charset=utf8mb4",
    ),
    (
        "CHANGE only the case of a name",
        REFS,
        "alter table t rename column a to A",
        REFS.replace("a int, b", "A int, b"),
    ),
    (
        "a generated column restated in the statement names the new columns",
        REFS,
        "alter table t change a z int, modify g int as (z * 2) virtual",
        "create table t (z int, b int, c int, g int as (z * 2) virtual, key ka (z), key kab (z, b),"
        " constraint ca check (z > 0), constraint cab check (z < b)) default charset=utf8mb4",
    ),
    (
        "MODIFY a column added earlier in the statement (MariaDB)",
        TWO,
        "alter table t add c int, modify c bigint",
        "create table t (a int, b int, c bigint) default charset=utf8mb4",
    ),
    (
        "ALTER COLUMN SET DEFAULT",
        TWO,
        "alter table t alter column a set default 5",
        "create table t (a int default 5, b int) default charset=utf8mb4",
    ),
    (
        "ALTER COLUMN DROP DEFAULT of a nullable column leaves NULL",
        TWO.replace("a int", "a int default 3"),
        "alter table t alter a drop default",
        TWO,
    ),
    (
        "ALTER COLUMN DROP DEFAULT of a NOT NULL column leaves none",
        BASE,
        "alter table t alter column c drop default",
        BASE.replace("c int NOT NULL DEFAULT 0", "c int NOT NULL"),
    ),
    # -- indexes
    (
        "unnamed keys: a, a_2, a_3",
        TWO,
        "alter table t add key (a), add unique (a, b), add index (a)",
        "create table t (a int, b int, key a (a), unique key a_2 (a, b), key a_3 (a)) default charset=utf8mb4",
    ),
    (
        "unnamed key skips names taken",
        TWO.replace("b int", "b int, key a (b), key a_2 (b)"),
        "alter table t add key (a)",
        "create table t (a int, b int, key a (b), key a_2 (b), key a_3 (a)) default charset=utf8mb4",
    ),
    (
        "a key on a column called primary is primary_2",
        "create table t (`primary` int)",
        "alter table t add key (`primary`)",
        "create table t (`primary` int, key primary_2 (`primary`))",
    ),
    (
        "ADD PRIMARY KEY makes its columns NOT NULL and drops their NULL default",
        TWO,
        "alter table t add primary key (a, b)",
        "create table t (a int not null, b int not null, primary key (a, b)) default charset=utf8mb4",
    ),
    (
        "ADD PRIMARY KEY keeps a non-NULL default",
        TWO.replace("a int", "a int default 5"),
        "alter table t add primary key (a)",
        "create table t (a int not null default 5, b int, primary key (a)) default charset=utf8mb4",
    ),
    (
        "DROP PRIMARY KEY",
        "create table t (a int, primary key (a))",
        "alter table t drop primary key",
        "create table t (a int not null)",
    ),
    (
        "DROP PRIMARY KEY, ADD PRIMARY KEY",
        BASE,
        "alter table t drop primary key, add primary key (id, c)",
        BASE.replace("PRIMARY KEY (id)", "PRIMARY KEY (id, c)"),
    ),
    (
        "DROP INDEX and DROP KEY",
        BASE,
        "alter table t drop index ab, drop key c",
        BASE.replace("  KEY ab (a, b),\n  UNIQUE KEY c (c),\n", ""),
    ),
    (
        "DROP INDEX IF EXISTS of a missing key is a no-op",
        BASE,
        "alter table t drop index if exists nope",
        BASE,
    ),
    (
        "ADD INDEX IF NOT EXISTS of an existing name is a no-op",
        BASE,
        "alter table t add index if not exists ab (c)",
        BASE,
    ),
    (
        "DROP INDEX a, ADD INDEX a: replaced",
        BASE,
        "alter table t drop index ab, add index ab (b)",
        BASE.replace("KEY ab (a, b)", "KEY ab (b)"),
    ),
    (
        "RENAME INDEX and RENAME KEY",
        BASE,
        "alter table t rename index ab to ab2, rename key c to cc",
        BASE.replace("KEY ab (a, b)", "KEY ab2 (a, b)").replace("KEY c (c)", "KEY cc (c)"),
    ),
    (
        "prefix, DESC, FULLTEXT, SPATIAL",
        "create table t (a varchar(50), g point not null) default charset=utf8mb4",
        "alter table t add key k (a(10) desc), add fulltext (a), add spatial index (g)",
        "create table t (a varchar(50), g point not null, key k (a(10) desc), fulltext key a (a),"
        " spatial key g (g)) default charset=utf8mb4",
    ),
    (
        "key names follow the written order of inline and table keys",
        TWO,
        "alter table t add key (b), modify b int unique",
        "create table t (a int, b int, key b (b), unique key b_2 (b)) default charset=utf8mb4",
    ),
    (
        "FOREIGN KEY gets the server's index",
        TWO,
        "alter table t add foreign key (b) references u (x)",
        "create table t (a int, b int, key b (b)) default charset=utf8mb4",
    ),
    (
        "FOREIGN KEY needs no index when a key starts with its columns",
        TWO.replace("b int", "b int, key ab (a, b)"),
        "alter table t add constraint fk foreign key (a) references u (x)",
        "create table t (a int, b int, key ab (a, b)) default charset=utf8mb4",
    ),
    (
        "two FOREIGN KEYs on one column: one index, the later one's",
        TWO,
        "alter table t add foreign key (b) references u (x), add constraint fb foreign key (b) references v (y)",
        "create table t (a int, b int, key fb (b)) default charset=utf8mb4",
    ),
    (
        "a key of the same statement makes the FOREIGN KEY's index redundant",
        TWO,
        "alter table t add foreign key (a) references u (x), add key ab (a, b)",
        "create table t (a int, b int, key ab (a, b)) default charset=utf8mb4",
    ),
    # -- checks
    (
        "ADD CHECK unnamed on MariaDB is CONSTRAINT_1",
        TWO,
        "alter table t add check (a > 0)",
        "create table t (a int, b int, constraint CONSTRAINT_1 check (a > 0)) default charset=utf8mb4",
    ),
    (
        "unnamed checks take the smallest free CONSTRAINT_n",
        TWO.replace(
            "b int", "b int, constraint CONSTRAINT_1 check (a > 0), constraint CONSTRAINT_3 check (b > 0)"
        ),
        "alter table t add check (a > 1), add check (a > 2)",
        "create table t (a int, b int, constraint CONSTRAINT_1 check (a > 0), constraint CONSTRAINT_3 check (b > 0),"
        " constraint CONSTRAINT_2 check (a > 1), constraint CONSTRAINT_4 check (a > 2)) default charset=utf8mb4",
    ),
    (
        "DROP CHECK (MySQL syntax)",
        BASE,
        "alter table t drop check ck",
        BASE.replace(",\n  CONSTRAINT ck CHECK (a > 0)", ""),
    ),
    (
        "DROP CHECK IF EXISTS of a missing check is a no-op (MySQL syntax)",
        BASE,
        "alter table t drop check if exists nope",
        BASE,
    ),
    (
        "DROP CONSTRAINT of a check",
        BASE,
        "alter table t drop constraint ck",
        BASE.replace(",\n  CONSTRAINT ck CHECK (a > 0)", ""),
    ),
    (
        "DROP CONSTRAINT of a unique key",
        BASE,
        "alter table t drop constraint c",
        BASE.replace("  UNIQUE KEY c (c),\n", ""),
    ),
    (
        "DROP CONSTRAINT of an untracked foreign key is a no-op (permissive)",
        BASE,
        "alter table t drop constraint fk_1",
        BASE,
    ),
    (
        "ALTER CHECK NOT ENFORCED (MySQL syntax)",
        BASE,
        "alter table t alter check ck not enforced",
        BASE.replace("CHECK (a > 0)", "CHECK (a > 0) NOT ENFORCED"),
    ),
    (
        "ADD CONSTRAINT ... CHECK with a column-name expression",
        TWO,
        "alter table t add constraint lt check (a < b)",
        "create table t (a int, b int, constraint lt check (`a` < `b`)) default charset=utf8mb4",
    ),
    # -- table options and character sets
    (
        "DEFAULT CHARSET: new and restated columns take it",
        TWO.replace("b int", "b varchar(5)"),
        "alter table t add c varchar(5), modify b varchar(5), default charset latin1",
        "create table t (a int, b varchar(5), c varchar(5)) default charset=latin1",
    ),
    (
        "a charset without a collation takes its default collation",
        TWO.replace("utf8mb4", "utf8mb4 collate utf8mb4_bin"),
        "alter table t default charset utf8mb4",
        TWO,
    ),
    ("COLLATE alone", TWO, "alter table t collate utf8mb4_unicode_ci", TWO + " collate utf8mb4_unicode_ci"),
    (
        "COMMENT and ENGINE; AUTO_INCREMENT is ignored",
        TWO,
        "alter table t comment 'x', engine MyISAM, auto_increment=5",
        "create table t (a int, b int) engine=MyISAM default charset=utf8mb4 comment 'x'",
    ),
    (
        "CONVERT TO utf8mb4 promotes TEXT types, widens a too-long VARCHAR (permissive: MySQL)",
        LATIN1,
        "alter table t convert to character set utf8mb4",
        """create table t (a text, b mediumtext, c longtext, d varchar(100), e char(10) not null default 'x',
        f enum('p','q'), g mediumtext, h varbinary(10), i int) default charset=utf8mb4""",
    ),
    (
        "CONVERT TO ... COLLATE",
        TWO.replace("b int", "b varchar(5) charset latin1"),
        "alter table t convert to character set utf8mb4 collate utf8mb4_bin",
        "create table t (a int, b varchar(5)) default charset=utf8mb4 collate utf8mb4_bin",
    ),
    (
        "CONVERT TO utf8mb4 keeps a TEXT added in the same statement as written",
        LATIN1.replace("a tinytext, ", ""),
        "alter table t add a tinytext, convert to charset utf8mb4, drop column g",
        """create table t (b mediumtext, c longtext, d varchar(100), e char(10) not null default 'x',
        f enum('p','q'), h varbinary(10), i int, a tinytext) default charset=utf8mb4""",
    ),
    (
        "CONVERT TO binary makes binary types",
        "create table t (a varchar(10), b text, c int) default charset=utf8mb4",
        "alter table t convert to character set binary",
        "create table t (a varbinary(10), b blob, c int) default charset=binary",
    ),
    (
        "ALGORITHM, LOCK and FORCE change nothing",
        BASE,
        "alter table t algorithm=inplace, lock=none, force",
        BASE,
    ),
]


@pytest.mark.parametrize(("before", "statement", "after"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_apply(before: str, statement: str, after: str) -> None:
    assert alter(before, statement) == expect(after)


# (what, table before, statement, column order after)
ORDER = [
    (
        "ADD FIRST and AFTER",
        TWO,
        "alter table t add c int first, add d int after a, add e int",
        ["c", "a", "d", "b", "e"],
    ),
    (
        "MODIFY ... FIRST / AFTER",
        "create table t (a int, b int, c int)",
        "alter table t modify c int first, modify a int after b",
        ["c", "b", "a"],
    ),
    (
        "AFTER names a column of the new table",
        "create table t (a int, b int, c int)",
        "alter table t add z int after a3, change a a3 int first",
        ["a3", "z", "b", "c"],
    ),
    (
        "CHANGE keeps the place",
        "create table t (a int, b int, c int)",
        "alter table t change b z int",
        ["a", "z", "c"],
    ),
    (
        "swap keeps the places",
        "create table t (a int, b int, c int)",
        "alter table t change a b int, change b a int",
        ["b", "a", "c"],
    ),
]


@pytest.mark.parametrize(("before", "statement", "order"), [r[1:] for r in ORDER], ids=[r[0] for r in ORDER])
def test_column_order(before: str, statement: str, order: list[str]) -> None:
    assert [c.name for c in alter(before, statement).columns] == order


def test_swap_keeps_each_definition() -> None:
    after = alter(
        "create table t (a int not null, b varchar(3))",
        "alter table t rename column a to b, rename column b to a",
    )
    assert after.column("b").type.name == "int" and not after.column("b").nullable
    assert after.column("a").type.name == "varchar"


def test_rename_to_renames_the_table() -> None:
    after = alter(TWO, "alter table t rename to u, add c int")
    assert after.name == "u"
    assert after == expect("create table u (a int, b int, c int) default charset=utf8mb4")


def test_create_index_and_drop_index_statements() -> None:
    table = expect(TWO)
    created = parse("create unique index ub on t (b) algorithm=inplace")
    assert isinstance(created, AlterTable)
    with_index = apply(table, created.changes)
    assert with_index == expect("create table t (a int, b int, unique key ub (b)) default charset=utf8mb4")
    dropped = parse("drop index ub on t")
    assert isinstance(dropped, AlterTable)
    assert apply(with_index, dropped.changes) == table


# -- MySQL upstream naming: (what, before, statement, after) -----------------------------------
MYSQL_ROWS = [
    (
        "unnamed check is <table>_chk_1",
        TWO,
        "alter table t add check (a > 0)",
        "create table t (a int, b int, constraint t_chk_1 check (a > 0)) default charset=utf8mb4",
    ),
    (
        "numbering continues after the highest",
        TWO.replace("b int", "b int, constraint t_chk_4 check (b > 0)"),
        "alter table t add check (a > 0)",
        "create table t (a int, b int, constraint t_chk_4 check (b > 0), constraint t_chk_5 check (a > 0))"
        " default charset=utf8mb4",
    ),
    (
        "a column-level check is numbered too",
        TWO,
        "alter table t add c int check (c > 0)",
        "create table t (a int, b int, c int, constraint t_chk_1 check (c > 0)) default charset=utf8mb4",
    ),
    (
        "a charset takes MySQL 8's default collation",
        TWO,
        "alter table t add c varchar(3) charset utf8mb4",
        "create table t (a int, b int, c varchar(3) collate utf8mb4_0900_ai_ci) default charset=utf8mb4",
    ),
    (
        "inline REFERENCES is dropped by MySQL 8",
        TWO,
        "alter table t add c int references u (x)",
        "create table t (a int, b int, c int) default charset=utf8mb4",
    ),
]


@pytest.mark.parametrize(
    ("before", "statement", "after"), [r[1:] for r in MYSQL_ROWS], ids=[r[0] for r in MYSQL_ROWS]
)
def test_apply_mysql(before: str, statement: str, after: str) -> None:
    assert alter(before, statement, "mysql") == expect(after, "mysql")


# -- errors: (what, table before, statement, MySQL error code) -------------------------------------
ERRORS = [
    ("ADD an existing column", BASE, "alter table t add column a int", 1060),
    ("ADD the same column twice", TWO, "alter table t add c int, add c int", 1060),
    ("CHANGE to an existing name", BASE, "alter table t change b a int", 1060),
    ("RENAME COLUMN to an existing name", BASE, "alter table t rename column a to b", 1060),
    ("DROP a missing column", BASE, "alter table t drop column zz", 1091),
    ("DROP a column twice", BASE, "alter table t drop column a, drop column a", 1091),
    ("DROP a missing index", BASE, "alter table t drop index zz", 1091),
    ("DROP PRIMARY KEY without one", TWO, "alter table t drop primary key", 1091),
    ("MODIFY a missing column", BASE, "alter table t modify zz int", 1054),
    ("CHANGE a missing column", BASE, "alter table t change zz yy int", 1054),
    ("ALTER COLUMN of a missing column", BASE, "alter table t alter column zz set default 1", 1054),
    ("RENAME a missing column", BASE, "alter table t rename column zz to yy", 1054),
    ("AFTER a missing column", BASE, "alter table t add column d int after zz", 1054),
    (
        "AFTER a column dropped in the same statement",
        BASE,
        "alter table t add column d int after a, drop column a",
        1054,
    ),
    ("CHECK on a missing column", BASE, "alter table t add check (zz > 1)", 1054),
    ("DROP a column a multi-column check reads", REFS, "alter table t drop column g, drop column b", 1054),
    ("DROP a column a generated column reads", REFS, "alter table t drop column c, drop column a", 1054),
    ("KEY on a missing column", BASE, "alter table t add key (zz)", 1072),
    ("KEY on a column dropped in the same statement", BASE, "alter table t drop column b, add key (b)", 1072),
    ("KEY with an existing name", BASE, "alter table t add key ab (b)", 1061),
    ("CREATE INDEX with an existing name", BASE, "create index ab on t (a)", 1061),
    ("RENAME INDEX to an existing name", BASE, "alter table t rename index ab to c", 1061),
    ("RENAME a missing INDEX", BASE, "alter table t rename index zz to yy", 1176),
    ("a second PRIMARY KEY", BASE, "alter table t add primary key (a)", 1068),
    ("a second PRIMARY KEY inline", BASE, "alter table t add column d int key", 1068),
    ("AUTO_INCREMENT column that is not a key", BASE, "alter table t add x int auto_increment", 1075),
    ("DROP PRIMARY KEY of the AUTO_INCREMENT column", BASE, "alter table t drop primary key", 1075),
    ("DROP every column", TWO, "alter table t drop column a, drop column b", 1090),
    ("SET DEFAULT 'abc' on an int", BASE, "alter table t alter column a set default 'abc'", 1067),
    ("SET DEFAULT NULL on a NOT NULL column", BASE, "alter table t alter column c set default null", 1067),
    ("NOT NULL DEFAULT NULL", TWO, "alter table t add column c int not null default null", 1067),
    ("an enum default that is no member", TWO, "alter table t add column c enum('x') default 'y'", 1067),
    ("DROP a missing CHECK (MySQL syntax)", BASE, "alter table t drop check zz", 3821),
    ("ALTER a missing CHECK (MySQL syntax)", BASE, "alter table t alter check zz enforced", 3821),
    ("a duplicate check name (MariaDB's code)", BASE, "alter table t add constraint ck check (a > 1)", 1826),
]


@pytest.mark.parametrize(("before", "statement", "code"), [r[1:] for r in ERRORS], ids=[r[0] for r in ERRORS])
def test_error(before: str, statement: str, code: int) -> None:
    with pytest.raises(SchemaError) as caught:
        alter(before, statement)
    assert caught.value.code == code, caught.value


def test_duplicate_check_name_on_mysql_is_3822() -> None:
    with pytest.raises(SchemaError) as caught:
        alter(BASE, "alter table t add constraint ck check (a > 1)", "mysql")
    assert caught.value.code == 3822


def test_error_names_the_spec() -> None:
    with pytest.raises(SchemaError) as caught:
        alter(BASE, "alter table t add column z int, drop column zz")
    assert caught.value.change is not None and caught.value.change.text == "drop column zz"
    assert "drop column zz" in str(caught.value) and "1091" in str(caught.value)


# (what, CREATE TABLE, code)
CREATE_ERRORS = [
    ("a duplicate column", "create table t (a int, a int)", 1060),
    ("a key on a missing column", "create table t (a int, key (b))", 1072),
    ("two primary keys", "create table t (a int primary key, b int, primary key (b))", 1068),
    ("an auto column that is not a key", "create table t (a int auto_increment)", 1075),
    ("a check on a missing column", "create table t (a int, check (b > 0))", 1054),
    ("a generated column on a missing column", "create table t (a int, g int as (b + 1))", 1054),
    ("NOT NULL DEFAULT NULL", "create table t (a int not null default null)", 1067),
    ("PRIMARY KEY DEFAULT NULL", "create table t (a int default null primary key)", 1067),
]


@pytest.mark.parametrize(("sql", "code"), [r[1:] for r in CREATE_ERRORS], ids=[r[0] for r in CREATE_ERRORS])
def test_create_error(sql: str, code: int) -> None:
    statement = parse(sql)
    assert isinstance(statement, CreateTable)
    with pytest.raises(SchemaError) as caught:
        build_table(statement)
    assert caught.value.code == code


# -- render_table / parse_table round trips ---------------------------------------------------------
RICH = r"""CREATE TABLE `Rich` (
  `id` bigint unsigned NOT NULL AUTO_INCREMENT,
  `tiny` tinyint(3) unsigned zerofill DEFAULT 7,
  `amount` decimal(12,4) NOT NULL DEFAULT '-1.5',
  `ratio` double DEFAULT NULL,
  `f` float(7,3) unsigned DEFAULT 0.5,
  `flags` bit(4) DEFAULT b'1010',
  `code` char(3) CHARACTER SET latin1 COLLATE latin1_bin NOT NULL DEFAULT 'ab',
  `name` varchar(100) NOT NULL DEFAULT 'it''s',
  `esc` varchar(20) DEFAULT 'a\nb\\c',
  `bin` binary(4) DEFAULT x'00ff1020',
  `vb` varbinary(16) DEFAULT NULL,
  `body` mediumtext COMMENT 'the body',
  `blobby` blob,
  `kind` enum('a','b','c') NOT NULL DEFAULT 'b',
  `tags` set('x','y','z') DEFAULT 'x,z',
  `y` year DEFAULT 2020,
  `d` date DEFAULT '2020-01-02',
  `t` time(3) DEFAULT '01:02:03.500',
  `dt` datetime(6) DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  `ts` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  `doc` json DEFAULT NULL,
  `pt` point NOT NULL,
  `total` decimal(14,4) GENERATED ALWAYS AS (`amount` * 2) STORED,
  `lname` varchar(100) GENERATED ALWAYS AS (lower(`name`)) VIRTUAL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uk_code` (`code`,`y`),
  KEY `k_name` (`name`(10),`d` DESC),
  FULLTEXT KEY `ft_body` (`body`),
  SPATIAL KEY `sp` (`pt`),
  CONSTRAINT `pos` CHECK (`amount` >= -100),
  CONSTRAINT `ord` CHECK (`d` < '2100-01-01')
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci COMMENT='rich table'"""


@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("flavor", ["mysql", "mariadb", "tidb"])
def test_round_trip(upstream: str, flavor: str) -> None:
    table = parse_table(RICH, upstream=upstream)
    assert len(table.columns) == 24 and len(table.indexes) == 5 and len(table.checks) == 2
    assert parse_table(render_table(table, flavor), upstream=upstream) == table


@pytest.mark.parametrize("flavor", ["mysql", "mariadb", "tidb"])
def test_round_trip_after_alters(flavor: str) -> None:
    table = alter(
        RICH,
        "alter table Rich change name full_name varchar(120) not null default 'x', "
        "add column extra json, drop index ft_body, convert to character set utf8mb3",
    )
    assert parse_table(render_table(table, flavor)) == table


def test_equality_ignores_column_order_and_name() -> None:
    a = expect("create table a (x int, y int)")
    b = expect("create table b (y int, x int)")
    assert a == b and not a.same_rendering(b)


def test_a_written_using_hash_lasts_till_the_next_alter_and_is_saved() -> None:
    """A USING HASH makes a UNIQUE key a hash key (a hidden column in the binlog's rows)
    till the next ALTER; the tracker's saved tables keep it (a restart must not lose it)."""
    from lattice import hash_keys, table_from_data, table_to_data

    table = parse_table("CREATE TABLE h (a int, b int, c varchar(800), UNIQUE KEY (a) USING HASH, "
                        "UNIQUE (b), UNIQUE (c), KEY kb (b) USING HASH) DEFAULT CHARSET=utf8mb4")
    assert [i.name for i in hash_keys(table)] == ["a", "c"]
    assert [i.name for i in hash_keys(table_from_data(table_to_data(table)))] == ["a", "c"]
    altered = apply(table, parse("ALTER TABLE h COMMENT 'x'").changes)
    assert [i.name for i in hash_keys(altered)] == ["c"]
