"""Each source's watermark, written about once a second (the rule is in
`replicator.apply.watermark`): with the safe mode of a backfill ended past it, the
source's GTID trail trimmed below it, and in the same transaction what paused shards
parked and the drop of the parks applied. A source's watermark never goes back: a
resumed shard's parked changes, fed to the applier, are older than it, and stay in its
park till applied."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pymysql

from replicator.apply.applier import Applier
from replicator.apply.gate import DDLGate
from replicator.apply.meta import Meta
from replicator.apply.watermark import watermark
from replicator.daemon.parking import Parking
from replicator.daemon.safe_mode import SafeMode
from replicator.faults import crash_point
from replicator.source.source_state import SourceState
from replicator.state.positions import ChangeId
from replicator.transient import METADATA_LOCK_WAIT

log = logging.getLogger("shardmerge.daemon")


class Watermarks:
    def __init__(
        self,
        sources: Mapping[str, SourceState],
        meta: Meta,
        gate: DDLGate,
        parking: Parking,
        safe: SafeMode,
    ):
        self.sources, self.meta, self.gate, self.parking, self.safe = sources, meta, gate, parking, safe
        self.applier: Applier | None = None  # (made after the pauses are read back)
        self.floors: dict[str, ChangeId] = {}  # each source's last watermark written

    def bound(self, state: SourceState) -> ChangeId | None:
        """The source's watermark now."""
        if state.position is None:
            return None
        holders = [self.gate.oldest, self.parking.held_from]
        if self.applier is not None:
            holders.append(self.applier.oldest)
        bound = watermark(state.id, state.position.change(0), holders)
        floor = self.floors.get(state.id)
        return bound if floor is None or floor <= bound else floor

    def back_to(self, source: str, cid: ChangeId) -> None:
        """The source's watermark may go back to `cid` (saved there already): a resumed
        shard's rows from there are read again from the binlog, its park dropped."""
        floor = self.floors.get(source)
        if floor is not None and cid < floor:
            self.floors[source] = cid

    def write(self) -> bool | pymysql.err.MySQLError:
        """Every source's watermark written: True, or the downstream's error if it refused
        them; False with nothing to write (no source has a position yet)."""
        statements, bounds = [], {}
        for state in self.sources.values():
            bound = bounds[state.id] = self.bound(state)
            if bound is None:
                continue
            self.safe.passed(state.id, bound)
            gtid = state.trail.before(bound, state.position.change(0))
            statements.append(
                self.meta.watermarks.sql(
                    state.id,
                    state.position_of(bound),
                    bound,
                    gtid=gtid,
                    event_time=state.event_time,
                    server_id=state.server_id,
                )
            )
            state.trail.trim(bound)
        # (the changes paused shards parked, and the parks of resumed ones applied)
        oldest = self.applier.oldest if self.applier is not None else lambda source: None
        statements += self.parking.sql_write(oldest)
        if not statements:
            return False
        try:
            # (the main thread writes them: not written under a long lock, written next second)
            self.meta.execute(statements, lock_wait=METADATA_LOCK_WAIT)
        except pymysql.err.MySQLError as exc:
            return exc
        self.parking.written()
        self.floors.update((source, bound) for source, bound in bounds.items() if bound is not None)
        crash_point("watermark_written", after="shard_released")
        return True
