"""A worker's messages as the daemon reads them from the pipe: pickled and loaded again,
each item the value and the type it was sent as (`Changes.__reduce__` sends a `Change` as
its tuple)."""

from __future__ import annotations

import pickle

from hypothesis import given
from hypothesis import strategies as st

from replicator.shard_id import ShardId
from replicator.source.gtid import TxnGtids
from replicator.source.messages import Change, Changes, Dropped, change_of

SHARDS = (ShardId("s1", "db", "t1"), ShardId("s1", "db", "t2"))
COLUMNS = (("id", "a"), ("id", "a", "b"))
literals = st.sampled_from(("1", "NULL", "'x'", "_utf8mb4 x'6869'", "-0.5"))


@st.composite
def changes(draw) -> Change:
    columns = draw(st.sampled_from(COLUMNS))
    op = draw(st.sampled_from("IUD"))
    row = tuple(draw(literals) for _ in columns)
    before = tuple(draw(literals) for _ in columns) if op != "I" else None
    return Change(
        (1, draw(st.integers(4, 10**9)), draw(st.integers(0, 5))),
        draw(st.sampled_from(SHARDS)),
        "db.t",
        op,
        columns,
        row if op != "D" else None,
        before,
        draw(st.sampled_from((None, columns))),
        draw(st.sampled_from(((), ("b",)))),
    )


dropped = st.builds(Dropped, st.just((1, 4, 0)), st.sampled_from(SHARDS), st.just("db.t"), st.integers(1, 9), st.text())


@given(st.lists(st.one_of(changes(), dropped), max_size=40), st.dictionaries(st.just((SHARDS[0], "insert")), st.integers(1, 5)))
def test_changes_load_as_they_were_sent(items, filtered):
    sent = Changes("s1", items, "mariadb-bin.000001:4", 1.5, "0-1-7", TxnGtids(), filtered)
    got = pickle.loads(pickle.dumps(sent, protocol=pickle.HIGHEST_PROTOCOL))
    assert got == sent
    assert [type(c) for c in got.items] == [type(c) for c in items]


def test_a_tables_columns_travel_once_per_message():
    rows = [Change((1, 4, n), SHARDS[0], "db.t", "I", COLUMNS[1], ("1", "2", "3")) for n in range(100)]
    got = pickle.loads(pickle.dumps(Changes("s1", rows, "f.000001:4")))
    assert len({id(c.columns) for c in got.items}) == 1
    assert len({id(c.shard) for c in got.items}) == 1


def test_a_change_made_whole_is_the_change_its_fields_make():
    """`row_events.append_changes` makes each row's `Change` from all nine fields
    (`change_of`): a field added to `Change` must be added there too."""
    assert Change._fields[-3:] == ("before", "before_columns", "clear") and len(Change._fields) == 9
    assert Change._field_defaults == {"before": None, "before_columns": None, "clear": ()}
    made = change_of(((1, 4, 1), SHARDS[0], "db.t", "I", COLUMNS[0], ("1", "2"), None, None, ()))
    assert type(made) is Change and made == Change((1, 4, 1), SHARDS[0], "db.t", "I", COLUMNS[0], ("1", "2"))
