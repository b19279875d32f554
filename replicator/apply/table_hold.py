"""The applier's batches on a group's table held (its write lock, `TargetInfo.lock`) while a
journal entry's statements change the table, or let go on during those that keep every row;
and held over from an entry a transient error broke off till its retry finished it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from replicator.apply.target import TargetInfo
from replicator.transient import transient


class TableHold:
    def __init__(self, info: TargetInfo):
        self.info = info
        # the applier's batches on the table held over from an entry a transient error broke
        # off between its statements, till `JournalEntries._retried` finished it (its
        # executor's thread only)
        self.keeping = self.kept = False

    @contextlib.contextmanager
    def held(self, rows_flow: bool) -> Iterator[None]:
        """The applier's batches on the table held (or let go on, with `rows_flow`) while
        the statements run. A transient error keeps them held (`kept`), for `kept_over`."""
        if self.kept:
            yield  # (held over: released when the entry is finished)
            return
        self.info.lock.acquire_write()
        if rows_flow:
            self.info.update(shape=None)  # (refresh sets it again)
            self.info.lock.release_write()
            yield
            return
        try:
            yield
        except BaseException as exc:
            if self.keeping and transient(exc):
                self.kept = True
                raise
            self.info.lock.release_write()
            raise
        self.info.lock.release_write()

    @contextlib.contextmanager
    def kept_over(self) -> Iterator[None]:
        """An entry run with its retries: the batches a transient error left held stay held
        till it ends (finished, or given up)."""
        self.keeping = True
        try:
            yield
        finally:
            self.keeping = False
            if self.kept:
                self.kept = False
                self.info.lock.release_write()
