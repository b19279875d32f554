"""A downstream table as the applier writes it (`TargetInfo`), and the lock that lets many
batches commit on it, or one downstream DDL change it, at a time (`RWLock`). The DDL
executor puts a new value of the table in place under its write lock; the applier's threads
read the value in place under the read lock (`replicator.apply.statements` builds its
statements from it)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from replicator.shard_id import ShardId
from replicator.source.row_events import RowShape


class RWLock:
    """Many batch commits, or one downstream DDL, on a target at a time."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False
        self._waiting_writers = 0

    def acquire_read(self) -> None:
        with self._cond:
            while self._writing or self._waiting_writers:
                self._cond.wait()
            self._readers += 1

    def release_read(self) -> None:
        with self._cond:
            self._readers -= 1
            self._cond.notify_all()

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        self.acquire_read()
        try:
            yield
        finally:
            self.release_read()

    def acquire_write(self) -> None:
        with self._cond:
            self._waiting_writers += 1
            while self._writing or self._readers:
                self._cond.wait()
            self._waiting_writers -= 1
            self._writing = True

    def release_write(self) -> None:
        with self._cond:
            self._writing = False
            self._cond.notify_all()


@dataclass(frozen=True)
class TargetTable:
    """A downstream table as the applier writes it, as of its last DDL: a value, replaced
    whole by the DDL executor (`TargetInfo.update`), read by the applier's threads."""

    name: str  # schema.table
    quoted: str
    columns: Mapping[str, str]  # lower-case name -> name
    key: tuple[str, ...] | None  # primary (or unique NOT NULL) key columns
    major: int
    sole_key: bool = False  # the key is the table's only unique key
    shape: RowShape | None = None  # what its rows hold (row_events.row_shape): None, no events
    # the columns each shard's rows set NULL (GroupState.cleared) as of the table's
    # last DDL: the rows the daemon routed before it took that DDL's result clear them too (a
    # rename's CHANGE would leave the new name its default in them: L03)
    cleared: Mapping[ShardId, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    not_null: frozenset[str] = frozenset()  # lower-case names of the NOT NULL columns

    def clears(self, shard: ShardId) -> tuple[str, ...]:
        """The columns (their names here) the shard's rows set NULL, as of the table's last DDL."""
        names = (self.clearable(c) for c in self.cleared.get(shard, ()))
        return tuple(n for n in names if n is not None)

    def clearable(self, column: str) -> str | None:
        """The name of a column a row's clearing sets NULL: one there and nullable. A row
        routed before a rename finished may clear the old name, which the table may have
        again by then as a column of other shards, NOT NULL: the row takes its default
        (L10)."""
        k = column.lower()
        return None if k in self.not_null else self.columns.get(k)


class TargetInfo:
    """A downstream table's lock and its `TargetTable` now (`now`): the DDL executor puts
    a new value there under the write lock, the applier's threads take the value in place
    under the read lock, one for a batch. Its fields read as the value's."""

    def __init__(
        self,
        name: str,
        quoted: str,
        columns: Mapping[str, str],
        key: tuple[str, ...] | None,
        major: int,
        *,
        sole_key: bool = False,
        shape: RowShape | None = None,
        cleared: Mapping[ShardId, tuple[str, ...]] | None = None,
        not_null: frozenset[str] = frozenset(),
        lock: RWLock | None = None,
    ):
        self.lock = lock or RWLock()
        self.now = TargetTable(
            name, quoted, MappingProxyType(dict(columns)), key, major, sole_key, shape,
            MappingProxyType(dict(cleared or {})), frozenset(not_null),
        )

    def update(self, **changes: Any) -> None:
        """The table with `changes` (fields of `TargetTable`) in place of the one now."""
        for name in ("columns", "cleared"):
            if name in changes:
                changes[name] = MappingProxyType(dict(changes[name]))
        self.now = replace(self.now, **changes)

    name = property(lambda self: self.now.name)
    quoted = property(lambda self: self.now.quoted)
    columns = property(lambda self: self.now.columns)
    key = property(lambda self: self.now.key)
    major = property(lambda self: self.now.major)
    sole_key = property(lambda self: self.now.sole_key)
    shape = property(lambda self: self.now.shape)
    cleared = property(lambda self: self.now.cleared)
    not_null = property(lambda self: self.now.not_null)

    def clears(self, shard: ShardId) -> tuple[str, ...]:
        return self.now.clears(shard)
