"""The alert rules in a real Prometheus (Debian's `prometheus`, on a free port, in a folder of
its own) scraping a live daemon every second: a shard paused by a conflicting DDL makes
ShardmergeShardPaused fire, and the shard resumed ends it (issue 73)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.replication import ReplicationTask, admin_task, free_port
from tests.unit.test_alert_rules import RULES

pytestmark = pytest.mark.timeout(300)

CREATE = "CREATE TABLE {table} (id INT NOT NULL PRIMARY KEY, a INT NULL, b FLOAT NULL)"
BLOCKING = "ALTER TABLE {t} ALTER COLUMN a SET DEFAULT 1"  # its default against the others' NULL
GIVING_WAY = "ALTER TABLE {t} ALTER COLUMN a SET DEFAULT NULL"
ALERT = "ShardmergeShardPaused"
DEADLINE = 120.0  # seconds: generous on two busy cores; the assertions are that it fires and ends


class Prometheus:
    """A Prometheus server of the test's own, with the rules given, scraping `targets`."""

    def __init__(self, folder: Path, rules: dict, targets: list[str]):
        binary = shutil.which("prometheus")
        assert binary, "prometheus not found: `make setup` installs Debian's prometheus package"
        folder.mkdir()
        (folder / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": ["rules.yml"],
            "scrape_configs": [{"job_name": "shardmerge", "static_configs": [{"targets": targets}]}],
        }
        (folder / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        self.addr = f"http://127.0.0.1:{free_port()}"
        self.log = folder / "prometheus.log"
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address={self.addr.removeprefix('http://')}",
            ],
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            cwd=folder,
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, f"prometheus ended:\n{self.log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(self.addr + "/-/ready", timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError):
                pass
            assert time.monotonic() < deadline, f"prometheus never ready:\n{self.log.read_text()[-3000:]}"
            time.sleep(0.3)

    def api(self, path: str, **params: str) -> dict:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.addr}/api/v1/{path}{query}", timeout=10) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    def alerts(self, name: str) -> list[dict]:
        return [a for a in self.api("alerts")["alerts"] if a["labels"]["alertname"] == name]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)


def rules_firing_at_once(alert: str) -> dict:
    """The real rules file, the one alert's `for` set to 0s so it fires within the test (that
    it waits its `for` first: the promtool tests, deploy/prometheus/shardmerge-alerts.test.yml)."""
    rules = yaml.safe_load(RULES.read_text())
    (rule,) = [r for group in rules["groups"] for r in group["rules"] if r.get("alert") == alert]
    rule["for"] = "0s"
    return rules


@pytest.fixture
def task(sandbox, tmp_path) -> Iterator[ReplicationTask]:
    t = admin_task(sandbox, tmp_path, CREATE)
    yield t
    if t.process is not None:
        t.stop()
    t.cleanup()


@pytest.fixture
def prometheus(task, tmp_path) -> Iterator[Prometheus]:
    server = Prometheus(tmp_path / "prometheus", rules_firing_at_once(ALERT), [task.addr.removeprefix("http://")])
    yield server
    server.stop()


def wait_until(check, what: str, prometheus: Prometheus):
    deadline = time.monotonic() + DEADLINE
    while not (found := check()):
        assert time.monotonic() < deadline, (
            f"{what}: not within {DEADLINE:.0f}s; alerts {prometheus.api('alerts')}\n"
            f"{prometheus.log.read_text()[-2000:]}"
        )
        time.sleep(1)
    return found


def test_a_shard_paused_by_a_conflict_fires_the_paused_alert_and_its_resume_ends_it(task, prometheus):
    target = f"{task.target_db}.orders"
    task.start()
    shard = task.shards[0]
    task.sql(shard, "INSERT INTO {t} VALUES (1, 1, 0.5)")
    task.wait_in_sync()

    def scraped_running() -> bool:
        result = prometheus.api("query", query=f'shardmerge_paused_shards{{target="{target}"}}')["result"]
        return bool(result) and result[0]["value"][1] == "0"

    wait_until(scraped_running, "the daemon scraped, no shard paused", prometheus)
    assert prometheus.alerts(ALERT) == []  # (its rules evaluated every second, the shard running)

    task.sql(shard, BLOCKING)
    task.wait_for(lambda: str(task.shard_id(shard)) in status(task)["paused"], what="the shard to pause")

    def firing() -> list[dict]:
        return [a for a in prometheus.alerts(ALERT) if a["state"] == "firing"]

    (alert,) = wait_until(firing, f"{ALERT} firing", prometheus)
    assert alert["labels"]["target"] == target and alert["labels"]["severity"] == "warning"
    assert alert["annotations"]["summary"] == f"1 shard(s) of {target} paused for over 10 minutes"
    assert "`shardctl query-status`" in alert["annotations"]["description"]

    task.sql(shard, GIVING_WAY)  # it joins the others again: the shard resumes by itself
    wait_until(lambda: prometheus.alerts(ALERT) == [], f"{ALERT} ended once the shard resumed", prometheus)


def status(task: ReplicationTask) -> dict:
    with urllib.request.urlopen(task.addr + "/api/v1/status", timeout=30) as response:
        return json.loads(response.read())
