"""AND, OR, XOR, NOT and IS [NOT] NULL|TRUE|FALSE, with SQL's three-valued logic."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from replicator import row_values as rv
from replicator.row_condition.node import ConditionError, Node, Row
from replicator.row_values import Value

if TYPE_CHECKING:
    from replicator.row_condition.compiler import Compiler


def and_(c: Compiler, node: exp.And) -> Node:
    a, b = c.all((node.this, node.expression))

    def fn(row: Row) -> Value:
        x = rv.truth(a.fn(row))
        if x == 0:
            return 0
        y = rv.truth(b.fn(row))
        return 0 if y == 0 else None if x is None or y is None else 1

    return Node(fn)


def or_(c: Compiler, node: exp.Or) -> Node:
    a, b = c.all((node.this, node.expression))

    def fn(row: Row) -> Value:
        x = rv.truth(a.fn(row))
        if x == 1:
            return 1
        y = rv.truth(b.fn(row))
        return 1 if y == 1 else None if x is None or y is None else 0

    return Node(fn)


def xor(c: Compiler, node: exp.Xor) -> Node:
    a, b = c.all((node.this, node.expression))

    def fn(row: Row) -> Value:
        x, y = rv.truth(a.fn(row)), rv.truth(b.fn(row))
        return None if x is None or y is None else x ^ y

    return Node(fn)


def not_(c: Compiler, node: exp.Not) -> Node:
    a = c.compile(node.this)

    def fn(row: Row) -> Value:
        x = rv.truth(a.fn(row))
        return None if x is None else 1 - x

    return Node(fn)


def is_(c: Compiler, node: exp.Is) -> Node:
    a = c.compile(node.this)
    other = node.expression
    if isinstance(other, exp.Null):
        return Node(lambda row: int(a.fn(row) is None))
    if isinstance(other, exp.Boolean):
        wanted = int(bool(other.this))
        return Node(lambda row: int(rv.truth(a.fn(row)) == wanted))
    raise ConditionError(f"IS {other.sql(dialect='mysql')} is not supported; use IS NULL, TRUE or FALSE")


HANDLERS = {exp.And: and_, exp.Or: or_, exp.Xor: xor, exp.Not: not_, exp.Is: is_}
