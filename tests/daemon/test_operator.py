"""The operator's path: `shardmerge` and `shardctl` run as processes against the
sandbox. Errors an operator meets (an unreachable server) are one line with the
documented exit code; health endpoints flip with the target; an idle source shows no
lag; the metrics parse with prometheus_client's parser; every command's help has an
example and the exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from replicator.cli.shardmerge import COMMANDS
from tests.replication import REPO, admin_task, free_port

CREATE = "CREATE TABLE {table} (id INT PRIMARY KEY, a INT NOT NULL, b DECIMAL(10,2) NOT NULL)"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def shardmerge(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "replicator.cli.shardmerge", *args], capture_output=True,
                          text=True, cwd=REPO, env=ENV, timeout=timeout)


def shardctl(task, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "replicator.cli.shardctl", "--addr", task.addr, *args],
                          capture_output=True, text=True, cwd=REPO, env=ENV, timeout=60)


@pytest.fixture
def task(sandbox, tmp_path):
    t = admin_task(sandbox, tmp_path, CREATE)
    yield t
    t.cleanup()


def readyz(task) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(task.addr + "/readyz", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def one_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_an_unreachable_target_is_one_line_and_exit_3(task, tmp_path):
    port = free_port()
    config = task.config_path.read_text().replace(f"port: {task.sandbox.downstream.port}\n  user",
                                                  f"port: {port}\n  user")
    (tmp_path / "gone.yaml").write_text(config)
    result = shardmerge("status", "--config", str(tmp_path / "gone.yaml"))
    line = one_line(result)
    assert result.returncode == 3
    assert line.startswith(f"shardmerge status: target: cannot connect to 127.0.0.1:{port}: Can't connect to")
    assert line.endswith("check target.host and port, and that the server is running and reachable from here")


def test_an_unreachable_source_stops_the_first_start_naming_the_source_and_its_address(task, tmp_path):
    port = free_port()
    config = task.config_path.read_text().replace(f"port: {task.sandbox.upstreams[1].port}\n",
                                                  f"port: {port}\n", 1)
    (tmp_path / "gone.yaml").write_text(config)
    result = shardmerge("run", "--config", str(tmp_path / "gone.yaml"), "--log-level", "WARNING")
    assert result.returncode == 3 and "Traceback" not in result.stderr, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("shardmerge run: ")]
    assert line.startswith(f"shardmerge run: source s2: cannot connect to 127.0.0.1:{port}: Can't connect to")
    assert line.endswith("check sources[1].host and port, and that the server is running and reachable from here")


def test_a_refused_login_is_one_line_and_exit_3(task, tmp_path):
    config = task.config_path.read_text().replace('  password: ""\n  flavor', '  password: "wrong"\n  flavor')
    (tmp_path / "login.yaml").write_text(config)
    result = shardmerge("status", "--config", str(tmp_path / "login.yaml"))
    line = one_line(result)
    assert result.returncode == 3 and "Access denied" in line and "check target.user and its password" in line
    assert "wrong" not in result.stderr


def test_a_bad_config_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "bad.yaml").write_text("task: t\nsources: []\n")
    result = shardmerge("run", "--config", str(tmp_path / "bad.yaml"))
    assert result.returncode == 2 and one_line(result).startswith("shardmerge run: ")


def test_status_says_stopped_with_the_daemon_down_and_a_clean_restart_is_no_takeover(task):
    def status() -> tuple[str, str]:
        result = shardmerge("status", "--config", str(task.config_path))
        assert result.returncode == 0, result.stderr
        phase, daemon = result.stdout.splitlines()[:2]
        return phase.split(": ", 1)[1], daemon

    task.start()
    phase, daemon = status()
    assert phase == "streaming" and daemon.startswith("run by daemon ") and "(lease epoch 1)" in daemon
    assert task.stop() == 0
    phase, daemon = status()
    assert phase == "stopped" and daemon.endswith(", which stopped cleanly: `shardmerge run` goes on")
    task.start()
    assert "took over task" not in task.log_text() and "WARNING" not in task.log_text()
    assert f"holding the lease of task {task.name} (epoch 2, after " in task.log_text()
    task.kill()
    task.wait_for(lambda: status()[1].startswith("last run by daemon "), what="the lease to expire", timeout=30)
    phase, daemon = status()
    assert phase == "stopped" and "whose lease expired" in daemon and "`shardmerge run` (or a standby) takes over" in daemon
    task.start()
    assert "took over task" in task.log_text()
    assert task.stop() == 0


def test_readyz_flips_when_the_target_stops_and_comes_back(task):
    task.start()
    task.wait_for(lambda: readyz(task)[0] == 200, what="ready")
    assert urllib.request.urlopen(task.addr + "/healthz", timeout=10).status == 200
    healthy = shardctl(task, "health")
    assert healthy.returncode == 0 and healthy.stdout.strip() == "ready"
    task.sandbox.stop_instance(task.sandbox.downstream.name)
    try:
        down = (503, {"ready": False, "not_ready": ["target"], "role": "active"})
        task.wait_for(lambda: readyz(task) == down, timeout=30,
                      what="not ready while the target is down")
        sick = shardctl(task, "health")
        assert sick.returncode == 4 and "not ready: target" in sick.stderr
        assert urllib.request.urlopen(task.addr + "/healthz", timeout=10).status == 200  # alive all the same
    finally:
        task.sandbox.start_instance(task.sandbox.downstream.name)
    task.wait_for(lambda: readyz(task)[0] == 200, timeout=60, what="ready again")
    assert task.stop() == 0


def test_an_idle_source_shows_no_lag(task):
    task.start()
    task.sql(task.shards[0], "INSERT INTO {t} VALUES (1, 1, 1.5)")
    task.wait_in_sync()
    time.sleep(3)  # older than any lag allowed below: the last event's age no longer shows
    lags = []
    for _ in range(5):
        status = json.loads(shardctl(task, "--json", "query-status").stdout)
        lags += [s["lag"] for s in status["sources"].values()]
        time.sleep(1)
    assert lags and all(lag is not None and lag < 2 for lag in lags), lags
    assert task.stop() == 0


def test_the_metrics_parse_with_the_prometheus_parser(task):
    task.start()
    for n, shard in enumerate(task.shards):
        task.sql(shard, f"INSERT INTO {{t}} VALUES ({n * 10 + 1}, 1, 1.5), ({n * 10 + 2}, 2, 2.5)")
    task.wait_in_sync()
    text = shardctl(task, "metrics").stdout
    families = {f.name: f for f in text_string_to_metric_families(text)}
    expected = {
        "shardmerge_rows_applied": "counter",
        "shardmerge_shard_changes_applied": "counter",
        "shardmerge_dead_letter_rows": "counter",
        "shardmerge_ddl_decisions": "counter",
        "shardmerge_reconnects": "counter",
        "shardmerge_batch_seconds": "histogram",
        "shardmerge_source_lag_seconds": "gauge",
        "shardmerge_paused_shards": "gauge",
        "shardmerge_blocked_shards": "gauge",
        "shardmerge_source_connected": "gauge",
        "shardmerge_active_daemon": "gauge",
    }
    assert {name: families[name].type for name in expected} == expected
    (active,) = families["shardmerge_active_daemon"].samples  # (its standbys serve none)
    ((holder, epoch),) = task.sandbox.downstream.execute(
        f"SELECT holder, epoch FROM `{task.meta_schema}`.lease WHERE task = '{task.name}'"
    )
    assert (active.labels["daemon"], active.value) == (holder, float(epoch))
    per_shard = {s.labels["shard"]: s.value for s in families["shardmerge_shard_changes_applied"].samples
                 if s.name.endswith("_total")}
    assert per_shard == {str(task.shard_id(s)): 2.0 for s in task.shards}
    assert {s.labels["source"] for s in families["shardmerge_source_lag_seconds"].samples} == {"s1", "s2"}
    assert task.stop() == 0


def test_every_command_has_a_version_an_example_and_the_exit_codes():
    """Each command's help as its parser renders it (what `--help` prints), in this process:
    a process per command took 25 s of `make test`; one of each tool runs for real."""
    version = shardmerge("--version")
    assert version.returncode == 0 and version.stdout.startswith("shardmerge ")
    assert "example:" in shardmerge("run", "--help").stdout
    from replicator.cli import shardmerge as cli
    from replicator.cli.shardctl import build_parser

    for name in COMMANDS:
        (subparsers,) = [a for a in cli.build_parser(name)._actions if a.dest == "command"]
        text = subparsers.choices[name].format_help()
        assert "example:" in text and "exit status: 0 done" in text, name
    (subparsers,) = [a for a in build_parser()._actions if a.dest == "command"]
    commands = list(subparsers.choices)
    assert "health" in commands and "metrics" in commands
    real = subprocess.run([sys.executable, "-m", "replicator.cli.shardctl", "health", "--help"],
                          capture_output=True, text=True, cwd=REPO, env=ENV).stdout
    assert real == subparsers.choices["health"].format_help()
    for name in commands:
        text = subparsers.choices[name].format_help()
        assert "example:" in text and "exit status: 0 done" in text, name


# -- rows the downstream refuses ----------------------------------------------------------------
NOTE = "CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, note VARCHAR(20))"


def refuse_a_row(task) -> tuple[tuple, str]:
    """Narrow `note` downstream by hand, then write a row too long for it on the first
    shard and one after it: the shard pauses on the first. Returns it and its id."""
    a = task.shards[0]
    task.start()
    for shard in task.shards:
        task.sql(shard, "INSERT INTO {t} VALUES (1, 1.5, 'short')")
    task.wait_in_sync(timeout=60)
    task.sandbox.downstream.execute(f"ALTER TABLE `{task.target_db}`.orders MODIFY note VARCHAR(5)")
    task.sql(a, "INSERT INTO {t} VALUES (2, 2.5, 'far too long')")
    task.sql(a, "INSERT INTO {t} VALUES (3, 3.5, 'after')")
    shard = str(task.shard_id(a))
    task.wait_for(lambda: shard in status(task)["paused"], what="the shard to pause")
    return a, shard


def status(task) -> dict:
    return json.loads(shardctl(task, "--json", "query-status").stdout)


def downstream_rows(task, shard) -> dict[int, str]:
    rows = task.sandbox.downstream.execute(
        f"SELECT id, note FROM `{task.target_db}`.orders WHERE _table = '{shard[2]}' AND _schema = '{shard[1]}'"
    )
    return dict(rows)


def dead_letter(task) -> list[tuple]:
    return task.sandbox.downstream.execute(
        f"SELECT shard, row_key, state, action, error FROM `{task.meta_schema}`.dead_letter ORDER BY seq"
    )


@pytest.fixture
def note_task(sandbox, tmp_path):
    t = admin_task(sandbox, tmp_path, NOTE)
    yield t
    t.cleanup()


def test_a_refused_row_skipped_goes_to_the_dead_letter_table_and_its_shard_goes_on(note_task):
    task = note_task
    a, shard = refuse_a_row(task)
    refused = status(task)["paused"][shard]["refused"]
    assert "id=2" in refused["key"].split(", ") and "Data too long" in refused["error"]
    assert refused["statement"].startswith("INSERT INTO")
    which = ["--source", task.source_of(a[0]), "--table", f"{a[1]}.{a[2]}"]
    result = shardctl(task, "handle-error", "skip", *which)
    assert result.returncode == 0 and "left out (in the dead-letter table)" in result.stdout, result.stderr
    task.wait_for(lambda: downstream_rows(task, a) == {1: "short", 3: "after"}, what="the rows after it")
    assert status(task)["paused"] == {}
    ((who, key, state, action, error),) = dead_letter(task)
    assert (who, state, action) == (shard, "skipped", None) and "id=2" in key.split(", ") and "too long" in error
    listed = json.loads(shardctl(task, "--json", "dead-letters").stdout)
    assert [(e["shard"], e["state"]) for e in listed] == [(shard, "skipped")]
    again = shardctl(task, "handle-error", "skip", *which)
    assert again.returncode == 2 and "is not paused" in again.stderr
    assert task.stop() == 0


def test_a_ddl_after_a_refused_row_is_decided_after_the_rows_read_again(note_task):
    """A shard paused by a refused row renames a column, as every shard does (the rename
    finishes downstream). Its DDL waits till its rows before it are read again (`retry`):
    decided at once, the rename finished before those rows came back, and their values of
    the old name were left out (the column gone downstream)."""
    task = note_task
    a, shard = refuse_a_row(task)
    for s in task.shards:
        task.sql(s, "ALTER TABLE {t} RENAME COLUMN note TO memo")
    task.sql(a, "INSERT INTO {t} VALUES (4, 4.5, 'late')")
    for s in task.shards[1:]:
        task.sql(s, "INSERT INTO {t} VALUES (5, 5.5, 'other')")
    table = f"`{task.target_db}`.orders"
    task.wait_for(
        lambda: task.sandbox.downstream.execute(f"SELECT COUNT(*) FROM {table} WHERE id = 5")[0][0]
        == len(task.shards) - 1,
        what="the other shards' rows after the rename",
    )
    assert shard in status(task)["paused"]
    # the fix: the column wide again downstream, whatever its name is now
    column = "note" if task.sandbox.downstream.execute(f"SHOW COLUMNS FROM {table} LIKE 'note'") else "memo"
    task.sandbox.downstream.execute(f"ALTER TABLE {table} MODIFY {column} VARCHAR(20)")
    which = ["--source", task.source_of(a[0]), "--table", f"{a[1]}.{a[2]}"]
    result = shardctl(task, "handle-error", "retry", *which)
    assert result.returncode == 0, result.stderr

    def memos() -> dict[int, str]:
        rows = task.sandbox.downstream.execute(
            f"SELECT id, memo FROM {table} WHERE _schema = '{a[1]}' AND _table = '{a[2]}'"
        )
        return dict(rows)

    want = {1: "short", 2: "far too long", 3: "after", 4: "late"}
    task.wait_for(lambda: memos() == want, timeout=90, what=f"the shard's rows under the new name, {want}")
    assert status(task)["paused"] == {}
    assert task.stop() == 0


def test_a_shard_refused_again_after_a_retry_stays_paused_at_its_row_across_a_kill(note_task):
    """Live finding L63 (seed 616084): a shard paused by a refused row, `handle-error retry`
    refused again, its table dropped upstream, the daemon SIGKILLed. Its retry saved the
    replay of its rows read again, which the start took for a decision's scratch window
    not merged yet: the shard resumed with no word of the operator, its rows through the
    window (the row refused again there), paused for rows that could not be replayed, its
    DROP decided meanwhile: it left the group, its rows since the pause discarded. It stays
    paused at its row, its DROP waiting; the fix and `retry` bring its rows, and the dropped
    table's rows stay downstream."""
    task = note_task
    a, shard = refuse_a_row(task)
    which = ["--source", task.source_of(a[0]), "--table", f"{a[1]}.{a[2]}"]
    refusal = f"shard {shard} paused from"
    result = shardctl(task, "handle-error", "retry", *which)
    assert result.returncode == 0, result.stderr
    task.wait_for(lambda: task.log_text().count(refusal) >= 2, what="the row refused again")
    task.sql(a, "INSERT INTO {t} VALUES (4, 4.5, 'late')")
    task.sql(a, "DROP TABLE {t}")
    task.wait_for(lambda: f"DDL of {shard} waits" in task.log_text(), what="its DROP to wait behind its row")
    task.kill()
    task.start()
    left = f"shard {shard} left its group while paused"
    deadline = time.monotonic() + 8  # (what the start does to it, it does at once)
    while left not in task.log_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left not in task.log_text(), task.log_text()[-3000:]
    paused = status(task)["paused"][shard]
    assert "id=2" in paused["refused"]["key"].split(", ") and "handle-error" in paused["reason"], paused
    assert downstream_rows(task, a) == {1: "short"}
    table = f"`{task.target_db}`.orders"
    task.sandbox.downstream.execute(f"ALTER TABLE {table} MODIFY note VARCHAR(20)")
    result = shardctl(task, "handle-error", "retry", *which)
    assert result.returncode == 0, result.stderr
    want = {1: "short", 2: "far too long", 3: "after", 4: "late"}
    task.wait_for(lambda: downstream_rows(task, a) == want, timeout=60, what=f"its rows, {want}")
    task.wait_for(lambda: status(task)["paused"] == {}, what="the shard to leave, its rows staying")
    assert left not in task.log_text()
    assert task.stop() == 0


def test_a_refused_row_replaced_is_written_as_given(note_task):
    task = note_task
    a, shard = refuse_a_row(task)
    which = ["--source", task.source_of(a[0]), "--table", f"{a[1]}.{a[2]}"]
    table = f"`{task.target_db}`.orders"
    bad = shardctl(task, "handle-error", "replace", *which, "--sql", f"INSERT INTO {table} (nope) VALUES (1)")
    assert bad.returncode == 2 and "the downstream refused it" in bad.stderr and "nothing was changed" in bad.stderr
    assert shard in status(task)["paused"]
    fix = (f"INSERT INTO {table} (id, amount, note, _source, _schema, _table) "
           f"VALUES (2, 2.5, 'far', '{task.source_of(a[0])}', '{a[1]}', '{a[2]}')")
    result = shardctl(task, "handle-error", "replace", *which, "--sql", fix)
    assert result.returncode == 0, result.stderr
    task.wait_for(lambda: downstream_rows(task, a) == {1: "short", 2: "far", 3: "after"}, what="the replaced row")
    ((_, _, state, action, _),) = dead_letter(task)
    assert state == "replaced" and action == fix
    assert task.stop() == 0


def test_with_on_row_error_skip_a_refused_row_goes_to_the_dead_letter_table_at_once(sandbox, tmp_path):
    task = admin_task(sandbox, tmp_path, NOTE, options="  on_row_error: skip\n")
    try:
        a = task.shards[0]
        task.start()
        task.sql(a, "INSERT INTO {t} VALUES (1, 1.5, 'short')")
        task.wait_in_sync(timeout=60)
        task.sandbox.downstream.execute(f"ALTER TABLE `{task.target_db}`.orders MODIFY note VARCHAR(5)")
        task.sql(a, "INSERT INTO {t} VALUES (2, 2.5, 'far too long')")
        task.sql(a, "INSERT INTO {t} VALUES (3, 3.5, 'after')")
        task.wait_for(lambda: downstream_rows(task, a) == {1: "short", 3: "after"}, what="the rows after it")
        assert status(task)["paused"] == {}
        ((who, key, state, _, _),) = dead_letter(task)
        assert (who, state) == (str(task.shard_id(a)), "skipped") and "id=2" in key.split(", ")
        metrics = {f.name: f for f in text_string_to_metric_families(shardctl(task, "metrics").stdout)}
        (sample,) = [s for s in metrics["shardmerge_dead_letter_rows"].samples if s.name.endswith("_total")]
        assert sample.value == 1 and sample.labels["shard"] == str(task.shard_id(a))
        assert "in the dead-letter table (on_row_error: skip)" in task.log_text()
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_resume_task_says_which_shards_resumed_and_which_are_still_paused_and_why(note_task):
    task = note_task
    _, refused_shard = refuse_a_row(task)
    b = task.shards[1]
    task.sql(b, "ALTER TABLE {t} ADD COLUMN prio FLOAT")
    # the two shards are on two sources, whose DDLs race: the FLOAT first, so the DATETIME waits
    task.wait_for(lambda: task.downstream_table().column("prio") is not None, what="prio downstream")
    task.sql(task.shards[2], "ALTER TABLE {t} ADD COLUMN prio DATETIME")  # a conflict: it waits
    blocked = task.shard_id(task.shards[2])
    task.wait_for(lambda: str(blocked) in status(task)["paused"], what="the conflicting shard to pause")
    result = shardctl(task, "resume-task")
    assert result.returncode == 0, result.stderr
    assert f"{refused_shard}: resumed (its refused row is tried again)" in result.stdout
    assert f"{blocked}: still paused: " in result.stdout and "prio" in result.stdout
    data = json.loads(shardctl(task, "--json", "resume-task").stdout)
    assert str(blocked) in data["paused_shards"]
    assert task.stop() == 0


@pytest.mark.parametrize(("create", "charset"), [
    ("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(5))", "latin1"),  # by hand: the target's
    ("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(5));", "latin1"),
    ("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(5)) DEFAULT CHARSET=utf8mb4", "utf8mb4"),  # its own
])
def test_set_schema_takes_the_targets_character_set_where_the_create_table_names_none(create, charset):
    from lattice import parse_table
    from replicator.api.operations import schema_of

    target = parse_table("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(5)) DEFAULT CHARSET=latin1 "
                         "COLLATE=latin1_bin")
    table = schema_of(create, target)
    assert table.options.charset == charset and table.column("a").type.charset == charset
    if charset == "latin1":
        assert table == target


def test_binlog_schema_lists_the_tracked_schemas_and_sets_one_from_its_source_or_the_target(task, tmp_path):
    """DM's binlog-schema: a shard whose tracked schema is blocked (two shards add one
    column as two types) takes the target's; one put back by hand upstream takes its
    source's; both resolve and the group's schema is the join again."""
    a, b, *_ = task.shards
    task.start()
    listed = json.loads(shardctl(task, "--json", "binlog-schema", "list").stdout)
    assert set(listed) == {str(task.shard_id(s)) for s in task.shards}
    assert all(s["create_table"].startswith("CREATE TABLE") and s["blocked"] is None for s in listed.values())
    task.sql(a, "ALTER TABLE {t} ADD COLUMN prio FLOAT NULL")
    task.sql(b, "ALTER TABLE {t} ADD COLUMN prio DATETIME NULL")  # conflicts: b waits
    shard_b = str(task.shard_id(b))
    task.wait_for(lambda: shard_b in status(task)["paused"], what="the conflicting shard")
    assert json.loads(shardctl(task, "--json", "binlog-schema", "list").stdout)[shard_b]["blocked"] == "conflict"
    which_b = ["--source", task.source_of(b[0]), "--table", f"{b[1]}.{b[2]}"]
    both = shardctl(task, "binlog-schema", "update", *which_b, "--from-source", "--from-target")
    assert both.returncode == 2 and "one of --from-source, --from-target, --file" in both.stderr
    result = shardctl(task, "binlog-schema", "update", *which_b, "--from-target")
    assert result.returncode == 0 and result.stdout.startswith("resolved"), result.stdout + result.stderr
    assert status(task)["paused"] == {}
    tracked = json.loads(shardctl(task, "--json", "binlog-schema", "list").stdout)[shard_b]["create_table"]
    assert "`prio` float" in tracked and "_source" not in tracked  # the target's, less the extract columns
    task.sql(b, "ALTER TABLE {t} MODIFY prio FLOAT NULL")  # upstream put right by hand
    again = shardctl(task, "binlog-schema", "update", *which_b, "--from-source")
    assert again.returncode == 0, again.stderr
    assert task.stop() == 0
