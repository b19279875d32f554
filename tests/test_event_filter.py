"""DM's binlog event filters (filters.events): what the coordinator takes of a shard's
DDL under each filter, table-driven, and live tasks: one where a shard's deletes, its
TRUNCATE and its ADD INDEX are ignored while its columns still change downstream, one
where every shard drops a column the downstream table keeps, with its values."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lattice import parse_table
from replicator.config import EventFilter
from replicator.schema.event_filter import ignored_rows, kept_columns, taken
from replicator.shard_id import ShardId
from replicator.source.schema_change import ChangeKind
from replicator.source.tracker import change_of
from tests.replication import admin_task
from tests.test_operator import shardctl

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


# -- live ----------------------------------------------------------------------------------------
CREATE = "CREATE TABLE {table} (id INT NOT NULL, amount INT, note VARCHAR(20), PRIMARY KEY (id))"


@pytest.fixture
def task(sandbox, tmp_path):
    t = admin_task(sandbox, tmp_path, CREATE)
    first = t.shards[0]
    t.config_path.write_text(
        t.config_path.read_text()
        + f"filters:\n  events:\n    - tables: [\"{first[1]}.{first[2]}\"]\n"
        + "      ignore: [delete, truncate table, add index]\n"
    )
    yield t
    t.cleanup()


def test_a_shards_ignored_deletes_truncate_and_index_leave_its_rows_downstream(task):
    filtered, *rest = task.shards
    task.start()
    for shard in task.shards:
        task.sql(shard, "INSERT INTO {t} (id, amount) VALUES (1, 10), (2, 20), (3, 30)")
    task.sql(filtered, "DELETE FROM {t} WHERE id = 1")
    task.sql(filtered, "UPDATE {t} SET amount = 21 WHERE id = 2")
    task.sql(rest[0], "DELETE FROM {t} WHERE id = 1")
    task.sql(filtered, "ALTER TABLE {t} ADD INDEX by_amount (amount)")
    task.sql(filtered, "ALTER TABLE {t} ADD COLUMN extra INT")  # columns are still followed
    task.sql(filtered, "INSERT INTO {t} (id, amount, extra) VALUES (4, 40, 4)")
    task.sql(filtered, "TRUNCATE TABLE {t}")
    task.sql(filtered, "INSERT INTO {t} (id, amount, extra) VALUES (5, 50, 5)")
    for shard in rest:
        task.sql(shard, "ALTER TABLE {t} ADD COLUMN extra INT")

    db = task.target_db
    src = task.source_of(filtered[0])
    where = f"_source = '{src}' AND _schema = '{filtered[1]}' AND _table = '{filtered[2]}'"

    def downstream(sql):
        return task.sandbox.downstream.execute(sql)

    task.wait_for(lambda: downstream(f"SELECT COUNT(*) FROM `{db}`.orders WHERE {where} AND id = 5")[0][0] == 1,
                  timeout=60, what="the shard's last row")
    rows = downstream(f"SELECT id, amount, extra FROM `{db}`.orders WHERE {where} ORDER BY id")
    assert [tuple(r) for r in rows] == [(1, 10, None), (2, 21, None), (3, 30, None), (4, 40, 4), (5, 50, 5)]
    other = downstream(f"SELECT id FROM `{db}`.orders WHERE _table = '{rest[0][2]}' "
                       f"AND _schema = '{rest[0][1]}' ORDER BY id")
    assert [r[0] for r in other] == [2, 3]  # the filter covers one shard only
    table = task.downstream_table()
    assert table.column("extra") is not None
    assert {i.name for i in table.indexes} & {"by_amount"} == set()
    metrics = {f.name: f for f in text_string_to_metric_families(shardctl(task, "metrics").stdout)}
    counted = {s.labels["kind"]: s.value for s in metrics["shardmerge_filtered_events"].samples
               if s.name.endswith("_total")}
    assert counted == {"delete": 1, "truncate table": 1, "add index": 1}
    status = shardctl(task, "query-status").stdout
    assert "events ignored by filters.events" in status
    assert "add index 1, delete 1, truncate table 1" in status
    log = task.log_text()
    assert "event filter: truncate table" in log and "event filter: add index" in log


DROPPING = "CREATE TABLE {table} (id INT NOT NULL, amount INT, note VARCHAR(20) NOT NULL, PRIMARY KEY (id))"


@pytest.fixture
def dropping_task(sandbox, tmp_path):
    t = admin_task(sandbox, tmp_path, DROPPING)
    t.config_path.write_text(
        t.config_path.read_text() + "filters:\n  events:\n    - tables: [\"*.*\"]\n      ignore: [drop column]\n"
    )
    yield t
    t.cleanup()


def test_a_column_every_shard_drops_stays_downstream_with_its_values(dropping_task):
    task = dropping_task
    first = task.shards[0]
    task.start()
    for shard in task.shards:
        task.sql(shard, "INSERT INTO {t} (id, amount, note) VALUES (1, 10, 'one'), (2, 20, 'two')")
    for shard in task.shards:
        task.sql(shard, "ALTER TABLE {t} DROP COLUMN note")
    task.sql(first, "UPDATE {t} SET amount = 21 WHERE id = 2")  # the kept value stays through an update
    db = task.target_db
    # a row written while another shard still has the column takes the partial column's
    # filler, '' (the sources replicate apart): the new rows come once every shard dropped it
    task.wait_for(lambda: " pinned" in shardctl(task, "show-ddl-state", "--target", f"{db}.orders").stdout,
                  timeout=60, what="the column pinned")
    for shard in task.shards:
        task.sql(shard, "INSERT INTO {t} (id, amount) VALUES (3, 30)")

    def rows(shard):
        where = f"_source = '{task.source_of(shard[0])}' AND _schema = '{shard[1]}' AND _table = '{shard[2]}'"
        found = task.sandbox.downstream.execute(f"SELECT id, amount, note FROM `{db}`.orders WHERE {where} ORDER BY id")
        return [tuple(r) for r in found]

    task.wait_for(lambda: all(len(rows(s)) == 3 for s in task.shards), timeout=60, what="every shard's new row")
    task.wait_in_sync()  # each shard's columns, row for row, and the table the coordinator says
    for shard in task.shards:
        amount = 21 if shard == first else 20
        assert rows(shard) == [(1, 10, "one"), (2, amount, "two"), (3, 30, None)]
    note = task.downstream_table().column("note")
    assert note is not None and note.nullable and note.type.name == "varchar" and note.type.length == 20

    metrics = {f.name: f for f in text_string_to_metric_families(shardctl(task, "metrics").stdout)}
    counted = {(s.labels["shard"], s.labels["kind"]): s.value for s in metrics["shardmerge_filtered_events"].samples
               if s.name.endswith("_total")}
    assert counted == {(str(task.shard_id(s)), "drop column"): 1 for s in task.shards}
    assert "drop column 1" in shardctl(task, "query-status").stdout
    assert "event filter: drop column" in task.log_text()
    assert " pinned" in shardctl(task, "show-ddl-state", "--target", f"{db}.orders").stdout

    # pinned for good: after a restart, a later DDL leaves it where it is
    assert task.stop() == 0
    task.start()
    task.sql(first, "ALTER TABLE {t} ADD COLUMN extra INT")
    task.sql(first, "INSERT INTO {t} (id, amount, extra) VALUES (4, 40, 4)")
    task.wait_for(lambda: len(rows(first)) == 4, timeout=60, what="the row after the restart")
    table = task.downstream_table()
    assert table.column("extra") is not None and table.column("note") is not None
    assert rows(first)[0] == (1, 10, "one") and rows(first)[3] == (4, 40, None)
