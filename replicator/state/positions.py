"""Binlog positions and the order of changes in one source's stream.

A change is identified by (file sequence, start of its transaction, index in the
transaction). Those ids increase along the stream, so "applied up to id X" is one
number per (shard, partition), and reading can always restart at the start of a
transaction: resuming in the middle of one silently drops row events.

The index of a row is its row event's number among the table's row events in the
transaction, then its number in the event (`row_index`): so one id, `event_end`,
stands for every row of an event, which lets a whole event be applied as a unit
and compared with rows of it applied one by one.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

ChangeId = tuple[int, int, int]  # (file sequence, transaction start offset, index within it)
ZERO: ChangeId = (0, 0, 0)
ROW_BITS = 24  # rows an event may hold: 16M (an 8 KB event holds a few thousand)
LAST_ROW = (1 << ROW_BITS) - 1


def row_index(event: int, row: int) -> int:
    """The index of the row-th row (from 1) of a table's event-th row event (from 1)."""
    return event << ROW_BITS | row


def event_end(event: int) -> int:
    """The index at or above every row of the event-th row event, below the next one's."""
    return event << ROW_BITS | LAST_ROW


_SEQ = re.compile(r"\.(\d+)$")


@functools.lru_cache(maxsize=64)
def file_sequence(file: str) -> int:
    # (asked for every event the worker reads, of a handful of names)
    m = _SEQ.search(file)
    if not m:
        raise ValueError(f"binlog file name {file!r} does not end in a sequence number")
    return int(m.group(1))


@dataclass(frozen=True)
class Position:
    """A place in a source's binlog: the start of a transaction (or an event)."""

    file: str
    pos: int

    @property
    def key(self) -> tuple[int, int]:
        return file_sequence(self.file), self.pos

    def __lt__(self, other: Position) -> bool:
        return self.key < other.key

    def __le__(self, other: Position) -> bool:
        return self.key <= other.key

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"

    @classmethod
    def parse(cls, text: str) -> Position:
        file, _, pos = text.rpartition(":")
        return cls(file, int(pos))

    def change(self, index: int = 0) -> ChangeId:
        """The id of the index-th change of the transaction starting here."""
        return (*self.key, index)


def position_text(position: Position | str, gtid: str | None = None) -> str:
    """A binlog position as every command prints it: `file:pos`, and the GTID (set)
    there where it is known."""
    return f"{position} (GTID {gtid})" if gtid else str(position)


def id_text(change: ChangeId) -> str:
    return f"{change[0]}:{change[1]}#{change[2]}"
