"""A source's events per second in the status (replicator/source/source_state.py)."""

from __future__ import annotations

import pytest

from replicator.source.source_state import EventRate


def test_events_per_second_are_counted_over_the_last_ten_seconds():
    rate = EventRate()
    assert rate.per_second(100.0, 0) == 0.0
    for second in range(0, 31):  # 50 events a second for 30 s
        rate.note(100.0 + second, 50 * second)
    assert rate.per_second(130.0, 1500) == pytest.approx(50, rel=0.15)
    assert rate.per_second(160.0, 1500) < 20  # idle since: the rate falls
