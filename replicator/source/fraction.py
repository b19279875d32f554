"""The fraction of a temporal value as the server writes the value as text."""

from __future__ import annotations


def fraction(micro: int, fsp: int) -> str:
    """`micro` microseconds with the column's own `fsp` digits: a string column downstream
    (one holding the rows of a shard that left) keeps the text as written, which must be
    the shard's own (L53: '12:30:45.123' of a DATETIME(3), not '12:30:45.123000')."""
    return f".{micro // 10 ** (6 - fsp):0{fsp}d}" if fsp else ""
