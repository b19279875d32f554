"""DM's binlog event filters (filters.events, `replicator.schema.event_filter`): what the
coordinator takes of a shard's DDL under each filter, table-driven, and the row kinds the
filters covering a shard ignore. Live tasks under filters: tests/daemon/test_event_filter_live.py."""

from __future__ import annotations

import pytest

from lattice import parse_table
from replicator.config import EventFilter
from replicator.schema.event_filter import ignored_rows, kept_columns, taken
from replicator.shard_id import ShardId
from replicator.source.schema_change import ChangeKind
from replicator.source.tracker import change_of

SHARD = ShardId("s1", "shop_01", "orders_001")
OTHER = ShardId("s1", "shop_02", "orders_002")
TABLE = parse_table(
    "CREATE TABLE orders_001 (id INT NOT NULL, amount INT, note VARCHAR(20), twice INT AS (id * 2) VIRTUAL, "
    "PRIMARY KEY (id), KEY by_amount (amount))"
)


def f(*ignore: str, sql: tuple[str, ...] = (), tables: tuple[str, ...] = ("shop_01.*",)) -> EventFilter:
    return EventFilter(tables, frozenset(ignore), sql)


def indexes(table) -> set[str]:
    return {i.name or "PRIMARY" for i in table.indexes}


# (filter, DDL on the shard, the kind the coordinator takes, the filter named, its indexes after)
CASES = [
    (f("truncate table"), "TRUNCATE TABLE orders_001", ChangeKind.NONE, "truncate table", None),
    (f("drop table"), "DROP TABLE orders_001", ChangeKind.NONE, "drop table", None),
    (f("delete"), "TRUNCATE TABLE orders_001", ChangeKind.TRUNCATE, None, None),
    (f("add index"), "ALTER TABLE orders_001 ADD INDEX by_note (note)", ChangeKind.NONE, "add index", None),
    (f("add index"), "ALTER TABLE orders_001 ADD COLUMN x INT, ADD INDEX by_x (x)", ChangeKind.ALTER, "add index",
     {"PRIMARY", "by_amount"}),
    (f("add index"), "ALTER TABLE orders_001 DROP INDEX by_amount", ChangeKind.ALTER, None, {"PRIMARY"}),
    (f("drop index"), "ALTER TABLE orders_001 DROP INDEX by_amount", ChangeKind.NONE, "drop index", None),
    (f("drop index"), "ALTER TABLE orders_001 DROP COLUMN amount", ChangeKind.ALTER, None, {"PRIMARY"}),
    (f("drop index"), "ALTER TABLE orders_001 ADD UNIQUE KEY u (note)", ChangeKind.ALTER, None,
     {"PRIMARY", "by_amount", "u"}),
    (f("add index"), "ALTER TABLE orders_001 DROP PRIMARY KEY, ADD PRIMARY KEY (id, amount)", ChangeKind.ALTER,
     None, {"PRIMARY", "by_amount"}),
    (f(sql=("add index",)), "ALTER TABLE orders_001 ADD INDEX by_note (note)", ChangeKind.NONE, "sql", None),
    (f(sql=("^alter table .* comment",)), "ALTER TABLE orders_001 COMMENT 'x'", ChangeKind.NONE, "sql", None),
    (f(sql=("add column",)), "ALTER TABLE orders_001 ADD COLUMN x INT", ChangeKind.UNSUPPORTED, "sql", None),
    (f(sql=("modify",)), "ALTER TABLE orders_001 MODIFY note VARCHAR(40)", ChangeKind.UNSUPPORTED, "sql", None),
    (f(sql=("add column",)), "ALTER TABLE orders_001 MODIFY note VARCHAR(40)", ChangeKind.ALTER, None, None),
    (f(sql=("comment",)), "ALTER TABLE orders_001 MODIFY note VARCHAR(20) COMMENT 'c'", ChangeKind.NONE, "sql", None),
    (f("truncate table", "add index", tables=("shop_02.*",)), "TRUNCATE TABLE orders_001", ChangeKind.TRUNCATE,
     None, None),
]


@pytest.mark.parametrize(("event_filter", "ddl", "kind", "named", "kept"), CASES, ids=[c[1] for c in CASES])
def test_what_the_coordinator_takes_of_a_filtered_ddl(event_filter, ddl, kind, named, kept) -> None:
    change = change_of(SHARD, TABLE, ddl)
    result, by = taken([event_filter], change, TABLE)
    assert (result.kind, by) == (kind, named)
    if kept is not None:
        assert indexes(result.after) == kept
        assert result.after.columns == change.after.columns  # columns always followed
    if by is None:
        assert result == change
    if kind is ChangeKind.UNSUPPORTED:
        assert "changes the shard's columns" in result.problem and event_filter.sql[0] in result.problem


# (filter, DDL on the shard, the kind the coordinator takes, the filter named, the columns kept downstream)
DROP_COLUMN_CASES = [
    (f("drop column"), "ALTER TABLE orders_001 DROP COLUMN note", ChangeKind.ALTER, "drop column", ["note"]),
    (f("drop column"), "ALTER TABLE orders_001 DROP COLUMN note, DROP amount", ChangeKind.ALTER, "drop column",
     ["amount", "note"]),
    (f("drop column"), "ALTER TABLE orders_001 DROP COLUMN note, ADD COLUMN x INT", ChangeKind.ALTER, "drop column",
     ["note"]),
    # a rename is no drop: its values go on under the new name
    (f("drop column"), "ALTER TABLE orders_001 RENAME COLUMN note TO remark", ChangeKind.ALTER, None, []),
    (f("drop column"), "ALTER TABLE orders_001 CHANGE note remark VARCHAR(40)", ChangeKind.ALTER, None, []),
    # but one whose new name the statement drops is a drop of the old name
    (f("drop column"), "ALTER TABLE orders_001 RENAME COLUMN note TO remark, DROP COLUMN remark", ChangeKind.ALTER,
     "drop column", ["note"]),
    (f("drop column"), "ALTER TABLE orders_001 ADD COLUMN x INT", ChangeKind.ALTER, None, []),
    (f("drop column"), "ALTER TABLE orders_001 DROP COLUMN twice", ChangeKind.ALTER, None, []),  # generated
    (f("drop column"), "ALTER TABLE orders_001 DROP INDEX by_amount", ChangeKind.ALTER, None, []),
    (f("drop column"), "DROP TABLE orders_001", ChangeKind.DROP, None, []),
    (f("drop column", tables=("shop_02.*",)), "ALTER TABLE orders_001 DROP COLUMN note", ChangeKind.ALTER, None, []),
    (f("drop index"), "ALTER TABLE orders_001 DROP COLUMN amount", ChangeKind.ALTER, None, []),
    (f("drop column", "drop index"), "ALTER TABLE orders_001 DROP COLUMN amount", ChangeKind.ALTER, "drop column",
     ["amount"]),
    # one DDL is named once: its ignored index first; its drop is still kept downstream
    (f("drop column", "add index"), "ALTER TABLE orders_001 DROP COLUMN note, ADD INDEX by_id (id)",
     ChangeKind.ALTER, "add index", ["note"]),
    # a pattern that matches the text pauses the shard: its drop is not followed, nothing is kept
    (f("drop column", sql=("drop column",)), "ALTER TABLE orders_001 DROP COLUMN note", ChangeKind.UNSUPPORTED,
     "sql", []),
]


@pytest.mark.parametrize(("event_filter", "ddl", "kind", "named", "kept"), DROP_COLUMN_CASES,
                         ids=[f"{c[1]} ({', '.join(sorted(c[0].ignore))})" for c in DROP_COLUMN_CASES])
def test_a_drop_column_filter_follows_the_shard_and_keeps_what_it_drops(event_filter, ddl, kind, named, kept) -> None:
    change = change_of(SHARD, TABLE, ddl)
    result, by = taken([event_filter], change, TABLE)
    assert (result.kind, by) == (kind, named)
    if by in (None, "drop column"):
        assert result == change  # the shard's change is followed as it is
    assert sorted(c.name for c in kept_columns([event_filter], result)) == kept
    # as the shard had them: the coordinator pins the downstream column of that name
    assert all(c == TABLE.column(c.name) for c in kept_columns([event_filter], result))


def test_an_ignored_add_index_stays_ignored_in_the_shards_later_changes() -> None:
    """The tracker follows the shard as it is (with the index); the coordinator goes on
    seeing it without, change after change."""
    filters = [f("add index")]
    added = change_of(SHARD, TABLE, "ALTER TABLE orders_001 ADD INDEX by_note (note)")
    seen, _ = taken(filters, added, TABLE)
    assert seen.kind is ChangeKind.NONE
    later = change_of(SHARD, added.after, "ALTER TABLE orders_001 ADD COLUMN x INT")
    seen, by = taken(filters, later, TABLE)
    assert indexes(seen.after) == {"PRIMARY", "by_amount"} and seen.after.column("x") is not None
    assert by is None  # ignored once: counted where the shard added it


def test_row_kinds_of_the_filters_covering_a_shard() -> None:
    filters = [f("delete"), f("update", "add index", tables=("*.orders_00*",)), f("insert", tables=("x.*",))]
    assert ignored_rows(filters, SHARD) == {"D", "U"}
    assert ignored_rows(filters, OTHER) == {"U"}
    assert ignored_rows(filters, ShardId("s1", "y", "orders_9")) == frozenset()
