"""Binlog positions and the order of changes in one source's stream.

A change is identified by (file sequence, start of its transaction, index in the
transaction). Those ids increase along the stream, so "applied up to id X" is one
number per (shard, partition), and reading can always restart at the start of a
transaction: resuming in the middle of one silently drops row events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ChangeId = tuple[int, int, int]  # (file sequence, transaction start offset, index within it)
ZERO: ChangeId = (0, 0, 0)

_SEQ = re.compile(r"\.(\d+)$")


def file_sequence(file: str) -> int:
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


def id_text(change: ChangeId) -> str:
    return f"{change[0]}:{change[1]}#{change[2]}"
