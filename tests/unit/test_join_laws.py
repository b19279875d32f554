"""The lattice laws over generated shard tables, for every flavor: join is
commutative, associative and idempotent; compare agrees with join (a ≤ b exactly
when join(a, b) = b); the join is an upper bound of both sides."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings

from lattice import INCOMPARABLE, Flavor, JoinConflict, compare, join
from tests.strategies import is_valid, related_tables

FLAVORS = [f.value for f in Flavor]
# (100 examples a law and flavor in make test, whose two cores are its bound; the fuzzer's
# stories join 10,000 more)
LAWS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def valid(tables):
    assume(all(is_valid(t) for t in tables))
    return tables


def same(x, y) -> bool:
    if isinstance(x, JoinConflict) or isinstance(y, JoinConflict):
        return isinstance(x, JoinConflict) and isinstance(y, JoinConflict)
    return x == y


@pytest.mark.parametrize("flavor", FLAVORS)
@LAWS
@given(tables=related_tables(2))
def test_join_is_commutative(flavor, tables):
    a, b = valid(tables)
    assert same(join(a, b, flavor), join(b, a, flavor))


@pytest.mark.parametrize("flavor", FLAVORS)
@LAWS
@given(tables=related_tables(3))
def test_join_is_associative(flavor, tables):
    a, b, c = valid(tables)
    ab, bc = join(a, b, flavor), join(b, c, flavor)
    left = ab if isinstance(ab, JoinConflict) else join(ab, c, flavor)
    right = bc if isinstance(bc, JoinConflict) else join(a, bc, flavor)
    assert same(left, right)


@pytest.mark.parametrize("flavor", FLAVORS)
@LAWS
@given(tables=related_tables(1))
def test_join_is_idempotent(flavor, tables):
    (a,) = valid(tables)
    assert join(a, a, flavor) == a


@pytest.mark.parametrize("flavor", FLAVORS)
@LAWS
@given(tables=related_tables(2))
def test_compare_agrees_with_join(flavor, tables):
    a, b = valid(tables)
    j = join(a, b, flavor)
    order = compare(a, b, flavor)
    assert (order in (-1, 0)) == (not isinstance(j, JoinConflict) and j == b)
    assert (order in (1, 0)) == (not isinstance(j, JoinConflict) and j == a)
    assert compare(b, a, flavor) == (order if order in (0, INCOMPARABLE) else -order)


@pytest.mark.parametrize("flavor", FLAVORS)
@LAWS
@given(tables=related_tables(2))
def test_join_is_an_upper_bound(flavor, tables):
    a, b = valid(tables)
    j = join(a, b, flavor)
    assume(not isinstance(j, JoinConflict))
    assert compare(a, j, flavor) in (-1, 0)
    assert compare(b, j, flavor) in (-1, 0)
    # and joining either side again changes nothing
    assert join(j, a, flavor) == j
    assert join(j, b, flavor) == j


@pytest.mark.parametrize("flavor", FLAVORS)
@LAWS
@given(tables=related_tables(3))
def test_compare_of_joined_tables_agrees_with_join(flavor, tables):
    """The same agreement for joined tables, which carry partial columns."""
    a, b, c = valid(tables)
    ab, bc = join(a, b, flavor), join(b, c, flavor)
    assume(not isinstance(ab, JoinConflict) and not isinstance(bc, JoinConflict))
    j = join(ab, bc, flavor)
    order = compare(ab, bc, flavor)
    assert (order in (-1, 0)) == (not isinstance(j, JoinConflict) and j == bc)
    assert (order in (1, 0)) == (not isinstance(j, JoinConflict) and j == ab)
