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
from replicator.state.positions import ZERO, ChangeId, id_text

log = logging.getLogger("shardmerge.daemon")


class SafeMode:
    def __init__(self, forced: bool) -> None:
        self.forced = forced
        self.until = 0.0  # monotonic time an unclean stop's window ends
        # the start reads each source again from below its highest checkpoint: after an
        # unclean stop, or as a member (`read_again`)
        self.unclean = False
        # source -> end of its backfill (P1); replaced, never changed in place: the
        # applier's threads read it
        self.before: Mapping[str, ChangeId] = {}
        # shard -> end of its resync's copy (P1); replaced likewise
        self.shards: Mapping[ShardId, ChangeId] = {}
        # source -> its highest checkpoint, where a member's start reads it again from below
        # (`read_again`); replaced likewise
        self.again: Mapping[str, ChangeId] = {}

    def read_again(self, tops: Mapping[str, ChangeId]) -> None:
        """A start after an unclean stop, or a member's (issue 75): each source's changes up
        to its highest checkpoint (`tops`) may have been applied already, before the crash
        or by a member that died reading it; past it none was (each batch commits its
        checkpoints with its rows). Safe mode till the source's watermark passes it, rather
        than a window of time: the catch-up after a crash goes as out of safe mode once it
        has read what was applied (issue 74), and a member, which starts again at every
        decision of its group, no longer pays safe mode on every row (bench/members.py)."""
        self.again = dict(tops)
        for source, top in sorted(tops.items()):
            log.info("source %s: safe mode till it passes its highest checkpoint %s", source, id_text(top))

    def after_unclean_stop(self, seconds: float) -> None:
        """The last stop was not clean: the start reads again in safe mode (`read_again`),
        and for `seconds` besides (`options.safe_mode_window`, 0 by default)."""
        self.unclean = True
        self.until = time.monotonic() + seconds

    def __call__(self, changes: Sequence[Change] | None = None) -> bool:
        """Whether `changes` (None: anything now) go in safe mode."""
        if self.forced or time.monotonic() < self.until:
            return True
        before, shards, again = self.before, self.shards, self.again
        if changes is None or not (before or shards or again):
            return bool(before or shards or again)
        return any(
            c.id < before.get(c.shard.source, ZERO)
            or c.id < shards.get(c.shard, ZERO)
            or c.id <= again.get(c.shard.source, ZERO)
            for c in changes
        )

    def passed(self, source: str, bound: ChangeId) -> None:
        """The source's watermark is at `bound`: past its backfill's end, safe mode is over for it."""
        if source in self.before and bound >= self.before[source]:
            self.before = {s: p for s, p in self.before.items() if s != source}
            log.info("source %s passed the end of the backfill: safe mode off for it", source)
        if source in self.again and bound > self.again[source]:
            self.again = {s: p for s, p in self.again.items() if s != source}
            log.info("source %s passed its highest checkpoint: safe mode off for it", source)

    def settled(self) -> bool:
        """No safe mode now, nor one a source's backfill still asks later."""
        return (
            not self.forced and not self.before and not self.shards and not self.again
            and time.monotonic() >= self.until
        )
