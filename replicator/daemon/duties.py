"""The main loop's periodic duties: a partial batch sent to its partition once it waited
FLUSH_EVERY, every source's watermark written about once a second (`watermarks.py`), the
resyncs under way looked at as often, and a sample of the lag and rows applied taken every
few seconds for the live view (`samples.py`). A watermark write the downstream refused is
said, and kept for the status and readiness till a write works.

Threads: the main loop's only (the status reads `downstream_error` there too); the
batches go to the partitions' threads through the applier's queues."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

import pymysql

from replicator.api.samples import Samples, measure
from replicator.apply.applier import Applier
from replicator.daemon.membership import Membership, Standing, StandingChanged
from replicator.daemon.resyncs import Resyncs
from replicator.daemon.watermarks import Watermarks
from replicator.source.source_state import SourceState

log = logging.getLogger("shardmerge.daemon")
WATERMARK_EVERY = 1.0  # (and a member's look at its standing, `membership.py`)
FLUSH_EVERY = 0.02  # seconds a partial batch may wait before it is sent to its partition


class Duties:
    def __init__(
        self,
        watermarks: Watermarks,
        resyncs: Resyncs,
        down: dict,
        sources: Mapping[str, SourceState],
        samples: Samples,
    ):
        self.watermarks, self.resyncs, self.down = watermarks, resyncs, down
        self.sources, self.samples = sources, samples
        self.applier: Applier | None = None  # (made at the start)
        self.membership: tuple[Membership, Standing] | None = None  # (a member's, at its start)
        self.downstream_error: str | None = None  # the last watermark write's failure, until one works
        self._flushed = self._written = 0.0  # (monotonic; from `begin`, the loop's start)
        self._standing_looked = 0.0

    def begin(self) -> None:
        self._flushed = self._written = time.monotonic()

    def turn(self) -> None:
        """What is due at this turn of the loop."""
        now = time.monotonic()
        if now - self._flushed >= FLUSH_EVERY:
            self.applier.flush_idle()
            self._flushed = now
        if now - self._written >= WATERMARK_EVERY:
            self.write_watermarks()
            self.resyncs.poll(self.watermarks.floors)
            self._written = now
            self._standing_looked = now
            if self.membership is not None:
                self._look_at_standing(*self.membership)
        if self.samples.due(now):
            applied = self.applier.tally.applied if self.applier is not None else 0
            self.samples.add(measure(self.sources.values(), applied, time.time()), now)

    def waiting_turn(self) -> None:
        """While the loop waits for the applier (its queues full): a member still looks at its
        standing (a member that lost its sources has its batches refused for good, the queues
        stay full: it must hear of it to start again)."""
        now = time.monotonic()
        if self.membership is not None and now - self._standing_looked >= WATERMARK_EVERY:
            self._standing_looked = now
            self._look_at_standing(*self.membership)

    def _look_at_standing(self, membership: Membership, standing: Standing) -> None:
        now = time.time()
        lags = [max(0.0, now - s.event_time) for s in self.sources.values() if s.event_time]
        try:
            reason = membership.tick(standing, max(lags, default=None))
        except pymysql.err.MySQLError as exc:
            log.warning("member %s could not look at its sources (%s); will retry", standing.member.name, exc)
            return
        if reason is not None:
            raise StandingChanged(reason)

    def write_watermarks(self) -> None:
        written = self.watermarks.write()
        if isinstance(written, pymysql.err.MySQLError):
            log.warning("watermarks not written (%s); will retry", written)
            self.downstream_error = f"{self.down['host']}:{self.down['port']}: {written}"
        elif written:
            self.downstream_error = None  # (written every second: the target's probe too)
