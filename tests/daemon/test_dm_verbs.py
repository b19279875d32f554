"""DM's verbs with DM's meaning (issue 46), on the operator's path: `shardctl` and
`shardmerge` run as processes against a live daemon on the sandbox, with a shard held at
a real DDL: one whose schema has no join with the others' (float made datetime, docs/design.md "Conflicts"
example), or one whose downstream statement the downstream refused (NOT NULL over a NULL
written there by hand). `binlog skip|replace|inject|list|revert` find the held DDL without
flags when one is held, list the candidates with the flags naming each when several are;
`shard-ddl-lock` shows the group as DM's lock and `unlock` skips the held DDL;
`handle-error` on a shard held at its DDL names the binlog command; `stop-task` stops the
daemon cleanly and `start-task` goes on from its checkpoints; `check-task` is `check`. Which
held DDL the flags pick, or why none, is a table at the end."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time

import pytest

from replicator.api.admin import AdminError
from replicator.api.binlog_ops import COMMANDS, VERBS
from replicator.api.blocked import BlockedDDL, Held, Wanted, choose
from replicator.shard_id import ShardId
from tests.replication import REPO, admin_task

pytestmark = pytest.mark.timeout(300)

CREATE = "CREATE TABLE {table} (id INT NOT NULL PRIMARY KEY, a INT NULL, b FLOAT NULL)"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def shardctl(task, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli.shardctl", "--addr", task.addr, *args],
        capture_output=True, text=True, cwd=REPO, env=ENV, timeout=180,
    )


def shardmerge(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli.shardmerge", *args],
        capture_output=True, text=True, cwd=REPO, env=ENV, timeout=120,
    )


def ctl_json(task, *args: str):
    result = shardctl(task, "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def one_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.fixture
def task(sandbox, tmp_path):
    t = admin_task(sandbox, tmp_path, CREATE)
    t.start()
    for n, shard in enumerate(t.shards):
        t.sql(shard, "INSERT INTO {t} VALUES " + ",".join(f"({n * 1000 + i}, {i}, {i}.5)" for i in range(5)))
    t.wait_in_sync()
    yield t
    if t.process is not None:
        t.stop()
    t.cleanup()


def ids(task) -> set[int]:
    return {r[0] for r in task.sandbox.downstream.execute(f"SELECT id FROM `{task.target_db}`.orders")}


def flags(task, shard) -> list[str]:
    return ["--source", task.source_of(shard[0]), "--table", f"{shard[1]}.{shard[2]}"]


def conflict(task, shard) -> dict:
    """The shard makes `b` DATETIME, which has no join with the others' FLOAT: its DDL is
    held by the group. Returns it as `binlog list` shows it."""
    task.sql(shard, "UPDATE {t} SET b = NULL")  # so the upstream can convert the column
    task.sql(shard, "ALTER TABLE {t} MODIFY b DATETIME NULL")
    shard_id = str(task.shard_id(shard))
    task.wait_for(lambda: shard_id in held(task), what=f"{shard_id} held at its DDL")
    return held(task)[shard_id]


def held(task) -> dict[str, dict]:
    return {d["shard"]: d for d in ctl_json(task, "binlog", "list")["blocked"]}


def test_binlog_skip_without_flags_takes_the_one_held_ddl_and_the_rows_after_it_arrive(task):
    a = task.shards[0]
    shard_id = str(task.shard_id(a))
    ddl = conflict(task, a)
    assert ddl["kind"] == "conflict" and "MODIFY b DATETIME" in ddl["ddl"] and ddl["position"]
    task.sql(a, "INSERT INTO {t} VALUES (200, 1, '2026-11-21 10:00:00')")  # under the DDL skipped

    shown = shardctl(task, "binlog", "list")
    assert shown.returncode == 0 and "1 DDL held:" in shown.stdout
    assert f"{shard_id}: conflict at {ddl['position']}" in shown.stdout
    # one position for the held DDL wherever it is shown (issue 71: query-status showed the
    # pause's, past it, which `--pos` does not take)
    assert ctl_json(task, "query-status")["paused"][shard_id]["held_at"] == ddl["position"]
    status_line = next(line for line in shardctl(task, "query-status").stdout.splitlines() if line.startswith(shard_id))
    assert status_line.split()[1] == ddl["position"], status_line
    assert f"(held at its DDL at {ddl['position']})" in task.log_text()
    # DM's handle-error on it: the message names the command that helps
    wrong = shardctl(task, "handle-error", "skip", *flags(task, a))
    assert wrong.returncode == 2
    line = one_line(wrong)
    assert f"shard {shard_id} has no refused row waiting; it is paused at its DDL, conflict at " in line
    assert f"`shardctl binlog skip {' '.join(flags(task, a))}`" in line
    # inject runs SQL before a DDL the downstream refused; this one runs nothing downstream
    inject = shardctl(task, "binlog", "inject", "--sql", f"DELETE FROM `{task.target_db}`.orders")
    assert inject.returncode == 2 and "binlog inject does not apply to the DDL of" in one_line(inject)
    assert "nothing of it runs downstream" in inject.stderr and len(ids(task)) == 20

    result = shardctl(task, "binlog", "skip")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("resolved")
    assert (
        f"then: the shard keeps its schema from before {ddl['position']}; its rows written since go "
        "downstream as written" in result.stdout
    )
    task.sql(a, "ALTER TABLE {t} MODIFY b FLOAT NULL")  # the operator puts the shard back upstream
    task.sql(a, "INSERT INTO {t} VALUES (300, 3, 3.5)")
    task.wait_for(lambda: 300 in ids(task), what="the row after the skipped DDL")
    # the DDL dropped, not the row written under it (issue 71: DM's meaning): its DATETIME
    # goes into the merged FLOAT as the server converts it
    task.wait_for(lambda: 200 in ids(task), what="the row written under the skipped DDL")

    listed = ctl_json(task, "binlog", "list")
    assert listed["blocked"] == [] and listed["set_ahead"] == []
    ((op,),) = [listed["operations"]]
    assert (op["command"], op["shard"], op["position"], op["blocked"]) == (
        "binlog skip", shard_id, ddl["position"], "conflict"
    )
    assert "MODIFY b DATETIME" in op["ddl"] and op["statements"] == []
    assert "binlog skip" in shardctl(task, "binlog", "list").stdout
    nothing = shardctl(task, "binlog", "skip")
    assert nothing.returncode == 2 and "no DDL is blocked in the task: there is nothing to binlog skip" in nothing.stderr

    revert = shardctl(task, "binlog", "revert", *flags(task, a), "--pos", ddl["position"])
    assert revert.returncode == 2 and one_line(revert).startswith("shardctl binlog: nothing to revert: ")
    assert "`shardctl binlog list` shows what was done" in revert.stderr
    assert task.stop() == 0


def test_several_held_ddls_are_listed_with_the_flags_naming_each_and_the_flags_pick_one(task):
    a, c = task.shards[0], task.shards[2]  # one on each source
    first, second = conflict(task, a), conflict(task, c)
    task.sql(c, "INSERT INTO {t} (id, a) VALUES (400, 4)")  # valid under the replacement

    several = shardctl(task, "binlog", "skip")
    assert several.returncode == 2
    line = one_line(several)
    assert "2 blocked DDLs can be taken by binlog skip; name one with its flags: " in line
    assert f"`{' '.join(flags(task, a))}` (conflict at {first['position']}: ALTER TABLE" in line
    assert f"`{' '.join(flags(task, c))}` (conflict at {second['position']}: ALTER TABLE" in line
    # one flag alone may pick one: the source
    assert ctl_json(task, "binlog", "list", "--source", "s2")["blocked"][0]["shard"] == str(task.shard_id(c))
    elsewhere = shardctl(task, "binlog", "skip", "--pos", "mysql-bin.000001:4")
    assert elsewhere.returncode == 2 and "no DDL is blocked at mysql-bin.000001:4; blocked: " in elsewhere.stderr

    replace = shardctl(
        task, "binlog", "replace", "--source", "s2", "--sql", f"ALTER TABLE `{c[2]}` MODIFY b DOUBLE NULL"
    )
    assert replace.returncode == 0, replace.stderr
    assert "MODIFY COLUMN `b` double" in replace.stdout
    assert f"then: the shard's rows since {second['position']} are read again" in replace.stdout
    task.wait_for(lambda: 400 in ids(task), what="the row written after the replaced DDL")
    columns = dict(task.sandbox.downstream.execute(
        f"SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '{task.target_db}'"
    ))
    assert columns["b"] == "double"
    # now one is held: no flags needed
    assert list(held(task)) == [str(task.shard_id(a))]
    ops = ctl_json(task, "binlog", "list")["operations"]
    assert [(op["command"], op["shard"], op["statements"]) for op in ops] == [
        ("binlog replace", str(task.shard_id(c)), [f"ALTER TABLE `{c[2]}` MODIFY b DOUBLE NULL"])
    ]
    assert task.stop() == 0


def test_shard_ddl_lock_shows_the_group_as_dms_lock_and_unlock_skips_the_held_ddl(task):
    a = task.shards[1]
    shard_id = str(task.shard_id(a))
    ddl = conflict(task, a)
    (lock,) = ctl_json(task, "shard-ddl-lock")["locks"]
    db, table = task.target_db, "orders"
    assert lock["ID"] == f"{task.name}-`{db}`.`{table}`" and lock["mode"] == "optimistic"
    assert [d["shard"] for d in lock["blocked"]] == [shard_id]
    assert lock["synced"] == sorted(str(task.shard_id(s)) for s in task.shards if s != a)
    shown = shardctl(task, "shard-ddl-lock").stdout
    assert f"lock {lock['ID']} (optimistic): shard group {db}.{table}" in shown
    assert "held (DM's unsynced), 1:" in shown and "going on (DM's synced), 3:" in shown
    assert f"{shard_id}: conflict at {ddl['position']}" in shown

    execute = shardctl(task, "shard-ddl-lock", "unlock", "--action", "exec")
    assert execute.returncode == 2 and "unlock action 'exec': only skip is offered" in one_line(execute)
    result = shardctl(task, "shard-ddl-lock", "unlock")
    assert result.returncode == 0, result.stderr
    assert f"then: the shard keeps its schema from before {ddl['position']}" in result.stdout
    assert shardctl(task, "shard-ddl-lock").stdout.strip() == "no shard DDL lock: no shard is held at a DDL"
    task.sql(a, "ALTER TABLE {t} MODIFY b FLOAT NULL")
    task.sql(a, "INSERT INTO {t} VALUES (500, 5, 5.5)")
    task.wait_for(lambda: 500 in ids(task), what="the row after the unlock")
    (op,) = ctl_json(task, "binlog", "list")["operations"]
    assert (op["command"], op["shard"]) == ("shard-ddl-lock unlock", shard_id)
    assert task.stop() == 0


def refuse_not_null(task):
    """A row written downstream by hand has a NULL in `a`; every shard makes `a` NOT NULL,
    so the join's NOT NULL cannot run downstream: the DDL of the shard whose change completes
    the join (the last read: the sources are read side by side, so not always the last
    written) is held there. Returns that shard and its held DDL."""
    table = f"`{task.target_db}`.orders"
    task.sandbox.downstream.execute(f"INSERT INTO {table} (id, a, _source) VALUES (9999, NULL, 'by hand')")
    for shard in task.shards:
        task.sql(shard, "ALTER TABLE {t} MODIFY a INT NOT NULL")
    task.wait_for(lambda: held(task), what="the refused downstream DDL")
    ((shard_id, ddl),) = held(task).items()
    (shard,) = [s for s in task.shards if str(task.shard_id(s)) == shard_id]
    return shard, ddl


def nullable(task) -> str:
    rows = task.sandbox.downstream.execute(
        f"SELECT IS_NULLABLE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '{task.target_db}' "
        "AND TABLE_NAME = 'orders' AND COLUMN_NAME = 'a'"
    )
    return rows[0][0]


def test_binlog_inject_runs_the_sql_downstream_then_the_refused_ddl(task):
    last, ddl = refuse_not_null(task)
    assert ddl["kind"] == "refused" and "MODIFY a INT NOT NULL" in ddl["ddl"] and ddl["position"]
    assert "NOT NULL" in ddl["statements"][0] and ddl["seq"]
    task.sql(last, "INSERT INTO {t} VALUES (4001, 41, 1.5)")  # waits: its shard is paused
    wrong = shardctl(task, "handle-error", "retry", *flags(task, last))
    assert wrong.returncode == 2
    assert f"`shardctl binlog inject {' '.join(flags(task, last))} --pos {ddl['position']} --sql '...'`" in one_line(wrong)
    table = f"`{task.target_db}`.orders"
    refused = shardctl(task, "binlog", "inject", "--sql", f"DELETE FROM {table} WHERE nope = 1")
    assert refused.returncode == 2 and "the downstream refused the given SQL" in one_line(refused)
    assert f"journal entry {ddl['seq']} is as it was" in refused.stderr and held(task)

    result = shardctl(task, "binlog", "inject", "--sql", f"DELETE FROM {table} WHERE id = 9999")
    assert result.returncode == 0, result.stderr
    assert f"the given SQL ran downstream, then journal entry {ddl['seq']}" in result.stdout
    assert f"then: the given statements ran downstream, then journal entry {ddl['seq']}'s" in result.stdout
    task.wait_for(lambda: 4001 in ids(task), what="the paused shard's row")
    assert nullable(task) == "NO" and 9999 not in ids(task)
    listed = ctl_json(task, "binlog", "list")
    assert listed["blocked"] == []
    ((op,),) = [listed["operations"]]
    assert (op["command"], op["blocked"], op["position"]) == ("binlog inject", "refused", ddl["position"])
    assert op["statements"] == [f"DELETE FROM {table} WHERE id = 9999"]
    assert task.stop() == 0


@pytest.mark.parametrize("verb", ["replace", "skip"])
def test_binlog_replace_or_skip_of_a_refused_ddl_runs_the_given_sql_instead_or_nothing(task, verb):
    last, ddl = refuse_not_null(task)
    task.sql(last, "INSERT INTO {t} VALUES (4002, 42, 2.5)")
    table = f"`{task.target_db}`.orders"
    given = ["--sql", f"UPDATE {table} SET a = 0 WHERE id = 9999"] if verb == "replace" else []
    result = shardctl(task, "binlog", verb, *flags(task, last), "--pos", ddl["position"], *given)
    assert result.returncode == 0, result.stderr
    task.wait_for(lambda: 4002 in ids(task), what="the paused shard's row")
    # instead of the entry's NOT NULL: the given UPDATE (replace), or nothing (skip)
    (a,) = task.sandbox.downstream.execute(f"SELECT a FROM {table} WHERE id = 9999")[0]
    assert nullable(task) == "YES" and a == (0 if verb == "replace" else None)
    assert ctl_json(task, "show-ddl-state")["pending_downstream_ddl"] == []
    (op,) = ctl_json(task, "binlog", "list")["operations"]
    assert op["command"] == f"binlog {verb}" and len(op["statements"]) == len(given) // 2
    assert task.stop() == 0


def test_stop_task_stops_the_daemon_cleanly_and_start_task_goes_on_from_its_checkpoints(sandbox, tmp_path):
    task = admin_task(sandbox, tmp_path, CREATE)
    try:
        task.start(command=("start-task",))  # DM's spelling: the config as its argument
        for n, shard in enumerate(task.shards):
            task.sql(shard, f"INSERT INTO {{t}} VALUES ({n * 1000}, 1, 1.5)")
        task.wait_in_sync()
        result = shardctl(task, "stop-task")
        assert result.returncode == 0, result.stderr
        assert f"task {task.name}: the daemon has stopped" in result.stdout
        assert task.process.poll() == 0, "stop-task returned before the process ended"
        task.process = None
        assert "stopped cleanly" in task.log_text()
        gone = shardctl(task, "query-status")
        assert gone.returncode == 3 and "no shardmerge daemon answers" in gone.stderr

        for n, shard in enumerate(task.shards):  # written while it is stopped
            task.sql(shard, f"INSERT INTO {{t}} VALUES ({n * 1000 + 1}, 2, 2.5)")
        task.start(command=("start-task", "--config"))
        task.wait_in_sync()
        assert {n * 1000 + 1 for n in range(len(task.shards))} <= ids(task)
        assert "the last stop was not clean" not in task.log_text()
        assert task.stop() == 0
    finally:
        if task.process is not None:
            task.stop()
        task.cleanup()


def test_check_task_is_check(sandbox, tmp_path):
    task = admin_task(sandbox, tmp_path, CREATE)
    try:
        check = shardmerge("check", "--config", str(task.config_path), "--json")
        alias = shardmerge("check-task", str(task.config_path), "--json")
        assert check.returncode == alias.returncode and check.returncode in (0, 2), check.stderr
        assert json.loads(alias.stdout) == json.loads(check.stdout)
        both = shardmerge("check-task", str(task.config_path), "--config", str(task.config_path))
        assert both.returncode == 2 and "give the task config once: CONFIG, or --config FILE" in both.stderr
    finally:
        task.cleanup()


# -- which held DDL the flags name (no server needed) --------------------------------------------
def _held(kind: str, source: str, table: str, position: str, seq: int | None = None) -> BlockedDDL:
    shard = ShardId(source, *table.split("."))
    return BlockedDDL("shop.orders", shard, Held(kind), position, f"ALTER TABLE {table} ...", "why", seq, (), 1)


CONFLICT_1 = _held("conflict", "s1", "db.t1", "bin.000001:100")
CONFLICT_2 = _held("conflict", "s2", "db.t2", "bin.000002:200")
REFUSED_2 = _held("refused", "s2", "db.t2", "bin.000002:300", seq=1)
BEHIND_1 = _held("behind", "s1", "db.t1", "bin.000001:400", seq=2)
WAITING_1 = _held("waiting", "s1", "db.t1", "bin.000001:500")


@pytest.mark.parametrize(
    ("held", "flags", "verb", "chosen", "message"),
    [
        # one held: no flag needed
        ([CONFLICT_1], {}, "skip", CONFLICT_1, None),
        # several: each listed with the flags naming it; a flag picks one
        ([CONFLICT_1, CONFLICT_2], {}, "skip", None,
         "2 blocked DDLs can be taken by binlog skip; name one with its flags: `--source s1 --table db.t1` "
         "(conflict at bin.000001:100: ALTER TABLE db.t1 ...); `--source s2 --table db.t2` (conflict at "
         "bin.000002:200: ALTER TABLE db.t2 ...)"),
        ([CONFLICT_1, CONFLICT_2], {"source": "s2"}, "skip", CONFLICT_2, None),
        ([CONFLICT_1, CONFLICT_2], {"table": "db.t1"}, "replace", CONFLICT_1, None),
        ([CONFLICT_1, CONFLICT_2], {"position": "bin.000002:200"}, "skip", CONFLICT_2, None),
        # two of one shard, its group's block and a journal entry the downstream refused: its
        # flags alone take the block, as its pause prints them (live stories 240011); --pos the entry
        ([CONFLICT_2, REFUSED_2], {"source": "s2", "table": "db.t2"}, "skip", CONFLICT_2, None),
        ([CONFLICT_2, REFUSED_2], {"source": "s2", "table": "db.t2", "position": "bin.000002:300"}, "skip",
         REFUSED_2, None),
        # inject applies to a DDL the downstream refused only: that one is the one it fits
        ([CONFLICT_1, REFUSED_2], {}, "inject", REFUSED_2, None),
        ([CONFLICT_1], {}, "inject", None,
         "binlog inject does not apply to the DDL of s1.db.t1: its DDL is held by the shard group (conflict: "
         "why), not refused downstream: nothing of it runs downstream"),
        # unlock applies to the group's locks only
        ([REFUSED_2], {}, "unlock", None, "no shard group holds its DDL (no lock)"),
        # behind a refused entry, or waiting for propagation: the way out named
        ([REFUSED_2, BEHIND_1], {}, "skip", REFUSED_2, None),
        ([BEHIND_1], {}, "skip", None, "its statements wait behind journal entry 1, which the downstream refused"),
        ([WAITING_1], {}, "replace", None, "`shardctl enable-ddl-propagation --target shop.orders` runs it"),
        # nothing where the flags point
        ([CONFLICT_1], {"source": "s9"}, "skip", None,
         "no DDL is blocked for --source s9; blocked: `--source s1 --table db.t1` (conflict at"),
        ([], {}, "skip", None, "no DDL is blocked in the task: there is nothing to binlog skip"),
        ([CONFLICT_1], {"position": "bin.000001:4"}, "skip", None,
         "no DDL is blocked at bin.000001:4; blocked: `--source s1 --table db.t1`"),
    ],
)
def test_the_flags_pick_the_one_held_ddl_the_command_applies_to_or_the_answer_lists_them(
    held, flags, verb, chosen, message
):
    if chosen is not None:
        assert choose(held, Wanted(**flags), COMMANDS[verb], VERBS[verb]) is chosen
        return
    with pytest.raises(AdminError) as caught:
        choose(held, Wanted(**flags), COMMANDS[verb], VERBS[verb])
    assert caught.value.status == 409 and message in str(caught.value)


def test_a_named_shard_held_elsewhere_says_where():
    with pytest.raises(AdminError) as caught:
        choose([CONFLICT_1], Wanted(CONFLICT_1.shard, position="bin.000001:4"), "binlog skip", [Held.CONFLICT])
    assert str(caught.value) == "shard s1.db.t1 is blocked at bin.000001:100, not at bin.000001:4"


class Rows(threading.Thread):
    """Inserts, updates and deletes on every shard till stopped (`a` only: rows any of the
    shard's tables take)."""

    def __init__(self, task):
        super().__init__(daemon=True)
        self.task, self.stop, self.error, self.next = task, threading.Event(), None, 10_000

    def run(self) -> None:
        rng = random.Random(71)
        try:
            while not self.stop.is_set():
                for n, shard in enumerate(self.task.shards):
                    row = n * 100_000 + self.next
                    self.task.sql(shard, f"INSERT INTO {{t}} (id, a) VALUES ({row}, {rng.randrange(1000)})")
                    self.task.sql(shard, f"UPDATE {{t}} SET a = a + 1 WHERE id = {n * 100_000 + rng.randrange(10_000, self.next + 1)}")
                    if self.next % 5 == 0:
                        self.task.sql(shard, f"DELETE FROM {{t}} WHERE id = {n * 100_000 + rng.randrange(10_000, self.next + 1)}")
                self.next += 1
                self.stop.wait(0.05)
        except Exception as exc:  # (reported by the test)
            self.error = exc


@pytest.mark.parametrize("kind", ["add column", "type change"])
def test_binlog_skip_drops_the_ddl_not_the_rows_written_meanwhile_with_traffic(task, kind):
    """Issue 71: `binlog skip` of a held DDL (an ADD COLUMN whose type has no join with the
    others' column of that name, or a type change with none) drops the DDL, not data: every
    row the shard wrote while held, and after, arrives, with traffic on every shard
    throughout. (It discarded them: 144 inserts and 31 deletes, in the issue.)"""
    a, *others = task.shards
    if kind == "add column":
        for shard in others:
            task.sql(shard, "ALTER TABLE {t} ADD COLUMN c DATETIME NULL")
        task.wait_for(lambda: task.downstream_table().column("c") is not None, what="c downstream")
        statement = "ALTER TABLE {t} ADD COLUMN c INT NULL"
    else:
        task.sql(a, "UPDATE {t} SET b = NULL")
        statement = "ALTER TABLE {t} MODIFY b DATETIME NULL"
    rows = Rows(task)
    rows.start()
    try:
        time.sleep(1)
        task.sql(a, statement)
        shard_id = str(task.shard_id(a))
        task.wait_for(lambda: shard_id in held(task), what="the DDL held")
        time.sleep(3)  # (rows written while held)
        way = held(task)[shard_id]["way_out"]
        printed = next(p for p in way.split("`") if p.startswith("shardctl binlog skip "))
        result = shardctl(task, *printed.split()[1:])
        assert result.returncode == 0, result.stdout + result.stderr
        time.sleep(3)  # (rows after the skip)
    finally:
        rows.stop.set()
        rows.join()
    assert rows.error is None, rows.error
    task.wait_in_sync(timeout=120)
    assert held(task) == {}
    assert ctl_json(task, "query-status")["paused"] == {}
