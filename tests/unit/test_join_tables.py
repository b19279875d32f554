"""The design's examples (docs/design.md) and the table-level rules, one row each: the shard tables, and
the joined table as the flavor would create it (or the conflict)."""

from __future__ import annotations

import pytest

from lattice import JoinConflict, compare, join_all, parse_table, render_table, without_generated_reading

CONFLICT = "conflict: "

# (rule, flavor, shard CREATE TABLEs, expected CREATE TABLE or CONFLICT + wording)
ROWS = [
    # "CRDTs": S1 (a int not null default 1) ≤ S2 (a int null default 1)
    ("S1/S2: NULL is more compatible", "mariadb",
     ["create table S1 (a int not null default 1)", "create table S2 (a int null default 1)"],
     "create table S2 (a int null default 1)"),
    ("S5/S6: different defaults conflict", "mariadb",
     ["create table S5 (a int not null default 5)", "create table S6 (a int not null default 6)"],
     CONFLICT + "column a: defaults 5 and 6 differ"),
    ("S3/S4: float vs datetime conflict", "mariadb",
     ["create table S3 (a int, b float not null)", "create table S4 (a int, b datetime not null)"],
     CONFLICT + "column b: cannot join float with datetime"),
    # tbl01 dropped col2: the join keeps it with a default so tbl01's rows insert.
    # The seed's CRDT example writes `col2 int default null`; its "Adding column"
    # table gives NOT NULL int columns the default 0, which keeps NOT NULL: we use that.
    ("tbl01/tbl02: a dropped column stays with a default", "mariadb",
     ["create table tbl01 (col1 int not null, col3 int not null)",
      "create table tbl02 (col1 int not null, col2 int not null, col3 int not null)"],
     "create table tbl (col1 int not null, col3 int not null, col2 int not null default 0)"),
    ("Error handling: b float vs b datetime", "mariadb",
     ["create table tbl01 (a int, b datetime)", "create table tbl02 (a int, b float)"],
     CONFLICT + "column b: cannot join datetime with float"),
    ("Error handling: text vs datetime conflicts", "mariadb",
     ["create table tbl01 (a int, c datetime)", "create table tbl02 (a int, c text)"],
     CONFLICT + "column c: cannot join datetime with text"),
    ("Error handling: resolved intrusively by modify c text", "mariadb",
     ["create table tbl01 (a int, c text)", "create table tbl02 (a int, c text)"],
     "create table tbl (a int, c text)"),
    # "Adding column on first shard"
    ("add col4 int: nullable, default null", "mariadb",
     ["create table tbl01 (id int primary key, col4 int)", "create table tbl02 (id int primary key)"],
     "create table tbl (id int primary key, col4 int default null)"),
    ("add col5 int not null unique: default 0, unique ignored", "mariadb",
     ["create table tbl01 (id int primary key, col5 int not null unique)",
      "create table tbl02 (id int primary key)"],
     "create table tbl (id int primary key, col5 int not null default 0)"),
    ("add col6 int not null default 3: keeps its default", "mariadb",
     ["create table tbl01 (id int primary key, col6 int not null default 3)",
      "create table tbl02 (id int primary key)"],
     "create table tbl (id int primary key, col6 int not null default 3)"),
    ("the seed's default table: text ''", "mariadb",
     ["create table t1 (id int, x varchar(5) not null)", "create table t2 (id int)"],
     "create table t (id int, x varchar(5) not null default '')"),
    ("the seed's default table: datetime zero", "mariadb",
     ["create table t1 (id int, x datetime not null)", "create table t2 (id int)"],
     "create table t (id int, x datetime not null default '0000-00-00 00:00:00')"),
    ("the seed's default table: decimal 0", "mariadb",
     ["create table t1 (id int, x decimal(5,2) not null)", "create table t2 (id int)"],
     "create table t (id int, x decimal(5,2) not null default 0)"),
    ("the seed's default table: enum gets its first member", "mariadb",
     ["create table t1 (id int, x enum('p','q') not null)", "create table t2 (id int)"],
     "create table t (id int, x enum('p','q') not null default 'p')"),
    # "Adding column on remaining shards": a wider type on another shard
    ("add col4 bigint on another shard: bigint default null", "mariadb",
     ["create table tbl01 (id int primary key, col4 int)",
      "create table tbl02 (id int primary key, col4 bigint)",
      "create table tbl03 (id int primary key)"],
     "create table tbl (id int primary key, col4 bigint default null)"),
    # "Adding column on last shard": the default goes, the unique key comes
    ("col5 on every shard: no filler default, unique key kept", "mariadb",
     ["create table tbl01 (id int primary key, col5 int not null unique)",
      "create table tbl02 (id int primary key, col5 int not null unique)"],
     "create table tbl (id int primary key, col5 int not null unique)"),
    # "Dropping column on first shard": keep it with a default, drop its key and check
    ("drop col7 on one shard: keys and checks on it go", "mariadb",
     ["create table tbl01 (id int primary key)",
      "create table tbl02 (id int primary key, col7 int not null, key col7 (col7),"
      " constraint tbl_chk_7 check (col7 > 0))"],
     "create table tbl (id int primary key, col7 int not null default 0)"),
    # "Nullability", "Defaultness"
    ("not null ∨ null = null", "tidb",
     ["create table t1 (a int not null)", "create table t2 (a int null)"], "create table t (a int null)"),
    ("no default ∨ default = default", "mariadb",
     ["create table t1 (a int not null)", "create table t2 (a int not null default 4)"],
     "create table t (a int not null default 4)"),
    ("nullable (default NULL) ∨ default 4: different defaults", "mariadb",
     ["create table t1 (a int)", "create table t2 (a int not null default 4)"],
     CONFLICT + "column a: defaults NULL and 4 differ"),
    # "Constraints and indices": fewer constraints are more compatible, by name
    ("same index on every shard is kept", "mariadb",
     ["create table t1 (a int, b int, key ab (a, b))", "create table t2 (a int, b int, key ab (a, b))"],
     "create table t (a int, b int, key ab (a, b))"),
    ("index on one shard only is dropped", "mariadb",
     ["create table t1 (a int, key ka (a))", "create table t2 (a int)"], "create table t (a int)"),
    ("same name, different parts: dropped", "mariadb",
     ["create table t1 (a int, b int, key k (a))", "create table t2 (a int, b int, key k (b))"],
     "create table t (a int, b int)"),
    ("unique ∨ plain on the same parts = plain", "mariadb",
     ["create table t1 (a int, unique key k (a))", "create table t2 (a int, key k (a))"],
     "create table t (a int, key k (a))"),
    ("checks by name: same kept", "mariadb",
     ["create table t1 (a int, constraint c check (a > 0))", "create table t2 (a int, constraint c check (a > 0))"],
     "create table t (a int, constraint c check (a > 0))"),
    ("checks by name: different expressions dropped", "mariadb",
     ["create table t1 (a int, constraint c check (a > 0))", "create table t2 (a int, constraint c check (a > 1))"],
     "create table t (a int)"),
    ("enforced ∨ not enforced = not enforced", "mysql",
     ["create table t1 (a int, constraint c check (a > 0))",
      "create table t2 (a int, constraint c check (a > 0) not enforced)"],
     "create table t (a int, constraint c check (a > 0) not enforced)"),
    ("primary key on one shard only is dropped", "mariadb",
     ["create table t1 (a int not null primary key)", "create table t2 (a int not null)"],
     "create table t (a int not null)"),
    # "Generated columns": missing is more compatible
    ("generated on one shard only: left out", "mariadb",
     ["create table t1 (a int, b int as (100 / a))", "create table t2 (a int)"], "create table t (a int)"),
    ("different generated expressions: left out", "mariadb",
     ["create table t1 (a int, b int as (a + 1) stored)", "create table t2 (a int, b int as (a + 2) stored)"],
     "create table t (a int)"),
    ("same generated column everywhere: kept", "mariadb",
     ["create table t1 (a int, b int as (a + 1) stored)", "create table t2 (a int, b int as (a + 1) stored)"],
     "create table t (a int, b int as (a + 1) stored)"),
    # "Stored generated columns": generated → normal on one shard = normal, with a default
    ("stored generated ∨ normal = normal default null", "mariadb",
     ["create table t1 (a int, b int as (a + 1) stored)", "create table t2 (a int, b int)"],
     "create table t (a int, b int default null)"),
    # AUTO_INCREMENT must stay in a key
    ("auto_increment on every shard, keyed: kept", "mariadb",
     ["create table t1 (id int auto_increment primary key)", "create table t2 (id int auto_increment primary key)"],
     "create table t (id int auto_increment primary key)"),
    ("auto_increment on one shard only: dropped", "mariadb",
     ["create table t1 (id int auto_increment primary key)", "create table t2 (id int primary key)"],
     "create table t (id int primary key)"),
    ("auto_increment whose key goes: dropped with it", "mariadb",
     ["create table t1 (id int auto_increment primary key)", "create table t2 (id int auto_increment, key (id))"],
     "create table t (id int not null)"),  # the server makes AUTO_INCREMENT columns NOT NULL
    # storage limits the widening may cross
    ("a key the widened column makes too long is dropped", "mariadb",
     ["create table t1 (v varchar(700) character set utf8mb4, key kv (v))",
      "create table t2 (v varchar(800) character set utf8mb3, key kv (v))"],
     "create table t (v varchar(800) character set utf8mb4)"),
    ("a unique key the widened column makes too long is a hash key on MariaDB (F41)", "mariadb",
     ["create table t1 (v varchar(700) character set utf8mb4, unique key kv (v))",
      "create table t2 (v varchar(800) character set utf8mb3, unique key kv (v))"],
     "create table t (v varchar(800) character set utf8mb4, unique key kv (v))"),
    ("...and is dropped on MySQL", "mysql",
     ["create table t1 (v varchar(700) character set utf8mb4, unique key kv (v))",
      "create table t2 (v varchar(800) character set utf8mb3, unique key kv (v))"],
     "create table t (v varchar(800) character set utf8mb4)"),
    ("a primary key the widened column makes too long is dropped on MariaDB too", "mariadb",
     ["create table t1 (v varchar(700) character set utf8mb4 not null, primary key (v))",
      "create table t2 (v varchar(800) character set utf8mb3 not null, primary key (v))"],
     "create table t (v varchar(800) character set utf8mb4 not null)"),
    ("a row past 65535 bytes is a conflict", "mariadb",
     ["create table t1 (a varchar(16000) character set utf8mb4)",
      "create table t2 (b varchar(16000) character set utf8mb4)"],
     CONFLICT + "table: the joined row would take"),
    # idempotent differences: column order, comments, table options
    ("column order does not matter", "mariadb",
     ["create table t1 (a int, b int)", "create table t2 (b int, a int)"], "create table t (a int, b int)"),
    ("differing comments and engines are dropped", "mariadb",
     ["create table t1 (a int comment 'x') engine=InnoDB comment='one'",
      "create table t2 (a int comment 'y') engine=Aria comment='two'"],
     "create table t (a int)"),
]


@pytest.mark.parametrize(("rule", "flavor", "shards", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_seed_rule(rule, flavor, shards, expected):
    tables = [parse_table(sql) for sql in shards]
    result = join_all(tables, flavor)
    if expected.startswith(CONFLICT):
        assert isinstance(result, JoinConflict), f"expected a conflict, got:\n{result}"
        assert str(result).startswith(expected[len(CONFLICT):])
        return
    assert not isinstance(result, JoinConflict), str(result)
    want = parse_table(expected)
    assert render_table(result, flavor, name="t") == render_table(want, flavor, name="t")
    for table in tables:
        assert compare(table, result, flavor) in (-1, 0)


def test_partial_columns_are_marked():
    joined = join_all([parse_table("create table a (id int, x int not null)"),
                       parse_table("create table b (id int)")])
    assert joined.column("x").partial and joined.column("x").default is None  # filler comes at rendering
    assert not joined.column("id").partial
    assert "`x` int NOT NULL DEFAULT 0" in render_table(joined, "mariadb")


def test_join_of_one_table_is_itself():
    t = parse_table("create table t (id int primary key, a varchar(3) not null default 'x')")
    assert join_all([t]) == t


def test_tidb_text_default_becomes_nullable_when_partial():
    joined = join_all([parse_table("create table a (id int, x text not null)"),
                       parse_table("create table b (id int)")], "tidb")
    assert "`x` text NULL DEFAULT NULL" in render_table(joined, "tidb")
    assert "`x` text NOT NULL DEFAULT ('')" in render_table(joined, "mysql")
    assert "`x` text NOT NULL DEFAULT ''" in render_table(joined, "mariadb")


# (inputs, table, what stays): generated columns reading any of the inputs go, with the
# generated columns reading those, and the keys and checks over any of them
WITHOUT_GENERATED = [
    ({"a"}, "create table t (a int, g int as (a + 1), h int as (g * 2), b int, key k (g), key kb (b))",
     "create table t (a int, b int, key kb (b))"),
    ({"b"}, "create table t (a int, g int as (a + 1) stored, b int, check (g > 0))",
     "create table t (a int, g int as (a + 1) stored, b int, check (g > 0))"),
    ({"a"}, "create table t (a int, b int, g int as (a + b), constraint cg check (g > 0), constraint cb check (b > 0))",
     "create table t (a int, b int, constraint cb check (b > 0))"),
]


@pytest.mark.parametrize(("inputs", "table", "expected"), WITHOUT_GENERATED)
def test_without_generated_reading(inputs, table, expected):
    got = without_generated_reading(parse_table(table), inputs)
    assert render_table(got, "mariadb", name="t") == render_table(parse_table(expected), "mariadb", name="t")
