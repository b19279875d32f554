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
        if again and self._behind_rows(message):
            # decided before (a decision resumed the shard past it), read again behind rows of
            # the shard its worker cannot read, whose pause is not decided yet: once it is, this
            # DDL stacks on it, as one read after it does (`ShardFlow.decided`, L67)
            again = False
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

    def _behind_rows(self, message: DDLEvent) -> bool:
        """Whether the shard's rows its worker cannot read, before `message`, wait in the gate
        for their decision (a pause at them)."""
        shard = message.shard
        jobs = [self.gate.running.get(shard), *self.gate.waiting.get(shard, ())]
        return any(
            isinstance(job, DDLJob) and job.change is not None and job.change.id < message.id
            and job.change.change.kind == ChangeKind.UNREADABLE
            for job in jobs
        )

    def _had(self, job: DDLJob) -> bool:
        change = job.change
        return (
            change is not None and change.change.kind != ChangeKind.UNREADABLE
            and self.flows[job.shard].decided_before(change.id)
        )

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
        while next_job is not None and self._had(next_job):
            # (a DDL decided before, kept behind rows of its shard whose decision did not
            # hold it, `_behind_rows`: handled before, as when read again)
            more, next_job = self.gate.finish(shard)
            changes += more
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
        a member that does not coordinate takes the coordinator's decisions as it runs: a
        group that moved is read again (`DDLJob.reload`), and a shard whose DDL was decided
        goes on once its group is read again after the answer. It starts again
        (`StandingChanged`) where the decision did more than a start takes in stride: its
        DDL not decided, its shard blocked, a paused shard of its resumed."""
        forward = self.forward
        if forward is None:
            self.take_queue()
            return
        taken, reason = forward.answered()
        if reason is not None:
            raise StandingChanged(reason)
        for job, answer in taken:
            if self.flows.is_paused(job.shard):
                raise StandingChanged(f"the coordinator decided the DDL of shard {job.shard}, paused here")
            self._read_group(job.change.target, (job, answer))
        for target in forward.moved():
            self._read_group(target)
        now = time.monotonic()
        if reason is None and now >= self._next_resume_look:
            self._next_resume_look = now + 1.0
            reason = resumed_elsewhere(self.meta, self.flows, self.pauses.sources)
        if reason is not None:
            raise StandingChanged(reason)

    def _read_group(self, target: str, taken: tuple[DDLJob, dict] | None = None) -> None:
        """The group read again on its executor's thread; `taken`: a DDL of the member's the
        coordinator answered, released once a reading begun after the answer is in."""
        forward = self.forward
        if target in forward.reading:
            if taken is not None:  # (the reading under way may be from before the decision)
                forward.next_reading.setdefault(target, []).append(taken)
            return
        forward.reading[target] = [taken] if taken is not None else []
        self.executors[target].submit(DDLJob(None, None, reload=target))

    def _group_read(self, result: DDLResult) -> None:
        """A member's group read again (`_read_group`): the columns its shards' rows clear as
        the group has them now, and the shards whose DDL was decided go on."""
        forward, target, view = self.forward, result.job.reload, result.view
        taken = forward.reading.pop(target, [])
        if view is None:
            raise StandingChanged(f"group {target} could not be read again ({result.error})")
        forward.known[target] = result.decided
        mine = [s for s in view.shards if s.source in forward.sources]
        paused, waiting = self.flows.is_paused, forward.waiting
        blocked = [s for s in mine if s in view.blocked and not paused(s) and s not in waiting]
        if blocked:
            listed = ", ".join(map(str, sorted(blocked)))
            raise StandingChanged(f"the coordinator's decision for group {target} blocked {listed}")
        self.flows.set_cleared(mine, view.cleared)
        for job, answer in taken:
            shard = job.shard
            forward.waiting.pop(shard, None)
            if answer.get("filtered"):
                self.rows.filtered(shard, answer["filtered"])
            held = job.change.change.kind == ChangeKind.UNREADABLE and bool(answer.get("blocked"))
            self.flows[shard].decided(job.change.id, held)
            log.info(
                "shard %s: the coordinator decided its DDL at %s; its rows go on (group %s at decision %d)",
                shard,
                job.change.position,
                target,
                result.decided,
                extra={"shard": shard, "source": shard.source, "position": job.change.position},
            )
            self._release(shard)
        self.pauses.replay_due()
        again = forward.next_reading.pop(target, None)
        if again:
            forward.reading[target] = again
            self.executors[target].submit(DDLJob(None, None, reload=target))

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
            # (what its member needs to go on without starting again: the shards the decision
            # resumed, the event filter that changed the DDL)
            "resumed": sorted(str(s) for s in decision.unblocked) if decision is not None else [],
            "filtered": result.filtered,
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
        if job.reload is not None:
            self._group_read(result)
            return
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
        held = change.change.kind == ChangeKind.UNREADABLE
        held = held and decision is not None and shard in decision.blocked
        self.flows[shard].decided(change.id, held)
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
        self.pauses.read_from_pins(result.pins)  # (those a conflict holds still)
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

    def __init__(
        self,
        meta: Meta,
        member: str,
        sources: Collection[str],
        settle: Callable[[], None],
        groups: Callable[[], Mapping[str, int]] = dict,
        known: Mapping[str, int] | None = None,
    ):
        """`settle`: every change submitted so far committed (the DDL runs downstream after
        the shard's rows before it, as the coordinator's own executor's barrier has them);
        `groups`: each group's decisions so far, as the store counts them; `known`: those
        the start took."""
        self.meta, self.member, self.sources, self.settle = meta, member, frozenset(sources), settle
        self.waiting: dict[ShardId, DDLJob] = {}  # the shards held behind a DDL sent
        self._next_look = self._next_count = 0.0
        self.groups = groups
        self.known = dict(known or {})  # each group's decisions the member has taken
        # groups being read again: the answered DDLs each reading releases, and those
        # answered meanwhile, for the reading after it (`DDLPath._read_group`)
        self.reading: dict[str, list[tuple[DDLJob, dict]]] = {}
        self.next_reading: dict[str, list[tuple[DDLJob, dict]]] = {}

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

    def answered(self) -> tuple[list[tuple[DDLJob, dict]], str | None]:
        """The DDLs the member sent that the coordinator answered: those decided and left
        running, which go on as the decision left the group (`DDLPath._read_group`), or
        why the member starts again instead, taking the group at its start: the DDL not
        decided (its shard paused, saved with the answer), the shard blocked, a shard of the
        member's resumed (its paused rows read again), or an answer of before these said so.

        Every answer to one of the member's shards is taken, the ones it does not wait for
        too: the member started again (a rebalance) between its sending and the answer, and
        its start took what the decision committed before the answer (the DDL done, or the
        pause written with the answer). Its stream reading the DDL again sends it again, and
        the coordinator answers from the DDL done."""
        now = time.monotonic()
        if now < self._next_look:
            return [], None
        self._next_look = now + (QUEUE_LOOK if self.waiting else 1.0)
        mine = [e for e in self.meta.schema_queue.answered() if e.shard.source in self.sources]
        if not mine:
            return [], None
        self.meta.execute([self.meta.schema_queue.sql_forget_entries([e.seq for e in mine])])
        taken = []
        for entry in mine:
            job = self.waiting.get(entry.shard)
            if job is None or job.change.id != entry.change:
                continue
            what = f"the DDL of shard {entry.shard} at {job.change.position}"
            answer = entry.answer
            if not answer.get("decided"):
                return [], f"the coordinator did not decide {what} ({answer.get('error')})"
            resumed = answer.get("resumed")
            mine_resumed = resumed is None or any(ShardId.parse(s).source in self.sources for s in resumed)
            if answer.get("blocked") or mine_resumed:
                return [], f"the coordinator decided {what}"
            taken.append((job, answer))
        return taken, None

    def moved(self) -> list[str]:
        """The groups whose decisions moved since the member took them (looked at once a
        second), but those being read again."""
        now = time.monotonic()
        if now < self._next_count:
            return []
        self._next_count = now + 1.0
        known, reading = self.known, self.reading
        return sorted(t for t, n in self.groups().items() if n != known.get(t, 0) and t not in reading)


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
