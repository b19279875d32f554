"""Pausing and resuming shards. A pause touches the shard's flow (its changes are
dropped from now on), the DDL gate (what waited behind its DDL is read again), the
applier (its changes not committed yet are dropped), and the pause row in the meta
schema (a restart reads the shard again from its pause); a resume undoes that and has
the source's worker read the shard's paused time again, or its rows of that time go
through a scratch table (`replicator.apply.windows`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import pymysql

from replicator.apply.applier import Applier
from replicator.apply.gate import DDLGate
from replicator.apply.meta import Meta
from replicator.apply.refused import Refused
from replicator.apply.windows import Windows
from replicator.daemon.parking import Parked, Parking
from replicator.faults import crash_point, fault_point, faults_armed
from replicator.schema import way_out
from replicator.schema.group import BlockKind, GroupView
from replicator.schema.way_out import with_way_out
from replicator.shard_flow import ShardFlow, ShardFlows
from replicator.shard_id import ShardId
from replicator.source.messages import Change, DDLEvent, Dropped, Pin
from replicator.source.source_state import SourceState
from replicator.state.pauses import RESUMING, Pause
from replicator.state.positions import ChangeId, Position, file_sequence

OUTSIDE_GROUP = "not in its group"

log = logging.getLogger("shardmerge.daemon")


class Pauses:
    def __init__(self, flows: ShardFlows, gate: DDLGate, meta: Meta, sources: Mapping[str, SourceState]):
        self.flows = flows
        self.gate = gate
        self.meta = meta
        self.sources = sources
        self.applier: Applier | None = None  # (made after the pauses are read back)
        self.windows: Windows | None = None
        # shards whose resume waits for their DDL under way at the group's executor (L46)
        self.after_ddl: dict[ShardId, tuple[DDLEvent | None, bool]] = {}
        self.parking: Parking | None = None
        self.feed: Callable[[Parked], None] = lambda item: None  # a parked change, as its source sent it
        self.due: list[tuple[ShardId, Pause]] = []  # parks to feed once a DDL's result is taken
        # a source's watermark let back to a change (`Watermarks.back_to`)
        self.watermark_back: Callable[[str, ChangeId], None] = lambda source, cid: None
        # where a source's binlog ends now (set at `restore`)
        self.binlog_end: Callable[[str], tuple[int, int]] | None = None

    def restore(
        self,
        views: Mapping[str, GroupView],
        windows: Mapping[ShardId, tuple[int, int]],
        binlog_end: Callable[[str], tuple[int, int]],
    ) -> None:
        """At the start, after the groups' executors recovered: the pauses the groups'
        blocks ask for, those of shards that left, and the scratch windows of resumed
        shards whose paused rows were not merged yet (`windows`: shard -> how far)."""
        self.binlog_end = binlog_end
        # (a member's: its own sources' shards; the others' are other members')
        blocked = {s: b for s, b in _blocked(views).items() if s.source in self.sources}
        for shard, block in blocked.items():
            if not self.flows.is_paused(shard):  # blocked but its pause was not saved before a crash
                self.pause_at(shard, block, save=True)
            if block.kind == BlockKind.UNSUPPORTED and self.parking is not None:
                self.parking.hold(shard)  # (its rows cannot be read: none parked)
        grouped = {s for view in views.values() for s in view.shards}
        for shard in [s for s in self.flows.pauses() if s not in grouped]:
            self.unpause_left(shard)  # it left while paused, the daemon killed before it said so
        for shard, until in windows.items():
            if self.flows[shard].pause is not None and shard not in blocked:
                if until == RESUMING:  # resumed by a decision, the daemon stopped before it said how far
                    until = binlog_end(shard.source)
                self.windows.reopen(shard, until)
        pauses = self.flows.pauses()
        self.applier.restore_drops(
            {shard: pause.first for shard, pause in pauses.items()},
            {shard: p.first for shard, p in pauses.items() if self.meta.dead_letters.list(shard, "pending")},
        )

    # -- why a shard pauses ----------------------------------------------------------------------
    def outside(self, change: Change | Dropped) -> None:
        """Rows of a shard its group does not have."""
        position = self.sources[change.shard.source].position_of(change.id)
        reason = with_way_out(
            f"{OUTSIDE_GROUP}: rows of {change.shard} arrived while its table is not in the group "
            f"{change.target} (dropped or renamed away); they wait until a table comes back under its name",
            way_out.outside(change.shard),
        )
        self.set(Pause(change.shard, position, change.id, reason))

    def refused(self, refused: Refused) -> None:
        """A row the downstream refused: the shard waits for the operator's word."""
        shard, cid = refused.shard, refused.id
        position = self.sources[shard.source].position_of(cid)
        message = with_way_out(f"{refused.message}, at {position}", way_out.refused_row(shard))
        pending = self.meta.dead_letters.sql_add(refused, position.file, "pending")
        self.set(Pause(shard, position, (cid[0], cid[1], 0), message), also=[pending])

    def pause(self, shard: ShardId, change: DDLEvent | None, reason: str, readable: bool = True) -> None:
        """From right after the shard's DDL `change` (None: where its source reads now);
        `readable` False: its rows cannot be read from there (its schema is not known)."""
        if change is not None:
            position = Position.parse(change.next_position)
        else:
            position = self.sources[shard.source].position
        at = change.position if change is not None else None
        self.set(Pause(shard, position, position.change(0), reason), readable=readable, at=at)

    def pause_at(self, shard: ShardId, block, save: bool) -> None:
        """Where the group's block of the shard says."""
        state = self.sources.get(shard.source)
        position = state.position if state and state.position else None
        if block.position:
            position = Position.parse(block.position)
        if position is None:
            return
        self.set(Pause(shard, position, position.change(0), block.reason), save)

    def set(
        self,
        pause: Pause,
        save: bool = True,
        also: Sequence[str] = (),
        readable: bool = True,
        at: str | None = None,
    ) -> None:
        """`also`: statements saved with the pause (the refused row it is for); `readable`
        False: its rows cannot be read (none parked); `at`: the position of the DDL it is
        held at (said in the log, as `binlog list` and `query-status` show it)."""
        self.flows[pause.shard].pause = pause
        self.gate.drop_changes(pause.shard)  # its changes will be read again; its DDLs wait on
        if self.applier is not None:
            self.applier.drop_from(pause.shard, pause.first)
        if save:
            if faults_armed() and fault_point("pause_saved_lost"):
                # (tests: the downstream lost as a pause is saved, the shard paused in memory)
                raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server (a fault injected)")
            self.meta.execute([self.meta.pauses.sql_pause(pause), *also])
        state = self.sources.get(pause.source)
        if self.parking is not None and self.parking.start(pause, readable) and state is not None:
            # what was read of it since its pause was dropped: read again, into its park
            if state.position is None or pause.position < state.position:
                state.rewind(pause.position, self.flows.decided(state.id))
            else:
                state.rewind(state.position, self.flows.decided(state.id))
        log.warning(
            "shard %s paused from %s%s: %s",
            pause.shard,
            pause.position,
            f" (held at its DDL at {at})" if at else "",
            pause.reason,
            extra={"shard": pause.shard, "source": pause.source, "position": str(pause.position)},
        )

    # -- what a decision does to pauses ------------------------------------------------------------
    def left(self, shard: ShardId, view: GroupView | None) -> None:
        """A paused shard whose table left the group (DROP TABLE, RENAME TABLE away) is
        paused no more: nothing can resume it, and its pause would hold its source's
        watermark for good. What it wrote while paused is not downstream: it goes with
        its table (the rows downstream are those it had when it paused), said in the log."""
        if view is not None and shard not in view.shards:
            self.unpause_left(shard)

    def ddl_taken(self, shard: ShardId, blocked: bool) -> bool:
        """The shard's DDL under way is decided (`blocked`: it left the shard blocked):
        a resume that waited for it goes on now (True: what waited behind that DDL is read
        again), or is called off."""
        waiting = self.after_ddl.pop(shard, None)
        if waiting is None:
            return False
        if not blocked:
            self.resume(shard, *waiting)
        return not blocked

    def unpause_left(self, shard: ShardId) -> None:
        pause = self.flows[shard].pause
        if pause is None or pause.reason.startswith(OUTSIDE_GROUP):
            return
        log.warning(
            "shard %s left its group while paused (%s): the rows it wrote since %s are not downstream",
            shard,
            pause.reason,
            pause.position,
            extra={"shard": shard, "source": pause.source, "position": str(pause.position)},
        )
        self.flows[shard].discard_on_resume = True
        self.resume(shard)

    def rejoined(self, shard: ShardId, view: GroupView | None, blocked: Mapping[ShardId, object]) -> None:
        """A shard paused outside its group resumes once a DDL puts it back."""
        pause = self.flows[shard].pause
        if pause is None or not pause.reason.startswith(OUTSIDE_GROUP) or shard in blocked:
            return
        if view is not None and shard in view.shards:
            self.resume(shard)

    # -- resuming --------------------------------------------------------------------------------
    def pin(self, pins: Mapping[ShardId, Pin]) -> None:
        """A decision, saved, gave shards whose rows could not be read their table from
        their pause on (`DecisionWrites._pins`): its source's history holds it there, their
        DDLs since are decided again as read, and each is read again from its pause when it
        resumes, whatever its park holds (issue 76: resumed from an empty park, its worker
        went on leaving its rows out)."""
        for shard, pin in pins.items():
            self.sources[shard.source].pin(pin)
            self.flows[shard].ddl_done = pin.decided

    def read_from_pins(self, pins: Mapping[ShardId, Pin]) -> None:
        """A way out gave shards their table (`pin`) and a conflict holds them still: each's
        source reads again from its pin, so its worker has that table from there now, not
        only once the shard resumes. Rows of it that do not fit that table then pause it
        where they are (`blocking.pause_shard`), before its later DDLs are decided past them
        (L79: a skip's table, the rows after it read only once a later DDL had cleared the
        conflict, and converted the shard's rows downstream)."""
        for shard, pin in pins.items():
            state = self.sources.get(shard.source)
            if not self.flows.is_paused(shard) or state is None or state.position is None:
                continue
            position = min(state.position_of(pin.id), state.position)  # (never forward)
            state.rewind(position, self.flows.decided(state.id))

    def resume(self, shard: ShardId, by: DDLEvent | None = None, scratch: bool = False) -> None:
        """`scratch`: a blocked shard a decision resumes, whose table may have changed while
        paused: its rows of that time go through a scratch table (`Windows.open`); a shard paused by
        a row has them read again row by row (its refused row handled as the operator said).
        `by`: the shard's own DDL that resumes it (its rows up to its end are of its paused
        time, read there or not)."""
        flow = self.flows[shard]
        running = self.gate.running.get(shard)
        if flow.pause is not None and running is not None and (by is None or running.change.id != by.id):
            # a DDL of its paused time is under way at its group's executor: the shard resumes
            # once that DDL's result is taken, so its rows read again meet it decided; read
            # again before, they waited behind it in the gate, and went downstream after the
            # DDLs that came after them (live stories L46)
            self.after_ddl[shard] = (by, scratch)
            return
        pause, flow.pause = flow.pause, None
        if pause is None:
            if flow.window is None and flow.replay_to is None:
                self.meta.execute([self.meta.pauses.sql_replayed(shard)])  # (its decision saved one)
            return
        state = self.sources[pause.source]
        # (from the history, as a restart has it too: live stories 111076, resumed from its
        # park after a restart, read the DDL its pin stands for without the pin)
        reread = state.pinned_since(shard.table_key, pause.position)
        replay = []
        window = None
        until = paused_until(state, flow.ddl_done, pause)
        if not flow.discard_on_resume and until is not None:
            if by is not None:  # (its DDLs after it were decided as any shard's: not of the window)
                end = Position.parse(by.next_position)
                until = (file_sequence(end.file), end.pos)
            window = self.windows.open(pause, until) if scratch else None
            if window is None:
                flow.replay_to = until
            replay = [self.meta.pauses.sql_replay(shard, until, flow.replayed if window is None else ())]
        # (a window keeps the pause saved till its merge: a restart reads it again from there)
        stored = self.meta.pauses
        kept = stored.sql_resuming(shard) if window is not None else stored.sql_unpause(shard)
        # read again from the binlog, not from its park (none covers its paused time, or its
        # rows there were read without the table a decision gave it since): the park is
        # dropped, and its source's watermark, which passed the pause where the park covered
        # it, goes back to the pause with it. Else a start after this (before its rows of
        # then are merged) reads on from past the pause, and they are gone (live stories
        # 531012: paused by a conflict, given its table by set-schema, killed meanwhile)
        binlog = not flow.discard_on_resume and self.parking is not None
        binlog = binlog and (reread or not self.parking.ready(shard))
        back = [self.meta.pauses.sql_watermark_back(shard)] if binlog else []
        if binlog and faults_armed() and fault_point("watermark_not_back"):
            back = []  # (tests: the watermark not taken back, as before the fix: the next start finds it)
        dropped = self.parking.discard(shard) if binlog else []
        if faults_armed() and fault_point("resume_saved_lost"):
            # (tests: the downstream lost as a resume is saved, the shard running in memory)
            raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server (a fault injected)")
        self.meta.execute([*back, *dropped, kept, *replay])
        if back:
            self.watermark_back(pause.source, pause.first)
        flow.window = window
        crash_point("shard_resumed")
        self.applier.take_again(shard)
        if flow.discard_on_resume:
            # binlog skip: the rows written since the pause are dropped, not read again
            flow.discard_on_resume = False
            if self.parking is not None:
                self.meta.execute(self.parking.discard(shard))
            self._discard_written(flow, state)
            log.info(
                "shard %s resumes; its rows since %s are discarded",
                shard,
                pause.position,
                extra={"shard": shard, "source": pause.source, "position": str(pause.position)},
            )
            if reread:  # (its worker takes the table it has now there; what it reads till now is had)
                self._read_again(shard, pause, pause.position)
            return
        first = pause.first
        flow.routed = (first[0], first[1], first[2] - 1)
        # its DDLs read since its pause and not handed on yet are read again, after the rows
        # before them (handed on at once, one ran before them: L29; one of its paused time,
        # queued behind the DDL it paused at, had them wait behind it: L46)
        self.gate.drop_from(shard, first)
        # never forward of what the daemon has taken (a rewind not acknowledged yet has
        # set that back, and this one replaces it): shards resumed together each need
        # their own pause read again, and a later pause is not yet read at all
        # (`routed` drops what a shard has had)
        if self.parking is not None and not binlog:
            if self.gate.closed(shard):
                # its own DDL resumed it: what waits behind that DDL goes first (its parked
                # changes come after them), fed once the daemon has taken the DDL's result
                self.due.append((shard, pause))
                return
            self._from_park(shard, pause)
            return
        self._read_again(shard, pause, pause.position)

    def _discard_written(self, flow: ShardFlow, state: SourceState) -> None:
        """Its rows written upstream till now are dropped, whether its source has read them
        or not: a source reading again from the pause (its park's rewind) or lagging would
        hand them on as the resumed shard's."""
        end = state.furthest and (file_sequence(state.furthest.file), state.furthest.pos)
        if self.binlog_end is not None:
            try:
                end = self.binlog_end(state.id)
            except pymysql.err.MySQLError as exc:  # (unreachable: as far as it was read)
                log.warning("source %s: where its binlog ends is not known (%s)", state.id, exc)
        if end is not None:
            below = (end[0], end[1], -1)
            flow.routed = below if flow.routed is None else max(flow.routed, below)

    def replay_due(self) -> None:
        """The parks of shards their own DDL resumed, now that its result is taken."""
        due, self.due = self.due, []
        for shard, pause in due:
            self._from_park(shard, pause)

    def _from_park(self, shard: ShardId, pause: Pause) -> None:
        """Its changes since the pause are in its park: fed now, in their order; its source
        reads it again only from where the park ends, if it filled up."""
        rest = self.parking.replay(shard, self.feed)
        if rest is not None:  # (its park filled up)
            self._read_again(shard, pause, self.sources[pause.source].position_of(rest))

    def _read_again(self, shard: ShardId, pause: Pause, position: Position) -> None:
        state = self.sources[pause.source]
        if state.position is not None and state.position < position:
            position = state.position
        log.info(
            "shard %s resumes: re-reading source %s from %s",
            shard,
            pause.source,
            position,
            extra={"shard": shard, "source": pause.source, "position": str(position)},
        )
        # (for the resumed shard, the pipe may hold its newer changes, which would
        # otherwise pass before its older ones are read again)
        state.rewind(position, self.flows.decided(state.id))


def paused_until(state: SourceState, ddl_done: ChangeId | None, pause: Pause) -> tuple[int, int] | None:
    """Where a resumed shard's rows of its paused time end: as far as its source has read,
    and past the last DDL of it decided while it was paused (its rows before are of the
    tables it had then). After a restart its source may not have read up to its pause yet
    when a decision resumes it (live stories L45: its rows went as live ones, naming a
    column it dropped since)."""
    ends = []
    if state.furthest is not None:
        ends.append((file_sequence(state.furthest.file), state.furthest.pos))
    if ddl_done is not None and ddl_done >= pause.first:
        ends.append((ddl_done[0], ddl_done[1] + 1))
    return max(ends, default=None)


def _blocked(views: Mapping[str, GroupView]) -> dict:
    blocked = {}
    for view in views.values():
        blocked.update(view.blocked)
    return blocked
