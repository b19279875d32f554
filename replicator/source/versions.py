"""What a source worker's handlers made for each version of a tracked table (codecs,
encoders, shapes, row images), keyed by the identity of the version's object: let go
together whenever the versions change (a DDL, a pin taken, a rewind), since each of those
makes new version objects and an old one's id may come again for another."""

from __future__ import annotations

from collections.abc import Callable


class Versions:
    def __init__(self) -> None:
        self._keepers: list[Callable[[], None]] = []

    def kept_by(self, forget: Callable[[], None]) -> None:
        """A handler that keeps things per version, and how it lets them go."""
        self._keepers.append(forget)

    def forget(self) -> None:
        for forget in self._keepers:
            forget()
