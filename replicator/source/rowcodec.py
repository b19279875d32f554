"""Row images straight from binlog bytes to SQL literals.

python-mysql-replication decodes each value through several Python calls, then we
would turn the Python value back into SQL text. For the common column types this
module reads the row image once, with one small reader per column built from the
table map and the tracked schema, and produces the literal directly. Strings are
written as hexadecimal with their character set introducer (`_utf8mb4 x'...'`): no
decoding, no escaping, and the column's collation still applies when the literal
is compared with a column. A table with a type not handled here (MySQL's binary
JSON, pre-5.6 temporal formats, MariaDB compressed columns) is decoded by the
library instead (`Unsupported`).

The byte formats are those of MySQL's row-based replication (MySQL internals
manual, "Rows events" and the field type encodings).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

from lattice import Column as ModelColumn
from lattice import Family, Table, python_codec
from replicator.source import field_types as FIELD_TYPE
from replicator.source.fraction import fraction

Reader = Callable[[bytes, int], tuple[str, int]]


class Unsupported(Exception):
    """A column this codec cannot decode: use the library for the table."""


_I8, _U8 = struct.Struct("<b"), struct.Struct("<B")
_I16, _U16 = struct.Struct("<h"), struct.Struct("<H")
_I32, _U32 = struct.Struct("<i"), struct.Struct("<I")
_I64, _U64 = struct.Struct("<q"), struct.Struct("<Q")
_F32, _F64 = struct.Struct("<f"), struct.Struct("<d")
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def _fixed(fmt: struct.Struct, text: Callable[[object], str] = str) -> Reader:
    """A fixed-size number; floats print with repr, which round-trips them."""
    size = fmt.size
    unpack = fmt.unpack_from

    def read(buf: bytes, pos: int) -> tuple[str, int]:
        return text(unpack(buf, pos)[0]), pos + size

    return read


def _int24(unsigned: bool) -> Reader:
    def read(buf: bytes, pos: int) -> tuple[str, int]:
        return str(int.from_bytes(buf[pos : pos + 3], "little", signed=not unsigned)), pos + 3

    return read


def _length_prefixed(size: int, literal: Callable[[bytes], str]) -> Reader:
    def read(buf: bytes, pos: int) -> tuple[str, int]:
        n = int.from_bytes(buf[pos : pos + size], "little")
        start = pos + size
        return literal(buf[start : start + n]), start + n

    return read


def _hex_string(size: int, prefix: str) -> Reader:
    """A string of one or two bytes of length as `prefix` x'...': a row's text columns are
    most of its bytes (a third less of a worker's time on sysbench's rows than a reader
    that takes a literal function and slices its length)."""
    if size == 1:

        def read(buf: bytes, pos: int) -> tuple[str, int]:
            end = pos + 1 + buf[pos]
            return f"{prefix}{buf[pos + 1 : end].hex()}'", end

    elif size == 2:

        def read(buf: bytes, pos: int) -> tuple[str, int]:
            end = pos + 2 + (buf[pos] | buf[pos + 1] << 8)
            return f"{prefix}{buf[pos + 2 : end].hex()}'", end

    else:
        return _length_prefixed(size, lambda raw: f"{prefix}{raw.hex()}'")
    return read


def _text_literal(charset: str) -> Callable[[bytes], str]:
    prefix = f"_{charset} x'"
    return lambda raw: prefix + raw.hex() + "'"


def _binary_literal(width: int) -> Callable[[bytes], str]:
    """BINARY(n)'s: the binlog drops the trailing zero bytes the column keeps."""
    return lambda raw: "x'" + raw.ljust(width, b"\0").hex() + "'"


def _decimal(precision: int, scale: int) -> Reader:
    """MariaDB's packed decimal: groups of 9 digits in 4 bytes (a partial group in fewer),
    the integer part's then the fraction's, the sign in the top bit (a negative value has
    every bit inverted). Read as one integer and cut into groups: one big-int operation
    per group, not a byte copy and a format per group."""
    intg0, intg0x = divmod(precision - scale, 9)
    frac0, frac0x = divmod(scale, 9)
    widths = [(_DIG2BYTES[intg0x], intg0x)] if intg0x else []
    widths += [(4, 9)] * intg0
    whole_groups = len(widths)
    widths += [(4, 9)] * frac0 + ([(_DIG2BYTES[frac0x], frac0x)] if frac0x else [])
    size = sum(n for n, _ in widths)
    groups = []  # (shift, mask, scale of the digits before it) from the most significant
    shift = size * 8
    for n, digits in widths:
        shift -= n * 8
        groups.append((shift, (1 << n * 8) - 1, 10**digits))
    whole, fraction = groups[:whole_groups], groups[whole_groups:]
    sign, every = 1 << (size * 8 - 1), (1 << size * 8) - 1

    def read(buf: bytes, pos: int) -> tuple[str, int]:
        value = int.from_bytes(buf[pos : pos + size], "big") ^ sign
        negative = value & sign
        if negative:
            value ^= every
        number = 0
        for at, mask, _ in whole:
            number = number * 1_000_000_000 + (value >> at & mask)
        text = str(number)
        if scale:
            part = 0
            for at, mask, digits in fraction:
                part = part * digits + (value >> at & mask)
            text = f"{text}.{part:0{scale}d}"
        return ("-" + text if negative else text), pos + size

    return read


def _fraction(buf: bytes, pos: int, fsp: int) -> tuple[int, int]:
    """Microseconds of the fractional part of a temporal value, and the new offset."""
    n = (fsp + 1) // 2
    if not n:
        return 0, pos
    value = int.from_bytes(buf[pos : pos + n], "big")
    return value * (10000, 100, 1)[n - 1], pos + n


def _with_micro(text: str, micro: int, fsp: int) -> str:
    return text + fraction(micro, fsp) + "'"


def _datetime2(fsp: int) -> Reader:
    def read(buf: bytes, pos: int) -> tuple[str, int]:
        value = int.from_bytes(buf[pos : pos + 5], "big") - 0x8000000000
        micro, end = _fraction(buf, pos + 5, fsp)
        ymd, hms = value >> 17, value & 0x1FFFF
        ym, day = ymd >> 5, ymd & 0x1F
        year, month = divmod(ym, 13)
        text = f"'{year:04d}-{month:02d}-{day:02d} {hms >> 12:02d}:{(hms >> 6) & 0x3F:02d}:{hms & 0x3F:02d}"
        return _with_micro(text, micro, fsp), end

    return read


def _timestamp2(fsp: int) -> Reader:
    def read(buf: bytes, pos: int) -> tuple[str, int]:
        seconds = int.from_bytes(buf[pos : pos + 4], "big")
        micro, end = _fraction(buf, pos + 4, fsp)
        if seconds == 0 and micro == 0:
            return _with_micro("'0000-00-00 00:00:00", 0, fsp), end
        t = time.gmtime(seconds)  # the binlog holds UTC; the applier's session is in UTC
        text = (
            f"'{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d} {t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"
        )
        return _with_micro(text, micro, fsp), end

    return read


def _time2(fsp: int) -> Reader:
    n = (fsp + 1) // 2

    def read(buf: bytes, pos: int) -> tuple[str, int]:
        # the packed form of MySQL's my_time_packed_from_binary
        if n == 3:
            packed = int.from_bytes(buf[pos : pos + 6], "big") - 0x800000000000
            end = pos + 6
        else:
            intpart = int.from_bytes(buf[pos : pos + 3], "big") - 0x800000
            frac = int.from_bytes(buf[pos + 3 : pos + 3 + n], "big") if n else 0
            if intpart < 0 and frac:
                intpart += 1
                frac -= 0x100 if n == 1 else 0x10000
            packed = (intpart << 24) + frac * (10000 if n == 1 else 100)
            end = pos + 3 + n
        sign = "-" if packed < 0 else ""
        packed = abs(packed)
        intpart, micro = packed >> 24, packed & 0xFFFFFF
        text = f"'{sign}{(intpart >> 12) & 0x3FF:02d}:{(intpart >> 6) & 0x3F:02d}:{intpart & 0x3F:02d}"
        return _with_micro(text, micro, fsp), end

    return read


def _date(buf: bytes, pos: int) -> tuple[str, int]:
    value = int.from_bytes(buf[pos : pos + 3], "little")
    return f"'{value >> 9:04d}-{(value >> 5) & 0x0F:02d}-{value & 0x1F:02d}'", pos + 3


def _year(buf: bytes, pos: int) -> tuple[str, int]:
    value = buf[pos]
    return ("0" if value == 0 else str(value + 1900)), pos + 1


def _bit(nbytes: int) -> Reader:
    def read(buf: bytes, pos: int) -> tuple[str, int]:
        return str(int.from_bytes(buf[pos : pos + nbytes], "big")), pos + nbytes

    return read


def _enum(size: int, members: tuple[str, ...], charset: str) -> Reader:
    text = _text_literal(charset)
    literals = ["''", *(text(m.encode(_python_codec(charset))) for m in members)]

    def read(buf: bytes, pos: int) -> tuple[str, int]:
        index = int.from_bytes(buf[pos : pos + size], "little")
        return (literals[index] if index < len(literals) else "''"), pos + size

    return read


def _set(size: int, members: tuple[str, ...], charset: str) -> Reader:
    text = _text_literal(charset)
    codec = _python_codec(charset)

    def read(buf: bytes, pos: int) -> tuple[str, int]:
        mask = int.from_bytes(buf[pos : pos + size], "little")
        chosen = ",".join(m for i, m in enumerate(members) if mask >> i & 1)
        return text(chosen.encode(codec)), pos + size

    return read


def _python_codec(charset: str) -> str:
    return python_codec(charset) or "utf-8"


def column_reader(col, ours: ModelColumn) -> Reader:
    """The reader of one column from its table-map entry and our tracked column."""
    t = ours.type
    f = t.family
    unsigned = t.unsigned
    kind = col.type
    charset = t.charset or "utf8mb4"
    if kind == FIELD_TYPE.TINY:
        return _fixed(_U8 if unsigned else _I8)
    if kind == FIELD_TYPE.SHORT:
        return _fixed(_U16 if unsigned else _I16)
    if kind == FIELD_TYPE.INT24:
        return _int24(unsigned)
    if kind == FIELD_TYPE.LONG:
        return _fixed(_U32 if unsigned else _I32)
    if kind == FIELD_TYPE.LONGLONG:
        return _fixed(_U64 if unsigned else _I64)
    if kind == FIELD_TYPE.FLOAT:
        return _fixed(_F32, repr)
    if kind == FIELD_TYPE.DOUBLE:
        return _fixed(_F64, repr)
    if kind == FIELD_TYPE.NEWDECIMAL:
        return _decimal(col.precision, col.decimals)
    if kind == FIELD_TYPE.YEAR:
        return _year
    if kind == FIELD_TYPE.DATE:
        return _date
    if kind == FIELD_TYPE.DATETIME2:
        return _datetime2(col.fsp)
    if kind == FIELD_TYPE.TIMESTAMP2:
        return _timestamp2(col.fsp)
    if kind == FIELD_TYPE.TIME2:
        return _time2(col.fsp)
    if kind == FIELD_TYPE.BIT:
        return _bit(col.bytes)
    if kind == FIELD_TYPE.ENUM and f == Family.ENUM:
        return _enum(col.size, t.members, charset)
    if kind == FIELD_TYPE.SET and f == Family.SET:
        return _set(col.size, t.members, charset)
    if kind in (FIELD_TYPE.VARCHAR, FIELD_TYPE.VAR_STRING, FIELD_TYPE.STRING):
        size = 2 if col.max_length > 255 else 1
        if f == Family.BINARY:
            width = t.length if t.name == "binary" else None
            if width:
                return _length_prefixed(size, _binary_literal(width))
            return _hex_string(size, "x'")
        if f == Family.STRING:
            return _hex_string(size, f"_{charset} x'")
    if kind in (FIELD_TYPE.BLOB, FIELD_TYPE.GEOMETRY) and f in (
        Family.STRING,
        Family.BINARY,
        Family.JSON,
        Family.SPATIAL,
    ):
        return _hex_string(col.length_size, f"_{charset} x'" if f in (Family.STRING, Family.JSON) else "x'")
    raise Unsupported(f"column {ours.name}: binlog type {kind} for {t.name}")


class MapColumn(NamedTuple):
    """What a reader needs of a column's table-map entry (the library's column object
    has these, and more than a message should carry)."""

    type: int
    precision: int = 0
    decimals: int = 0
    fsp: int = 0
    bytes: int = 0
    size: int = 0
    max_length: int = 0
    length_size: int = 0

    @classmethod
    def of(cls, col) -> MapColumn:
        return cls(col.type, *(getattr(col, f, 0) or 0 for f in cls._fields[1:]))


class RowCodec:
    """Reads the row images of one table version. Generated columns are read (the
    binlog carries them) and left out: the downstream computes them (docs/design.md "Generated columns")."""

    def __init__(self, table: Table, columns: list):
        if len(columns) != len(table.columns):
            raise Unsupported(f"{len(columns)} columns in the binlog, {len(table.columns)} tracked")
        self.table = table
        self.readers = [column_reader(col, ours) for col, ours in zip(columns, table.columns, strict=True)]
        self.keep = [c.generated is None for c in table.columns]
        self.columns = tuple(c.name for c in table.columns if c.generated is None)
        self._kept: dict[tuple[int, ...], tuple[str, ...]] = {}

    def columns_of(self, present: Sequence[int]) -> tuple[str, ...]:
        """The names of the values `image` returns for rows with these columns present."""
        key = tuple(present)
        names = self._kept.get(key)
        if names is None:
            names = self._kept[key] = tuple(self.table.columns[i].name for i in present if self.keep[i])
        return names

    def image(self, buf: bytes, pos: int, present: Sequence[int]) -> tuple[list[str], int]:
        """One row image: its null bitmap over the present columns, then their values;
        returns the literals of the present, non-generated columns in order."""
        nbytes = (len(present) + 7) // 8
        nulls = int.from_bytes(buf[pos : pos + nbytes], "little")
        pos += nbytes
        row: list[str] = []
        readers, keep = self.readers, self.keep
        for bit, i in enumerate(present):
            if nulls >> bit & 1:
                value = "NULL"
            else:
                value, pos = readers[i](buf, pos)
            if keep[i]:
                row.append(value)
        return row, pos


def present_columns(bitmap: bytes, count: int) -> tuple[int, ...]:
    """Column indexes a row image holds (all of them with binlog_row_image=FULL). Every
    event of a table has the same bitmap: made once per bitmap (keyed by its value; a
    thread that makes one another made too only makes the same)."""
    found = _PRESENT.get((bitmap, count))
    if found is None:
        if len(_PRESENT) >= 4096:  # (bitmaps of tables long gone)
            _PRESENT.clear()
        found = _PRESENT[(bitmap, count)] = tuple(i for i in range(count) if bitmap[i // 8] >> (i % 8) & 1)
    return found


_PRESENT: dict[tuple[bytes, int], tuple[int, ...]] = {}


def rows_body(event) -> bytes:
    """The undecoded rows of a rows event (the library has read only its header)."""
    return event.packet.read(event.event_size - event.packet.read_bytes)
