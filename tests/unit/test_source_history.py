"""A source's schema history in the daemon (`SourceState.record`): the tables' CREATE
TABLE after each DDL, in the order of the binlog whatever order they are handed on in,
as the meta schema keeps it. A DDL handed on again (a park fed after a restart, or once
more after its shard paused again) is had already; one of before never stands for the
table as later DDLs left it (live stories L54: the source read the table again as it was
before the first pause, its rows unreadable, its next DROP COLUMN refused)."""

from __future__ import annotations

import random

import pytest

from lattice import Flavor
from replicator.source.messages import Pin
from replicator.source.source_state import PIN, SourceState
from replicator.state.positions import Position

# (change id, table, CREATE TABLE after it; None: the table gone)
DDLS = [
    ((1, 100, 0), "db.t1", "CREATE TABLE t1 (id INT PRIMARY KEY, c2 TIMESTAMP NULL)"),
    ((1, 100, 0), "db.t2", "CREATE TABLE t2 (id INT PRIMARY KEY)"),
    ((1, 300, 0), "db.t1", "CREATE TABLE t1 (id INT PRIMARY KEY, r1 TIMESTAMP NULL)"),
    ((1, 300, 1), "db.t2", None),
    ((2, 40, 0), "db.t1", "CREATE TABLE t1 (id BIGINT PRIMARY KEY, r1 TIMESTAMP NULL)"),
    ((2, 90, 0), "db.t2", "CREATE TABLE t2 (id INT PRIMARY KEY, a INT)"),
]


def expected_at(position: Position) -> dict[str, str]:
    bound = position.change(0)
    tables: dict[str, str | None] = {}
    for cid, table, sql in DDLS:
        if cid < bound:
            tables[table] = sql
    return {t: s for t, s in tables.items() if s is not None}


POSITIONS = [Position(f"mysql-bin.{f:06d}", p) for f, p in [(1, 50), (1, 200), (1, 301), (2, 50), (3, 4)]]


@pytest.mark.parametrize("seed", range(40))
def test_the_history_is_the_binlogs_order_whatever_order_its_ddls_come_in(seed):
    rng = random.Random(seed)
    handed = [d for d in DDLS for _ in range(rng.randint(1, 3))]  # some handed on again
    rng.shuffle(handed)
    state = SourceState("s1", Flavor.MARIADB)
    for cid, table, sql in handed:
        state.record(cid, {table: sql})
    # (the tables of one DDL, a RENAME TABLE of two, in any order)
    assert [cid for cid, _, _ in state.history] == sorted(cid for cid, _, _ in DDLS)
    assert sorted(state.history, key=lambda e: e[:2]) == DDLS
    for position in POSITIONS:
        assert state.schemas_at(position) == expected_at(position)
    assert state.latest_schemas() == expected_at(POSITIONS[-1])


def test_a_ddl_handed_on_again_after_later_ones_leaves_the_table_as_they_left_it():
    """The story of L54: t1's park fed again, its old DDL after t1's rename was read."""
    state = SourceState("s1", Flavor.MARIADB)
    for cid, table, sql in DDLS[:3]:
        state.record(cid, {table: sql})
    state.record(DDLS[0][0], {DDLS[0][1]: DDLS[0][2]})
    assert "r1" in state.latest_schemas()["db.t1"]
    assert "r1" in state.schemas_at(Position("mysql-bin.000001", 301))["db.t1"]


def test_a_ddl_read_again_as_another_table_says_so():
    """A DDL read again with a table a decision pinned before it (live stories 210045: read
    first while a conflict held the shard, its worker without the table `set-schema`
    gave): the tables whose entry it changes, for the daemon to save in the meta
    schema's history too, which a restart reads; the same table again changes none."""
    state = SourceState("s1", Flavor.MARIADB)
    for cid, table, sql in DDLS:
        assert state.record(cid, {table: sql}) == {}
    assert state.record(DDLS[2][0], {DDLS[2][1]: DDLS[2][2]}) == {}
    wider = "CREATE TABLE t1 (id INT PRIMARY KEY, b INT, r1 TIMESTAMP NULL)"
    assert state.record(DDLS[2][0], {"db.t1": wider}) == {"db.t1": wider}
    assert state.schemas_at(Position("mysql-bin.000001", 301))["db.t1"] == wider


def test_a_table_pinned_again_where_the_worker_said_the_first_pin_stands_after_it():
    # (L70: a skip pinned the table it kept at the shard's pause; a source read again across
    # that pin had its worker say it there; set-schema then pinned another table there, and
    # the shard, read again from the pin, took it where it started, saying nothing: the
    # entry of the first pin's word stood for the table after the pin)
    state = SourceState("s1", Flavor.MARIADB)
    kept, given = "CREATE TABLE t (id INT PRIMARY KEY)", "CREATE TABLE t (id INT PRIMARY KEY, b INT)"
    state.record((1, 50, 0), {"db.t": kept})
    state.pin(Pin((1, 100, PIN), "db.t", kept))
    state.record((1, 100, 0), {"db.t": kept})  # (the worker's word of it)
    state.pin(Pin((1, 100, PIN), "db.t", given))
    assert state.schemas_at(Position("mysql-bin.000001", 100)) == {"db.t": given}
    assert state.schemas_at(Position("mysql-bin.000001", 900)) == {"db.t": given}


def test_a_pin_leaves_the_ddl_of_its_transaction_as_it_made_the_table():
    # (a pin where the shard's next DDL starts: the pin holds before it, the DDL after)
    state = SourceState("s1", Flavor.MARIADB)
    before, after = "CREATE TABLE t (id INT PRIMARY KEY)", "CREATE TABLE t (id INT PRIMARY KEY, c INT)"
    state.record((1, 100, 0), {"db.t": after})
    state.pin(Pin((1, 100, PIN), "db.t", before))
    assert state.schemas_at(Position("mysql-bin.000001", 100)) == {"db.t": before}
    assert state.schemas_at(Position("mysql-bin.000001", 900)) == {"db.t": after}


@pytest.mark.parametrize(("start", "decided", "ahead"), [
    (50, None, True),
    (100, (1, 100, PIN), True),  # (its decision's: it may stand for a DDL there)
    (100, (1, 120, 0), True),
    (100, (1, 90, 0), False),  # (a decision before it: another's, or a start's entry)
    (100, None, False),
    (101, (1, 100, PIN), False),
])
def test_a_worker_reading_from_where_a_pin_stands_has_it_ahead_where_its_shard_decided_it(start, decided, ahead):
    # (L75: a pin where a DDL its worker cannot follow starts, binlog replace's; the source,
    # started again at that DDL, had the pin's table but not the pin ahead, so its worker said
    # the DDL as one it cannot follow, not as the table the pin gave, and the shard's window
    # could not replay its rows. A first start's entries stand at the same index for the
    # tables before a DDL there, which no decision of their shards took)
    state = SourceState("s1", Flavor.MARIADB)
    before, given = "CREATE TABLE t (id INT PRIMARY KEY)", "CREATE TABLE t (id INT PRIMARY KEY, b INT)"
    state.record((1, 10, 0), {"db.t": before})
    state.pin(Pin((1, 100, PIN), "db.t", given))
    position = Position("mysql-bin.000001", start)
    pins = state.pins_from(position, {"db.t": decided} if decided else {})
    assert [p.create for p in pins] == ([given] if ahead else [])
