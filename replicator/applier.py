"""Writing changes downstream, exactly once, several connections at a time.

Changes are spread over partitions by a hash of the target key, so changes to one
key stay in order while unrelated keys are applied in parallel. Each partition
commits a batch in one transaction together with, for every (shard, partition) in
it, the id of the last change applied: after a crash a change is applied again
only if its id is above that checkpoint, so nothing is lost or repeated.

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
import zlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import pymysql

from replicator.faults import crash_point
from replicator.messages import Change
from replicator.meta import Meta
from replicator.positions import ChangeId

log = logging.getLogger("shardmerge.applier")

# Errors after which the connection cannot be trusted: reconnect and find out from
# the checkpoint whether the batch committed.
CONNECTION_ERRORS = {1053, 1927, 2002, 2003, 2006, 2013, 2055}
RETRY_ERRORS = {1205, 1213}  # lock wait timeout, deadlock: run the batch again
SESSION = (
    "SET SESSION time_zone = '+00:00'",  # the binlog gives TIMESTAMPs in UTC
    # a replicated 0 in an AUTO_INCREMENT column must stay 0; errors must be loud
    "SET SESSION sql_mode = 'STRICT_TRANS_TABLES,NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'",
    "SET SESSION foreign_key_checks = 0",
)


class RWLock:
    """Many batch commits, or one downstream DDL, on a target at a time."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False
        self._waiting_writers = 0

    def acquire_read(self) -> None:
        with self._cond:
            while self._writing or self._waiting_writers:
                self._cond.wait()
            self._readers += 1

    def release_read(self) -> None:
        with self._cond:
            self._readers -= 1
            self._cond.notify_all()

    def acquire_write(self) -> None:
        with self._cond:
            self._waiting_writers += 1
            while self._writing or self._readers:
                self._cond.wait()
            self._waiting_writers -= 1
            self._writing = True

    def release_write(self) -> None:
        with self._cond:
            self._writing = False
            self._cond.notify_all()


@dataclass
class TargetInfo:
    """What the applier needs of a downstream table; the DDL executor updates it."""

    name: str  # schema.table
    quoted: str
    columns: dict[str, str]  # lower-case name -> name
    key: tuple[str, ...] | None  # primary (or unique NOT NULL) key columns
    major: int
    lock: RWLock = field(default_factory=RWLock)


@dataclass
class Batch:
    part: int
    changes: list[Change]
    majors: dict[str, int]  # target -> major version the batch was built for


def connect_downstream(kwargs: dict) -> pymysql.connections.Connection:
    conn = pymysql.connect(**kwargs, autocommit=True, charset="utf8mb4")
    with conn.cursor() as cur:
        for statement in SESSION:
            cur.execute(statement)
    return conn


class Applier:
    def __init__(
        self,
        meta: Meta,
        targets: dict[str, TargetInfo],
        connection: dict,
        partitions: int,
        batch_size: int,
        safe_mode: Callable[[], bool],
        checkpoints: dict[tuple[str, int], ChangeId],
        on_error: Callable[[Change, str], None],
        max_backoff: float = 30.0,
    ):
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
        self.inflight: dict[str, int] = defaultdict(int)  # shard -> changes routed, not committed
        self.inflight_ids: dict[str, dict[int, ChangeId]] = defaultdict(dict)  # source -> {batch: min id}
        self.buffer_min: list[dict[str, ChangeId]] = [{} for _ in range(partitions)]
        self.dropped: set[str] = set()  # shards whose changes are discarded (paused)
        self.applied = 0
        self.batch_seconds: list[float] = []
        self.stopping = False
        self.threads = [
            threading.Thread(target=self._run, args=(i,), name=f"apply-{i}", daemon=True)
            for i in range(partitions)
        ]
        self._seq = 0

    def start(self) -> None:
        for t in self.threads:
            t.start()

    # -- routing (daemon thread) -------------------------------------------------------------
    def partition_of(self, change: Change, values: dict[str, str] | None) -> int:
        info = self.targets[change.target]
        if info.key and values is not None:
            text = "\x1f".join(values.get(k, "NULL") for k in info.key)
            return zlib.crc32(f"{change.target}\x1e{text}".encode()) % self.partitions
        return zlib.crc32(change.shard.encode()) % self.partitions

    def submit(self, change: Change) -> None:
        """Route one change to its partition; split an update that moves its key."""
        info = self.targets[change.target]
        if change.op == "U" and info.key:
            before, after = self.partition_of(change, change.before), self.partition_of(change, change.values)
            if before != after or any(change.before.get(k) != change.values.get(k) for k in info.key):
                self._add(before, Change(change.id, change.shard, change.target, "D", None, change.before))
                self._add(
                    after,
                    Change(change.id, change.shard, change.target, "I", change.values, clear=change.clear),
                )
                return
        values = change.values if change.op == "I" else change.before
        self._add(self.partition_of(change, values), change)

    def already_applied(self, change: Change) -> bool:
        info = self.targets[change.target]
        part = self.partition_of(change, change.values if change.op == "I" else change.before)
        done = self.checkpoints.get((change.shard, part))
        if done is not None and change.id <= done and not (change.op == "U" and info.key):
            return True
        if change.op == "U" and info.key:
            # an update may have been split over two partitions: applied if both were
            parts = {self.partition_of(change, change.before), self.partition_of(change, change.values)}
            return all(
                (d := self.checkpoints.get((change.shard, p))) is not None and change.id <= d for p in parts
            )
        return False

    def _add(self, part: int, change: Change) -> None:
        buffer = self.buffers[part]
        source = change.shard.split(".", 1)[0]
        with self.lock:
            self.inflight[change.shard] += 1
            self.buffer_min[part].setdefault(source, change.id)
        buffer.append(change)
        if len(buffer) >= self.batch_size:
            self.flush(part)

    def flush(self, part: int | None = None) -> None:
        for p in range(self.partitions) if part is None else [part]:
            changes = self.buffers[p]
            if not changes:
                continue
            self.buffers[p] = []
            with self.lock:
                self._seq += 1
                seq = self._seq
                for source, first in self.buffer_min[p].items():
                    self.inflight_ids[source][seq] = first
                self.buffer_min[p] = {}
            majors = {t: self.targets[t].major for t in {c.target for c in changes}}
            batch = Batch(p, changes, majors)
            batch.seq = seq  # type: ignore[attr-defined]
            self.queues[p].put(batch)

    def pending_min(self, source: str) -> ChangeId | None:
        """The smallest id of this source's changes not yet committed (routed ones)."""
        with self.lock:
            ids = list(self.inflight_ids[source].values())
            ids += [m[source] for m in self.buffer_min if source in m]
        return min(ids) if ids else None

    def wait_shard(self, shard: str, timeout: float | None = None) -> bool:
        """Block until every routed change of the shard is committed (the DDL barrier).
        Called from a DDL thread: the daemon's loop flushes partial batches meanwhile."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.lock:
            while self.inflight[shard] > 0:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self.lock.wait(remaining if remaining is not None else 1.0)
        return True

    def wait_idle(self) -> None:
        self.flush()
        with self.lock:
            while any(self.inflight.values()):
                self.lock.wait(1.0)

    def stop(self) -> None:
        self.stopping = True
        for q in self.queues:
            q.put(None)
        for t in self.threads:
            t.join(timeout=30)

    # -- partitions (apply threads) -------------------------------------------------------------
    def _run(self, part: int) -> None:
        conn = None
        while True:
            batch = self.queues[part].get()
            if batch is None:
                break
            conn = self._apply_with_retries(conn, batch)
            self._done(batch)
        if conn is not None:
            conn.close()

    def _done(self, batch: Batch) -> None:
        counts: dict[str, int] = defaultdict(int)
        for change in batch.changes:
            counts[change.shard] += 1
        with self.lock:
            for shard, n in counts.items():
                self.inflight[shard] -= n
                if not self.inflight[shard]:
                    del self.inflight[shard]
            for source in list(self.inflight_ids):
                self.inflight_ids[source].pop(batch.seq, None)  # type: ignore[attr-defined]
            self.applied += len(batch.changes)
            self.lock.notify_all()

    def _connect(self, conn):
        if conn is not None:
            try:
                conn.ping(reconnect=False)
                return conn
            except Exception:
                with contextlib.suppress(Exception):
                    conn.close()
        return connect_downstream(self.connection)

    def _apply_with_retries(self, conn, batch: Batch):
        backoff = 0.2
        uncertain = False
        while True:
            try:
                conn = self._connect(conn)
                if uncertain and self._committed(conn, batch):
                    return conn
                self._apply(conn, batch)
                return conn
            except pymysql.err.MySQLError as exc:
                code = exc.args[0] if exc.args else 0
                if code in CONNECTION_ERRORS or isinstance(exc, pymysql.err.InterfaceError):
                    uncertain = True
                    log.warning(
                        "partition %d: downstream unavailable (%s); retrying in %.1fs",
                        batch.part,
                        exc,
                        backoff,
                    )
                    conn = None
                    time.sleep(backoff)
                    backoff = min(backoff * 2, self.max_backoff)
                    continue
                if code in RETRY_ERRORS:
                    _rollback(conn)
                    time.sleep(backoff)
                    continue
                _rollback(conn)
                return self._isolate(conn, batch, exc)

    def _committed(self, conn, batch: Batch) -> bool:
        """After a lost connection: did the batch's transaction commit? Its checkpoint says."""
        last = batch.changes[-1]
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT file_seq, txn_pos, idx FROM {self.meta.q}.checkpoint WHERE task=%s AND "
                f"shard=%s AND part=%s",
                (self.meta.task, last.shard, batch.part),
            )
            row = cur.fetchone()
        return row is not None and (int(row[0]), int(row[1]), int(row[2])) >= last.id

    def _apply(self, conn, batch: Batch) -> None:
        changes = [c for c in batch.changes if c.shard not in self.dropped]
        if not changes:
            return
        targets = sorted({c.target for c in changes})
        for t in targets:
            self.targets[t].lock.acquire_read()
        try:
            started = time.perf_counter()
            statements = self.statements(changes, batch.majors)
            last: dict[tuple[str, str], ChangeId] = {}
            for c in changes:
                last[(c.shard.split(".", 1)[0], c.shard)] = c.id
            statements.append(
                self.meta.sql_checkpoints(
                    (source, shard, batch.part, cid) for (source, shard), cid in last.items()
                )
            )
            with conn.cursor() as cur:
                cur.execute("START TRANSACTION")
                for statement in statements:
                    cur.execute(statement)
                crash_point("batch_written")
                cur.execute("COMMIT")
            crash_point("batch_committed")
            for (_, shard), cid in last.items():
                self.checkpoints[(shard, batch.part)] = cid
            self.batch_seconds.append(time.perf_counter() - started)
            if len(self.batch_seconds) > 10000:
                del self.batch_seconds[:5000]
        finally:
            for t in targets:
                self.targets[t].lock.release_read()

    def _isolate(self, conn, batch: Batch, exc: Exception):
        """A batch the server refuses: apply its changes one by one, pause the shard
        of each change that fails (with the error), and let the rest through."""
        log.warning("partition %d: batch refused (%s); applying its changes one by one", batch.part, exc)
        for change in batch.changes:
            if change.shard in self.dropped:
                continue
            single = Batch(batch.part, [change], batch.majors)
            try:
                self._apply(conn, single)
            except pymysql.err.MySQLError as one:
                _rollback(conn)
                code = one.args[0] if one.args else 0
                if code in CONNECTION_ERRORS:
                    raise
                self.dropped.add(change.shard)
                self.on_error(change, f"{type(one).__name__} {one.args}")
        return conn

    # -- SQL ----------------------------------------------------------------------------------
    def statements(self, changes: list[Change], majors: dict[str, int]) -> list[str]:
        """Statements for a run of changes, in order: consecutive inserts of one
        table and column list go into one INSERT, consecutive deletes into one."""
        safe = self.safe_mode()
        out: list[str] = []
        i = 0
        while i < len(changes):
            c = changes[i]
            info = self.targets[c.target]
            stale = majors.get(c.target, info.major) != info.major
            if c.op == "I":
                row = self._row(c, info, stale)
                cols = tuple(row)
                rows = [row]
                j = i + 1
                while j < len(changes) and changes[j].op == "I" and changes[j].target == c.target:
                    nxt = self._row(changes[j], info, stale)
                    if tuple(nxt) != cols:
                        break
                    rows.append(nxt)
                    j += 1
                verb = "REPLACE" if safe else "INSERT"
                names = ",".join(f"`{n}`" for n in cols)
                values = ",".join("(" + ",".join(r.values()) + ")" for r in rows)
                out.append(f"{verb} INTO {info.quoted} ({names}) VALUES {values}")
                i = j
            elif c.op == "D" and info.key:
                keys = [self._key(c.before, info)]
                j = i + 1
                while j < len(changes) and changes[j].op == "D" and changes[j].target == c.target:
                    keys.append(self._key(changes[j].before, info))
                    j += 1
                names = ",".join(f"`{k}`" for k in info.key)
                out.append(f"DELETE FROM {info.quoted} WHERE ({names}) IN ({','.join(keys)})")
                i = j
            elif c.op == "D":
                out.append(f"DELETE FROM {info.quoted} WHERE {self._match(c.before, info, stale)} LIMIT 1")
                i += 1
            else:
                after = self._row(c, info, stale)
                if safe and info.key:
                    out.append(f"DELETE FROM {info.quoted} WHERE {self._where_key(c.before, info)}")
                    names = ",".join(f"`{n}`" for n in after)
                    out.append(f"REPLACE INTO {info.quoted} ({names}) VALUES ({','.join(after.values())})")
                else:
                    sets = ",".join(f"`{n}`={v}" for n, v in after.items())
                    where = (
                        self._where_key(c.before, info)
                        if info.key
                        else self._match(c.before, info, stale) + " LIMIT 1"
                    )
                    out.append(f"UPDATE {info.quoted} SET {sets} WHERE {where}")
                i += 1
        return out

    def _row(self, change: Change, info: TargetInfo, stale: bool) -> dict[str, str]:
        row = self._project(change.values, info, stale)
        for column in change.clear:
            name = info.columns.get(column.lower())
            if name is not None and name not in row:
                row = {**row, name: "NULL"}
        return row

    @staticmethod
    def _project(values: dict[str, str], info: TargetInfo, stale: bool) -> dict[str, str]:
        if not stale:
            return values
        # built for an older major version: keep only what the table has now
        kept = {info.columns[k.lower()]: v for k, v in values.items() if k.lower() in info.columns}
        if len(kept) != len(values):
            log.warning(
                "table %s changed under a batch; columns %s no longer exist downstream",
                info.name,
                sorted(set(values) - set(kept)),
            )
        return kept

    @staticmethod
    def _key(values: dict[str, str], info: TargetInfo) -> str:
        return "(" + ",".join(values.get(k, "NULL") for k in info.key) + ")"

    @staticmethod
    def _where_key(values: dict[str, str], info: TargetInfo) -> str:
        return " AND ".join(f"`{k}`={values.get(k, 'NULL')}" for k in info.key)

    def _match(self, values: dict[str, str], info: TargetInfo, stale: bool) -> str:
        row = self._project(values, info, stale)
        return " AND ".join(f"`{k}` <=> {v}" for k, v in row.items())


def _rollback(conn) -> None:
    try:
        with conn.cursor() as cur:
            cur.execute("ROLLBACK")
    except Exception:
        pass
