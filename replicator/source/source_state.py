"""A source as the daemon sees it: where its worker reads, the binlog files it has
named, its tracked tables' schema history, and its stream's health. The daemon owns
one per source; the worker process is on the other end of `pipe`."""

from __future__ import annotations

import bisect
import contextlib
import multiprocessing
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from lattice import Flavor
from replicator.source.gtid import GtidTrail
from replicator.source.messages import Changes, DDLEvent, Heartbeat, Pin, Rewind, Rewound, WorkerFailed
from replicator.state.positions import ZERO, ChangeId, Position, file_sequence

# The index of a pinned table's entry in the schema history (`Pin`): below every change of its
# transaction, so the table holds from the transaction's start
PIN = -1


@dataclass(frozen=True)
class FirstRead:
    """A new source's start (None: its configured GTID) and its tables' CREATE TABLE there."""

    position: Position | None
    schemas: dict[str, str]


RATE_WINDOW = 10.0  # seconds the events/s of a source are counted over


@dataclass
class EventRate:
    """Events received per second over the last `RATE_WINDOW` seconds: samples of the
    running count, the oldest kept one just before the window."""

    samples: deque[tuple[float, int]] = field(default_factory=deque)

    def note(self, now: float, total: int) -> None:
        self.samples.append((now, total))
        while len(self.samples) > 2 and self.samples[1][0] <= now - RATE_WINDOW:
            self.samples.popleft()

    def per_second(self, now: float, total: int) -> float:
        """Over the window to `now` (an idle source's count stands: its rate falls)."""
        if not self.samples:
            return 0.0
        since, before = self.samples[0]
        return (total - before) / max(now - since, 1.0)


@dataclass
class SourceState:
    id: str
    flavor: Flavor  # of its server: mariadb or mysql
    history: list[tuple[ChangeId, str, str | None]] = field(default_factory=list)
    position: Position | None = None  # the start of the transaction the worker reads
    furthest: Position | None = None  # the furthest it has read (a rewind sets `position` back)
    files: dict[int, str] = field(default_factory=dict)  # file sequence -> name
    event_time: float = 0.0
    connected: bool = False
    error: str | None = None
    received: int = 0
    process: multiprocessing.process.BaseProcess | None = None
    pipe: object = None
    paused: bool = False  # by the operator: its pipe is not read
    rewinds: int = 0  # Rewinds sent to the worker
    rewinding: int = 0  # the Rewind not acknowledged yet (0: none): what arrives before is stale
    reconnects: int = 0  # streams lost and tried again
    trail: GtidTrail = field(default_factory=GtidTrail)  # its GTIDs from the watermark on
    server_id: int | None = None  # of the server its positions are in (None: not known yet)
    rate: EventRate = field(default_factory=EventRate)  # of `received`

    def file_of(self, seq: int) -> str:
        if seq in self.files:
            return self.files[seq]
        base = next(iter(self.files.values()), "mysql-bin.000001").rsplit(".", 1)[0]
        return f"{base}.{seq:06d}"

    def position_of(self, change: ChangeId) -> Position:
        return Position(self.file_of(change[0]), change[1])

    def record(self, change: ChangeId, tables: Mapping[str, str | None]) -> dict[str, str | None]:
        """The tables' CREATE TABLE after the DDL `change`, kept in the order of the
        binlog, as the meta schema's history is: a DDL handed on again (a park fed after a
        restart, or again after the shard paused once more) is had already, and one of
        before never stands for the table as later DDLs left it (L54). Returns the tables
        whose entry the DDL had already and read now as another table (read again with a
        table a decision pinned since, `Pin`)."""
        changed: dict[str, str | None] = {}
        for table, sql in tables.items():
            at = bisect.bisect_left(self.history, change, key=lambda entry: entry[0])
            end = bisect.bisect_right(self.history, change, lo=at, key=lambda entry: entry[0])
            same = next((i for i in range(at, end) if self.history[i][1] == table), None)
            if same is None:
                self.history.insert(end, (change, table, sql))
            else:
                if self.history[same][2] != sql:
                    changed[table] = sql
                self.history[same] = (change, table, sql)
        return changed

    def pin(self, pin: Pin) -> None:
        """A decision's table from `pin.id` on. Where the worker took an earlier pin there
        and said so (a PINNED DDL, at the transaction's own id), that entry stands for the
        earlier table after the pin: it takes this one's. The worker reads the shard again
        from the pin, taking this table where it starts, so it says it no more: that entry
        would stand after a restart past the pin (L70: a skip's table, then set-schema's)."""
        echo = (pin.id[0], pin.id[1], 0)
        had = {cid: sql for cid, key, sql in self.history if key == pin.table and cid in (pin.id, echo)}
        self.record(pin.id, {pin.table: pin.create})
        if pin.id in had and had.get(echo) == had[pin.id]:
            self.record(echo, {pin.table: pin.create})

    def schemas_at(self, position: Position) -> dict[str, str]:
        """The tracked tables' CREATE TABLE as they were where `position` starts."""
        bound = position.change(0)
        tables: dict[str, str | None] = {}
        for cid, key, sql in self.history:
            if cid < bound:
                tables[key] = sql
        return {k: v for k, v in tables.items() if v is not None}

    def pins_from(self, position: Position, decided: Mapping[str, ChangeId] | None = None) -> tuple[Pin, ...]:
        """The tables decisions pinned where `position` starts or later (`Pin`): a worker
        reading from `position` takes each when it gets there (those before are in
        `schemas_at`). One right where `position` starts is in both where its shard decided on
        it (`decided`: each table's shard's last DDL handled, `ShardFlows.decided`; a pin's
        decision sets it, `Pin.decided`): it may stand for a DDL there its worker cannot follow,
        whose way out gave the table, which the worker must say as pinned (L75: a start at
        that DDL, where its shard's park ended; `Pins.reset`). An entry there otherwise stands
        for the table before that transaction (a first start's, a resync's, at the same
        index): in `schemas_at` only, or a DDL there the worker cannot follow would be taken
        for it."""
        decided = decided or {}
        start, ahead = position.change(PIN), position.change(0)
        return tuple(
            Pin(cid, key, sql)
            for cid, key, sql in self.history
            if cid[2] == PIN and (cid >= ahead or (cid == start and key in decided and decided[key] >= cid))
        )

    def pinned_since(self, table: str, position: Position) -> bool:
        """Whether a decision pinned `table` where `position` starts or later."""
        bound = position.change(PIN)
        return any(cid[2] == PIN and cid >= bound and key == table for cid, key, _ in self.history)

    def latest_schemas(self) -> dict[str, str]:
        """The tracked tables' CREATE TABLE after everything in the history."""
        return {k: v for _, k, v in self.history if v}

    def name_file(self, position: Position) -> None:
        self.files.setdefault(file_sequence(position.file), position.file)

    def note_position(self, text: str) -> None:
        """The worker reads from `text` on."""
        if not text:
            return
        position = Position.parse(text)
        self.position = position
        if self.furthest is None or self.furthest < position:
            self.furthest = position
        self.files[file_sequence(position.file)] = position.file

    def stale(self, message: object) -> bool:
        """Sent before the worker took the last Rewind (read again after it): dropped."""
        if not self.rewinding or isinstance(message, WorkerFailed):
            return False
        if isinstance(message, Rewound) and message.seq == self.rewinding:
            self.rewinding = 0
        return True

    def took_changes(self, message: Changes) -> None:
        self.note_position(message.position)
        self.trail.note(message.txns, message.gtid)
        if message.items:
            self.event_time = message.event_time or self.event_time
        else:  # nothing new read: a heartbeat's time stands
            self.event_time = max(self.event_time, message.event_time)
        self.connected, self.error = True, None
        self.received += len(message.items)
        self.rate.note(time.monotonic(), self.received)

    def took_ddl(self, message: DDLEvent) -> None:
        if message.gtid is not None and message.gtid_before is not None:
            after = Position.parse(message.next_position).change(0)
            self.trail.note_ddl(message.id, after, message.gtid, message.gtid_before)

    def took_heartbeat(self, message: Heartbeat) -> bool:
        """True: the worker lost the stream (it tries again after a backoff)."""
        if message.position:
            self.note_position(message.position)
            self.trail.note(None, message.gtid)
        if message.connected:
            # the server's heartbeat: the stream is read to its end, nothing is behind
            # (an idle source shows no lag, not the age of its last event)
            self.event_time = max(self.event_time, message.event_time)
        self.connected, self.error = message.connected, message.error
        if not message.connected:
            self.reconnects += 1
        return not message.connected

    def rewind(self, position: Position, decided: Mapping[str, ChangeId] | None = None) -> None:
        """Have the worker read again from `position`; what it sends until it has rewound
        was read before and is dropped (`stale`). `decided`: as `pins_from` takes it."""
        if self.pipe is None:
            return
        self.rewinds += 1
        self.rewinding = self.rewinds
        self.trail.read = self.trail.before(position.change(0), ZERO)
        self.position = position  # everything from here is read again
        self.name_file(position)
        pins = self.pins_from(position, decided)
        self.pipe.send(Rewind(str(position), self.schemas_at(position), self.rewinds, pins))

    def tell(self, message: object) -> None:
        """Send the worker `message` if it is still there to take it."""
        if self.pipe is not None:
            with contextlib.suppress(BrokenPipeError, OSError):
                self.pipe.send(message)


class SourceGtids:
    """The GTIDs the meta schema saves beside positions (`Meta.gtids`), from each
    source's trail."""

    def __init__(self, sources: Mapping[str, SourceState]) -> None:
        self.sources = sources

    def own(self, source: str, change: ChangeId) -> str | None:
        state = self.sources.get(source)
        return state.trail.own(change) if state is not None else None

    def before(self, source: str, change: ChangeId) -> str | None:
        state = self.sources.get(source)
        if state is None or state.position is None:
            return None
        return state.trail.before(change, state.position.change(0))
