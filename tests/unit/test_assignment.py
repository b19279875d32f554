"""Which member reads each source (`replicator.daemon.assignment`), rule by rule, then as
properties over random tasks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replicator.daemon.assignment import assign, moves

S = [f"s{i}" for i in range(1, 9)]

# (rule, sources, live members, owners now, owners after)
RULES = [
    ("no member lives: no source is read", S[:2], [], {"s1": "a"}, {}),
    ("one member reads every source", S[:3], ["a"], {}, {"s1": "a", "s2": "a", "s3": "a"}),
    ("new sources go to the members reading fewest, ties by name", S[:4], ["b", "a"], {},
     {"s1": "a", "s2": "b", "s3": "a", "s4": "b"}),
    ("a balanced assignment stays as it is", S[:4], ["a", "b"], {"s1": "b", "s2": "b", "s3": "a", "s4": "a"},
     {"s1": "b", "s2": "b", "s3": "a", "s4": "a"}),
    ("a dead member's sources go to the least busy", S[:4], ["a", "b"],
     {"s1": "a", "s2": "b", "s3": "c", "s4": "c"}, {"s1": "a", "s2": "b", "s3": "a", "s4": "b"}),
    ("a member added takes sources from the busiest till none reads two more", S[:4], ["a", "b"],
     {"s1": "a", "s2": "a", "s3": "a", "s4": "a"}, {"s1": "a", "s2": "a", "s3": "b", "s4": "b"}),
    ("one more is not moved for", S[:3], ["a", "b"], {"s1": "a", "s2": "a", "s3": "b"},
     {"s1": "a", "s2": "a", "s3": "b"}),
    ("a source gone from the config is read by none", S[:2], ["a"], {"s1": "a", "s2": "a", "s9": "a"},
     {"s1": "a", "s2": "a"}),
]


# (rule, sources, live members, owners now, moved by the operator, owners after)
MOVED = [
    ("a source moved goes to its member, and the balance gives it another", S[:4], ["a", "b"],
     {"s1": "a", "s2": "a", "s3": "b", "s4": "b"}, {"s3": "a"}, {"s1": "a", "s2": "b", "s3": "a", "s4": "b"}),
    ("sources moved stay where moved, however unbalanced", S[:3], ["a", "b"],
     {"s1": "a", "s2": "b", "s3": "b"}, {"s1": "a", "s2": "a", "s3": "a"}, {"s1": "a", "s2": "a", "s3": "a"}),
    ("a source moved to a member gone goes by the rules", S[:2], ["a", "b"], {"s1": "c", "s2": "a"},
     {"s1": "c"}, {"s1": "b", "s2": "a"}),
    ("a source moved, then gone from the config, is read by none", S[:1], ["a"], {"s1": "a"},
     {"s9": "a"}, {"s1": "a"}),
]


@pytest.mark.parametrize("sources, members, owners, moved, expected", [r[1:] for r in MOVED],
                         ids=[r[0] for r in MOVED])
def test_assignment_of_sources_the_operator_moved(sources, members, owners, moved, expected):
    assert assign(sources, members, owners, moved) == expected


@pytest.mark.parametrize("sources, members, owners, expected", [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_assignment_rules(sources, members, owners, expected):
    assert assign(sources, members, owners) == expected


def test_moves_name_each_source_whose_member_changes():
    assert moves({"s1": "a", "s2": "a", "s3": "b"}, {"s1": "a", "s2": "b", "s4": "b"}) == {
        "s2": ("a", "b"),
        "s3": ("b", None),
        "s4": (None, "b"),
    }


tasks = st.tuples(
    st.lists(st.sampled_from(S), unique=True, max_size=8),
    st.lists(st.sampled_from("abcde"), unique=True, max_size=5),
    st.dictionaries(st.sampled_from(S), st.sampled_from("abcdef")),
)


@given(tasks)
def test_every_source_has_one_live_member_and_none_reads_two_more_than_another(task):
    sources, members, owners = task
    after = assign(sources, members, owners)
    if not members:
        assert after == {}
        return
    assert set(after) == set(sources) and set(after.values()) <= set(members)
    counts = [sum(1 for m in after.values() if m == member) for member in members]
    assert max(counts) - min(counts) <= 1


@given(tasks)
def test_only_sources_without_a_live_member_and_those_the_balance_needs_move(task):
    """A source whose member lives moves only for the balance: no member both gives sources
    away and takes some; and the assignment again is itself, whatever the members' order
    (every member computes the same)."""
    sources, members, owners = task
    if not members:
        return  # (none reads anything: the test above)
    after = assign(sources, members, owners)
    assert assign(sources, list(reversed(members)), after) == after
    kept = {s: m for s, m in owners.items() if s in sources and m in members}
    gave = {kept[s] for s in kept if after[s] != kept[s]}
    took = {after[s] for s in sources if kept.get(s) != after[s]}
    assert not gave & took, (gave, took)


@given(tasks, st.dictionaries(st.sampled_from(S), st.sampled_from("abcdef")))
def test_a_source_moved_to_a_live_member_is_its_and_the_rest_stay_balanced(task, moved):
    sources, members, owners = task
    after = assign(sources, members, owners, moved)
    if not members:
        assert after == {}
        return
    assert set(after) == set(sources) and set(after.values()) <= set(members)
    pinned = {s: m for s, m in moved.items() if s in sources and m in members}
    assert all(after[s] == m for s, m in pinned.items())
    free = [s for s in sources if s not in pinned]
    counts = {member: sum(1 for s in free if after[s] == member) for member in members}
    total = {member: sum(1 for m in after.values() if m == member) for member in members}
    # (the balance moves free sources only: a member two over the least has none left to give)
    least = min(total.values())
    assert all(counts[m] == 0 for m in members if total[m] - least > 1), (after, pinned)
