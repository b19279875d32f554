"""A shard's DDLs from its worker to its group's executor and the decisions back: a
DDL waits behind the shard's DDL under way (`DDLGate`), the shard's later changes wait
behind it, and its decision pauses, resumes and releases shards. The operator's
requests (`shardctl`) go the same way and are answered when decided."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future

from replicator.api.admin import AdminError
from replicator.apply import schema_history
from replicator.apply.ddl_executor import GroupExecutor
from replicator.apply.ddl_job import DDLJob, DDLResult
from replicator.apply.gate import DDLGate
from replicator.apply.meta import Meta
from replicator.apply.windows import Windows
from replicator.daemon.membership import StandingChanged
from replicator.daemon.pauses import Pauses
from replicator.daemon.row_path import RowPath
from replicator.faults import crash_point
from replicator.metrics import Metrics
from replicator.schema import way_out
from replicator.schema.group import BlockKind
from replicator.schema.way_out import with_way_out
from replicator.shard_flow import ShardFlows
from replicator.shard_id import ShardId
from replicator.source.messages import DDLEvent
from replicator.source.schema_change import ChangeKind
from replicator.source.source_state import SourceState
from replicator.state.pauses import RESUMING, Pause
from replicator.state.positions import Position

log = logging.getLogger("shardmerge.daemon")
QUEUE_LOOK = 0.25  # seconds between two looks at the schema queue (the coordinator's, a member's)


class DDLPath:
    def __init__(
        self,
        flows: ShardFlows,
        gate: DDLGate,
        executors: Mapping[str, GroupExecutor],
        rows: RowPath,
        windows: Windows,
        pauses: Pauses,
        meta: Meta,
        metrics: Metrics,
    ):
        self.flows = flows
        self.gate = gate
        self.executors = executors
        self.rows = rows
        self.windows = windows
        self.pauses = pauses
        self.meta = meta
        self.metrics = metrics
        self.waiters: dict[int, tuple[str, Future]] = {}  # id(operator job) -> its group, its decision
        # a member that does not coordinate the task: its DDLs go to the coordinator
        self.forward: ForwardToCoordinator | None = None
        self._taken = 0  # (the coordinator's: the last schema queue entry taken)
        self._next_look = self._next_resume_look = 0.0
        self.members = False  # (the daemon runs as a member of its task)

    def submit_operation(self, target: str, job: DDLJob) -> Future:
        """An operator's request, decided by the group's executor like a DDL."""
        if self.forward is not None:
            member = self.forward.member
            raise AdminError(
                409, f"member {member} does not coordinate the task: ask the member holding its lease"
            )
        future: Future = Future()
        self.waiters[id(job)] = (target, future)
        self.executors[target].submit(job)
        return future

    def schema_change(self, state: SourceState, message: DDLEvent) -> None:
        # (kept in the source's history, and written now where no decision writes it, or
        # where its shard is paused: its park may carry its source's watermark past it)
        flow = self.flows[message.shard] if message.shard is not None else None
        schema_history.written_on_read(self.meta, state, message, paused=flow is not None and flow.paused)
        if flow is None:
            return
        if flow.paused and self.pauses.parking is not None:
            if message.change.kind in (ChangeKind.UNREADABLE, ChangeKind.UNSUPPORTED):
                # its worker sends none of its rows after this: they are read again from
                # the binlog once it resumes, never taken for parked
                self.pauses.parking.hold(message.shard)
            else:
                self.pauses.parking.take(message.shard, message)  # (for its window, when it resumes)
        if flow.window is not None and self.windows.take_ddl(flow, message):
            return
        if message.change.kind == ChangeKind.PINNED:
            return  # (decided with its pin)
        again = flow.decided_before(message.id) and message.change.kind != ChangeKind.UNREADABLE
        if again or self.gate.has(message.shard, message.id):
            # handled before a restart or a rewind, or under way; the tracker has followed it
            # again (rows it cannot read are no DDL: they pause it wherever they are read)
            return
        if message.target not in self.executors:
            return
        crash_point("ddl_seen")
        job = DDLJob(message.shard, message)
        if self.gate.closed(message.shard):
            self.gate.hold(message.shard, job)  # after the changes before it
        else:
            self._start(job)

    def _start(self, job: DDLJob) -> None:
        """Hand a DDL to its group's executor; the shard's later changes wait. Every
        earlier change is submitted by now, so the executor's barrier covers them."""
        self.gate.start(job)
        if self.forward is not None:
            self.forward(job)
            return
        self.executors[job.change.target].submit(job)
        crash_point("ddl_queued")

    def _release(self, shard: ShardId, blocked: bool = False) -> None:
        """The shard's DDL is done (`blocked`: its decision left the shard blocked): submit
        what waited behind it, up to its next DDL."""
        changes, next_job = self.gate.finish(shard)
        if self.pauses.ddl_taken(shard, blocked):
            return  # (resumed now: what came after the DDL is read again)
        if not self.flows.is_paused(shard):
            flow = self.flows[shard]
            for change in changes:
                # as the DDL left the shard: a rename it started clears the old name in the
                # rows written right behind it, else the last shard's copy overwrites them
                self.rows.submit(flow, change)
        crash_point("shard_released")
        if next_job is not None:
            self._start(next_job)

    # -- a task's members (issue 75) ------------------------------------------------------------
    def members_turn(self) -> None:
        """At each turn of a member's loop: the coordinator takes the DDLs other members sent;
        a member that does not coordinate starts again once one it sent is answered, or a
        decision resumed one of its paused shards (`StandingChanged`)."""
        if self.forward is None:
            self.take_queue()
            return
        reason = self.forward.answered()
        now = time.monotonic()
        if reason is None and now >= self._next_resume_look:
            self._next_resume_look = now + 1.0
            reason = resumed_elsewhere(self.meta, self.flows, self.pauses.sources)
        if reason is not None:
            raise StandingChanged(reason)

    def take_queue(self) -> None:
        """The coordinator's: the DDLs other members sent, each to its group's executor (in
        the order sent; at a start, every one not answered yet)."""
        now = time.monotonic()
        if now < self._next_look:
            return
        self._next_look = now + QUEUE_LOOK
        entries = self.meta.schema_queue.sent(after=self._taken)
        done = self.meta.ddl_done.load() if entries else {}
        for sent in entries:
            self._taken = sent.seq
            event = sent.event
            if event.shard.source in self.pauses.sources:
                # (sent by the member that read the source before this one: this one's stream
                # reads the DDL again from the source's checkpoints and decides it as its own;
                # taken here as well, it would be decided twice)
                self.meta.execute([self.meta.schema_queue.sql_forget_entries([sent.seq])])
                continue
            if event.shard in done and done[event.shard] >= event.id:
                # (decided before this coordinator's crash, not answered yet: the decision's
                # transaction saved the shard's DDL done)
                self.meta.execute([self.meta.schema_queue.sql_answer(sent.seq, {"decided": True})])
                continue
            if event.target not in self.executors:
                answer = {"error": f"no shard group {event.target} here"}
                self.meta.execute([self.meta.schema_queue.sql_answer(sent.seq, answer)])
                continue
            log.info("shard %s: its DDL at %s, sent by member %s, decided here", event.shard, event.position,
                     sent.member, extra={"shard": event.shard, "source": event.source})
            self.executors[event.target].submit(DDLJob(event.shard, event, queued=sent.seq))

    def _answer_queued(self, result: DDLResult) -> None:
        """A decision of another member's shard: answered in the queue (the member starts
        again and takes the group as the decision left it, its shard paused where it blocked
        it); the shards it resumed here resume."""
        job, decision = result.job, result.decision
        target = job.change.target
        self.metrics.ddl_decisions.inc(target, decision.result if decision else "failed")
        answer = {
            "decided": decision is not None,
            "deferred": result.deferred,
            "error": result.error,
            "blocked": decision is not None and job.shard in decision.blocked,
        }
        writes = [self.meta.schema_queue.sql_answer(job.queued, answer)]
        if decision is None:
            # (its member reads it paused so at its start: without the pause it would send the
            # DDL again and start again, for ever; the way out is the coordinator's, as for one
            # of its own shards)
            position = Position.parse(job.change.next_position)
            reason = self._failed_ddl_reason(target, result)
            writes.append(self.meta.pauses.sql_pause(Pause(job.shard, position, position.change(0), reason)))
            log.error("DDL of %s failed: %s; the shard pauses", job.shard, result.error,
                      extra={"shard": job.shard, "source": job.shard.source, "position": job.change.position})
        self.meta.execute(writes)
        if decision is None:
            return
        if result.view is not None:
            self.flows.set_cleared([s for s in result.view.shards if s.source in self.pauses.sources],
                                   result.view.cleared)
        for resumed in decision.unblocked:
            if resumed.source in self.pauses.sources:  # (another member's starts again: `resumed_elsewhere`)
                self.flows[resumed].replayed = (result.resumed_renames or {}).get(resumed, ())
                self.pauses.resume(resumed, None, scratch=True)
        self.pauses.replay_due()

    def result(self, result: DDLResult) -> None:
        job, decision = result.job, result.decision
        if job.queued is not None:
            self._answer_queued(result)
            return
        if result.journal is not None and result.waits_for is None:  # (refused now, not waiting)
            # (an operator's request is of the group it was submitted to)
            group = job.change.target if job.change is not None else self.waiters[id(job)][0]
            self.metrics.journal_refused.inc(group)
        if job.change is None:
            self._answer(result)
            return
        shard, change, target = job.shard, job.change, job.change.target
        if result.deferred:  # (not decided: read again once the shard resumes)
            self._release(shard)
            return
        self.metrics.ddl_decisions.inc(target, decision.result if decision else "failed")
        if result.filtered:
            self.rows.filtered(shard, result.filtered)
        self.flows[shard].decided(change.id)
        self.pauses.pin(result.pins)
        if result.view is not None:
            self.flows.set_cleared(result.view.shards, result.view.cleared)
        if decision is None:
            log.error(
                "DDL of %s failed: %s; the shard pauses",
                shard,
                result.error,
                extra={"shard": shard, "source": shard.source, "position": change.position},
            )
            self.pauses.pause(shard, change, self._failed_ddl_reason(target, result))
        else:
            if shard in decision.blocked and not self.flows.is_paused(shard):
                # (blocked as not followed: its worker cannot read its rows from here on)
                block = result.view.blocked.get(shard) if result.view is not None else None
                readable = block is None or block.kind != BlockKind.UNSUPPORTED
                self.pauses.pause(shard, change, result.block_reason or decision.message, readable)
            self.pauses.left(shard, result.view)
            self.pauses.rejoined(shard, result.view, decision.blocked)
            for resumed in decision.unblocked:
                self.flows[resumed].replayed = (result.resumed_renames or {}).get(resumed, ())
                self.pauses.resume(resumed, change if resumed == shard else None, scratch=True)
        self._release(shard, decision is None or shard in decision.blocked)
        self.pauses.replay_due()

    def _answer(self, result: DDLResult) -> None:
        """An operator's request decided: answer it; a refusal pauses nothing."""
        job, decision = result.job, result.decision
        shard = job.shard
        target, waiter = self.waiters.pop(id(job))
        if decision is None:
            waiter.set_exception(AdminError(409, result.error or "the request failed"))
            return
        self.pauses.pin(result.pins)
        for resumed in decision.unblocked:
            self.pauses.resume(resumed, scratch=True)
        if self.flows.is_paused(shard) and shard not in decision.blocked:
            self.pauses.resume(shard, scratch=True)
        self.pauses.replay_due()
        self.metrics.ddl_decisions.inc(target, decision.result)
        waiter.set_result(decision)

    def _failed_ddl_reason(self, target: str, result: DDLResult) -> str:
        error = result.error or "the DDL failed"
        if result.journal is None:
            return error
        return refused_entry(target, result.journal, error, result.waits_for)


class ForwardToCoordinator:
    """A member that does not coordinate the task (issue 75): a shard's DDL goes to the
    coordinator through the schema queue, and the shard's rows wait behind it (its source's
    other shards go on) till the coordinator answers (`DDLPath.take_queue`)."""

    def __init__(self, meta: Meta, member: str, sources: Collection[str], settle: Callable[[], None]):
        """`settle`: every change submitted so far committed (the DDL runs downstream after
        the shard's rows before it, as the coordinator's own executor's barrier has them)."""
        self.meta, self.member, self.sources, self.settle = meta, member, frozenset(sources), settle
        self.waiting: dict[ShardId, DDLJob] = {}  # the shards held behind a DDL sent
        self._next_look = 0.0

    def __call__(self, job: DDLJob) -> None:
        change = job.change
        self.settle()
        self.meta.execute([self.meta.schema_queue.sql_send(self.member, job.shard, change.id, change)])
        self.waiting[job.shard] = job
        log.warning(
            "shard %s: its DDL at %s waits for the coordinator's decision (member %s does not coordinate)",
            job.shard,
            change.position,
            self.member,
            extra={"shard": job.shard, "source": job.shard.source, "position": change.position},
        )

    def answered(self) -> str | None:
        """Why the member starts again, if the coordinator answered a DDL it sent: the start
        takes the group as the decision left it (its shard's DDL done, the shard paused where
        the decision blocked it, the table as it is now).

        Every answer to one of the member's shards is taken, the ones it does not wait for
        too: the member started again (a decision for the group, a rebalance) between its
        sending and the answer, and its start took what the decision committed before the
        answer (the DDL done, or the pause written with the answer). Its stream reading the
        DDL again sends it again, and the coordinator answers from the DDL done."""
        now = time.monotonic()
        if now < self._next_look:
            return None
        self._next_look = now + (QUEUE_LOOK if self.waiting else 1.0)
        mine = [e for e in self.meta.schema_queue.answered() if e.shard.source in self.sources]
        if not mine:
            return None
        self.meta.execute([self.meta.schema_queue.sql_forget_entries([e.seq for e in mine])])
        for entry in mine:
            job = self.waiting.get(entry.shard)
            if job is None or job.change.id != entry.change:
                continue
            what = f"the DDL of shard {entry.shard} at {job.change.position}"
            if entry.answer.get("decided"):
                return f"the coordinator decided {what}"
            return f"the coordinator did not decide {what} ({entry.answer.get('error')})"
        return None


def resumed_elsewhere(meta: Meta, flows: ShardFlows, sources: Collection[str]) -> str | None:
    """A member's (that does not coordinate): why it starts again, if a decision resumed one
    of its paused shards (saved with the decision as resuming, its rows of its paused time to
    read again: the start does it, `Pauses.restore`)."""
    paused = {s for s in flows.pauses() if s.source in sources}
    if not paused:
        return None
    for shard, (until, _) in meta.pauses.load_replays().items():
        if shard in paused and until == RESUMING:
            return f"the coordinator resumed shard {shard}"
    return None


def refused_entry(target: str, seq: int, error: str, waits_for: int | None = None) -> str:
    """Why a shard whose DDL's journal entry did not run pauses, and the way out; `waits_for`:
    the earlier entry it waits for, which the downstream refused (`error` is that one's)."""
    first = seq if waits_for is None else waits_for
    way = way_out.refused_entry(target, first)
    if waits_for is None:
        return with_way_out(f"downstream DDL of {target} (journal entry {seq}) failed: {error}", way)
    return with_way_out(
        f"downstream DDL of {target} (journal entry {seq}) waits for journal entry {waits_for}, which "
        f"failed: {error}",
        f"{way}: entry {seq} runs after it and the shard resumes",
    )


def refused_entry_of(reason: str, target: str) -> int | None:
    """The journal entry of `target` a pause made by `refused_entry` stands for (None: the
    pause is of something else)."""
    found = re.match(rf"downstream DDL of {re.escape(target)} \(journal entry (\d+)\)", reason)
    return int(found.group(1)) if found else None
