"""When rows are applied in safe mode (inserts as REPLACE, updates as delete and
insert): the config asks it, the last stop was not clean (for a while after the
start), a source has not yet passed the end of its backfill (P1: the rows before
it may or may not have been copied), or a resynced shard's changes come from before
the end of its copy."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from replicator.shard_id import ShardId
from replicator.source.messages import Change
from replicator.state.positions import ZERO, ChangeId

log = logging.getLogger("shardmerge.daemon")


class SafeMode:
    def __init__(self, forced: bool) -> None:
        self.forced = forced
        self.until = 0.0  # monotonic time an unclean stop's window ends
        # source -> end of its backfill (P1); replaced, never changed in place: the
        # applier's threads read it
        self.before: Mapping[str, ChangeId] = {}
        # shard -> end of its resync's copy (P1); replaced likewise
        self.shards: Mapping[ShardId, ChangeId] = {}

    def after_unclean_stop(self, seconds: float) -> None:
        self.until = time.monotonic() + seconds

    def __call__(self, changes: Sequence[Change] | None = None) -> bool:
        """Whether `changes` (None: anything now) go in safe mode."""
        if self.forced or time.monotonic() < self.until:
            return True
        before, shards = self.before, self.shards
        if changes is None or not (before or shards):
            return bool(before or shards)
        return any(
            c.id < before.get(c.shard.source, ZERO) or c.id < shards.get(c.shard, ZERO) for c in changes
        )

    def passed(self, source: str, bound: ChangeId) -> None:
        """The source's watermark is at `bound`: past its backfill's end, safe mode is over for it."""
        if source in self.before and bound >= self.before[source]:
            self.before = {s: p for s, p in self.before.items() if s != source}
            log.info("source %s passed the end of the backfill: safe mode off for it", source)

    def settled(self) -> bool:
        """No safe mode now, nor one a source's backfill still asks later."""
        return not self.forced and not self.before and not self.shards and time.monotonic() >= self.until
