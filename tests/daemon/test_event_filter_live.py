"""DM's binlog event filters (filters.events) on live tasks: one where a shard's deletes, its
TRUNCATE and its ADD INDEX are ignored while its columns still change downstream, one where
every shard drops a column the downstream table keeps, with its values (what the coordinator
takes of each filtered DDL, table-driven: tests/unit/test_event_filter.py)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.daemon.test_operator import shardctl
from tests.replication import admin_task

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
