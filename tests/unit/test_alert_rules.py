"""The Prometheus alert rules (deploy/prometheus/shardmerge-alerts.yml) as Prometheus' own
`promtool` reads them: the rules are valid, and their unit tests (shardmerge-alerts.test.yml)
pass; every alert has tests where it fires and where it does not, and says what to do.
(That the metrics they name exist: tests/daemon/test_monitoring.py, on a live daemon.)"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from tests.replication import REPO

RULES = REPO / "deploy" / "prometheus" / "shardmerge-alerts.yml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "shardmerge-alerts.test.yml"


def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool not found: `make setup` installs Debian's prometheus package, which has it"
    return found


def _run(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [promtool(), *map(str, args)], capture_output=True, text=True, cwd=RULES.parent, timeout=120
    )


def alerts() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def test_the_rules_are_valid():
    checked = _run("check", "rules", RULES)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in checked.stdout


def test_the_rules_pass_their_unit_tests():
    tested = _run("test", "rules", RULE_TESTS)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_alert_is_tested_firing_and_not_firing():
    cases = [
        case for test in yaml.safe_load(RULE_TESTS.read_text())["tests"] for case in test["alert_rule_test"]
    ]
    firing = {c["alertname"] for c in cases if c["exp_alerts"]}
    quiet = {c["alertname"] for c in cases if not c["exp_alerts"]}
    names = {a["alert"] for a in alerts()}
    assert names == firing == quiet


def test_every_alert_says_what_it_is_and_what_to_do():
    for alert in alerts():
        notes = alert["annotations"]
        assert notes["summary"] and notes["description"], alert["alert"]
        # the way out: a command, and the page of the monitoring docs that says more
        assert "`shardctl " in notes["description"] or "`shardmerge " in notes["description"], alert["alert"]
        assert f"docs/operations/monitoring.md#{alert['alert'].lower()}" in notes["description"], alert[
            "alert"
        ]
        assert alert["labels"]["severity"] in ("warning", "critical"), alert["alert"]
