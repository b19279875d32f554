"""Default values: reading a literal from the token stream, and turning it into the
canonical `Default` for a column type, so `DEFAULT '5'`, `DEFAULT 5` and MariaDB's
`DEFAULT 5` from SHOW CREATE TABLE compare equal."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from sqlglot.tokens import TokenType

from lattice.charsets import collation_suffix, mbmaxlen
from lattice.flavor import Flavor
from lattice.model import (
    INTEGER_BITS,
    NULL_DEFAULT,
    TEXT_CAPACITY,
    ColumnType,
    Default,
    Family,
    integer_range,
)
from lattice.sqlgroups import group, group_end
from lattice.sqltext import (
    QUOTED_IDENTIFIER,
    Cursor,
    DDLSyntaxError,
    canonical_expression,
    quote_identifier,
    quote_string,
    unquote,
)

_NOW_WORDS = {"CURRENT_TIMESTAMP", "NOW", "LOCALTIME", "LOCALTIMESTAMP"}


@dataclass(frozen=True)
class RawValue:
    """A literal as written, before the column type gives it meaning.
    kind: null | string | number | hex | bit | now | expr."""

    kind: str
    value: object = None


def read_value(cur: Cursor) -> RawValue:
    """Read a DEFAULT / ON UPDATE operand at the cursor."""
    sign = ""
    if cur.is_type(TokenType.DASH) or cur.is_type(TokenType.PLUS):
        sign = "-" if cur.next().token_type == TokenType.DASH else ""
    tok = cur.peek()
    if tok is None:
        raise cur.error("expected a value")
    tt = tok.token_type
    if tt == TokenType.NUMBER:
        cur.next()
        return RawValue("number", sign + tok.text)
    if sign:
        raise cur.error("expected a number after the sign")
    if tt in (TokenType.STRING, TokenType.NATIONAL_STRING):
        return RawValue("string", cur.string())
    if tt == TokenType.HEX_STRING:
        cur.next()
        return RawValue("hex", bytes.fromhex(tok.text if len(tok.text) % 2 == 0 else "0" + tok.text))
    if tt == TokenType.BIT_STRING:
        cur.next()
        return RawValue("bit", int(tok.text or "0", 2))
    if tt == TokenType.L_PAREN:
        inner = group(cur)
        # The server reads `DEFAULT ('x')`, `DEFAULT (-1)` and `DEFAULT (NOW())` as the
        # literal or CURRENT_TIMESTAMP without parentheses; only a real expression stays one.
        start = inner.pos
        try:
            value = read_value(inner)
        except DDLSyntaxError:
            value = None
        if value is not None and value.kind != "expr" and inner.at_end:
            return value
        inner.pos = start
        return RawValue("expr", canonical_expression(inner.text()).sql)
    word = cur.word()
    if word == "NULL":
        cur.next()
        return RawValue("null")
    if word in ("TRUE", "FALSE"):
        cur.next()
        return RawValue("number", "1" if word == "TRUE" else "0")
    if (
        word is not None
        and word.startswith("_")
        and cur.peek(1) is not None
        and cur.peek(1).token_type
        in (
            TokenType.STRING,
            TokenType.NATIONAL_STRING,
        )
    ):
        cur.next()  # a character set introducer such as _utf8mb4'x'
        return RawValue("string", cur.string())
    if word in _NOW_WORDS or word in ("CURRENT_DATE", "CURDATE", "CURRENT_TIME", "CURTIME", "UTC_TIMESTAMP"):
        cur.next()
        fsp = None  # not written: the column's own precision
        if cur.is_type(TokenType.L_PAREN):
            inner = group(cur)
            if not inner.at_end:
                fsp = inner.integer("fractional seconds precision")
        if word in _NOW_WORDS:
            return RawValue("now", fsp)
        return RawValue("expr", canonical_expression(f"{word}()").sql)
    if word is not None and cur.is_type(TokenType.L_PAREN, ahead=1):
        start = cur.pos
        cur.next()
        cur.pos = group_end(cur)
        return RawValue("expr", canonical_expression(cur.text(start, cur.pos)).sql)
    if tt in (TokenType.VAR, QUOTED_IDENTIFIER):
        # another column's value, as MariaDB writes it back too: `DEFAULT `d1``
        return RawValue("expr", canonical_expression(quote_identifier(cur.identifier())).sql)
    raise cur.error("expected a value")


NOW_FAMILIES = (Family.DATETIME, Family.TIMESTAMP)  # (CURRENT_TIMESTAMP's own)


def is_now(default: Default) -> bool:
    return default.is_expression and default.sql.startswith("current_timestamp")


def now_sql(fsp: int) -> str:
    return f"current_timestamp({fsp})" if fsp else "current_timestamp()"


def now_fsp(written: int | None, column_fsp: int | None) -> int:
    """The precision of CURRENT_TIMESTAMP as a column's default or ON UPDATE: the
    column's own when none is written, and never more than it (MariaDB clips it;
    MySQL accepts only the column's)."""
    column_fsp = column_fsp or 0
    return column_fsp if written is None else min(written, column_fsp)


class DefaultError(ValueError):
    pass


def canonical_default(raw: RawValue, ctype: ColumnType, now_any_type: bool = False) -> Default:
    """The canonical default of a column of type `ctype` written as `raw`; `now_any_type`:
    CURRENT_TIMESTAMP is one of a column of any type (`Rules.now_default_any_type`)."""
    if raw.kind == "null":
        return NULL_DEFAULT
    if raw.kind == "now":
        written = None if raw.value is None else int(str(raw.value))
        if ctype.family in NOW_FAMILIES:
            return Default(now_sql(now_fsp(written, ctype.fsp)), is_expression=True)
        if not now_any_type:
            raise DefaultError("CURRENT_TIMESTAMP is only a default for DATETIME and TIMESTAMP")
        # (no precision of the column's to take or to clip to: MariaDB keeps the one written)
        return Default(now_sql(written or 0), is_expression=True)
    if raw.kind == "expr":
        return Default(str(raw.value), is_expression=True)
    family = ctype.family
    try:
        if family == Family.INTEGER:
            return Default(str(_as_integer(raw)))
        if family == Family.YEAR:
            return Default(str(_year(raw)))
        if family == Family.DECIMAL:
            return Default(_decimal_text(_as_decimal(raw), ctype.scale or 0))
        if family == Family.FLOAT:
            value = _as_decimal(raw)
            if ctype.scale is not None:  # FLOAT(M,D) stores D decimals
                value = value.quantize(Decimal(1).scaleb(-ctype.scale), rounding=ROUND_HALF_UP)
            return Default(repr(float(value)))
        if family == Family.BIT:
            value = raw.value if raw.kind == "bit" else _as_integer(raw)
            return Default(f"b'{int(value):b}'")
        if family in (Family.BINARY,):
            data = _as_bytes(raw)
            if ctype.name == "binary" and ctype.length:
                data = data.ljust(ctype.length, b"\0")  # BINARY(n) pads with zero bytes
            return Default(_bytes_literal(data))
        if family == Family.ENUM:
            return Default(quote_string(_enum_member(raw, ctype)))
        if family == Family.SET:
            return Default(quote_string(_set_value(raw, ctype)))
        if family in (Family.DATE, Family.DATETIME, Family.TIMESTAMP, Family.TIME):
            return Default(quote_string(_temporal_text(_as_text(raw), family, ctype.fsp or 0)))
        text = _as_text(raw)
        if ctype.name == "char":
            text = text.rstrip(" ")  # CHAR never returns trailing spaces
        return Default(quote_string(text))
    except InvalidOperation as exc:  # its message is a list of exception classes
        raise DefaultError(f"invalid default value for {ctype.name}: {raw.value!r} is not a number") from exc
    except ValueError as exc:
        raise DefaultError(f"invalid default value for {ctype.name}: {exc}") from exc


def recast_default(default: Default | None, ctype: ColumnType, flavor: Flavor | str) -> Default | None:
    """A column's default as a column of type `ctype` holds it on a server of `flavor`:
    `7` of a SMALLINT is `'7'` of a VARCHAR (a column that took a type holding the values
    of two, see lattice.join `holding`); None where it is no value of that type (a
    DATETIME's CURRENT_TIMESTAMP, of a VARCHAR, but on MariaDB: `Rules.now_default_any_type`)."""
    if default is None or default.is_null:
        return default
    if default.is_expression:
        now_any_type = Flavor.parse(flavor).rules.now_default_any_type
        if is_now(default) and ctype.family not in NOW_FAMILIES and not now_any_type:
            return None
        return default
    try:
        return canonical_default(read_value(Cursor(default.sql)), ctype)
    except (DefaultError, DDLSyntaxError):
        return None


def _as_text(raw: RawValue) -> str:
    if raw.kind == "string":
        return str(raw.value)
    if raw.kind == "number":
        return str(raw.value)
    if raw.kind == "hex":
        return bytes(raw.value).decode("utf-8", errors="replace")
    if raw.kind == "bit":
        value = int(raw.value)
        return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big").decode("latin1")
    raise ValueError(f"{raw.kind} is not text")


def _as_bytes(raw: RawValue) -> bytes:
    if raw.kind == "hex":
        return bytes(raw.value)
    if raw.kind == "bit":
        value = int(raw.value)
        return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")
    # SHOW CREATE TABLE writes a binary default's bytes raw inside the quotes; text read
    # with errors="surrogateescape" turns back into those bytes here.
    return _as_text(raw).encode("utf-8", errors="surrogateescape")


def _as_decimal(raw: RawValue) -> Decimal:
    if raw.kind in ("number", "string"):
        return Decimal(str(raw.value).strip())
    if raw.kind == "hex":
        return Decimal(int.from_bytes(bytes(raw.value), "big"))
    if raw.kind == "bit":
        return Decimal(int(raw.value))
    raise ValueError(f"{raw.kind} is not a number")


def _as_integer(raw: RawValue) -> int:
    return int(_as_decimal(raw).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _decimal_text(value: Decimal, scale: int) -> str:
    value = value.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "") else text


def _bytes_literal(value: bytes) -> str:
    if all(32 <= b < 127 for b in value):
        return quote_string(value.decode("ascii"))
    return "x'" + value.hex() + "'"


def _enum_member(raw: RawValue, ctype: ColumnType) -> str:
    if raw.kind == "number":
        index = int(str(raw.value))
        if not 1 <= index <= len(ctype.members):
            raise ValueError(f"no member number {index}")
        return ctype.members[index - 1]
    text = _as_text(raw).rstrip(" ")  # (compared as members are kept: without trailing spaces)
    for member in ctype.members:
        if member.lower() == text.lower():
            return member
    raise ValueError(f"{text!r} is not a member")


def _set_value(raw: RawValue, ctype: ColumnType) -> str:
    if raw.kind == "number":
        mask = int(str(raw.value))
        return ",".join(m for i, m in enumerate(ctype.members) if mask & (1 << i))
    wanted = {p.rstrip(" ").lower() for p in _as_text(raw).split(",") if p}
    unknown = wanted - {m.lower() for m in ctype.members}
    if unknown:
        raise ValueError(f"{sorted(unknown)} not in the set")
    return ",".join(m for m in ctype.members if m.lower() in wanted)


def _year(raw: RawValue) -> int:
    """YEAR takes two-digit years: 70-99 are 1970-1999, 1-69 are 2001-2069; a string
    '0' or '00' is 2000, the number 0 is 0000."""
    value = _as_integer(raw)
    if raw.kind == "string" and 0 <= value < 70 and len(str(raw.value).strip()) <= 2:
        return 2000 + value
    if 1 <= value < 70:
        return 2000 + value
    if 70 <= value < 100:
        return 1900 + value
    return value


# MySQL's relaxed temporal literals: any punctuation between the parts, or none at all.
_DATE = re.compile(
    r"^(?P<y>\d{2}|\d{4})[^\w\s](?P<mo>\d{1,2})[^\w\s](?P<d>\d{1,2})"
    r"(?:(?:[ T]+)(?P<h>\d{1,2})[^\w\s](?P<mi>\d{1,2})[^\w\s](?P<s>\d{1,2})(?:\.(?P<frac>\d*))?)?$"
)
_DIGITS_DATE = re.compile(
    r"^(?P<y>\d{2}|\d{4})(?P<mo>\d{2})(?P<d>\d{2})(?:(?P<h>\d{2})(?P<mi>\d{2})(?P<s>\d{2})(?:\.(?P<frac>\d*))?)?$"
)
_TIME = re.compile(
    r"^(?P<sign>-)?(?:(?P<days>\d+)\s+)?(?P<h>\d+):(?P<mi>\d{1,2})(?::(?P<s>\d{1,2}))?(?:\.(?P<frac>\d*))?$"
)
_DIGITS_TIME = re.compile(r"^(?P<sign>-)?(?P<digits>\d+)(?:\.(?P<frac>\d*))?$")


def _fraction(frac: str | None, fsp: int) -> str:
    # The server keeps `fsp` digits, cutting the rest (MariaDB; MySQL rounds).
    frac = (frac or "")[:fsp].rstrip("0")
    return f".{frac}" if frac else ""


_ZERO_NUMBER = re.compile(r"0+(?:\.0*)?")


def _temporal_text(text: str, family: Family, fsp: int = 0) -> str:
    text = text.strip()
    if family == Family.TIME:
        return _time_text(text, fsp)
    if _ZERO_NUMBER.fullmatch(text):
        # the number 0 is the zero date (MariaDB shows DEFAULT 0 as '0000-00-00 00:00:00')
        return "0000-00-00" if family == Family.DATE else "0000-00-00 00:00:00" + _fraction(None, fsp)
    m = _DATE.match(text) or _DIGITS_DATE.match(text)
    if not m:
        return text
    y = int(m["y"])
    if len(m["y"]) == 2:
        y += 2000 if y < 70 else 1900
    date = f"{y:04d}-{int(m['mo']):02d}-{int(m['d']):02d}"
    if family == Family.DATE:
        return date
    h, mi, s = (int(m[k] or 0) for k in ("h", "mi", "s"))
    return f"{date} {h:02d}:{mi:02d}:{s:02d}" + _fraction(m["frac"], fsp)


def takes_literal(ctype: ColumnType, default: Default) -> bool:
    """Whether a column of `ctype` takes `default` (as `recast_default` gives it) in strict
    mode: a time's text must read as one (`recast_default` keeps 'd' for a DATETIME, which
    an UPDATE setting it refuses: live stories, L78)."""
    if default.is_null or default.is_expression or ctype.family not in _TEMPORAL:
        return True
    text = default.sql.strip("'").strip()
    if ctype.family == Family.TIME:
        return bool(_TIME.match(text) or _DIGITS_TIME.match(text))
    return bool(_ZERO_NUMBER.fullmatch(text) or _DATE.match(text) or _DIGITS_DATE.match(text))


_TEMPORAL = (Family.DATE, Family.DATETIME, Family.TIMESTAMP, Family.TIME)


def _time_text(text: str, fsp: int) -> str:
    m = _TIME.match(text)
    if m:
        h = int(m["h"]) + 24 * int(m["days"] or 0)
        mi, s = int(m["mi"]), int(m["s"] or 0)
    else:
        m = _DIGITS_TIME.match(text)  # a number: [H]HMMSS
        if not m:
            return text
        value = int(m["digits"])
        h, mi, s = value // 10000, value // 100 % 100, value % 100
    return f"{m['sign'] or ''}{h:02d}:{mi:02d}:{s:02d}" + _fraction(m["frac"], fsp)


def least_type(value: Default, ctype: ColumnType) -> ColumnType:
    """The least type of `ctype`'s kind that holds `value`, a value of `ctype`: what a row holding only
    that value needs of its column. An integer the least integer of the same sign; a DECIMAL the
    digits it has, UNSIGNED where the value is not negative (an UNSIGNED DECIMAL joins a signed
    one at the same digits, and an UNSIGNED integer keeps it: the 1 a DECIMAL(3,2) gave fits the
    MEDIUMINT UNSIGNED every shard makes it later, F180; an integer's sign is part of its range,
    so no least integer serves both signs: `holds_number`); a string the characters it has (a
    VARCHAR's value with no trailing space a CHAR, a TEXT the least TEXT taking them); a time
    the fraction digits it has; an ENUM or SET its members up to the last the value names (each
    keeps its index or bit: an ENUM's 'x' fits the shards' ENUM('x','y') after one of them
    dropped 'z', F179). Other types (BIT, FLOAT, binary) keep `ctype`: a bit pattern needs its
    type."""
    if value.is_null or value.is_expression:
        return ctype
    text = unquote(value.sql) if value.sql[:1] == "'" else value.sql
    family = ctype.family
    try:
        if family == Family.INTEGER:
            return replace(ctype, name=_least_integer(int(text), ctype))
        if family == Family.DECIMAL:
            return _least_decimal(Decimal(text), ctype)
    except (ValueError, InvalidOperation):
        return ctype
    if family == Family.STRING:
        ctype = _least_charset(text, ctype)
    if family == Family.STRING and ctype.name in ("char", "varchar"):
        if ctype.name == "varchar" and not text.endswith(" ") and len(text) <= 255:
            # a CHAR reads back every value with no trailing space (it strips only those),
            # and is the lesser of the two: the shards' CHAR holds a VARCHAR's '' (F175)
            return replace(ctype, name="char", length=len(text))
        return replace(ctype, length=len(text))
    if family == Family.STRING and ctype.name in TEXT_CAPACITY:
        need = len(text) * mbmaxlen(ctype.charset)
        least = next(n for n, size in TEXT_CAPACITY.items() if size >= need or n == ctype.name)
        return replace(ctype, name=least)
    if family in (Family.ENUM, Family.SET) and ctype.members:
        return _least_members(text, ctype)
    if family in (Family.TIME, Family.DATETIME, Family.TIMESTAMP) and ctype.fsp:
        _, point, fraction = text.rpartition(".")
        if not point:
            return replace(ctype, fsp=0)
        if fraction.isdigit():
            return replace(ctype, fsp=min(ctype.fsp, len(fraction.rstrip("0"))))
    return ctype


def holds_number(ctype: ColumnType, sql: str) -> bool:
    """Whether `ctype` holds the number `sql` (an INTEGER's or a DECIMAL's default as
    `canonical_default` writes it) as it is: no rounding, in range. False for a type of
    another family, or for what is no such number (a string's '7' converts by other rules)."""
    try:
        value = Decimal(sql)
    except InvalidOperation:
        return False
    if not value.is_finite():
        return False
    if ctype.family == Family.INTEGER:
        low, high = integer_range(ctype)
        return value == value.to_integral_value() and low <= value <= high
    if ctype.family == Family.DECIMAL and ctype.precision is not None:
        least = _least_decimal(value, ctype)
        scale = ctype.scale or 0
        fits_sign = not (ctype.unsigned and value < 0)
        return fits_sign and least.scale <= scale and least.precision - least.scale <= ctype.precision - scale
    return False


# the collations utf8mb3 has under the name utf8mb4 has them (no `_0900_` ones: MySQL 8's
# exist for utf8mb4 alone)
_UTF8MB3_SUFFIXES = frozenset(
    (
        "_general_ci", "_bin", "_unicode_ci", "_unicode_520_ci", "_general_nopad_ci", "_nopad_bin",
        "_unicode_nopad_ci", "_unicode_520_nopad_ci", "_general_mysql500_ci",
    )
)


def _least_charset(text: str, ctype: ColumnType) -> ColumnType:
    """A utf8mb4 string's value with no character beyond the Basic Multilingual Plane in
    utf8mb3, the lesser of the two, under the same collation there: a filler 'd' held so
    fits the shards' utf8mb3 column once every shard has one (F181)."""
    if ctype.charset != "utf8mb4" or not ctype.collation or any(ord(ch) > 0xFFFF for ch in text):
        return ctype
    suffix = collation_suffix(ctype.collation)
    if suffix not in _UTF8MB3_SUFFIXES:
        return ctype
    return replace(ctype, charset="utf8mb3", collation=f"utf8mb3{suffix}")


def _least_members(text: str, ctype: ColumnType) -> ColumnType:
    """The members of `ctype` up to the last one `text` names (a member, or a SET's members
    joined by commas, as `recast_default` spells them); `ctype` where it names another."""
    named = [text] if ctype.family == Family.ENUM else [m for m in text.split(",") if m]
    if any(m not in ctype.members for m in named):
        return ctype  # (an ENUM's '' of a wrong value: index 0, no member)
    last = max((ctype.members.index(m) for m in named), default=0)  # (a SET's '': its first)
    return replace(ctype, members=ctype.members[: last + 1])


def _least_integer(value: int, ctype: ColumnType) -> str:
    for name in INTEGER_BITS:
        low, high = integer_range(replace(ctype, name=name))
        if low <= value <= high:
            return name
    return ctype.name


def _least_decimal(value: Decimal, ctype: ColumnType) -> ColumnType:
    _, digits, exponent = value.normalize().as_tuple()
    assert isinstance(exponent, int)
    scale = max(0, -exponent)
    whole = max(0, len(digits) + exponent)
    unsigned = ctype.unsigned or not value.is_signed()
    return replace(ctype, precision=max(1, whole + scale), scale=scale, unsigned=unsigned)
