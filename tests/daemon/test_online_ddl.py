"""Online-DDL tools (DM's online-ddl): a shard ALTERed by pt-online-schema-change, run
for real, and another by gh-ost's sequence of statements, replayed in the order gh-ost
issues them (gh-ost is not packaged here), while the other shards run plain ALTERs and
rows flow into every shard. The route's glob would take the tools' tables too
(`*orders*`): they are never routed (online_ddl, by default both tools' names), the
tracker follows them, and each cut-over is one schema change of its shard. At the end
downstream equals the shards, row for row, with the joined schema."""

from __future__ import annotations

import subprocess

import pytest

from tests.daemon.test_table_swap import CREATE, Writers, _rows_on
from tests.replication import ReplicationTask

ALTER = "ADD COLUMN note VARCHAR(20) NULL"


@pytest.fixture
def task(sandbox, tmp_path):
    t = ReplicationTask(sandbox, tmp_path, CREATE)
    text = t.config_path.read_text()
    assert '    table: "orders_*"\n' in text
    t.config_path.write_text(text.replace('    table: "orders_*"\n', '    table: "*orders*"\n'))  # greedy
    yield t
    t.cleanup()


def pt_online_schema_change(task, shard) -> subprocess.CompletedProcess:
    inst = task.sandbox.instance(shard[0])
    dsn = f"h=127.0.0.1,P={inst.port},u=root,D={shard[1]},t={shard[2]}"
    return subprocess.run(
        ["pt-online-schema-change", "--alter", ALTER, "--execute", "--recursion-method=none",
         "--no-check-replication-filters", "--chunk-size=50", "--set-vars", "innodb_lock_wait_timeout=10", dsn],
        capture_output=True, text=True, timeout=300,
    )


def gh_ost_sequence(task, shard, lock) -> None:
    """gh-ost's statements: the ghost table made like the shard's and altered, its
    changelog table, the rows copied in chunks, then (in gh-ost by its binlog reader,
    here by a last sync under the writers' lock) the rows written meanwhile, and the
    atomic cut-over: a sentry table, dropped, and one RENAME swapping the tables."""
    t = "{t}"
    schema, table = shard[1], shard[2]
    gho, ghc, old = (f"`{schema}`.`_{table}_{s}`" for s in ("gho", "ghc", "del"))
    task.sql(shard, f"CREATE TABLE {gho} LIKE {t}")
    task.sql(shard, f"ALTER TABLE {gho} {ALTER}")
    task.sql(shard, f"CREATE TABLE {ghc} (id BIGINT AUTO_INCREMENT, last_update TIMESTAMP NOT NULL "
                    "DEFAULT CURRENT_TIMESTAMP, hint VARCHAR(64) NOT NULL, value TEXT, PRIMARY KEY (id), "
                    "UNIQUE KEY hint_uidx (hint))")
    task.sql(shard, f"INSERT INTO {ghc} (hint, value) VALUES ('state', 'GhostTableMigrated')")
    (top,) = task.sql(shard, f"SELECT COALESCE(MAX(id), 0) FROM {t}")[0]
    for low in range(0, top + 1, 25):
        task.sql(shard, f"INSERT IGNORE INTO {gho} (id, amount) SELECT id, amount FROM {t} FORCE INDEX (PRIMARY) "
                        f"WHERE id > {low} AND id <= {low + 25}")
        task.sql(shard, f"REPLACE INTO {ghc} (hint, value) VALUES ('copy iteration', '{low}')")
    with lock:
        task.sql(shard, f"REPLACE INTO {gho} (id, amount) SELECT id, amount FROM {t}")  # the binlog's changes
        task.sql(shard, f"DELETE FROM {gho} WHERE id NOT IN (SELECT id FROM {t})")
        task.sql(shard, f"CREATE TABLE {old} (id INT NOT NULL) COMMENT 'ghost-cut-over-sentry'")
        task.sql(shard, f"DROP TABLE IF EXISTS {old}")
        task.sql(shard, f"RENAME TABLE {t} TO {old}, {gho} TO {t}")
    task.sql(shard, f"DROP TABLE IF EXISTS {ghc}")
    task.sql(shard, f"DROP TABLE IF EXISTS {old}")


def test_pt_online_schema_change_and_gh_ost_are_one_alter_each_while_rows_flow(task):
    by_pt, by_gh_ost, *plain = task.shards
    task.start()
    with Writers(task) as writers:
        for shard in task.shards:
            _rows_on(task, shard, 30)
        result = pt_online_schema_change(task, by_pt)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "Successfully altered" in result.stdout
        gh_ost_sequence(task, by_gh_ost, writers.locks[by_gh_ost])
        for shard in plain:
            task.sql(shard, f"ALTER TABLE {{t}} {ALTER}")
        for shard in task.shards:
            _rows_on(task, shard, 80)
    task.wait_in_sync(timeout=120)
    joined = task.coordinator_table()
    assert joined.column("note") is not None and not joined.column("note").partial  # every shard has it
    status = task.meta().groups.load(f"{task.target_db}.orders")
    assert set(status.shards) == {task.shard_id(s) for s in task.shards}  # no tool table joined
    assert not task.meta().pauses.load()
    tables = {r[0] for r in task.sandbox.downstream.execute(f"SHOW TABLES IN `{task.target_db}`")}
    assert tables == {"orders"}
    origins = task.sandbox.downstream.execute(f"SELECT DISTINCT _table FROM `{task.target_db}`.orders")
    assert {r[0] for r in origins} == {s[2] for s in task.shards}  # no row of a tool's table
    assert task.stop() == 0
