"""The lattice of column types: which type accepts every value of two others, per
downstream flavor. One class per family; types of different families never join
(docs/design.md "Other types": year, date, time, datetime, timestamp, float, double,
decimal, bit and json are independent; the float/datetime example is a conflict).
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from lattice.algebra import AppendOnly, Boolean, Conflict, Lattice
from lattice.charsets import charset_of_collation, collation_suffix, mbmaxlen
from lattice.flavor import Flavor
from lattice.model import (
    BLOB_CAPACITY,
    INTEGER_BITS,
    INTEGER_BY_BITS,
    TEXT_CAPACITY,
    ColumnType,
    Family,
)
from lattice.typetext import render_type

# Longest VARCHAR/VARBINARY in bytes (a row holds at most 65535 bytes, 2 of them the length).
MAX_VARCHAR_BYTES = 65532
MAX_DECIMAL_DIGITS = 65  # MySQL/MariaDB: DECIMAL(M,D) with M <= 65
# VARCHAR(n) is costed at 4 bytes per character whatever its character set when it
# is compared with a TEXT type. Costing it by its own set would make the order depend
# on which character set wins a join and break associativity (utf8mb3 < utf8mb4).
COST_PER_CHARACTER = 4


def _mismatch(a: ColumnType, b: ColumnType, why: str = "") -> Conflict:
    return Conflict(f"cannot join {render_type(a)} with {render_type(b)}" + (f": {why}" if why else ""))


_ZEROFILL = Boolean(top=False)  # ZEROFILL only pads the display; dropping it accepts the same values
_UNSIGNED = Boolean(top=False)  # signed holds every unsigned DECIMAL/FLOAT value


class IntegerTypes(Lattice[ColumnType]):
    """docs/design.md "Integer types": tinyint < smallint < mediumint < int < bigint. The
    join is the smallest type whose range holds both ranges; on mysql/mariadb a
    signed type with more bits holds an unsigned one (INT UNSIGNED ∨ INT = BIGINT);
    TiDB cannot change signedness (docs/design.md "Integer types"), so there it is a conflict, and so is
    BIGINT UNSIGNED ∨ any signed type everywhere (no integer type holds both)."""

    def __init__(self, flavor: Flavor | str):
        self.flavor = flavor = Flavor.parse(flavor)

    def join(self, a: ColumnType, b: ColumnType) -> ColumnType:
        bits = max(INTEGER_BITS[a.name], INTEGER_BITS[b.name])
        if a.unsigned == b.unsigned:
            unsigned = a.unsigned
        elif not self.flavor.rules.changes_signedness:
            raise _mismatch(a, b, "TiDB cannot change signedness")
        else:
            unsigned_bits = INTEGER_BITS[a.name if a.unsigned else b.name]
            signed_bits = INTEGER_BITS[b.name if a.unsigned else a.name]
            bits = max(signed_bits, _next_bits(unsigned_bits, a, b))
            unsigned = False
        zerofill = unsigned and _ZEROFILL.join(a.zerofill, b.zerofill)
        return ColumnType(Family.INTEGER, INTEGER_BY_BITS[bits], unsigned=unsigned, zerofill=zerofill)


def _next_bits(unsigned_bits: int, a: ColumnType, b: ColumnType) -> int:
    for bits in sorted(INTEGER_BY_BITS):
        if bits > unsigned_bits:
            return bits
    raise _mismatch(a, b, "no integer type holds both ranges")


class DecimalTypes(Lattice[ColumnType]):
    """docs/design.md "Versions": a wider DECIMAL is an exact widening. On mysql/mariadb the join has
    the most integer digits and the largest scale (DECIMAL(6,2) ∨ DECIMAL(7,4) =
    DECIMAL(8,4)), up to 65 digits. docs/design.md "Precision": TiDB cannot change a
    decimal's precision, nor its signedness, so there only equal decimals join."""

    def __init__(self, flavor: Flavor | str):
        self.flavor = flavor = Flavor.parse(flavor)

    def join(self, a: ColumnType, b: ColumnType) -> ColumnType:
        pa, sa, pb, sb = a.precision or 10, a.scale or 0, b.precision or 10, b.scale or 0
        if not self.flavor.rules.changes_decimal_shape:
            if (pa, sa) != (pb, sb):
                raise _mismatch(a, b, "TiDB cannot change a decimal's precision")
            if a.unsigned != b.unsigned:
                raise _mismatch(a, b, "TiDB cannot change signedness")
        scale = max(sa, sb)
        precision = max(pa - sa, pb - sb) + scale
        if precision > MAX_DECIMAL_DIGITS:
            raise _mismatch(a, b, f"the join needs {precision} digits, more than {MAX_DECIMAL_DIGITS}")
        unsigned = _UNSIGNED.join(a.unsigned, b.unsigned)
        zerofill = unsigned and _ZEROFILL.join(a.zerofill, b.zerofill)
        return ColumnType(
            Family.DECIMAL, "decimal", precision=precision, scale=scale, unsigned=unsigned, zerofill=zerofill
        )


class FloatTypes(Lattice[ColumnType]):
    """docs/design.md "Versions": FLOAT → DOUBLE is an exact widening (every float is a double).
    FLOAT(M,D) rounds to D decimals, so an (M,D) survives only when both sides have
    the same kind and the same (M,D); otherwise the plain type holds both."""

    def __init__(self, flavor: Flavor | str):
        self.flavor = flavor = Flavor.parse(flavor)

    def join(self, a: ColumnType, b: ColumnType) -> ColumnType:
        if not self.flavor.rules.changes_signedness and a.unsigned != b.unsigned:
            raise _mismatch(a, b, "TiDB cannot change signedness")
        name = "double" if "double" in (a.name, b.name) else "float"
        same_shape = a.name == b.name and (a.precision, a.scale) == (b.precision, b.scale)
        precision, scale = (a.precision, a.scale) if same_shape else (None, None)
        unsigned = _UNSIGNED.join(a.unsigned, b.unsigned)
        zerofill = unsigned and _ZEROFILL.join(a.zerofill, b.zerofill)
        return ColumnType(
            Family.FLOAT, name, precision=precision, scale=scale, unsigned=unsigned, zerofill=zerofill
        )


class BitTypes(Lattice[ColumnType]):
    """BIT(n) ≤ BIT(m) for n ≤ m: a wider bit field stores the same number."""

    def join(self, a: ColumnType, b: ColumnType) -> ColumnType:
        return replace(a, length=max(a.length or 1, b.length or 1))


class TemporalTypes(Lattice[ColumnType]):
    """docs/design.md "Versions": more fractional seconds is an exact widening (TIME, DATETIME and
    TIMESTAMP each on their own; docs/design.md "Other types" keeps the kinds apart)."""

    def join(self, a: ColumnType, b: ColumnType) -> ColumnType:
        return replace(a, fsp=max(a.fsp or 0, b.fsp or 0))


class Charsets(Lattice[tuple[str | None, str | None]]):
    """docs/design.md "Character sets": only utf8 < utf8mb4; all other character sets
    join only with themselves. Collations must sort alike: the same collation, or
    the same one under the wider set (utf8mb3_bin ∨ utf8mb4_bin = utf8mb4_bin)."""

    _CHAIN: ClassVar[dict[str, int]] = {"utf8mb3": 3, "utf8mb4": 4}

    def join(self, a: tuple[str | None, str | None], b: tuple[str | None, str | None]) -> tuple:
        (ca, la), (cb, lb) = a, b
        if ca == cb:
            charset = ca
        elif ca in self._CHAIN and cb in self._CHAIN:
            charset = ca if self._CHAIN[ca] > self._CHAIN[cb] else cb
        else:
            raise Conflict(f"character sets {ca or 'default'} and {cb or 'default'} cannot be joined")
        if la == lb:
            collation = la
        elif la and lb and collation_suffix(la) == collation_suffix(lb):
            collation = f"{charset}{collation_suffix(la)}"
        else:
            raise Conflict(f"collations {la or 'default'} and {lb or 'default'} sort differently")
        if collation and charset and charset_of_collation(collation) != charset:
            collation = f"{charset}{collation_suffix(collation)}"
        return charset, collation


_CHARSETS = Charsets()

# kind ranks within the string and binary families
_CHAR, _VARCHAR, _TEXT = 0, 1, 2


def _string_kind(t: ColumnType) -> int:
    if t.name in ("char", "binary"):
        return _CHAR
    if t.name in ("varchar", "varbinary"):
        return _VARCHAR
    return _TEXT


class StringTypes(Lattice[ColumnType]):
    """docs/design.md "Character types": CHAR(n) ≤ VARCHAR(m) for n ≤ m (CHAR values come
    back and reach the binlog without trailing spaces, so VARCHAR stores them
    unchanged); VARCHAR(n) ≤ VARCHAR(m) for n ≤ m; VARCHAR(n) ≤ a TEXT type that
    holds 4n bytes; TINYTEXT < TEXT < MEDIUMTEXT < LONGTEXT. The seed's note:
    VARCHAR(65535) exists only for single-byte sets, so a VARCHAR join too long
    for the set becomes TEXT on mysql/mariadb; on TiDB, for utf8/utf8mb4, text
    types and varchar cannot be joined at all (as the seed states)."""

    def __init__(self, flavor: Flavor | str):
        self.flavor = flavor = Flavor.parse(flavor)

    def join(self, a: ColumnType, b: ColumnType) -> ColumnType:
        charset, collation = _CHARSETS.join((a.charset, a.collation), (b.charset, b.collation))
        ka, kb = _string_kind(a), _string_kind(b)
        kind = max(ka, kb)
        multibyte = mbmaxlen(charset) > 1
        if not self.flavor.rules.joins_multibyte_text and multibyte and kind == _TEXT and min(ka, kb) < _TEXT:
            raise _mismatch(
                a,
                b,
                "TiDB cannot join text types with char/varchar for utf8/utf8mb4 "
                "(docs/design.md, 'Character types')",
            )
        length = max(a.length or 0, b.length or 0)
        if kind == _CHAR:
            return ColumnType(Family.STRING, "char", length=length, charset=charset, collation=collation)
        if kind == _VARCHAR:
            if length * mbmaxlen(charset) <= MAX_VARCHAR_BYTES:
                return ColumnType(
                    Family.STRING, "varchar", length=length, charset=charset, collation=collation
                )
            if not self.flavor.rules.joins_multibyte_text and multibyte:
                raise _mismatch(a, b, f"VARCHAR({length}) does not exist for {charset}")
        needed = max(_capacity(a, TEXT_CAPACITY), _capacity(b, TEXT_CAPACITY))
        return ColumnType(
            Family.STRING, _smallest(TEXT_CAPACITY, needed), charset=charset, collation=collation
        )


def _capacity(t: ColumnType, capacities: dict[str, int]) -> int:
    if t.name in capacities:
        return capacities[t.name]
    per_char = COST_PER_CHARACTER if t.family == Family.STRING else 1
    return (t.length or 1) * per_char


def _smallest(capacities: dict[str, int], needed: int) -> str:
    for name, cap in capacities.items():
        if needed <= cap:
            return name
    return next(reversed(capacities))


class BinaryTypes(Lattice[ColumnType]):
    """Binary strings compare bytes. BINARY(n) pads to n bytes with zeros, so
    BINARY(n) ≤ BINARY(m) only when n = m; BINARY(n) ≤ VARBINARY(m) for n ≤ m;
    VARBINARY(n) ≤ a BLOB type of at least n bytes; TINYBLOB < BLOB < MEDIUMBLOB <
    LONGBLOB. docs/design.md "Character types": CHAR(n) CHARACTER SET binary is BINARY(n) (normalised when
    parsed)."""

    def join(self, a: ColumnType, b: ColumnType) -> ColumnType:
        kind = max(_string_kind(a), _string_kind(b))
        length = max(a.length or 0, b.length or 0)
        if kind == _CHAR and a.length == b.length:
            return a
        if kind <= _VARCHAR and length <= MAX_VARCHAR_BYTES:
            return ColumnType(Family.BINARY, "varbinary", length=length)
        needed = max(_capacity(a, BLOB_CAPACITY), _capacity(b, BLOB_CAPACITY))
        return ColumnType(Family.BINARY, _smallest(BLOB_CAPACITY, needed))


class EnumSetTypes(Lattice[ColumnType]):
    """docs/design.md "Sets and enums": compatible only if members are appended to the end
    (stored values are member positions, which appending keeps)."""

    _MEMBERS = AppendOnly("members")

    def join(self, a: ColumnType, b: ColumnType) -> ColumnType:
        if a.name != b.name:
            raise _mismatch(a, b)
        members = self._MEMBERS.join(a.members, b.members)
        if a.family == Family.SET and len(members) > 64:
            raise _mismatch(a, b, "a SET holds at most 64 members")
        charset, collation = _CHARSETS.join((a.charset, a.collation), (b.charset, b.collation))
        return replace(a, members=members, charset=charset, collation=collation)


class SpatialTypes(Lattice[ColumnType]):
    """GEOMETRY holds every spatial value, so two different spatial types join there."""

    def join(self, a: ColumnType, b: ColumnType) -> ColumnType:
        return a if a.name == b.name else ColumnType(Family.SPATIAL, "geometry")


class ColumnTypes(Lattice[ColumnType]):
    def __init__(self, flavor: Flavor | str):
        self.flavor = flavor = Flavor.parse(flavor)
        temporal = TemporalTypes()
        self.families: dict[Family, Lattice[ColumnType]] = {
            Family.INTEGER: IntegerTypes(flavor),
            Family.DECIMAL: DecimalTypes(flavor),
            Family.FLOAT: FloatTypes(flavor),
            Family.BIT: BitTypes(),
            Family.STRING: StringTypes(flavor),
            Family.BINARY: BinaryTypes(),
            Family.ENUM: EnumSetTypes(),
            Family.SET: EnumSetTypes(),
            Family.TIME: temporal,
            Family.DATETIME: temporal,
            Family.TIMESTAMP: temporal,
            Family.SPATIAL: SpatialTypes(),
        }

    def join(self, a: ColumnType, b: ColumnType) -> ColumnType:
        if a == b:
            return a
        family = self.families.get(a.family) if a.family == b.family else None
        if family is None:
            # year, date, json and opaque types join only with themselves
            raise _mismatch(a, b)
        try:
            return family.join(a, b)
        except Conflict as exc:
            if exc.reason.startswith("cannot join"):
                raise
            raise _mismatch(a, b, exc.reason) from None
