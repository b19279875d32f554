"""The type a filler (a partial column's default, given to rows of shards lacking the
column) is held in: the column's, except a time's fraction digits (seed 861757); a NULL
filler is held in none (seed 1209509); and what the shards' own rows need of a type of
another family holding old values (seeds 361243, 2301025)."""

from __future__ import annotations

import pytest

from lattice import Column, ColumnTypes, holds_number, least_type, parse_table, render_type
from lattice.render import render_column
from replicator.schema.retained import Retained


@pytest.mark.parametrize(
    ("definition", "held"),
    [
        ("DATETIME(6) DEFAULT '2020-01-02 03:04:05'", "datetime"),
        ("DATETIME(6) DEFAULT '2020-01-02 03:04:05.120000'", "datetime(2)"),
        ("TIMESTAMP(3) NULL DEFAULT '2020-01-02 03:04:05.999'", "timestamp(3)"),
        ("TIME(4) DEFAULT '12:00:00.5'", "time(1)"),
        ("DATETIME(6) DEFAULT '2020-01-02'", "datetime"),
        ("DATETIME DEFAULT '2020-01-02 03:04:05'", "datetime"),
        ("ENUM('x','y') DEFAULT 'y'", "enum('x','y')"),
        ("ENUM('x','y','z') NOT NULL DEFAULT 'x'", "enum('x')"),  # its index 1 as before (F179)
        ("SET('a','b','c','d') DEFAULT 'a,c'", "set('a','b','c')"),  # each member its bit
        ("SET('a','b') DEFAULT ''", "set('a')"),
        # a DECIMAL's value not negative: UNSIGNED, which a signed DECIMAL joins at its digits and
        # an UNSIGNED integer keeps (F180)
        ("DECIMAL(12,4) DEFAULT 1.5", "decimal(2,1) unsigned"),
        ("DECIMAL(12,4) DEFAULT 0", "decimal(1,0) unsigned"),
        ("DECIMAL(12,4) DEFAULT -120.25", "decimal(5,2)"),
        ("INT NOT NULL DEFAULT 0", "tinyint"),
        ("INT UNSIGNED DEFAULT 200", "tinyint unsigned"),
        ("INT DEFAULT 200", "smallint"),
        ("BIGINT DEFAULT -2147483649", "bigint"),
        (
            "VARCHAR(100) CHARACTER SET latin1 DEFAULT 'abc'",
            "char(3) character set latin1 collate latin1_swedish_ci",
        ),
        ("VARCHAR(4) DEFAULT ''", "char(0)"),
        ("VARCHAR(4) DEFAULT 'ab '", "varchar(3)"),
        ("CHAR(10) DEFAULT ''", "char(0)"),
        # a utf8mb4 value with no character beyond the BMP in utf8mb3, its collation there (F181)
        (
            "TEXT CHARACTER SET utf8mb4 DEFAULT 'x'",
            "tinytext character set utf8mb3 collate utf8mb3_general_ci",
        ),
        (
            "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT 'd'",
            "char(1) character set utf8mb3 collate utf8mb3_bin",
        ),
        (
            "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci DEFAULT '\U0001F600'",
            "char(1) character set utf8mb4 collate utf8mb4_general_ci",
        ),
        (  # (MySQL 8's: utf8mb3 has no such collation)
            "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_ai_ci DEFAULT 'd'",
            "char(1) character set utf8mb4 collate utf8mb4_0900_ai_ci",
        ),
    ],
)
def test_a_filler_is_held_in_what_its_value_needs_of_the_type(definition: str, held: str):
    column = _column(definition)
    assert render_type(least_type(column.default, column.type)).lower() == held


@pytest.mark.parametrize(
    ("type_", "number", "holds"),
    [
        ("MEDIUMINT UNSIGNED", "7", True),
        ("MEDIUMINT UNSIGNED", "-1", False),
        ("TINYINT", "127", True),
        ("TINYINT", "128", False),
        ("INT", "1.00", True),  # a DECIMAL's integral value
        ("INT", "1.50", False),  # rounded
        ("DECIMAL(3,2)", "9.99", True),
        ("DECIMAL(3,2)", "10", False),
        ("DECIMAL(3,2)", "1.005", False),
        ("DECIMAL(3,2) UNSIGNED", "-0.5", False),
        ("VARCHAR(3)", "7", False),  # another family: converted by other rules
    ],
)
def test_a_type_holds_a_number_as_it_is(type_: str, number: str, holds: bool):
    assert holds_number(_column(type_).type, number) is holds


def _column(definition: str) -> Column:
    return parse_table(f"CREATE TABLE t (id INT PRIMARY KEY, c {definition})").column("c")


def _held(steps: list[tuple[str, str]], restored: bool) -> Retained:
    retained = Retained(ColumnTypes("mariadb"))
    for how, definition in steps:
        if how == "null":
            retained.keep_null(_column(definition))
        else:
            retained.keep([_column(definition)])
    if restored:
        again = Retained(ColumnTypes("mariadb"))
        again.restore(retained.to_table())
        return again
    return retained


@pytest.mark.parametrize("restored", [False, True], ids=["live", "from-the-journal"])
@pytest.mark.parametrize(
    ("steps", "shards", "held"),
    [
        # NULLs of shards lacking the column need no width: the shards' type, nullable
        ([("null", "TIMESTAMP(3) NULL")], "DATE NULL", "date NULL DEFAULT NULL"),
        ([("null", "TIMESTAMP(3) NULL")], "DATE NOT NULL", "date NULL DEFAULT NULL"),
        ([("null", "MEDIUMTEXT NULL")], "TINYTEXT NULL", "tinytext NULL DEFAULT NULL"),
        # values held after the NULLs set the type
        (
            [("null", "BIGINT NULL"), ("keep", "SMALLINT NOT NULL")],
            "TINYINT NOT NULL",
            "smallint NULL DEFAULT NULL",
        ),
        # values held before keep theirs
        (
            [("keep", "MEDIUMTEXT NOT NULL"), ("null", "LONGTEXT NULL")],
            "TEXT NOT NULL",
            "mediumtext NULL DEFAULT NULL",
        ),
        (
            [("keep", "TIMESTAMP(3) NULL"), ("null", "TIMESTAMP(3) NULL")],
            "DATE NULL",
            "datetime(3) NULL DEFAULT NULL",
        ),
    ],
)
def test_nulls_held_need_no_width(steps: list[tuple[str, str]], shards: str, held: str, restored: bool):
    retained = _held(steps, restored)
    assert render_column(retained.hold(_column(shards))).lower() == f"`c` {held}".lower()


@pytest.mark.parametrize(
    ("kept", "shards", "downstream", "held"),
    [
        # a day or time of the shards' rows, converted into the DATETIME holding the old
        # values, needs no fraction their type dropped upstream (seed 2301025)
        ("TIMESTAMP NULL", "DATE NULL", "TIMESTAMP(6) NULL", "datetime NULL DEFAULT NULL"),
        ("TIMESTAMP(3) NULL", "DATE NULL", "TIMESTAMP(6) NULL", "datetime(3) NULL DEFAULT NULL"),
        ("DATE NULL", "TIMESTAMP NULL", "TIMESTAMP(6) NULL", "datetime NULL DEFAULT NULL"),
        ("DATETIME(2) NULL", "TIMESTAMP NULL", "TIMESTAMP(6) NULL", "datetime(2) NULL DEFAULT NULL"),
        # other values converted into a type of another family are its as they are there:
        # SET text is text in the string holding old SET rows and the shards' TINYINT (seed 361243)
        ("SET('a','bb') NULL", "TINYINT NULL", "SET('a','bb','ccc') NULL", "varchar(8) NULL DEFAULT NULL"),
    ],
)
def test_the_shards_rows_need_of_a_type_of_another_family_what_they_are_downstream(
    kept: str, shards: str, downstream: str, held: str
):
    retained = _held([("keep", kept)], restored=False)
    now = parse_table(f"CREATE TABLE t (id INT PRIMARY KEY, c {downstream})")
    assert render_column(retained.hold(_column(shards), now)).lower() == f"`c` {held}".lower()


@pytest.mark.parametrize("restored", [False, True], ids=["live", "from-the-journal"])
@pytest.mark.parametrize(
    ("fillers", "shards", "downstream", "held"),
    [
        # 1 of a DECIMAL(3,2), then 7 of the MEDIUMINT UNSIGNED every shard makes it: both fit
        # the shards' type, whatever the DECIMAL's fraction downstream was (F180, seed 3177)
        (
            ["DECIMAL(3,2) NULL DEFAULT 1", "MEDIUMINT UNSIGNED NULL DEFAULT 7"],
            "MEDIUMINT UNSIGNED NULL",
            "DECIMAL(10,2) NULL",
            "mediumint unsigned NULL DEFAULT NULL",
        ),
        # a negative one does not: a DECIMAL with the digits of both
        (
            ["DECIMAL(3,2) NULL DEFAULT -1", "MEDIUMINT UNSIGNED NULL DEFAULT 7"],
            "MEDIUMINT UNSIGNED NULL",
            "DECIMAL(10,2) NULL",
            "decimal(10,2) NULL DEFAULT NULL",
        ),
        # an integer's as well, whose least type has a sign (1 of an INT: TINYINT)
        (
            ["INT NULL DEFAULT 1", "MEDIUMINT UNSIGNED NULL DEFAULT 7"],
            "MEDIUMINT UNSIGNED NULL",
            "INT NULL",
            "mediumint unsigned NULL DEFAULT NULL",
        ),
        (["INT NULL DEFAULT -1"], "MEDIUMINT UNSIGNED NULL", "INT NULL", "int NULL DEFAULT NULL"),
        (["BIGINT NULL DEFAULT 300"], "TINYINT NULL", "BIGINT NULL", "smallint NULL DEFAULT NULL"),
        # a fraction neither: its digits stay
        (
            ["DECIMAL(3,2) NULL DEFAULT 1.5"],
            "INT NULL",
            "DECIMAL(12,2) NULL",
            "decimal(12,2) NULL DEFAULT NULL",
        ),
        # a string column's '' fits every string type, of any character set (F183, seed 21231)
        (
            ["VARCHAR(1) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL DEFAULT ''"],
            "VARCHAR(1) CHARACTER SET latin1 COLLATE latin1_swedish_ci NOT NULL",
            "VARCHAR(1) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL",
            "varchar(1) CHARACTER SET latin1 COLLATE latin1_swedish_ci NOT NULL",
        ),
        # another string does not: the character set it was held in stays
        (
            ["VARCHAR(1) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL DEFAULT 'x'"],
            "VARCHAR(1) CHARACTER SET latin1 COLLATE latin1_swedish_ci NOT NULL",
            "VARCHAR(1) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL",
            "varchar(1) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL",
        ),
    ],
)
def test_fillers_of_numbers_and_empty_strings_are_held_in_what_their_values_need(
    fillers: list[str], shards: str, downstream: str, held: str, restored: bool
):
    retained = Retained(ColumnTypes("mariadb"))
    for definition in fillers:
        retained.keep_filler(_column(definition), ["s1.db.t2"])
    if restored:  # the numbers ride in the journal's table
        again = Retained(ColumnTypes("mariadb"))
        again.restore(retained.to_table(), retained.origins_to_data())
        retained = again
    now = parse_table(f"CREATE TABLE t (id INT PRIMARY KEY, c {downstream})")
    assert render_column(retained.hold(_column(shards), now)).lower() == f"`c` {held}".lower()


@pytest.mark.parametrize("restored", [False, True], ids=["live", "from-the-journal"])
@pytest.mark.parametrize(
    ("steps", "shards", "held"),
    [
        # a TEXT's '' filler beside VARCHAR(5) values no shard vouches for, in either order:
        # the values' type holds it, no TINYTEXT (F186, seed 36252)
        (
            [("keep", "VARCHAR(5) CHARACTER SET utf8mb3 NOT NULL"),
             ("filler", "TINYTEXT CHARACTER SET utf8mb4 NOT NULL DEFAULT ''")],
            "VARCHAR(15) CHARACTER SET utf8mb3 NOT NULL",
            "varchar(15) CHARACTER SET utf8mb3 COLLATE utf8mb3_general_ci NOT NULL",
        ),
        (
            [("filler", "TINYTEXT CHARACTER SET utf8mb4 NOT NULL DEFAULT ''"),
             ("keep", "VARCHAR(5) CHARACTER SET utf8mb3 NOT NULL")],
            "VARCHAR(15) CHARACTER SET utf8mb3 NOT NULL",
            "varchar(15) CHARACTER SET utf8mb3 COLLATE utf8mb3_general_ci NOT NULL",
        ),
        # a number the values' type holds: that type, not its join with the filler's
        (
            [("filler", "DECIMAL(3,2) NULL DEFAULT 1"), ("keep", "INT NULL")],
            "SMALLINT NULL",
            "int NULL DEFAULT NULL",
        ),
        (
            [("keep", "INT NULL"), ("filler", "DECIMAL(3,2) NULL DEFAULT 1")],
            "SMALLINT NULL",
            "int NULL DEFAULT NULL",
        ),
        # one it does not hold widens it as before
        (
            [("keep", "INT NULL"), ("filler", "DECIMAL(3,2) NULL DEFAULT 1.5")],
            "INT NULL",
            "decimal(11,1) NULL DEFAULT NULL",
        ),
        (
            [("keep", "VARCHAR(5) CHARACTER SET utf8mb3 NOT NULL"),
             ("filler", "TINYTEXT CHARACTER SET utf8mb4 NOT NULL DEFAULT 'x'")],
            "VARCHAR(15) CHARACTER SET utf8mb3 NOT NULL",
            "tinytext CHARACTER SET utf8mb3 COLLATE utf8mb3_general_ci NOT NULL",
        ),
    ],
)
def test_a_filler_beside_values_no_shard_vouches_for_needs_no_more_than_their_type_where_it_fits(
    steps: list[tuple[str, str]], shards: str, held: str, restored: bool
):
    retained = Retained(ColumnTypes("mariadb"))
    for how, definition in steps:
        if how == "filler":
            retained.keep_filler(_column(definition), ["s1.db.t2"])
        else:
            retained.keep([_column(definition)])
    if restored:
        again = Retained(ColumnTypes("mariadb"))
        again.restore(retained.to_table(), retained.origins_to_data())
        retained = again
    assert render_column(retained.hold(_column(shards))).lower() == f"`c` {held}".lower()


def test_fillers_go_once_every_shard_that_got_them_vouches():
    retained = Retained(ColumnTypes("mariadb"))
    column = _column("INT NULL")
    retained.keep_null(column, ["s1.db.t2", "s1.db.t3"])
    retained.vouch("c", "s1.db.t2")
    assert "c" in retained.held
    retained.vouch("c", "s1.db.t3")
    assert "c" not in retained.held


@pytest.mark.parametrize("how", ["orphaned", "a shard left", "an old journal"])
def test_fillers_beside_values_no_shard_vouches_for_stay(how: str):
    retained = Retained(ColumnTypes("mariadb"))
    retained.keep_null(_column("INT NULL"), ["s1.db.t2"])
    if how == "orphaned":
        retained.keep([_column("BIGINT NULL")])  # a dropped column's values
    elif how == "a shard left":
        retained.left("s1.db.t2")
    else:
        again = Retained(ColumnTypes("mariadb"))
        again.restore(retained.to_table())  # saved before the origins were
        retained = again
    retained.vouch("c", "s1.db.t2")
    assert "c" in retained.held


def test_origins_are_saved_with_the_holds():
    retained = Retained(ColumnTypes("mariadb"))
    retained.keep_null(_column("INT NULL"), ["s1.db.t2", "s1.db.t3"])
    again = Retained(ColumnTypes("mariadb"))
    again.restore(retained.to_table(), retained.origins_to_data())
    again.vouch("c", "s1.db.t2")
    again.vouch("c", "s1.db.t3")
    assert "c" not in again.held


def test_the_saved_origins_list_each_column_s_lacking_shards_sorted_whatever_happened_between_saves():
    # (they are kept sorted between saves rather than sorted at each one: every way the
    # sets change, in any order, saves what sorting the sets would)
    import random

    rng = random.Random(43)
    columns = parse_table(
        "CREATE TABLE t (id INT PRIMARY KEY, c0 INT NOT NULL DEFAULT 0, c1 INT NULL, "
        "c2 VARCHAR(5) DEFAULT 'x', c3 DATETIME NOT NULL DEFAULT '2020-01-01 00:00:00')"
    ).columns[1:]
    shards = [f"s1.db.t{i:03d}" for i in range(40)]
    for _ in range(200):
        retained = Retained(ColumnTypes("mariadb"))
        for _ in range(60):
            op = rng.randrange(7)
            column = rng.choice(columns)
            some = rng.sample(shards, rng.randrange(1, 12))
            if op == 0:
                retained.keep_filler(column, some)
            elif op == 1:
                retained.keep_null(column, some)
            elif op == 2:
                retained.also_lacking(column.key, some)
            elif op in (3, 4):
                retained.vouch(column.key, rng.choice(shards))
            elif op == 5:
                retained.forget_all_but([c.key for c in columns if rng.random() < 0.8])
            else:
                retained.left(rng.choice(shards))
            if rng.random() < 0.3:
                saved = retained.origins_to_data()
                assert saved["lacking"] == {k: sorted(v) for k, v in sorted(retained.lacking.items())}
                if rng.random() < 0.2:
                    again = Retained(ColumnTypes("mariadb"))
                    again.restore(retained.to_table(), saved)
                    retained = again
