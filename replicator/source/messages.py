"""What a worker process and the daemon tell each other over their pipe. Values
travel as SQL literals, escaped in the worker, so the daemon only assembles them."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from replicator.shard_id import ShardId
from replicator.source.gtid import TxnGtids
from replicator.source.schema_change import SchemaChange
from replicator.state.positions import ChangeId

if TYPE_CHECKING:
    from replicator.source.row_events import BinlogFormat, EventCodec, RowShape


class Change(NamedTuple):
    """One row change. Values are SQL literals, aligned with `columns`, a tuple the
    worker shares between all rows of a table version (pickled once per message)."""

    id: ChangeId
    shard: ShardId  # one object per table: pickled once per message
    target: str  # downstream schema.table
    op: str  # "I" insert, "U" update, "D" delete
    columns: tuple[str, ...]
    values: tuple[str, ...] | None  # the row after (I, U)
    before: tuple[str, ...] | None = None  # the row before (U, D), aligned with before_columns
    before_columns: tuple[str, ...] | None = None  # None: the same as columns
    clear: tuple[str, ...] = ()  # columns to set NULL if the table still has them (pending renames)

    def row(self) -> dict[str, str]:
        return dict(zip(self.columns, self.values or (), strict=True))

    def before_row(self) -> dict[str, str]:
        return dict(zip(self.before_columns or self.columns, self.before or (), strict=True))


class RowEvent(NamedTuple):
    """A shard's row event to apply downstream as the binlog holds it
    (`replicator.source.row_events`): its rows are decoded only where it cannot be."""

    id: ChangeId  # positions.event_end of its event: at or above each of its rows' ids
    shard: ShardId
    target: str
    event: bytes  # the rows event
    table_map: bytes  # the table map event it refers to
    form: BinlogFormat  # the source's format description (one object per message)
    codec: EventCodec  # how to decode it instead (one object per table version)
    shape: RowShape  # what its rows hold, which the target's must be to take it as it is
    rows: int = 0  # how many rows it holds (the worker counts them: the server does not say)

    @property
    def op(self) -> str:
        return "E"  # an event: not one of a run of rows of one kind (I, U, D) in a statement


class Dropped(NamedTuple):
    """A shard's row events in one transaction that its worker could not read (its table's
    schema is not known there: a DDL it could not follow, rows that do not fit the table).
    Sent in their place in the stream, never left out silently: the daemon decides what
    they mean (`RowPath.dropped`)."""

    id: ChangeId  # the start of their transaction: (file sequence, position, 0)
    shard: ShardId
    target: str
    events: int  # row events left out
    reason: str  # why they could not be read

    @property
    def op(self) -> str:
        return "X"  # not a row change


@dataclass
class Changes:
    source: str
    items: list[Change | RowEvent | Dropped]
    position: str  # the start of the transaction being read after these changes
    event_time: float = 0.0  # timestamp of the last event, for lag
    gtid: str | None = None  # the GTID state at `position` (MariaDB; None: not known)
    # the transactions these changes are of: start (file sequence, offset) -> GTIDs
    txns: TxnGtids = field(default_factory=TxnGtids)
    # rows filters.rows dropped since the last message: (shard, insert|update|delete) -> count
    filtered: dict[tuple[ShardId, str], int] = field(default_factory=dict)

    def __reduce__(self):
        """Over the pipe, each `Change` as the plain tuple of its fields: a named tuple
        pickles through a Python call each way (`__getnewargs__`, `__new__`), which cost a
        worker three times the pickling of its tuple, and the daemon half again its load."""
        items = [tuple(c) if type(c) is Change else c for c in self.items]
        fields = (self.source, items, self.position, self.event_time, self.gtid, self.txns, self.filtered)
        return (_changes, fields)


# A `Change` from the tuple of all nine of its fields, made with no Python call (a named
# tuple's own `__new__` is a Python function): the worker makes one per row
change_of = partial(tuple.__new__, Change)


def _changes(source: str, items: list, *rest) -> Changes:
    """`Changes` as pickled (`Changes.__reduce__`): a plain tuple is a `Change`'s fields."""
    return Changes(source, [change_of(c) if type(c) is tuple else c for c in items], *rest)


@dataclass
class DDLEvent:
    """A DDL on a table the worker tracks. `change` is what it did to one routed
    table, the shard (None when no routed table is concerned); `tables` maps each
    touched "schema.table" to its CREATE TABLE after the DDL (None: dropped), for the
    schema history."""

    source: str
    id: ChangeId
    position: str  # where the DDL's transaction starts
    next_position: str  # where the transaction after it starts
    target: str | None
    change: SchemaChange | None
    tables: dict[str, str | None] = field(default_factory=dict)
    gtid: str | None = None  # its transaction's GTID (MariaDB; None: not known)
    gtid_before: str | None = None  # the GTID state where it starts

    @property
    def shard(self) -> ShardId | None:
        return self.change.shard if self.change is not None else None


@dataclass
class Heartbeat:
    source: str
    position: str
    event_time: float
    connected: bool = True
    error: str | None = None
    gtid: str | None = None  # the GTID state at `position`


@dataclass
class WorkerFailed:
    source: str
    error: str
    server_moved: bool = False  # its host answers with another server than its positions are of


class Pin(NamedTuple):
    """A table as a decision set it, from a point of the binlog on: the worker takes it when
    its stream reaches `id`, before any event there, whatever it read of the table before
    (an operator's `set-schema` of a shard whose DDL it could not follow)."""

    id: ChangeId  # (file sequence, position, PIN): the transaction it holds from
    table: str  # "schema.table"
    create: str  # its CREATE TABLE
    # the shard's DDLs after `id` its decision decided on the table (`Gave`) end at this one:
    # read again, they are not decided again (the daemon's; None: none, its DDLs since are)
    done: ChangeId | None = None

    @property
    def decided(self) -> ChangeId:
        """The shard's last DDL decided (`ddl_done`) with the pin."""
        return max(self.id, self.done) if self.done is not None else self.id


# daemon -> worker
@dataclass
class Rewind:
    """Read again from `position` (a transaction start), with the tracked schemas as
    they were there, so a paused shard's rows are read again."""

    position: str
    schemas: dict[str, str]  # "schema.table" -> CREATE TABLE
    seq: int = 0  # answered by Rewound(seq)
    pins: tuple[Pin, ...] = ()  # tables a decision set further on (`SourceState.pins_from`)


@dataclass
class Rewound:
    """The worker took Rewind `seq`: what it sends from now on is read from there."""

    source: str
    seq: int


@dataclass
class Stop:
    pass


@dataclass
class NativeTargets:
    """The targets whose rows the worker may send as row events (`RowEvent`), with what
    their rows hold (`row_events.row_shape`): a shard's events go as they are where
    its table holds the same. Empty: decode every row."""

    shapes: dict[str, RowShape]


Message = Any
