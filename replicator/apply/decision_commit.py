"""Decide, commit, then install (issue 70): a group's decision is saved, with the state it
leaves and the statements it calls for, in one transaction before anything acts on it.

The coordinator's state belongs to the group's executor thread; the other threads read
the `GroupView` it publishes once a decision committed. A decision works on a copy of that
state (`Coordinator.decide`), and the copy it leaves is installed once its writes committed;
when they do not (a connection killed at the commit, the lease lost, a bug halfway through a
decision) the state in place is the one before, untouched: memory is what the database
holds, never ahead of it. (Before issue 70 the coordinator's memory stayed ahead and the
writes it had drained were gone: the next decision saved only the shards it touched.)

A commit whose answer was lost may have landed all the same: the coordinator's history
count says (every decision adds one entry), and then the decision stands, its state
installed. Otherwise a transient error decides again from the state in place, which gives
the same decision; any other error is the caller's to report."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from replicator.apply.meta import Meta
from replicator.faults import crash_point
from replicator.schema.coordinator import Coordinator
from replicator.state.coordinator_store import MetaStore
from replicator.transient import Retrier

T = TypeVar("T")


class DecisionCommit:
    def __init__(self, coordinator: Coordinator, store: MetaStore, meta: Meta, target: str, retrier: Retrier):
        self.coordinator = coordinator
        self.store = store
        self.meta = meta
        self.target = target
        self.retrier = retrier

    def run(self, decide: Callable[[], tuple[T, list[str]]]) -> T:
        """`decide` runs on a copy of the coordinator's state and returns its outcome and
        the writes that save it; they commit together (with the lease's fence), and then
        the copy is installed. Otherwise the state in place is the one before."""
        return self.retrier.run(f"{self.target}: a decision", lambda again: self._once(decide))

    def _once(self, decide: Callable[[], tuple[T, list[str]]]) -> T:
        mark = self.store.history_seq
        try:
            state, (value, writes) = self.coordinator.decide(decide)
        except Exception:
            self._forget(mark)  # (a decision broken off: what it queued is not written)
            raise
        try:
            crash_point("ddl_decided")
            self.meta.execute(writes)
        except Exception:
            if not self.landed(mark):
                raise
            # (the commit landed; only its answer was lost)
        self.coordinator.install(state)
        return value

    def landed(self, mark: int) -> bool:
        """Whether the writes of a decision whose commit failed committed all the same: the
        group's history grew past `mark` (read again while the downstream does not answer);
        the history's count is set to what the meta schema holds."""
        what = f"{self.target}: reading the group's history count"
        return self.retrier.run(what, lambda again: self._read(mark))

    def _read(self, mark: int) -> bool:
        count = self.meta.groups.history_count(self.target)
        self._forget(count)
        return count > mark

    def _forget(self, count: int) -> None:
        self.store.flush_sql()
        self.store.history_seq = count
