"""Continuous validation (DM's validator): the rows the applier committed are read back
from downstream and compared with what their binlog events say they are.

`fast` checks that a row written is there and a row deleted is gone; `full` also
compares its values, column by column, on the server (`<=>` between the column and the
literal the row event gave: no conversion of our own to get wrong). A key's latest
committed change is what it is checked against, so a row changed again is checked
once. A row that differs is checked again each round; one still differing
`error_delay` seconds after it was committed is an error, kept in the meta schema's
`validation_error` table until an operator clears it (`shardctl validation ...`). Rows
pending at a stop are not checked after the restart: validation covers what a run
applied.

The validator reads in a thread of its own; the applier's partitions only hand it
what they committed (a queue put), and row events are decoded here, not in them.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pymysql

from lattice import quote_string
from replicator.apply.meta import Meta
from replicator.apply.target import TargetInfo
from replicator.shard_id import ShardId
from replicator.source.messages import Change, RowEvent
from replicator.state.positions import ChangeId

log = logging.getLogger("shardmerge.validator")

ROUND_SECONDS = 1.0
ROWS_PER_QUERY = 200
ROWS_PER_ROUND = 5000
MAX_PENDING = 1_000_000  # beyond it the oldest expectations are dropped unchecked (counted)


@dataclass(frozen=True)
class Expected:
    """What a key's row downstream should be after the change committed last on it:
    `values` (downstream column -> SQL literal) or None, gone."""

    shard: ShardId
    id: ChangeId
    key: tuple[str, ...]  # literals of the target's key columns
    values: dict[str, str] | None
    committed: float


@dataclass
class Counts:
    validated: int = 0
    failed: int = 0
    unchecked: int = 0  # dropped beyond MAX_PENDING


def expectations(change: Change, info: TargetInfo, now: float) -> list[Expected]:
    """A row change as what its key's row is after it (an update that moves its key:
    the old key gone, the new one there)."""
    if info.key is None:
        return []
    out = []
    if change.op in ("U", "D"):
        before = {c.lower(): v for c, v in change.before_row().items()}
        old = tuple(before.get(k.lower(), "NULL") for k in info.key)
        out.append(Expected(change.shard, change.id, old, None, now))
    if change.op in ("I", "U"):
        after = {c.lower(): v for c, v in change.row().items()}
        for names in (change.clear, info.cleared.get(change.shard, ()) if info.cleared else ()):
            for column in names:
                if info.clearable(column) is not None:
                    after.setdefault(column.lower(), "NULL")
        key = tuple(after.get(k.lower(), "NULL") for k in info.key)
        values = {info.columns[c]: v for c, v in after.items() if c in info.columns}
        if out and out[0].key == key:
            out.clear()
        out.append(Expected(change.shard, change.id, key, values, now))
    return out


def check_query(info: TargetInfo, items: list[tuple[int, Expected]], full: bool) -> str:
    """One statement reading the rows of `items` back: per item its number and the
    columns that differ (comma-separated, '' when none), no row where the key has none."""
    selects = []
    for n, expected in items:
        where = " AND ".join(f"`{k}` <=> {v}" for k, v in zip(info.key or (), expected.key, strict=True))
        diff = "''"
        if full and expected.values:
            present = {c.lower() for c in info.columns.values()}
            tests = [
                f"IF(`{c}` <=> {v}, NULL, {quote_string(c)})"
                for c, v in expected.values.items()
                if c.lower() in present
            ]
            if tests:
                diff = f"CONCAT_WS(',', {', '.join(tests)})"
        selects.append(f"(SELECT {n}, {diff} FROM {info.quoted} WHERE {where} LIMIT 1)")
    return " UNION ALL ".join(selects)


def problem_of(expected: Expected, found: str | None) -> str | None:
    """What is wrong with the row read back (`found`: its differing columns; None: no
    row), or None."""
    if expected.values is None:
        return None if found is None else "still downstream after its delete"
    if found is None:
        return "missing downstream"
    return f"differs downstream in {found}" if found else None


class Validator:
    def __init__(
        self,
        mode: str,
        error_delay: float,
        targets: dict[str, TargetInfo],
        connect: Callable[[], pymysql.connections.Connection],
        meta: Meta,
        file_of: Callable[[ShardId, ChangeId], str],
        on_counts: Callable[[str, str, int], None] = lambda target, result, n: None,
    ):
        self.full = mode == "full"
        self.mode = mode
        self.error_delay = error_delay
        self.targets = targets
        self.connect = connect
        self.meta = meta
        self.file_of = file_of
        self.on_counts = on_counts  # (target, "validated" or "failed", how many): the metrics
        self.inbox: queue.SimpleQueue[list[Change | RowEvent] | None] = queue.SimpleQueue()
        self.pending: dict[tuple[str, tuple[str, ...]], Expected] = {}  # oldest first
        self.pending_counts: dict[str, int] = {}  # per target, for other threads (a snapshot)
        self.counts: dict[str, Counts] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="validator", daemon=True)
        self._conn = None

    # -- the applier's side ---------------------------------------------------------------
    def committed(self, changes: list[Change | RowEvent]) -> None:
        self.inbox.put(changes)

    # -- the operator's side --------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.inbox.put(None)
        self.thread.join(timeout=30)

    def status(self) -> dict:
        pending = self.pending_counts
        return {
            "mode": self.mode,
            "targets": {
                t: {"pending": pending.get(t, 0), **vars(self.counts.get(t, Counts()))}
                for t in sorted({*self.counts, *pending})
            },
        }

    # -- the thread -----------------------------------------------------------------------
    def _run(self) -> None:
        next_round = time.monotonic() + ROUND_SECONDS
        while not self.stopping.is_set():
            try:
                batch = self.inbox.get(timeout=max(0.0, next_round - time.monotonic()))
            except queue.Empty:
                batch = []
            if batch is None:
                break
            self._expect(batch)
            if time.monotonic() >= next_round:
                try:
                    self._round()
                except pymysql.err.MySQLError as exc:  # downstream away or a table changing: next round
                    log.warning("validation round failed (%s); trying again", exc)
                    self._close()
                except Exception:
                    log.exception("validation round failed")
                next_round = time.monotonic() + ROUND_SECONDS
            counts: dict[str, int] = {}
            for target, _ in self.pending:
                counts[target] = counts.get(target, 0) + 1
            self.pending_counts = counts
        self._close()

    def _expect(self, batch: Iterable[Change | RowEvent]) -> None:
        now = time.time()
        for change in batch:
            rows = change.codec.changes(change) if isinstance(change, RowEvent) else [change]
            info = self.targets.get(change.target)
            if info is None:
                continue
            for row in rows:
                for expected in expectations(row, info, now):
                    slot = (change.target, expected.key)
                    self.pending.pop(slot, None)  # to the end: checked after the older ones
                    self.pending[slot] = expected
        while len(self.pending) > MAX_PENDING:
            slot = next(iter(self.pending))
            del self.pending[slot]
            self._count(slot[0]).unchecked += 1

    def _count(self, target: str) -> Counts:
        counts = self.counts.get(target)
        if counts is None:
            counts = self.counts[target] = Counts()
        return counts

    def _round(self) -> None:
        slots = list(self.pending.items())[:ROWS_PER_ROUND]
        by_target: dict[str, list[tuple[tuple[str, tuple[str, ...]], Expected]]] = {}
        for slot, expected in slots:
            by_target.setdefault(slot[0], []).append((slot, expected))
        for target, entries in by_target.items():
            info = self.targets[target]
            for i in range(0, len(entries), ROWS_PER_QUERY):
                self._check(target, info, entries[i : i + ROWS_PER_QUERY])

    def _check(self, target: str, info: TargetInfo, entries: list) -> None:
        items = [(n, expected) for n, (_, expected) in enumerate(entries)]
        sql = check_query(info, items, self.full)
        with info.lock.reading():  # not while a DDL changes the table
            conn = self._connection()
            with conn.cursor() as cur:
                cur.execute(sql)
                found = {int(n): str(diff) for n, diff in cur.fetchall()}
        now = time.time()
        errors = []
        validated = 0
        for n, (slot, expected) in enumerate(entries):
            if self.pending.get(slot) is not expected:
                continue  # changed again meanwhile: checked next round against the new change
            problem = problem_of(expected, found.get(n))
            if problem is None:
                del self.pending[slot]
                validated += 1
            elif now - expected.committed >= self.error_delay:
                del self.pending[slot]
                errors.append((expected, problem))
        counts = self._count(target)
        counts.validated += validated
        self.on_counts(target, "validated", validated)
        if errors:
            statements = [
                self.meta.validation_errors.sql_add(
                    target, e.shard, "(" + ",".join(e.key) + ")", problem, self.file_of(e.shard, e.id), e.id
                )
                for e, problem in errors
            ]
            self.meta.execute(statements)
            counts.failed += len(errors)
            self.on_counts(target, "failed", len(errors))
            for e, problem in errors:
                log.warning("validation: %s row %s of shard %s %s", target, ",".join(e.key), e.shard, problem)

    def _connection(self):
        if self._conn is None:
            self._conn = self.connect()
        return self._conn

    def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None
