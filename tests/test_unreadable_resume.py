"""Issue 76: a shard paused because its rows cannot be read (a DDL its tracker cannot
follow, or its worker losing the table) and resumed by its way out as printed, with
traffic running on every shard: every change written before, during and after the pause
arrives, and no row event of a running shard is dropped unexplained (`query-status`'s
`dropped`, the metric `shardmerge_dropped_row_events_total`).

On the code before the fix each `set-schema` story lost the paused shard's changes after
the way out ran, shown running: its worker went on leaving the table's rows out."""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.request

import pytest

from replicator.schema.way_out import WAY_OUT
from tests.replication import admin_task
from tests.test_operator import shardctl
from tests.traffic import Counts, ShardTraffic

# p0 holds no row (ids start at 1): TRUNCATE PARTITION p0 changes nothing upstream
CREATE = (
    "CREATE TABLE {table} (id INT NOT NULL, a INT NOT NULL, note VARCHAR(20) NOT NULL DEFAULT 'x', "
    "PRIMARY KEY (id)) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (0), "
    "PARTITION p1 VALUES LESS THAN MAXVALUE)"
)
# statements MariaDB runs and the tracker cannot follow: one that changes no column, one that
# adds one (a variable whose effect it cannot tell)
UNFOLLOWED = {
    "truncate-partition": "ALTER TABLE {t} TRUNCATE PARTITION p0",
    "set-statement": "SET STATEMENT explicit_defaults_for_timestamp=0 FOR ALTER TABLE {t} ADD COLUMN b INT NULL",
}


class Traffic(ShardTraffic):
    def values(self, row_id):
        return {"a": str(self.random.randint(0, 10**6))}


@pytest.fixture
def task(sandbox, tmp_path):
    t = admin_task(sandbox, tmp_path, CREATE)
    yield t
    t.cleanup()


def status(task) -> dict:
    return json.loads(shardctl(task, "--json", "query-status").stdout)


def paused(task) -> dict:
    try:
        return status(task)["paused"]
    except (json.JSONDecodeError, KeyError):  # (the daemon restarting)
        return {}


class Story:
    """Traffic on every shard (about six transactions a second each); the second shard's
    writer can be made quiet while it is paused (its park then holds nothing)."""

    def __init__(self, task, seed: int = 76):
        self.task = task
        self.stop, self.quiet = threading.Event(), threading.Event()
        lock = threading.Lock()
        self.writers = []
        for i, shard in enumerate(task.shards):
            inst = task.sandbox.instance(shard[0])
            table = f"`{shard[1]}`.`{shard[2]}`"
            self.writers.append(Traffic(f"w{i}", table, inst.connect, random.Random(seed + i), Counts(), lock,
                                        self.stop))
        self.shard = task.shards[1]
        self.writer = self.writers[1]
        step = self.writer.step
        self.writer.step = lambda conn: time.sleep(0.1) or True if self.quiet.is_set() else step(conn)
        self.name = str(task.shard_id(self.shard))
        self.flags = ["--source", task.source_of(self.shard[0]), "--table", f"{self.shard[1]}.{self.shard[2]}"]

    def start(self) -> None:
        for w in self.writers:
            w.start()
        time.sleep(2)

    def upstream(self, statement: str, quiet: bool) -> None:
        """Run `statement` on the shard between two of its transactions."""
        with self.writer.guard:
            if quiet:
                self.quiet.set()
            self.task.sql(self.shard, statement)

    def way_out(self, reason: str, command: str) -> list[str]:
        """The command of the pause's way out that starts with `command`, as printed."""
        way = reason.split(WAY_OUT, 1)[1]
        printed = next(part for part in way.split("`") if part.startswith(f"shardctl {command} "))
        assert " ".join(self.flags) in printed, printed
        return printed.split()[1:]

    def set_schema(self, reason: str) -> None:
        args = self.way_out(reason, "set-schema")
        create = self.task.sql(self.shard, "SHOW CREATE TABLE {t}")[0][1]
        path = self.task.workdir / "create.sql"
        path.write_text(create)
        result = shardctl(self.task, *args[:-1], str(path))  # (F)
        assert result.returncode == 0 and "resumed" in result.stdout, result.stdout + result.stderr

    def finish(self) -> dict:
        self.quiet.clear()
        time.sleep(4)  # its changes after the way out, the other shards' all along
        self.stop.set()
        for w in self.writers:
            w.join(timeout=30)
            assert w.error is None, w.error
        self.task.wait_in_sync(timeout=90)
        now = status(self.task)
        assert now["paused"] == {}, now["paused"]
        assert all(d.get("unexplained", 0) == 0 for d in now["dropped"].values()), now["dropped"]
        return now


def pause_by(task, story: Story, statement: str, quiet: bool) -> str:
    story.upstream(UNFOLLOWED[statement], quiet)
    task.wait_for(lambda: story.name in paused(task), what="the shard to pause")
    reason = paused(task)[story.name]["reason"]
    assert "unsupported DDL" in reason, reason
    time.sleep(2)
    return reason


@pytest.mark.parametrize("park", ["written-while-paused", "quiet-while-paused"])
@pytest.mark.parametrize("statement", sorted(UNFOLLOWED))
def test_set_schema_after_an_unfollowed_ddl_loses_no_change_with_traffic_running(task, statement, park):
    task.start()
    story = Story(task)
    story.start()
    reason = pause_by(task, story, statement, park == "quiet-while-paused")
    story.set_schema(reason)
    now = story.finish()
    # its rows were left out only while it was paused, read again after (none parked)
    assert now["dropped"].get(story.name, {}).get("paused", 0) > 0 or park == "quiet-while-paused"
    assert task.stop() == 0


def test_a_crash_between_the_set_schema_decision_and_its_resume_loses_nothing(task):
    """The decision saves the table it gives the shard with itself (`pins_saved`: the
    daemon killed before it took it): started again, the shard is read again from its
    pause with that table."""
    task.start(crash_at="pins_saved")
    story = Story(task)
    story.start()
    reason = pause_by(task, story, "set-statement", quiet=False)
    args = story.way_out(reason, "set-schema")
    path = task.workdir / "create.sql"
    path.write_text(task.sql(story.shard, "SHOW CREATE TABLE {t}")[0][1])
    shardctl(task, *args[:-1], str(path))  # (its answer is lost with the daemon)
    assert task.wait_exit(timeout=30) == -9, task.log_text()[-3000:]
    task.start()
    story.finish()
    assert task.stop() == 0


def test_binlog_skip_of_an_unfollowed_ddl_keeps_the_shard_streaming(task):
    """Skip keeps the table from before the DDL (TRUNCATE PARTITION changed no column) and
    discards what the shard wrote while paused: here it wrote nothing then, so every row
    must arrive, those after the skip too."""
    task.start()
    story = Story(task)
    story.start()
    reason = pause_by(task, story, "truncate-partition", quiet=True)
    result = shardctl(task, *story.way_out(reason, "binlog skip"))
    assert result.returncode == 0, result.stderr
    story.finish()
    assert task.stop() == 0


def test_a_worker_losing_a_table_pauses_its_shard_and_the_printed_way_out_brings_every_row(task):
    """The invariant: a worker that leaves a running shard's rows out (each source's worker
    made to, at its 40th row event) says so in its stream; the shard pauses there, counted
    unexplained, its way out printed, and that way out, run as printed, has every row read
    again."""
    task.start(fault_at="worker_loses_table:40")
    story = Story(task)
    story.start()
    task.wait_for(lambda: len(paused(task)) == 2, timeout=60, what="a shard of each source to pause")
    with urllib.request.urlopen(task.addr + "/metrics", timeout=10) as response:
        metrics = response.read().decode()
    dropped = status(task)["dropped"]
    for name, pause in paused(task).items():
        reason = pause["reason"]
        assert "its worker could not read its rows" in reason and "a fault the test injected" in reason, reason
        assert dropped[name]["unexplained"] >= 1, dropped
        assert f'shardmerge_dropped_row_events_total{{shard="{name}",why="unexplained"}}' in metrics
        story.shard = next(s for s in task.shards if str(task.shard_id(s)) == name)
        story.flags = ["--source", task.source_of(story.shard[0]), "--table", f"{story.shard[1]}.{story.shard[2]}"]
        story.set_schema(reason)
    story.stop.set()
    for w in story.writers:
        w.join(timeout=30)
        assert w.error is None, w.error
    task.wait_in_sync(timeout=90)
    assert paused(task) == {}
    assert task.stop() == 0
