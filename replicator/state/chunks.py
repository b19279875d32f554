"""The backfill's unit of work and of resumption: a chunk, one part of a shard's rows
(a range of its first key column, or a hash bucket of it), read and written on its
own and recorded in the meta schema once its rows are committed downstream. And what
a table's backfill was planned with, so that a run after an interrupted one can tell
whether it may continue where that one stopped.

Pure: no servers, no Spark (replicator/spark/backfill.py runs the chunks,
replicator/apply/meta.py stores them)."""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Chunk:
    """Rows whose first key column is in [low, high) (None: unbounded on that side)
    when the key is an integer; else (`buckets` set) those whose key hashes to
    `index` modulo `buckets`. `rows`: how many were copied, once the chunk is
    finished (None until then)."""

    index: int
    low: int | None = None
    high: int | None = None
    buckets: int | None = None
    rows: int | None = None

    def __post_init__(self) -> None:
        if self.buckets is not None and (self.low is not None or self.high is not None):
            raise ValueError("a chunk is a key range or a hash bucket, not both")
        if self.low is not None and self.high is not None and self.low >= self.high:
            raise ValueError(f"empty key range [{self.low}, {self.high})")

    @property
    def finished(self) -> bool:
        return self.rows is not None

    def done(self, rows: int) -> Chunk:
        return Chunk(self.index, self.low, self.high, self.buckets, rows)

    def pending(self) -> Chunk:
        return Chunk(self.index, self.low, self.high, self.buckets)

    def where(self, key: str) -> str:
        """The condition selecting the chunk's rows; `key` is the first key column
        (a range) or the text it hashes (a bucket), as SQL."""
        if self.buckets is not None:
            return f"CRC32({key}) % {self.buckets} = {self.index}"
        parts = ([f"{key} >= {self.low}"] if self.low is not None else []) + (
            [f"{key} < {self.high}"] if self.high is not None else []
        )
        return " AND ".join(parts) or "1=1"


def range_chunks(low: int, high: int, n: int) -> tuple[Chunk, ...]:
    """About n ranges over the integers, each [low, high]'s 1/n: the first open
    below and the last open above, so rows inserted outside [low, high] after the
    plan are still in exactly one chunk."""
    step = max(1, math.ceil((high - low + 1) / max(1, n)))
    bounds = [low + i * step for i in range(1, n) if low + i * step <= high]
    edges: list[int | None] = [None, *bounds, None]
    return tuple(Chunk(i, a, b) for i, (a, b) in enumerate(itertools.pairwise(edges)))


def hash_chunks(n: int) -> tuple[Chunk, ...]:
    if n <= 1:
        return (Chunk(0),)
    return tuple(Chunk(i, buckets=n) for i in range(n))


def where_any(chunks: Sequence[Chunk], key: str) -> str:
    """One condition selecting the rows of all `chunks` (of one shard): adjacent
    ranges merged, buckets listed, so that one statement (and one index range scan
    per run of chunks) covers them."""
    if not chunks:
        return "0=1"
    buckets = {c.buckets for c in chunks}
    if buckets != {None}:
        (n,) = buckets
        return f"CRC32({key}) % {n} IN ({', '.join(str(c.index) for c in sorted(chunks, key=_order))})"
    merged: list[Chunk] = []
    for chunk in sorted(chunks, key=_order):
        last = merged[-1] if merged else None
        if last is not None and last.high is not None and last.high == chunk.low:
            merged[-1] = Chunk(last.index, last.low, chunk.high)
        else:
            merged.append(chunk)
    return " OR ".join(f"({c.where(key)})" for c in merged)


def _order(chunk: Chunk) -> tuple[int, int]:
    return (chunk.low if chunk.low is not None else -(2**64), chunk.index)


def interleave(lists: Iterable[Sequence[T]]) -> list[T]:
    """The items of each list in turn (a1, b1, c1, a2, ...): every shard's chunks
    progress side by side, as its reads would in one job."""
    gap = object()
    rounds = itertools.zip_longest(*lists, fillvalue=gap)
    return [item for round_ in rounds for item in round_ if item is not gap]


@dataclass(frozen=True)
class TablePlan:
    """What a downstream table's backfill copies and how: the shards with their
    schemas, the joined table, the merge policy; and `losers`, a digest of the rows
    the merge policy drops. A run continues an interrupted one only for the same
    plan; with other losers, the finished chunks hold rows this run would drop (or
    miss rows it would keep), so the table is copied again from scratch."""

    target: str
    shards: tuple[tuple[str, str], ...]  # (shard id, its CREATE TABLE as the plan read it)
    joined: str  # the downstream table's CREATE TABLE
    policy: str  # the merge policy, as `--merge` names it (and keep-latest's column)
    losers: str = ""

    def changes(self, now: TablePlan) -> list[str]:
        """How `now` differs from this plan, one line each (none: the same plan)."""
        before, after = dict(self.shards), dict(now.shards)
        lines = [f"{self.target}: shard {s} is new" for s in after if s not in before]
        lines += [f"{self.target}: shard {s} is gone" for s in before if s not in after]
        lines += [
            f"{self.target}: the schema of shard {s} changed"
            for s in before
            if s in after and before[s] != after[s]
        ]
        if self.joined != now.joined:
            lines.append(f"{self.target}: the joined schema changed")
        if self.policy != now.policy:
            lines.append(f"{self.target}: the merge policy was {self.policy}, now {now.policy}")
        return lines


def plan_changes(recorded: Mapping[str, TablePlan], now: Mapping[str, TablePlan]) -> list[str]:
    """Why the tables planned now cannot continue the recorded plan (none: they can)."""
    if set(recorded) != set(now):
        return [
            f"the interrupted backfill copies {', '.join(sorted(recorded))}; "
            f"this one would copy {', '.join(sorted(now))}"
        ]
    return [line for target in sorted(now) for line in recorded[target].changes(now[target])]


def losers_digest(losers: Mapping[object, Iterable[str]]) -> str:
    """One text for the rows a merge policy drops (per shard, their keys), equal for
    the same rows whatever the order they were found in."""
    digest = hashlib.sha256()
    for shard, keys in sorted((str(s), sorted(k)) for s, k in losers.items()):
        for key in keys:
            digest.update(f"{shard}\t{key}\n".encode())
    return digest.hexdigest()
