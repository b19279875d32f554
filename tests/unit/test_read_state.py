"""A source worker's read state (replicator/source/read_state.py): the time of the last event
read, which the lag is measured from."""

from __future__ import annotations

import time

from replicator.source.read_state import ReadState


def test_an_event_read_as_it_is_written_dates_from_its_arrival_not_its_whole_second():
    read = ReadState(None, None)
    second = int(time.time())
    before = time.time()
    read.seen(100, second)  # written this second: not after now, not before its second
    assert second <= before <= read.last_event_time <= time.time()


def test_an_event_read_behind_dates_from_the_end_of_its_second():
    read = ReadState(None, None)
    second = int(time.time()) - 100
    read.seen(100, second)
    assert read.last_event_time == second + 1.0
    read.seen(200, 0)  # (an event without a time, a rotate's: the last time stands)
    assert read.last_event_time == second + 1.0
