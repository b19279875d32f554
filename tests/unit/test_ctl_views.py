"""What `shardctl` prints for people (replicator/cli/ctl_views.py), from admin API answers."""

from __future__ import annotations

import re

import pytest

from replicator.cli.ctl_views import show_status

STATUS = {
    "task": "t",
    "applied": 10,
    "sources": {"s1": {"state": "running", "position": "f.1:4", "lag": 0.2, "received": 5}},
    "groups": {"shop.orders": {"version": "1.2", "blocked": {}}},
}


@pytest.mark.parametrize(
    ("parked", "shown"),
    [
        ({"rows": 1234, "bytes": 2 * 1024 * 1024}, "1,234 rows, 2.0 MiB"),
        ({"rows": 3, "bytes": 700}, "3 rows, 700 B"),
        ({"rows": 1, "bytes": 262}, "1 row, 262 B"),
        ({"rows": 9, "bytes": 5 * 1024**3}, "9 rows, 5.0 GiB"),
        (None, "-"),  # nothing parked (parking off, or paused before any change)
    ],
)
def test_a_paused_shard_shows_what_its_park_holds(parked, shown):
    pause = {"position": "f.1:9", "reason": "conflict on a"} | ({"parked": parked} if parked else {})
    text = show_status({**STATUS, "paused": {"s1.db.t1": pause}})
    header, _, row = text.splitlines()[-3:]
    assert header.split() == ["paused", "shard", "at", "parked", "why"]
    assert re.split(r"\s{2,}", row) == ["s1.db.t1", "f.1:9", shown, "conflict on a"]
