"""Paused shards park their changes (issue 45, docs/operations/long-pauses.md): a shard paused by
a conflict has its changes kept in the meta schema, so its source's watermark moves on
and the upstream may purge the binlogs they were read from; once the conflict is
resolved they are applied, then its live ones. On a sandbox of its own (its binlogs
are purged)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from replicator.sandbox import Sandbox
from tests.replication import REPO, ReplicationTask, admin_task

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(600)]

CREATE = (
    "CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, note VARCHAR(20) NULL) "
    "DEFAULT CHARSET=utf8mb4"
)
ROWS = 100_000  # the figure; the crash variants write fewer (what they test is the crash)


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    sb = Sandbox(tmp_path_factory.mktemp("parking"), upstreams=1, watchdog=True)
    sb.up()
    try:
        yield sb
    finally:
        sb.down()


def write(task: ReplicationTask, shard, first: int, count: int) -> None:
    for start in range(first, first + count, 2000):
        values = ",".join(
            f"({i}, {i % 1000}.25, 'n{i % 97}')" for i in range(start, min(start + 2000, first + count))
        )
        task.sql(shard, f"INSERT INTO {{t}} (id, amount, note) VALUES {values}")


def shard_rows(task: ReplicationTask, shard) -> int:
    ((n,),) = task.sandbox.downstream.execute(
        f"SELECT COUNT(*) FROM `{task.target_db}`.orders WHERE _schema = '{shard[1]}' AND _table = '{shard[2]}'"
    )
    return int(n)


def shardctl_status(task: ReplicationTask) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "replicator.cli.shardctl", "--addr", task.addr, "--json", "query-status"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    return json.loads(done.stdout)


def watermark_file(task: ReplicationTask) -> str:
    return task.sandbox.downstream.execute(f"SELECT file FROM `{task.meta_schema}`.watermark")[0][0]


@pytest.mark.parametrize(
    "crash_at",
    [
        None,
        "shard_resumed",  # resumed by its DDL, its park not fed yet: its window reopens at the start
        "park_fed",  # its park fed to the applier, not all applied: fed again at the start
    ],
)
@pytest.mark.long
def test_a_paused_shards_changes_outlive_the_purge_of_its_binlogs(own, tmp_path, crash_at):
    """Paused by a conflict, a shard's rows are parked while the other shard's go on; its
    binlogs are purged; its own DDL resolves the conflict and its parked rows go
    downstream, then its live ones; the park is dropped. Killed while resuming, the next
    start takes its rows from the park again (the binlogs it read them from are gone)."""
    task = admin_task(own, tmp_path, CREATE)
    task.config_path.write_text(task.config_path.read_text().replace("batch_size: 50", "batch_size: 1000"))
    up = own.instance("up1")
    rows = ROWS if crash_at is None else ROWS // 25
    try:
        task.start(crash_at=crash_at)
        paused, other = task.shards
        write(task, paused, 1, 10)
        task.sql(paused, "ALTER TABLE {t} MODIFY note VARCHAR(20) NULL DEFAULT 'x'")  # conflicts
        task.wait_for(lambda: "paused from" in task.log_text(), what="the shard paused")
        (pause_file,) = [
            r[0] for r in task.sandbox.downstream.execute(f"SELECT file FROM `{task.meta_schema}`.pause")
        ]
        write(task, paused, 1000, rows)
        write(task, other, 1000, rows)
        task.sql(paused, "UPDATE {t} SET amount = amount + 1 WHERE id < 5000")
        task.sql(paused, "DELETE FROM {t} WHERE id BETWEEN 5000 AND 5999")
        # the other shard never stops: its rows arrive while the first is paused
        task.wait_for(lambda: shard_rows(task, other) == rows, timeout=180, what="the other shard's rows")
        # the paused shard's changes are parked: its source's watermark passes them
        up.execute("FLUSH BINARY LOGS")
        (end_file,) = [r[0] for r in up.execute("SHOW MASTER STATUS")]
        task.wait_for(
            lambda: watermark_file(task) >= end_file, timeout=120, what="the watermark past the pause"
        )
        up.execute(f"PURGE BINARY LOGS TO '{end_file}'")
        assert pause_file not in [r[0] for r in up.execute("SHOW BINARY LOGS")]
        ((parked,),) = task.sandbox.downstream.execute(
            f"SELECT SUM(rows_count) FROM `{task.meta_schema}`.park"
        )
        assert int(parked) >= rows
        status = shardctl_status(task)
        (entry,) = status["paused"].values()  # what query-status says of it
        assert entry["parked"]["rows"] >= rows and entry["parked"]["bytes"] > 0
        task.sql(paused, "ALTER TABLE {t} MODIFY note VARCHAR(20) NULL DEFAULT NULL")  # resolved
        if crash_at is not None:
            assert task.wait_exit(timeout=60) == -9, f"no crash at {crash_at}:\n{task.log_text()[-3000:]}"
            write(task, paused, 200_000, 50)  # (while it is down)
            task.start()
        task.sql(paused, "UPDATE {t} SET note = 'after' WHERE id % 7 = 0")
        task.wait_in_sync(timeout=300)
        assert "its parked changes go downstream" in task.log_text()
        time.sleep(2)  # (a watermark write after the park is applied drops it)
        assert task.sandbox.downstream.execute(f"SELECT COUNT(*) FROM `{task.meta_schema}`.park") == [(0,)]
        assert watermark_file(task) >= end_file  # (never back to a purged binlog)
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_a_park_past_its_limit_holds_the_binlog_from_where_it_ends(own, tmp_path):
    """Past `options.park_limit` a paused shard parks no more: its source's watermark stays
    where its park ends (the upstream keeps the binlogs from there), and once resumed the
    shard's parked changes go downstream, then its source reads the rest again."""
    task = admin_task(own, tmp_path, CREATE, options="  park_limit: 20000\n")
    task.config_path.write_text(task.config_path.read_text().replace("batch_size: 50", "batch_size: 1000"))
    try:
        task.start()
        paused, other = task.shards
        write(task, paused, 1, 10)
        task.sql(paused, "ALTER TABLE {t} MODIFY note VARCHAR(20) NULL DEFAULT 'x'")  # conflicts
        task.wait_for(lambda: "paused from" in task.log_text(), what="the shard paused")
        first = 1000
        while "passed options.park_limit (20000 bytes)" not in task.log_text():
            assert first < 200_000, "the park never filled"
            write(task, paused, first, 2000)
            first += 2000
            time.sleep(1.5)  # (a batch per watermark write)
        write(task, paused, first, 10_000)  # not parked: read again once it resumes
        write(task, other, 1000, 2000)
        task.wait_for(lambda: shard_rows(task, other) == 2000, timeout=120, what="the other shard's rows")
        ((parked, size),) = task.sandbox.downstream.execute(
            f"SELECT SUM(rows_count), SUM(bytes) FROM `{task.meta_schema}`.park"
        )
        assert 0 < int(parked) <= first - 1000 and int(size) > 20000  # (the batch that passed it went)
        task.sql(paused, "UPDATE {t} SET amount = amount + 1 WHERE id % 3 = 0")
        task.sql(paused, "ALTER TABLE {t} MODIFY note VARCHAR(20) NULL DEFAULT NULL")  # resolved
        task.wait_in_sync(timeout=300)
        assert (
            "its parked changes go downstream" in task.log_text() and "re-reading source" in task.log_text()
        )
        time.sleep(2)
        assert task.sandbox.downstream.execute(f"SELECT COUNT(*) FROM `{task.meta_schema}`.park") == [(0,)]
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_a_shard_paused_again_before_its_park_is_dropped_parks_anew(own, tmp_path):
    """Killed with its park fed, not dropped yet: the next start feeds the park again, and
    the shard's next DDL, read at once, pauses it again before a watermark write drops the
    park. Its changes of that second pause are parked in turn and go downstream when it
    resumes; the first park, fed again with them, adds nothing (live stories L54: they were
    neither parked nor read again, the first park's changes fed in their place, and its
    DDLs told the source the table as it was before the first pause)."""
    task = admin_task(own, tmp_path, CREATE)
    try:
        task.start(crash_at="park_fed")
        paused, _ = task.shards
        write(task, paused, 1, 10)
        task.sql(paused, "ALTER TABLE {t} MODIFY note VARCHAR(20) NULL DEFAULT 'x'")  # conflicts
        task.wait_for(lambda: "paused from" in task.log_text(), what="the shard paused")
        write(task, paused, 1000, 200)
        task.wait_for(
            lambda: (
                task.sandbox.downstream.execute(
                    f"SELECT COALESCE(SUM(rows_count), 0) FROM `{task.meta_schema}`.park"
                )[0][0]
                >= 200
            ),
            timeout=60,
            what="the paused shard's rows parked",
        )
        task.sql(paused, "ALTER TABLE {t} MODIFY note VARCHAR(20) NULL DEFAULT NULL")  # resolved
        assert task.wait_exit(timeout=60) == -9, f"no crash at park_fed:\n{task.log_text()[-3000:]}"
        # while it is down: paused again by its next DDL, with rows of every kind meanwhile
        task.sql(
            paused, "ALTER TABLE {t} ADD COLUMN extra INT NULL, MODIFY note VARCHAR(20) NULL DEFAULT 'y'"
        )
        write(task, paused, 5000, 200)
        task.sql(paused, "UPDATE {t} SET amount = amount + 1, extra = 7 WHERE id % 3 = 0")
        task.sql(paused, "DELETE FROM {t} WHERE id BETWEEN 1000 AND 1049 OR id BETWEEN 5000 AND 5049")
        task.sql(paused, "ALTER TABLE {t} MODIFY note VARCHAR(20) NULL DEFAULT NULL")  # resolved
        write(task, paused, 9000, 10)
        task.start()
        task.wait_in_sync(timeout=120)
        restarted = task.log_text().split("took over task", 1)[1]
        assert "its parked changes go downstream" in restarted and "paused from" in restarted
        time.sleep(2)  # (a watermark write after both are applied drops the park)
        assert task.sandbox.downstream.execute(f"SELECT COUNT(*) FROM `{task.meta_schema}`.park") == [(0,)]
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_a_start_past_a_parked_ddl_reads_the_shards_later_rows_with_it(own, tmp_path):
    """Live stories 610981: paused at a row the downstream refused, a shard ADDs a column and
    writes rows with it; parked, its source's watermark passes the ADD before any decision of
    it. Killed and started again there, its worker must track the table with the column (the
    history has it from its reading): once the row is retried as printed, the DDL is decided
    from the park and every row arrives, those written after the start too."""
    task = admin_task(own, tmp_path, CREATE)
    task.config_path.write_text(task.config_path.read_text().replace("batch_size: 50", "batch_size: 1000"))
    up = own.instance("up1")
    target = f"`{task.target_db}`.orders"
    try:
        task.start()
        paused, other = task.shards
        write(task, paused, 1, 10)
        task.wait_for(lambda: shard_rows(task, paused) == 10, what="the first rows")
        task.sandbox.downstream.execute(f"ALTER TABLE {target} MODIFY note VARCHAR(5) NULL")  # (by hand)
        task.sql(paused, "INSERT INTO {t} (id, amount, note) VALUES (11, 1.25, 'longer than five')")
        task.wait_for(lambda: "refused the insert of the row" in task.log_text(), what="the row refused")
        task.sql(paused, "ALTER TABLE {t} ADD COLUMN extra INT NULL")
        task.sql(paused, "INSERT INTO {t} (id, amount, note, extra) VALUES (12, 2.5, 'a', 7)")
        write(task, other, 1000, 2000)
        task.wait_for(lambda: shard_rows(task, other) == 2000, timeout=120, what="the other shard's rows")
        up.execute("FLUSH BINARY LOGS")
        (end_file,) = [r[0] for r in up.execute("SHOW MASTER STATUS")]
        write(task, other, 5000, 10)
        task.wait_for(lambda: watermark_file(task) >= end_file, timeout=120, what="the watermark past the ADD")
        task.kill()
        task.start()
        task.sandbox.downstream.execute(f"ALTER TABLE {target} MODIFY note VARCHAR(20) NULL")  # (fixed)
        retried = subprocess.run(
            [sys.executable, "-m", "replicator.cli.shardctl", "--addr", task.addr, "handle-error", "retry",
             "--source", task.source_of(paused[0]), "--table", f"{paused[1]}.{paused[2]}"],
            capture_output=True, text=True, cwd=REPO, timeout=60,
        )
        assert retried.returncode == 0, retried.stdout + retried.stderr
        task.sql(paused, "INSERT INTO {t} (id, amount, note, extra) VALUES (13, 3.5, 'b', 8)")
        task.wait_in_sync(timeout=120)
        assert task.sandbox.downstream.execute(
            f"SELECT id, extra FROM {target} WHERE _table = '{paused[2]}' AND id > 11 ORDER BY id"
        ) == [(12, 7), (13, 8)]
        assert shardctl_status(task)["paused"] == {}
        assert task.stop() == 0
    finally:
        task.cleanup()
