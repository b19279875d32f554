"""A row filter's condition read from its text (`parse_condition`) and compiled over a table
(`Condition.compile`), and the values of a row of the stream's literals it reads."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp

from lattice import Table
from replicator import row_values as rv
from replicator.row_condition.checks import check_node
from replicator.row_condition.compiler import Compiler
from replicator.row_condition.node import ConditionError, Row
from replicator.row_values import Value


@dataclass(frozen=True)
class Condition:
    """A parsed condition; `text` as written, which the backfill's reads push down."""

    text: str
    tree: exp.Expression = field(compare=False, repr=False)
    columns: tuple[str, ...] = ()  # the columns it reads, lowercased

    def compile(self, table: Table) -> Callable[[Row], int | None]:
        """The condition over rows of `table`: 1, 0 or None (NULL). ConditionError
        names a column the table does not have."""
        columns = {c.name.lower(): c for c in table.columns}
        missing = [c for c in self.columns if c not in columns]
        if missing:
            have = ", ".join(c.name for c in table.columns)
            raise ConditionError(f"no column {missing[0]!r} in {table.name} (its columns: {have})")
        node = Compiler(columns).compile(self.tree)
        return lambda row: rv.truth(node.fn(row))


def parse_condition(text: str) -> Condition:
    """The condition `text`, or ConditionError saying why it cannot be evaluated."""
    if not isinstance(text, str) or not text.strip():
        raise ConditionError("expected a SQL condition such as \"status = 'deleted'\"")
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.CRITICAL)  # (it logs what it falls back on; we refuse it instead)
    try:
        trees = sqlglot.parse(text, read="mysql")
    except sqlglot.errors.SqlglotError as exc:
        raise ConditionError(f"not a SQL condition: {_parse_error(exc)}") from None
    finally:
        logger.setLevel(level)
    if len(trees) != 1 or trees[0] is None or isinstance(trees[0], exp.Block):
        raise ConditionError("expected one condition, not several statements")
    tree = trees[0]
    for node in tree.walk():
        check_node(node)
    columns = tuple(dict.fromkeys(c.name.lower() for c in tree.find_all(exp.Column)))
    # compiled once over no table: what it uses is checked now, its columns later
    Compiler(None).compile(tree)
    return Condition(text, tree, columns)


def _parse_error(exc: Exception) -> str:
    """Sqlglot's message without its class names: "Required keyword: 'expression' missing
    for EQ. Line 1, Col: 3." """
    first = str(exc).splitlines()[0]
    return re.sub(r"<class 'sqlglot\.[\w.]*?\.(\w+)'>", r"\1", first)


def row_of_literals(
    columns: tuple[str, ...], values: tuple[str, ...], wanted: tuple[str, ...]
) -> dict[str, Value]:
    """The columns a condition reads of a row of the stream's literals."""
    out: dict[str, Value] = {}
    for name, text in zip(columns, values, strict=True):
        key = name.lower()
        if key in wanted:
            out[key] = rv.from_literal(text)
    return out
