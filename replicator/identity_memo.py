"""Answers of a pure function of one or two arguments, remembered by their identity.

Where the arguments are immutable objects that a hot path hands over again and again as
the same objects (a table version's row shape, the group's propagated table), the
identity is a key as cheap as a key gets, while comparing the objects by value costs as
much as the answer. The arguments are kept with the answer, so their ids are not reused
while it stands; a few hundred answers at most are kept (the oldest are of objects long
gone). Threads may share a memo: each step is one dict operation.

This module imports nothing from `replicator`: everything may import it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

R = TypeVar("R")

_NONE: Any = object()  # (no second argument)


class IdentityMemo(Generic[R]):
    __slots__ = ("_fn", "_known", "_size")

    def __init__(self, fn: Callable[..., R], size: int = 256) -> None:
        self._fn = fn
        self._known: dict[tuple[int, int], tuple[Any, Any, R]] = {}
        self._size = size

    def __call__(self, a: Any, b: Any = _NONE) -> R:
        key = (id(a), id(b))
        known = self._known.get(key)
        if known is not None and known[0] is a and known[1] is b:
            return known[2]
        if len(self._known) >= self._size:
            self._known.clear()
        answer = self._fn(a) if b is _NONE else self._fn(a, b)
        self._known[key] = (a, b, answer)
        return answer
