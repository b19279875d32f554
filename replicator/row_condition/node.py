"""What a compiled condition is made of: a Node, a function of a row with the collation of
the value it gives, and the collation an operation over several of them gets; and the error
a condition that cannot be evaluated raises."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from replicator.row_values import Value

Row = Mapping[str, Value]  # column name, lowercased -> value
Evaluate = Callable[[Row], Value]

# how strongly a value's collation holds (the server's derivation): a column's over a literal's
COLUMN, LITERAL, NUMERIC = 2, 4, 5


class ConditionError(ValueError):
    """A condition that cannot be evaluated; the message says what and how to fix it."""


@dataclass(frozen=True)
class Node:
    fn: Evaluate
    strength: int = NUMERIC  # the collation's derivation, for strings
    ci: bool = True  # case-insensitive (a _ci collation); False: _bin, _cs or binary
    charset: str = "utf8mb4"


def aggregate(*nodes: Node) -> tuple[int, bool]:
    """The collation the server gives an operation over these values: the strongest
    derivation's; between equals, a _bin one's (the binary collation of a charset wins).
    As (derivation, case-insensitive)."""
    strength = min(n.strength for n in nodes)
    return strength, all(n.ci for n in nodes if n.strength == strength)


def collation(*nodes: Node) -> bool:
    """Whether comparing these values ignores case."""
    return aggregate(*nodes)[1]
