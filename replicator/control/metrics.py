"""Counters, gauges and histograms in the Prometheus text format (version 0.0.4).
Small on purpose: the daemon needs a handful of metrics and no client library."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _labels(names: tuple[str, ...], values: tuple[str, ...], extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class _Metric:
    kind = ""

    def __init__(self, name: str, help_text: str, labels: Iterable[str] = ()):
        self.name = name
        self.help = help_text
        self.label_names = tuple(labels)
        self.lock = threading.Lock()

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]


class Counter(_Metric):
    kind = "counter"

    def __init__(self, name: str, help_text: str, labels: Iterable[str] = ()):
        super().__init__(name, help_text, labels)
        self.values: dict[tuple[str, ...], float] = {}

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        with self.lock:
            self.values[labels] = self.values.get(labels, 0.0) + amount

    def render(self) -> list[str]:
        with self.lock:
            items = sorted(self.values.items())
        return self.header() + [f"{self.name}{_labels(self.label_names, k)} {v:g}" for k, v in items]


class Gauge(Counter):
    """Set when rendered: `collect` returns the current values by labels."""

    kind = "gauge"

    def set_all(self, values: dict[tuple[str, ...], float]) -> None:
        with self.lock:
            self.values = dict(values)


class Histogram(_Metric):
    kind = "histogram"

    def __init__(self, name: str, help_text: str, buckets: tuple[float, ...] = LATENCY_BUCKETS):
        super().__init__(name, help_text)
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        with self.lock:
            self.counts[bisect.bisect_left(self.buckets, value)] += 1
            self.sum += value

    def render(self) -> list[str]:
        with self.lock:
            counts, total = list(self.counts), self.sum
        lines, running = self.header(), 0
        for bound, count in zip((*self.buckets, float("inf")), counts, strict=True):
            running += count
            le = "+Inf" if bound == float("inf") else f"{bound:g}"
            lines.append(f'{self.name}_bucket{{le="{le}"}} {running}')
        lines += [f"{self.name}_sum {total:g}", f"{self.name}_count {running}"]
        return lines


class Metrics:
    """The daemon's metrics."""

    def __init__(self) -> None:
        self.rows_applied = Counter(
            "shardmerge_rows_applied_total",
            "Row changes applied downstream as statements",
            ("source", "table"),
        )
        self.row_events_applied = Counter(
            "shardmerge_row_events_applied_total",
            "Row events applied downstream as the binlog holds them (BINLOG statements)",
            ("source", "table"),
        )
        self.ddl_decisions = Counter(
            "shardmerge_ddl_decisions_total", "Coordinator decisions on shard DDLs", ("target", "result")
        )
        self.batch_seconds = Histogram("shardmerge_batch_seconds", "Time to apply one batch downstream")
        self.lag = Gauge(
            "shardmerge_source_lag_seconds", "Seconds since the last event read was written", ("source",)
        )
        self.queue_depth = Gauge(
            "shardmerge_queue_depth", "Batches waiting per applier partition", ("partition",)
        )
        self.blocked = Gauge("shardmerge_blocked_shards", "Shards whose rows wait", ("target",))
        self.paused_sources = Gauge("shardmerge_source_paused", "1 while a source is paused", ("source",))
        self.connected = Gauge(
            "shardmerge_source_connected", "1 while a source's binlog stream is connected", ("source",)
        )
        self.reconnects = Counter(
            "shardmerge_reconnects_total",
            "Connections lost and tried again after a backoff, per server (a source id, or downstream)",
            ("server",),
        )

    def render(self) -> str:
        metrics = (
            self.rows_applied,
            self.row_events_applied,
            self.ddl_decisions,
            self.batch_seconds,
            self.lag,
            self.queue_depth,
            self.blocked,
            self.paused_sources,
            self.connected,
            self.reconnects,
        )
        return "\n".join(line for m in metrics for line in m.render()) + "\n"
