"""The daemon's metrics, through `prometheus_client`: each daemon has a registry of its
own (tests run several in one process), rendered in the Prometheus text format. The
labelled objects are created where they are first used; `set_all` replaces every
sample of a gauge whose values are read when the metrics are asked for."""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

disable_created_metrics()  # no `_created` series beside every counter: nobody here reads them
ROLE_HELP = "1 for each daemon of a task: its role, active (holds the lease) or standby (waits for it)"
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class LabelledCounter:
    """A counter incremented with its label values in order."""

    def __init__(self, counter: Counter):
        self._counter = counter

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        (self._counter.labels(*labels) if labels else self._counter).inc(amount)


class SnapshotGauge:
    """A gauge set as a whole when the metrics are read."""

    def __init__(self, gauge: Gauge):
        self._gauge = gauge

    def set_all(self, values: dict[tuple[str, ...], float]) -> None:
        self._gauge.clear()
        for labels, value in values.items():
            self._gauge.labels(*labels).set(value)


class Metrics:
    """The daemon's metrics."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        reg = self.registry

        def counter(name: str, help_text: str, labels: tuple[str, ...]) -> LabelledCounter:
            return LabelledCounter(Counter(name, help_text, labels, registry=reg))

        def gauge(name: str, help_text: str, labels: tuple[str, ...]) -> SnapshotGauge:
            return SnapshotGauge(Gauge(name, help_text, labels, registry=reg))

        self.rows_applied = counter(
            "shardmerge_rows_applied",
            "Rows inserted, updated or deleted downstream, as statements or in row events (an update "
            "that moves its key: two, a delete and an insert)",
            ("source", "table"),
        )
        self.row_events_applied = counter(
            "shardmerge_row_events_applied",
            "Row events applied downstream as the binlog holds them (BINLOG statements); their rows "
            "are in shardmerge_rows_applied",
            ("source", "table"),
        )
        self.row_event_rows = counter(
            "shardmerge_row_event_rows_applied",
            "Rows of the row events applied as the binlog holds them (the rest of "
            "shardmerge_rows_applied went as statements)",
            ("source", "table"),
        )
        self.shard_rows = counter(
            "shardmerge_shard_changes_applied",
            "Rows of each shard inserted, updated or deleted downstream (as shardmerge_rows_applied)",
            ("shard", "table"),
        )
        self.dead_letters = counter(
            "shardmerge_dead_letter_rows",
            "Rows the downstream refused, put in the dead-letter table (on_row_error: skip)",
            ("shard", "table"),
        )
        self.filtered_events = counter(
            "shardmerge_filtered_events",
            "Events an event filter ignored (filters.events), per kind (insert, update, delete, "
            "truncate table, drop table, add index, drop index, drop column, sql)",
            ("shard", "kind"),
        )
        self.filtered_rows = counter(
            "shardmerge_filtered_rows",
            "Row changes a row filter dropped for their values (filters.rows), per kind (insert, "
            "update, delete)",
            ("shard", "kind"),
        )
        self.dropped_events = counter(
            "shardmerge_dropped_row_events",
            "Row events a worker could not read (their table's schema not known there), per shard and "
            "what they are: paused (of a paused shard, read again when it resumes), had (read again), "
            "unexplained (of a running shard: it pauses there; never expected)",
            ("shard", "why"),
        )
        self.retries = counter(
            "shardmerge_retries",
            "Work tried again after an error a retry cures (replicator/transient.py: a connection lost "
            "or killed, a server restarting, a lock wait timeout, ...), per stage and error (the "
            "server's error number)",
            ("stage", "error"),
        )
        self.validated_rows = counter(
            "shardmerge_validator_rows",
            "Rows continuous validation read back from downstream: validated (as their events say) or "
            "failed (still differing after validator.error_delay)",
            ("target", "result"),
        )
        self.validator_pending = gauge(
            "shardmerge_validator_pending_rows", "Rows committed and not yet validated", ("target",)
        )
        self.ddl_decisions = counter(
            "shardmerge_ddl_decisions", "Coordinator decisions on shard DDLs", ("target", "result")
        )
        self.reconnects = counter(
            "shardmerge_reconnects",
            "Connections lost and tried again after a backoff, per server (a source id, or downstream)",
            ("server",),
        )
        self.batch_seconds = Histogram(
            "shardmerge_batch_seconds",
            "Time to apply one batch downstream",
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
        self.lag = gauge(
            "shardmerge_source_lag_seconds",
            "Seconds since the last event read was written; 0 while the source's heartbeat says "
            "it is read to the end",
            ("source",),
        )
        self.queue_depth = gauge(
            "shardmerge_queue_depth", "Batches waiting per applier partition", ("partition",)
        )
        self.blocked = gauge("shardmerge_blocked_shards", "Shards whose DDL is blocked", ("target",))
        self.paused_shards = gauge("shardmerge_paused_shards", "Shards whose rows wait", ("target",))
        self.paused_sources = gauge("shardmerge_source_paused", "1 while a source is paused", ("source",))
        self.connected = gauge(
            "shardmerge_source_connected", "1 while a source's binlog stream is connected", ("source",)
        )
        self.parked_rows = gauge(
            "shardmerge_parked_rows", "Row changes a paused shard keeps in the meta schema", ("shard",)
        )
        self.parked_bytes = gauge(
            "shardmerge_parked_bytes", "Bytes (compressed) a paused shard's parked changes take", ("shard",)
        )
        self.park_limit = gauge(
            "shardmerge_park_limit_bytes",
            "Bytes a paused shard's park may take (options.park_limit), beside each shard of "
            "shardmerge_parked_bytes: past it the shard holds its source's binlog",
            ("shard",),
        )
        self.active = gauge(
            "shardmerge_active_daemon",
            "The lease epoch of the daemon running the task (its standbys: shardmerge_daemon_role)",
            ("daemon",),
        )
        self.role = gauge("shardmerge_daemon_role", ROLE_HELP, ("task", "daemon", "role"))
        self.member = gauge(
            "shardmerge_member",
            "1 for a daemon run as a member of its task (run --member): its name, epoch, and role "
            "(coordinator: holds the task's lease and decides its DDL; member); its other metrics are "
            "of its own sources",
            ("task", "member", "epoch", "role"),
        )
        self.journal_refused = counter(
            "shardmerge_journal_entries_refused",
            "Journal entries of downstream DDL the downstream refused (each held with those after it "
            "till `shardctl journal retry|skip`)",
            ("target",),
        )
        self.journal_held = gauge(
            "shardmerge_journal_entries_held",
            "Journal entries of downstream DDL held now: one the downstream refused and those after it, "
            "as the shards paused on them say",
            ("target",),
        )
        self.events_read = counter(
            "shardmerge_source_events_read",
            "Events read from a source's binlog and handed to the daemon (row changes and row events; "
            "query-status's received)",
            ("source",),
        )
        self.behind_bytes = gauge(
            "shardmerge_source_behind_bytes",
            "Bytes of a source's binlog past where it is read, to the end its server last said (asked "
            "every few seconds)",
            ("source",),
        )
        self.behind_transactions = gauge(
            "shardmerge_source_behind_transactions",
            "Transactions a source's server wrote past the GTID position read (MariaDB GTIDs)",
            ("source",),
        )

    def render(self) -> str:
        return generate_latest(self.registry).decode()


def standby_metrics(task: str, daemon: str) -> str:
    """What a standby serves at /metrics (it runs nothing else): that it waits, under its name."""
    registry = CollectorRegistry(auto_describe=True)
    Gauge("shardmerge_standby", "1: this daemon waits as a standby", registry=registry).set(1)
    role = Gauge("shardmerge_daemon_role", ROLE_HELP, ("task", "daemon", "role"), registry=registry)
    role.labels(task, daemon, "standby").set(1)
    return generate_latest(registry).decode()
