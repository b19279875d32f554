"""The last hour of the daemon's progress, for the live view's chart: every SAMPLE_EVERY
seconds each source's lag and the rows applied so far.

Threads: the main loop's only. It takes the samples (`Duties.turn`) and keeps them as one
tuple of frozen values, replaced whole by each new sample; the admin API's HTTP threads get
that tuple through a read call (`Calls.read`), and nothing they hold ever changes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replicator.source.source_state import SourceState

SAMPLE_EVERY = 10.0  # seconds
KEEP = 360  # an hour of them


@dataclass(frozen=True)
class Sample:
    time: float  # seconds since the epoch
    applied: int  # rows applied since the daemon started (a rate is the difference of two)
    lag: tuple[tuple[str, float | None], ...]  # each source's, by id (None: nothing read yet)

    def to_data(self) -> dict[str, Any]:
        return {"time": self.time, "applied": self.applied, "lag": dict(self.lag)}


def measure(sources: Iterable[SourceState], applied: int, now: float) -> Sample:
    """A sample of this moment: the lag as the status gives it (the age of the last event
    read, which a source's heartbeat keeps fresh while it is idle)."""
    lag = tuple(
        (s.id, round(max(0.0, now - s.event_time), 3) if s.event_time else None)
        for s in sorted(sources, key=lambda s: s.id)
    )
    return Sample(round(now, 3), applied, lag)


class Samples:
    def __init__(self, keep: int = KEEP, every: float = SAMPLE_EVERY):
        self.keep, self.every = keep, every
        self.taken: tuple[Sample, ...] = ()  # oldest first; replaced, never changed
        self._last: float | None = None  # (monotonic) when the last was taken

    def due(self, monotonic: float) -> bool:
        return self._last is None or monotonic - self._last >= self.every

    def add(self, sample: Sample, monotonic: float) -> None:
        self.taken = (*self.taken[-(self.keep - 1) :], sample) if self.keep > 1 else (sample,)
        self._last = monotonic

    def to_data(self) -> dict[str, Any]:
        return {"every": self.every, "samples": [s.to_data() for s in self.taken]}
