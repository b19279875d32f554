"""The incremental join equals the join of every shard from scratch, through any
sequence of shards joining, changing and leaving."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lattice import Conflict, IncrementalJoin, JoinConflict, join_all, parse_table
from tests.strategies import base_tables, is_valid, mutations


@st.composite
def histories(draw):
    base = draw(base_tables())
    ops = []
    live = 0
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["add", "add", "change", "change", "remove"]))
        if kind != "add" and live == 0:
            kind = "add"
        if kind == "add":
            ops.append(("add", draw(mutations(base))))
            live += 1
        elif kind == "change":
            ops.append(("change", draw(st.integers(0, live - 1)), draw(mutations(base))))
        else:
            ops.append(("remove", draw(st.integers(0, live - 1))))
            live -= 1
    return ops


@pytest.mark.parametrize("flavor", ["mariadb", "tidb"])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=histories())
def test_incremental_join_equals_join_all(flavor, ops):
    incremental = IncrementalJoin(flavor)
    tables = []
    for op in ops:
        if op[0] == "add":
            if not is_valid(op[1]):
                continue
            tables.append(op[1])
            incremental.add(op[1])
        elif op[0] == "change" and op[1] < len(tables):
            if not is_valid(op[2]):
                continue
            incremental.replace(tables[op[1]], op[2])
            tables[op[1]] = op[2]
        elif op[0] == "remove" and op[1] < len(tables):
            incremental.remove(tables.pop(op[1]))
        if not tables:
            continue
        expected = join_all(tables, flavor)
        try:
            got = incremental.table()
        except Conflict:
            assert isinstance(expected, JoinConflict)
            continue
        assert not isinstance(expected, JoinConflict), f"incremental joined what join_all refuses: {expected}"
        assert got == expected


def test_what_ddls_passed_through_gives_way_once_no_shard_holds_it():
    """The coordinator passes a DDL's table options and column comments through (docs/design.md
    "Idempotent DDLs"); once the shards holding one have left, the join decides (F14)."""
    plain = parse_table("CREATE TABLE t (id INT PRIMARY KEY, a INT) ENGINE=InnoDB DEFAULT CHARSET=latin1")
    commented = parse_table(
        "CREATE TABLE t (id INT PRIMARY KEY, a INT COMMENT 'x') ENGINE=InnoDB DEFAULT CHARSET=latin1 COMMENT='one'"
    )
    passed = commented.options
    incremental = IncrementalJoin("mariadb")
    for table in (plain, commented):
        incremental.add(table)
    assert incremental.held_options(passed) == passed
    assert incremental.held_comments({"a": "x", "gone": "y"}) == {"a": "x"}
    incremental.remove(commented)
    assert incremental.held_options(passed) == plain.options
    assert incremental.held_comments({"a": "x"}) == {}
    incremental.remove(plain)
    assert incremental.held_options(passed) is None


def test_an_option_every_shard_agrees_on_wins_over_what_passed_through():
    """F122 (seed 631185): a pass-through stands while the shards differ; an option every
    shard (or a paused shard's table given as `also`) has one value of is that value; a
    character set goes with its collation."""
    latin = parse_table("CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB DEFAULT CHARSET=latin1 COMMENT='b'")
    utf8 = parse_table(
        "CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
    )
    passed = utf8.options  # the last DDL's: no comment
    incremental = IncrementalJoin("mariadb")
    incremental.add(latin)
    assert incremental.agreed_options(passed) == latin.options
    assert incremental.agreed_options(passed, also=[utf8]) == passed  # they differ: passed through
    incremental.add(utf8)
    mixed = incremental.agreed_options(latin.options)
    assert (mixed.charset, mixed.collation, mixed.comment) == (latin.options.charset, latin.options.collation, "b")
    incremental.remove(latin)
    assert incremental.agreed_options(latin.options) == utf8.options


def test_a_change_the_join_does_not_see_keeps_the_joined_table_and_a_conflict_stays_one():
    """Most DDLs of a large group leave the join as it was: the same table comes back
    (the coordinator's decision then costs little); a conflict is never taken for that."""
    plain = parse_table("CREATE TABLE t (id INT PRIMARY KEY, c INT)")
    with_d = parse_table("CREATE TABLE t (id INT PRIMARY KEY, c INT, d INT)")
    unsigned = parse_table("CREATE TABLE t (id INT PRIMARY KEY, c BIGINT UNSIGNED)")
    shards = [plain, *(parse_table("CREATE TABLE t (id INT PRIMARY KEY, c INT)") for _ in range(2))]
    incremental = IncrementalJoin("mariadb")
    for table in shards:
        incremental.add(table)
    before = incremental.table()
    incremental.replace(shards[1], with_d)  # d joins, partial
    first = incremental.table()
    assert first is not before and first.column("d").partial
    incremental.replace(shards[2], with_d)  # d is still partial: the same join
    assert incremental.table() is first
    incremental.replace(shards[0], unsigned)
    with pytest.raises(Conflict):
        incremental.table()
    incremental.replace(with_d, parse_table("CREATE TABLE t (id INT PRIMARY KEY, c INT, d INT)"))
    with pytest.raises(Conflict):  # (an equal table in place of another: the conflict stays)
        incremental.table()
    incremental.replace(unsigned, with_d)
    assert incremental.table() == join_all([with_d, with_d, with_d], "mariadb")
