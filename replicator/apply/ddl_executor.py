"""Running a shard group's downstream DDL: the DDL barrier and the journal.

One thread per shard group takes the group's DDLs one at a time (docs/design.md "One DDL at a time"): it
waits until every earlier row of the shard is applied, asks the
coordinator, and writes the decision, the coordinator's new state and the
statements to run into the journal in one transaction (docs/design.md "The DDL journal"). Then it runs
the statements one by one, each followed by the journal's
progress. After a crash, `recover` finds an unfinished entry and, for the
statement that was running, compares the downstream table with the one that
statement should produce (the coordinator's step says which: `DownstreamStep.after`,
journaled with the statement): equal means it ran, so it is skipped; otherwise it
is run. A DDL is never run twice or lost.

`GroupExecutor` is the job loop the daemon talks to (its thread and queue, the `GroupView`
it publishes, the results it sends back); the rest is in modules of their own: the jobs and
their results (ddl_job.py), what a decision saves (decision_writes.py, committed by
decision_commit.py), the journal's entries in their order, retries and refusals
(journal_entries.py), an entry's statements run downstream (journal_runner.py), and what
the applier knows of the table (table_refresh.py).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping, Sequence

import pymysql

from lattice import Flavor
from replicator.apply.applier import Applier
from replicator.apply.ddl_job import DDLJob, DDLResult, JournalWaits
from replicator.apply.decision_commit import DecisionCommit
from replicator.apply.decision_writes import Decided, DecisionWrites
from replicator.apply.downstream_alter import CopyFailed
from replicator.apply.journal_entries import JournalEntries
from replicator.apply.journal_runner import JournalRunner
from replicator.apply.meta import Meta
from replicator.apply.resumed_renames import paused_renames, resumed_renames
from replicator.apply.statement_run import RunningDDL, StatementRunner
from replicator.apply.table_refresh import TableRefresh
from replicator.apply.target import TargetInfo
from replicator.apply.version_fence import DdlMarks
from replicator.config import EventFilter
from replicator.faults import crash_point
from replicator.schema.coordinator import Coordinator
from replicator.schema.group import GroupView, Result
from replicator.shard_id import ShardId
from replicator.state.coordinator_store import MetaStore
from replicator.transient import Retrier, Retrying, Stopped

log = logging.getLogger("shardmerge.ddl")
VERSION_POLL = 0.1  # seconds between a member's looks at a table its coordinator's DDL changes
ENTRY_WAIT = 5.0  # seconds a member waits for a journal entry undone since it was made, the table not busy


class GroupExecutor:
    def __init__(
        self,
        target: str,
        coordinator: Coordinator,
        store: MetaStore,
        meta: Meta,
        applier: Applier,
        info: TargetInfo,
        connection: dict,
        results: queue.Queue,
        events: tuple[EventFilter, ...] = (),
        copy_mode: str = "pt-osc",
        flavors: Mapping[str, Flavor] | None = None,
        marks: DdlMarks | None = None,
    ):
        """`copy_mode` (options.copy_ddl): how an ALTER needing a copy of the table runs
        (replicator/apply/downstream_alter.py); `flavors`: each source's server's, in which
        its tables' CREATE TABLE are kept; `events` (filters.events): DDLs the coordinator
        takes as they filter them; `marks`: where the task's daemons share the table, its
        mark in the meta schema (version_fence.py)."""
        self.target = target
        self.coordinator = coordinator
        self.store = store
        self.meta = meta
        self.applier = applier
        self.info = info
        self.connection = connection
        self.results = results
        self.entry: int | None = None  # the journal entry of the job at hand
        # (a member's: the journal's entries below this were seen done or left undone, and
        # those said left undone, `await_entries`)
        self._entries_done = 1
        self._undone: frozenset[int] = frozenset()
        # the group as the last job left it: what other threads read (replicator/schema/group.py)
        self.view: GroupView = coordinator.view()
        self.jobs: queue.Queue[DDLJob | None] = queue.Queue()
        self.thread = threading.Thread(target=self._run, name=f"ddl-{target}", daemon=True)
        self.busy = threading.Event()
        self.stopping = threading.Event()
        # the group's work waiting on a transient error (query-status); None: none
        self.retrying: Retrying | None = None
        self.decisions = DecisionWrites(coordinator, store, meta, target, events, dict(flavors or {}))
        self.commits = DecisionCommit(coordinator, store, meta, target, self._retrier("decision"))
        self.table = TableRefresh(target, coordinator, info, connection)
        statements = StatementRunner(target, coordinator, meta, connection, copy_mode)
        self.runner = JournalRunner(meta, self.table, statements, marks)
        self.journal = JournalEntries(target, meta, self.runner, self._retrier)

    def _retrier(self, stage: str) -> Retrier:
        metrics = self.applier.metrics if self.applier is not None else None

        def count(stage: str, kind: str) -> None:
            if metrics is not None:
                metrics.retries.inc(stage, kind)

        return Retrier(stage, self.stopping, lambda retrying: setattr(self, "retrying", retrying), count)

    @property
    def running(self) -> RunningDDL | None:
        """The downstream statement running now (query-status)."""
        return self.runner.statements.running

    @property
    def held(self) -> dict[int, str | None]:
        """Journal entries not run, in order: seq -> the downstream's refusal (None: it waits
        for an earlier one) (`JournalEntries.held`)."""
        return self.journal.held

    def publish(self) -> GroupView:
        """The group's view made anew; only this executor's thread (or the daemon's, before
        `start`) changes the coordinator, so only it calls this."""
        self.view = self.coordinator.view()
        return self.view

    def start(self) -> None:
        self.publish()  # (after `recover` and `refresh`)
        self.thread.start()

    def submit(self, job: DDLJob) -> None:
        self.busy.set()
        self.jobs.put(job)

    def stop(self) -> None:
        self.stopping.set()  # (a retry waiting ends: the next start finishes its entry)
        self.jobs.put(None)
        self.thread.join(timeout=600)

    def idle(self) -> bool:
        return self.jobs.empty() and not self.busy.is_set()

    # -- one job at a time -----------------------------------------------------------------
    def _run(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            self.busy.set()
            try:
                if job.reload is not None:
                    self.results.put(self._reloaded(job))
                    continue
                if job.change is not None:
                    # the barrier: the shard's earlier rows are all downstream before its DDL counts
                    self.applier.wait_shard(job.shard)
                    crash_point("ddl_barrier_passed")
                    if self._read_again(job):
                        log.info(
                            "%s: DDL of %s waits: its shard is paused at a row before it; both are "
                            "read again when it resumes",
                            self.target,
                            job.shard,
                            extra={
                                "shard": job.shard,
                                "source": job.shard.source,
                                "position": job.change.position,
                            },
                        )
                        self.results.put(DDLResult(job, None, deferred=True))
                        continue
                paused = paused_renames(self.coordinator)
                decided = self._handle(job)
                decision = decided.decision
                view = self.publish()
                block = view.blocked.get(job.shard) if job.shard is not None else None
                self.results.put(
                    DDLResult(
                        job,
                        decision,
                        block_reason=block.reason if block else None,
                        filtered=decided.filtered,
                        resumed_renames=resumed_renames(job, decision, paused),
                        view=view,
                        pins=decided.pins,
                    )
                )
            except Stopped:
                log.info(
                    "DDL of %s: left to the next start, which finishes its journal entry", job.shard or ""
                )
            except JournalWaits as exc:
                log.error("DDL of %s: journal entry %d %s", job.shard or "", exc.seq, exc)
                self.results.put(DDLResult(job, None, exc.error, exc.seq, exc.first))
            except (CopyFailed, pymysql.err.MySQLError) as exc:  # the server's or the tool's own words
                log.error("DDL of %s failed: %s", job.shard or "", exc)
                self.results.put(DDLResult(job, None, f"{type(exc).__name__}: {exc}", self.entry))
            except Exception as exc:  # report and keep the group's thread alive
                log.exception("DDL of %s failed", job.shard or "")
                self.results.put(DDLResult(job, None, f"{type(exc).__name__}: {exc}"))
            finally:
                if self.jobs.empty():
                    self.busy.clear()

    def _reloaded(self, job: DDLJob) -> DDLResult:
        """A member's group read again as the coordinator's decisions left it, and its table
        (issue 75): the member takes them while it runs. The table is read once the
        decisions' journal entries ran downstream (`await_entries`): a decision commits before
        its statements run, and a table read before them, said to be at the decision's
        version, would keep the member's batches built for the table of before (the chaos run
        with partitions found a rename's old name dropped under rows still clearing it)."""
        decided = self.coordinator.reload()
        self.await_entries()
        self.refresh()
        return DDLResult(job, None, view=self.publish(), decided=decided)

    def await_entries(self) -> None:
        """A member's (that does not coordinate), before it reads its table: wait till every
        journal entry of the group made so far is done and no DDL is changing the table (its
        mark, `TableHold.entry`). An entry older than ENTRY_WAIT and undone while the table is
        not being changed (the downstream refused it and it waits for the operator, or its
        coordinator died and the next one has not finished it yet) is not waited for: said
        once, the table read as it is."""
        journal, versions = self.meta.journal, self.meta.table_versions
        end = journal.next_seq(self.target)
        while True:
            undone = journal.unfinished(self.target, self._entries_done, end)
            at = versions.rows().get(self.target)
            busy = at is not None and at.busy
            young = [seq for seq, age in undone.items() if age < ENTRY_WAIT]
            if not busy and not young:
                stale = frozenset(undone) - self._undone
                if stale:
                    log.warning(
                        "%s: journal entries %s not done, the table not being changed (refused "
                        "downstream, or their coordinator gone): the group is read with the table as it is",
                        self.target,
                        ", ".join(map(str, sorted(stale))),
                    )
                self._undone = frozenset(undone)
                self._entries_done = min(undone) if undone else end
                return
            if self.stopping.wait(VERSION_POLL):
                raise Stopped()

    def _read_again(self, job: DDLJob) -> bool:
        """The shard's rows from before its DDL are dropped (the downstream refused one of
        them): they are read again when it resumes, and so is the DDL, to be decided
        after them, as it was written upstream. Decided now, it would change the table
        under rows written before it (a rename finishing would leave their values out).
        A blocked shard's DDLs are decided though, paused or resumed meanwhile: one of
        them may resolve its conflict, and its paused rows go through a scratch window
        (`Windows`) that takes its DDLs as the coordinator had them (L36: one resumed by
        another shard's decision while its next DDL waited here was taken for a shard
        paused by a row, and the rows after that DDL came before it)."""
        first = self.applier.drops.refused.get(job.shard)
        if first is None or job.change.id < first:
            return False
        state = self.coordinator.shards.get(job.shard)
        return state is not None and state.block is None

    def _handle(self, job: DDLJob) -> Decided:
        change = job.change
        self.entry = None
        # decided and saved together, or the coordinator's state is read back (decision_commit.py)
        decided = self.commits.run(lambda: self.decisions.decide(job))
        decision, seq = decided.decision, decided.seq
        crash_point("ddl_journaled")
        if decided.pins:
            crash_point("pins_saved")  # (before the daemon installs them)
        log.info(
            "%s: %s %s -> %s (version %s)%s%s",
            self.target,
            job.shard or "",
            " ".join((change.change.statement if change else "").split())[:200],
            decision.result,
            decision.version,
            f": {decision.message}" if decision.result != Result.APPLIED else "",
            f" (event filter: {decided.filtered})" if decided.filtered else "",
            extra={
                "shard": job.shard,
                "source": job.shard.source if job.shard else None,
                "position": change.position if change else None,
            },
        )
        if decision.downstream:
            self.entry = seq
            self.journal.run_decided(seq, job.shard, decision)
        else:
            # the table is unchanged but the shard's columns may not be: one that drops the
            # new name of a pending rename clears it no more, its rows take the default
            # (L42: the NULL left in them refused the NOT NULL the rename ends with)
            self.info.update(cleared=self.table.cleared())
            if self.runner.hold.marks is not None:  # (the task's other daemons clear as this one)
                self.runner.hold.marks.cleared(self.info.major, self.info.cleared)
        return decided

    # -- the operator's and the start's --------------------------------------------------
    def run_given(self, statements: Sequence[str]) -> None:
        """The operator's statements for the downstream (`JournalRunner.run_given`)."""
        self.runner.run_given(statements)

    def finish_entry(self, seq: int, skip: bool) -> list[ShardId]:
        """The operator's way out of a journal entry that failed (`JournalEntries.finish_entry`)."""
        return self.journal.finish_entry(seq, skip)

    def recover(self) -> tuple[int, list[tuple[dict, str]]]:
        """Journal entries a crash left unfinished, finished (`JournalEntries.recover`)."""
        return self.journal.recover()

    def refresh(self, conn: pymysql.connections.Connection | None = None) -> None:
        """What the applier knows of the table, read from the server (`TableRefresh.refresh`)."""
        self.table.refresh(conn)
