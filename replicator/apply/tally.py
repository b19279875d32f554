"""What the applier counts (`Tally`): rows and row events committed, downstream connections
lost, retries and dead letters, for query-status and the metrics."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict

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
        worker counted), and the row events among them. Counted per (shard, target) at C speed,
        its texts made per shard (a text per change was most of this on OLTP's batches)."""
        counts = Counter([(c.shard, c.target) for c in applied])
        events: dict[tuple[str, str], int] = defaultdict(int)
        event_rows: dict[tuple[str, str], int] = defaultdict(int)
        for change in [c for c in applied if type(c) is RowEvent]:
            counts[change.shard, change.target] += change.rows - 1
            events[change.shard.source, change.target] += 1
            event_rows[change.shard.source, change.target] += change.rows
        with self._lock:
            self.applied += sum(counts.values())
            self.applied_events += sum(events.values())
        if self.metrics is None:
            return
        rows: dict[tuple[str, str], int] = defaultdict(int)
        for (shard, target), n in counts.items():
            rows[shard.source, target] += n
            self.metrics.shard_rows.inc(str(shard), target, amount=n)
        for (source, target), n in rows.items():
            self.metrics.rows_applied.inc(source, target, amount=n)
        for (source, target), n in events.items():
            self.metrics.row_events_applied.inc(source, target, amount=n)
            self.metrics.row_event_rows.inc(source, target, amount=event_rows[source, target])

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
