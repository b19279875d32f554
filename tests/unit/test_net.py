"""A batch folded to its net effect per key leaves the table the changes leave one by one
(on a table whose only unique key is the key: `replicator.apply.net`)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.apply.net import fold
from replicator.shard_id import ShardId
from replicator.source.messages import Change

SHARD = ShardId("s1", "db", "t")
FULL = ("id", "a", "c")
SHORT = ("id", "a")  # a shard lacking c: its rows get c's default
DEFAULT = {"c": "0"}

Table = dict[str, dict[str, str]]


def written(columns: tuple[str, ...], values: tuple[str, ...]) -> dict[str, str]:
    return dict(zip(columns, values, strict=True))


def one_by_one(table: Table, changes: list[Change]) -> Table:
    """What the applier's statements do change by change: an INSERT (defaults for what it
    does not name), an upsert for an update, a DELETE by key."""
    table = {k: dict(v) for k, v in table.items()}
    for c in changes:
        if c.op == "D":
            table.pop(c.before[0], None)
        elif c.op == "I":
            assert c.values[0] not in table
            table[c.values[0]] = {**DEFAULT, **written(c.columns, c.values)}
        else:
            row = table.get(c.values[0], DEFAULT)
            table[c.values[0]] = {**row, **written(c.columns, c.values)}
    return table


def folded(table: Table, changes: list[Change]) -> Table | None:
    net = fold(changes, lambda c: (c.before[0],), lambda c: (c.values[0],))
    if net is None:
        return None
    table = {k: dict(v) for k, v in table.items()}
    for c in net.deletes:
        table.pop(c.before[0], None)
    for c in net.inserts:
        assert c.values[0] not in table, "an insert of a row there"
        table[c.values[0]] = {**DEFAULT, **written(c.columns, c.values)}
    for c in net.upserts:
        row = table.get(c.values[0], DEFAULT)
        table[c.values[0]] = {**row, **written(c.columns, c.values)}
    for _, c in net.replaced:  # (deleted and inserted: the statements' upsert of an image
        table[c.values[0]] = {**DEFAULT, **written(c.columns, c.values)}  # naming every column is the same)
    return table


@st.composite
def stories(draw) -> tuple[Table, list[Change]]:
    """A table of a few rows, and valid changes to it over few keys (many per key)."""
    keys = [str(k) for k in range(6)]
    there = draw(st.sets(st.sampled_from(keys)))
    table = {k: {"id": k, "a": "0", "c": "5"} for k in there}
    present = set(there)
    changes = []
    for n in range(draw(st.integers(0, 25))):
        k = draw(st.sampled_from(keys))
        columns = draw(st.sampled_from((FULL, SHORT)))
        values = tuple({"id": k, "a": str(n), "c": str(100 + n)}[c] for c in columns)
        if k not in present:
            changes.append(Change((1, 1, n), SHARD, "db.t", "I", columns, values))
            present.add(k)
        elif draw(st.booleans()):
            changes.append(Change((1, 1, n), SHARD, "db.t", "D", FULL, None, (k, "?", "?")))
            present.discard(k)
        else:
            changes.append(Change((1, 1, n), SHARD, "db.t", "U", columns, values, values))
    return table, changes


@settings(max_examples=400, deadline=None)
@given(stories())
def test_the_net_effect_leaves_what_the_changes_leave_one_by_one(story):
    table, changes = story
    net = folded(table, changes)
    if net is not None:  # (None: the applier writes the batch change by change)
        assert net == one_by_one(table, changes)


def test_a_key_whose_changes_name_different_columns_is_not_folded():
    a = Change((1, 1, 1), SHARD, "db.t", "U", FULL, ("1", "2", "3"), ("1", "2", "3"))
    b = Change((1, 1, 2), SHARD, "db.t", "U", SHORT, ("1", "4"), ("1", "2"))
    assert fold([a, b], lambda c: (c.before[0],), lambda c: (c.values[0],)) is None
