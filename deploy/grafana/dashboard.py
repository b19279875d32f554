"""The Grafana dashboard of shardmerge's metrics, written as code: deploy/grafana/shardmerge.json
is this module's output (`make dashboard`, or `python -m deploy.grafana.dashboard --write`), and
a test checks the two are the same and that every metric a panel asks for is one a daemon
exports. What each metric means: docs/operations/monitoring.md.

The panels ask Prometheus through a datasource variable (chosen at import) and filter by the
scrape job (`job`, one per task where several tasks share a Prometheus)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

OUT = Path(__file__).with_name("shardmerge.json")
JOB = 'job=~"$job"'  # every selector's filter
RATE = "[$__rate_interval]"
WIDTH = 24  # Grafana's grid
PANEL_WIDTH, PANEL_HEIGHT = 8, 8
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
TIMESERIES_OPTIONS = {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}}
STAT_OPTIONS = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class Panel:
    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str = "short"
    kind: str = "timeseries"  # or stat


@dataclass(frozen=True)
class Row:
    title: str
    panels: tuple[Panel, ...]


def sel(metric: str, matchers: str = "") -> str:
    """A selector of `metric` in the chosen job (`matchers`: more, as PromQL writes them)."""
    return f"{metric}{{{JOB}{', ' + matchers if matchers else ''}}}"


def rate(metric: str, by: str) -> str:
    """Per second, summed by the labels `by`."""
    return f"sum by ({by}) (rate({sel(metric)}{RATE}))"


def increase(metric: str, by: str) -> str:
    """Per interval of the graph (events too rare for a rate), summed by the labels `by`."""
    return f"sum by ({by}) (increase({sel(metric)}{RATE}))"


def latest(metric: str, by: str) -> str:
    """A gauge, the largest of its series by the labels `by` (one a daemon: the active's)."""
    return f"max by ({by}) ({sel(metric)})"


def quantiles(metric: str, *qs: float) -> tuple[Query, ...]:
    buckets = f"sum by (le) (rate({sel(metric + '_bucket')}{RATE}))"
    return tuple(Query(f"histogram_quantile({q}, {buckets})", f"p{round(q * 100)}") for q in qs)


LIMIT = sel("shardmerge_park_limit_bytes")

ROWS = (
    Row(
        "Sources",
        (
            Panel(
                "Lag per source",
                "Seconds since the last event read was written (0 while the source's heartbeat says it "
                "is read to the end). Alert: ShardmergeSourceLagging.",
                (Query(latest("shardmerge_source_lag_seconds", "source"), "{{source}}"),),
                unit="s",
            ),
            Panel(
                "Binlog bytes behind",
                "Bytes of each source's binlog past where it is read, to the end its server last said.",
                (Query(latest("shardmerge_source_behind_bytes", "source"), "{{source}}"),),
                unit="bytes",
            ),
            Panel(
                "Transactions behind",
                "Transactions each source's server wrote past the GTID position read (MariaDB).",
                (Query(latest("shardmerge_source_behind_transactions", "source"), "{{source}}"),),
            ),
            Panel(
                "Events read/s",
                "Events read from each source's binlog per second.",
                (Query(rate("shardmerge_source_events_read_total", "source"), "{{source}}"),),
                unit="ops",
            ),
            Panel(
                "Sources connected",
                "1 while a source's binlog stream is connected; paused by the operator: 1 in the second.",
                (
                    Query(sel("shardmerge_source_connected"), "{{source}} connected"),
                    Query(sel("shardmerge_source_paused"), "{{source}} paused"),
                ),
            ),
            Panel(
                "Reconnects",
                "Connections lost and tried again after a backoff, per server (a source, or downstream).",
                (Query(increase("shardmerge_reconnects_total", "server"), "{{server}}"),),
            ),
        ),
    ),
    Row(
        "Applying",
        (
            Panel(
                "Rows/s per target",
                "Rows inserted, updated or deleted downstream per second, per target table.",
                (Query(rate("shardmerge_rows_applied_total", "table"), "{{table}}"),),
                unit="rows/s",
            ),
            Panel(
                "Batch latency",
                "Time to apply one batch downstream: quantiles of shardmerge_batch_seconds.",
                quantiles("shardmerge_batch_seconds", 0.5, 0.9, 0.99),
                unit="s",
            ),
            Panel(
                "Queue depth",
                "Batches waiting per applier partition.",
                (Query(latest("shardmerge_queue_depth", "partition"), "partition {{partition}}"),),
            ),
            Panel(
                "Retries",
                "Work tried again after an error a retry cures, per stage and server error number.",
                (Query(increase("shardmerge_retries_total", "stage, error"), "{{stage}} {{error}}"),),
            ),
            Panel(
                "Dead-letter rows",
                "Rows the downstream refused, put in the dead-letter table (on_row_error: skip).",
                (Query(increase("shardmerge_dead_letter_rows_total", "table"), "{{table}}"),),
            ),
            Panel(
                "Validation",
                "Rows continuous validation read back per second: validated, or failed (still differing "
                "after validator.error_delay; alert ShardmergeValidationFailed); and those pending.",
                (
                    Query(rate("shardmerge_validator_rows_total", "target, result"), "{{target}} {{result}}"),
                    Query(sel("shardmerge_validator_pending_rows"), "{{target}} pending"),
                ),
            ),
        ),
    ),
    Row(
        "Pauses and DDL",
        (
            Panel(
                "Paused shards",
                "Shards whose rows wait, and shards whose DDL is blocked, per target. Alert: "
                "ShardmergeShardPaused; `shardctl query-status` says why and the way out.",
                (
                    Query(f"sum by (target) ({sel('shardmerge_paused_shards')})", "{{target}} paused"),
                    Query(f"sum by (target) ({sel('shardmerge_blocked_shards')})", "{{target}} blocked"),
                ),
            ),
            Panel(
                "Parked bytes",
                "Bytes (compressed) each paused shard's parked changes take in the meta schema.",
                (Query(latest("shardmerge_parked_bytes", "shard"), "{{shard}}"),),
                unit="bytes",
            ),
            Panel(
                "Parks against park_limit",
                "Each paused shard's parked bytes as a share of options.park_limit: past 1 it holds its "
                "source's binlog. Alert: ShardmergeParkNearLimit.",
                (Query(f"max by (shard) ({sel('shardmerge_parked_bytes')} / {LIMIT})", "{{shard}}"),),
                unit="percentunit",
            ),
            Panel(
                "DDL decisions",
                "Coordinator decisions on shard DDLs, per target and result.",
                (
                    Query(
                        increase("shardmerge_ddl_decisions_total", "target, result"),
                        "{{target}} {{result}}",
                    ),
                ),
            ),
            Panel(
                "Journal entries",
                "Downstream DDL journal entries held (one the downstream refused and those after it) and "
                "refusals. Alert: ShardmergeJournalEntryRefused; `shardctl journal retry|skip`.",
                (
                    Query(latest("shardmerge_journal_entries_held", "target"), "{{target}} held"),
                    Query(
                        increase("shardmerge_journal_entries_refused_total", "target"),
                        "{{target}} refused",
                    ),
                ),
            ),
            Panel(
                "Dropped row events",
                "Row events a worker could not read, per shard and why (unexplained: never expected).",
                (Query(increase("shardmerge_dropped_row_events_total", "shard, why"), "{{shard}} {{why}}"),),
            ),
        ),
    ),
    Row(
        "Daemons",
        (
            Panel(
                "Lease holder",
                "The daemon running the task, with its lease epoch (a takeover raises it). Alert: "
                "ShardmergeNoLeaseHolder.",
                (Query(latest("shardmerge_active_daemon", "daemon"), "{{daemon}}"),),
                kind="stat",
            ),
            Panel(
                "Daemons by role",
                "The task's daemons answering, active and standby. Alert: ShardmergeStandbyMissing.",
                (Query(f"count by (task, role) ({sel('shardmerge_daemon_role')})", "{{task}} {{role}}"),),
            ),
        ),
    ),
)


def _panel(panel: Panel, pid: int, x: int, y: int) -> dict:
    targets = [
        {"refId": chr(ord("A") + n), "datasource": DATASOURCE, "expr": q.expr, "legendFormat": q.legend}
        for n, q in enumerate(panel.queries)
    ]
    out = {
        "id": pid,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": PANEL_HEIGHT, "w": PANEL_WIDTH, "x": x, "y": y},
        "targets": targets,
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
    }
    out["options"] = STAT_OPTIONS if panel.kind == "stat" else TIMESERIES_OPTIONS
    return out


def _variables() -> list[dict]:
    return [
        {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus"},
        {
            "name": "job",
            "label": "Job",
            "type": "query",
            "datasource": DATASOURCE,
            "query": {"query": "label_values(shardmerge_daemon_role, job)", "refId": "job"},
            "definition": "label_values(shardmerge_daemon_role, job)",
            "includeAll": True,
            "multi": True,
            "refresh": 2,  # (on time range change: a new task's job shows)
            "current": {"text": "All", "value": "$__all"},
        },
    ]


def dashboard() -> dict:
    """The dashboard as Grafana's JSON model: a row panel per `Row`, its panels three a line."""
    panels, pid, y = [], 1, 0
    for row in ROWS:
        panels.append(
            {
                "id": pid,
                "type": "row",
                "title": row.title,
                "collapsed": False,
                "panels": [],
                "gridPos": {"h": 1, "w": WIDTH, "x": 0, "y": y},
            }
        )
        pid, y = pid + 1, y + 1
        for n, panel in enumerate(row.panels):
            x = (n * PANEL_WIDTH) % WIDTH
            if n and x == 0:
                y += PANEL_HEIGHT
            panels.append(_panel(panel, pid, x, y))
            pid += 1
        y += PANEL_HEIGHT
    return {
        "uid": "shardmerge",
        "title": "shardmerge",
        "description": "Replication of merged shards: sources, applying, pauses and DDL, daemons.",
        "tags": ["shardmerge"],
        "editable": True,
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": _variables()},
        "panels": panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


def expressions(model: dict) -> list[str]:
    """Every PromQL expression of a dashboard's panels (its rows' panels too)."""
    out = []
    for panel in model["panels"]:
        for inner in [panel, *panel.get("panels", [])]:
            out += [t["expr"] for t in inner.get("targets", [])]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate shardmerge's Grafana dashboard (JSON).")
    parser.add_argument("--write", action="store_true", help=f"write it to {OUT} (else: standard output)")
    args = parser.parse_args(argv)
    if args.write:
        OUT.write_text(render())
        print(f"wrote {OUT}")
    else:
        sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
