"""Each shard's live state in the daemon, in one object per shard: whether it is
paused (and from where), how far its changes and DDLs were taken, and what its rows
must clear while a rename is pending. The daemon's main thread owns them; the admin
operations read them through it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol, TypeVar

from replicator.shard_id import ShardId
from replicator.state.pauses import Pause, ReplayRename
from replicator.state.positions import ChangeId

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)

if TYPE_CHECKING:  # (the apply stage's window is held here, never used: no import of apply)
    from replicator.apply.paused_window import PausedWindow


class Admission(StrEnum):
    """What becomes of a row change read for a shard (`ShardFlow.admit`)."""

    PAUSED = "paused"  # the shard is paused: dropped, read again when it resumes
    LEFT = "left"  # its table is not in its group (dropped or renamed away): the shard pauses
    GONE = "gone"  # so, but applied already, or of before the DDL it left by: dropped
    AGAIN = "again"  # read before (a reconnect or a rewind): dropped
    COPIED = "copied"  # of before a resync's copy of the shard, which holds it: dropped
    FILTERED = "filtered"  # of a kind an event filter drops
    APPLIED = "applied"  # committed before (a crash): dropped
    HELD = "held"  # behind the shard's DDL in progress, in the gate
    SUBMIT = "submit"  # to the applier

    @property
    def routed(self) -> bool:
        """Taken for the shard: one read again after it is dropped (`ShardFlow.routed`)."""
        return self in (Admission.FILTERED, Admission.APPLIED, Admission.HELD, Admission.SUBMIT)


@dataclass
class ShardFlow:
    shard: ShardId
    pause: Pause | None = None
    # the last change routed: one read again (after a reconnect or a rewind) is dropped
    routed: ChangeId | None = None
    # the last DDL handled: one read again has been decided before (the tracker follows it)
    ddl_done: ChangeId | None = None
    # columns its rows set NULL while a rename is pending (GroupState.cleared)
    cleared: tuple[str, ...] = ()
    # a binlog skip: when it resumes, its rows since the pause are dropped, not read again
    discard_on_resume: bool = False
    # the row operations (I, U, D) an event filter drops
    ignored: frozenset[str] = frozenset()
    # after a resume: its rows read again up to `replay_to` (file sequence, position) were
    # written while it was paused, under the tables it had then; `replayed`, the renames it
    # made meanwhile, which its rows before them do not know (Daemon._replayed)
    replayed: tuple[ReplayRename, ...] = ()
    replay_to: tuple[int, int] | None = None
    # after a resume: its rows of the paused time go to a scratch table, DDL by DDL, and
    # from there into the target (replicator/apply/paused_window.py); its pause is saved
    # till then (it holds the source's watermark)
    window: PausedWindow | None = None
    # a resync copied its rows again from here on (P0): its changes before are in the copy
    copied_from: ChangeId | None = None

    @property
    def paused(self) -> bool:
        return self.pause is not None

    def read_before(self, change: ChangeId) -> bool:
        return self.routed is not None and change <= self.routed

    def decided_before(self, ddl: ChangeId) -> bool:
        return self.ddl_done is not None and ddl <= self.ddl_done

    def decided(self, ddl: ChangeId, rows: bool = False) -> None:
        """`rows`: the decision held it at rows its worker cannot read, saving `ddl` as its
        DDL done (`DecisionWrites.decide`), below its DDLs a decision took past them where
        that resumed it and its rows read again paused it here. Those DDLs are decided again
        as they are read (stacked on this pause, whose way out then asks for its table as it
        was here), as after a restart: dropped as had, the way out asked for its table now,
        which its rows here do not fit (L67)."""
        if rows or self.ddl_done is None:
            self.ddl_done = ddl
        else:
            self.ddl_done = max(self.ddl_done, ddl)

    def admit(self, change: ChangeId, op: str, asks: Asks[T], subject: T) -> Admission:
        """What becomes of the shard's row change `change` of kind `op` (I, U, D), read
        now; `asks` is asked of `subject` (the change) whether it is of a shard in its group,
        applied already and behind the shard's DDL, each only when it matters. One
        from before its pause goes on: a shard resumed and paused again by a DDL decided
        before its rows of the first pause were read again reads those after it (L22,
        L26). One of a shard whose own DDL is under way waits behind
        it though the shard is not in its group yet: that DDL may be its CREATE (L33:
        paused as one that left, its rows read again after the DROP that came
        next was decided, and lost)."""
        if self.pause is not None and change >= self.pause.first:
            return Admission.PAUSED
        if not asks.in_group(subject) and not asks.gate_closed(subject):
            # (a row of a shard that left, read again, before the DDL it left by: applied, or
            # discarded with the pause it left in)
            return Admission.GONE if asks.applied(subject) or self.decided_before(change) else Admission.LEFT
        if self.read_before(change):
            return Admission.AGAIN
        if self.copied_from is not None and change < self.copied_from:
            return Admission.COPIED
        if op in self.ignored:
            return Admission.FILTERED
        if asks.applied(subject):
            return Admission.APPLIED
        return Admission.HELD if asks.gate_closed(subject) else Admission.SUBMIT


class Asks(Protocol[T_contra]):
    """What `ShardFlow.admit` asks the daemon of a change it reads (one object for all:
    a closure per question and change was a tenth of the daemon's time on each row)."""

    def in_group(self, change: T_contra) -> bool:
        """Its shard is in its table's group (its table not dropped or renamed away)."""

    def applied(self, change: T_contra) -> bool:
        """It was committed downstream before (read again after a restart)."""

    def gate_closed(self, change: T_contra) -> bool:
        """Its shard's DDL is under way: it waits behind it."""


class ShardFlows:
    """Every shard's flow, made the first time the shard is named."""

    def __init__(self, ignored: Callable[[ShardId], frozenset[str]] = lambda shard: frozenset()) -> None:
        self._flows: dict[ShardId, ShardFlow] = {}
        self._ignored = ignored

    def __getitem__(self, shard: ShardId) -> ShardFlow:
        flow = self._flows.get(shard)
        if flow is None:
            flow = self._flows[shard] = ShardFlow(shard, ignored=self._ignored(shard))
        return flow

    def get(self, shard: ShardId) -> ShardFlow | None:
        return self._flows.get(shard)

    def __iter__(self) -> Iterator[ShardFlow]:
        return iter(self._flows.values())

    def is_paused(self, shard: ShardId) -> bool:
        flow = self._flows.get(shard)
        return flow is not None and flow.pause is not None

    def pauses(self) -> dict[ShardId, Pause]:
        return {f.shard: f.pause for f in self._flows.values() if f.pause is not None}

    def paused_from(self, source: str) -> ChangeId | None:
        """Where the source's earliest paused shard is to be read again from."""
        held = [
            f.pause.first for f in self._flows.values() if f.pause is not None and f.pause.source == source
        ]
        held += [
            f.window.hold for f in self._flows.values() if f.window is not None and f.shard.source == source
        ]
        return min(held, default=None)

    def decided(self, source: str) -> dict[str, ChangeId]:
        """The last DDL each shard of `source` has handled (`ShardFlow.ddl_done`), by its
        table ("schema.table"): what `SourceState.pins_from` asks of a pin right at a start."""
        return {f.shard.table_key: f.ddl_done for f in self._flows.values()
                if f.shard.source == source and f.ddl_done is not None}

    def restore(self, pauses: Mapping[ShardId, Pause], ddl_done: Mapping[ShardId, ChangeId]) -> None:
        """What the meta schema kept across a restart."""
        for shard, pause in pauses.items():
            self[shard].pause = pause
        for shard, ddl in ddl_done.items():
            self[shard].ddl_done = ddl

    def set_cleared(self, shards: Iterable[ShardId], cleared: Mapping[ShardId, list[str]]) -> None:
        """A group's columns to clear now, for every shard of the group (`shards`)."""
        for shard in {*shards, *cleared}:
            self[shard].cleared = tuple(cleared.get(shard, ()))
