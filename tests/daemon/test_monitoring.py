"""What a live daemon exports at /metrics against what the monitoring asks of it (issue 73):
every metric the Grafana dashboard's panels and the Prometheus alert rules name is one the
daemon declares (deploy/grafana, deploy/prometheus); its role, by task and name, active and
standby; each source's events read and how far behind its binlog's end; and a journal entry
the downstream refused, counted and held till it is retried."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from deploy.grafana import dashboard
from tests.daemon.test_admin import ctl, ctl_json, refused_not_null
from tests.daemon.test_standby import Standby, lease
from tests.promql_names import exported_names, metric_names
from tests.replication import ReplicationTask, admin_task, free_port
from tests.unit.test_alert_rules import alerts

pytestmark = pytest.mark.timeout(300)

CREATE = "CREATE TABLE {table} (id INT NOT NULL PRIMARY KEY, a INT NULL, b FLOAT NULL)"


def scrape(addr: str) -> str:
    with urllib.request.urlopen(addr + "/metrics", timeout=30) as response:
        return response.read().decode()


def samples(text: str, name: str) -> dict[frozenset, float]:
    """The samples of series `name`, by their labels."""
    return {
        frozenset(s.labels.items()): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def by(label: str, found: dict[frozenset, float]) -> dict[str, float]:
    return {dict(labels)[label]: value for labels, value in found.items()}


def wait_for_metrics(addr: str, check: Callable[[str], bool], what: str, timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = scrape(addr)
        if check(text):
            return text
        assert time.monotonic() < deadline, f"the metrics never showed {what}:\n{text}"
        time.sleep(0.5)


@pytest.fixture
def task(sandbox, tmp_path):
    t = admin_task(sandbox, tmp_path, CREATE)
    yield t
    if t.process is not None:
        t.stop()
    t.cleanup()


def test_every_metric_the_dashboard_and_the_alerts_name_is_one_the_daemon_exports(task: ReplicationTask):
    task.start()
    for n, shard in enumerate(task.shards):
        task.sql(shard, "INSERT INTO {t} VALUES " + ",".join(f"({n * 100 + i}, {i}, 0.5)" for i in range(5)))
    task.wait_in_sync()
    exported = exported_names(scrape(task.addr))

    panels = {name for expr in dashboard.expressions(json.loads(dashboard.OUT.read_text())) for name in metric_names(expr)}
    assert panels and not panels - exported, f"the dashboard asks for metrics no daemon exports: {sorted(panels - exported)}"
    rules = {name for alert in alerts() for name in metric_names(alert["expr"])}
    assert rules and not rules - exported, f"alert rules name metrics no daemon exports: {sorted(rules - exported)}"


def test_its_role_events_read_and_how_far_behind_each_binlog_end(task: ReplicationTask):
    task.start()
    for n, shard in enumerate(task.shards):
        task.sql(shard, "INSERT INTO {t} VALUES " + ",".join(f"({n * 100 + i}, {i}, 0.5)" for i in range(5)))
    task.wait_in_sync()

    def read_to_the_end(text: str) -> bool:  # (the binlog ends are asked every few seconds)
        behind = samples(text, "shardmerge_source_behind_bytes"), samples(text, "shardmerge_source_behind_transactions")
        return all(by("source", found) == {"s1": 0.0, "s2": 0.0} for found in behind)

    text = wait_for_metrics(task.addr, read_to_the_end, "both sources read to their binlog's end")
    holder, _ = lease(task)
    role = samples(text, "shardmerge_daemon_role")
    assert role == {frozenset({("task", task.name), ("daemon", holder), ("role", "active")}): 1.0}
    status = ctl_json(task, "query-status")
    read = by("source", samples(text, "shardmerge_source_events_read_total"))
    assert read == {s: float(status["sources"][s]["received"]) for s in ("s1", "s2")}
    assert read["s1"] >= 10 and read["s2"] >= 10  # (each source: two shards of 5 rows)
    # (no paused shard: no park, and no limit beside one)
    assert not samples(text, "shardmerge_park_limit_bytes") and not samples(text, "shardmerge_parked_bytes")


def test_a_standby_exports_its_role_under_its_own_name(task: ReplicationTask):
    """A standby on the same machine: an admin port of its own (docs/operations/high-availability.md)."""
    task.start()
    port = free_port()
    config = Path(task.workdir) / "standby.yaml"
    config.write_text(task.config_path.read_text().replace(f"port: {task.addr.rsplit(':', 1)[1]}", f"port: {port}"))
    standby = Standby(task, config=config)
    try:
        standby.wait_for("standby: task", timeout=60)
        text = wait_for_metrics(f"http://127.0.0.1:{port}", lambda t: "shardmerge_daemon_role{" in t, "its role")
        ((labels, value),) = samples(text, "shardmerge_daemon_role").items()
        labels = dict(labels)
        holder, _ = lease(task)
        assert (labels["task"], labels["role"], value) == (task.name, "standby", 1.0)
        assert labels["daemon"] and labels["daemon"] != holder
        assert by("daemon", samples(scrape(task.addr), "shardmerge_daemon_role")) == {holder: 1.0}
        assert samples(text, "shardmerge_standby") == {frozenset(): 1.0}
        assert standby.stop() == 0
    finally:
        standby.kill()


def test_a_journal_entry_the_downstream_refused_is_counted_and_held_till_retried(task: ReplicationTask):
    refused_not_null(task)
    target = f"{task.target_db}.orders"

    def held(n: float) -> Callable[[str], bool]:
        return lambda text: by("target", samples(text, "shardmerge_journal_entries_held")).get(target) == n

    text = wait_for_metrics(task.addr, held(1.0), "the refused entry held")
    assert by("target", samples(text, "shardmerge_journal_entries_refused_total")) == {target: 1.0}
    (entry,) = ctl_json(task, "show-ddl-state")["pending_downstream_ddl"]

    task.sandbox.downstream.execute(f"DELETE FROM `{task.target_db}`.orders WHERE id = 9999")  # the fix
    result = ctl(task, "journal", "retry", "--seq", str(entry["seq"]))
    assert result.returncode == 0, result.stderr
    text = wait_for_metrics(task.addr, held(0.0), "no entry held once retried")
    assert by("target", samples(text, "shardmerge_journal_entries_refused_total")) == {target: 1.0}

