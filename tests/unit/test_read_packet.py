"""The dump connection's packets as `binlog_compat.packets` reads them: what pymysql's
`_read_packet` gives and raises, with no packet object made (on the sandbox's servers every
worker reads through it: tests/daemon/test_replication.py, test_failover.py)."""

from __future__ import annotations

import io
from itertools import islice

import pymysql
import pytest

from replicator.source.binlog_compat import packets


class Dump:
    """A connection as `packets` uses it: its buffered socket file and sequence id."""

    encoding = "utf8mb4"
    _read_timeout = None
    _current_timeout = None

    def __init__(self, wire: bytes, seq: int = 1):
        self._rfile = io.BufferedReader(io.BytesIO(wire))
        self._next_seq_id = seq
        self.closed = False

    def _force_close(self) -> None:
        self.closed = True


def packet(payload: bytes, seq: int) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes((seq,)) + payload


def test_packets_come_in_order_and_the_sequence_id_moves_on():
    conn = Dump(packet(b"\x00event-one", 1) + packet(b"\x00two", 2) + packet(b"\xfe\x00\x00", 3))
    assert list(islice(packets(conn), 3)) == [b"\x00event-one", b"\x00two", b"\xfe\x00\x00"]
    assert conn._next_seq_id == 4 and not conn.closed


def test_a_payload_of_16_mib_or_more_goes_on_in_the_next_packet():
    big = b"\x00" + b"x" * (0xFFFFFF - 1)
    conn = Dump(packet(big, 0) + packet(b"tail", 1), seq=0)
    assert next(packets(conn)) == big + b"tail"
    assert conn._next_seq_id == 2


@pytest.mark.parametrize(
    ("wire", "error"),
    [
        (b"", pymysql.err.OperationalError),  # the server went away
        (packet(b"\x00short", 1)[:7], pymysql.err.OperationalError),  # mid-packet
        (packet(b"\x00event", 5), pymysql.err.InternalError),  # a packet lost
        (packet(b"\xff\x00\x00", 0), pymysql.err.OperationalError),  # MariaDB's at a shutdown
    ],
)
def test_a_lost_or_broken_stream_closes_the_connection_and_raises_as_pymysql_does(wire, error):
    conn = Dump(wire)
    with pytest.raises(error):
        next(packets(conn))
    assert conn.closed


def test_an_error_packet_raises_the_servers_error():
    body = b"\xff" + (1236).to_bytes(2, "little") + b"#HY000" + b"Could not find first log file name"
    with pytest.raises(pymysql.err.OperationalError) as raised:
        next(packets(Dump(packet(body, 1))))
    assert raised.value.args[0] == 1236
