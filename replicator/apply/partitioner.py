"""Which partition a change goes to (`Partitioner`).

By a hash of the target key, so changes to one key stay in order while unrelated keys are
applied in parallel; or, where row events are applied as the binlog holds them
(`replicator.source.row_events`), by source, so each source's changes, events and decoded
rows alike, keep the binlog's order, as a native replica keeps it. An update that moves its
key is a delete of the old key in its partition and an insert of the new one in its own.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

from replicator.apply.target import TargetInfo
from replicator.shard_id import ShardId
from replicator.source.messages import Change, RowEvent
from replicator.state.task_state import Spread


class Partitioner:
    """Threads: the daemon's thread routes with it, the apply threads split a row event's
    decoded rows with it (`BatchCommit.as_applied`). Its settings are fixed; its one
    mutable part, the cache of where key columns sit, holds answers that are the same
    whoever computes them, each step one dict operation (as `IdentityMemo`)."""

    def __init__(self, targets: Mapping[str, TargetInfo], partitions: int, spread: Spread):
        self.targets = targets  # (the daemon's mapping: a DDL puts a table's new value in its TargetInfo)
        self.partitions = partitions
        self.by_source = spread.by_source
        self._places = spread.places(partitions)  # source -> its partition
        self._key_index: dict[tuple[str, tuple[str, ...]], tuple[int, ...] | None] = {}

    def key_positions(self, target: str, columns: tuple[str, ...]) -> tuple[int, ...] | None:
        """Where the target's key columns sit in a change's column tuple (cached: the
        tuples are shared per table version)."""
        found = self._key_index.get((target, columns), False)
        if found is False:
            info = self.targets[target]
            lower = [c.lower() for c in columns]
            found = None
            if info.key and all(k.lower() in lower for k in info.key):
                found = tuple(lower.index(k.lower()) for k in info.key)
            self._key_index[(target, columns)] = found
        return found

    def source_part(self, shard: ShardId) -> int:
        place = self._places.get(shard.source)
        return place if place is not None else Spread.hashed(shard.source, self.partitions)

    def _part(self, change: Change, after: bool) -> int:
        if self.by_source:
            return self.source_part(change.shard)
        columns = change.columns if after else (change.before_columns or change.columns)
        values = change.values if after else change.before
        positions = self.key_positions(change.target, columns)
        if positions is None:
            return self._unkeyed(change)
        return self._hashed(change.target, [values[i] for i in positions])

    def _hashed(self, target: str, key: list[str]) -> int:
        return zlib.crc32((target + "\x1e" + "\x1f".join(key)).encode()) % self.partitions

    def _unkeyed(self, change: Change) -> int:
        return zlib.crc32(str(change.shard).encode()) % self.partitions

    def partitions_of(self, change: Change | RowEvent) -> list[int]:
        """The partition(s) a change goes to: an update that moves its key is a delete
        in one and an insert in another."""
        if isinstance(change, RowEvent):
            return [self.source_part(change.shard)]
        if change.op == "I":
            return [self._part(change, True)]
        if change.op == "D":
            return [self._part(change, False)]
        columns = change.columns
        old_columns = change.before_columns or columns
        old = self.key_positions(change.target, old_columns)
        new = old if old_columns is columns else self.key_positions(change.target, columns)
        if old is None or new is None:  # (no key to move: hashed as a whole row's)
            before, after = self._part(change, False), self._part(change, True)
            return [before] if before == after else [before, after]
        values, image = change.values, change.before
        was, now = [image[i] for i in old], [values[i] for i in new]
        if self.by_source:
            part = self.source_part(change.shard)
            return [part] if was == now else [part, part]
        before = self._hashed(change.target, was)
        return [before] if was == now else [before, self._hashed(change.target, now)]

    def halves(self, change: Change) -> list[tuple[int, Change]]:
        """The change in its partition; an update that moves its key as a delete of the
        old key and an insert of the new (each in its partition): a statement by key
        can do neither alone."""
        parts = self.partitions_of(change)
        if len(parts) == 1:
            return [(parts[0], change)]
        before_columns = change.before_columns or change.columns
        delete = Change(change.id, change.shard, change.target, "D", before_columns, None, change.before)
        insert = Change(
            change.id, change.shard, change.target, "I", change.columns, change.values, clear=change.clear
        )
        return [(parts[0], delete), (parts[1], insert)]
