"""Writing changes downstream, exactly once, several connections at a time.

Changes are spread over partitions by a hash of the target key, so changes to one
key stay in order while unrelated keys are applied in parallel; or, where row
events are applied as the binlog holds them (`replicator.source.row_events`), by
source, so each source's changes, events and decoded rows alike, keep the binlog's
order, as a native replica keeps it. Each partition
commits a batch in one transaction together with, for every (shard, partition) in
it, the id of the last change applied: after a crash a change is applied again
only if its id is above that checkpoint, so nothing is lost or repeated. A row
event the server refuses (or that no longer fits its table) is applied as its
decoded rows instead, with the same checkpoint.

Every batch remembers the version of each target table it was built for; at
commit, under the table's schema lock, a batch built for an older major version
is rebuilt for the current table rather than committed as is (seed 004).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
import traceback
import zlib
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

import pymysql

from replicator.apply.meta import Meta
from replicator.apply.refused import Refused
from replicator.apply.statements import statements
from replicator.apply.target import TargetInfo
from replicator.faults import crash_point
from replicator.identity_memo import IdentityMemo
from replicator.metrics import Metrics
from replicator.servers import connect_downstream
from replicator.shard_id import ShardId
from replicator.source.messages import Change, RowEvent
from replicator.source.row_events import (
    fits,
)
from replicator.state.positions import ZERO, ChangeId
from replicator.transient import Retrying, error_kind, lost, transient

log = logging.getLogger("shardmerge.applier")

# a BINLOG statement refused for want of the privilege (BINLOG REPLAY, or SUPER)
PRIVILEGE_ERRORS = {1227, 1044, 1045, 1142}


class ApplierFailed(RuntimeError):
    """A partition thread died of an unexpected error; nothing after it is committed."""


@dataclass
class Batch:
    part: int
    changes: list[Change | RowEvent]
    majors: dict[str, int]  # target -> major version the batch was built for
    seq: int = 0
    as_is: bool = True  # row events may go as they are (False once the server refused the batch)


class Applier:
    def __init__(
        self,
        meta: Meta,
        targets: dict[str, TargetInfo],
        connection: dict,
        partitions: int,
        batch_size: int,
        safe_mode: Callable[[list[Change]], bool],
        checkpoints: dict[tuple[ShardId, int], ChangeId],
        on_error: Callable[[Refused], None],
        max_backoff: float = 30.0,
        metrics: Metrics | None = None,
        by_source: bool = False,
        skip_refused: bool = False,
    ):
        """`by_source`: spread changes by source, not by key (row events go as they are).
        `skip_refused` (on_row_error: skip): a row the downstream refuses goes into the
        dead-letter table with its checkpoint, and its shard goes on; else `on_error`
        hears of it (the daemon pauses the shard)."""
        self.metrics = metrics
        self.by_source = by_source
        self.skip_refused = skip_refused
        # a change id's binlog file, for the dead-letter table (the daemon knows the names)
        self.file_of: Callable[[ShardId, ChangeId], str] = lambda shard, cid: str(cid[0])
        self.as_is = by_source  # row events are applied as they are (off once refused for privileges)
        # hears what each transaction committed, from the partition's thread (continuous validation)
        self.on_committed: Callable[[list[Change | RowEvent]], None] | None = None
        self._fits_memo = IdentityMemo(fits)  # (a message's shapes: one object each)
        self.reconnects = 0  # connections lost and tried again (a counter: threads add to it)
        self.meta = meta
        self.targets = targets
        self.connection = connection
        self.partitions = partitions
        self.batch_size = batch_size
        self.safe_mode = safe_mode
        self.checkpoints = checkpoints
        self.on_error = on_error
        self.max_backoff = max_backoff
        self.buffers: list[list[Change]] = [[] for _ in range(partitions)]
        self.queues: list[queue.Queue[Batch | None]] = [queue.Queue(maxsize=4) for _ in range(partitions)]
        self.lock = threading.Condition()
        # changes routed and not yet committed: in buffers (the daemon's thread alone touches
        # these) or in batches sent to a partition (under the lock)
        self.buffered: dict[ShardId, int] = defaultdict(int)  # shard -> changes in buffers
        self.inflight: dict[ShardId, int] = defaultdict(int)  # shard -> changes in sent batches
        self.inflight_ids: dict[str, dict[int, ChangeId]] = defaultdict(dict)  # source -> {batch: min id}
        # shard -> its highest checkpoint: only changes up to it can have been applied
        # already (read again after a restart or a rewind), so only they need the
        # per-partition check
        self.top: dict[ShardId, ChangeId] = {}
        for (shard, _), cid in checkpoints.items():
            self.top[shard] = max(cid, self.top.get(shard, cid))
        self._key_index: dict[tuple[str, tuple[str, ...]], tuple[int, ...] | None] = {}
        # paused shard -> its first change not applied: its changes from there on are
        # discarded (they are read again when it resumes); earlier ones still commit
        self.dropped: Mapping[ShardId, ChangeId] = _EMPTY
        # of those, the shards paused by a row the downstream refused, from that row: their
        # DDLs from there wait till their rows are read again (GroupExecutor._read_again)
        self.refused: Mapping[ShardId, ChangeId] = _EMPTY
        # (both values, replaced, never changed: the apply threads replace them on a refused
        # row and the daemon's thread pausing and resuming, under this lock, so a resume is
        # not undone by a write it raced; every other thread reads the value in place)
        self._drops = threading.Lock()
        self.applied = 0  # rows committed downstream (an update moving its key: two)
        self.applied_events = 0  # row events among them, applied as the binlog holds them
        self.batch_seconds: list[float] = []
        self.stopping = False
        self.failure: str | None = None
        # partition -> its batch waiting on an error a retry cures (query-status)
        self.retrying: dict[int, Retrying] = {}
        # called on the daemon's thread while a full partition queue holds it (`_put`)
        self.waiting: Callable[[], None] | None = None
        self.threads = [
            threading.Thread(target=self._run, args=(i,), name=f"apply-{i}", daemon=True)
            for i in range(partitions)
        ]
        self._seq = 0

    def start(self) -> None:
        for t in self.threads:
            t.start()

    # -- routing (daemon thread) -------------------------------------------------------------
    def _key_positions(self, target: str, columns: tuple[str, ...]) -> tuple[int, ...] | None:
        """Where the target's key columns sit in a change's column tuple (cached: the
        tuples are shared per table version)."""
        found = self._key_index.get((target, columns), False)
        if found is False:
            info = self.targets[target]
            lower = [c.lower() for c in columns]
            found = None
            if info.key and all(k.lower() in lower for k in info.key):
                found = tuple(lower.index(k.lower()) for k in info.key)
            self._key_index[(target, columns)] = found
        return found

    def _source_part(self, shard: ShardId) -> int:
        return zlib.crc32(shard.source.encode()) % self.partitions

    def _part(self, change: Change, after: bool) -> int:
        if self.by_source:
            return self._source_part(change.shard)
        columns = change.columns if after else (change.before_columns or change.columns)
        values = change.values if after else change.before
        positions = self._key_positions(change.target, columns)
        if positions is None:
            return zlib.crc32(str(change.shard).encode()) % self.partitions
        text = change.target + "\x1e" + "\x1f".join([values[i] for i in positions])
        return zlib.crc32(text.encode()) % self.partitions

    def partitions_of(self, change: Change | RowEvent) -> list[int]:
        """The partition(s) a change goes to: an update that moves its key is a delete
        in one and an insert in another."""
        if isinstance(change, RowEvent):
            return [self._source_part(change.shard)]
        if change.op == "I":
            return [self._part(change, True)]
        if change.op == "D":
            return [self._part(change, False)]
        before, after = self._part(change, False), self._part(change, True)
        return [before] if before == after and not self._key_moves(change) else [before, after]

    def _key_moves(self, change: Change) -> bool:
        new = self._key_positions(change.target, change.columns)
        old = self._key_positions(change.target, change.before_columns or change.columns)
        if new is None or old is None:
            return False
        return [change.values[i] for i in new] != [change.before[i] for i in old]

    def submit(self, change: Change | RowEvent) -> None:
        """Route one change to its partition; split an update that moves its key.
        Read again, a split change goes only where it is not applied yet: its other
        half may have committed, with later changes of its partition to that key
        (skipped as applied), which the half applied again would undo."""
        if isinstance(change, RowEvent):
            self._add(self._source_part(change.shard), change)
            return
        halves = self._halves(change)
        for n, (part, half) in enumerate(halves):
            if len(halves) == 1 or not self._applied_in(change, part):
                # in one partition both halves go in one batch: the checkpoint of a batch
                # holding only the delete would count the insert as applied too
                self._add(part, half, flush=n == len(halves) - 1 or part != halves[-1][0])

    def _halves(self, change: Change) -> list[tuple[int, Change]]:
        """The change in its partition; an update that moves its key as a delete of the
        old key and an insert of the new (each in its partition): a statement by key
        can do neither alone."""
        parts = self.partitions_of(change)
        if len(parts) == 1:
            return [(parts[0], change)]
        before_columns = change.before_columns or change.columns
        delete = Change(change.id, change.shard, change.target, "D", before_columns, None, change.before)
        insert = Change(
            change.id, change.shard, change.target, "I", change.columns, change.values, clear=change.clear
        )
        return [(parts[0], delete), (parts[1], insert)]

    def already_applied(self, change: Change) -> bool:
        """Applied already (read again after a restart or a rewind): its id is at or
        below the checkpoint of every partition it goes to."""
        last = self.top.get(change.shard)
        if last is None or change.id > last:
            return False
        return all(self._applied_in(change, p) for p in self.partitions_of(change))

    def applied_below(self, shard: ShardId, change: ChangeId) -> bool:
        """Every partition's checkpoint of the shard is at or past `change`: what it held
        was applied before (a change of it read again after a restart)."""
        last = self.top.get(shard)
        if last is None or change > last:
            return False
        return all(change <= self.checkpoints.get((shard, p), ZERO) for p in range(self.partitions))

    def _applied_in(self, change: Change, part: int) -> bool:
        done = self.checkpoints.get((change.shard, part))
        return done is not None and change.id <= done

    def _add(self, part: int, change: Change, flush: bool = True) -> None:
        buffer = self.buffers[part]
        buffer.append(change)
        self.buffered[change.shard] += 1
        if flush and len(buffer) >= self.batch_size:
            self.flush(part)

    def flush(self, part: int | None = None) -> None:
        """Send buffered changes to their partitions (the daemon's thread only)."""
        for p in range(self.partitions) if part is None else [part]:
            changes = self.buffers[p]
            if not changes:
                continue
            self.buffers[p] = []
            counts: dict[ShardId, int] = defaultdict(int)
            # the smallest id of each source: a buffer is not in id order (changes that
            # waited behind their shard's DDL come after newer ones of other shards)
            lows: dict[ShardId, ChangeId] = {}
            for c in changes:
                counts[c.shard] += 1
                low = lows.get(c.shard)
                if low is None or c.id < low:
                    lows[c.shard] = c.id
            first: dict[str, ChangeId] = {}
            for shard, low in lows.items():
                source = shard.source
                if source not in first or low < first[source]:
                    first[source] = low
            with self.lock:
                self._seq += 1
                seq = self._seq
                for source, cid in first.items():
                    self.inflight_ids[source][seq] = cid
                for shard, n in counts.items():
                    self.inflight[shard] += n  # counted in flight before it leaves the buffers
            for shard, n in counts.items():
                self.buffered[shard] -= n
                if not self.buffered[shard]:
                    del self.buffered[shard]
            majors = {t: self.targets[t].major for t in {c.target for c in changes}}
            self._put(p, Batch(p, changes, majors, seq))

    def _put(self, part: int, batch: Batch) -> None:
        # the queues are bounded (back pressure on the workers); a dead partition
        # would block the daemon forever on a full one
        while True:
            self.check()
            try:
                self.queues[part].put(batch, timeout=0.2)
                return
            except queue.Full:
                if self.waiting is not None:
                    self.waiting()  # (status read meanwhile: the downstream may be what it waits on)
                continue

    def check(self) -> None:
        """Raise if a partition thread has died."""
        if self.failure is not None:
            raise ApplierFailed(self.failure)

    def oldest(self, source: str) -> ChangeId | None:
        """The smallest id of this source's changes not yet committed (the daemon's
        thread; a holder of `replicator.apply.watermark`)."""
        ids = [c.id for b in self.buffers for c in b if c.shard.source == source]
        with self.lock:
            ids += self.inflight_ids[source].values()
        return min(ids) if ids else None

    def _dropped(self, change: Change) -> bool:
        # one lookup: the daemon's thread may resume the shard meanwhile
        first = self.dropped.get(change.shard)
        return first is not None and change.id >= first

    def settle(self, shard: ShardId, last: ChangeId) -> None:
        """The shard's changes up to `last` were written downstream outside the partitions
        (a resumed shard's paused rows, merged from their scratch table, with these
        checkpoints): read again, they are applied already."""
        for part in range(self.partitions):
            if last > self.checkpoints.get((shard, part), ZERO):
                self.checkpoints[(shard, part)] = last
        if last > self.top.get(shard, ZERO):
            self.top[shard] = last

    def drop_from(self, shard: ShardId, first: ChangeId, refused: bool = False) -> None:
        """The shard paused at `first`: discard its changes from there on (`refused`: at a
        row the downstream refused)."""
        with self._drops:
            held = self.dropped.get(shard)
            self.dropped = _with(self.dropped, {shard: first if held is None else min(held, first)})
            if refused:
                self.refused = _with(self.refused, {shard: min(self.refused.get(shard, first), first)})

    def take_again(self, shard: ShardId) -> None:
        """The shard resumed: its changes are applied again."""
        with self._drops:
            self.dropped = _without(self.dropped, shard)
            self.refused = _without(self.refused, shard)

    def restore_drops(
        self, dropped: Mapping[ShardId, ChangeId], refused: Mapping[ShardId, ChangeId]
    ) -> None:
        """At a start: the paused shards, and those of them paused by a refused row."""
        with self._drops:
            self.dropped = _with(self.dropped, dropped)
            self.refused = _with(self.refused, refused)

    def wait_shard(self, shard: ShardId, timeout: float | None = None) -> bool:
        """Block until every routed change of the shard is committed (the DDL barrier).
        Called from a DDL thread: the daemon's loop flushes partial batches meanwhile."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.lock:
            # buffered first: a flush counts a change in flight before it leaves the buffers
            while self.buffered.get(shard, 0) > 0 or self.inflight[shard] > 0:
                self.check()
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self.lock.wait(remaining if remaining is not None else 1.0)
        return True

    def shard_idle(self, shard: ShardId) -> bool:
        """Whether none of the shard's changes is buffered or in flight."""
        with self.lock:
            return self.buffered.get(shard, 0) == 0 and self.inflight[shard] == 0

    def wait_idle(self) -> None:
        self.flush()
        with self.lock:
            while any(self.inflight.values()) or any(self.buffered.values()):
                self.check()
                self.lock.wait(1.0)

    def stop(self) -> None:
        self.stopping = True
        for q, t in zip(self.queues, self.threads, strict=True):
            # (a partition that died may still be alive a moment, its queue full: no put
            # waits on a queue nobody takes from)
            while t.is_alive():
                try:
                    q.put(None, timeout=0.2)
                    break
                except queue.Full:
                    continue
        for t in self.threads:
            t.join(timeout=30)

    # -- partitions (apply threads) -------------------------------------------------------------
    def _run(self, part: int) -> None:
        try:
            self._serve(part)
        except BaseException:
            self.failure = f"partition {part}: {traceback.format_exc()}"
            log.error("applier %s", self.failure)
            with self.lock:
                self.lock.notify_all()

    def _serve(self, part: int) -> None:
        conn = None
        while True:
            batch = self.queues[part].get()
            if batch is None:
                break
            started = time.perf_counter()
            conn = self._apply_with_retries(conn, batch)
            if self.metrics is not None:
                self.metrics.batch_seconds.observe(time.perf_counter() - started)
            self._done(batch)
        if conn is not None:
            conn.close()

    def _done(self, batch: Batch) -> None:
        counts: dict[ShardId, int] = defaultdict(int)
        for change in batch.changes:
            counts[change.shard] += 1
        with self.lock:
            for shard, n in counts.items():
                self.inflight[shard] -= n
                if not self.inflight[shard]:
                    del self.inflight[shard]
            for source in list(self.inflight_ids):
                self.inflight_ids[source].pop(batch.seq, None)
            self.lock.notify_all()

    def _count(self, applied: list[Change | RowEvent]) -> None:
        """What a transaction committed: its rows (a change's one; a row event's, which the
        worker counted), for query-status and the metrics, and the row events among them."""
        rows: dict[tuple[str, str], int] = defaultdict(int)
        events: dict[tuple[str, str], int] = defaultdict(int)
        event_rows: dict[tuple[str, str], int] = defaultdict(int)
        shards: dict[tuple[str, str], int] = defaultdict(int)
        for change in applied:
            n = change.rows if isinstance(change, RowEvent) else 1
            rows[change.shard.source, change.target] += n
            shards[str(change.shard), change.target] += n
            if isinstance(change, RowEvent):
                events[change.shard.source, change.target] += 1
                event_rows[change.shard.source, change.target] += n
        with self.lock:
            self.applied += sum(rows.values())
            self.applied_events += sum(events.values())
        if self.metrics is None:
            return
        for (source, target), n in rows.items():
            self.metrics.rows_applied.inc(source, target, amount=n)
        for (source, target), n in events.items():
            self.metrics.row_events_applied.inc(source, target, amount=n)
            self.metrics.row_event_rows.inc(source, target, amount=event_rows[source, target])
        for (shard, target), n in shards.items():
            self.metrics.shard_rows.inc(shard, target, amount=n)

    def _connect(self, conn):
        if conn is not None:
            try:
                conn.ping(reconnect=False)
                return conn
            except Exception:
                self._lost_connection()
                with contextlib.suppress(Exception):
                    conn.close()
        return connect_downstream(self.connection)

    def _lost_connection(self) -> None:
        self.reconnects += 1
        if self.metrics is not None:
            self.metrics.reconnects.inc("downstream")

    def _apply_with_retries(self, conn, batch: Batch, uncertain: bool = False):
        """Apply a batch; an error a retry cures (replicator/transient.py: the connection
        lost or killed, the server restarting, read-only or refusing connections for a while,
        a lock wait timeout, a deadlock) is retried with capped backoff, said in status
        (`retrying`) and metrics, and never pauses a shard; only rows the server refuses do."""
        backoff = 0.2
        retrying: Retrying | None = None
        while True:
            try:
                conn = self._connect(conn)
                if uncertain and self._committed(conn, batch):
                    break
                try:
                    self._apply(conn, batch)
                except pymysql.err.MySQLError as exc:
                    if transient(exc):
                        raise
                    _rollback(conn)
                    if self._decoded_instead(batch, exc):
                        continue  # (the same rows again, another way)
                    conn = self._isolate(conn, batch, exc)
                break
            except (pymysql.err.MySQLError, ConnectionError, TimeoutError) as exc:
                if not transient(exc):
                    raise
                if lost(exc):
                    # the connection cannot be trusted: reconnect, and find out from the
                    # checkpoint whether the batch committed
                    uncertain = True
                    self._lost_connection()
                    with contextlib.suppress(Exception):
                        conn.close()
                    conn = None
                else:
                    _rollback(conn)
                error = f"{type(exc).__name__}: {exc}"
                what = f"rows of partition {batch.part}"
                first = Retrying("rows", what, error, time.time(), 1)
                retrying = retrying.again(error) if retrying is not None else first
                self.retrying[batch.part] = retrying
                if self.metrics is not None:
                    self.metrics.retries.inc("rows", error_kind(exc))
                log.warning(
                    "partition %d: downstream %s (%s); retrying in %.1fs (attempt %d)",
                    batch.part,
                    "unavailable" if lost(exc) else "refused the batch for a while",
                    error,
                    backoff,
                    retrying.attempt,
                )
                time.sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff)
        if retrying is not None:
            self.retrying.pop(batch.part, None)
            log.info("partition %d: applied after %d retries", batch.part, retrying.attempt)
        return conn

    def _decoded_instead(self, batch: Batch, exc: pymysql.err.MySQLError) -> bool:
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
        batch.as_is = False
        return True

    def _committed(self, conn, batch: Batch) -> bool:
        """After a lost connection: did the batch's transaction commit? Its checkpoint says."""
        last = batch.changes[-1]
        with conn.cursor() as cur:
            done = self.meta.checkpoints.committed(cur, last.shard, batch.part)
        return done is not None and done >= last.id

    def _apply(self, conn, batch: Batch) -> None:
        changes = batch.changes
        if self.dropped:
            changes = [c for c in changes if not self._dropped(c)]
        if not changes:
            return
        targets = sorted({c.target for c in changes})
        for t in targets:
            self.targets[t].lock.acquire_read()
        try:
            started = time.perf_counter()
            # the checkpoint of a row event is its own id, also where its rows are written
            last: dict[ShardId, ChangeId] = {}
            for c in changes:
                last[c.shard] = c.id
            applied = self._as_applied(changes, batch)
            statements = self._statements(applied, batch.majors)
            statements.append(self.meta.checkpoints.sql((s, batch.part, cid) for s, cid in last.items()))
            with conn.cursor() as cur:
                cur.execute("START TRANSACTION")
                if self.meta.fence is not None:
                    self.meta.fence(cur)
                for statement in statements:
                    cur.execute(statement)
                crash_point("batch_written")
                cur.execute("COMMIT")
            crash_point("batch_committed")
            crash_point("released_batch_committed", after="shard_released")
            self._count(applied)
            if self.on_committed is not None:
                self.on_committed(applied)
            for shard, cid in last.items():
                self.checkpoints[(shard, batch.part)] = cid
                if cid > self.top.get(shard, ZERO):
                    self.top[shard] = cid
            self.batch_seconds.append(time.perf_counter() - started)
            if len(self.batch_seconds) > 10000:
                del self.batch_seconds[:5000]
        finally:
            for t in targets:
                self.targets[t].lock.release_read()

    def _as_applied(self, changes: list[Change | RowEvent], batch: Batch) -> list[Change | RowEvent]:
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
                    if not self._applied_in(row, batch.part)
                    for _, half in self._halves(row)
                ]
        return out

    def _fits(self, event: RowEvent) -> bool:
        return self._fits_memo(event.shape, self.targets[event.target].shape)

    def _isolate(self, conn, batch: Batch, exc: Exception):
        """A batch the server refuses: apply its changes one by one, pause the shard
        of each change that fails (with the error), and let the rest through."""
        log.warning("partition %d: batch refused (%s); applying its changes one by one", batch.part, exc)
        for change in self._as_applied(batch.changes, replace(batch, as_is=False)):
            if self._dropped(change):
                continue
            single = Batch(batch.part, [change], batch.majors, batch.seq)
            try:
                self._apply(conn, single)
            except pymysql.err.MySQLError as one:
                _rollback(conn)
                if transient(one):
                    # this change alone is tried again (the ones before it committed, each
                    # with its checkpoint: the batch again would apply them twice)
                    if lost(one):
                        with contextlib.suppress(Exception):
                            conn.close()
                        conn = self._apply_with_retries(None, single, uncertain=True)
                    else:
                        conn = self._apply_with_retries(conn, single)
                    continue
                statement = "; ".join(self._statements([change], batch.majors))
                refused = Refused.of(change, self.targets[change.target].key, batch.part, statement, one)
                if self.skip_refused:
                    self._dead_letter(conn, refused)
                    continue
                self.drop_from(change.shard, (change.id[0], change.id[1], 0), refused=True)
                self.on_error(refused)
        return conn

    def _dead_letter(self, conn, refused: Refused) -> None:
        """on_row_error: skip. The refused row into the dead-letter table and its id into
        the checkpoint, in one transaction: skipped once, and never applied after."""
        file = self.file_of(refused.shard, refused.id)
        with conn.cursor() as cur:
            cur.execute("START TRANSACTION")
            if self.meta.fence is not None:
                self.meta.fence(cur)
            cur.execute(self.meta.dead_letters.sql_add(refused, file, "skipped"))
            cur.execute(self.meta.checkpoints.sql([(refused.shard, refused.part, refused.id)]))
            cur.execute("COMMIT")
        self.checkpoints[(refused.shard, refused.part)] = refused.id
        if refused.id > self.top.get(refused.shard, ZERO):
            self.top[refused.shard] = refused.id
        if self.metrics is not None:
            self.metrics.dead_letters.inc(str(refused.shard), refused.target)
        log.warning(
            "%s; the row is in the dead-letter table (on_row_error: skip), its shard goes on",
            refused.message,
            extra={"shard": refused.shard, "source": refused.shard.source},
        )

    def _statements(self, changes: list[Change | RowEvent], majors: dict[str, int]) -> list[str]:
        return statements(changes, self.targets, majors, self.safe_mode(changes))


def _rollback(conn) -> None:
    try:
        with conn.cursor() as cur:
            cur.execute("ROLLBACK")
    except Exception:
        pass


_EMPTY: Mapping = MappingProxyType({})


def _with(values: Mapping[ShardId, ChangeId], more: Mapping[ShardId, ChangeId]) -> Mapping[ShardId, ChangeId]:
    return MappingProxyType({**values, **more})


def _without(values: Mapping[ShardId, ChangeId], shard: ShardId) -> Mapping[ShardId, ChangeId]:
    return MappingProxyType({s: v for s, v in values.items() if s != shard}) if shard in values else values
