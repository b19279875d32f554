"""+ - * / DIV MOD and unary minus, as the server computes them (replicator/row_values.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlglot import exp

from replicator import row_values as rv
from replicator.row_condition.leaves import number
from replicator.row_condition.node import Node
from replicator.row_values import Value

if TYPE_CHECKING:
    from replicator.row_condition.compiler import Compiler


def _arith(op: Callable[[Value, Value], Value]) -> Callable[[Compiler, exp.Binary], Node]:
    """The operation `op` of the two operands' values."""

    def compile_arith(c: Compiler, node: exp.Binary) -> Node:
        a, b = c.all((node.this, node.expression))
        return Node(lambda row: op(a.fn(row), b.fn(row)))

    return compile_arith


def neg(c: Compiler, node: exp.Neg) -> Node:
    inner = node.this
    if isinstance(inner, exp.Literal) and not inner.is_string:
        value = -number(inner.this)
        return Node(lambda row: value)
    a = c.compile(inner)
    return Node(lambda row: rv.negate(a.fn(row)))


HANDLERS = {
    exp.Add: _arith(rv.add),
    exp.Sub: _arith(rv.subtract),
    exp.Mul: _arith(rv.multiply),
    exp.Div: _arith(rv.divide),
    exp.IntDiv: _arith(rv.int_divide),
    exp.Mod: _arith(rv.modulo),
    exp.Neg: neg,
}
