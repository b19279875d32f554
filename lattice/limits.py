"""Storage limits a joined table must still respect: the 65535-byte row and the
3072-byte InnoDB index key. Widening columns in a join can cross them even when no
shard does. Estimates lean low, so a table the server accepts is never refused."""

from __future__ import annotations

from dataclasses import replace

from lattice.charsets import mbmaxlen
from lattice.model import Column, ColumnType, Family, Index, IndexKind

MAX_ROW_BYTES = 65535
MAX_KEY_BYTES = 3072
_FIXED = {
    Family.YEAR: 1,
    Family.DATE: 3,
    Family.JSON: 12,
    Family.SPATIAL: 12,
}
_INTEGER_BYTES = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "bigint": 8}
_BLOB_POINTER = {
    "tinytext": 9,
    "text": 10,
    "mediumtext": 11,
    "longtext": 12,
    "tinyblob": 9,
    "blob": 10,
    "mediumblob": 11,
    "longblob": 12,
}


def _decimal_bytes(precision: int, scale: int) -> int:
    def digits(n: int) -> int:
        return n // 9 * 4 + (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)[n % 9]

    return digits(precision - scale) + digits(scale)


def value_bytes(t: ColumnType) -> int:
    """Bytes the row holds for a value of this type (a BLOB/TEXT counts its pointer)."""
    f = t.family
    if t.name in _BLOB_POINTER:
        return _BLOB_POINTER[t.name]
    if f == Family.INTEGER:
        return _INTEGER_BYTES[t.name]
    if f == Family.DECIMAL:
        return _decimal_bytes(t.precision or 10, t.scale or 0)
    if f == Family.FLOAT:
        return 8 if t.name == "double" else 4
    if f == Family.BIT:
        return ((t.length or 1) + 7) // 8
    if f in (Family.TIME, Family.DATETIME, Family.TIMESTAMP):
        base = {Family.TIME: 3, Family.DATETIME: 5, Family.TIMESTAMP: 4}[f]
        return base + ((t.fsp or 0) + 1) // 2
    if f == Family.ENUM:
        return 1 if len(t.members) < 256 else 2
    if f == Family.SET:
        return (len(t.members) + 7) // 8 or 1
    if t.name in ("char", "varchar"):
        data = (t.length or 1) * mbmaxlen(t.charset)
        return data + (0 if t.name == "char" else 1 if data < 256 else 2)
    if t.name in ("binary", "varbinary"):
        data = t.length or 1
        return data + (0 if t.name == "binary" else 1 if data < 256 else 2)
    return _FIXED.get(f, 8)


def row_bytes(columns: tuple[Column, ...] | list[Column]) -> int:
    stored = [c for c in columns if c.generated is None or c.generated.stored]
    nullable = sum(1 for c in stored if c.nullable)
    return sum(value_bytes(c.type) for c in stored) + (nullable + 7) // 8


def key_problem(index: Index, columns: dict[str, Column]) -> str | None:
    """Why the server would refuse this index on these columns, or None."""
    if index.kind in (IndexKind.FULLTEXT, IndexKind.SPATIAL):
        return None
    total = 0
    for part in index.parts:
        column = columns.get(part.column.lower())
        if column is None:
            if part.column.startswith("("):
                continue
            return f"column {part.column} is gone"
        t = column.type
        if part.length is None and (t.is_text_kind or t.family in (Family.JSON, Family.SPATIAL)):
            return f"{t.name} column {column.name} needs a prefix length in a key"
        if part.length is not None:
            per_char = mbmaxlen(t.charset) if t.family == Family.STRING else 1
            total += part.length * per_char
        elif t.name in ("char", "varchar"):
            total += (t.length or 1) * mbmaxlen(t.charset)
        else:
            total += value_bytes(t)
    if total > MAX_KEY_BYTES:
        return f"the key would be {total} bytes, more than {MAX_KEY_BYTES}"
    return None


def shortened(index: Index, columns: dict[str, Column]) -> Index:
    """A plain index with a part longer than a whole key, as MariaDB keeps it (note
    1071): that part becomes a prefix of MAX_KEY_BYTES. Other indexes are unchanged
    (a unique one would not be the same constraint on a prefix)."""
    if index.kind != IndexKind.PLAIN:
        return index
    parts = []
    for part in index.parts:
        column = columns.get(part.column.lower())
        t = column.type if column is not None else None
        if t is not None and t.name in ("char", "varchar", "binary", "varbinary"):
            per_char = mbmaxlen(t.charset) if t.family == Family.STRING else 1
            length = part.length or t.length or 1
            if length * per_char > MAX_KEY_BYTES:
                part = replace(part, length=MAX_KEY_BYTES // per_char)
        parts.append(part)
    parts = tuple(parts)
    return index if parts == index.parts else replace(index, parts=parts)
