"""The (shard, partition) checkpoints as this process knows them, and what they say is
applied already (`Checkpoints`).

Each partition commits a batch in one transaction together with, for every (shard,
partition) in it, the id of the last change applied: after a crash a change is applied
again only if its id is above that checkpoint, so nothing is lost or repeated. The
checkpoints in the meta schema are `replicator.state.progress.CheckpointStore`'s; these are
the same, loaded at the start and moved on as transactions commit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from replicator.shard_id import ShardId
from replicator.source.messages import Change, RowEvent
from replicator.state.positions import ZERO, ChangeId


class Checkpoints:
    """Threads: a partition's thread moves its partition's checkpoints on once its
    transaction commits (`mark`); the daemon's thread moves a shard's on while nothing of
    it is in flight (`settle`, and `mark` for an operator's handle-error: the shard is
    paused), and asks `already_applied` of every change it reads. Each (shard, partition)
    entry has one writer at a time and a read is one dict lookup: no lock. `top` is set
    under `_top`: two partitions' threads committing one shard's batches at once each
    compare and set it, and without the lock the lower could be set last (its changes
    between the two then taken for not applied, applied again after a rewind)."""

    def __init__(
        self,
        ids: dict[tuple[ShardId, int], ChangeId],
        partitions: int,
        partitions_of: Callable[[Change | RowEvent], list[int]],
    ):
        self.ids = ids  # (shard, partition) -> the id of its last change committed
        self.partitions = partitions
        self._partitions_of = partitions_of
        # shard -> its highest checkpoint: only changes up to it can have been applied
        # already (read again after a restart or a rewind), so only they need the
        # per-partition check
        self.top: dict[ShardId, ChangeId] = {}
        self._top = threading.Lock()
        for (shard, _), cid in ids.items():
            self.top[shard] = max(cid, self.top.get(shard, cid))

    def already_applied(self, change: Change) -> bool:
        """Applied already (read again after a restart or a rewind): its id is at or
        below the checkpoint of every partition it goes to."""
        last = self.top.get(change.shard)
        if last is None or change.id > last:
            return False
        return all(self.applied_in(change, p) for p in self._partitions_of(change))

    def applied_below(self, shard: ShardId, change: ChangeId) -> bool:
        """Every partition's checkpoint of the shard is at or past `change`: what it held
        was applied before (a change of it read again after a restart)."""
        last = self.top.get(shard)
        if last is None or change > last:
            return False
        return all(change <= self.ids.get((shard, p), ZERO) for p in range(self.partitions))

    def applied_in(self, change: Change, part: int) -> bool:
        done = self.ids.get((change.shard, part))
        return done is not None and change.id <= done

    def mark(self, shard: ShardId, part: int, cid: ChangeId) -> None:
        """The (shard, partition) checkpoint `cid` committed downstream."""
        self.ids[(shard, part)] = cid
        self._raise_top(shard, cid)

    def _raise_top(self, shard: ShardId, cid: ChangeId) -> None:
        with self._top:
            if cid > self.top.get(shard, ZERO):
                self.top[shard] = cid

    def settle(self, shard: ShardId, last: ChangeId) -> None:
        """The shard's changes up to `last` were written downstream outside the partitions
        (a resumed shard's paused rows, merged from their scratch table, with these
        checkpoints): read again, they are applied already."""
        for part in range(self.partitions):
            if last > self.ids.get((shard, part), ZERO):
                self.ids[(shard, part)] = last
        self._raise_top(shard, last)
