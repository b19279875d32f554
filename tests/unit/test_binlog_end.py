"""How far a position is behind a server's binlog end (replicator/source/binlog_end.py)."""

from __future__ import annotations

import pytest

from replicator.source.binlog_end import BinlogEnd
from replicator.state.positions import Position

END = BinlogEnd((("mysql-bin.000003", 1000), ("mysql-bin.000004", 500), ("mysql-bin.000005", 300)), "0-1-90", 0.0)


@pytest.mark.parametrize(
    ("position", "behind"),
    [
        (Position("mysql-bin.000005", 300), 0),  # at the end
        (Position("mysql-bin.000005", 120), 180),
        (Position("mysql-bin.000004", 100), 400 + 300),  # the rest of its file, and the next
        (Position("mysql-bin.000003", 4), 996 + 500 + 300),
        (Position("mysql-bin.000005", 400), 0),  # read past where the server ended when asked
        (Position("mysql-bin.000001", 4), None),  # purged there: not counted
    ],
)
def test_bytes_behind_count_the_rest_of_each_file_to_the_end(position, behind):
    assert END.end == Position("mysql-bin.000005", 300)
    assert END.bytes_behind(position) == behind


@pytest.mark.parametrize(
    ("server", "ours", "behind"),
    [
        ("0-1-90", "0-1-90", 0),
        ("0-1-90", "0-1-75", 15),
        ("0-2-90", "0-1-75", 15),  # another server of the domain went on from there (a failover)
        ("0-1-90,1-1-7", "0-1-88", 2 + 7),  # a domain we have read nothing of
        ("0-1-90", "", None),
        ("3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5", "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-3", None),
    ],
)
def test_transactions_behind_by_each_domains_sequence(server, ours, behind):
    assert BinlogEnd((("f.000001", 4),), server, 0.0).transactions_behind(ours) == behind

