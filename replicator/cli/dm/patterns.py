"""DM's name patterns in our spelling.

DM writes wildcards (`test_*`, `t?`, `table[1-2]`) as we write globs, and regular
expressions behind a `~` (`~^t[\\d]+`). Its regular expressions are searched (Go's
MatchString: `^t[\\d]+` matches `t1_old` too); ours match whole names. Our filters
take globs only, so a DM regex in a block-allow-list becomes globs where it can
(`^t[\\d]+` is `t[0-9]*`, `^(pt|gho)_t1$` is `pt_t1` and `gho_t1`), which covers the
regexes DM's docs and tests use; others are reported, not guessed."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

# Beyond this many globs for one regex (alternatives multiply), the regex is reported instead.
MAX_GLOBS = 16
_GLOB_SPECIAL = {"*": "[*]", "?": "[?]", "[": "[[]"}
_CLASS_ESCAPES = {"d": "0-9", "w": "A-Za-z0-9_"}


class NoGlob(ValueError):
    """A regex no list of globs matches exactly as it does."""


def glob(wildcard: str) -> str:
    """A DM wildcard as our glob: the same syntax, but a negated class is `[!...]`."""
    return wildcard.replace("[^", "[!")


def is_regex(pattern: str) -> bool:
    return pattern.startswith("~")


def globs(pattern: str) -> tuple[str, ...]:
    """A DM name pattern (wildcard, or `~regex`) as the globs matching the same names;
    NoGlob when there are none."""
    return regex_globs(pattern[1:]) if is_regex(pattern) else (glob(pattern),)


def whole_name_regex(regex: str) -> str:
    """A searched regex as one that matches whole names (ours), the same names with the same
    groups: anchors become the edges of the name, an unanchored side may have anything."""
    body, start, end = regex, False, False
    if body.startswith("^"):
        body, start = body[1:], True
    if _ends_anchored(body):
        body, end = body[:-1], True
    if not start and not end and body in ("", ".*"):
        return ".*"
    if "|" in body and not (start and end):
        body = f"(?:{body})"
    # lazy: the first place the regex matches, as a search finds it
    return ("" if start else ".*?") + body + ("" if end else ".*")


def _ends_anchored(body: str) -> bool:
    if not body.endswith("$"):
        return False
    backslashes = len(body[:-1]) - len(body[:-1].rstrip("\\"))
    return backslashes % 2 == 0


# -- a searched regex as globs -----------------------------------------------------------------


@dataclass(frozen=True)
class _Piece:
    """One atom of a regex: its glob text, or alternatives (a group), and its quantifier."""

    text: str = ""
    options: tuple[tuple[_Piece, ...], ...] = ()
    quantifier: str = ""
    any_char: bool = False


def regex_globs(regex: str) -> tuple[str, ...]:
    """The globs matching the names `regex` (searched, as DM does) matches; NoGlob when no
    list of globs does."""
    body, start, end = regex, False, False
    if body.startswith("^"):
        body, start = body[1:], True
    if _ends_anchored(body):
        body, end = body[:-1], True
    parser = _Parser(body)
    alternatives = parser.alternatives()
    if parser.pos != len(body):
        raise NoGlob(f"unbalanced ')' in {regex!r}")
    found: list[str] = []
    for sequence in alternatives:
        for text in _sequence_globs(sequence, end):
            pattern = ("" if start else "*") + text + ("" if end else "*")
            found.append(re.sub(r"\*+", "*", pattern))
    unique = tuple(dict.fromkeys(found))
    if len(unique) > MAX_GLOBS:
        raise NoGlob(f"{regex!r} needs more than {MAX_GLOBS} globs")
    return unique


def _sequence_globs(pieces: tuple[_Piece, ...], end_anchored: bool) -> list[str]:
    pieces = _drop_open_tail(pieces, end_anchored)
    texts = [""]
    for piece in pieces:
        texts = [t + option for t in texts for option in _piece_globs(piece)]
        if len(texts) > MAX_GLOBS:
            raise NoGlob(f"more than {MAX_GLOBS} globs")
    return texts


def _drop_open_tail(pieces: tuple[_Piece, ...], end_anchored: bool) -> tuple[_Piece, ...]:
    """A searched regex not anchored at the end may stop anywhere: `t[0-9]+` matches what
    `t[0-9]` does, and a trailing `x*` matches what nothing does."""
    if end_anchored:
        return pieces
    pieces = list(pieces)
    while pieces and pieces[-1].quantifier in ("*", "+", "?") and not pieces[-1].any_char:
        last = pieces.pop()
        if last.quantifier == "+":
            pieces.append(_Piece(last.text, last.options))
            break
    return tuple(pieces)


def _piece_globs(piece: _Piece) -> list[str]:
    if piece.options:
        once = [text for option in piece.options for text in _sequence_globs(option, True)]
    else:
        once = [piece.text]
    if piece.quantifier == "":
        return once
    if piece.quantifier == "?":
        return ["", *once]
    if piece.any_char:  # .* and .+
        return ["*"] if piece.quantifier == "*" else ["?*"]
    raise NoGlob(f"a repeated {piece.text or 'group'!r} inside the pattern")


class _Parser:
    """The regex subset DM's docs and tests use: literals, escapes, `.`, classes, groups
    with `|`, and the quantifiers `*`, `+`, `?`."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def alternatives(self) -> tuple[tuple[_Piece, ...], ...]:
        options = [self.sequence()]
        while self._peek() == "|":
            self.pos += 1
            options.append(self.sequence())
        return tuple(options)

    def sequence(self) -> tuple[_Piece, ...]:
        pieces: list[_Piece] = []
        while self.pos < len(self.text) and self._peek() not in "|)":
            atom = self.atom()
            quantifier = self._peek() if self._peek() in ("*", "+", "?") else ""
            if quantifier:
                self.pos += 1
                if self._peek() in ("?", "+"):  # lazy or possessive: the same names
                    self.pos += 1
            if self._peek() == "{":
                raise NoGlob("a counted repetition {m,n}")
            pieces.append(_Piece(atom.text, atom.options, quantifier, atom.any_char))
        return tuple(pieces)

    def atom(self) -> _Piece:
        char = self.text[self.pos]
        self.pos += 1
        if char == ".":
            return _Piece("?", any_char=True)
        if char == "[":
            return _Piece(self._char_class())
        if char == "(":
            if self.text.startswith("?:", self.pos):
                self.pos += 2
            elif self._peek() == "?":
                raise NoGlob("a lookaround or named group")
            options = self.alternatives()
            if self._peek() != ")":
                raise NoGlob("an unclosed group")
            self.pos += 1
            return _Piece(options=options)
        if char == "\\":
            return _Piece(self._escape())
        if char in "^${":
            raise NoGlob(f"{char!r} inside the pattern")
        return _Piece(_GLOB_SPECIAL.get(char, char))

    def _escape(self) -> str:
        if self.pos >= len(self.text):
            raise NoGlob("a trailing backslash")
        char = self.text[self.pos]
        self.pos += 1
        if char in _CLASS_ESCAPES:
            return f"[{_CLASS_ESCAPES[char]}]"
        if char.isalnum():
            raise NoGlob(f"the escape \\{char}")
        return _GLOB_SPECIAL.get(char, char)

    def _char_class(self) -> str:
        parts = ["["]
        if self._peek() == "^":
            parts.append("!")
            self.pos += 1
        first = True
        while self.pos < len(self.text):
            char = self.text[self.pos]
            self.pos += 1
            if char == "]" and not first:
                parts.append("]")
                return "".join(parts)
            if char == "\\":
                escaped = self.text[self.pos : self.pos + 1]
                self.pos += 1
                if escaped in _CLASS_ESCAPES:
                    parts.append(_CLASS_ESCAPES[escaped])
                elif escaped and not escaped.isalnum():
                    parts.append(escaped)
                else:
                    raise NoGlob(f"the escape \\{escaped} in a class")
            else:
                parts.append(char)
            first = False
        raise NoGlob("an unclosed '['")

    def _peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""


def literal(pattern: str) -> bool:
    """Whether a DM pattern names one name (no wildcard, not a regex)."""
    return not is_regex(pattern) and not any(c in pattern for c in "*?[")


def product(left: tuple[str, ...], right: tuple[str, ...]) -> tuple[str, ...]:
    """`schema.table` globs of each schema glob with each table glob."""
    return tuple(f"{s}.{t}" for s, t in itertools.product(left, right))
