"""What verify prints and writes as JSON of a table's differences, unsettled rows included."""

from __future__ import annotations

from replicator.cli.verify_cli import format_report, table_data
from replicator.shard_id import ShardId
from replicator.spark.verify import TableDiff, VerifyReport

SHARD = ShardId("s1", "db", "orders_1")


def test_unsettled_rows_are_shown_and_leave_a_table_equal():
    table = TableDiff("shop.orders", 10, 10, 1, 1, unsettled=[(SHARD, ("6",)), (SHARD, ("9",))])
    text = format_report(VerifyReport([table], []))
    assert text.startswith("shop.orders: equal: 10 rows upstream")
    assert "2 rows changed by the stream in every look, not compared" in text and "first key 6" in text
    assert table_data(table)["unsettled"] == [{"shard": str(SHARD), "key": ["6"]}, {"shard": str(SHARD), "key": ["9"]}]


def test_a_table_with_nothing_unsettled_says_nothing_of_it():
    table = TableDiff("shop.orders", 10, 9, 1, 1, missing=[(SHARD, ("3",))])
    text = format_report(VerifyReport([table], []))
    assert "DIFFERENT" in text and "missing: key 3 (from s1" in text and "not compared" not in text
    assert table_data(table)["unsettled"] == []
