"""Issue 71: every way out works on a live shard. Each kind of pause is caused on the
sandbox's servers with traffic on every shard (`Story`), its way out is run as printed
(the command `query-status` shows, or the change upstream it names), and every row ends
equal upstream and downstream."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from replicator.schema.way_out import WAY_OUT
from replicator.state.coordinator_store import MetaStore
from tests.daemon.test_operator import shardctl
from tests.daemon.test_unreadable_resume import CREATE, Story, block_of, paused, status
from tests.replication import REPO, admin_task


@pytest.fixture
def task(sandbox, tmp_path):
    t = admin_task(sandbox, tmp_path, CREATE)
    yield t
    t.cleanup()


def rows_downstream(task, shard) -> str:
    """What the shard's rows downstream hold (their count alone may stay as rows come and go)."""
    where = f"_source = '{task.source_of(shard[0])}' AND _schema = '{shard[1]}' AND _table = '{shard[2]}'"
    ((rows,),) = task.sandbox.downstream.execute(
        f"SELECT CONCAT_WS(',', COUNT(*), SUM(a), MAX(id)) FROM `{task.target_db}`.orders WHERE {where}"
    )
    return rows


def test_one_shard_paused_by_the_operator_waits_through_a_restart_and_its_printed_way_out_brings_every_row(task):
    """Issue 71: `pause-task --source S --table T` pauses one shard (the others stream on),
    a restart keeps it paused, and the way out query-status prints for it, run as printed,
    brings every row it wrote meanwhile, with traffic on every shard throughout."""
    task.start()
    story = Story(task)
    story.start()
    paused_shard = story.shard
    result = shardctl(task, "pause-task", *story.flags)
    assert result.returncode == 0 and "paused at" in result.stdout, result.stdout + result.stderr
    again = shardctl(task, "pause-task", *story.flags)
    assert again.returncode != 0 and "paused already" in again.stdout + again.stderr
    time.sleep(3)  # (what was in flight applied)
    before = rows_downstream(task, paused_shard)
    other = task.shards[0]
    other_before = rows_downstream(task, other)
    time.sleep(4)
    assert rows_downstream(task, paused_shard) == before, "rows of the paused shard arrived"
    assert rows_downstream(task, other) != other_before, "the other shards stopped"
    task.kill()
    task.start()
    reason = paused(task)[story.name]["reason"]
    assert reason.startswith("paused by the operator"), reason
    time.sleep(2)
    assert rows_downstream(task, paused_shard) == before, "rows of the paused shard arrived after a restart"
    result = shardctl(task, *story.way_out(reason, "resume-task"))
    assert result.returncode == 0 and "resumed" in result.stdout, result.stdout + result.stderr
    story.finish()
    assert task.stop() == 0


def printed_commands(reason: str) -> list[list[str]]:
    """The `shardctl ...` commands a pause's way out prints, as arguments."""
    way = reason.split(WAY_OUT, 1)[1]
    return [part.split()[1:] for part in way.split("`") if part.startswith("shardctl ")]


@pytest.mark.parametrize("kind", ["conflict", "key loss", "refused row", "propagation off"])
def test_each_pause_kinds_way_out_run_as_printed_brings_every_row_with_traffic(task, kind):
    """Issue 71: for each kind of pause, caused on real servers with traffic on every shard,
    the way out `query-status` prints is run as printed (its command, or the change upstream
    it names), and the shard resumes with every row equal upstream and downstream. (The
    unfollowed DDL, the rows that could not be replayed, a worker losing a table, a failed
    resync and an operator's pause have theirs above and in tests/spark/test_resync.py.)"""
    task.start()
    story = Story(task)
    story.start()
    merged = f"`{task.target_db}`.orders"
    if kind == "conflict":
        story.upstream("ALTER TABLE {t} ALTER COLUMN note SET DEFAULT 'y'", quiet=False)
        task.wait_for(lambda: "differ" in block_of(task, story.name).get("reason", ""), what="the conflict")
        time.sleep(2)  # (its rows while held)
        (skip,) = [c for c in printed_commands(block_of(task, story.name)["reason"]) if c[:2] == ["binlog", "skip"]]
        result = shardctl(task, *skip)
        assert result.returncode == 0, result.stdout + result.stderr
    elif kind == "key loss":
        story.upstream("ALTER TABLE {t} DROP PRIMARY KEY", quiet=False)
        task.wait_for(lambda: "primary key" in block_of(task, story.name).get("reason", ""), what="the key loss")
        reason = block_of(task, story.name)["reason"]
        assert f"restore the key on {story.name} with an ALTER upstream" in reason, reason
        time.sleep(2)
        story.upstream("ALTER TABLE {t} ADD PRIMARY KEY (id)", quiet=False)  # (the way out it names)
    elif kind == "refused row":
        # the downstream refuses the writers' new rows: every shard pauses at such a row
        ((top,),) = task.sandbox.downstream.execute(f"SELECT MAX(id) FROM {merged}")
        task.sandbox.downstream.execute(f"ALTER TABLE {merged} ADD CONSTRAINT small_a CHECK (id < {top + 3})")
        task.wait_for(lambda: story.name in paused(task), what="a refused row to pause the shard")
        time.sleep(2)
        task.sandbox.downstream.execute(f"ALTER TABLE {merged} DROP CONSTRAINT small_a")  # (the fix)
        time.sleep(2)  # (a row refused just before the fix pauses its shard too)
        for pause in paused(task).values():
            assert "handle-error" in pause["reason"], pause
            (retry,) = [c for c in printed_commands(pause["reason"]) if c[0] == "handle-error"]
            result = shardctl(task, *retry)
            assert result.returncode == 0, result.stdout + result.stderr
    else:
        result = shardctl(task, "disable-ddl-propagation", "--target", f"{task.target_db}.orders")
        assert result.returncode == 0, result.stdout + result.stderr
        story.upstream("ALTER TABLE {t} ADD COLUMN c INT NULL", quiet=False)
        task.wait_for(lambda: block_of(task, story.name).get("kind") == "waiting", what="the DDL to wait")
        time.sleep(2)
        (enable,) = printed_commands(block_of(task, story.name)["reason"])
        result = shardctl(task, *enable)
        assert result.returncode == 0, result.stdout + result.stderr
    story.finish()
    assert task.stop() == 0


def test_a_truncate_without_extract_columns_way_out_run_as_printed_brings_every_row_with_traffic(sandbox, tmp_path):
    """Issue 71: without extract columns a shard's TRUNCATE cannot delete its rows alone
    downstream: the shard pauses, and its way out, run as printed with traffic on every
    shard (its rows deleted by hand, then `binlog skip`), leaves the merged table equal to
    the union of the shards, the rows it wrote after its TRUNCATE there."""
    task = admin_task(sandbox, tmp_path, CREATE, extract=False)
    try:
        task.start()
        story = Story(task, spaced=True)
        story.start()
        story.upstream("TRUNCATE TABLE {t}", quiet=False)
        task.wait_for(lambda: "TRUNCATE" in block_of(task, story.name).get("reason", ""), what="the TRUNCATE")
        reason = block_of(task, story.name)["reason"]
        assert f"delete {story.name}'s rows from the merged table by hand" in reason, reason
        time.sleep(2)  # (its rows written before the TRUNCATE applied; after, held)
        low = task.shards.index(story.shard) * 10**6
        task.sandbox.downstream.execute(  # (by hand: this shard's ids are its own)
            f"DELETE FROM `{task.target_db}`.orders WHERE id > {low} AND id <= {low + 10**6}"
        )
        (skip,) = printed_commands(reason)
        assert skip[:2] == ["binlog", "skip"], skip
        result = shardctl(task, *skip)
        assert result.returncode == 0, result.stdout + result.stderr
        story.finish()
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_rows_of_a_shard_outside_its_group_way_out_run_as_printed_brings_every_row_with_traffic(task):
    """Issue 71: a shard its group lost (as a table renamed away would; here its meta row,
    while the daemon is down) pauses at its next rows, the others stream on, and its way
    out, `set-schema` run as printed, brings every row it wrote meanwhile."""
    task.start()
    story = Story(task)
    story.start()
    assert task.stop() == 0
    store = MetaStore(task.meta(), f"{task.target_db}.orders")
    store.put_shard(task.shard_id(story.shard), None)
    task.meta().execute(store.flush_sql())
    task.start()
    task.wait_for(lambda: story.name in paused(task), what="the shard to pause")
    reason = paused(task)[story.name]["reason"]
    assert "not in its group" in reason, reason
    other = task.shards[0]
    before = rows_downstream(task, other)
    task.wait_for(lambda: rows_downstream(task, other) != before, what="the other shards' rows")
    story.set_schema(reason)
    story.finish()
    assert task.stop() == 0


@pytest.mark.long  # (a Spark job from the command line: about a minute)
def test_a_purged_binlog_way_out_run_as_printed_brings_every_row_with_traffic(task):
    """Issue 71: the binlog a source resumes from purged while the daemon was down, with
    traffic on every shard: the source stops with an error naming `shardmerge resync
    --source`, and that command, run as printed while every shard is written, copies its
    shards again and streams them on, every row equal."""
    task.start()
    story = Story(task)
    story.start()
    assert task.stop() == 0
    upstream = task.sandbox.instance(story.shard[0])
    source = task.source_of(story.shard[0])
    resume_file = task.meta().watermarks.load()[source][0].file
    upstream.execute("FLUSH BINARY LOGS")
    newest = upstream.execute("SHOW MASTER STATUS")[0][0]

    def purged() -> bool:
        for (thread,) in upstream.execute("SELECT id FROM information_schema.PROCESSLIST WHERE COMMAND LIKE "
                                          "'Binlog Dump%'"):
            upstream.execute(f"KILL {thread}")  # (a dump thread keeps its file)
        upstream.execute(f"PURGE BINARY LOGS TO '{newest}'")
        return resume_file not in {r[0] for r in upstream.execute("SHOW BINARY LOGS")}

    task.wait_for(purged, what=f"{resume_file} purged")
    task.start()
    task.wait_for(lambda: status(task)["sources"].get(source, {}).get("error"), what="the purged binlog")
    error = status(task)["sources"][source]["error"]
    printed = next(p for p in error.split("`") if p.startswith("shardmerge resync "))
    assert printed == f"shardmerge resync --config TASK --source {source}", error
    args = printed.split()[1:]
    args[args.index("TASK")] = str(task.config_path)
    done = subprocess.run([sys.executable, "-m", "replicator.cli.shardmerge", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    story.finish()
    assert "every shard of it resynced; it reads from" in task.log_text()
    assert task.stop() == 0
