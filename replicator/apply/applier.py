"""Writing changes downstream, exactly once, several connections at a time.

Changes are spread over partitions by a hash of the target key, so changes to one
key stay in order while unrelated keys are applied in parallel; or, where row
events are applied as the binlog holds them (`replicator.source.row_events`), by
source, so each source's changes, events and decoded rows alike, keep the binlog's
order, as a native replica keeps it. Each partition
commits a batch in one transaction together with, for every (shard, partition) in
it, the id of the last change applied: after a crash a change is applied again
only if its id is above that checkpoint, so nothing is lost or repeated. A row
event the server refuses (or that no longer fits its table) is applied as its
decoded rows instead, with the same checkpoint.

Every batch remembers the version of each target table it was built for; at
commit, under the table's schema lock, a batch built for an older major version
is rebuilt for the current table rather than committed as is (docs/design.md "Batches checked at commit").

`Applier` is what the daemon and the DDL executor use; its parts, one job each:

- `partitioner.Partitioner`: which partition a change goes to (key moves split);
- `buffers.Buffers`: the daemon's thread's buffers, and the batches they become;
- `pending.Pending`: what is routed and not committed (the DDL barrier, the watermark's input);
- `checkpoints.Checkpoints`: the checkpoints as this process knows them (`already_applied`);
- `drops.Drops`: the paused shards, whose changes are discarded;
- `partition.Partition`: a partition's thread and its retries;
- `commit.BatchCommit`: a batch's transaction; `row_refusals.RowRefusals`: a row refused;
- `tally.Tally`: what is counted, for query-status and the metrics.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping

from replicator.apply.buffers import Buffers
from replicator.apply.checkpoints import Checkpoints
from replicator.apply.commit import BatchCommit
from replicator.apply.drops import Drops
from replicator.apply.meta import Meta
from replicator.apply.partition import Partition
from replicator.apply.partitioner import Partitioner
from replicator.apply.pending import ApplierFailed, Pending
from replicator.apply.refused import Refused
from replicator.apply.row_refusals import RowRefusals
from replicator.apply.tally import Tally
from replicator.apply.target import TargetInfo
from replicator.apply.version_fence import VersionFence
from replicator.metrics import Metrics
from replicator.shard_id import ShardId
from replicator.source.messages import Change, RowEvent
from replicator.state.positions import ChangeId
from replicator.state.task_state import BY_KEY, Spread
from replicator.transient import Retrying

__all__ = ["Applier", "ApplierFailed"]


class Applier:
    """Threads: made and started on the daemon's thread, which routes and flushes
    (`submit`, `flush`: `Buffers`); the partitions' threads commit (`Partition`); a DDL
    thread waits on a shard (`wait_shard`: `Pending`). Each part says what its threads share."""

    def __init__(
        self,
        meta: Meta,
        targets: dict[str, TargetInfo],
        connection: dict,
        partitions: int,
        batch_size: int,
        safe_mode: Callable[[list[Change]], bool],
        checkpoints: dict[tuple[ShardId, int], ChangeId],
        on_error: Callable[[Refused], None],
        max_backoff: float = 30.0,
        metrics: Metrics | None = None,
        spread: Spread = BY_KEY,
        skip_refused: bool = False,
        *,
        file_of: Callable[[ShardId, ChangeId], str] = lambda shard, cid: str(cid[0]),
        on_committed: Callable[[list[Change | RowEvent]], None] | None = None,
        waiting: Callable[[], None] | None = None,
        versions: VersionFence | None = None,
    ):
        """`spread`: by source or by key (by source, row events go as they are).
        `skip_refused` (on_row_error: skip): a row the downstream refuses goes into the
        dead-letter table with its checkpoint, and its shard goes on; else `on_error`
        hears of it (the daemon pauses the shard). `file_of`: a change id's binlog file,
        for the dead-letter table (the daemon knows the names); `on_committed` hears what
        each transaction committed, from the partition's thread (continuous validation);
        `waiting` is called on the daemon's thread while a full partition queue holds it;
        `versions`: where the task's daemons share its tables, each batch is checked against
        their versions (version_fence.py)."""
        self.metrics = metrics
        self.targets = targets
        self.partitions = partitions
        self.partitioner = Partitioner(targets, partitions, spread)
        self.checkpoints = Checkpoints(checkpoints, partitions, self.partitioner.partitions_of)
        self.drops = Drops()
        self.tally = Tally(metrics)
        # shard -> its changes in buffers: the daemon's thread counts them (`Buffers`), the
        # DDL barrier reads them (`Pending`)
        buffered: dict[ShardId, int] = defaultdict(int)
        self.pending = Pending(buffered)
        self.commit = BatchCommit(
            meta, targets, safe_mode, self.partitioner, self.checkpoints, self.drops, self.tally,
            as_is=spread.by_source, on_committed=on_committed, versions=versions,
        )
        refusals = RowRefusals(
            meta, targets, self.checkpoints, self.drops, self.tally, on_error, skip_refused, file_of
        )
        self.parts = [
            Partition(i, self.commit, refusals, self.drops, self.pending, self.tally, connection, max_backoff)
            for i in range(partitions)
        ]
        self.buffers = Buffers(
            self.partitioner, self.checkpoints, self.pending, buffered, [p.queue for p in self.parts],
            targets, batch_size, waiting,
        )
        # (bound once: called for every row the daemon reads, with no call of the applier's between)
        self.submit = self.buffers.submit
        self.already_applied = self.checkpoints.already_applied
        self.applied_below = self.checkpoints.applied_below
        self.partitions_of = self.partitioner.partitions_of

    def start(self) -> None:
        for p in self.parts:
            p.thread.start()

    def stop(self) -> None:
        for p in self.parts:
            p.stop()
        for p in self.parts:
            p.thread.join(timeout=30)

    def abandon(self) -> None:
        """An abandon's, before `stop`: a batch waiting to be tried again is given up (it
        waited out its backoff, retrying an error the start again cures, for up to 30 s)."""
        for p in self.parts:
            p.abandoned.set()

    # -- the daemon's thread -------------------------------------------------------------------
    def flush(self, part: int | None = None) -> None:
        """Send buffered changes to their partitions (the daemon's thread only)."""
        self.buffers.flush(part)

    def flush_idle(self) -> None:
        """Send the buffered changes of the partitions no batch waits for (the daemon's thread)."""
        self.buffers.flush_idle()

    def check(self) -> None:
        """Raise if a partition thread has died."""
        self.pending.check()

    def oldest(self, source: str) -> ChangeId | None:
        """The smallest id of this source's changes not yet committed (the daemon's
        thread; a holder of `replicator.apply.watermark`)."""
        ids = self.buffers.held(source) + self.pending.sent_ids(source)
        return min(ids) if ids else None

    def settle(self, shard: ShardId, last: ChangeId) -> None:
        """The shard's changes up to `last` were written downstream outside the partitions
        (`Checkpoints.settle`)."""
        self.checkpoints.settle(shard, last)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Every routed change committed (or `timeout` seconds passed); whether it was."""
        self.flush()
        return self.pending.wait_idle(timeout)

    # -- paused shards (the daemon's thread; `Drops`) -------------------------------------------
    def drop_from(self, shard: ShardId, first: ChangeId, refused: bool = False) -> None:
        """The shard paused at `first`: discard its changes from there on (`refused`: at a
        row the downstream refused)."""
        self.drops.drop_from(shard, first, refused)

    def take_again(self, shard: ShardId) -> None:
        """The shard resumed: its changes are applied again."""
        self.drops.take_again(shard)

    def restore_drops(self, dropped: Mapping[ShardId, ChangeId], refused: Mapping[ShardId, ChangeId]) -> None:
        """At a start: the paused shards, and those of them paused by a refused row."""
        self.drops.restore(dropped, refused)

    # -- other threads -------------------------------------------------------------------------
    def wait_shard(self, shard: ShardId, timeout: float | None = None) -> bool:
        """Block until every routed change of the shard is committed (the DDL barrier,
        from a DDL thread)."""
        return self.pending.wait_shard(shard, timeout)

    def shard_idle(self, shard: ShardId) -> bool:
        """Whether none of the shard's changes is buffered or in flight."""
        return self.pending.shard_idle(shard)

    @property
    def failure(self) -> str | None:
        """Why a partition's thread died; None while none has."""
        return self.pending.failure

    @property
    def as_is(self) -> bool:
        """Row events are applied as they are (off once refused for privileges)."""
        return self.commit.as_is

    @property
    def retrying(self) -> dict[int, Retrying]:
        """Partition -> its batch waiting on an error a retry cures (query-status)."""
        return {p.part: r for p in self.parts if (r := p.retrying) is not None}
