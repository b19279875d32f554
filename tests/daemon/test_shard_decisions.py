"""Issue 46's decisions on a live daemon, two shards on the sandbox: one shard widening its
primary key widens the merged one (the union) and its updates and deletes still find their
rows by it; one dropping its key pauses with the reason and the way out while the other
goes on; a shard's TRUNCATE deletes only its rows downstream where extract columns tell
them apart (rows after it arrive), and without them pauses as kind truncate with its
schema still known (its next DDL is followed)."""

from __future__ import annotations

import pytest

from replicator.config import load_config
from tests.daemon.test_dm_verbs import ctl_json, flags, held, shardctl
from tests.replication import admin_task

pytestmark = pytest.mark.timeout(300)

CREATE = "CREATE TABLE {table} (id INT NOT NULL PRIMARY KEY, a INT NOT NULL, b VARCHAR(20) NULL)"


def _task(sandbox, tmp_path, extract: bool):
    t = admin_task(sandbox, tmp_path, CREATE, shards_per_server=1, extract=extract)
    t.start()
    for n, shard in enumerate(t.shards):
        t.sql(shard, "INSERT INTO {t} VALUES " + ",".join(f"({n * 1000 + i}, {i}, 'r{i}')" for i in range(5)))
    t.wait_in_sync()
    return t


@pytest.fixture
def task(sandbox, tmp_path):
    t = _task(sandbox, tmp_path, extract=True)
    yield t
    t.stop()
    t.cleanup()


@pytest.fixture
def bare(sandbox, tmp_path):
    t = _task(sandbox, tmp_path, extract=False)
    yield t
    t.stop()
    t.cleanup()


def rows(task) -> set[tuple]:
    return set(task.sandbox.downstream.execute(f"SELECT id, a, b FROM `{task.target_db}`.orders"))


def key(task) -> list[str]:
    return [p.column for p in task.downstream_table().primary_key.parts]


def test_a_widened_key_widens_the_merged_key_and_rows_still_go_by_it(task):
    a, b = task.shards[:2]
    task.sql(a, "ALTER TABLE {t} DROP PRIMARY KEY, ADD PRIMARY KEY (id, a)")
    task.wait_for(lambda: key(task) == ["_source", "_schema", "_table", "id", "a"], what="the union key")
    assert not held(task)
    task.sql(a, "INSERT INTO {t} VALUES (1, 7, 'same id, other a')")  # a key only (id, a) takes
    task.sql(a, "UPDATE {t} SET b = 'updated' WHERE id = 2 AND a = 2")
    task.sql(a, "DELETE FROM {t} WHERE id = 3 AND a = 3")
    task.sql(b, "UPDATE {t} SET b = 'other' WHERE id = 1001")
    task.wait_in_sync()
    got = rows(task)
    assert {(1, 1, "r1"), (1, 7, "same id, other a"), (2, 2, "updated"), (1001, 1, "other")} <= got
    assert (3, 3, "r3") not in got
    assert "DROP PRIMARY KEY, ADD PRIMARY KEY" in task.log_text()


def test_a_dropped_key_pauses_that_shard_with_the_way_out_and_the_other_goes_on(task):
    a, b = task.shards[:2]
    task.sql(a, "ALTER TABLE {t} DROP PRIMARY KEY")
    shard_id = str(task.shard_id(a))
    task.wait_for(lambda: shard_id in held(task), what="the shard held at its DDL")
    ddl = held(task)[shard_id]
    assert ddl["kind"] == "conflict"
    assert (
        "the merged table orders would lose its primary key (id): the shard's table has no primary key"
        in (ddl["reason"])
    )
    assert f"`shardctl binlog skip {' '.join(flags(task, a))}`" in ddl["reason"].split("; way out: ")[1]
    task.sql(b, "INSERT INTO {t} VALUES (1500, 1, 'after')")
    task.wait_for(lambda: (1500, 1, "after") in rows(task), what="the other shard's row")
    assert key(task) == ["_source", "_schema", "_table", "id"]
    # its way out: the key back upstream, and the shard resumes by itself
    task.sql(a, "ALTER TABLE {t} ADD PRIMARY KEY (id)")
    task.sql(a, "INSERT INTO {t} VALUES (50, 5, 'back')")
    task.wait_in_sync()
    assert not held(task)


def test_a_truncate_deletes_only_that_shards_rows_downstream(task):
    a = task.shards[0]
    task.sql(a, "TRUNCATE TABLE {t}")
    task.sql(a, "INSERT INTO {t} VALUES (77, 7, 'after')")
    task.wait_in_sync()
    got = rows(task)
    assert {r[0] for r in got if r[0] < 1000} == {77}
    assert {r[0] for r in got if r[0] >= 1000} == {1000 + i for i in range(5)}
    assert not held(task)
    assert "deleted 5 rows" in task.log_text()


def test_a_truncate_with_extract_columns_from_patterns_deletes_only_that_shards_rows(sandbox, tmp_path):
    """Issue 71: with DM's extract-* as import-dm writes them (what a pattern captures of the
    schema and table names), a shard's TRUNCATE deletes its rows as with whole names; it
    paused, `no extract columns for source, schema and table`."""
    t = admin_task(sandbox, tmp_path, CREATE, shards_per_server=1)
    captured = (
        "    extract:\n      source: _source\n"
        "      schema: {column: _schema, regex: '.*_db(\\d+)'}\n"
        "      table: {column: _table, regex: 'orders_(\\d+)'}\n"
    )
    text = t.config_path.read_text()
    t.config_path.write_text(text.replace("    extract:\n      source: _source\n      schema: _schema\n"
                                          "      table: _table\n", captured))
    assert t.config_path.read_text() != text
    t.config = load_config(t.config_path)
    try:
        t.start()
        for n, shard in enumerate(t.shards):
            t.sql(shard, "INSERT INTO {t} VALUES " + ",".join(f"({n * 1000 + i}, {i}, 'r{i}')" for i in range(5)))
        t.wait_for(lambda: len(rows(t)) == 5 * len(t.shards), what="the rows downstream")
        assert {r[0] for r in t.sandbox.downstream.execute(f"SELECT _table FROM `{t.target_db}`.orders")} == {
            "10", "20"
        }
        a = t.shards[0]
        t.sql(a, "TRUNCATE TABLE {t}")
        t.sql(a, "INSERT INTO {t} VALUES (77, 7, 'after')")
        t.wait_for(lambda: {r[0] for r in rows(t) if r[0] < 1000} == {77}, what="its rows deleted, the new one")
        assert {r[0] for r in rows(t) if r[0] >= 1000} == {1000 + i for i in range(5)}
        assert not held(t)
        assert t.stop() == 0
    finally:
        t.cleanup()


def test_a_truncate_without_extract_columns_pauses_with_its_schema_known(bare):
    a = bare.shards[0]
    shard_id = str(bare.shard_id(a))
    bare.sql(a, "TRUNCATE TABLE {t}")
    bare.wait_for(lambda: shard_id in held(bare), what="the shard held at its TRUNCATE")
    ddl = held(bare)[shard_id]
    assert ddl["kind"] == "truncate" and "no extract columns" in ddl["reason"]
    assert f"`shardctl binlog skip {' '.join(flags(bare, a))}`" in ddl["reason"]
    # its next DDL is followed: the schema was not forgotten
    bare.sql(a, "ALTER TABLE {t} ADD COLUMN c INT NULL")
    bare.wait_for(lambda: bare.downstream_table().column("c") is not None, what="the column downstream")
    assert held(bare)[shard_id]["kind"] == "truncate"
    bare.sql(a, "INSERT INTO {t} VALUES (88, 8, 'after', 1)")
    # the way out: its rows deleted downstream by hand, then the skip; the rows after arrive
    bare.sandbox.downstream.execute(f"DELETE FROM `{bare.target_db}`.orders WHERE id < 1000")
    way = held(bare)[shard_id]["reason"].split("; way out: ", 1)[1]
    printed = next(p for p in way.split("`") if p.startswith("shardctl binlog skip "))  # (as printed)
    result = shardctl(bare, *printed.split()[1:])
    assert result.returncode == 0, result.stderr
    bare.wait_in_sync()
    assert (88, 8, "after") in rows(bare) and not held(bare)
    assert ctl_json(bare, "binlog", "list")["blocked"] == []
