"""A shard's row events made to carry its extract columns, so they still go as they are.

Extract columns (DM's: where a row came from) hold the same values in every row of a
shard, and no event carries them: so a merge with them decoded every row into SQL, at four
times the cost of a replay. Appended to the events instead, they make an event of the
table the target is (the shard's columns, then the extract columns): the table map gets
three more VARCHAR columns, NOT NULL; each row image gets three more values, its null
bitmap three more bits, both present-column bitmaps three more columns; the server applies
the result as it applies any row event. Finding a row image's end takes the size of each
value, not its decoding (`skipper`). The binlog's own optional metadata (column names and
the like, for clients) is dropped from the table map: applying rows does not read it.

The byte layouts are those of `replicator.source.row_events` (MariaDB's version 1 events).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from lattice import Family, Table, mbmaxlen
from replicator.source import field_types as FIELD_TYPE
from replicator.source.row_events import (
    HEADER,
    EventError,
    RowShape,
    RowsLayout,
    _packed_int,
    _sealed,
    _unsealed,
    rows_layout,
)
from replicator.source.rowcodec import MapColumn, Unsupported

_TABLE_ID = 6
VARCHAR = 15  # MYSQL_TYPE_VARCHAR in a table map
UTF8 = ("utf8mb4", "utf8mb3")  # the extract values' bytes are their UTF-8
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_FIXED = {
    FIELD_TYPE.TINY: 1,
    FIELD_TYPE.SHORT: 2,
    FIELD_TYPE.INT24: 3,
    FIELD_TYPE.LONG: 4,
    FIELD_TYPE.LONGLONG: 8,
    FIELD_TYPE.FLOAT: 4,
    FIELD_TYPE.DOUBLE: 8,
    FIELD_TYPE.YEAR: 1,
    FIELD_TYPE.DATE: 3,
}


def _decimal_size(precision: int, scale: int) -> int:
    intg0, intg0x = divmod(precision - scale, 9)
    frac0, frac0x = divmod(scale, 9)
    return intg0 * 4 + _DIG2BYTES[intg0x] + frac0 * 4 + _DIG2BYTES[frac0x]


@dataclass(frozen=True)
class Width:
    """How far one value of a column reaches from its first byte: `fixed` bytes, or, where
    `prefix` is set, a length of that many bytes and as many more."""

    fixed: int = 0
    prefix: int = 0

    def skip(self, buf: bytes, pos: int) -> int:
        if not self.prefix:
            return pos + self.fixed
        return pos + self.prefix + int.from_bytes(buf[pos : pos + self.prefix], "little")


def skipper(col: MapColumn) -> Width:
    """How far one value of this table-map column reaches."""
    kind = col.type
    if kind in _FIXED:
        return Width(_FIXED[kind])
    if kind == FIELD_TYPE.NEWDECIMAL:
        return Width(_decimal_size(col.precision, col.decimals))
    if kind == FIELD_TYPE.DATETIME2:
        return Width(5 + (col.fsp + 1) // 2)
    if kind == FIELD_TYPE.TIMESTAMP2:
        return Width(4 + (col.fsp + 1) // 2)
    if kind == FIELD_TYPE.TIME2:
        return Width(3 + (col.fsp + 1) // 2)
    if kind == FIELD_TYPE.BIT:
        return Width(col.bytes)
    if kind in (FIELD_TYPE.ENUM, FIELD_TYPE.SET):
        return Width(col.size)
    if kind in (FIELD_TYPE.VARCHAR, FIELD_TYPE.VAR_STRING, FIELD_TYPE.STRING):
        return Width(prefix=2 if col.max_length > 255 else 1)
    if kind in (FIELD_TYPE.BLOB, FIELD_TYPE.GEOMETRY):
        return Width(prefix=col.length_size)
    raise Unsupported(f"binlog type {kind}: no size known")


def _fused(widths: Sequence[Width]) -> tuple[tuple[int, int], ...]:
    """The values of a row image without NULLs as runs: each the bytes of fixed-size values
    in a row, then the length prefix of a variable one (0: none), so that a walk takes one
    step a run rather than one a column."""
    runs, fixed = [], 0
    for width in widths:
        if width.prefix:
            runs.append((fixed, width.prefix))
            fixed = 0
        else:
            fixed += width.fixed
    if fixed or not runs:
        runs.append((fixed, 0))
    return tuple(runs)


@dataclass(frozen=True)
class Extension:
    """What a shard's events get appended: per extract column its byte width (the table
    map's VARCHAR metadata) and, for every row image, the values' bytes, made once."""

    widths: tuple[int, ...]
    suffix: bytes

    @classmethod
    def of(cls, values: Sequence[str], columns: Sequence) -> Extension | None:
        """For these extract values and the target's columns of them (lattice columns);
        None where a column is no VARCHAR or a value does not fit it."""
        widths, suffix = [], b""
        for value, column in zip(values, columns, strict=True):
            t = column.type
            if t.family != Family.STRING or t.name != "varchar" or column.nullable or t.charset not in UTF8:
                return None
            width = t.length * mbmaxlen(t.charset)
            text = str(value)
            raw = text.encode("utf-8")
            if len(text) > t.length or len(raw) > width:  # (the server would refuse it: decoded then)
                return None
            widths.append(width)
            suffix += len(raw).to_bytes(2 if width > 255 else 1, "little") + raw
        return cls(tuple(widths), suffix)


@dataclass(frozen=True)
class Extended:
    """How a table version's events of one shard go with its extract columns: the shape of
    their rows then, the values appended, each column's skipper, the extended table map (as
    the binlog's: the applier renames it), and the codec of the extended rows."""

    shape: RowShape
    extension: Extension
    skips: tuple[Width, ...]
    table_map: bytes
    codec: object  # row_events.EventCodec


def extended_shape(shape: RowShape, target: RowShape, names: Sequence[str]) -> RowShape | None:
    """The shard's row shape with the target's entries of the extract columns after it."""
    by_name = {entry[0]: entry for entry in target}
    extra = [by_name.get(name.lower()) for name in names]
    if any(entry is None for entry in extra):
        return None
    return (*shape, *extra)


def extend_table_map(raw: bytes, checksum: bool, extension: Extension) -> bytes:
    """The table map with the extract columns after the shard's, NOT NULL; its optional
    metadata dropped."""
    event = _unsealed(raw, checksum)
    at = HEADER + _TABLE_ID + 2
    at += 1 + event[at] + 1  # the schema: length, name, NUL
    at += 1 + event[at] + 1  # the table
    head = event[:at]
    count, at = _packed_int(event, at)
    types = event[at : at + count]
    at += count
    meta_len, at = _packed_int(event, at)
    meta = event[at : at + meta_len]
    at += meta_len
    nulls = int.from_bytes(event[at : at + (count + 7) // 8], "little")
    k = len(extension.widths)
    new_meta = meta + b"".join(w.to_bytes(2, "little") for w in extension.widths)
    body = (
        head
        + _packed(count + k)
        + types
        + bytes((VARCHAR,)) * k
        + _packed(len(new_meta))
        + new_meta
        + nulls.to_bytes((count + k + 7) // 8, "little")
    )
    return _sealed(body, checksum)


def extend_rows(
    raw: bytes, checksum: bool, skips: Sequence[Width], extension: Extension
) -> tuple[bytes, int]:
    """The rows event with the extract values appended to every row image, and its rows."""
    layout = _layout(raw, checksum, skips)
    k = len(extension.widths)
    count = layout.columns
    bitmap = (1 << k) - 1 << count
    present = _bitmap(layout.present, bitmap, count + k)
    head = raw[: HEADER + _TABLE_ID + 2] + _packed(count + k) + present
    if layout.present_after is not None:
        head += _bitmap(layout.present_after, bitmap, count + k)
    images, rows = _images(raw, layout, skips, extension.suffix, k)
    return _sealed(head + images, checksum), rows


def count_rows(raw: bytes, checksum: bool, skips: Sequence[Width]) -> int:
    """How many rows a rows event holds (an update's before and after image being one row),
    found by walking its images as `extend_rows` does: the server's answer to a BINLOG
    statement says none."""
    layout = _layout(raw, checksum, skips)
    plans = _plans(layout, skips, 0)
    rows, pos, end = 0, layout.start, layout.end
    while pos < end:
        rows += 1
        for plan in plans:
            pos = _image_end(raw, pos, plan, skips)[0]
    if pos != end:
        raise EventError("row images do not end where the event does")
    return rows


def _layout(raw: bytes, checksum: bool, skips: Sequence[Width]) -> RowsLayout:
    layout = rows_layout(raw, checksum)
    if layout.columns != len(skips):
        raise EventError(f"{layout.columns} columns in the event, {len(skips)} in its table map")
    return layout


@dataclass(frozen=True)
class _Plan:
    """How to walk one kind of row image (an update has two: before and after)."""

    columns: tuple[int, ...]  # the columns present in it
    nbytes: int  # its null bitmap's
    plain: tuple[bytes, bytes]  # the bitmaps of an image without NULLs
    zeros: bytes  # the bitmap of `k` more columns, none NULL
    runs: tuple[tuple[int, int], ...]  # `_fused` of its columns' widths


def _plans(layout: RowsLayout, skips: Sequence[Width], k: int) -> tuple[_Plan, ...]:
    """The plans of the event's images, made once per table map and bitmaps (a one-row
    event spent a fifth of its counting making them again). Only a worker walks images,
    on its one thread; keyed by the skippers' identity, which the entry holds."""
    key = (id(skips), layout.present, layout.present_after, k)
    found = _PLANS.get(key)
    if found is not None and found[0] is skips:
        return found[1]
    if len(_PLANS) >= 1024:  # (table maps of tables long gone)
        _PLANS.clear()
    plans = _made_plans(layout, skips, k)
    _PLANS[key] = (skips, plans)
    return plans


_PLANS: dict[tuple, tuple[Sequence[Width], tuple[_Plan, ...]]] = {}


def _made_plans(layout: RowsLayout, skips: Sequence[Width], k: int) -> tuple[_Plan, ...]:
    shapes = [layout.present] if layout.present_after is None else [layout.present, layout.present_after]
    plans = []
    for columns in shapes:
        nbytes = (len(columns) + 7) // 8
        # no NULL: the bitmap is zero but for the unused high bits, which the server sets
        unused = ((1 << nbytes * 8) - 1) ^ ((1 << len(columns)) - 1)
        plain = (bytes(nbytes), unused.to_bytes(nbytes, "little"))
        zeros = bytes((len(columns) + k + 7) // 8)
        plans.append(_Plan(columns, nbytes, plain, zeros, _fused([skips[i] for i in columns])))
    return tuple(plans)


def _image_end(raw: bytes, pos: int, plan: _Plan, skips: Sequence[Width]) -> tuple[int, int | None]:
    """Where the row image at `pos` ends, and its null bits (None: none set). An image
    without NULLs (most are) is walked by runs (`_fused`); one with NULLs value by value."""
    start = pos + plan.nbytes
    if raw[pos:start] in plan.plain:
        pos = start
        for fixed, prefix in plan.runs:
            pos += fixed
            if prefix == 1:
                pos += 1 + raw[pos]
            elif prefix:
                pos += prefix + int.from_bytes(raw[pos : pos + prefix], "little")
        return pos, None
    nulls = int.from_bytes(raw[pos:start], "little")
    pos = start
    for bit, i in enumerate(plan.columns):
        if not nulls >> bit & 1:
            pos = skips[i].skip(raw, pos)
    return pos, nulls


def _images(
    raw: bytes, layout: RowsLayout, skips: Sequence[Width], suffix: bytes, k: int
) -> tuple[bytes, int]:
    """Each row image (a before and an after one for an update) with `k` more null bits (zero:
    NOT NULL) and the extract values after its own; and how many rows."""
    out = []
    rows, pos, end = 0, layout.start, layout.end
    plans = _plans(layout, skips, k)
    while pos < end:
        rows += 1
        for plan in plans:
            start = pos + plan.nbytes
            pos, nulls = _image_end(raw, pos, plan, skips)
            if nulls is None:
                out.append(plan.zeros)
            else:
                # (the server sets the bitmap's unused high bits: those of the new columns must be 0)
                nulls &= (1 << len(plan.columns)) - 1
                out.append(nulls.to_bytes(len(plan.zeros), "little"))
            out.append(raw[start:pos])
            out.append(suffix)
    if pos != end:
        raise EventError("row images do not end where the event does")
    return b"".join(out), rows


def _bitmap(columns: tuple[int, ...], extra: int, count: int) -> bytes:
    bits = sum(1 << i for i in columns) | extra
    return bits.to_bytes((count + 7) // 8, "little")


def _packed(n: int) -> bytes:
    if n < 251:
        return bytes((n,))
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    return b"\xfd" + n.to_bytes(3, "little")


def skippers(columns: Sequence[MapColumn]) -> tuple[Width, ...] | None:
    """Every column's skipper, or None where one's size is not known (decoded then)."""
    try:
        return tuple(skipper(c) for c in columns)
    except Unsupported:
        return None


def extended_table(table: Table, columns: Sequence) -> Table:
    """The shard's table with the target's extract columns after its own: what an extended
    event's rows hold (its codec decodes one the server refuses)."""
    return replace(table, columns=(*table.columns, *columns))


def extended_map_columns(columns: Sequence[MapColumn], extension: Extension) -> tuple[MapColumn, ...]:
    """The table map's columns of an extended event (for its codec)."""
    return (*columns, *(MapColumn(VARCHAR, max_length=w) for w in extension.widths))
