"""The Grafana dashboard (deploy/grafana/shardmerge.json) is what its generator writes
(deploy/grafana/dashboard.py), laid out on Grafana's grid, each panel's queries readable
PromQL. (That every metric they name is one a daemon exports: tests/daemon/test_monitoring.py.)"""

from __future__ import annotations

import json

from deploy.grafana import dashboard
from tests.promql_names import metric_names

REGENERATE = "make dashboard (or: .venv/bin/python -m deploy.grafana.dashboard --write)"


def test_the_committed_dashboard_is_the_generators_output():
    committed = dashboard.OUT.read_text()
    assert committed == dashboard.render(), (
        f"{dashboard.OUT} is not what deploy/grafana/dashboard.py generates: run {REGENERATE} and commit it"
    )


def test_the_panels_sit_on_the_grid_without_overlapping():
    model = json.loads(dashboard.render())
    panels = model["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    taken: set[tuple[int, int]] = set()
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= dashboard.WIDTH, panel["title"]
        cells = {(pos["x"] + dx, pos["y"] + dy) for dx in range(pos["w"]) for dy in range(pos["h"])}
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells


def test_every_query_names_metrics_and_has_its_own_ref_id():
    model = json.loads(dashboard.render())
    for panel in model["panels"]:
        if panel["type"] == "row":
            continue
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(set(refs)) == len(refs), panel["title"]
        for target in panel["targets"]:
            assert metric_names(target["expr"]), f"{panel['title']}: {target['expr']} names no metric"
            assert target["datasource"] == dashboard.DATASOURCE


def test_it_shows_what_operators_watch():
    """Lag, bytes behind, rows/s, batch latency, pauses, parks, DDL decisions and journal
    entries, retries, the lease holder: each by the metric that says it."""
    used = set().union(*map(metric_names, dashboard.expressions(json.loads(dashboard.render()))))
    assert {
        "shardmerge_source_lag_seconds",
        "shardmerge_source_behind_bytes",
        "shardmerge_rows_applied_total",
        "shardmerge_batch_seconds_bucket",
        "shardmerge_paused_shards",
        "shardmerge_parked_bytes",
        "shardmerge_ddl_decisions_total",
        "shardmerge_journal_entries_held",
        "shardmerge_retries_total",
        "shardmerge_active_daemon",
    } <= used


def test_its_variables_are_a_datasource_and_the_job():
    variables = {v["name"]: v for v in json.loads(dashboard.render())["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert all('job=~"$job"' in expr for expr in dashboard.expressions(json.loads(dashboard.render())))
