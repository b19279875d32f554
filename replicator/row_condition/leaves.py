"""The leaves of a condition: a row's column (with its column's collation), literals, NULL,
TRUE and FALSE; and parentheses, which change nothing."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from sqlglot import exp

from lattice import Family
from replicator.row_condition.node import COLUMN, LITERAL, Node

if TYPE_CHECKING:
    from replicator.row_condition.compiler import Compiler


def column(c: Compiler, node: exp.Column) -> Node:
    name = node.name.lower()
    if c.columns is None:
        return Node(lambda row: None)
    t = c.columns[name].type
    if t.family == Family.BINARY or t.charset == "binary":
        return Node(lambda row: row.get(name), COLUMN, False, "binary")
    if t.family in (Family.STRING, Family.ENUM, Family.SET, Family.JSON):
        collation = (t.collation or "").lower()
        ci = not collation.endswith(("_bin", "_cs"))
        return Node(lambda row: row.get(name), COLUMN, ci, t.charset or "utf8mb4")
    return Node(lambda row: row.get(name))


def literal(c: Compiler, node: exp.Literal) -> Node:
    if node.is_string:
        text = node.this
        return Node(lambda row: text, LITERAL)
    value = number(node.this)
    return Node(lambda row: value)


def null(c: Compiler, node: exp.Null) -> Node:
    return Node(lambda row: None)


def boolean(c: Compiler, node: exp.Boolean) -> Node:
    value = int(bool(node.this))
    return Node(lambda row: value)


def hex_string(c: Compiler, node: exp.HexString) -> Node:
    raw = bytes.fromhex(node.this if len(node.this) % 2 == 0 else "0" + node.this)
    return Node(lambda row: raw, LITERAL, False, "binary")


def paren(c: Compiler, node: exp.Paren) -> Node:
    return c.compile(node.this)


def number(text: str) -> int | Decimal | float:
    if "e" in text.lower():
        return float(text)
    return Decimal(text) if "." in text else int(text)


HANDLERS = {
    exp.Column: column,
    exp.Literal: literal,
    exp.Null: null,
    exp.Boolean: boolean,
    exp.HexString: hex_string,
    exp.Paren: paren,
}
