"""The SQL the Spark jobs push down (replicator/spark/sql.py), without servers: one
row per rule. What the server makes of it is checked in tests/spark/test_backfill.py."""

from __future__ import annotations

import pytest

from lattice import parse_table
from replicator.shard_id import ShardId
from replicator.spark.sql import ProjectionError, key_text, project, row_hash, transport

TARGET = parse_table(
    "CREATE TABLE t (id BIGINT NOT NULL, name VARCHAR(10) COLLATE utf8mb4_general_ci NULL, "
    "code VARCHAR(8) COLLATE utf8mb4_nopad_bin NULL, f FLOAT NULL, d DOUBLE NULL, b BIT(3) NULL, "
    "raw BLOB NULL, n INT NOT NULL DEFAULT 7, amount DECIMAL(12,4) NOT NULL, at DATETIME(3) NULL, "
    "opt INT NULL, total INT GENERATED ALWAYS AS (n + 1) VIRTUAL, src VARCHAR(64) NOT NULL DEFAULT '', "
    "PRIMARY KEY (id, src), UNIQUE KEY by_name (name), UNIQUE KEY by_code (code(4)))"
)
SHARD = parse_table(
    "CREATE TABLE t (id INT NOT NULL, name VARCHAR(5) NULL, code VARCHAR(8) NULL, f FLOAT NULL, "
    "d FLOAT NULL, b BIT(2) NULL, raw TINYBLOB NULL, amount DECIMAL(10,2) NOT NULL, at DATETIME NULL, "
    "PRIMARY KEY (id))"
)


@pytest.mark.parametrize(
    ("column", "kind"),
    [
        ("id", "text"),  # integers as the server prints them: unsigned BIGINT intact
        ("name", "text"),
        ("amount", "text"),  # DECIMAL up to 65 digits, exact as text
        ("at", "text"),  # temporal values as text: zero dates and TIME ranges survive
        ("f", "float"),  # floating point natively: no digits lost to printing
        ("d", "double"),
        ("raw", "bytes"),  # binary strings need not be valid text
        ("b", "bit"),  # a string into BIT would be taken as bytes
    ],
)
def test_how_values_travel(column, kind):
    assert transport(TARGET.column(column).type) == kind


def select_of(column: str) -> str:
    projection = project(ShardId("s1", "db", "t"), SHARD, TARGET, {"source": "src"})
    return dict(zip(projection.columns, projection.select, strict=True))[column]


@pytest.mark.parametrize(
    ("column", "select"),
    [
        ("id", "CAST(`id` AS CHAR) AS `id`"),
        ("f", "`f` AS `f`"),
        ("d", "CAST(`d` AS DOUBLE) AS `d`"),  # a FLOAT shard into a DOUBLE: the float's exact value
        ("b", "CAST(`b` AS DECIMAL(20,0)) AS `b`"),  # BIT(64) above 2^63 stays positive
        ("raw", "`raw` AS `raw`"),
        ("n", "CAST((7) AS CHAR) AS `n`"),  # missing in the shard: the joined default
        ("opt", "NULL AS `opt`"),  # missing and nullable without a default: NULL
        ("src", "'s1' AS `src`"),  # an extract column: the shard's source id
    ],
)
def test_projection_of_a_shard_onto_the_joined_schema(column, select):
    assert select_of(column) == select


def test_projection_leaves_out_generated_columns_and_lists_the_missing_ones():
    projection = project(ShardId("s1", "db", "t"), SHARD, TARGET, {"source": "src"})
    assert "total" not in projection.columns
    assert projection.missing == ("n", "opt")
    assert projection.from_table == "`db`.`t`"


@pytest.mark.parametrize(
    ("shard_column", "message"),
    [
        (
            "amount DECIMAL(14,6) NOT NULL",
            r"column amount is decimal\(14,6\), which does not fit .*decimal\(12,4\)",
        ),
        (
            "amount DECIMAL(10,2) NOT NULL, at DATETIME(6) NULL",
            r"column at is datetime\(6\), which does not fit",
        ),
        ("amount DECIMAL(10,2) NOT NULL, name VARCHAR(20) NULL", r"column name is varchar\(20\)"),
        (
            "amount DECIMAL(10,2) NOT NULL, f DOUBLE NULL",
            r"column f is double, which does not fit the downstream column f float",
        ),
        ("amount DECIMAL(10,2) NULL", r"column amount may be NULL, the downstream column amount is NOT NULL"),
    ],
)
def test_a_shard_type_beyond_the_target_is_refused_with_the_column(shard_column, message):
    shard = parse_table(f"CREATE TABLE t (id INT NOT NULL, {shard_column}, PRIMARY KEY (id))")
    with pytest.raises(ProjectionError, match=rf"shard s1\.db\.t: {message}"):
        project(ShardId("s1", "db", "t"), shard, TARGET, {})


def test_a_not_null_column_without_default_missing_in_a_shard_is_refused():
    target = parse_table("CREATE TABLE t (id INT NOT NULL, must INT NOT NULL, PRIMARY KEY (id))")
    shard = parse_table("CREATE TABLE t (id INT NOT NULL, PRIMARY KEY (id))")
    with pytest.raises(ProjectionError, match="has no column must, which is NOT NULL without a default"):
        project(ShardId("s1", "db", "t"), shard, target, {})


@pytest.mark.parametrize(
    ("index", "sql"),
    [
        # collation weights: 'A' and 'a ' are one key under a case-insensitive PAD SPACE collation
        (
            "by_name",
            "HEX(WEIGHT_STRING(CONVERT(TRIM(TRAILING ' ' FROM `name`) USING utf8mb4) COLLATE utf8mb4_general_ci))",
        ),
        # a NO PAD collation keeps trailing spaces; a prefix key compares the prefix
        ("by_code", "HEX(WEIGHT_STRING(CONVERT(LEFT(`code`, 4) USING utf8mb4) COLLATE utf8mb4_nopad_bin))"),
        # the extract column is the shard's literal; parts joined unambiguously (hex and ':')
        ("PRIMARY", "CONCAT(HEX(CAST(`id` AS CHAR)), ':', HEX(CONVERT('s1' USING utf8mb4)))"),
    ],
)
def test_key_text_compares_as_the_downstream_index_would(index, sql):
    assert key_text(TARGET.index(index), SHARD, TARGET, {"src": "s1"}) == sql


def test_row_hash_renders_narrower_shard_columns_as_the_joined_type():
    amount, at, f = (TARGET.column(c).type for c in ("amount", "at", "f"))
    sql = row_hash([("`amount`", amount, False), ("`at`", at, False), ("`f`", f, True)])
    assert "CAST(CAST(`amount` AS DECIMAL(12,4)) AS CHAR)" in sql
    assert "CAST(CAST(`at` AS DATETIME(3)) AS CHAR)" in sql
    assert "IFNULL(CONCAT(LENGTH(" in sql and "'N')" in sql  # NULL is not the empty string
    assert sql.startswith("CAST(CONV(SUBSTR(MD5(CONCAT(")
