"""Comparisons (= <=> != <> < <= > >=), IN, BETWEEN and LIKE [ESCAPE], in the collation the
server gives their operands."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlglot import exp

from replicator import row_values as rv
from replicator.row_condition.node import ConditionError, Node, Row, collation
from replicator.row_values import Value

if TYPE_CHECKING:
    from replicator.row_condition.compiler import Compiler


def _comparison(test: Callable[[int], bool]) -> Callable[[Compiler, exp.Binary], Node]:
    """The comparison whose answer is `test` of the operands' order."""

    def compile_comparison(c: Compiler, node: exp.Binary) -> Node:
        a, b = c.all((node.this, node.expression))
        ci = collation(a, b)

        def fn(row: Row) -> Value:
            order = rv.compare(a.fn(row), b.fn(row), ci)
            return None if order is None else int(test(order))

        return Node(fn)

    return compile_comparison


def null_safe_eq(c: Compiler, node: exp.NullSafeEQ) -> Node:
    a, b = c.all((node.this, node.expression))
    ci = collation(a, b)

    def fn(row: Row) -> Value:
        x, y = a.fn(row), b.fn(row)
        if x is None or y is None:
            return int(x is None and y is None)
        return int(rv.compare(x, y, ci) == 0)

    return Node(fn)


def in_(c: Compiler, node: exp.In) -> Node:
    if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
        raise ConditionError("IN takes a list of values here, not a subquery")
    a = c.compile(node.this)
    items = c.all(node.expressions)
    ci = collation(a, *items)  # (one collation for the whole list, as the server's)

    def fn(row: Row) -> Value:
        x = a.fn(row)
        if x is None:
            return None
        unknown = False
        for item in items:
            order = rv.compare(x, item.fn(row), ci)
            if order == 0:
                return 1
            unknown = unknown or order is None
        return None if unknown else 0

    return Node(fn)


def between(c: Compiler, node: exp.Between) -> Node:
    a, low, high = c.all((node.this, node.args["low"], node.args["high"]))
    ci = collation(a, low, high)

    def fn(row: Row) -> Value:
        x = a.fn(row)
        above, below = rv.compare(x, low.fn(row), ci), rv.compare(x, high.fn(row), ci)
        if (above is not None and above < 0) or (below is not None and below > 0):
            return 0
        return None if above is None or below is None else 1

    return Node(fn)


def like(c: Compiler, node: exp.Like, escape: str = "\\") -> Node:
    a, b = c.all((node.this, node.expression))
    ci = collation(a, b)
    negate = bool(node.args.get("negate"))

    def fn(row: Row) -> Value:
        found = rv.like(a.fn(row), b.fn(row), escape, ci)
        return None if found is None else (1 - found if negate else found)

    return Node(fn)


def escape(c: Compiler, node: exp.Escape) -> Node:
    char = node.expression
    if not isinstance(node.this, exp.Like) or not (isinstance(char, exp.Literal) and char.is_string):
        raise ConditionError("ESCAPE takes a one-character string after LIKE")
    if len(char.this) != 1:
        raise ConditionError(f"ESCAPE {char.sql(dialect='mysql')}: one character is wanted")
    return like(c, node.this, char.this)


HANDLERS = {
    exp.EQ: _comparison(lambda o: o == 0),
    exp.NEQ: _comparison(lambda o: o != 0),
    exp.LT: _comparison(lambda o: o < 0),
    exp.LTE: _comparison(lambda o: o <= 0),
    exp.GT: _comparison(lambda o: o > 0),
    exp.GTE: _comparison(lambda o: o >= 0),
    exp.NullSafeEQ: null_safe_eq,
    exp.In: in_,
    exp.Between: between,
    exp.Like: like,
    exp.Escape: escape,
}
