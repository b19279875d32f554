"""Small join-semilattices that compose into the schema lattice (docs/design.md "The lattice of
compatibility").

Every piece has `join(a, b)` (the least upper bound, or `Conflict` when the two have
no upper bound short of "error") and `compare(a, b)` (-1, 0, +1 or INCOMPARABLE).
`a <= b` exactly when `join(a, b) == b`; each piece's tests check that, and that join
is commutative, associative and idempotent.

ABSENT is the value a keyed map hands its inner lattice for a key one side lacks;
each inner lattice decides where ABSENT sits (bottom for optional values, top for
constraints that may be dropped).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import fields, replace
from typing import Any, Final, Generic, Literal, TypeVar

T = TypeVar("T")

INCOMPARABLE: Final = "incomparable"
Ordering = Literal[-1, 0, 1, "incomparable"]


class _Absent:
    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()


class Conflict(Exception):
    """No upper bound exists. `path` names where, outermost first."""

    def __init__(self, reason: str, path: tuple[str, ...] = ()):
        super().__init__(reason)
        self.reason = reason
        self.path = path

    def at(self, *prefix: str) -> Conflict:
        return Conflict(self.reason, (*prefix, *self.path))

    def __str__(self) -> str:
        where = ".".join(self.path)
        return f"{where}: {self.reason}" if where else self.reason


def combine(orderings: Iterable[Ordering]) -> Ordering:
    """The order of a product from the orders of its components."""
    below = above = False
    for o in orderings:
        if o == INCOMPARABLE:
            return INCOMPARABLE
        if o < 0:
            below = True
        elif o > 0:
            above = True
        if below and above:
            return INCOMPARABLE
    return -1 if below else 1 if above else 0


class Lattice(Generic[T]):
    def join(self, a: T, b: T) -> T:
        raise NotImplementedError

    def compare(self, a: T, b: T) -> Ordering:
        """Default: read the order off the join, which keeps the two consistent."""
        if a == b:
            return 0
        try:
            j = self.join(a, b)
        except Conflict:
            return INCOMPARABLE
        if j == b:
            return -1
        if j == a:
            return 1
        return INCOMPARABLE

    def leq(self, a: T, b: T) -> bool:
        return self.compare(a, b) in (-1, 0)


class Boolean(Lattice[bool]):
    """Two values; `top` is the more compatible one (NULL allowed: top=True;
    AUTO_INCREMENT, ENFORCED: top=False)."""

    def __init__(self, top: bool = True):
        self.top = top

    def join(self, a: bool, b: bool) -> bool:
        return self.top if self.top in (a, b) else a

    def compare(self, a: bool, b: bool) -> Ordering:
        if a == b:
            return 0
        return -1 if b == self.top else 1


class Maximum(Lattice[T]):
    """A chain: the larger value (by `rank`) is more compatible."""

    def __init__(self, rank: Callable[[T], Any] | None = None):
        self.rank = rank or (lambda v: v)

    def join(self, a: T, b: T) -> T:
        return a if self.rank(a) >= self.rank(b) else b

    def compare(self, a: T, b: T) -> Ordering:
        ra, rb = self.rank(a), self.rank(b)
        return 0 if ra == rb else (-1 if ra < rb else 1)


class Minimum(Maximum[T]):
    """A chain ordered the other way; used where any deterministic pick will do."""

    def join(self, a: T, b: T) -> T:
        return a if self.rank(a) <= self.rank(b) else b

    def compare(self, a: T, b: T) -> Ordering:
        o = super().compare(a, b)
        return o if o in (0, INCOMPARABLE) else -o  # type: ignore[operator]


class Singleton(Lattice[T]):
    """Values that join only with themselves (docs/design.md "Defaultness": different defaults,
    different generated expressions, "other types" are independent)."""

    def __init__(self, describe: Callable[[T, T], str] | None = None):
        self.describe = describe or (lambda a, b: f"{a!r} and {b!r} differ")

    def join(self, a: T, b: T) -> T:
        if a == b:
            return a
        raise Conflict(self.describe(a, b))

    def compare(self, a: T, b: T) -> Ordering:
        return 0 if a == b else INCOMPARABLE


class Optional(Lattice[T | None]):
    """None is the bottom: having a value is more compatible than having none."""

    def __init__(self, inner: Lattice[T]):
        self.inner = inner

    def join(self, a: T | None, b: T | None) -> T | None:
        if a is None:
            return b
        if b is None:
            return a
        return self.inner.join(a, b)

    def compare(self, a: T | None, b: T | None) -> Ordering:
        if a is None or b is None:
            return 0 if a is b else (-1 if a is None else 1)
        return self.inner.compare(a, b)


class Droppable(Lattice[Any]):
    """`top` (default ABSENT) is the most compatible value: where two values have
    no upper bound of their own they meet at top. docs/design.md "Constraints and indices": a table with fewer
    constraints is more compatible, so an index or check the shards disagree on
    is dropped."""

    def __init__(self, inner: Lattice[Any] | None = None, top: Any = ABSENT):
        self.inner: Lattice[Any] = inner or Singleton()
        self.top = top

    def join(self, a: Any, b: Any) -> Any:
        if a is self.top or b is self.top or a == self.top or b == self.top:
            return self.top
        try:
            return self.inner.join(a, b)
        except Conflict:
            return self.top

    def compare(self, a: Any, b: Any) -> Ordering:
        a_top, b_top = a is self.top or a == self.top, b is self.top or b == self.top
        if a_top or b_top:
            return 0 if a_top and b_top else (1 if a_top else -1)
        return self.inner.compare(a, b)


class AppendOnly(Lattice[tuple]):
    """docs/design.md "Sets and enums": members may only be appended at the end."""

    def __init__(self, describe: str = "members"):
        self.what = describe

    def join(self, a: tuple, b: tuple) -> tuple:
        short, long_ = (a, b) if len(a) <= len(b) else (b, a)
        if long_[: len(short)] == short:
            return long_
        raise Conflict(f"{self.what} {list(a)} and {list(b)} differ other than by appending at the end")

    def compare(self, a: tuple, b: tuple) -> Ordering:
        if a == b:
            return 0
        if len(a) < len(b) and b[: len(a)] == a:
            return -1
        if len(b) < len(a) and a[: len(b)] == b:
            return 1
        return INCOMPARABLE


class Product(Lattice[T]):
    """A frozen dataclass whose fields are joined independently; a conflict names
    the field. Fields not listed must be equal."""

    def __init__(self, **parts: Lattice[Any]):
        self.parts = parts

    def join(self, a: T, b: T) -> T:
        if a == b:
            return a
        changes = {}
        for f in fields(a):  # type: ignore[arg-type]
            va, vb = getattr(a, f.name), getattr(b, f.name)
            if va == vb:
                continue
            part = self.parts.get(f.name)
            if part is None:
                raise Conflict(f"{va!r} and {vb!r} differ", (f.name,))
            try:
                changes[f.name] = part.join(va, vb)
            except Conflict as exc:
                raise exc.at(f.name) from None
        return replace(a, **changes)  # type: ignore[type-var]

    def compare(self, a: T, b: T) -> Ordering:
        if a == b:
            return 0
        orderings = []
        for f in fields(a):  # type: ignore[arg-type]
            va, vb = getattr(a, f.name), getattr(b, f.name)
            if va == vb:
                continue
            part = self.parts.get(f.name)
            orderings.append(INCOMPARABLE if part is None else part.compare(va, vb))
        return combine(orderings)


K = TypeVar("K", bound=Hashable)


class KeyedMap(Lattice[Mapping[K, Any]]):
    """A map joined key by key. The inner lattice sees ABSENT for a missing key and
    may return ABSENT to drop the key."""

    def __init__(self, inner: Lattice[Any]):
        self.inner = inner

    def join(self, a: Mapping[K, Any], b: Mapping[K, Any]) -> dict[K, Any]:
        out: dict[K, Any] = {}
        for k in _keys(a, b):
            va, vb = a.get(k, ABSENT), b.get(k, ABSENT)
            try:
                v = va if va == vb else self.inner.join(va, vb)
            except Conflict as exc:
                raise exc.at(str(k)) from None
            if v is not ABSENT:
                out[k] = v
        return out

    def compare(self, a: Mapping[K, Any], b: Mapping[K, Any]) -> Ordering:
        return combine(
            self.inner.compare(a.get(k, ABSENT), b.get(k, ABSENT))
            for k in _keys(a, b)
            if a.get(k, ABSENT) != b.get(k, ABSENT)
        )


def _keys(a: Mapping[K, Any], b: Mapping[K, Any]) -> list[K]:
    return list(a) + [k for k in b if k not in a]
