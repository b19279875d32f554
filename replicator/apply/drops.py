"""The paused shards whose changes the applier discards (`Drops`): a paused shard's changes
from its first one not applied are read again when it resumes, earlier ones still commit."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from types import MappingProxyType

from replicator.shard_id import ShardId
from replicator.source.messages import Change, RowEvent
from replicator.state.positions import ChangeId

_EMPTY: Mapping = MappingProxyType({})


class Drops:
    """Threads: both mappings are values, replaced, never changed: the apply threads
    replace them on a refused row and the daemon's thread pausing and resuming, under
    `_lock`, so a resume is not undone by a write it raced; every other thread reads the
    value in place."""

    def __init__(self) -> None:
        # paused shard -> its first change not applied: its changes from there on are
        # discarded (they are read again when it resumes); earlier ones still commit
        self.dropped: Mapping[ShardId, ChangeId] = _EMPTY
        # of those, the shards paused by a row the downstream refused, from that row: their
        # DDLs from there wait till their rows are read again (GroupExecutor._read_again)
        self.refused: Mapping[ShardId, ChangeId] = _EMPTY
        self._lock = threading.Lock()

    def discards(self, change: Change | RowEvent) -> bool:
        # one lookup: the daemon's thread may resume the shard meanwhile
        first = self.dropped.get(change.shard)
        return first is not None and change.id >= first

    def drop_from(self, shard: ShardId, first: ChangeId, refused: bool = False) -> None:
        """The shard paused at `first`: discard its changes from there on (`refused`: at a
        row the downstream refused)."""
        with self._lock:
            held = self.dropped.get(shard)
            self.dropped = _with(self.dropped, {shard: first if held is None else min(held, first)})
            if refused:
                self.refused = _with(self.refused, {shard: min(self.refused.get(shard, first), first)})

    def take_again(self, shard: ShardId) -> None:
        """The shard resumed: its changes are applied again."""
        with self._lock:
            self.dropped = _without(self.dropped, shard)
            self.refused = _without(self.refused, shard)

    def restore(self, dropped: Mapping[ShardId, ChangeId], refused: Mapping[ShardId, ChangeId]) -> None:
        """At a start: the paused shards, and those of them paused by a refused row."""
        with self._lock:
            self.dropped = _with(self.dropped, dropped)
            self.refused = _with(self.refused, refused)


def _with(values: Mapping[ShardId, ChangeId], more: Mapping[ShardId, ChangeId]) -> Mapping[ShardId, ChangeId]:
    return MappingProxyType({**values, **more})


def _without(values: Mapping[ShardId, ChangeId], shard: ShardId) -> Mapping[ShardId, ChangeId]:
    return MappingProxyType({s: v for s, v in values.items() if s != shard}) if shard in values else values
