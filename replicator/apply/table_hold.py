"""The applier's batches on a group's table held (its write lock, `TargetInfo.lock`) while a
journal entry's statements change the table, or let go on during those that keep every row;
and held over from an entry a transient error broke off till its retry finished it. Where the
task's daemons share the table, the other daemons' batches are held too (`DdlMarks`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from replicator.apply.target import TargetInfo
from replicator.apply.version_fence import DdlMarks
from replicator.transient import transient


class TableHold:
    def __init__(self, info: TargetInfo, marks: DdlMarks | None = None):
        """`marks`: where the task's daemons share the table, its mark in the meta schema,
        which holds the other daemons' batches as the lock holds this one's."""
        self.info = info
        self.marks = marks
        # the applier's batches on the table held over from an entry a transient error broke
        # off between its statements, till `JournalEntries._retried` finished it (its
        # executor's thread only)
        self.keeping = self.kept = False
        # a journal entry's mark on the shared table, from its first statement to its last
        # (`entry`); kept over a transient error's retry as the lock is (`entry_kept`)
        self.entry_marked = self.entry_kept = False

    @contextlib.contextmanager
    def entry(self) -> Iterator[None]:
        """A journal entry's statements, all of them. Where the task's daemons share the table,
        its mark holds the other daemons' batches from the entry's first statement to its last:
        they read the table, and the columns their rows clear, as each decision leaves it, never
        between two of its statements (chaos with partitions: a member read it between a
        rename's copy and the DROP of its old name, at the new version already, and its rows
        named the old name after it was dropped). This daemon's own batches go on during the
        statements that let them (`held`)."""
        if self.marks is None or self.entry_marked or self.kept:
            yield
            return
        self.marks.begin(self.info.major)
        self.entry_marked = True
        try:
            yield
        except BaseException as exc:
            if self.keeping and transient(exc):
                self.entry_kept = True  # (ended with the retry: `kept_over`)
                raise
            self._end_entry()
            raise
        self._end_entry()

    def _end_entry(self) -> None:
        self.entry_marked = False
        self.marks.end(self.info.major, self.info.cleared)

    @contextlib.contextmanager
    def held(self, rows_flow: bool) -> Iterator[None]:
        """The applier's batches on the table held (or let go on, with `rows_flow`) while
        the statements run. A transient error keeps them held (`kept`), for `kept_over`."""
        if self.kept:
            yield  # (held over: released when the entry is finished)
            return
        if self.marks is not None and not rows_flow and not self.entry_marked:
            self.marks.begin(self.info.major)  # (the other daemons' batches first)
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
            self._release()
            raise
        self._release()

    def recovered(self) -> None:
        """At the start, the group's journal entries finished (or waiting for an operator, as
        the coordinator's own batches go on meanwhile): a mark a coordinator that died left on
        the table is cleared, at the version the table is at now, and the other daemons'
        batches go on, built for it as it is."""
        if self.marks is not None and not self.kept:
            self.marks.end(self.info.major, self.info.cleared)

    def _release(self) -> None:
        self.info.lock.release_write()
        if self.marks is not None and not self.entry_marked:  # (the table as refreshed: its version now)
            self.marks.end(self.info.major, self.info.cleared)

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
                self._release()
            if self.entry_kept:
                self.entry_kept = False
                self._end_entry()
