"""A statement's parenthesised groups and its parts between top-level commas, each as a
`Cursor` of its own over the same tokens: what the parser reads a column list, an index's
parts or an ALTER's specs with."""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot.tokens import TokenType

from lattice.sqltext import Cursor


def depths(cur: Cursor) -> Iterator[tuple[int, TokenType, int]]:
    """(index, token type, parenthesis depth after the token) for the rest."""
    depth = 0
    for i in range(cur.pos, cur.end):
        tt = cur.tokens[i].token_type
        if tt == TokenType.L_PAREN:
            depth += 1
        elif tt == TokenType.R_PAREN:
            depth -= 1
        yield i, tt, depth


def words_before_group(cur: Cursor, *words: str) -> int | None:
    """The index where these words follow one another before the first parenthesis
    from the cursor on, or None."""
    for i, token_type, depth in depths(cur):
        if token_type == TokenType.L_PAREN or depth:
            return None
        if all(cur.is_word(w, ahead=i - cur.pos + n) for n, w in enumerate(words)):
            return i
    return None


def group_end(cur: Cursor) -> int:
    """Index just past the parenthesised group that starts at the cursor."""
    if not cur.is_type(TokenType.L_PAREN):
        raise cur.error("expected (")
    for i, tt, depth in depths(cur):
        if tt == TokenType.R_PAREN and depth == 0:
            return i + 1
    raise cur.error("unbalanced parentheses")


def group(cur: Cursor) -> Cursor:
    """A cursor over the inside of the parenthesised group; consumes it."""
    end = group_end(cur)
    inner = Cursor(cur.sql, cur.tokens, cur.pos + 1, end - 1)
    cur.pos = end
    return inner


def split(cur: Cursor, separator: TokenType = TokenType.COMMA) -> list[Cursor]:
    """Split the rest at top-level separators (commas outside parentheses)."""
    parts: list[Cursor] = []
    start = cur.pos
    for i, tt, depth in depths(cur):
        if tt == separator and depth == 0:
            parts.append(Cursor(cur.sql, cur.tokens, start, i))
            start = i + 1
    parts.append(Cursor(cur.sql, cur.tokens, start, cur.end))
    cur.pos = cur.end
    return [p for p in parts if not p.at_end]
