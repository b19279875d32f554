"""What the applier counts of each committed transaction (`replicator.apply.tally.Tally`):
rows per source and table, per shard, and the row events among them, in its counters and
the daemon's metrics."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from replicator.apply.tally import Tally
from replicator.metrics import Metrics
from replicator.shard_id import ShardId
from replicator.source.messages import Change, RowEvent

SHARDS = (ShardId("s1", "db", "t1"), ShardId("s1", "db", "t2"), ShardId("s2", "db", "t1"))
TARGETS = ("down.a", "down.b")


def row(shard: ShardId, target: str) -> Change:
    return Change((1, 4, 0), shard, target, "I", ("id",), ("1",))


def event(shard: ShardId, target: str, rows: int) -> RowEvent:
    return RowEvent((1, 4, 1), shard, target, b"", b"", None, None, None, rows)


items = st.one_of(
    st.builds(row, st.sampled_from(SHARDS), st.sampled_from(TARGETS)),
    st.builds(event, st.sampled_from(SHARDS), st.sampled_from(TARGETS), st.integers(1, 50)),
)


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


@given(st.lists(st.lists(items, max_size=30), max_size=4))
def test_rows_and_events_are_counted_per_source_table_and_shard(transactions):
    metrics = Metrics()
    tally = Tally(metrics)
    for applied in transactions:
        tally.committed(applied)
    every = [c for applied in transactions for c in applied]

    def rows(c) -> int:
        return c.rows if isinstance(c, RowEvent) else 1

    assert tally.applied == sum(rows(c) for c in every)
    assert tally.applied_events == sum(isinstance(c, RowEvent) for c in every)
    for target in TARGETS:
        for source in ("s1", "s2"):
            mine = [c for c in every if c.shard.source == source and c.target == target]
            labels = {"source": source, "table": target}
            assert sample(metrics, "shardmerge_rows_applied_total", **labels) == sum(rows(c) for c in mine)
            events = [c for c in mine if isinstance(c, RowEvent)]
            assert sample(metrics, "shardmerge_row_events_applied_total", **labels) == len(events)
            assert sample(metrics, "shardmerge_row_event_rows_applied_total", **labels) == sum(c.rows for c in events)
        for shard in SHARDS:
            mine = [c for c in every if c.shard is shard and c.target == target]
            labels = {"shard": str(shard), "table": target}
            assert sample(metrics, "shardmerge_shard_changes_applied_total", **labels) == sum(rows(c) for c in mine)
