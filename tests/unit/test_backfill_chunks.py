"""The backfill's chunk bookkeeping, pure: chunks cover every key once, whatever rows
come after the plan; the rows of unfinished chunks are selected in one condition;
a plan tells what changed since an interrupted one; merge decisions digest alike
in any order."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replicator.state.chunks import (
    Chunk,
    TablePlan,
    hash_chunks,
    interleave,
    losers_digest,
    plan_changes,
    range_chunks,
    where_any,
)


def holds(chunk: Chunk, key: int) -> bool:
    """What chunk.where(key) selects, for an integer key."""
    return (chunk.low is None or key >= chunk.low) and (chunk.high is None or key < chunk.high)


@given(
    low=st.integers(-(2**40), 2**40),
    width=st.integers(0, 10_000),
    n=st.integers(1, 300),
    key=st.integers(-(2**41), 2**41),
)
def test_range_chunks_hold_every_key_once_even_outside_the_planned_bounds(low, width, n, key):
    chunks = range_chunks(low, low + width, n)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert 1 <= len(chunks) <= n
    assert chunks[0].low is None and chunks[-1].high is None
    assert all(a.high == b.low for a, b in itertools.pairwise(chunks))
    assert sum(holds(c, key) for c in chunks) == 1


def test_a_chunk_says_its_rows_in_sql():
    assert Chunk(0, None, 100).where("`id`") == "`id` < 100"
    assert Chunk(1, 100, 200).where("`id`") == "`id` >= 100 AND `id` < 200"
    assert Chunk(2, 200).where("`id`") == "`id` >= 200"
    assert Chunk(0).where("`id`") == "1=1"
    assert Chunk(3, buckets=8).where("HEX(k)") == "CRC32(HEX(k)) % 8 = 3"
    assert hash_chunks(1) == (Chunk(0),)
    assert [c.where("k") for c in hash_chunks(2)] == ["CRC32(k) % 2 = 0", "CRC32(k) % 2 = 1"]


def test_a_chunk_is_a_range_or_a_bucket_and_never_empty():
    with pytest.raises(ValueError, match="not both"):
        Chunk(0, 1, 5, buckets=4)
    with pytest.raises(ValueError, match="empty key range"):
        Chunk(0, 5, 5)


def test_finished_chunks_carry_their_rows_and_can_be_reset():
    chunk = Chunk(4, 10, 20)
    assert not chunk.finished
    done = chunk.done(7)
    assert done.finished and done.rows == 7 and done.pending() == chunk


def test_unfinished_chunks_are_selected_in_one_condition_adjacent_ranges_merged():
    chunks = range_chunks(0, 99, 10)  # (-inf,10) [10,20) ... [90,+inf)
    pending = [chunks[i] for i in (0, 1, 2, 5, 8, 9)]
    assert where_any(pending, "k") == "(k < 30) OR (k >= 50 AND k < 60) OR (k >= 80)"
    assert where_any([chunks[4]], "k") == "(k >= 40 AND k < 50)"
    assert where_any(list(chunks), "k") == "(1=1)"
    assert where_any([], "k") == "0=1"
    buckets = hash_chunks(16)
    assert where_any([buckets[9], buckets[2]], "t") == "CRC32(t) % 16 IN (2, 9)"


@given(st.lists(st.integers(0, 9), unique=True), st.integers(-5, 105))
def test_where_any_selects_a_key_exactly_when_one_of_its_chunks_does(picked, key):
    chunks = range_chunks(0, 99, 10)
    pending = [chunks[i] for i in picked]
    condition = where_any(pending, "k")
    # the condition as Python: the SQL is made of comparisons, AND, OR and parentheses
    python = condition.replace("AND", "and").replace("OR", "or").replace("1=1", "True").replace("0=1", "False")
    assert eval(python, {"k": key}) == any(holds(c, key) for c in pending)


def test_interleave_takes_each_shard_in_turn():
    assert interleave([["a1", "a2", "a3"], ["b1"], [], ["c1", "c2"]]) == ["a1", "b1", "c1", "a2", "c2", "a3"]
    assert interleave([[None, 0]]) == [None, 0]  # (no item is taken for a gap)


def plan(**changes) -> TablePlan:
    base = {
        "target": "shop.orders",
        "shards": (("s1.db.a", "CREATE TABLE a (id INT)"), ("s2.db.b", "CREATE TABLE b (id INT)")),
        "joined": "CREATE TABLE orders (id INT)",
        "policy": "fail",
    }
    return TablePlan(**(base | changes))


def test_the_same_plan_has_no_changes():
    assert plan_changes({"shop.orders": plan()}, {"shop.orders": plan(losers="x")}) == []  # losers apart


@pytest.mark.parametrize(
    ("now", "lines"),
    [
        (plan(shards=(("s1.db.a", "CREATE TABLE a (id INT)"),)), ["shop.orders: shard s2.db.b is gone"]),
        (
            plan(shards=(*plan().shards, ("s3.db.c", "CREATE TABLE c (id INT)"))),
            ["shop.orders: shard s3.db.c is new"],
        ),
        (
            plan(
                shards=(("s1.db.a", "CREATE TABLE a (id INT, v INT)"), plan().shards[1]),
                joined="CREATE TABLE orders (id INT, v INT)",
            ),
            ["shop.orders: the schema of shard s1.db.a changed", "shop.orders: the joined schema changed"],
        ),
        (
            plan(policy="keep-latest updated"),
            ["shop.orders: the merge policy was fail, now keep-latest updated"],
        ),
    ],
)
def test_what_changed_since_the_interrupted_plan(now, lines):
    assert plan_changes({"shop.orders": plan()}, {"shop.orders": now}) == lines


def test_other_tables_are_another_plan():
    (line,) = plan_changes({"shop.orders": plan()}, {"shop.orders": plan(), "shop.items": plan(target="shop.items")})
    assert line == "the interrupted backfill copies shop.orders; this one would copy shop.items, shop.orders"


def test_losers_digest_alike_in_any_order_and_differ_by_any_row():
    one = losers_digest({"s1.db.a": {"k1", "k2"}, "s2.db.b": {"k9"}})
    assert one == losers_digest({"s2.db.b": ["k9"], "s1.db.a": ["k2", "k1"]})
    assert one != losers_digest({"s1.db.a": {"k1", "k2"}, "s2.db.b": {"k8"}})
    assert one != losers_digest({"s1.db.a": {"k1", "k2", "k9"}})  # the same key, another shard's
    assert losers_digest({}) == losers_digest({"s1.db.a": set()})
