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
from tests.daemon.test_operator import shardctl
from tests.replication import admin_task
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
    b = False  # its rows give the column b a value (after a DDL that added it)

    def values(self, row_id):
        values = {"a": str(self.random.randint(0, 10**6))}
        if self.b:
            values["b"] = str(self.random.randint(0, 10**6))
        return values


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

    def __init__(self, task, seed: int = 76, spaced: bool = False):
        """`spaced`: each shard's writer takes ids of its own (from i * 10**6 + 1), for a task
        without extract columns, whose merged table keys rows by id alone."""
        self.task = task
        self.stop, self.quiet = threading.Event(), threading.Event()
        lock = threading.Lock()
        self.writers = []
        for i, shard in enumerate(task.shards):
            inst = task.sandbox.instance(shard[0])
            table = f"`{shard[1]}`.`{shard[2]}`"
            self.writers.append(Traffic(f"w{i}", table, inst.connect, random.Random(seed + i), Counts(), lock,
                                        self.stop, first_id=i * 10**6 + 1 if spaced else 1))
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

    def finish(self, unexplained: int = 0) -> dict:
        """`unexplained`: the drops the story's shard may count unexplained (a fault's)."""
        self.quiet.clear()
        time.sleep(4)  # its changes after the way out, the other shards' all along
        self.stop.set()
        for w in self.writers:
            w.join(timeout=30)
            assert w.error is None, w.error
        self.task.wait_in_sync(timeout=90)
        now = status(self.task)
        assert now["paused"] == {}, now["paused"]
        counted = {s: d.get("unexplained", 0) for s, d in now["dropped"].items()}
        assert counted.get(self.name, 0) == unexplained, now["dropped"]
        assert all(n == 0 for s, n in counted.items() if s != self.name), now["dropped"]
        return now


def pause_by(task, story: Story, statement: str, quiet: bool) -> str:
    story.upstream(UNFOLLOWED[statement], quiet)
    task.wait_for(lambda: story.name in paused(task), what="the shard to pause")
    reason = paused(task)[story.name]["reason"]
    assert "unsupported DDL" in reason, reason
    time.sleep(2)
    return reason


# (each statement and each park in make test; the other two pairs in make test-long)
@pytest.mark.parametrize(
    ("statement", "park"),
    [
        ("set-statement", "written-while-paused"),
        ("truncate-partition", "quiet-while-paused"),
        pytest.param("set-statement", "quiet-while-paused", marks=pytest.mark.long),
        pytest.param("truncate-partition", "written-while-paused", marks=pytest.mark.long),
    ],
)
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


def test_a_skipped_type_change_pauses_the_shard_again_instead_of_reading_its_rows_as_the_old_type(task):
    """`binlog skip` of an unfollowed DDL that changes a column's type keeps the table from
    before it: the rows after the skip hold the column in its new type (here BIGINT where the
    kept table has INT), and reading them as the old one would convert them silently. The
    shard pauses again there, saying which column the binlog has in which type (live stories:
    a TIMESTAMP(6) written into a TIMESTAMP(3), its fractions cut), and the printed set-schema
    has every row read again with the right table. Rows it wrote before the skip are
    discarded as documented: its writer is quiet while it is paused."""
    task.start()
    story = Story(task)
    story.start()
    story.upstream("SET STATEMENT sort_buffer_size=1048576 FOR ALTER TABLE {t} MODIFY a BIGINT NOT NULL", quiet=True)
    task.wait_for(lambda: story.name in paused(task), what="the shard to pause")
    reason = paused(task)[story.name]["reason"]
    assert "sort_buffer_size" in reason, reason
    result = shardctl(task, *story.way_out(reason, "binlog skip"))
    assert result.returncode == 0, result.stderr
    story.quiet.clear()  # (its rows after the skip: BIGINT in the binlog)

    def paused_again() -> bool:
        return "the binlog has column 'a'" in paused(task).get(story.name, {}).get("reason", "")

    task.wait_for(paused_again, what="the shard to pause again at its first row after the skip")
    reason = paused(task)[story.name]["reason"]
    assert "as bigint, the tracked schema int" in reason, reason
    story.set_schema(reason)
    story.finish()
    assert task.stop() == 0


def test_binlog_replace_of_an_unfollowed_ddl_reads_the_rows_since_with_the_ddl_it_takes(task):
    """`binlog replace` takes the DDL without its variable for the one the tracker could not
    follow: the shard's rows since the pause (here with the column it adds) are read again
    with the table that DDL makes, none lost. (Before, its worker kept the table from before
    the statement: the rows it wrote while paused could not be replayed, and the shard
    paused for good; live stories.)"""
    task.start()
    story = Story(task)
    story.start()
    reason = pause_by(task, story, "set-statement", quiet=False)
    args = story.way_out(reason, "binlog replace")
    table = f"{story.shard[1]}.{story.shard[2]}"
    sql = f"ALTER TABLE {table} ADD COLUMN b INT NULL"
    result = shardctl(task, *args[: args.index("--sql")], "--sql", sql)
    assert result.returncode == 0, result.stdout + result.stderr
    now = story.finish()
    assert now["dropped"].get(story.name, {}).get("paused", 0) > 0  # (read again after the replace)
    assert task.stop() == 0


@pytest.mark.long
def test_binlog_skip_as_printed_for_rows_that_could_not_be_replayed_resumes_the_shard(task):
    """Rows a shard wrote while paused that its scratch table could not replay (made to fail
    here) pause it again with two ways out; `binlog skip`, printed there, used to answer that
    no DDL is held (exit 2), the shard paused for good. Run as printed it discards those
    rows (none: its writer is quiet while paused) and the shard streams on, every row after
    it arriving."""
    task.start(fault_at="window_fails")
    story = Story(task)
    story.start()
    reason = pause_by(task, story, "set-statement", quiet=True)
    story.set_schema(reason)

    def unreplayed() -> bool:
        return "could not be replayed" in paused(task).get(story.name, {}).get("reason", "")

    task.wait_for(unreplayed, what="the shard to pause again, its rows not replayed")
    reason = paused(task)[story.name]["reason"]
    result = shardctl(task, *story.way_out(reason, "binlog skip"))
    assert result.returncode == 0 and "discarded" in result.stdout, result.stdout + result.stderr
    done = json.loads(shardctl(task, "--json", "binlog", "list").stdout)["operations"]
    assert [(o["shard"], o["blocked"]) for o in done] == [(story.name, "paused")], done
    now = story.finish()
    assert story.writer.history, "its writer wrote after the skip"
    assert task.stop() == 0
    assert now["paused"] == {}


def block_of(task, name: str) -> dict:
    try:
        groups = status(task)["groups"].values()
    except (json.JSONDecodeError, KeyError):  # (the daemon restarting)
        return {}
    return next((g["blocked"][name] for g in groups if name in g["blocked"]), {})


def unfollowed_under_conflict(task, story: Story) -> str:
    """The story's shard paused by a conflict (its default of note), then running a DDL the
    tracker cannot follow (adding b, which its rows give values from then on): its block is
    that DDL now. Returns its table then (with b, as its rows since have it)."""
    story.upstream("ALTER TABLE {t} ALTER COLUMN note SET DEFAULT 'y'", quiet=False)
    task.wait_for(lambda: "differ" in block_of(task, story.name).get("reason", ""),
                  what="the shard to pause on the conflict")
    time.sleep(2)  # (its rows of then parked)
    with story.writer.guard:
        story.task.sql(story.shard, UNFOLLOWED["set-statement"])
        story.writer.b = True
    story.quiet.clear()  # (its rows while paused give b values: live stories 112040 lost them)
    task.wait_for(lambda: "unsupported DDL" in block_of(task, story.name).get("reason", ""),
                  what="its block to be the unfollowed DDL")
    time.sleep(2)
    return task.sql(story.shard, "SHOW CREATE TABLE {t}")[0][1]


def set_schema_as_printed(task, story: Story, create: str) -> str:
    """The printed set-schema of the shard's block, with `create` for F; returns its output."""
    args = story.way_out(block_of(task, story.name)["reason"], "set-schema")
    path = task.workdir / "create.sql"
    path.write_text(create)
    result = shardctl(task, *args[:-1], str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.parametrize(("way", "restart"), [("binlog skip", False), ("binlog replace", False), ("binlog skip", True)])
@pytest.mark.long
def test_the_way_out_of_an_unfollowed_ddl_run_while_paused_by_a_conflict_holds_the_shard_by_it(task, way, restart):
    """A shard paused by a conflict (its column's default unlike the others') runs a DDL the
    tracker cannot follow meanwhile: its block is that DDL now, on top of the conflict. The
    printed `binlog skip` drops it, `binlog replace` takes the DDL without its variable, and
    either holds the shard by its conflict again, nothing discarded. (They used to forget the
    conflict, its table and renames; and reading again from the pause, the statement blocked
    the shard again, the skip undone: live stories.) After a skip its rows since, with the
    column the skipped statement added, hold it at once as rows it cannot read, the conflict
    under them (L79). The shard then gives way upstream. After a replace the conflict clears
    and its rows are read again, those of its paused time on scratch, and every row arrives,
    the values of b its rows gave while paused too (live stories 112040: its scratch table
    never had b); after a skip that DDL waits behind its rows, and their printed set-schema,
    with the table as it was there, takes it and brings every row. `restart`: the daemon is
    SIGKILLed and started again before the shard gives way (live stories 111076: resumed
    from its park then, it read the statement again without the table the way out gave,
    and its rows could not be replayed)."""
    task.start()
    story = Story(task)
    story.start()
    at_rows = unfollowed_under_conflict(task, story)
    args = story.way_out(block_of(task, story.name)["reason"], way)
    if way == "binlog replace":
        args = [*args[: args.index("--sql")], "--sql", f"ALTER TABLE {story.shard[1]}.{story.shard[2]} ADD COLUMN b INT NULL"]
    result = shardctl(task, *args)
    assert result.returncode == 0 and "conflict" in result.stdout, result.stdout + result.stderr
    held = "columns for" if way == "binlog skip" else "differ"  # (its rows, with b, under the conflict)
    task.wait_for(lambda: held in block_of(task, story.name).get("reason", ""), what="the shard held")
    if restart:
        task.kill()
        task.start()
        task.wait_for(lambda: held in block_of(task, story.name).get("reason", ""), what="the daemon back")
    story.upstream("ALTER TABLE {t} ALTER COLUMN note SET DEFAULT 'x'", quiet=False)  # (gives way)
    if way == "binlog skip":
        task.wait_for(lambda: "1 more DDL after it" in block_of(task, story.name).get("reason", ""),
                      what="the DDL that gives way to wait behind its rows")
        assert "resumed" in set_schema_as_printed(task, story, at_rows)
    story.finish()
    assert task.stop() == 0


def test_rows_not_fitting_the_table_a_skip_kept_under_a_conflict_hold_the_shard_before_its_later_ddls(task):
    """L79 (live stories): a shard paused by a conflict runs a DDL the tracker cannot follow,
    and the printed `binlog skip` drops it, the conflict holding the shard again. Its rows
    since hold the column that DDL added, which the table the skip kept has not: they pause
    it there, now, the conflict under them, so the DDL it runs next (which would clear the
    conflict) waits for their way out. Before, its worker read them with that table only once
    the shard resumed: that DDL was decided first (live stories: a MODIFY of after the pause
    converted its rows downstream). Their printed set-schema, with the table as it was right
    there, takes the DDL on it, clears the conflict, and every row arrives."""
    task.start()
    story = Story(task)
    story.start()
    at_rows = unfollowed_under_conflict(task, story)
    result = shardctl(task, *story.way_out(block_of(task, story.name)["reason"], "binlog skip"))
    assert result.returncode == 0 and "held by its conflict again" in result.stdout, result.stdout + result.stderr
    task.wait_for(lambda: "columns for" in block_of(task, story.name).get("reason", ""),
                  what="its rows since the skipped DDL to hold it")
    assert block_of(task, story.name)["kind"] == "unsupported"
    story.upstream("ALTER TABLE {t} ALTER COLUMN note SET DEFAULT 'x', ADD COLUMN z INT NULL", quiet=False)
    task.wait_for(lambda: "1 more DDL after it" in block_of(task, story.name).get("reason", ""),
                  what="its DDL to wait behind its rows")
    assert task.downstream_table().column("z") is None  # (not decided past its rows)
    set_schema_as_printed(task, story, at_rows)
    task.wait_for(lambda: story.name not in paused(task) and not block_of(task, story.name),
                  what="the shard to resume")
    assert task.downstream_table().column("z") is not None
    story.finish()
    assert task.stop() == 0


@pytest.mark.parametrize("way", ["set-schema", "binlog replace"])
@pytest.mark.long
def test_the_table_the_way_out_gave_while_a_conflict_held_the_shard_outlives_a_restart_after_it_resumed(task, way):
    """As above, the shard paused by a conflict runs a DDL the tracker cannot follow, and
    the printed way out gives its table (with b) while the conflict holds it. The DDL
    that gives way is read, and decided, while the conflict holds it still: read before its
    worker had that table, the history saved with the decision lacked b. Resumed, the
    worker reads from the pause again with the way out's table, and a restart after
    that starts past the DDL with the table the history has there (live stories 210045:
    without b, the shard's next row paused it again, `the binlog has 4 columns for t`)."""
    task.start()
    story = Story(task)
    story.start()
    unfollowed_under_conflict(task, story)
    held_again_after(task, story, way)
    story.upstream("ALTER TABLE {t} ALTER COLUMN note SET DEFAULT 'x'", quiet=False)  # (gives way)
    task.wait_for(lambda: story.name not in paused(task) and not block_of(task, story.name),
                  what="the shard to resume")
    time.sleep(5)  # (its paused rows merged, the watermark past the DDL)
    task.kill()
    task.start()
    story.finish()
    assert task.stop() == 0


def held_again_after(task, story: Story, way: str) -> None:
    """The printed way out of the unfollowed DDL taken (set-schema with the table as it is
    now, or binlog replace with a DDL that adds the column it added), and the conflict
    under it holding the shard again."""
    args = story.way_out(block_of(task, story.name)["reason"], way)
    if way == "set-schema":
        path = task.workdir / "create.sql"
        path.write_text(task.sql(story.shard, "SHOW CREATE TABLE {t}")[0][1])
        args = [*args[:-1], str(path)]
    else:
        args = [*args[: args.index("--sql")], "--sql", f"ALTER TABLE {story.shard[1]}.{story.shard[2]} ADD COLUMN b INT NULL"]
    result = shardctl(task, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    task.wait_for(lambda: block_of(task, story.name).get("kind") == "conflict", what="the conflict to hold it again")


def watermark(task, source: str) -> tuple[int, int]:
    rows = task.sandbox.downstream.execute(
        f"SELECT file_seq, txn_pos FROM `{task.meta_schema}`.watermark WHERE source = '{source}'"
    )
    return (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)


@pytest.mark.parametrize(("resolved_by", "fault", "way"), [
    ("its own DDL", None, "set-schema"),
    # (the DDL binlog replace took for it instead, read again after the crash: the way out of
    # L75's story; its fault, a start right at the replaced DDL, needs a kill this cannot
    # time: tests/server/test_worker_handlers.py holds it)
    ("the other shards' DDLs", None, "binlog replace"),
    pytest.param("the other shards' DDLs", None, "set-schema", marks=pytest.mark.long),  # (make test-long)
    # (the start's own check: a watermark saved past it; make test-long)
    pytest.param("its own DDL", "watermark_not_back", "set-schema", marks=pytest.mark.long),
])
def test_a_crash_before_the_paused_rows_of_a_set_schema_shard_merge_loses_nothing(task, resolved_by, fault, way):
    """Live stories 531012. A shard paused by a conflict parks its rows, runs a DDL the
    tracker cannot follow (it parks no more), and is given its table by the printed
    set-schema while the conflict holds it: it parks again, and its source's watermark
    passes its pause, its rows there being in its park. The conflict then clears (by its
    own DDL, or by the other shards taking its default) and it resumes with the table the
    way out gave: its park is dropped and its rows are read again from its pause into a
    scratch window. The daemon is killed before that window merges. Started again, the
    shard's rows of its paused time must be read from its pause again: on the code before
    the fix the saved watermark stayed past it (where the dropped park reached), the new
    start read from there, and every change the shard wrote between its pause and there
    was lost, shown running. With `fault` the resume leaves the saved watermark where it
    was, as that code did: the next start finds it past the window and reads from the pause."""
    task.start(crash_at="window_merge", fault_at=fault)
    story = Story(task)
    story.start()
    story.upstream("ALTER TABLE {t} ALTER COLUMN note SET DEFAULT 'y'", quiet=False)
    task.wait_for(lambda: "differ" in block_of(task, story.name).get("reason", ""),
                  what="the shard to pause on the conflict")
    source = story.flags[1]
    paused_at = watermark(task, source)
    time.sleep(2)  # (its rows of then parked)
    with story.writer.guard:
        story.task.sql(story.shard, UNFOLLOWED["set-statement"])
        story.writer.b = True
    task.wait_for(lambda: "unsupported DDL" in block_of(task, story.name).get("reason", ""),
                  what="its block to be the unfollowed DDL")
    held_again_after(task, story, way)
    # (parked again: its source's watermark passes its pause)
    task.wait_for(lambda: watermark(task, source) > paused_at, timeout=30, what="the watermark past its pause")
    time.sleep(2)
    if resolved_by == "its own DDL":
        story.upstream("ALTER TABLE {t} ALTER COLUMN note SET DEFAULT 'x'", quiet=False)
    else:
        for shard in task.shards:
            if shard != story.shard:
                task.sql(shard, "ALTER TABLE {t} ALTER COLUMN note SET DEFAULT 'y'")
    assert task.wait_exit(timeout=60) == -9, f"no crash at the window's merge:\n{task.log_text()[-3000:]}"
    time.sleep(2)  # (every shard writes on while it is down)
    said = "saved watermark"
    assert said not in task.log_text()
    task.start()
    story.finish(unexplained=1 if fault is not None else 0)  # (the start's check counts it)
    assert (said in task.log_text()) == (fault is not None), task.log_text()[-3000:]
    assert task.stop() == 0



def test_a_column_set_schema_gives_after_a_skip_and_a_restart_keeps_the_values_of_its_paused_time(task):
    """The path of live stories 610888: paused by an unfollowed ADD COLUMN, killed, skipped
    as printed at once after the restart (the table from before kept), the shard pauses again
    at its first row holding the new column; set-schema as printed gives it the table, and
    every row arrives with the new column's values. (The story lost them where its second
    pause came while its first one's scratch table was still open, and a kill kept the first
    pause's position: the rows from the pin on went into a scratch table shaped as at the
    first pause. That timing is not made here; the worker's side of the fix, the pin said as
    a DDL where it holds from, is `test_worker_handlers.py`'s.)"""
    task.start()
    story = Story(task)
    story.start()
    story.writer.b = True  # (its rows after the DDL give b values)
    reason = pause_by(task, story, "set-statement", quiet=False)
    task.kill()
    task.start()
    # (at once: its source has read nothing yet since the start, at its first pause)
    result = shardctl(task, *story.way_out(reason, "binlog skip"))
    assert result.returncode == 0, result.stderr

    def paused_again() -> bool:
        return "the binlog has 4 columns" in paused(task).get(story.name, {}).get("reason", "")

    task.wait_for(paused_again, what="the shard to pause again at its first row after the skip")
    story.set_schema(paused(task)[story.name]["reason"])
    story.finish()
    assert task.difference() is None
    (n,) = task.sandbox.downstream.execute(
        f"SELECT COUNT(*) FROM `{task.target_db}`.orders WHERE _table = '{story.shard[2]}' AND b IS NOT NULL"
    )[0]
    assert n > 0, "no row of the shard holds b"
    assert task.stop() == 0


# two DDLs the tracker cannot follow, one after the other: the first changes a column's type
# (the shard's rows between the two hold it so), the second adds b
FIRST_UNFOLLOWED = "SET STATEMENT div_precision_increment=6 FOR ALTER TABLE {t} MODIFY a BIGINT NOT NULL"
SECOND_UNFOLLOWED = "SET STATEMENT sort_buffer_size=1048576 FOR ALTER TABLE {t} ADD COLUMN b INT NULL"


@pytest.mark.parametrize(("under", "first_way"), [
    ("running", "binlog replace"),
    pytest.param("conflict", "binlog replace", marks=pytest.mark.long),  # (make test-long)
    pytest.param("running", "binlog skip", marks=pytest.mark.long),
])
def test_two_unfollowed_ddls_in_a_row_are_held_at_the_first_and_each_printed_way_out_takes_them_in_order(
    task, under, first_way
):
    """A shard runs a DDL the tracker cannot follow (a type change under a SET STATEMENT
    variable), writes rows of the new type, then runs a second one (a column added so) while
    still paused (`conflict`: paused by a conflict before both). Its block stays at the first,
    where its schema was lost, naming the later one; the printed `binlog replace` with the
    first DDL's plain form takes it, then the second holds the shard, and its printed
    `binlog replace` takes that one on the table the first left. Every row arrives. (Before,
    the second's block took the first's place: its way out, run as printed, took the second
    DDL on the table from before the first, the type change was lost from the tracked schema,
    and the shard paused again at its rows, `the binlog has column 'a' of t as bigint, the
    tracked schema int`; under a conflict its rows of the paused time could not be replayed.)
    `binlog skip` of the first keeps the table from before it: its rows of the new type pause
    the shard there, the second still waiting, and the printed set-schema with its table as
    it was there (not now: the second is taken on it) has them read, then the second holds it."""
    task.start()
    story = Story(task)
    story.start()
    table = f"{story.shard[1]}.{story.shard[2]}"

    def reason() -> str:
        return block_of(task, story.name).get("reason", "")

    if under == "conflict":
        story.upstream("ALTER TABLE {t} ALTER COLUMN note SET DEFAULT 'y'", quiet=False)
        task.wait_for(lambda: "differ" in reason(), what="the shard to pause on the conflict")
        time.sleep(2)  # (its rows of then parked)
    story.upstream(FIRST_UNFOLLOWED, quiet=False)
    between = task.sql(story.shard, "SHOW CREATE TABLE {t}")[0][1]  # (its table till the second)
    task.wait_for(lambda: "div_precision_increment" in reason(), what="the shard held at the first DDL")
    time.sleep(2)  # (its rows with a as BIGINT)
    with story.writer.guard:
        task.sql(story.shard, SECOND_UNFOLLOWED)
        story.writer.b = True
    task.wait_for(lambda: "sort_buffer_size=1048576 FOR" in task.log_text(), what="the second DDL decided")
    time.sleep(1)
    first = reason()
    assert "div_precision_increment" in first and "the shard ran 1 more DDL after it" in first, first
    args = story.way_out(first, first_way)
    if first_way == "binlog replace":
        args = [*args[: args.index("--sql")], "--sql", f"ALTER TABLE {table} MODIFY a BIGINT NOT NULL"]
    result = shardctl(task, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    if first_way == "binlog skip":  # (its rows after the first: a BIGINT where the kept table has INT)
        task.wait_for(lambda: "the binlog has column 'a'" in reason(), what="its rows to pause it again")
        rows = reason()
        assert "the shard ran 1 more DDL after it" in rows and "as it was right here, not now" in rows, rows
        path = task.workdir / "create.sql"
        path.write_text(between)
        args = story.way_out(rows, "set-schema")
        result = shardctl(task, *args[:-1], str(path))
        assert result.returncode == 0, result.stdout + result.stderr
    task.wait_for(lambda: "sort_buffer_size" in reason() and "div_precision" not in reason(),
                  what="the shard held at the second DDL")
    second = reason()
    assert "unsupported DDL" in second and "more DDL" not in second, second
    args = story.way_out(second, "binlog replace")
    result = shardctl(task, *args[: args.index("--sql")], "--sql", f"ALTER TABLE {table} ADD COLUMN b INT NULL")
    assert result.returncode == 0, result.stdout + result.stderr
    if under == "conflict":
        task.wait_for(lambda: block_of(task, story.name).get("kind") == "conflict", what="the conflict to hold it again")
        story.upstream("ALTER TABLE {t} ALTER COLUMN note SET DEFAULT 'x'", quiet=False)  # (gives way)
    story.finish()
    (n,) = task.sandbox.downstream.execute(
        f"SELECT COUNT(*) FROM `{task.target_db}`.orders WHERE _table = '{story.shard[2]}' AND b IS NOT NULL"
    )[0]
    assert n > 0, "no row of the shard holds b"
    assert task.stop() == 0


def test_the_table_set_schema_gives_after_a_skip_outlives_a_restart_past_the_pause(task):
    """Live finding L70 (seed 617711): paused by an unfollowed ADD COLUMN and skipped as
    printed, the shard pauses again at its first row holding the new column. Another shard of
    its source, paused before it, resumes meanwhile: the source reads again from that one's
    pause, and the shard's worker takes the table the skip kept at its pin again and says so
    (an entry of the source's history at the pin's transaction). set-schema as printed then
    pins the table with the column there, its rows go on, and a restart after that, past the
    pause, must read them with that table: that entry stood for the skip's table after the
    pin, and the shard paused again at its next row (4 columns, tracked 3)."""
    task.start()
    story = Story(task)
    story.start()
    other = task.shards[0]
    flags = ["--source", task.source_of(other[0]), "--table", f"{other[1]}.{other[2]}"]
    assert flags[1] == story.flags[1]
    other_name = str(task.shard_id(other))
    with story.writers[0].guard:
        task.sql(other, UNFOLLOWED["set-statement"])
    task.wait_for(lambda: other_name in paused(task), what="the other shard to pause")
    reason = pause_by(task, story, "set-statement", quiet=False)
    story.writer.b = True  # (its rows after the DDL give b values)
    result = shardctl(task, *story.way_out(reason, "binlog skip"))
    assert result.returncode == 0, result.stderr

    def paused_again() -> bool:
        return "the binlog has 4 columns" in paused(task).get(story.name, {}).get("reason", "")

    task.wait_for(paused_again, what="the shard to pause again at its first row after the skip")
    result = shardctl(task, "binlog", "replace", *flags, "--sql", f"ALTER TABLE `{other[2]}` ADD COLUMN b INT NULL")
    assert result.returncode == 0, result.stdout + result.stderr
    task.wait_for(lambda: other_name not in paused(task), what="the other shard to resume")
    time.sleep(2)  # (its source read past the pin again)
    story.set_schema(paused(task)[story.name]["reason"])
    time.sleep(4)  # (its rows since go downstream, its checkpoints past the pause)
    task.kill()
    task.start()
    story.finish()
    assert task.difference() is None
    assert task.stop() == 0
