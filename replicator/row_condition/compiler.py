"""Sqlglot's tree of a condition into closures, each kind of node by the module of its kind:
values and columns (`leaves`), AND, OR, NOT, IS (`logic`), comparisons, IN, BETWEEN, LIKE
(`comparisons`), arithmetic (`arithmetic`), functions, IF and CASE (`functions`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sqlglot import exp

from replicator.row_condition import arithmetic, comparisons, functions, leaves, logic
from replicator.row_condition.checks import function_name
from replicator.row_condition.node import ConditionError, Node

SUPPORTED = (
    "comparisons (= <=> != <> < <= > >=), AND, OR, NOT, XOR, IS [NOT] NULL|TRUE|FALSE, "
    "IN, BETWEEN, LIKE, + - * / DIV MOD, CONCAT, LOWER, UPPER, LENGTH, CHAR_LENGTH, "
    "SUBSTRING, TRIM, COALESCE, IFNULL, IF, CASE"
)
_HANDLERS = {
    **leaves.HANDLERS,
    **logic.HANDLERS,
    **comparisons.HANDLERS,
    **arithmetic.HANDLERS,
    **functions.HANDLERS,
}


@dataclass(frozen=True)
class Compiler:
    """Sqlglot's tree into closures; `columns` None checks what the tree uses only."""

    columns: Mapping[str, object] | None

    def compile(self, node: exp.Expression) -> Node:
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise ConditionError(
                f"{_describe(node)} is not supported in a row filter; supported: {SUPPORTED}"
            )
        return handler(self, node)

    def all(self, nodes: Iterable[exp.Expression]) -> list[Node]:
        return [self.compile(n) for n in nodes]


def _describe(node: exp.Expression) -> str:
    name = function_name(node)
    if name:
        return f"function {name}()"
    return f"{node.sql(dialect='mysql')!r}"
