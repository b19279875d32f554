"""Character set facts the model and the lattice need: bytes per character, the
default collation of each character set, and how collations are named."""

from __future__ import annotations

from dataclasses import dataclass

from lattice.flavor import Flavor

# Maximum bytes per character (MySQL's mbmaxlen).
MBMAXLEN: dict[str, int] = {
    "ascii": 1,
    "latin1": 1,
    "latin2": 1,
    "latin5": 1,
    "latin7": 1,
    "cp1250": 1,
    "cp1251": 1,
    "cp1256": 1,
    "cp1257": 1,
    "cp850": 1,
    "cp852": 1,
    "cp866": 1,
    "dec8": 1,
    "greek": 1,
    "hebrew": 1,
    "hp8": 1,
    "keybcs2": 1,
    "koi8r": 1,
    "koi8u": 1,
    "macce": 1,
    "macroman": 1,
    "swe7": 1,
    "tis620": 1,
    "armscii8": 1,
    "geostd8": 1,
    "binary": 1,
    "big5": 2,
    "cp932": 2,
    "euckr": 2,
    "gb2312": 2,
    "gbk": 2,
    "sjis": 2,
    "ucs2": 2,
    "eucjpms": 3,
    "ujis": 3,
    "utf8mb3": 3,
    "gb18030": 4,
    "utf16": 4,
    "utf16le": 4,
    "utf32": 4,
    "utf8mb4": 4,
}

# Default collations as MariaDB 10.x ships them; MySQL 8 differs only for utf8mb4.
_DEFAULT_COLLATION_OVERRIDES = {
    "latin1": "latin1_swedish_ci",
    "latin2": "latin2_general_ci",
    "latin5": "latin5_turkish_ci",
    "cp1250": "cp1250_general_ci",
    "binary": "binary",
    "ascii": "ascii_general_ci",
    "big5": "big5_chinese_ci",
    "gb2312": "gb2312_chinese_ci",
    "gbk": "gbk_chinese_ci",
    "gb18030": "gb18030_chinese_ci",
    "sjis": "sjis_japanese_ci",
    "cp932": "cp932_japanese_ci",
    "ujis": "ujis_japanese_ci",
    "eucjpms": "eucjpms_japanese_ci",
    "euckr": "euckr_korean_ci",
    "swe7": "swe7_swedish_ci",
    "tis620": "tis620_thai_ci",
}


def canonical_charset(name: str) -> str:
    """`utf8` means utf8mb3 on MySQL and MariaDB; spell it one way everywhere."""
    name = name.lower()
    return "utf8mb3" if name == "utf8" else name


def canonical_collation(name: str) -> str:
    name = name.lower()
    if name.startswith("utf8_"):
        return "utf8mb3_" + name[len("utf8_") :]
    return name


def charset_of_collation(collation: str) -> str:
    if collation == "binary":
        return "binary"
    return collation.split("_", 1)[0]


def default_collation(charset: str, upstream: Flavor | str = Flavor.MARIADB) -> str:
    if charset == "utf8mb4":
        return Flavor.parse(upstream).rules.utf8mb4_collation
    return _DEFAULT_COLLATION_OVERRIDES.get(charset, f"{charset}_general_ci")


def collation_suffix(collation: str) -> str:
    """The part of a collation after its character set: `_general_ci`, `_bin`..."""
    cs = charset_of_collation(collation)
    return collation[len(cs) :]


# Python's codec for the character sets whose characters we can check one by one.
_PYTHON_CODECS = {
    "ascii": "ascii",
    "latin1": "cp1252",
    "utf8mb3": "utf-8",
    "utf8mb4": "utf-8",
    "binary": "latin-1",
}


def python_codec(charset: str | None) -> str | None:
    """Python's codec for a character set's bytes (None: one we do not know)."""
    return _PYTHON_CODECS.get(charset or "")


def decoded_as_server(data: bytes, charset: str | None) -> str:
    """Bytes written for a string of this set (a hex literal) as the server keeps them: a
    byte not of the set is a '?'."""
    text = data.decode(python_codec(charset) or "utf-8", errors="replace")
    return text.replace("\ufffd", "?")


def mbmaxlen(charset: str | None) -> int:
    # An unknown character set is costed as the widest, so capacity checks stay safe.
    return MBMAXLEN.get(charset or "", 4)


@dataclass(frozen=True)
class Recoding:
    """Text of one character set in another that has all its characters: at most
    `per_character` bytes a character there, and `ratio` times its bytes before."""

    per_character: int
    ratio: int


_RECODINGS = {
    ("ascii", "latin1"): Recoding(1, 1),
    ("ascii", "utf8mb3"): Recoding(1, 1),
    ("ascii", "utf8mb4"): Recoding(1, 1),
    ("latin1", "utf8mb3"): Recoding(3, 3),  # '€' is 0x80 in latin1 (cp1252), 3 bytes in UTF-8
    ("latin1", "utf8mb4"): Recoding(3, 3),
    ("utf8mb3", "utf8mb4"): Recoding(3, 1),  # the same bytes
}


def recoding(before: str | None, after: str | None) -> Recoding | None:
    """How text of `before`'s set is held in `after`'s, or None if some character may not be."""
    if before is None or after is None:
        return None  # the server's default set: unknown here
    if before == after:
        return Recoding(mbmaxlen(after), 1)
    return _RECODINGS.get((before, after))
