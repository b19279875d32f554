"""When rows are applied in safe mode (inserts as REPLACE, updates as delete and
insert): the config asks it, the last stop was not clean (for a while after the
start), or a source has not yet passed the end of its backfill (P1: the rows before
it may or may not have been copied)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from replicator.source.messages import Change
from replicator.source.positions import ZERO, ChangeId

log = logging.getLogger("shardmerge.daemon")


class SafeMode:
    def __init__(self, forced: bool) -> None:
        self.forced = forced
        self.until = 0.0  # monotonic time an unclean stop's window ends
        # source -> end of its backfill (P1); replaced, never changed in place: the
        # applier's threads read it
        self.before: Mapping[str, ChangeId] = {}

    def after_unclean_stop(self, seconds: float) -> None:
        self.until = time.monotonic() + seconds

    def __call__(self, changes: Sequence[Change] | None = None) -> bool:
        """Whether `changes` (None: anything now) go in safe mode."""
        if self.forced or time.monotonic() < self.until:
            return True
        before = self.before
        if changes is None or not before:
            return bool(before)
        return any(c.id < before.get(c.shard.source, ZERO) for c in changes)

    def passed(self, source: str, bound: ChangeId) -> None:
        """The source's watermark is at `bound`: past its backfill's end, safe mode is over for it."""
        if source in self.before and bound >= self.before[source]:
            self.before = {s: p for s, p in self.before.items() if s != source}
            log.info("source %s passed the end of the backfill: safe mode off for it", source)

    def settled(self) -> bool:
        """No safe mode now, nor one a source's backfill still asks later."""
        return not self.forced and not self.before and time.monotonic() >= self.until
