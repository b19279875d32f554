"""The DDL gate of the shards: a shard's DDL at its group's executor, and what waits
behind it.

A shard's DDL waits until the shard's earlier rows are applied (the executor's
barrier); its later changes and DDLs wait here, in binlog order, until the daemon
has taken the DDL's result. Only the daemon's thread touches the gate, so what it
holds (see `replicator.apply.watermark`) is exact at every moment: the running DDL from
hand-off until its result is taken, and every item behind it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from replicator.apply.ddl_job import DDLJob
from replicator.shard_id import ShardId
from replicator.source.messages import Change
from replicator.state.positions import ChangeId


@dataclass
class DDLGate:
    running: dict[ShardId, DDLJob] = field(default_factory=dict)  # shard -> its DDL at the executor
    waiting: dict[ShardId, deque[Change | DDLJob]] = field(default_factory=dict)  # shard -> behind it

    def closed(self, shard: ShardId) -> bool:
        return shard in self.running

    def has(self, shard: ShardId, ddl: ChangeId) -> bool:
        """Whether the shard's DDL `ddl` is here already, running or waiting: read again
        (another shard's resume had its source read from before it) while its result is
        not taken, it is the same DDL, not one to decide twice (L41)."""
        job = self.running.get(shard)
        if job is not None and job.change.id == ddl:
            return True
        return any(isinstance(i, DDLJob) and i.change.id == ddl for i in self.waiting.get(shard, ()))

    def start(self, job: DDLJob) -> None:
        self.running[job.shard] = job

    def hold(self, shard: ShardId, item: Change | DDLJob) -> None:
        self.waiting.setdefault(shard, deque()).append(item)

    def finish(self, shard: ShardId) -> tuple[list[Change], DDLJob | None]:
        """The shard's DDL is done: the changes that waited behind it, up to its next
        DDL (returned too: it starts next, the changes after it keep waiting)."""
        self.running.pop(shard, None)
        queue = self.waiting.get(shard)
        changes: list[Change] = []
        while queue:
            item = queue.popleft()
            if isinstance(item, DDLJob):
                return changes, item
            changes.append(item)
        self.waiting.pop(shard, None)
        return changes, None

    def drop_changes(self, shard: ShardId) -> None:
        """The shard paused: its waiting changes will be read again; its DDLs wait on."""
        if shard in self.waiting:
            self.waiting[shard] = deque(i for i in self.waiting[shard] if isinstance(i, DDLJob))

    def drop_from(self, shard: ShardId, first: ChangeId) -> None:
        """The shard resumes, read again from its pause at `first`: what waits of it from
        there on comes again, in binlog order (its DDLs after the rows before them)."""
        if shard in self.waiting:
            kept = deque(i for i in self.waiting[shard] if _id(i) < first)
            if kept:
                self.waiting[shard] = kept
            else:
                del self.waiting[shard]

    def oldest(self, source: str) -> ChangeId | None:
        """The smallest id held of the source: a running DDL is older than what waits
        behind it, and a shard's queue is in binlog order."""
        low: ChangeId | None = None
        for shard, job in self.running.items():
            if shard.source == source and (low is None or job.change.id < low):
                low = job.change.id
        for shard, items in self.waiting.items():
            if items and shard.source == source:
                held = _id(items[0])
                if low is None or held < low:
                    low = held
        return low


def _id(item: Change | DDLJob) -> ChangeId:
    return item.change.id if isinstance(item, DDLJob) else item.id
