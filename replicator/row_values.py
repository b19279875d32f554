"""MariaDB's values as a row filter's condition sees them (replicator/row_condition/):
a row's SQL literals read back, and how the server converts, compares and computes
with them, so a condition decides in the stream as the server decides in a backfill's
WHERE. NULL is None; a truth value is 1, 0 or None (three-valued logic)."""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Context, Decimal, localcontext

Value = None | int | Decimal | float | str | bytes
Number = int | Decimal | float

DIV_PRECISION_INCREMENT = 4  # the server's default: digits a `/` adds to the dividend's scale
_EXACT = Context(prec=200)  # wide enough for DECIMAL(65,30) products without rounding
# the longest numeric prefix of a string, as the server reads "12abc" as 12 (and "abc" as 0)
_PREFIX = re.compile(r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)")
_UNESCAPE = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


# -- literals of the stream's rows (replicator/source/decode.py, rowcodec.py) -----------
def from_literal(text: str) -> Value:
    """The value of one of the stream's literals: NULL, a number, '...', x'...', or
    _charset x'...' (a string column's bytes in its character set)."""
    if text == "NULL":
        return None
    if text.startswith("_"):
        charset, _, rest = text.partition(" ")
        raw = bytes.fromhex(rest[2:-1])
        return raw.decode(_codec(charset[1:]), errors="replace")
    if text[:2] in ("x'", "X'"):
        return bytes.fromhex(text[2:-1])
    if text.startswith("'"):
        return _ESCAPE.sub(lambda m: _UNESCAPE.get(m.group(1), m.group(1)), text[1:-1].replace("''", "'"))
    if "e" in text or "E" in text or text in ("inf", "-inf", "nan"):
        return float(text)
    return Decimal(text) if "." in text else int(text)


def _codec(charset: str) -> str:
    name = charset.lower()
    if name.startswith("utf8"):
        return "utf-8"
    return {"latin1": "cp1252", "binary": "latin-1", "ascii": "ascii", "ucs2": "utf-16-be"}.get(name, "utf-8")


# -- conversions -------------------------------------------------------------------------
def to_number(value: Value) -> Number | None:
    """A value in a numeric context: a string is read as a double, from its longest
    numeric prefix (the server's conversion, with a warning we do not keep)."""
    if value is None or isinstance(value, int | Decimal | float):
        return value
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    match = _PREFIX.match(text)
    return float(match.group(1)) if match else 0.0


def to_text(value: Value) -> str | bytes | None:
    """A value in a string context."""
    if value is None or isinstance(value, str | bytes):
        return value
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, float):
        return _float_text(value)
    return str(value)


def _float_text(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    text = f"{value:.15g}"
    return text.replace("e+", "e") if "e" in text else text


def truth(value: Value) -> int | None:
    """A value as a condition: nonzero is true; a string is read as a number first."""
    number = to_number(value)
    return None if number is None else int(number != 0)


# -- comparison --------------------------------------------------------------------------
def compare(a: Value, b: Value, ci: bool) -> int | None:
    """-1, 0 or 1, or None with a NULL: two strings by their collation (`ci`: case-
    insensitive; trailing spaces ignored, as PAD SPACE collations do), binary strings
    byte by byte, two exact numbers exactly, anything else as doubles."""
    if a is None or b is None:
        return None
    if isinstance(a, str | bytes) and isinstance(b, str | bytes):
        if isinstance(a, bytes) or isinstance(b, bytes):
            x, y = _raw(a), _raw(b)
        else:
            x, y = collation_key(a, ci), collation_key(b, ci)
        return (x > y) - (x < y)
    x, y = to_number(a), to_number(b)
    if isinstance(x, float) or isinstance(y, float) or isinstance(a, str) or isinstance(b, str):
        x, y = float(x), float(y)
    return (x > y) - (x < y)


def _plain(number: Number) -> Number:
    """A DECIMAL zero without a sign, as the server's arithmetic leaves it (MOD aside: its
    -2 MOD -1.00 is -0.00, which the server then compares now as 0, now as below it; we
    take it as 0 throughout: docs/operations/filters.md "Row filters")."""
    return number.copy_abs() if isinstance(number, Decimal) and number.is_zero() else number


def collation_key(text: str, ci: bool) -> str:
    text = text.rstrip(" ")
    return text.upper() if ci else text


def _raw(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8")


# -- arithmetic --------------------------------------------------------------------------
def _operands(a: Value, b: Value) -> tuple[Number, Number] | None:
    if a is None or b is None:
        return None
    x, y = to_number(a), to_number(b)
    if isinstance(x, float) or isinstance(y, float):
        return float(x), float(y)
    if isinstance(x, Decimal) or isinstance(y, Decimal):
        return Decimal(x), Decimal(y)
    return x, y


def add(a: Value, b: Value) -> Number | None:
    pair = _operands(a, b)
    if pair is None:
        return None
    with localcontext(_EXACT):
        return _plain(pair[0] + pair[1])


def subtract(a: Value, b: Value) -> Number | None:
    pair = _operands(a, b)
    if pair is None:
        return None
    with localcontext(_EXACT):
        return _plain(pair[0] - pair[1])


def multiply(a: Value, b: Value) -> Number | None:
    pair = _operands(a, b)
    if pair is None:
        return None
    with localcontext(_EXACT):
        return _plain(pair[0] * pair[1])


def divide(a: Value, b: Value) -> Number | None:
    """`/`: exact operands give a DECIMAL with div_precision_increment more digits than
    the dividend has, rounded half up; by zero, NULL."""
    pair = _operands(a, b)
    if pair is None or pair[1] == 0:
        return None
    x, y = pair
    if isinstance(x, float):
        return x / y
    scale = max(0, -Decimal(x).as_tuple().exponent) + DIV_PRECISION_INCREMENT
    with localcontext(_EXACT):
        return _plain((Decimal(x) / Decimal(y)).quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP))


def int_divide(a: Value, b: Value) -> int | None:
    """DIV: the quotient truncated towards zero; by zero, NULL."""
    pair = _operands(a, b)
    if pair is None or pair[1] == 0:
        return None
    x, y = pair
    if isinstance(x, int):
        quotient = abs(x) // abs(y)
        return quotient if (x < 0) == (y < 0) else -quotient
    with localcontext(_EXACT):
        return int(Decimal(x) / Decimal(y)) if isinstance(x, Decimal) else int(x / y)


def modulo(a: Value, b: Value) -> Number | None:
    """MOD and %: the remainder has the dividend's sign; by zero, NULL."""
    pair = _operands(a, b)
    if pair is None or pair[1] == 0:
        return None
    x, y = pair
    if isinstance(x, float):
        return math.fmod(x, y)
    if isinstance(x, Decimal):
        with localcontext(_EXACT):
            return x % y  # (Decimal's remainder takes the dividend's sign, as the server's)
    remainder = abs(x) % abs(y)
    return remainder if x >= 0 else -remainder


def negate(a: Value) -> Number | None:
    x = to_number(a)
    return None if x is None else _plain(-x)


# -- strings -----------------------------------------------------------------------------
def like(value: Value, pattern: Value, escape: str, ci: bool) -> int | None:
    """LIKE: % any run, _ one character, `escape` takes the next literally; trailing
    spaces count (LIKE does not pad)."""
    text, wanted = to_text(value), to_text(pattern)
    if text is None or wanted is None:
        return None
    if isinstance(text, bytes) or isinstance(wanted, bytes):
        text, wanted, ci = _raw(text).decode("latin-1"), _raw(wanted).decode("latin-1"), False
    regex = _like_regex(wanted, escape)
    return int(re.fullmatch(regex, text, re.DOTALL | (re.IGNORECASE if ci else 0)) is not None)


def _like_regex(pattern: str, escape: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return "".join(out)


def concat(values: list[Value]) -> str | bytes | None:
    texts = [to_text(v) for v in values]
    if any(t is None for t in texts):
        return None
    if any(isinstance(t, bytes) for t in texts):
        return b"".join(_raw(t) for t in texts)
    return "".join(texts)


def substring(value: Value, start: Value, length: Value = 0, *, has_length: bool = False) -> Value:
    """SUBSTRING(s, pos[, len]): pos counts from 1, from the end when negative; 0 or
    beyond the end gives ''."""
    text = to_text(value)
    pos, count = to_number(start), to_number(length) if has_length else 0
    if text is None or pos is None or count is None:
        return None
    pos = _integer(pos)
    size = len(text)
    if pos == 0 or abs(pos) > size or (pos < 0 and -pos > size):
        return text[:0]
    begin = pos - 1 if pos > 0 else size + pos
    if not has_length:
        return text[begin:]
    count = _integer(count)
    return text[begin : begin + count] if count > 0 else text[:0]


def _integer(number: Number) -> int:
    """A number where the server wants an integer: rounded half away from zero."""
    if isinstance(number, int):
        return number
    return int(Decimal(str(number)).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def trim(value: Value, remove: Value, leading: bool, trailing: bool) -> Value:
    """TRIM: whole occurrences of `remove` (a space by default) off either end."""
    text, cut = to_text(value), to_text(remove)
    if text is None or cut is None:
        return None
    if isinstance(text, bytes) != isinstance(cut, bytes):
        text, cut = _raw(text), _raw(cut)
    if not cut:
        return text
    while leading and text.startswith(cut):
        text = text[len(cut) :]
    while trailing and text.endswith(cut):
        text = text[: -len(cut)]
    return text


def lower(value: Value) -> Value:
    text = to_text(value)
    return text.lower() if isinstance(text, str) else text  # (a binary string has no case)


def upper(value: Value) -> Value:
    text = to_text(value)
    return text.upper() if isinstance(text, str) else text


def octet_length(value: Value, charset: str) -> int | None:
    text = to_text(value)
    if text is None:
        return None
    return len(text) if isinstance(text, bytes) else len(text.encode(_codec(charset), errors="replace"))


def char_length(value: Value) -> int | None:
    text = to_text(value)
    return None if text is None else len(text)
