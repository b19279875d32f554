"""Issue 72: nothing the lattice memoises is shared across threads in a way one thread can
read another's answer. Two groups' DDL threads join their shards' tables at once, one group
whose join is too wide for the server's row (a conflict) and one whose join fits: each
decision is its own, however the threads interleave (a last-table memo of the row size,
read and written apart, once gave one group the other's size)."""

from __future__ import annotations

import sys
import threading
from dataclasses import replace

import pytest

from lattice import JoinConflict, join, parse_table

WIDE = (  # each fits alone; together 16,000 + 50,000 bytes and more: over MariaDB's 65,535
    parse_table("CREATE TABLE t (id INT PRIMARY KEY, v1 VARCHAR(16000) CHARACTER SET latin1)"),
    parse_table("CREATE TABLE t (id INT PRIMARY KEY, v2 VARCHAR(50000) CHARACTER SET latin1)"),
)
NARROW = (
    parse_table("CREATE TABLE t (id INT PRIMARY KEY, x INT)"),
    parse_table("CREATE TABLE t (id INT PRIMARY KEY, y VARCHAR(20))"),
)
ROUNDS = 3000


@pytest.fixture
def often_switching():
    """Threads switched every microsecond, not every 5 ms: interleavings a memo can lose."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def _decide(pair, n: int) -> bool:
    """Whether the join of the pair, as new values (no identity a cache could keep), conflicts."""
    a, b = (replace(t, name=f"t{n}") for t in pair)
    return isinstance(join(a, b), JoinConflict)


def test_each_groups_ddl_thread_gets_its_own_row_size_while_another_joins(often_switching):
    assert _decide(WIDE, 0) and not _decide(NARROW, 0)
    wrong: list[str] = []
    start = threading.Barrier(2)

    def group(pair, conflicts: bool) -> None:
        start.wait()
        for n in range(ROUNDS):
            if _decide(pair, n) != conflicts:
                wrong.append(
                    f"round {n}: {'no ' if conflicts else ''}conflict for the {'wide' if conflicts else 'narrow'} group"
                )

    threads = [
        threading.Thread(target=group, args=(WIDE, True)),
        threading.Thread(target=group, args=(NARROW, False)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong, wrong[:5]
