"""The daemon's side of the applier (`Buffers`): each change into its partition's buffer,
and a full buffer (or every buffer, at a flush) to its partition as a batch."""

from __future__ import annotations

import queue
from collections import defaultdict
from collections.abc import Callable, Mapping

from replicator.apply.batch import Batch
from replicator.apply.checkpoints import Checkpoints
from replicator.apply.partitioner import Partitioner
from replicator.apply.pending import Pending
from replicator.apply.target import TargetInfo
from replicator.shard_id import ShardId
from replicator.source.messages import Change, RowEvent
from replicator.state.positions import ChangeId


class Buffers:
    """Threads: the daemon's thread alone, which owns the buffers and their counts per
    shard (`buffered`, which `Pending` reads for other threads); it hands each batch over
    through its partition's queue."""

    def __init__(
        self,
        partitioner: Partitioner,
        checkpoints: Checkpoints,
        pending: Pending,
        buffered: dict[ShardId, int],
        queues: list[queue.Queue[Batch | None]],
        targets: Mapping[str, TargetInfo],
        batch_size: int,
        waiting: Callable[[], None] | None,
    ):
        self.partitioner = partitioner
        self.checkpoints = checkpoints
        self.pending = pending
        self.buffered = buffered  # shard -> changes in buffers
        self.queues = queues
        self.targets = targets
        self.batch_size = batch_size
        # called while a full partition queue holds the daemon's thread (`_put`)
        self.waiting = waiting
        self.by_part: list[list[Change | RowEvent]] = [[] for _ in queues]  # partition -> its buffer

    def submit(self, change: Change | RowEvent) -> None:
        """Route one change to its partition; split an update that moves its key.
        Read again, a split change goes only where it is not applied yet: its other
        half may have committed, with later changes of its partition to that key
        (skipped as applied), which the half applied again would undo."""
        if isinstance(change, RowEvent):
            self._add(self.partitioner.source_part(change.shard), change)
            return
        halves = self.partitioner.halves(change)
        for n, (part, half) in enumerate(halves):
            if len(halves) == 1 or not self.checkpoints.applied_in(change, part):
                # in one partition both halves go in one batch: the checkpoint of a batch
                # holding only the delete would count the insert as applied too
                self._add(part, half, flush=n == len(halves) - 1 or part != halves[-1][0])

    def _add(self, part: int, change: Change | RowEvent, flush: bool = True) -> None:
        buffer = self.by_part[part]
        buffer.append(change)
        self.buffered[change.shard] += 1
        if flush and len(buffer) >= self.batch_size:
            self.flush(part)

    def flush_idle(self) -> None:
        """Send the buffered changes of each partition with no batch waiting in its queue (the
        daemon's timer): a partial batch behind a waiting one would only wait there, and left
        to grow it goes as one statement of each kind, not several (a catch-up's batches grow
        to what arrives while one commits; sysbench: a downstream statement per 160 rows)."""
        for p, waiting in enumerate(self.queues):
            if self.by_part[p] and waiting.empty():
                self.flush(p)

    def flush(self, part: int | None = None) -> None:
        """Send buffered changes to their partitions."""
        for p in range(len(self.by_part)) if part is None else [part]:
            changes = self.by_part[p]
            if not changes:
                continue
            self.by_part[p] = []
            counts: dict[ShardId, int] = defaultdict(int)
            # the smallest id of each source: a buffer is not in id order (changes that
            # waited behind their shard's DDL come after newer ones of other shards)
            lows: dict[ShardId, ChangeId] = {}
            for c in changes:
                counts[c.shard] += 1
                low = lows.get(c.shard)
                if low is None or c.id < low:
                    lows[c.shard] = c.id
            first: dict[str, ChangeId] = {}
            for shard, low in lows.items():
                source = shard.source
                if source not in first or low < first[source]:
                    first[source] = low
            seq = self.pending.sent(counts, first)  # counted in flight before it leaves the buffers
            for shard, n in counts.items():
                self.buffered[shard] -= n
                if not self.buffered[shard]:
                    del self.buffered[shard]
            majors = {t: self.targets[t].major for t in {c.target for c in changes}}
            self._put(p, Batch(p, changes, majors, seq))

    def _put(self, part: int, batch: Batch) -> None:
        # the queues are bounded (back pressure on the workers); a dead partition
        # would block the daemon forever on a full one
        while True:
            self.pending.check()
            try:
                self.queues[part].put(batch, timeout=0.2)
                return
            except queue.Full:
                if self.waiting is not None:
                    self.waiting()  # (status read meanwhile: the downstream may be what it waits on)
                continue

    def held(self, source: str) -> list[ChangeId]:
        """The ids of the source's changes in the buffers."""
        return [c.id for b in self.by_part for c in b if c.shard.source == source]
