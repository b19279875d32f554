"""Each composable piece of the lattice on its own: a table of joins and orders, then
the laws over hypothesis-generated values of the piece."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lattice.algebra import (
    ABSENT,
    INCOMPARABLE,
    AppendOnly,
    Boolean,
    Conflict,
    Droppable,
    KeyedMap,
    Maximum,
    Minimum,
    Optional,
    Product,
    Singleton,
    combine,
)

CONFLICT = object()


@dataclass(frozen=True)
class Pair:
    x: int
    flag: bool


PIECES = {
    "boolean top=True": Boolean(top=True),
    "boolean top=False": Boolean(top=False),
    "maximum": Maximum(),
    "minimum": Minimum(),
    "singleton": Singleton(),
    "optional(singleton)": Optional(Singleton()),
    "droppable(singleton)": Droppable(Singleton()),
    "droppable top=None": Droppable(top=None),
    "append-only": AppendOnly(),
    "product": Product(x=Maximum(), flag=Boolean(top=True)),
    "keyed map(optional)": KeyedMap(Droppable()),
}

# piece, a, b, join (CONFLICT for none), compare(a, b)
ROWS = [
    ("boolean top=True", False, True, True, -1),
    ("boolean top=True", True, True, True, 0),
    ("boolean top=False", False, True, False, 1),
    ("maximum", 3, 7, 7, -1),
    ("maximum", 7, 3, 7, 1),
    ("minimum", 3, 7, 3, 1),
    ("singleton", "a", "a", "a", 0),
    ("singleton", "a", "b", CONFLICT, INCOMPARABLE),
    ("optional(singleton)", None, "a", "a", -1),
    ("optional(singleton)", "a", None, "a", 1),
    ("optional(singleton)", "a", "b", CONFLICT, INCOMPARABLE),
    ("droppable(singleton)", "a", "b", ABSENT, INCOMPARABLE),
    ("droppable(singleton)", "a", ABSENT, ABSENT, -1),
    ("droppable(singleton)", "a", "a", "a", 0),
    ("droppable top=None", "note", None, None, -1),
    ("droppable top=None", "x", "y", None, INCOMPARABLE),
    ("append-only", ("a",), ("a", "b"), ("a", "b"), -1),
    ("append-only", ("a", "b"), ("a",), ("a", "b"), 1),
    ("append-only", ("a", "b"), ("b", "a"), CONFLICT, INCOMPARABLE),
    ("append-only", ("a", "c"), ("a", "b"), CONFLICT, INCOMPARABLE),
    ("product", Pair(1, False), Pair(2, True), Pair(2, True), -1),
    ("product", Pair(1, True), Pair(2, False), Pair(2, True), INCOMPARABLE),
    ("keyed map(optional)", {"k": 1}, {"k": 1, "j": 2}, {"k": 1}, 1),
    ("keyed map(optional)", {"k": 1}, {"k": 2}, {}, INCOMPARABLE),
]


@pytest.mark.parametrize(("piece", "a", "b", "expected", "order"), ROWS,
                         ids=[f"{r[0]}:{r[1]!r}∨{r[2]!r}" for r in ROWS])
def test_piece_join_and_compare(piece, a, b, expected, order):
    lattice = PIECES[piece]
    if expected is CONFLICT:
        with pytest.raises(Conflict):
            lattice.join(a, b)
    else:
        assert lattice.join(a, b) == expected
    assert lattice.compare(a, b) == order


def test_combine_orders_products():
    assert combine([0, -1, 0]) == -1
    assert combine([1, 0]) == 1
    assert combine([1, -1]) == INCOMPARABLE
    assert combine([0, INCOMPARABLE]) == INCOMPARABLE
    assert combine([]) == 0


def test_product_conflict_names_the_field():
    with pytest.raises(Conflict) as info:
        Product(x=Singleton()).join(Pair(1, True), Pair(2, True))
    assert info.value.path == ("x",)


def test_keyed_map_conflict_names_the_key():
    with pytest.raises(Conflict) as info:
        KeyedMap(Optional(Singleton())).join({"col": 1}, {"col": 2})
    assert info.value.path == ("col",)


# -- laws, per piece, over values of the piece's domain --------------------------------
DOMAINS = {
    "boolean top=True": st.booleans(),
    "boolean top=False": st.booleans(),
    "maximum": st.integers(-5, 5),
    "minimum": st.integers(-5, 5),
    "singleton": st.sampled_from("abc"),
    "optional(singleton)": st.one_of(st.none(), st.sampled_from("ab")),
    "droppable(singleton)": st.one_of(st.just(ABSENT), st.sampled_from("ab")),
    "droppable top=None": st.one_of(st.none(), st.sampled_from("ab")),
    "append-only": st.lists(st.sampled_from("ab"), max_size=3).map(tuple),
    "product": st.builds(Pair, st.integers(0, 3), st.booleans()),
    "keyed map(optional)": st.dictionaries(st.sampled_from("kj"), st.integers(0, 2), max_size=2),
}


def _join(lattice, a, b):
    try:
        return lattice.join(a, b)
    except Conflict:
        return CONFLICT


def _join3(lattice, a, b, c, left: bool):
    first = _join(lattice, a, b) if left else _join(lattice, b, c)
    if first is CONFLICT:
        return CONFLICT
    return _join(lattice, first, c) if left else _join(lattice, a, first)


@pytest.mark.parametrize("piece", sorted(DOMAINS))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_piece_laws(piece, data):
    lattice, domain = PIECES[piece], DOMAINS[piece]
    a, b, c = data.draw(domain), data.draw(domain), data.draw(domain)
    j = _join(lattice, a, b)
    assert j == _join(lattice, b, a)  # commutative
    assert _join3(lattice, a, b, c, True) == _join3(lattice, a, b, c, False)  # associative
    assert _join(lattice, a, a) == a  # idempotent
    order = lattice.compare(a, b)
    assert (order in (-1, 0)) == (j == b)  # compare agrees with join
    assert (order in (0, 1)) == (j == a)
    if j is not CONFLICT:
        assert lattice.compare(a, j) in (-1, 0) and lattice.compare(b, j) in (-1, 0)
