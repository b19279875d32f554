"""Paused shards park what their source sends of them (issue 45, docs/operations/long-pauses.md):
their row changes and DDLs go into the park table (replicator/apply/park.py) in the
watermark's transaction, so a paused shard holds its source's watermark no further
back than its park reaches, and the upstream may purge the binlogs it was read from.
When the shard resumes its park is fed to the daemon as its source would send it again
(`Parking.replay`), and dropped once every change of it is applied.

A shard starts parking when it pauses: its source reads again from the pause (what it
had read of the shard before was dropped), and the park covers the shard up to where
the source has read at each watermark write (`ParkedShard.covered`). Past
`options.park_limit` bytes a shard parks no more: it holds its source's watermark
where its park ends, as a paused shard does without parking (its upstream must keep
the binlogs from there), and once resumed reads the rest from its source again."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from replicator.apply.meta import Meta
from replicator.faults import crash_point
from replicator.shard_flow import ShardFlows
from replicator.shard_id import ShardId
from replicator.source.messages import Change, DDLEvent, RowEvent
from replicator.source.source_state import SourceState
from replicator.state.park import ParkSize
from replicator.state.pauses import Pause
from replicator.state.positions import ChangeId

log = logging.getLogger("shardmerge.daemon")
Parked = Change | RowEvent | DDLEvent  # what a paused shard's source sent of it


def rows_in(items: Sequence[Parked]) -> int:
    """The row changes of parked messages (a row event counts its rows)."""
    return sum(
        (item.rows or 1) if isinstance(item, RowEvent) else 1
        for item in items
        if not isinstance(item, DDLEvent)
    )


@dataclass
class ParkedShard:
    first: ChangeId  # its pause's first change: the park starts there
    pending: list[Parked] = field(default_factory=list)  # taken, not written yet
    size: ParkSize = field(default_factory=ParkSize)  # written
    next_seq: int = 1
    last: ChangeId | None = None  # the last change taken (a change read again at or below is had)
    covered: ChangeId | None = None  # every change of it read below this is written
    rewind: int = 0  # the source's rewind (SourceState.rewinds) its first read comes after
    full: bool = False  # past the limit: it parks no more
    draining: bool = False  # resumed: dropped once every change of it is applied

    def pending_size(self) -> int:
        return rows_in(self.pending)


class Parking:
    def __init__(self, meta: Meta, flows: ShardFlows, sources: Mapping[str, SourceState], limit: int):
        self.meta = meta
        self.store = meta.park
        self.flows = flows
        self.sources = sources
        self.limit = limit  # bytes a shard's park may take (0: no parking)
        self.shards: dict[ShardId, ParkedShard] = {}
        # what the watermarks' transaction writes: per shard the pending taken, their size
        # and where the park covers to then; the drained parks it drops
        self._writing: dict[ShardId, tuple[int, ParkSize, ChangeId | None]] = {}
        self._dropping: list[ShardId] = []

    # -- a shard's park ----------------------------------------------------------------------------
    def restore(self, watermarks: Mapping[str, ChangeId]) -> list[ShardId]:
        """At the start: the parks saved, each covering its shard up to its source's
        watermark. Returns the shards resumed before their park was applied (a park and
        no pause): they are replayed first."""
        pauses = self.flows.pauses()
        for shard, (size, next_seq, last) in self.store.load_sizes().items():
            if shard.source not in self.sources:
                continue  # (another member's: it reads that source)
            pause = pauses.get(shard)
            self.shards[shard] = ParkedShard(
                pause.first if pause is not None else last,
                size=size,
                next_seq=next_seq,
                last=last,
                covered=watermarks.get(shard.source),
                draining=pause is None,
            )
        if self.limit > 0:  # (paused before anything was parked: its source reads from its pause)
            for shard, pause in pauses.items():
                self.shards.setdefault(shard, ParkedShard(pause.first))
        return [shard for shard, parked in self.shards.items() if parked.draining]

    def drain(self, shards: list[ShardId]) -> list[ShardId]:
        """At the start: resumed shards whose scratch window was reopened (their pause is
        kept till it merges). Those with a park are fed from it: returned."""
        out = []
        for shard in shards:
            parked = self.shards.get(shard)
            if parked is not None and parked.covered is not None:
                parked.draining = True
                out.append(shard)
            elif parked is not None:  # (nothing parked: its source reads it from its pause)
                del self.shards[shard]
        return out

    def start(self, pause: Pause, readable: bool = True) -> bool:
        """The shard paused: it parks from its pause on (True: its source is to read it
        again from there, `SourceState.rewind`). One whose rows cannot be read (`readable`
        False: its schema is not known) parks nothing: it holds its source's binlog from
        its pause, read again from there once it resumes."""
        if self.limit <= 0:
            return False
        parked = self.shards.get(pause.shard)
        if parked is not None and not parked.draining:
            if not readable:
                self.hold(pause.shard)
            return False
        state = self.sources.get(pause.source)
        reading = state is not None and state.pipe is not None  # (else its source starts at the pause)
        # paused again before the park of its last pause was dropped (every change of it
        # fed, not all applied, or applied since the last watermark write): that park's
        # batches stay till the new one is applied too (fed again then, they are had
        # already), and the new pause parks after them, as one not draining would. Not
        # taken for its park, its changes since were neither parked nor read again, and
        # its resume fed the old park in their place (L54)
        kept = {} if parked is None else {"size": parked.size, "next_seq": parked.next_seq}
        if not readable:
            self.shards[pause.shard] = ParkedShard(pause.first, full=True, **kept)
            return False
        rewind = state.rewinds + 1 if reading else 0
        self.shards[pause.shard] = ParkedShard(pause.first, rewind=rewind, **kept)
        return True

    def take(self, shard: ShardId, item: Parked) -> bool:
        """A paused shard's change or DDL its source sent: parked (True), or had already."""
        parked = self.shards.get(shard)
        if parked is None or parked.draining or parked.full or item.id < parked.first:
            return False
        if parked.last is not None and item.id <= parked.last:
            return True
        state = self.sources.get(shard.source)
        if state is not None and state.rewinding:
            # (the rest of what its source sent with the change that paused it: read again
            # after the rewind its pause asked for, and not taken for had then)
            return True
        parked.pending.append(item)
        parked.last = item.id
        return True

    def hold(self, shard: ShardId) -> None:
        """Its source sends no more of the shard (its rows cannot be read: its worker drops
        them till it resumes): it parks no more, as past its limit, and holds its source's
        binlog from where its park ends, read again once it resumes."""
        parked = self.shards.get(shard)
        if parked is not None and not parked.draining and not parked.full:
            parked.full = True
            log.info(
                "shard %s: its rows cannot be read, it parks no more and holds source %s's binlog "
                "from here till it resumes",
                shard,
                shard.source,
                extra={"shard": shard, "source": shard.source},
            )

    def ready(self, shard: ShardId) -> bool:
        """Whether the shard's park holds every change of it since its pause: written up to
        where its source's watermark may be. Till then its source has kept its binlog from
        the pause (its watermark waits there), which a resume reads again instead."""
        parked = self.shards.get(shard)
        return parked is not None and parked.covered is not None

    def held_from(self, source: str) -> ChangeId | None:
        """Where the source's paused shards hold its watermark: the first change of each
        not parked yet, and where each scratch window reads from."""
        held = []
        for flow in self.flows:
            # (an operator's request on a whole group has a flow of no shard)
            if flow.shard is None or flow.shard.source != source:
                continue
            parked = self.shards.get(flow.shard)
            covered = parked.covered if parked is not None else None
            if flow.pause is not None:
                held.append(covered or flow.pause.first)
            if flow.window is not None:  # (its paused changes come from its park, if it has one)
                held.append(covered or flow.window.hold)
        return min(held, default=None)

    # -- written with the watermarks ---------------------------------------------------------------
    def sql_write(self, applied_below: Callable[[str], ChangeId | None]) -> list[str]:
        """For the watermarks' transaction: the batches taken since the last one, and the
        drop of each resumed shard's park whose every change is applied (`applied_below`:
        a source's least change not applied yet, None: none in flight)."""
        out = []
        self._writing, self._dropping = {}, []
        for shard, parked in self.shards.items():
            if parked.draining:
                flow = self.flows.get(shard)
                if flow is not None and (flow.window is not None or flow.pause is not None):
                    continue  # (its rows go through a scratch window, merged later)
                low = applied_below(shard.source)
                if low is None or parked.last is None or low > parked.last:
                    out.append(self.store.sql_drop(shard))
                    self._dropping.append(shard)
                continue
            state = self.sources.get(shard.source)
            read = state.position.change(0) if state and state.position and not state.rewinding else None
            covers = read if read is not None and state.rewinds >= parked.rewind and not parked.full else None
            taken, size = len(parked.pending), ParkSize()
            if taken:
                sql, size = self.store.sql_batch(
                    shard, parked.next_seq, parked.pending, parked.pending_size()
                )
                out.append(sql)
                if parked.size.bytes + size.bytes > self.limit:
                    parked.full = True  # (this batch still goes: its changes are taken)
                    log.warning(
                        "shard %s: its parked changes passed options.park_limit (%d bytes): it parks "
                        "no more and holds source %s's binlog from here till it resumes",
                        shard,
                        self.limit,
                        shard.source,
                        extra={"shard": shard, "source": shard.source},
                    )
            self._writing[shard] = (taken, size, covers)
        return out

    def written(self) -> None:
        """The watermarks' transaction committed what `sql_write` gave."""
        for shard, (taken, size, covers) in self._writing.items():
            parked = self.shards.get(shard)
            if parked is None:
                continue
            if taken:
                parked.pending = parked.pending[taken:]
                parked.size, parked.next_seq = parked.size + size, parked.next_seq + 1
            if covers is not None:
                parked.covered = covers
        for shard in self._dropping:
            parked = self.shards.get(shard)
            if parked is not None and parked.draining:  # (not one paused again since)
                del self.shards[shard]
        self._writing, self._dropping = {}, []

    # -- resuming ----------------------------------------------------------------------------------
    def replay(self, shard: ShardId, feed: Callable[[Parked], None]) -> ChangeId | None:
        """Feed the shard's park, in order, as its source would send it again; it is
        dropped once applied (`sql_write`). Returns where its source is to read it again
        from (its park was full), or None."""
        parked = self.shards.get(shard)
        if parked is None:
            return None
        log.info(
            "shard %s resumes: its parked changes go downstream (%d rows)",
            shard,
            self.size(shard).rows,
            extra={"shard": shard, "source": shard.source},
        )
        for item in self._items(shard, parked):
            feed(item)
        parked.pending, parked.draining = [], True
        crash_point("park_fed")
        return parked.covered if parked.full and parked.covered else None

    def _items(self, shard: ShardId, parked: ParkedShard) -> Iterator[Parked]:
        with self.meta.session() as conn, conn.cursor() as cur:
            for batch in self.store.batches(cur, shard):
                yield from batch
        yield from list(parked.pending)

    def discard(self, shard: ShardId) -> list[str]:
        """A shard resumed with its rows since the pause dropped (binlog skip, left its group)."""
        return [self.store.sql_drop(shard)] if self.shards.pop(shard, None) is not None else []

    def size(self, shard: ShardId) -> ParkSize | None:
        parked = self.shards.get(shard)
        if parked is None:
            return None
        return parked.size + ParkSize(parked.pending_size(), 0, 0)
