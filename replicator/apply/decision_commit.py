"""Decide, commit, then install (issue 70): a group's decision is saved, with the state it
leaves and the statements it calls for, in one transaction before anything acts on it.

The coordinator's state belongs to the group's executor thread; the other threads read
the `GroupView` it publishes once a decision committed. A decision works on that state,
and when its writes do not commit (a connection killed at the commit, the lease lost, a
bug halfway through a decision) the state is read back from the meta schema: memory is
what the database holds, never ahead of it. Before, the coordinator's memory stayed ahead
and the writes it had drained were gone: the next decision saved only the shards it
touched.

A commit whose answer was lost may have landed all the same: the coordinator's history
count says (every decision adds one entry), and then the decision stands. Otherwise a
transient error decides again from the state read back, which gives the same decision;
any other error is the caller's to report."""

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
        """`decide` changes the coordinator and returns its outcome and the writes that
        save it; they commit together (with the lease's fence) or the state is read back."""
        return self.retrier.run(f"{self.target}: a decision", lambda again: self._once(decide))

    def _once(self, decide: Callable[[], tuple[T, list[str]]]) -> T:
        mark = self.store.history_seq
        decided = False
        try:
            value, writes = decide()
            decided = True
            crash_point("ddl_decided")
            self.meta.execute(writes)
            return value
        except Exception:
            if self.reinstall(mark) and decided:
                return value  # (the commit landed; only its answer was lost)
            raise

    def reinstall(self, mark: int) -> bool:
        """The coordinator's state read back from the meta schema (retried while the
        downstream does not answer); True when the history grew past `mark`: the
        decision's writes committed."""
        what = f"{self.target}: reading the group's state back"
        return self.retrier.run(what, lambda again: self._read(mark))

    def _read(self, mark: int) -> bool:
        count = self.meta.groups.history_count(self.target)
        self.store.flush_sql()  # (the writes that did not commit)
        self.coordinator.reload()
        self.store.history_seq = count
        return count > mark
