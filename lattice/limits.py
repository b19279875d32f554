"""Storage limits a joined table must still respect: the 65535-byte row and the
3072-byte InnoDB index key. Widening columns in a join can cross them even when no
shard does. Estimates lean low, so a table the server accepts is never refused."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace

from lattice.charsets import mbmaxlen
from lattice.flavor import Flavor
from lattice.model import (
    BLOB_CAPACITY,
    TEXT_CAPACITY,
    Column,
    ColumnType,
    Family,
    Index,
    IndexKind,
    IndexPart,
)

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
    return _row_bytes(tuple(columns))


# a join settles mostly the same columns, decision after decision. Cached by the columns
# themselves (each group's DDL thread asks: a memo of the last one, read then written apart,
# could give one group another table's size: issue 72)
@functools.lru_cache(maxsize=256)
def _row_bytes(columns: tuple[Column, ...]) -> int:
    stored = [c for c in columns if c.generated is None or c.generated.stored]
    nullable = sum(1 for c in stored if c.nullable)
    return sum(value_bytes(c.type) for c in stored) + (nullable + 7) // 8


def key_problem(index: Index, columns: dict[str, Column], flavor: Flavor = Flavor.MARIADB) -> str | None:
    """Why the server would refuse this index on these columns, or None. MariaDB makes
    a UNIQUE key too long for a B-tree, or on a TEXT column without a prefix, a hash
    key (`USING HASH`, since 10.4); a PRIMARY KEY and the other servers refuse it. A
    SPATIAL key needs its column NOT NULL (1252): a column held nullable for rows already
    downstream has none."""
    if index.kind == IndexKind.SPATIAL:
        nullable = [c for p in index.parts if (c := columns.get(p.column.lower())) is not None and c.nullable]
        return f"SPATIAL key on nullable column {nullable[0].name}" if nullable else None
    if index.kind == IndexKind.FULLTEXT:
        return None
    hashed = Flavor.parse(flavor).rules.hashes_long_unique_keys and index.kind == IndexKind.UNIQUE
    total = 0
    for part in index.parts:
        column = columns.get(part.column.lower())
        if column is None:
            if part.column.startswith("("):
                continue
            return f"column {part.column} is gone"
        if hashed:
            continue
        t = column.type
        if part.length is None and (t.is_text_kind or t.family in (Family.JSON, Family.SPATIAL)):
            return f"{t.name} column {column.name} needs a prefix length in a key"
        total += _part_bytes(part, t)
    if total > MAX_KEY_BYTES:  # (a hashed key has counted nothing)
        return f"the key would be {total} bytes, more than {MAX_KEY_BYTES}"
    return None


def _part_bytes(part: IndexPart, t: ColumnType) -> int:
    if part.length is not None:
        per_char = mbmaxlen(t.charset) if t.family == Family.STRING else 1
        return part.length * per_char
    if t.name in ("char", "varchar"):
        return (t.length or 1) * mbmaxlen(t.charset)
    if t.name in ("binary", "varbinary"):
        return t.length or 1  # (a key part holds no length bytes)
    return value_bytes(t)


def btree_too_long(index: Index, columns: Mapping[str, Column]) -> bool:
    """Is this key too long for a B-tree: a part of a whole TEXT, BLOB, JSON or geometry
    column, or more than 3072 bytes in all (lengths and NULL flags not counted, as the
    server counts: a UNIQUE key of an INT and a VARCHAR(767) utf8mb4 is a B-tree)."""
    total = 0
    for part in index.parts:
        column = columns.get(part.column.lower())
        if column is None:
            continue  # an expression part
        t = column.type
        if part.length is None and (t.is_text_kind or t.family in (Family.JSON, Family.SPATIAL)):
            return True
        total += _part_bytes(part, t)
    return total > MAX_KEY_BYTES


def _char_bytes(t: ColumnType) -> int:
    """Bytes of a character of a key part's prefix: a document's are utf8mb4 ones."""
    return 4 if t.family == Family.JSON else mbmaxlen(t.charset) if t.family == Family.STRING else 1


def _fitted_bytes(part: IndexPart, t: ColumnType) -> int:
    return part.length * 4 if t.family == Family.JSON and part.length else _part_bytes(part, t)


def fitted_prefixes(index: Index, columns: dict[str, Column]) -> Index:
    """`settled_prefixes`, for a downstream key of the join: a plain key still longer than
    a key holds (a column held wider than the shards have it takes a key's longest prefix,
    though other parts need bytes too) gives up characters of its string parts' prefixes,
    the last part first, till it fits: MariaDB refuses it, it does not cut it (a DATETIME(6)
    beside a LONGTEXT's 768 utf8mb4 characters, F137)."""
    index = settled_prefixes(index, columns)
    if index.kind != IndexKind.PLAIN:
        return index
    parts = list(index.parts)
    types = [columns[p.column.lower()].type if p.column.lower() in columns else None for p in parts]
    if any(t is None for t in types):
        return index  # an expression part, or a column that is gone: nothing to count
    over = sum(_fitted_bytes(p, t) for p, t in zip(parts, types, strict=True)) - MAX_KEY_BYTES
    cut = []
    for i in reversed(range(len(parts))):
        t = types[i]
        if over <= 0:
            break
        if t.is_text_kind or t.family == Family.JSON or t.name in ("char", "varchar"):
            length = parts[i].length or t.length or 1
            chars = min(-(-over // _char_bytes(t)), length - 1)
            parts[i] = replace(parts[i], length=length - chars)
            over -= chars * _char_bytes(t)
            cut.append(i)
    for i in cut:  # a wide character cut past the limit leaves bytes a narrower part takes back
        chars = -over // _char_bytes(types[i])
        if chars > 0:
            parts[i] = replace(parts[i], length=parts[i].length + chars)
            over += chars * _char_bytes(types[i])
    return replace(index, parts=tuple(parts))


_BLOB_CAPACITY = {**TEXT_CAPACITY, **BLOB_CAPACITY}


POINT_BYTES = 25  # a POINT's value: its SRID and two doubles, with the WKB header


# The longest key other engines than InnoDB hold, in bytes (measured on MariaDB 10.11:
# note 1071 names it when a plain key is cut to fit)
_ENGINE_KEY_BYTES = {"myisam": 1000, "aria": 2300}


def max_key_bytes(engine: str | None) -> int:
    """The longest key a table of this engine holds (None: the default engine, InnoDB)."""
    return _ENGINE_KEY_BYTES.get((engine or "").lower(), MAX_KEY_BYTES)


def settled_prefixes(index: Index, columns: dict[str, Column], key_bytes: int = MAX_KEY_BYTES) -> Index:
    """The index with the prefix lengths MariaDB gives its parts on these columns, as
    CREATE, ALTER and a column's new type leave them (information_schema SUB_PART), in
    a table whose keys hold `key_bytes` at most (`max_key_bytes`)."""
    if index.kind in (IndexKind.FULLTEXT, IndexKind.SPATIAL):
        return index
    plain = index.kind == IndexKind.PLAIN
    parts = tuple(
        _settled_part(part, columns.get(part.column.lower()), plain, key_bytes) for part in index.parts
    )
    return index if parts == index.parts else replace(index, parts=parts)


def takes_prefix(t: ColumnType) -> bool:
    """Can a key hold a prefix of this type's values (the server's type_can_have_key_part)?"""
    return t.name in ("char", "varchar", "binary", "varbinary") or t.is_text_kind or t.family == Family.JSON


def _settled_part(part: IndexPart, column: Column | None, plain: bool, key_bytes: int) -> IndexPart:
    """The part with the prefix length MariaDB gives it on `column` in a plain key
    (`plain`) or a unique/primary one."""
    if column is None:  # an expression part, or a column that is gone
        return part
    t = column.type
    per_char = mbmaxlen(t.charset) if t.family in (Family.STRING, Family.JSON) else 1
    if t.name in ("char", "varchar", "binary", "varbinary"):
        length = part.length
        if length is not None and length >= (t.length or 1):
            length = None  # a prefix as long as the column is the whole column
        if plain and (length or t.length or 1) * per_char > key_bytes:
            # too long for a key: a plain key keeps a prefix (note 1071), other keys refuse
            length = key_bytes // per_char
        return replace(part, length=length)
    if t.is_text_kind or t.family == Family.JSON:
        if not plain:
            return part  # a unique BLOB/TEXT key without a prefix is a hash key on MariaDB
        # a plain key takes the longest prefix the type and a key hold, counting the
        # type's capacity in bytes as characters (MariaDB's blob_length_by_type)
        capacity = _BLOB_CAPACITY.get(t.name, TEXT_CAPACITY["longtext"])
        return replace(part, length=min(part.length or capacity, capacity, key_bytes // per_char))
    if t.name == "point" and part.length is None:
        return replace(part, length=POINT_BYTES)  # a key on a POINT holds its 25 bytes as a prefix
    if part.length is not None and t.family != Family.SPATIAL:
        # the column's new type takes no prefix: the key uses the whole column
        return replace(part, length=None)
    return part
