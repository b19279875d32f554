"""Row events as the binlog holds them, applied downstream as they are.

Where a shard's table and its downstream table have the same columns, in the same
order, of the same types, a row event of the shard needs no decoding: the
downstream server applies it itself from a BINLOG statement, as `mariadb-binlog |
mariadb` does, after its table map is made to name the downstream table. That
costs the downstream what a native replica pays, and the worker and the daemon
nothing per row. Everything else (another shape, extract columns, safe mode, a
pending rename, a refused event) goes the way of decoded rows, which this module
also reads events for (`rows_of`), so the two ways apply the same rows.

The byte layouts are those of MariaDB's binlog (MySQL internals manual, "Binlog
Event Header", "TABLE_MAP_EVENT", "ROWS_EVENT" version 1): a 19-byte header
(timestamp, type, server id, size, next position, flags), the body, and a CRC32
of both when the format description event says so.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

from lattice import Column, Family, Flavor, Table, materialize
from replicator.shard_id import ShardId
from replicator.source.messages import Change, RowEvent, change_of
from replicator.source.rowcodec import MapColumn, RowCodec, present_columns
from replicator.state.positions import ROW_BITS, row_index

HEADER = 19
CHECKSUM = 4
FORMAT_DESCRIPTION = 15
TABLE_MAP = 19
# version 1 rows events, which MariaDB writes (MySQL 8's version 2 carry extra data
# and go the decoded way)
ROWS_OPS = {23: "I", 24: "U", 25: "D"}
STMT_END_F = 0x0001
_SIZE = struct.Struct("<I")
_FLAGS = struct.Struct("<H")
_TABLE_ID = 6  # bytes of a table id in the post-header (MariaDB 10 and MySQL 5.6+)


class EventError(ValueError):
    """Bytes that are not the event they should be."""


@dataclass(frozen=True)
class BinlogFormat:
    """A source's format description event: sent first on a downstream connection
    (a BINLOG statement reads events by it), and whether events end in a CRC32."""

    event: bytes

    @property
    def checksum(self) -> bool:
        # the event ends in its checksum algorithm (1 byte) and its own checksum (4)
        return self.event[-CHECKSUM - 1] == 1

    @classmethod
    def of(cls, raw: bytes) -> BinlogFormat:
        if len(raw) < HEADER + 57 or raw[4] != FORMAT_DESCRIPTION:
            raise EventError("not a format description event")
        return cls(bytes(raw))


# per column: name (key), type with its character set, NULL allowed, and whether a row
# lacking it gets a value all the same (its default: NULL or a constant)
RowShape = tuple[tuple[str, object, bool, bool], ...]


def row_shape(table: Table | None, flavor: Flavor | str = "mariadb") -> RowShape | None:
    """What a row event of the table holds, column by column, as the server keeps
    the table; None when its rows cannot be applied as events: generated columns
    (MariaDB's row images carry them, the downstream computes its own)."""
    if table is None or any(c.generated is not None for c in table.columns):
        return None
    held = materialize(table, flavor)
    return tuple((c.key, c.type, c.nullable, _filled(c)) for c in held.columns)


def _filled(column: Column) -> bool:
    default = column.default
    if default is None or default.is_null:
        return column.nullable
    # a row event leaves a BLOB or TEXT column (JSON is one) '', not its default: the
    # coordinator's JSON null of a shard lacking the column became '', which its CHECK and
    # every later copy of the table refuse (L27)
    if column.type.is_text_kind or column.type.family == Family.JSON:
        return False
    return not default.is_expression


def fits(shard: RowShape | None, target: RowShape | None) -> bool:
    """A shard's row events apply to the target as they are: its columns first, in
    the same order, of the same types (the server copies a row's bytes; it would
    convert neither a type nor a character set), the target taking NULL where the
    shard does; then the target's other columns, which a row the shard inserts
    leaves at their default and one it updates as they are, as rows written by
    column name would (a column one shard added at the end: the others still fit)."""
    if shard is None or target is None or len(shard) > len(target):
        return False
    if not all(t_filled for *_, t_filled in target[len(shard) :]):
        return False
    return all(
        s_name == t_name and s_type == t_type and (t_null or not s_null)
        for (s_name, s_type, s_null, _), (t_name, t_type, t_null, _) in zip(shard, target, strict=False)
    )


def _sealed(body: bytes, checksum: bool) -> bytes:
    """An event from its header and body (its size set), with its checksum if any."""
    size = len(body) + (CHECKSUM if checksum else 0)
    event = body[:9] + _SIZE.pack(size) + body[13:]
    if checksum:
        event += _SIZE.pack(zlib.crc32(event) & 0xFFFFFFFF)
    return event


def _unsealed(raw: bytes, checksum: bool) -> bytes:
    return raw[:-CHECKSUM] if checksum else raw


def renamed_table_map(raw: bytes, schema: str, table: str, checksum: bool) -> bytes:
    """The table map event naming `schema`.`table` instead of the shard's table."""
    if raw[4] != TABLE_MAP:
        raise EventError("not a table map event")
    event = _unsealed(raw, checksum)
    at = HEADER + _TABLE_ID + 2
    old_schema = event[at]
    at_table = at + 1 + old_schema + 1
    old_table = event[at_table]
    rest = at_table + 1 + old_table + 1
    names = b""
    for name in (schema.encode(), table.encode()):
        if len(name) > 255:
            raise EventError(f"name {name!r} is too long for a table map")
        names += bytes((len(name),)) + name + b"\0"
    return _sealed(event[:at] + names + event[rest:], checksum)


def statement_ended(raw: bytes, checksum: bool) -> bytes:
    """The rows event flagged as the end of its statement: the server then closes the
    table after it, so each event stands alone, whatever is applied around it."""
    at = HEADER + _TABLE_ID
    flags = _FLAGS.unpack_from(raw, at)[0]
    if flags & STMT_END_F:
        return raw
    event = _unsealed(raw, checksum)
    return _sealed(event[:at] + _FLAGS.pack(flags | STMT_END_F) + event[at + 2 :], checksum)


def binlog_statement(events: list[bytes]) -> str:
    return "BINLOG '" + base64.b64encode(b"".join(events)).decode("ascii") + "'"


class RowsLayout(NamedTuple):
    """Where a version 1 rows event's row images are, and which columns they hold (made for
    every rows event a worker reads: a tuple, made in a third of a frozen dataclass's time)."""

    op: str
    columns: int
    present: tuple[int, ...]  # columns of the (before) images
    present_after: tuple[int, ...] | None  # of an update's after images
    start: int  # the first row image
    end: int  # past the last one


def rows_layout(raw: bytes, checksum: bool) -> RowsLayout:
    op = ROWS_OPS.get(raw[4])
    if op is None:
        raise EventError(f"event type {raw[4]} is not a version 1 rows event")
    at = HEADER + _TABLE_ID + 2
    columns, at = _packed_int(raw, at)
    width = (columns + 7) // 8
    present = present_columns(raw[at : at + width], columns)
    at += width
    after = None
    if op == "U":
        after = present_columns(raw[at : at + width], columns)
        at += width
    return _layout((op, columns, present, after, at, len(raw) - (CHECKSUM if checksum else 0)))


# a RowsLayout from the tuple of its fields, with no Python call (its own __new__ is one)
_layout = partial(tuple.__new__, RowsLayout)


def _packed_int(raw: bytes, at: int) -> tuple[int, int]:
    """A length-encoded integer (the column count)."""
    first = raw[at]
    if first < 251:
        return first, at + 1
    size = {252: 2, 253: 3, 254: 8}.get(first)
    if size is None:
        raise EventError("bad length-encoded integer")
    return int.from_bytes(raw[at + 1 : at + 1 + size], "little"), at + 1 + size


@dataclass(frozen=True)
class Origin:
    """Where decoded rows go, and what they get added: the extract columns' names and
    literals (DM's: where a row came from)."""

    shard: ShardId
    target: str
    extra_names: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()


def append_changes(
    out: list[Change],
    buf: bytes,
    layout: RowsLayout,
    codec: RowCodec,
    origin: Origin,
    txn: tuple[int, int],
    event_no: int,
    columns_of: Callable[[tuple[int, ...]], tuple[str, ...]],
    most: int = 0,
) -> int:
    """The rows of one event as changes (ids: `positions.row_index` of `event_no`), and how
    many; with `most`, no more than that many (the caller learns the event has as many).
    `columns_of` names the values of images holding those columns (extract columns
    last), one shared tuple per table version: pickled once per message. Each `Change` is
    made from the tuple of all its fields (`change_of`)."""
    seq, start = txn
    shard, target, literals = origin.shard, origin.target, origin.extra
    columns = columns_of(layout.present)
    first = n = row_index(event_no, 0)  # the rows count up from here
    last = n + most if most else -1
    pos, end = layout.start, layout.end
    image, make = codec.image, change_of
    present = layout.present
    if layout.op == "I":
        while pos < end and n != last:
            values, pos = image(buf, pos, present)
            n += 1
            fields = ((seq, start, n), shard, target, "I", columns, (*values, *literals), None, None, ())
            out.append(make(fields))
    elif layout.op == "U":
        after_present = layout.present_after
        after_columns = columns_of(after_present)
        before_columns = None if after_columns == columns else columns
        while pos < end and n != last:
            before, pos = image(buf, pos, present)
            after, pos = image(buf, pos, after_present)
            n += 1
            fields = (
                (seq, start, n),
                shard,
                target,
                "U",
                after_columns,
                (*after, *literals),
                (*before, *literals),
                before_columns,
                (),
            )
            out.append(make(fields))
    else:
        while pos < end and n != last:
            before, pos = image(buf, pos, present)
            n += 1
            fields = ((seq, start, n), shard, target, "D", columns, None, (*before, *literals), None, ())
            out.append(make(fields))
    return n - first


@dataclass(frozen=True, eq=False)
class EventCodec:
    """How to decode a table version's row events: the tracked table and its table
    map's columns. Sent with every event of the version (pickled once per message),
    for the rare event that cannot be applied as it is."""

    table: Table
    columns: tuple[MapColumn, ...]
    # the literals of its last columns, as the worker writes them in the rows it decodes
    # (extract values appended to the event, `row_extend`): the same value in the same text,
    # so that a batch folds one key's changes together whichever way each came
    fixed: tuple[str, ...] = ()

    @classmethod
    def of(cls, table: Table, columns: Sequence, fixed: tuple[str, ...] = ()) -> EventCodec:
        return cls(table, tuple(MapColumn.of(c) for c in columns), fixed)

    def changes(self, unit: RowEvent) -> list[Change]:
        """The event's rows, with the ids the worker gives rows it decodes itself."""
        codec = RowCodec(self.table, list(self.columns))
        out: list[Change] = []
        layout = rows_layout(unit.event, unit.form.checksum)
        origin = Origin(unit.shard, unit.target)
        event_no = unit.id[2] >> ROW_BITS
        append_changes(out, unit.event, layout, codec, origin, unit.id[:2], event_no, codec.columns_of)
        if self.fixed:
            k = len(self.fixed)
            out = [
                c._replace(
                    values=None if c.values is None else (*c.values[:-k], *self.fixed),
                    before=None if c.before is None else (*c.before[:-k], *self.fixed),
                )
                for c in out
            ]
        return out
