"""A group's journal entries in their order: a decision's entry run with retries of what a
transient error broke off; one the downstream refuses held with its error, and those after it
with it (they were made for the table after it), till the operator runs it again or skips it;
at the start, what a crash left unfinished finished (`recover`)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pymysql

from replicator.apply.ddl_job import JournalWaits
from replicator.apply.downstream_alter import CopyFailed
from replicator.apply.journal_runner import JournalRunner
from replicator.apply.meta import Meta
from replicator.schema.coordinator import Decision
from replicator.shard_id import ShardId
from replicator.transient import Retrier, transient

log = logging.getLogger("shardmerge.ddl")


class JournalEntries:
    def __init__(self, target: str, meta: Meta, runner: JournalRunner, retrier: Callable[[str], Retrier]):
        """`retrier`: a stage's retries, as its executor counts and shows them."""
        self.target = target
        self.meta = meta
        self.runner = runner
        self.retrier = retrier
        # journal entries not run, in order: seq -> the downstream's refusal (None: it waits
        # for an earlier one); what follows one runs once the operator resolved it
        self.held: dict[int, str | None] = {}

    def run_decided(self, seq: int, shard: ShardId | None, decision: Decision) -> None:
        """Run the entry `seq` a decision saved for its statements, after the entries held
        before it; it waits with them while one is (`JournalWaits`)."""
        statements = list(decision.downstream)
        if self.held:
            # (L43: a key an entry the downstream refused was to add, dropped by the next)
            first = min(self.held)
            self.held[seq] = None
            raise JournalWaits(seq, first, self.held[first] or "")
        tables = [step.after for step in decision.steps]
        run = lambda: self.runner.run(seq, statements, 0, tables, decision.before)  # noqa: E731
        self._held_on_refusal(seq, lambda: self._retried(seq, shard, run))

    def _retried(self, seq: int, shard: ShardId | None, run: Callable[[], None]) -> None:
        """Run journal entry `seq` (`run`). A transient error (replicator/transient.py) is
        retried with backoff after reconnecting, the entry finished from where its recovery
        says (its statement read from the table: did it run?); only the downstream refusing
        a statement raises. Issue 70: a connection killed once during a DDL paused the
        shard till a person acted, its way out stale by then. The applier's batches held
        when the error came stay held till the entry is finished (or given up): the table
        between two of its statements may lack a column their rows name (chaos: a rename's
        entry broken off after its first statement, the other shards' rows refused)."""
        what = f"{self.target} journal entry {seq}" + (f" of {shard}" if shard else "")
        with self.runner.hold.kept_over():
            self.retrier("journal").run(what, lambda again: self._finish_pending(seq) if again else run())

    def _finish_pending(self, seq: int) -> None:
        """Journal entry `seq` finished from where it stands (done already: nothing)."""
        entry = next((e for e in self.meta.journal.pending(self.target) if e["seq"] == seq), None)
        if entry is not None:
            self.runner.finish(entry)

    def _held_on_refusal(self, seq: int, run: Callable[[], None]) -> None:
        """Run a journal entry; refused by the downstream, it is held with its error."""
        try:
            run()
        except (CopyFailed, pymysql.err.MySQLError) as exc:
            self.held[seq] = f"{type(exc).__name__}: {exc}"
            raise

    def finish_entry(self, seq: int, skip: bool) -> list[ShardId]:
        """An operator's way out of a downstream DDL that failed: run the rest of
        journal entry `seq` again (after fixing the downstream), or mark it done (the
        operator made the change by hand, or does without it). The entries that waited
        for it run then, in order, till one fails. Returns the shards of those that ran."""
        pending = self.meta.journal.pending(self.target)
        entry = next((e for e in pending if e["seq"] == seq), None)
        if entry is None:
            raise ValueError(f"{self.target} has no pending journal entry {seq}")
        if pending[0]["seq"] != seq:
            raise ValueError(
                f"{self.target}: journal entry {pending[0]['seq']} comes first (entries run in their order)"
            )
        if skip:
            done = self.meta.journal.sql_progress(self.target, seq, len(entry["statements"]), True)
            self.meta.execute([done])
            self.runner.table.refresh()
        else:
            # (from where its recovery says: its statement may have run, its progress not saved)
            self._held_on_refusal(seq, lambda: self.runner.finish(entry))
        self.held.pop(seq, None)
        ran = []
        for later in pending[1:]:
            try:
                self._held_on_refusal(later["seq"], lambda e=later: self.runner.finish(e))
            except (CopyFailed, pymysql.err.MySQLError) as exc:
                log.error("%s: journal entry %d fails downstream: %s", self.target, later["seq"], exc)
                break
            self.held.pop(later["seq"], None)
            ran.append(later["shard"])
        return ran

    def recover(self) -> tuple[int, list[tuple[dict, str]]]:
        """Finish journal entries a crash left unfinished; returns how many, and the
        entries the downstream refuses (with the error), which wait for an operator."""
        entries = self.meta.journal.pending(self.target)
        for n, entry in enumerate(entries):
            try:
                self.runner.finish(entry)
            except (CopyFailed, pymysql.err.MySQLError) as exc:
                if transient(exc):  # (the start waits for the downstream, and tries again)
                    raise
                # (pt-online-schema-change's refusal too: the daemon starting again must not
                # die of it, L07)
                error = f"{type(exc).__name__} {exc.args}"
                log.error("%s: journal entry %d fails downstream: %s", self.target, entry["seq"], error)
                self.held = {e["seq"]: error if e is entry else None for e in entries[n:]}
                self.runner.hold.recovered()
                return n, [(e, error) for e in entries[n:]]
        self.runner.hold.recovered()
        return len(entries), []
