"""The shard-vs-merged-table comparison: queries answered from lists, and on real servers
where what MariaDB reads back is the point."""

from __future__ import annotations

import pytest

from lattice import parse_table
from replicator.compare import (
    Sides,
    compare_by_key,
    compare_shard,
    held_as_datetime,
    held_as_text,
    origin_filter,
    temporal,
)
from replicator.shard_id import ShardId


def answer(rows):
    return lambda sql: rows


# (what, upstream rows, downstream rows, equal, missing, extra)
RULES = [
    ("the same rows in another order", [(1, "a"), (2, "b")], [(2, "b"), (1, "a")], True, (), ()),
    ("a row missing downstream", [(1, "a"), (2, "b")], [(1, "a")], False, ((2, "b"),), ()),
    ("a row too many downstream", [(1, "a")], [(1, "a"), (3, "c")], False, (), ((3, "c"),)),
    ("a value differs", [(1, "a")], [(1, "z")], False, ((1, "a"),), ((1, "z"),)),
    ("a duplicate counts (tables without a key)", [(1, "a"), (1, "a")], [(1, "a")], False, ((1, "a"),), ()),
]


@pytest.mark.parametrize("up, down, equal, missing, extra", [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_compare_shard(up, down, equal, missing, extra):
    result = compare_shard(
        ShardId("s1", "db", "t"), ["id", "v"], Sides(answer(up), "`db`.`t`", answer(down), "`m`.`t`", "1")
    )
    assert (result.equal, result.missing, result.extra) == (equal, missing, extra)
    assert (result.upstream_rows, result.downstream_rows) == (len(up), len(down))


def test_a_downstream_that_cannot_be_read_that_way_is_reported():
    def behind(sql):
        raise LookupError("Unknown column 'coupon'")

    result = compare_shard(
        ShardId("s1", "db", "t"),
        ["id"],
        Sides(answer([]), "`db`.`t`", behind, "`m`.`t`", "1", errors=(LookupError,)),
    )
    assert not result.equal and "Unknown column 'coupon'" in result.describe()


def test_origin_filter_quotes_and_uses_only_the_extract_columns_there_are():
    assert (
        origin_filter({"source": "_src", "table": "_t"}, ShardId("s1", "db", "o'x"))
        == "`_src`='s1' AND `_t`='o''x'"
    )
    assert origin_filter({}, ShardId("s1", "db", "t")) == "1"


# (what, shard's table, merged table, columns read from the shard as text)
HELD_AS_TEXT = [
    (
        "a DATETIME held in a VARCHAR",
        "CREATE TABLE t (id INT, x DATETIME)",
        "CREATE TABLE t (id INT, x VARCHAR(19))",
        {"x"},
    ),
    ("the same type", "CREATE TABLE t (id INT, x DATETIME)", "CREATE TABLE t (id INT, x DATETIME)", set()),
    ("a text column is text already", "CREATE TABLE t (x CHAR(3))", "CREATE TABLE t (x TEXT)", set()),
    ("a widened number stays a number", "CREATE TABLE t (x INT)", "CREATE TABLE t (x DECIMAL(12,2))", set()),
]


@pytest.mark.parametrize(
    "shard, merged, text", [r[1:] for r in HELD_AS_TEXT], ids=[r[0] for r in HELD_AS_TEXT]
)
def test_held_as_text(shard, merged, text):
    assert held_as_text(parse_table(shard), parse_table(merged)) == text


def test_columns_held_as_text_are_read_from_the_shard_as_text():
    asked = []

    def upstream(sql):
        asked.append(sql)
        return [(1, "2026-11-21 10:00:00")]

    sides = Sides(upstream, "`db`.`t`", answer([(1, "2026-11-21 10:00:00")]), "`m`.`t`", "1", as_text={"x"})
    result = compare_shard(ShardId("s1", "db", "t"), ["id", "x"], sides)
    assert result.equal and asked == ["SELECT `id`, CAST(`x` AS CHAR) FROM `db`.`t`"]


def test_a_zero_date_compares_without_the_fraction_of_the_column_that_holds_it():
    """pymysql reads a zero date as text, with the fraction of its column: a shard's
    DATETIME's '0000-00-00 00:00:00' held in a DATETIME(6) downstream is the same value;
    a fraction that is not zero, or a column that is no date, still differs."""
    up = [(1, "0000-00-00 00:00:00", "0000-00-00 00:00:00"), (2, "0000-00-00 00:00:00", "x")]
    down = [
        (1, "0000-00-00 00:00:00.000000", "0000-00-00 00:00:00.000000"),
        (2, "0000-00-00 00:00:00.500000", "x"),
    ]
    sides = Sides(answer(up), "`db`.`t`", answer(down), "`m`.`t`", "1", zero_dates={"d"})
    result = compare_by_key(ShardId("s1", "db", "t"), ["id", "d", "s"], ["id"], sides)
    assert (result.lost, result.extra, result.different) == (0, 0, 2)
    assert "different (1, '0000-00-00 00:00:00', '0000-00-00 00:00:00')" in " ".join(result.samples)
    same = Sides(
        answer(up[:1]),
        "`db`.`t`",
        answer([(1, "0000-00-00 00:00:00.000", "0000-00-00 00:00:00")]),
        "`m`.`t`",
        "1",
        zero_dates={"d"},
    )
    assert compare_by_key(ShardId("s1", "db", "t"), ["id", "d", "s"], ["id"], same).equal


def test_a_date_held_as_datetime_compares_as_its_midnight(sandbox, scratch_db):
    """Real servers: a shard's DATE column held downstream as DATETIME(3) (beside a
    TIMESTAMP of rows that stay) holds each date as its midnight, zero dates too, and
    compares equal; a time other than midnight there is a different value."""
    up, down = sandbox.instance("up1"), sandbox.downstream
    up.execute(
        [
            f"CREATE TABLE `{scratch_db}`.t (id INT PRIMARY KEY, d DATE)",
            f"SET STATEMENT sql_mode='' FOR INSERT INTO `{scratch_db}`.t VALUES "
            "(1, '9999-12-31'), (2, '0000-00-00'), (3, NULL), (4, '2026-11-29')",
        ]
    )
    down.execute(
        [
            f"CREATE TABLE `{scratch_db}`.m (id INT PRIMARY KEY, d DATETIME(3))",
            f"SET STATEMENT sql_mode='' FOR INSERT INTO `{scratch_db}`.m VALUES (1, '9999-12-31 00:00:00'), "
            "(2, '0000-00-00 00:00:00'), (3, NULL), (4, '2026-11-29 00:00:00.001')",
        ]
    )
    shard, merged = (
        parse_table("CREATE TABLE t (id INT, d DATE)"),
        parse_table("CREATE TABLE m (id INT, d DATETIME(3))"),
    )
    sides = Sides(
        up.execute,
        f"`{scratch_db}`.t",
        down.execute,
        f"`{scratch_db}`.m",
        "1",
        zero_dates=temporal(shard),
        as_datetime=held_as_datetime(shard, merged),
    )
    result = compare_by_key(ShardId("s1", "db", "t"), ["id", "d"], ["id"], sides)
    assert (result.lost, result.extra, result.different) == (0, 0, 1), result.describe()
    assert result.samples[0].startswith("different (4, datetime.datetime(2026, 11, 29, 0, 0)")
    plain = Sides(up.execute, f"`{scratch_db}`.t", down.execute, f"`{scratch_db}`.m", "1")
    assert compare_by_key(ShardId("s1", "db", "t"), ["id", "d"], ["id"], plain).different == 3
