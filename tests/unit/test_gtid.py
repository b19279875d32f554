"""The worker's GTID cursor follows the state exactly as `GtidState.after` says, for any
transactions in any domains (replicator/source/gtid.py)."""

from hypothesis import given
from hypothesis import strategies as st

from replicator.source.gtid import Gtid, GtidCursor, GtidState, GtidTrail, TxnGtids

gtids = st.builds(Gtid, st.integers(0, 12), st.integers(1, 3), st.integers(1, 10**12))


@given(st.lists(gtids, max_size=4, unique_by=lambda g: g.domain), st.lists(gtids, max_size=30))
def test_the_cursor_states_what_the_state_says_after_each_transaction(start, read):
    state = GtidState(tuple(sorted(start, key=lambda g: g.domain)))
    cursor = GtidCursor(state)
    assert cursor.text == str(state)
    for gtid in read:
        state = state.after(gtid)
        cursor.passed(str(gtid))
        assert cursor.text == str(state)
        assert GtidState.parse(cursor.text) == state


def test_the_trail_keeps_the_gtids_a_message_brings_and_lets_go_below_the_watermark():
    trail = GtidTrail()
    txns = TxnGtids()
    txns.add((1, 100), "0-1-7", "0-1-6")
    txns.add((1, 300), "0-1-8", "0-1-7")
    trail.note(txns, "0-1-8")
    assert (trail.own((1, 100, 2)), trail.before((1, 300, 0), (1, 500, 0))) == ("0-1-7", "0-1-7")
    assert trail.before((1, 500, 0), (1, 500, 0)) == "0-1-8"  # the read position
    trail.trim((1, 300, 0))
    assert (trail.own((1, 100, 0)), trail.own((1, 300, 0)), len(trail)) == (None, "0-1-8", 1)


@given(st.lists(st.tuples(st.integers(1, 3), st.integers(0, 50)), max_size=40), st.lists(st.integers(0, 60)))
def test_a_trim_keeps_every_start_at_or_above_the_watermark_and_lets_go_of_all_below_in_time(starts, cuts):
    # (starts noted in any order, as a rewind may note them; the watermark only grows)
    trail = GtidTrail()
    for i, start in enumerate(starts):
        txns = TxnGtids()
        txns.add(start, f"0-1-{i + 1}", f"0-1-{i}")
        trail.note(txns, None)
    kept = {start: trail.own((*start, 0)) for start in starts}
    for cut in sorted(cuts):
        trail.trim((2, cut, 0))
        assert all(trail.own((*s, 0)) == gtid for s, gtid in kept.items() if s >= (2, cut))
    trail.trim((4, 0, 0))
    assert len(trail) == 0
