"""The names of the values a decoded row holds, one shared tuple per table version and
set of present columns: pickling a batch of rows sends each tuple once."""

from __future__ import annotations

from collections.abc import Sequence

from replicator.source.rowcodec import RowCodec


class ColumnNames:
    def __init__(self) -> None:
        # Keyed by the codec itself, not its id(): the key keeps it alive, so no codec made
        # later (after a DDL or a rewind) can come at a freed one's address and be given its
        # names. Keyed by id(), rows read again after a rewind took the names of a later
        # version of their table, one column off (L50).
        self._tuples: dict[tuple[RowCodec, tuple[int, ...], tuple[str, ...]], tuple[str, ...]] = {}

    def of(self, codec: RowCodec, present: Sequence[int], extra: tuple[str, ...]) -> tuple[str, ...]:
        """The names of the values `codec` decodes with these columns present, then `extra`."""
        key = (codec, tuple(present), extra)
        names = self._tuples.get(key)
        if names is None:
            names = self._tuples[key] = (*codec.columns_of(present), *extra)
        return names

    def clear(self) -> None:
        self._tuples.clear()
