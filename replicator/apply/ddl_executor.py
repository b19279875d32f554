"""Running a shard group's downstream DDL: the DDL barrier and the journal.

One thread per shard group takes the group's DDLs one at a time (seed 002 "DM
master"): it waits until every earlier row of the shard is applied, asks the
coordinator, and writes the decision, the coordinator's new state and the
statements to run into the journal in one transaction (seed 003's recovery
journal). Then it runs the statements one by one, each followed by the journal's
progress. After a crash, `recover` finds an unfinished entry and, for the
statement that was running, compares the downstream table with the one that
statement should produce (the coordinator's step says which: `DownstreamStep.after`,
journaled with the statement): equal means it ran, so it is skipped; otherwise it
is run. A DDL is never run twice or lost.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pymysql

from lattice import (
    Flavor,
    IndexKind,
    Table,
    is_old_name_index_statement,
    keeps_rows,
    key,
    render_table,
    table_from_data,
    table_to_data,
)
from replicator.apply.applier import Applier
from replicator.apply.decision_commit import DecisionCommit
from replicator.apply.downstream_alter import CopyFailed, run_alter
from replicator.apply.inspect import read_table, table_exists, with_server_choices
from replicator.apply.meta import Meta
from replicator.apply.shard_rows import batch_size, run_batches
from replicator.apply.target import TargetInfo
from replicator.config import EventFilter
from replicator.faults import crash_point, fault_point, faults_armed
from replicator.schema.coordinator import Coordinator, Decision
from replicator.schema.event_filter import kept_columns, taken
from replicator.schema.group import Block, BlockKind, GroupView, Result
from replicator.schema.row_fixes import on_scratch
from replicator.servers import connect_downstream
from replicator.shard_id import ShardId
from replicator.shard_id import table_key as shard_key
from replicator.source.messages import DDLEvent, Pin
from replicator.source.row_events import row_shape
from replicator.source.source_state import PIN
from replicator.state.coordinator_store import MetaStore
from replicator.state.pauses import RESUMING, Pause, ReplayRename
from replicator.state.positions import Position
from replicator.transient import Retrier, Retrying, Stopped, transient

log = logging.getLogger("shardmerge.ddl")


@dataclass(frozen=True)
class RunningDDL:
    """A downstream statement under way: how it runs (online: instantly or in place; pt-osc;
    copy: the server's, holding the table's writes; rows: an UPDATE of a fill or a rename's
    copy) and since when (epoch seconds)."""

    statement: str
    how: str
    started: float


@dataclass
class DDLJob:
    shard: ShardId | None  # None: a request on the whole group (DDL propagation)
    change: DDLEvent | None  # None for requests that come from an operator
    action: Callable[[Coordinator], Decision] | None = None
    # an operator's that says what the shard's table is (set-schema, binlog replace): a shard
    # paused as one whose rows could not be read has them read again with it (`_pins`)
    states_table: bool = False


class JournalWaits(Exception):
    """A decision's downstream statements wait for an earlier journal entry of the group
    that the downstream refused: they were made for the table after it."""

    def __init__(self, seq: int, first: int, error: str):
        super().__init__(f"waits for journal entry {first}, which failed: {error}")
        self.seq, self.first, self.error = seq, first, error


@dataclass
class DDLResult:
    job: DDLJob
    decision: Decision | None
    error: str | None = None
    journal: int | None = None  # failed: the journal entry that did not run (None: none)
    waits_for: int | None = None  # ... as it waits for this earlier one, which failed
    block_reason: str | None = None  # why the shard is blocked, when it is
    filtered: str | None = None  # the event filter kind that changed the DDL (event_filter.taken)
    # the renames each shard this decision resumed made while paused (and the resuming DDL's)
    resumed_renames: dict[ShardId, tuple[ReplayRename, ...]] | None = None
    view: GroupView | None = None  # the group after the job (None: the job failed)
    # not decided: its shard paused at one of its rows before it, read again after them
    # when it resumes (`_read_again`)
    deferred: bool = False
    # the tables the decision set for shards it resumed whose rows could not be read, saved
    # with it (`GroupExecutor._pins`)
    pins: Mapping[ShardId, Pin] = field(default_factory=dict)


@dataclass(frozen=True)
class _PausedRenames:
    """A blocked shard's renames, and the columns (keys) of the table it had when it paused."""

    renames: tuple[tuple[str, str], ...]
    had: frozenset[str]


def _paused_renames(coordinator: Coordinator) -> dict[ShardId, _PausedRenames]:
    out = {}
    for shard, block in coordinator.blocked.items():
        state = coordinator.shards.get(shard)
        accepted = state.accepted if state is not None else None
        had = frozenset(c.key for c in accepted.columns) if accepted is not None else frozenset()
        out[shard] = _PausedRenames(block.renames, had)
    return out


def _resumed_renames(
    job: DDLJob, decision: Decision, paused: dict[ShardId, _PausedRenames]
) -> dict[ShardId, tuple[ReplayRename, ...]]:
    """What the rows of each shard the decision resumed, read again, need renamed."""
    out = {}
    change = job.change.change if job.change is not None else None
    for shard in decision.unblocked:
        before = paused.get(shard, _PausedRenames((), frozenset()))
        pairs = list(before.renames)
        if shard == job.shard and change is not None:
            pairs += [(r.old, r.new) for r in change.renames]
        if pairs:
            out[shard] = tuple(ReplayRename(old, new, held=key(old) in before.had) for old, new in pairs)
    return out


def is_dml(statement: str) -> bool:
    """A row change (which commits with the journal's progress), also under a `SET STATEMENT
    ... FOR` prefix (`Rules.lenient_prefix`)."""
    head = statement.lstrip()
    if head[:13].upper() == "SET STATEMENT":
        found = re.search(r"\bFOR\s+", head, re.IGNORECASE)
        head = head[found.end() :] if found else head
    return head[:6].upper() in ("UPDATE", "DELETE", "INSERT")


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
    ):
        """`copy_mode` (options.copy_ddl): how an ALTER needing a copy of the table runs
        (replicator/apply/downstream_alter.py); `flavors`: each source's server's, in which
        its tables' CREATE TABLE are kept."""
        self.target = target
        self.coordinator = coordinator
        self.store = store
        self.meta = meta
        self.applier = applier
        self.info = info
        self.copy_mode = copy_mode
        self.running: RunningDDL | None = None  # the downstream ALTER running now (query-status)
        self.connection = connection
        self.results = results
        self.events = events  # filters.events: DDLs the coordinator takes as they filter them
        self.filtered: str | None = None  # of the job at hand
        self.entry: int | None = None  # the journal entry of the job at hand
        self.pins: dict[ShardId, Pin] = {}  # of the job at hand
        self.flavors = dict(flavors or {})
        # journal entries not run, in order: seq -> the downstream's refusal (None: it waits
        # for an earlier one); what follows one runs once the operator resolved it
        self.held: dict[int, str | None] = {}
        # the applier's batches on the table held over from an entry a transient error broke
        # off between its statements, till `_retried` finished it (this thread's only)
        self.keeping = self.kept = False
        # the group as the last job left it: what other threads read (replicator/schema/group.py)
        self.view: GroupView = coordinator.view()
        self.jobs: queue.Queue[DDLJob | None] = queue.Queue()
        self.thread = threading.Thread(target=self._run, name=f"ddl-{target}", daemon=True)
        self.busy = threading.Event()
        self.stopping = threading.Event()
        # the group's work waiting on a transient error (query-status); None: none
        self.retrying: Retrying | None = None
        self.commits = DecisionCommit(coordinator, store, meta, target, self._retrier("decision"))

    def _retrier(self, stage: str) -> Retrier:
        metrics = self.applier.metrics if self.applier is not None else None

        def count(stage: str, kind: str) -> None:
            if metrics is not None:
                metrics.retries.inc(stage, kind)

        return Retrier(stage, self.stopping, lambda retrying: setattr(self, "retrying", retrying), count)

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
                paused = _paused_renames(self.coordinator)
                decision = self._handle(job)
                view = self.publish()
                block = view.blocked.get(job.shard) if job.shard is not None else None
                self.results.put(
                    DDLResult(
                        job,
                        decision,
                        block_reason=block.reason if block else None,
                        filtered=self.filtered,
                        resumed_renames=_resumed_renames(job, decision, paused),
                        view=view,
                        pins=self.pins,
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

    def _handle(self, job: DDLJob) -> Decision:
        change = job.change
        # decided and saved together, or the coordinator's state is read back (decision_commit.py)
        decision, seq = self.commits.run(lambda: self._decide(job))
        crash_point("ddl_journaled")
        if self.pins:
            crash_point("pins_saved")  # (before the daemon installs them)
        log.info(
            "%s: %s %s -> %s (version %s)%s%s",
            self.target,
            job.shard or "",
            " ".join((change.change.statement if change else "").split())[:200],
            decision.result,
            decision.version,
            f": {decision.message}" if decision.result != Result.APPLIED else "",
            f" (event filter: {self.filtered})" if self.filtered else "",
            extra={
                "shard": job.shard,
                "source": job.shard.source if job.shard else None,
                "position": change.position if change else None,
            },
        )
        statements = list(decision.downstream)
        if statements and self.held:
            # (L43: a key an entry the downstream refused was to add, dropped by the next)
            first = min(self.held)
            self.held[seq] = None
            raise JournalWaits(seq, first, self.held[first] or "")
        if statements:
            self.entry = seq
            tables = [step.after for step in decision.steps]
            run = lambda: self.run_journal(seq, statements, 0, tables, decision.before)  # noqa: E731
            self._held_on_refusal(seq, lambda: self._retried(seq, job.shard, run))
        else:
            # the table is unchanged but the shard's columns may not be: one that drops the
            # new name of a pending rename clears it no more, its rows take the default
            # (L42: the NULL left in them refused the NOT NULL the rename ends with)
            self.info.update(cleared=self._cleared())
        return decision

    def _decide(self, job: DDLJob) -> tuple[tuple[Decision, int | None], list[str]]:
        """The job's decision, on the coordinator's state, and the writes that save it: the
        coordinator's state, the DDL done, the shards resuming, the pins, the journal entry
        of its statements (its number: None without statements)."""
        change = job.change
        self.filtered, self.entry, self.pins = None, None, {}
        unknown = {s: b for s, b in self.coordinator.blocked.items() if b.kind == BlockKind.UNSUPPORTED}
        # a shard paused by the daemon alone (rows its worker could not read, or could not
        # replay) whose table the operator states: its rows are read again with that table
        stated = job.shard if job.states_table and job.shard not in self.coordinator.blocked else None
        # (read before the coordinator decides; a decision resuming one of them saves its
        # table at its pause, `_pins`)
        pauses = self.meta.pauses.load() if unknown or stated else {}
        if job.action is not None:
            decision = job.action(self.coordinator)
        else:
            state = self.coordinator.shards.get(job.shard)
            shard_change, self.filtered = taken(self.events, change.change, state and state.current)
            # `drop column`: what the shard drops stays downstream (saved with this decision)
            self.coordinator.pin(kept_columns(self.events, shard_change))
            decision = self.coordinator.apply(shard_change, position=change.position)
        statements = list(decision.downstream)
        writes = self.store.flush_sql()
        if change is not None:
            history = self.meta.history.sql(change.source, change.id, change.tables)
            if history:
                writes.append(history)
            writes.append(self.meta.ddl_done.sql(job.shard, change.id))
        # a shard this decision unblocks (a DDL's, or an operator's: a skip drops the DDL, not
        # its rows) is resuming, in the same transaction: a crash before the daemon resumes it
        # must not leave it paused with nothing blocking it; its pause is kept till the rows it
        # wrote meanwhile are merged (Daemon._reopen_window)
        for shard in decision.unblocked:  # (its old reason's ways out apply no more)
            writes += [self.meta.pauses.sql_replay(shard, RESUMING, ()), self.meta.pauses.sql_resuming(shard)]
        self.pins = self._pins(unknown, pauses, stated)
        for shard, pin in self.pins.items():
            writes.append(self.meta.history.sql(shard.source, pin.id, {pin.table: pin.create}))
            writes.append(self.meta.ddl_done.sql(shard, pin.id))
            if change is None:  # (an operator's: resuming too, read again from its pause after a crash)
                stored = self.meta.pauses
                writes += [stored.sql_replay(shard, RESUMING, ()), stored.sql_resuming(shard)]
        seq = None
        if statements:
            seq = self.meta.journal.next_seq(self.target)
            # the downstream table after each statement, for recovery to tell whether it ran
            tables = [table_to_data(s.after) if s.after is not None else None for s in decision.steps]
            # (the shard's DDL it comes of, by which `shardctl binlog` names it; none: an operator's)
            position = change.position if change is not None else None
            ddl = change.change.statement if change is not None and change.change is not None else None
            writes.append(
                self.meta.journal.sql_entry(
                    self.target, seq, job.shard, str(decision.version), statements, tables, position, ddl
                )
            )
        return (decision, seq), writes

    def _pins(
        self, unknown: Mapping[ShardId, Block], pauses: Mapping[ShardId, Pause], stated: ShardId | None
    ) -> dict[ShardId, Pin]:
        """The table the decision gives each shard whose schema was not known and is now (a
        DDL its tracker could not follow, rows its worker could not read: `set-schema`'s
        table, the DDL `binlog replace` takes, or the one from before for a skip), from where
        the shard paused on: its worker reads its rows again from there with that table, and
        its DDLs since are decided again as read (they were not followed while its schema
        was unknown). `stated`: a shard the daemon alone paused, whose table the operator
        said (live stories: a replace, then its rows read again with the table from before
        the DDL, paused it for good)."""
        # (one the decision leaves blocked otherwise, say in conflict, is known all the same: it
        # reads its rows with that table once it resumes)
        blocked = self.coordinator.blocked
        known = [s for s in unknown if s not in blocked or blocked[s].kind != BlockKind.UNSUPPORTED]
        if stated is not None and stated in pauses and stated not in blocked:
            known.append(stated)
        out = {}
        for shard in known:
            state = self.coordinator.shards.get(shard)
            pause, block = pauses.get(shard), unknown.get(shard)
            if state is None or state.current is None:
                continue
            # from where its table was not known: its pause, or the DDL it could not follow
            # when it ran that while paused already (by a conflict: live stories), its rows
            # before that read as they were
            ats = [pause.first] if pause is not None else []
            if block is not None and block.position:
                ats.append(Position.parse(block.position).change(0))
            if not ats:
                continue
            at = max(ats)
            flavor = self.flavors.get(shard.source, Flavor.MARIADB)
            create = render_table(state.current.renamed(shard.table), flavor)
            out[shard] = Pin((at[0], at[1], PIN), shard_key(shard.schema, shard.table), create)
        return out

    # -- the journal -------------------------------------------------------------------------
    def run_journal(
        self,
        seq: int,
        statements: list[str],
        start: int,
        tables: Sequence[Table | None],
        before: Table | None,
    ) -> None:
        """Run statements[start:] of journal entry `seq`, recording progress after each
        (`tables`: the downstream table after each statement, None where not known;
        `before`: before statements[start]). The applier's batches on the table wait
        meanwhile, except during the statements that may let them go on (`_flows`): then
        they go on, their rows as statements (a row event names columns by their place,
        which an ALTER may move). What the applier knows of the table, and the columns
        its rows clear, is read again after the statements that hold its batches, before
        they go on: a column one of them added (the new name of a rename) is one a flowing
        statement's rows must name, or they would take its default (L05:
        a rename's new name got its default, not the NULL its shards clear it to)."""
        conn = connect_downstream(self.connection)
        try:
            i = start
            while i < len(statements):
                flows = self._flows(before, tables[i:], statements[i:])
                j = i
                while j < len(statements) and flows[j - i] == flows[0]:
                    j += 1
                with self._applier_held(flows[0]):
                    try:
                        for k in range(i, j):
                            self._run_statement(conn, statements[k], seq, k + 1, k + 1 == len(statements))
                    except BaseException as exc:
                        # what ran of the entry changed the table: the applier's batches must
                        # name the columns it has now, read before they go on (live stories
                        # 120004: a rename's entry refused after its DROP of the old name, the
                        # other shards' rows named it still, each refused and paused). Broken
                        # off by a transient error, they wait for its retry (`_applier_held`).
                        if not flows[0] and not transient(exc):
                            self._refresh_quietly()
                        raise
                    if not flows[0] and j < len(statements):
                        self.refresh(conn)
                before, i = tables[j - 1], j
            with self._applier_held(False):
                self.refresh(conn)
        finally:
            self.running = None
            conn.close()

    def _refresh_quietly(self) -> None:
        """`refresh` on a connection of its own, if the downstream answers (else the next
        entry, or the start after, reads it)."""
        with contextlib.suppress(pymysql.err.MySQLError):
            self.refresh()

    def _flows(
        self, before: Table | None, tables: Sequence[Table | None], statements: Sequence[str]
    ) -> list[bool]:
        """Which statements may run with the other shards' rows going on: an ALTER whose
        table before and after has every column the applier's batches name, and takes
        every row the table took before (`keeps_rows`: a relaxing, an index, not a rename,
        a fill, a new unique key or a narrowing, which hold the rows, seed 004), and not
        after a copy of the entry (an UPDATE): what the copy wrote must stand till the
        entry's end, and a row written after it would miss it (a cancelled rename copies
        the new name back into the old one, whose default is NULL till the entry's last
        statement gives it its own: a row of a shard lacking it written in between kept
        NULL, and that statement, NOT NULL, was refused; L35). `before`: the table before
        the first statement (None: unknown, that one holds them)."""
        named = set(self.info.columns)
        flows = []
        copied = False
        for statement, after in zip(statements, tables, strict=True):
            copied = copied or is_dml(statement)
            flows.append(
                before is not None
                and after is not None
                and not copied
                and named <= before.column_map.keys()
                and named <= after.column_map.keys()
                and keeps_rows(before, after, self.coordinator.flavor)
            )
            before = after
        return flows

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
        self.keeping = True
        try:
            self._retrier("journal").run(what, lambda again: self._finish_pending(seq) if again else run())
        finally:
            self.keeping = False
            if self.kept:
                self.kept = False
                self.info.lock.release_write()

    def _finish_pending(self, seq: int) -> None:
        """Journal entry `seq` finished from where it stands (done already: nothing)."""
        entry = next((e for e in self.meta.journal.pending(self.target) if e["seq"] == seq), None)
        if entry is not None:
            self._recover(entry)

    def _held_on_refusal(self, seq: int, run: Callable[[], None]) -> None:
        """Run a journal entry; refused by the downstream, it is held with its error."""
        try:
            run()
        except (CopyFailed, pymysql.err.MySQLError) as exc:
            self.held[seq] = f"{type(exc).__name__}: {exc}"
            raise

    def _run_entry(self, entry: dict, start: int) -> None:
        """Run a journal entry's statements from `start` on (the first of them holds the
        rows when the entry has no table before it)."""
        tables = [table_from_data(t) if t is not None else None for t in entry["tables"]]
        self.run_journal(
            entry["seq"], entry["statements"], start, tables, tables[start - 1] if start > 0 else None
        )

    @contextlib.contextmanager
    def _applier_held(self, rows_flow: bool) -> Iterator[None]:
        """The applier's batches on the table held (or let go on, with `rows_flow`) while
        the statements run. A transient error keeps them held (`kept`), for `_retried`."""
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

    def _run_statement(self, conn, statement: str, seq: int, index: int, last: bool) -> None:
        progress = self.meta.journal.sql_progress(self.target, seq, index, last)
        with conn.cursor() as cur:
            shown = " ".join(statement.split())[:200]
            if is_dml(statement) and (limit := batch_size(statement)) is not None:
                # a shard's TRUNCATE: batches, each committed, the last with the progress
                self.running = RunningDDL(statement, "rows", time.time())
                started = time.perf_counter()
                rows = run_batches(cur, statement, limit, lambda: cur.execute(progress))
                seconds = time.perf_counter() - started
                log.info("%s: %s deleted %d rows in %.2f s", self.target, shown, rows, seconds)
                return
            if is_dml(statement):
                # data moves (seed 002's rename copy) commit with their progress
                self.running = RunningDDL(statement, "rows", time.time())
                started = time.perf_counter()
                cur.execute("START TRANSACTION")
                rows = cur.execute(statement)
                cur.execute(progress)
                crash_point("ddl_copy_written")
                cur.execute("COMMIT")
                seconds = time.perf_counter() - started
                log.info("%s: %s changed %d rows in %.2f s", self.target, shown, rows, seconds)
                return
            self.running = RunningDDL(statement, "online", time.time())
            ran = run_alter(
                conn,
                statement,
                self.coordinator.flavor,
                self.copy_mode,
                self.connection,
                self.target,
                on_copy=self._running_as,
            )
            log.info("%s: %s ran %s in %.2f s", self.target, shown, ran.how, ran.seconds)
            crash_point("ddl_statement_ran")
            if faults_armed() and " DROP COLUMN " in statement.upper() and fault_point("drop_refused_after"):
                # (tests: an entry the downstream refuses after it changed the table)
                raise pymysql.err.InternalError(1105, "a fault the test injected")
            if faults_armed() and not last and fault_point("lost_between_statements"):
                # (tests: an entry's connection lost after a statement of it ran, before the next)
                raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server (a fault injected)")
            cur.execute(progress)

    def _running_as(self, how: str) -> None:
        running = self.running
        if running is not None:
            self.running = RunningDDL(running.statement, how, running.started)

    def run_given(self, statements: Sequence[str]) -> None:
        """Statements an operator gives for the downstream (`shardctl binlog inject` or
        `replace` on an entry the downstream refused), in order, each committed as it runs,
        with the applier's batches on the table held: they may change the table under them.
        What the applier knows of the table is read again after them."""
        conn = connect_downstream(self.connection)
        try:
            with self._applier_held(False):
                for statement in statements:
                    shown = " ".join(statement.split())[:200]
                    with conn.cursor() as cur:
                        cur.execute(statement)  # (autocommit: each commits as it runs)
                    log.info("%s: ran the operator's statement %s", self.target, shown)
                self.refresh(conn)
        finally:
            conn.close()

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
            self.refresh()
        else:
            # (from where its recovery says: its statement may have run, its progress not saved)
            self._held_on_refusal(seq, lambda: self._recover(entry))
        self.held.pop(seq, None)
        ran = []
        for later in pending[1:]:
            try:
                self._held_on_refusal(later["seq"], lambda e=later: self._recover(e))
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
                self._recover(entry)
            except (CopyFailed, pymysql.err.MySQLError) as exc:
                if transient(exc):  # (the start waits for the downstream, and tries again)
                    raise
                # (pt-online-schema-change's refusal too: the daemon starting again must not
                # die of it, L07)
                error = f"{type(exc).__name__} {exc.args}"
                log.error("%s: journal entry %d fails downstream: %s", self.target, entry["seq"], error)
                self.held = {e["seq"]: error if e is entry else None for e in entries[n:]}
                return n, [(e, error) for e in entries[n:]]
        return len(entries), []

    def _recover(self, entry: dict) -> None:
        statements, tables, start = entry["statements"], entry["tables"], entry["next_index"]
        if (
            start < len(statements)
            and not is_dml(statements[start])
            # (these change no column to tell they ran by, and may run again)
            and not is_old_name_index_statement(statements[start])
            and not on_scratch(statements[start])
            and self._already(tables[start])
        ):
            log.info(
                "%s: journal %d statement %d had run before the crash; skipping it",
                self.target,
                entry["seq"],
                start,
            )
            start += 1
            self.meta.execute(
                [self.meta.journal.sql_progress(self.target, entry["seq"], start, start == len(statements))]
            )
        log.info("%s: finishing journal entry %d from statement %d", self.target, entry["seq"], start)
        self._run_entry(entry, start)

    def _already(self, expected: dict | None) -> bool:
        schema, table = self.target.split(".", 1)
        conn = connect_downstream(self.connection)
        try:
            if not table_exists(conn, schema, table):
                return expected is None
            if expected is None:
                return False
            actual = read_table(conn, schema, table)
            return _same(actual, table_from_data(expected))
        finally:
            conn.close()

    def _cleared(self) -> dict[ShardId, tuple[str, ...]]:
        return {s: tuple(c) for s, c in self.coordinator.group.cleared().items()}

    def refresh(self, conn: pymysql.connections.Connection | None = None) -> None:
        """Update what the applier knows of the table from the server itself."""
        own = conn is None
        conn = conn or connect_downstream(self.connection)
        try:
            schema, table = self.target.split(".", 1)
            if table_exists(conn, schema, table):
                update_info(self.info, read_table(conn, schema, table), self.coordinator.flavor)
            self.info.update(major=self.coordinator.version.major, cleared=self._cleared())
        finally:
            if own:
                conn.close()


UNIQUE_KINDS = (IndexKind.PRIMARY, IndexKind.UNIQUE)


def update_info(info: TargetInfo, table: Table, flavor: Flavor | str = "mariadb") -> None:
    key = table_key(table)
    info.update(
        columns={c.key: c.name for c in table.columns if c.generated is None},
        not_null=frozenset(c.key for c in table.columns if not c.nullable),
        shape=row_shape(table, flavor),
        key=key,
        # an upsert can only stand in for an UPDATE when the key it matches on is the
        # only unique one: another would let it overwrite the row that key names
        sole_key=key is not None and sum(i.kind in UNIQUE_KINDS for i in table.indexes) == 1,
    )


def table_key(table: Table) -> tuple[str, ...] | None:
    """The columns that identify a row downstream: the primary key, else the first
    unique key over NOT NULL columns."""
    pk = table.primary_key
    if pk is not None and all(p.length is None for p in pk.parts):
        return tuple(table.column(p.column).name for p in pk.parts)
    for index in table.indexes:
        if index.kind.value == "unique" and all(
            p.length is None and (c := table.column(p.column)) is not None and not c.nullable
            for p in index.parts
        ):
            return tuple(table.column(p.column).name for p in index.parts)
    return None


def _same(actual: Table, expected: Table) -> bool:
    return actual == with_server_choices(expected, actual)
