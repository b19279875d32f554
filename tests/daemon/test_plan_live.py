"""`shardmerge plan` and the live daemon agree (issue 12): the same schema story,
played by plan's Player and run for real on the sandbox's shards while rows flow,
gives the same downstream DDL in the same order and the same final table; and the
daemon's rows end equal to the shards'."""

from __future__ import annotations

import json

import pymysql

from lattice import materialize
from replicator.apply.inspect import read_table, with_server_choices
from replicator.schema.coordinator import Coordinator
from replicator.schema.plan import Player
from tests.replication import ReplicationTask

CREATE = (
    "CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, v VARCHAR(255), "
    "KEY kv (v)) DEFAULT CHARSET=utf8mb4"
)
EXTRACT = {"source": "_source", "schema": "_schema", "table": "_table"}

# (shard index, DDL with {t} for the shard's table): the defects of issue 12 among them
STORY = [
    (0, "ALTER TABLE {t} ADD COLUMN note VARCHAR(20) NULL DEFAULT 'n'"),
    (1, "ALTER TABLE {t} ADD COLUMN c ENUM('y','x') NOT NULL"),  # existing rows get 'y'
    (2, "ALTER TABLE {t} MODIFY amount DECIMAL(14,2) NOT NULL"),
    (1, "ALTER TABLE {t} ADD COLUMN note VARCHAR(20) NULL DEFAULT 'n'"),
    (0, "ALTER TABLE {t} RENAME COLUMN note TO remark"),
    (0, "ALTER TABLE {t} DROP COLUMN remark"),  # the rename is cancelled
    (3, "ALTER TABLE {t} ADD COLUMN extra DATETIME"),
    (2, "ALTER TABLE {t} ADD COLUMN extra INT"),  # conflict: shard 2 pauses
    (3, "ALTER TABLE {t} DROP COLUMN extra"),  # and resumes
    (0, "ALTER TABLE {t} MODIFY v VARCHAR(1000)"),  # the index becomes a prefix one
    (3, "DROP TABLE {t}"),  # a shard leaves
    (3, "CREATE TABLE {t} (id INT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, c ENUM('y','x') NOT NULL)"),
    (0, "ALTER TABLE {t} ADD COLUMN c ENUM('y','x') NOT NULL"),
    (2, "ALTER TABLE {t} ADD COLUMN c ENUM('y','x') NOT NULL DEFAULT 'x'"),  # its rows get 'x'
]


def journal(task: ReplicationTask) -> list[str]:
    rows = task.sandbox.downstream.execute(
        f"SELECT statements FROM `{task.meta_schema}`.ddl_journal WHERE task='{task.name}' ORDER BY seq"
    )
    return [s for (text,) in rows for s in json.loads(text)]


def test_plan_and_the_daemon_run_the_same_ddl(sandbox, tmp_path):
    task = ReplicationTask(sandbox, tmp_path, CREATE)
    target = f"{task.target_db}.orders"
    (charset,) = sandbox.upstreams[0].execute(
        "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA "
        f"WHERE SCHEMA_NAME = '{task.shards[0][1]}'"
    )
    player = Player(
        target,
        coordinator=Coordinator(target, "mariadb", extract_columns=EXTRACT),
        schema_charset=tuple(charset),
    )
    player.start(
        {task.shard_id(s): CREATE.format(table=f"`{s[2]}`") for s in task.shards}
    )
    rows = iter(range(1, 10**6))
    left: list[int] = []  # rows of the shard that leaves (DROP TABLE) and comes back
    try:
        task.start()
        for shard in task.shards:
            task.sql(shard, f"INSERT INTO {{t}} (id, amount, v) VALUES ({next(rows)}, 1.5, 'a')")
        meta = task.meta()
        task.wait_for(lambda: meta.groups.history_count(target) >= len(task.shards), what="the first start")
        before, decisions = journal(task), meta.groups.history_count(target)
        planned: list[str] = []
        for n, (i, ddl) in enumerate(STORY, start=1):
            shard = task.shards[i]
            planned += player.ddl(task.shard_id(shard), ddl.format(t=f"`{shard[1]}`.`{shard[2]}`")).downstream
            if ddl.startswith("DROP TABLE"):
                left = [row_id for (row_id,) in task.sql(shard, "SELECT id FROM {t}")]
            task.sql(shard, ddl)
            task.wait_for(lambda n=n: meta.groups.history_count(target) >= decisions + n, what=f"step {n}: {ddl}")
            for s in task.shards:
                if not (s == task.shards[3] and ddl.startswith("DROP TABLE")):
                    task.sql(s, f"INSERT INTO {{t}} (id, amount) VALUES ({next(rows)}, 2.5)")
        # docs/design.md "Creating and dropping tables": as DM does, a dropped table's rows stay
        # downstream; the table created again under the name starts a new shard
        down = sandbox.downstream
        dropped = task.shards[3]
        where = f"_source='{task.source_of(dropped[0])}' AND _schema='{dropped[1]}' AND _table='{dropped[2]}'"
        task.wait_for(
            lambda: {r for (r,) in down.execute(f"SELECT id FROM `{task.target_db}`.orders WHERE {where}")}
            >= set(left),
            what="the dropped table's rows downstream",
        )
        # (the daemon writes the shard's new rows beside them in the key meanwhile: a deadlock
        # is tried again, as the applier tries its batches)
        delete = f"DELETE FROM `{task.target_db}`.orders WHERE {where} AND id IN ({','.join(map(str, left))})"
        for attempt in range(5):
            try:
                down.execute(delete)
                break
            except pymysql.err.OperationalError as exc:
                if exc.args[0] != 1213 or attempt == 4:
                    raise
        task.wait_in_sync(timeout=90)
        assert journal(task)[len(before):] == planned
        with sandbox.downstream.connect() as conn:
            actual = read_table(conn, task.target_db, "orders")
        assert actual == with_server_choices(materialize(player.coordinator.target, "mariadb"), actual)
        assert player.coordinator.blocked == {}
        assert task.stop() == 0
    finally:
        task.cleanup()
