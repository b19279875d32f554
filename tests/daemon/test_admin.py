"""The control plane: a running daemon on the sandbox driven only through `shardctl`
and its HTTP admin API (bound beyond localhost, so with a bearer token), logging in
with a password that must never show."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from replicator.api.admin import AdminError
from replicator.config import ConfigError, parse_config
from replicator.metrics import Metrics
from replicator.shard_id import ShardId
from replicator.state.coordinator_store import MetaStore
from tests.replication import REPO, ReplicationTask, admin_task, free_port

pytestmark = pytest.mark.timeout(300)

PASSWORD = "Pw-never-shown-7731"
TOKEN = "token-for-tests-5150"
USER = "sm_admin_test"
# this checkout's shardctl: the venv's script imports whatever its editable install maps
SHARDCTL = [sys.executable, "-m", "replicator.cli.shardctl"]
CREATE = "CREATE TABLE {table} (id INT NOT NULL PRIMARY KEY, a INT NULL, b FLOAT NULL)"



@pytest.fixture
def task(sandbox, tmp_path, monkeypatch):
    for inst in sandbox.instances:
        inst.execute(
            [
                f"CREATE USER IF NOT EXISTS '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'",
                f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'%'",
            ]
        )
    monkeypatch.setenv("SM_TEST_PASSWORD", PASSWORD)
    monkeypatch.setenv("SM_TEST_TOKEN", TOKEN)
    port = free_port()
    t = ReplicationTask(
        sandbox,
        tmp_path,
        CREATE,
        admin=f"  host: 0.0.0.0\n  port: {port}\n  token_env: SM_TEST_TOKEN\n",
        user=(USER, "SM_TEST_PASSWORD"),
    )
    t.addr = f"http://127.0.0.1:{port}"
    t.start()  # it starts where the binlogs are: rows written before would need a backfill
    for n, shard in enumerate(t.shards):
        t.sql(shard, "INSERT INTO {t} VALUES " + ",".join(f"({n * 1000 + i}, {i}, {i}.5)" for i in range(10)))
    yield t
    if t.process is not None:
        t.stop()
    t.cleanup()


def ctl(task, *args: str, token: str | None = TOKEN) -> subprocess.CompletedProcess:
    # PYTHONPATH: this checkout's shardctl, not the one the venv's script was installed from
    env = {k: v for k, v in os.environ.items() if k != "SHARDCTL_TOKEN"} | {"PYTHONPATH": str(REPO)}
    if token is not None:
        env["SHARDCTL_TOKEN"] = token
    return subprocess.run(
        [*SHARDCTL, "--addr", task.addr, *args], capture_output=True, text=True, env=env, timeout=180
    )


def ctl_json(task, *args: str):
    result = ctl(task, "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def downstream_ids(task) -> set[int]:
    rows = task.sandbox.downstream.execute(f"SELECT id FROM `{task.target_db}`.orders")
    return {r[0] for r in rows}


def wait_blocked(task, shard_id: str) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = ctl_json(task, "show-ddl-state")
        if shard_id in state["blocked"]:
            return state
        time.sleep(0.3)
    raise AssertionError(f"{shard_id} not blocked\n{task.log_text()[-3000:]}")


def test_status_pause_resume_and_metrics_without_showing_the_password(task):
    task.wait_in_sync()
    status = ctl_json(task, "query-status")
    assert set(status["sources"]) == {"s1", "s2"}
    assert all(s["position"] and s["state"] == "running" for s in status["sources"].values())
    people = ctl(task, "query-status")
    assert people.returncode == 0 and "source" in people.stdout and "s1" in people.stdout

    assert ctl_json(task, "pause-task")["sources"] == {"s1": "paused", "s2": "paused"}
    assert ctl_json(task, "query-status")["sources"]["s1"]["state"] == "paused"
    task.sql(task.shards[0], "INSERT INTO {t} VALUES (500, 1, 1.5), (501, 2, 2.5)")
    time.sleep(2.5)
    assert not {500, 501} & downstream_ids(task)  # paused: nothing read
    assert ctl_json(task, "resume-task")["sources"] == {"s1": "running", "s2": "running"}
    task.wait_in_sync()
    assert {500, 501} <= downstream_ids(task)

    metrics = ctl(task, "metrics").stdout
    applied = [line for line in metrics.splitlines() if line.startswith("shardmerge_rows_applied_total{")]
    by_source = {line.split('source="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1]) for line in applied}
    assert by_source["s1"] >= 22 and by_source["s2"] >= 20
    assert f'table="{task.target_db}.orders"' in applied[0]
    for name in (
        "shardmerge_source_lag_seconds",
        "shardmerge_queue_depth",
        "shardmerge_batch_seconds_count",
        "shardmerge_blocked_shards",
        "shardmerge_ddl_decisions_total",
    ):
        assert name in metrics

    everything = task.log_text() + json.dumps(status) + people.stdout + metrics
    assert PASSWORD not in everything and TOKEN not in everything
    lines = [line for line in task.log_text().splitlines() if line[:4].isdigit()]
    assert lines and all(f"task={task.name}" in line for line in lines)  # the workers' lines too
    assert any(" source=s1 position=mysql-bin." in line for line in lines)


def test_requests_without_the_token_are_refused(task):
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(task.addr + "/api/v1/status", timeout=10)
    assert caught.value.code == 401
    request = urllib.request.Request(task.addr + "/metrics", headers={"Authorization": "Bearer wrong"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 401
    refused = ctl(task, "pause-task", token=None)
    assert (
        refused.returncode == 3
        and "a valid bearer token is required" in refused.stderr
        and "(HTTP 401)" in refused.stderr
    )
    assert ctl_json(task, "query-status")["sources"]["s1"]["state"] != "paused"  # nothing was paused


def test_float_vs_datetime_conflict_resolved_with_set_schema_applies_the_paused_rows(task, tmp_path):
    task.wait_in_sync()
    shard = task.shards[0]
    shard_id = str(task.shard_id(shard))
    task.sql(shard, "UPDATE {t} SET b = NULL")  # so the upstream can convert the column
    task.sql(shard, "ALTER TABLE {t} MODIFY b DATETIME NULL")  # docs/design.md "Conflicts": float vs datetime
    state = wait_blocked(task, shard_id)
    block = state["blocked"][shard_id]
    assert "MODIFY b DATETIME" in block["ddl"] and block["position"] and block["kind"] == "conflict"
    assert any("b: datetime here, float joined" in d for d in state["shards"][shard_id]["differences"])
    people = ctl(task, "show-ddl-locks")
    assert f"blocked: {shard_id} (conflict) at {block['position']}" in people.stdout
    task.sql(shard, "INSERT INTO {t} (id, a) VALUES (100, 1), (101, 2)")  # valid under either schema
    task.sql(task.shards[1], "INSERT INTO {t} VALUES (1100, 1, 1.5)")  # other shards go on
    task.wait_for(lambda: 1100 in downstream_ids(task), what="the other shard's row")
    assert not {100, 101} & downstream_ids(task)

    create = tmp_path / "orders.sql"
    create.write_text(f"CREATE TABLE `{shard[2]}` (id INT NOT NULL PRIMARY KEY, a INT NULL, b FLOAT NULL)")
    result = ctl(
        task, "set-schema", "--source", "s1", "--table", f"{shard[1]}.{shard[2]}", "--file", str(create)
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("resolved") and shard_id in result.stdout
    task.wait_for(lambda: {100, 101} <= downstream_ids(task), what="the paused rows to be applied")
    assert ctl_json(task, "show-ddl-state")["blocked"] == {}
    history = ctl_json(task, "schema-history")
    assert any(e["ddl"] == f"(set-schema {shard_id})" for e in history)
    shown = ctl(task, "schema-history").stdout
    assert f"DDL:        (set-schema {shard_id})" in shown and "version 1.0  applied" in shown


def test_float_vs_datetime_conflict_resolved_with_binlog_skip_keeps_the_paused_rows(task):
    task.wait_in_sync()
    shard = task.shards[0]
    shard_id = str(task.shard_id(shard))
    table = f"{shard[1]}.{shard[2]}"
    task.sql(shard, "UPDATE {t} SET b = NULL")
    task.sql(shard, "ALTER TABLE {t} MODIFY b DATETIME NULL")
    block = wait_blocked(task, shard_id)["blocked"][shard_id]
    task.sql(shard, "INSERT INTO {t} VALUES (200, 1, '2026-11-21 10:00:00'), (201, 2, '2026-11-21 11:00:00')")

    wrong = ctl(task, "binlog", "skip", "--source", "s1", "--table", table, "--pos", "mysql-bin.000001:4")
    assert (
        wrong.returncode == 2
        and f"is blocked at {block['position']}, not at mysql-bin.000001:4" in wrong.stderr
    )
    unknown = ctl(task, "binlog", "skip", "--source", "s9", "--table", table, "--pos", block["position"])
    assert unknown.returncode == 2 and "no shard 's9." in unknown.stderr

    result = ctl(task, "binlog", "skip", "--source", "s1", "--table", table, "--pos", block["position"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("resolved")
    assert f"then: the shard keeps its schema from before {block['position']}; its rows written since " \
        "go downstream as written" in result.stdout
    # the operator puts the shard back as it was upstream; rows after it flow again
    task.sql(shard, "ALTER TABLE {t} MODIFY b FLOAT NULL")
    task.sql(shard, "INSERT INTO {t} VALUES (300, 3, 3.5)")
    task.wait_for(lambda: 300 in downstream_ids(task), what="the row after the skip")
    # written under the skipped DDL: the DDL dropped, not they (issue 71, DM's meaning)
    task.wait_for(lambda: {200, 201} <= downstream_ids(task), what="the rows written under the skipped DDL")
    assert ctl_json(task, "show-ddl-state")["blocked"] == {}


def test_propagation_disabled_then_enabled_catches_up(task):
    task.wait_in_sync()
    result = ctl(task, "disable-ddl-propagation")
    assert result.returncode == 0 and "DDL propagation disabled" in result.stdout
    for shard in task.shards:
        task.sql(shard, "ALTER TABLE {t} ADD COLUMN c INT NULL")
    for n, shard in enumerate(task.shards):
        task.sql(shard, f"INSERT INTO {{t}} VALUES ({n * 1000 + 700}, 7, 7.5, 77)")
    time.sleep(3)
    columns = [r[0] for r in task.sandbox.downstream.execute(f"SHOW COLUMNS FROM `{task.target_db}`.orders")]
    assert "c" not in columns
    state = ctl_json(task, "show-ddl-state")
    assert state["propagation"] is False and {b["kind"] for b in state["blocked"].values()} == {"waiting"}
    result = ctl(task, "enable-ddl-propagation")
    assert result.returncode == 0 and "ADD COLUMN `c`" in result.stdout
    task.wait_in_sync(timeout=90)


def test_shardctl_says_when_no_daemon_answers():
    result = subprocess.run(
        [*SHARDCTL, "--addr", f"http://127.0.0.1:{free_port()}", "query-status"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 3 and "no shardmerge daemon answers at http://127.0.0.1:" in result.stderr


# -- without servers --------------------------------------------------------------------------
BASE = {
    "task": "t",
    "sources": [{"id": "s1", "host": "h", "user": "u", "server_id": 5}],
    "target": {"host": "d", "user": "u", "flavor": "mariadb"},
    "routes": [{"schema": "db", "table": "t", "target": "db.t"}],
}


def test_an_admin_api_beyond_localhost_needs_a_token():
    with pytest.raises(
        ConfigError, match=r"admin\.token_env: the admin API listens on 0\.0\.0\.0, beyond localhost"
    ):
        parse_config({**BASE, "admin": {"host": "0.0.0.0", "port": 9000}})
    config = parse_config({**BASE, "admin": {"host": "0.0.0.0", "token_env": "T"}}, environ={"T": "secret-1"})
    assert config.admin.token == "secret-1" and "secret-1" not in repr(config)
    assert parse_config({**BASE, "admin": {"port": 9001}}).admin.local


def test_json_log_lines_carry_the_task_and_the_event_context(capsys):
    import logging

    from replicator.logs import configure

    configure("orders", "INFO", "json")
    try:
        shard = ShardId("s1", "db", "t")
        logging.getLogger("shardmerge.test").warning(
            "shard %s paused", shard, extra={"shard": shard, "source": "s1", "position": "b.000001:4"}
        )
        logging.getLogger("shardmerge.test").info("no event")
    finally:
        logging.getLogger().handlers.clear()
    first, second = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert first["task"] == "orders" and first["message"] == "shard s1.db.t paused"
    assert (first["shard"], first["source"], first["position"]) == ("s1.db.t", "s1", "b.000001:4")
    assert second["task"] == "orders" and "source" not in second


@pytest.mark.parametrize(("body", "status", "message"), [
    ({}, 400, "missing 'shard' (a string)"),
    ({"shard": 7}, 400, "missing 'shard' (a string)"),
    ({"shard": "s1.orders"}, 400, "shard id 's1.orders' is not source.schema.table"),
    ({"shard": "s1.db.t.old"}, 400, "shard id 's1.db.t.old' is ambiguous: expected source.schema.table"),
])
def test_the_admin_api_reads_the_shard_id_of_a_request_or_says_what_is_wrong(body, status, message):
    from replicator.api.daemon_api import shard_of as _shard

    with pytest.raises(AdminError) as caught:
        _shard(body)
    assert caught.value.status == status and str(caught.value).startswith(message)


def test_the_admin_api_takes_a_shard_id_it_can_read():
    from replicator.api.daemon_api import shard_of as _shard

    assert _shard({"shard": "s1.db.t"}) is ShardId("s1", "db", "t")


@pytest.mark.parametrize(("source", "table", "message"), [
    ("s1", "orders", "--table 'orders': expected schema.table"),
    ("s1", "db.t.old", "--table 'db.t.old': expected schema.table"),
    ("s1", "db.", "shard id: expected a non-empty table name, got ''"),
    ("s.1", "db.t", "shard id: the source id 's.1' contains a dot; expected source.schema.table"),
])
def test_shardctl_checks_the_shard_before_asking_the_daemon(source, table, message):
    result = subprocess.run(
        [sys.executable, "-m", "replicator.cli.shardctl", "--addr", f"http://127.0.0.1:{free_port()}",
         "binlog", "skip", "--source", source, "--table", table, "--pos", "mysql-bin.000001:4"],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 2 and result.stderr == f"shardctl binlog: {message}\n"


def test_metrics_render_in_the_prometheus_text_format():
    m = Metrics()
    m.rows_applied.inc("s1", "db.t", amount=3)
    m.rows_applied.inc("s1", "db.t")
    m.batch_seconds.observe(0.003)
    m.batch_seconds.observe(2.0)
    m.lag.set_all({("s1",): 1.5, ("s2",): 0.0})
    m.lag.set_all({("s1",): 0.25})  # a snapshot: s2 is gone
    families = {f.name: f for f in text_string_to_metric_families(m.render())}
    assert families["shardmerge_rows_applied"].type == "counter"
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples}
    assert samples[("shardmerge_rows_applied_total", (("source", "s1"), ("table", "db.t")))] == 4
    assert samples[("shardmerge_batch_seconds_bucket", (("le", "0.005"),))] == 1
    assert samples[("shardmerge_batch_seconds_bucket", (("le", "+Inf"),))] == 2
    assert [s.labels for s in families["shardmerge_source_lag_seconds"].samples] == [{"source": "s1"}]
    assert not any(name.endswith("_created") for name, _ in samples)


def test_binlog_replace_takes_another_ddl_for_the_blocked_one_and_applies_the_paused_rows(task):
    task.wait_in_sync()
    shard = task.shards[2]
    shard_id = str(task.shard_id(shard))
    task.sql(shard, "UPDATE {t} SET b = NULL")
    task.sql(shard, "ALTER TABLE {t} MODIFY b DATETIME NULL")
    block = wait_blocked(task, shard_id)["blocked"][shard_id]
    task.sql(shard, "INSERT INTO {t} (id, a) VALUES (400, 4)")
    result = ctl(
        task,
        "binlog",
        "replace",
        "--source",
        "s2",
        "--table",
        f"{shard[1]}.{shard[2]}",
        "--pos",
        block["position"],
        "--sql",
        f"ALTER TABLE `{shard[2]}` MODIFY b DOUBLE NULL",
    )
    assert result.returncode == 0, result.stderr
    assert "MODIFY COLUMN `b` double" in result.stdout
    task.wait_for(lambda: 400 in downstream_ids(task), what="the paused row to be applied")
    columns = dict(
        task.sandbox.downstream.execute(
            f"SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS "
            f"WHERE TABLE_SCHEMA = '{task.target_db}'"
        )
    )
    assert columns["b"] == "double"


def test_an_admin_port_in_use_stops_the_daemon_with_the_reason(sandbox, tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        task = ReplicationTask(sandbox, tmp_path, CREATE, admin=f"  port: {port}\n")
        try:
            assert task.start(wait=False).wait(timeout=60) == 2
            task.process = None
            assert f"admin API: cannot listen on 127.0.0.1:{port}" in task.log_text()
            assert "set admin.port" in task.log_text()
        finally:
            task.cleanup()


def refused_not_null(task) -> None:
    """Every shard makes `a` NOT NULL; a row written downstream by hand has a NULL there,
    so the joined change cannot run downstream (strict mode refuses it)."""
    task.start()
    for n, shard in enumerate(task.shards):
        task.sql(shard, f"INSERT INTO {{t}} VALUES ({n * 1000}, {n}, 0.5)")
    task.wait_in_sync()
    task.sandbox.downstream.execute(
        f"INSERT INTO `{task.target_db}`.orders (id, a, _source) VALUES (9999, NULL, 'by hand')"
    )
    for shard in task.shards:
        task.sql(shard, "ALTER TABLE {t} MODIFY a INT NOT NULL")


def test_a_downstream_ddl_the_downstream_refuses_waits_for_journal_retry_even_across_a_restart(
    sandbox, tmp_path
):
    """The change `refused_not_null` makes waits for the operator, across a restart too."""
    task = admin_task(sandbox, tmp_path, CREATE)
    table = f"`{task.target_db}`.orders"
    try:
        refused_not_null(task)

        def pending():
            return ctl_json(task, "show-ddl-state")["pending_downstream_ddl"]

        task.wait_for(lambda: bool(pending()), what="the refused downstream DDL")
        (entry,) = pending()
        # (the shard whose change completed the join: the last read, the sources are read
        # side by side, so not always the last written)
        (held,) = [s for s in task.shards if str(task.shard_id(s)) == entry["shard"]]
        assert "NOT NULL" in entry["statements"][0]
        status = ctl_json(task, "query-status")
        assert f"journal entry {entry['seq']}" in status["paused"][entry["shard"]]["reason"]
        task.sql(held, "INSERT INTO {t} VALUES (3001, 31, 1.5)")  # waits: its shard is paused

        assert task.stop() == 0  # a restart retries the entry, is refused again, and starts anyway
        task.start()
        assert f"journal entry {entry['seq']}" in ctl(task, "show-ddl-state").stdout
        missing = ctl(task, "journal", "skip", "--seq", "999")
        assert missing.returncode == 2 and "has no pending journal entry 999" in missing.stderr
        early = ctl(task, "journal", "retry", "--seq", str(entry["seq"]))
        assert early.returncode == 2 and "(HTTP 409)" in early.stderr

        sandbox.downstream.execute(f"DELETE FROM {table} WHERE id = 9999")  # the fix
        result = ctl(task, "journal", "retry", "--seq", str(entry["seq"]))
        assert result.returncode == 0, result.stderr
        task.wait_in_sync()  # a is NOT NULL downstream and the paused shard's row arrived
        assert pending() == [] and 3001 in downstream_ids(task)
    finally:
        if task.process is not None:
            task.stop()
        task.cleanup()


def test_downstream_ddl_after_one_the_downstream_refused_waits_for_it_and_runs_after_its_retry(
    sandbox, tmp_path
):
    """Entries of a group's journal run in their order: one made after an entry the
    downstream refused was made for the table after that one (live stories L43: a key a
    refused entry was to add, dropped by the next). It waits, its shard paused saying
    for which; retried, the refused entry runs, then the one that waited, and both shards
    resume."""
    task = admin_task(sandbox, tmp_path, CREATE)
    table = f"`{task.target_db}`.orders"
    try:
        refused_not_null(task)

        def pending():
            return ctl_json(task, "show-ddl-state")["pending_downstream_ddl"]

        task.wait_for(lambda: len(pending()) == 1, what="the refused downstream DDL")
        # a shard the refused entry did not pause (that is the one whose change completed
        # the join: the last read, not always the last written)
        (held,) = pending()
        other = next(s for s in task.shards if str(task.shard_id(s)) != held["shard"])
        task.sql(other, "ALTER TABLE {t} ADD COLUMN c INT NULL")  # changes the join: entry 2
        task.sql(other, "INSERT INTO {t} VALUES (5, 5, 5.5, 5)")
        task.wait_for(lambda: len(pending()) == 2, what="the entry after it")
        first, then = pending()
        status = ctl_json(task, "query-status")["paused"][str(task.shard_id(other))]
        assert f"journal entry {then['seq']}) waits for journal entry {first['seq']}" in status["reason"]
        assert task.downstream_table().column("c") is None
        early = ctl(task, "journal", "retry", "--seq", str(then["seq"]))
        assert early.returncode == 2 and f"journal entry {first['seq']} comes first" in early.stderr

        sandbox.downstream.execute(f"DELETE FROM {table} WHERE id = 9999")  # the fix
        result = ctl(task, "journal", "retry", "--seq", str(first["seq"]))
        assert result.returncode == 0, result.stderr
        task.wait_in_sync()  # both ran; the row written after the ADD COLUMN arrived
        assert pending() == [] and 5 in downstream_ids(task)
        assert task.stop() == 0
    finally:
        if task.process is not None:
            task.stop()
        task.cleanup()


def test_rows_of_a_shard_outside_its_group_wait_until_it_is_back(task, tmp_path):
    """Issue 18: rows of a shard its group does not have never reach the applier. The
    group loses the shard while the daemon is down (as a table renamed away would); its
    rows then pause it with a reason that says what to do, the others go on, and
    `set-schema` putting it back applies every row that waited."""
    task.wait_in_sync()
    shard = task.shards[0]
    shard_id = task.shard_id(shard)
    assert task.stop() == 0
    store = MetaStore(task.meta(), f"{task.target_db}.orders")
    store.put_shard(shard_id, None)
    task.meta().execute(store.flush_sql())
    task.start()
    task.sql(shard, "INSERT INTO {t} (id, a) VALUES (200, 1), (201, 2)")
    task.sql(shard, "UPDATE {t} SET a = 7 WHERE id = 1")
    task.sql(task.shards[1], "INSERT INTO {t} VALUES (1200, 1, 1.5)")  # other shards go on
    task.wait_for(lambda: 1200 in downstream_ids(task), what="the other shard's row")
    task.wait_for(lambda: shard_id in task.meta().pauses.load(), what="the shard paused")
    pauses = task.meta().pauses.load()
    assert list(pauses) == [shard_id] and "not in its group" in pauses[shard_id].reason
    assert "set-schema" in pauses[shard_id].reason
    assert not {200, 201} & downstream_ids(task)

    create = tmp_path / "orders.sql"
    create.write_text(f"CREATE TABLE `{shard[2]}` (id INT NOT NULL PRIMARY KEY, a INT NULL, b FLOAT NULL)")
    result = ctl(task, "set-schema", "--source", "s1", "--table", f"{shard[1]}.{shard[2]}", "--file", str(create))
    assert result.returncode == 0, result.stderr
    task.wait_for(lambda: {200, 201} <= downstream_ids(task), what="the rows that waited")
    task.wait_in_sync()
    assert not task.meta().pauses.load()


@pytest.mark.parametrize("extract", [True, False], ids=["extract columns", "row events as they are"])
def test_query_status_counts_the_rows_applied_not_the_events_or_transactions(sandbox, tmp_path, extract):
    """61 rows in 3 transactions of 6 multi-row events: query-status (as text and --json) and
    the rows metric say 61. With extract columns, events of 8 rows or more go with their
    values appended and smaller ones decoded; without, every event goes as the binlog holds
    it (no safe mode), its rows counted by the worker: the server's answer says none."""
    task = admin_task(sandbox, tmp_path, CREATE, extract=extract, options="  safe_mode_window: 0\n")
    task.start()
    try:
        first, other_table, other_source = task.shards[0], task.shards[1], task.shards[2]

        def transaction(shard, *statements: str) -> None:
            table = f"`{shard[1]}`.`{shard[2]}`"
            sandbox.instance(shard[0]).execute(
                ["START TRANSACTION", *(s.format(t=table) for s in statements), "COMMIT"]
            )

        def values(ids: range) -> str:
            return ",".join(f"({i}, {i}, {i}.5)" for i in ids)

        transaction(
            first,
            f"INSERT INTO {{t}} VALUES {values(range(1, 13))}",  # 12 rows
            "UPDATE {t} SET a = a + 1",  # 12
            "DELETE FROM {t} WHERE id <= 3",  # 3
        )
        transaction(
            other_source,
            f"INSERT INTO {{t}} VALUES {values(range(101, 121))}",  # 20
            "UPDATE {t} SET b = b * 2 WHERE id <= 105",  # 5
        )
        transaction(other_table, f"INSERT INTO {{t}} VALUES {values(range(201, 210))}")  # 9
        task.wait_in_sync()
        deadline = time.monotonic() + 15
        while (status := ctl_json(task, "query-status"))["applied"] != 61 and time.monotonic() < deadline:
            time.sleep(0.3)
        assert status["applied"] == 61, status
        if not extract:
            assert status["applied_events"] == 6, status
        else:
            assert 0 < status["applied_events"] < 6, status  # the 3-row DELETE decoded
        text = ctl(task, "query-status", token=None)
        assert text.returncode == 0, text.stderr
        assert text.stdout.startswith(f"task {task.name}: sync, synced; 61 row changes applied, "), text.stdout
        assert status["stage"] == "sync" and status["synced"] is True, status
        for source in status["sources"].values():  # read to the end of its binlog, at no rate now
            assert (source["behind_bytes"], source["behind_transactions"]) == (0, 0), source
            assert source["events_per_s"] >= 0 and source["binlog_end"].startswith("mysql-bin."), source
        assert f"row events applied as the binlog holds them: {status['applied_events']} " in text.stdout
        metrics = ctl(task, "metrics", token=None).stdout
        families = {f.name: f for f in text_string_to_metric_families(metrics)}
        rows = sum(s.value for s in families["shardmerge_rows_applied"].samples if s.name.endswith("_total"))
        assert rows == 61, metrics
    finally:
        task.stop()
        task.cleanup()


def test_show_ddl_state_shows_extract_columns_as_added_by_shardmerge_not_as_differences(task):
    """Extract columns are in the join, in no shard: shardmerge adds them downstream. They
    are neither dropped nor missing from a shard; a column one shard adds still is."""
    task.wait_in_sync()
    names = ("_source", "_schema", "_table")
    state = ctl_json(task, "show-ddl-state")
    assert {c: state["columns"][c] for c in names} == dict.fromkeys(names, "extract"), state["columns"]
    assert state["extract_columns"] == {"source": "_source", "schema": "_schema", "table": "_table"}
    assert {s: v["differences"] for s, v in state["shards"].items()} == {
        str(task.shard_id(s)): [] for s in task.shards
    }
    text = ctl(task, "show-ddl-state").stdout
    for part, column in zip(("source", "schema", "table"), names, strict=True):
        assert re.search(rf"^{column} +added by shardmerge \(extract: {part}\)$", text, re.M), text
    assert "dropped" not in text and "missing here" not in text, text
    assert all(re.search(rf"^{re.escape(str(task.shard_id(s)))} += joined", text, re.M) for s in task.shards)

    first = task.shards[0]
    task.sql(first, "ALTER TABLE {t} ADD COLUMN c INT NULL")
    task.wait_for(lambda: ctl_json(task, "show-ddl-state")["columns"].get("c") == "partial", what="c joined")
    state = ctl_json(task, "show-ddl-state")
    assert {s: v["differences"] for s, v in state["shards"].items()} == {
        str(task.shard_id(s)): [] if s == first else ["c: missing here (partial in the join)"] for s in task.shards
    }
