"""One batch's transaction downstream (`BatchCommit`): the fence (and, where a task's daemons
share its tables, their versions: version_fence.py), the batch's statements and its
checkpoints, committed together. A row event the server refuses (or that no
longer fits its table) is applied as its decoded rows instead, with the same checkpoint."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

import pymysql

from replicator.apply.batch import Batch
from replicator.apply.checkpoints import Checkpoints
from replicator.apply.drops import Drops
from replicator.apply.meta import Meta
from replicator.apply.partitioner import Partitioner
from replicator.apply.statements import statements
from replicator.apply.tally import Tally
from replicator.apply.target import TargetInfo
from replicator.apply.version_fence import VersionFence
from replicator.faults import crash_point
from replicator.identity_memo import IdentityMemo
from replicator.shard_id import ShardId
from replicator.source.messages import Change, RowEvent
from replicator.source.row_events import fits
from replicator.state.positions import ChangeId

log = logging.getLogger("shardmerge.applier")

# a BINLOG statement refused for want of the privilege (BINLOG REPLAY, or SUPER)
PRIVILEGE_ERRORS = {1227, 1044, 1045, 1142}


class BatchCommit:
    """Threads: every partition's thread commits through it, each on its own connection.
    Its own state is `as_is`, one flag that any of them turns off (never on) and the
    daemon's thread reads, and the memo of which shapes fit (`IdentityMemo`: threads may
    share it); the rest it writes is `Checkpoints`', `Tally`'s and the hook's."""

    def __init__(
        self,
        meta: Meta,
        targets: Mapping[str, TargetInfo],
        safe_mode: Callable[[list[Change]], bool],
        partitioner: Partitioner,
        checkpoints: Checkpoints,
        drops: Drops,
        tally: Tally,
        as_is: bool,
        on_committed: Callable[[list[Change | RowEvent]], None] | None,
        versions: VersionFence | None = None,
    ):
        self.meta = meta
        self.targets = targets
        self.safe_mode = safe_mode
        self.partitioner = partitioner
        self.checkpoints = checkpoints
        self.drops = drops
        self.tally = tally
        self.as_is = as_is  # row events are applied as they are (off once refused for privileges)
        # hears what each transaction committed, from the partition's thread (continuous validation)
        self.on_committed = on_committed
        self._fits_memo = IdentityMemo(fits)  # (a message's shapes: one object each)
        # where the task's daemons share its tables: each batch checked against their versions
        self.versions = versions

    def apply(self, conn, batch: Batch) -> None:
        changes = batch.changes
        drops = self.drops
        if drops.dropped:
            changes = [c for c in changes if not drops.discards(c)]
        if not changes:
            return
        targets = sorted({c.target for c in changes})
        for t in targets:
            self.targets[t].lock.acquire_read()
        try:
            # the checkpoint of a row event is its own id, also where its rows are written
            last: dict[ShardId, ChangeId] = {}
            for c in changes:
                last[c.shard] = c.id
            with conn.cursor() as cur:
                cur.execute("START TRANSACTION")
                if self.meta.fence is not None:
                    self.meta.fence(cur)
                if self.versions is not None:  # (a task of many daemons: built for its tables as they are)
                    self.versions.check(cur, batch.majors)
                applied = self.as_applied(changes, batch)
                statements = self.statements(applied, batch.majors)
                statements.append(self.meta.checkpoints.sql((s, batch.part, cid) for s, cid in last.items()))
                for statement in statements:
                    cur.execute(statement)
                crash_point("batch_written")
                cur.execute("COMMIT")
            crash_point("batch_committed")
            crash_point("released_batch_committed", after="shard_released")
            self.tally.committed(applied)
            if self.on_committed is not None:
                self.on_committed(applied)
            for shard, cid in last.items():
                self.checkpoints.mark(shard, batch.part, cid)
        finally:
            for t in targets:
                self.targets[t].lock.release_read()

    def as_applied(self, changes: list[Change | RowEvent], batch: Batch) -> list[Change | RowEvent]:
        """The batch as it goes to the server now: a row event as it is where it still
        may (the target holds what its rows hold, no safe mode, not refused), else its
        rows, those not applied already (an earlier run may have written some)."""
        if not any(isinstance(c, RowEvent) for c in changes):
            return changes
        as_is = batch.as_is and self.as_is and not self.safe_mode(changes)
        out: list[Change | RowEvent] = []
        for change in changes:
            if not isinstance(change, RowEvent) or (as_is and self._fits(change)):
                out.append(change)
            else:
                out += [
                    half
                    for row in change.codec.changes(change)
                    if not self.checkpoints.applied_in(row, batch.part)
                    for _, half in self.partitioner.halves(row)
                ]
        return out

    def _fits(self, event: RowEvent) -> bool:
        return self._fits_memo(event.shape, self.targets[event.target].shape)

    def statements(self, changes: list[Change | RowEvent], majors: Mapping[str, int]) -> list[str]:
        return statements(changes, self.targets, majors, self.safe_mode(changes))

    def decoded_instead(self, batch: Batch, exc: pymysql.err.MySQLError) -> bool:
        """The server refused a batch of row events as they are: True to apply their rows
        decoded instead, as statements the server may take (a row of the event applied
        already is skipped), or that say which row it refuses."""
        if not batch.as_is or not any(isinstance(c, RowEvent) for c in batch.changes):
            return False
        if exc.args and exc.args[0] in PRIVILEGE_ERRORS:
            self.as_is = False
            log.warning(
                "the downstream user may not run BINLOG statements (%s): row events are "
                "decoded from now on; grant BINLOG REPLAY (or SUPER) to apply them as they are",
                exc,
            )
        else:
            log.info("partition %d: row events refused (%s); applying rows", batch.part, exc)
        return True

    def committed(self, conn, batch: Batch) -> bool:
        """After a lost connection: did the batch's transaction commit? Its checkpoint says."""
        last = batch.changes[-1]
        with conn.cursor() as cur:
            done = self.meta.checkpoints.committed(cur, last.shard, batch.part)
        return done is not None and done >= last.id
