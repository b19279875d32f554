"""What the applier counts (`Tally`): rows and row events committed, downstream connections
lost, retries and dead letters, for query-status and the metrics."""

from __future__ import annotations

import threading
from collections import defaultdict

from replicator.metrics import Metrics
from replicator.source.messages import Change, RowEvent


class Tally:
    """Threads: the partitions' threads count; the daemon's thread reads the counters
    (query-status). The counters change under `_lock`; the metrics keep their own."""

    def __init__(self, metrics: Metrics | None):
        self.metrics = metrics
        self.applied = 0  # rows committed downstream (an update moving its key: two)
        self.applied_events = 0  # row events among them, applied as the binlog holds them
        self.reconnects = 0  # connections lost and tried again
        self._lock = threading.Lock()

    def committed(self, applied: list[Change | RowEvent]) -> None:
        """What a transaction committed: its rows (a change's one; a row event's, which the
        worker counted), and the row events among them."""
        rows: dict[tuple[str, str], int] = defaultdict(int)
        events: dict[tuple[str, str], int] = defaultdict(int)
        event_rows: dict[tuple[str, str], int] = defaultdict(int)
        shards: dict[tuple[str, str], int] = defaultdict(int)
        for change in applied:
            n = change.rows if isinstance(change, RowEvent) else 1
            rows[change.shard.source, change.target] += n
            shards[str(change.shard), change.target] += n
            if isinstance(change, RowEvent):
                events[change.shard.source, change.target] += 1
                event_rows[change.shard.source, change.target] += n
        with self._lock:
            self.applied += sum(rows.values())
            self.applied_events += sum(events.values())
        if self.metrics is None:
            return
        for (source, target), n in rows.items():
            self.metrics.rows_applied.inc(source, target, amount=n)
        for (source, target), n in events.items():
            self.metrics.row_events_applied.inc(source, target, amount=n)
            self.metrics.row_event_rows.inc(source, target, amount=event_rows[source, target])
        for (shard, target), n in shards.items():
            self.metrics.shard_rows.inc(shard, target, amount=n)

    def lost_connection(self) -> None:
        with self._lock:
            self.reconnects += 1
        if self.metrics is not None:
            self.metrics.reconnects.inc("downstream")

    def retried(self, kind: str) -> None:
        if self.metrics is not None:
            self.metrics.retries.inc("rows", kind)

    def batch_took(self, seconds: float) -> None:
        if self.metrics is not None:
            self.metrics.batch_seconds.observe(seconds)

    def dead_letter(self, shard: str, target: str) -> None:
        if self.metrics is not None:
            self.metrics.dead_letters.inc(shard, target)
