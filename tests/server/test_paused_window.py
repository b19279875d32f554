"""The scratch table of a shard's paused time (`replicator/apply/paused_window.py`) on the real
downstream: its rows go in as the target's would, its DDLs convert them the server's way.

Live story 611378 (tests/live_findings/README.md, L61): a shard paused on a DDL that widened
a column upstream, the operator skipped it (`binlog skip`), and the rows it wrote meanwhile,
replayed into a scratch table shaped as the table it kept, lost all but a character of their
values, silently."""

from __future__ import annotations

import contextlib

import pymysql
import pytest

from lattice import parse_table
from replicator.apply.paused_window import DELETED, PausedWindow
from replicator.servers import connect_downstream
from replicator.shard_id import ShardId
from replicator.source.messages import Change

SHARD = ShardId("s2", "db", "t1")
KEPT = (  # the shard's table as the daemon keeps it after the skip; upstream c2 is CHAR(10) now
    "CREATE TABLE `t1` (`id` bigint NOT NULL, `c2` varchar(1) CHARACTER SET utf8mb4 NULL DEFAULT '', "
    "PRIMARY KEY (`id`)) DEFAULT CHARSET=latin1"
)


def _window(sandbox, scratch_db: str, create: str) -> tuple[PausedWindow, dict]:
    down = sandbox.downstream
    kwargs = {"host": down.host, "port": down.port, "user": down.user, "password": down.password}
    window = PausedWindow(SHARD, parse_table(create), (1, 1, 0), (2, 0), scratch_db, "mariadb")
    for statement in window.create_sql():
        down.execute(statement)
    return window, kwargs


def _rows(sandbox, window: PausedWindow) -> list[tuple]:
    return sandbox.downstream.execute(f"SELECT id, c2, `{DELETED}` FROM {window.quoted} ORDER BY id")


def _flush(window: PausedWindow, kwargs: dict) -> None:
    with contextlib.closing(connect_downstream(kwargs)) as conn:
        window.flush(conn)


@pytest.mark.parametrize("op", ["I", "U", "D"])
def test_a_row_the_scratch_table_cannot_hold_is_refused_not_cut(sandbox, scratch_db, op):
    window, kwargs = _window(sandbox, scratch_db, KEPT)
    long, short = "'xxxxxxxxxx'", "'x'"
    if op == "I":
        change = Change((1, 5, 0), SHARD, "t.t", "I", ("id", "c2"), ("7", long))
    elif op == "U":
        change = Change((1, 5, 0), SHARD, "t.t", "U", ("id", "c2"), ("7", long), ("7", short))
    else:
        change = Change((1, 5, 0), SHARD, "t.t", "D", ("id", "c2"), None, ("8", long))
    window.row(change)
    # (1406: data too long; before L61's fix the row went in as 'x', without a word)
    with pytest.raises(pymysql.err.DataError):
        _flush(window, kwargs)
    assert _rows(sandbox, window) == [], "a row reached the scratch table cut"


def test_rows_that_fit_go_in_as_they_are_and_the_shards_ddls_convert_them_the_lenient_way(sandbox, scratch_db):
    """Rows of the paused time that fit go in whole; a DDL the shard ran meanwhile converts them
    (and the markers of rows deleted before it, which it never saw upstream) as the server
    does outside strict mode: the reason the scratch session was lenient."""
    create = KEPT.replace("varchar(1)", "varchar(10)")
    window, kwargs = _window(sandbox, scratch_db, create)
    window.row(Change((1, 5, 0), SHARD, "t.t", "I", ("id", "c2"), ("1", "'abc'")))
    window.row(Change((1, 6, 0), SHARD, "t.t", "D", ("id", "c2"), None, ("2", "'abcdefghij'")))
    narrower = parse_table(KEPT.replace("varchar(1)", "varchar(3)"))
    window.alter(narrower, (), (), (1, 7, 0))
    window.row(Change((1, 8, 0), SHARD, "t.t", "I", ("id", "c2"), ("3", "'xyz'")))
    _flush(window, kwargs)
    assert _rows(sandbox, window) == [(1, "abc", 0), (2, "abc", 1), (3, "xyz", 0)]
    with contextlib.closing(connect_downstream(kwargs)) as conn, conn.cursor() as cur:
        window.row(Change((1, 9, 0), SHARD, "t.t", "I", ("id", "c2"), ("4", "'wxyz'")))
        with pytest.raises(pymysql.err.DataError):  # (after the DDL too: strict again)
            window.flush(conn)
        conn.rollback()
        cur.execute("SELECT @@SESSION.sql_mode")
        assert "STRICT_TRANS_TABLES" in cur.fetchone()[0]


TARGET_UNIQUE = (
    "CREATE TABLE {t} (`id` bigint NOT NULL, `c2` varchar(10) NULL, `_source` varchar(8) NOT NULL, "
    "PRIMARY KEY (`_source`, `id`), UNIQUE KEY `u` (`c2`))"
)


@pytest.mark.parametrize("unique", [True, False], ids=["another-unique-key", "the-key-only"])
def test_the_merge_writes_the_shards_rows_and_never_over_another_shards_row(sandbox, scratch_db, unique):
    """The window's rows into a target whose rows s1 holds too: an update, an insert and a
    delete of s2's go in. With another unique key downstream, an s2 row meeting s1's there is
    refused (the shard pauses again for the operator) and s1's row stays as it is, where an
    upsert wrote s2's row over it; with the key only, the upsert merges them."""
    window, kwargs = _window(sandbox, scratch_db, KEPT.replace("varchar(1)", "varchar(10)"))
    target = f"`{scratch_db}`.`t`"
    create = TARGET_UNIQUE.format(t=target)
    sandbox.downstream.execute(create if unique else create.replace(", UNIQUE KEY `u` (`c2`)", ""))
    sandbox.downstream.execute(
        f"INSERT INTO {target} VALUES (1, 'theirs', 's1'), (1, 'old', 's2'), (2, 'gone', 's2')"
    )
    window.row(Change((1, 5, 0), SHARD, "t.t", "U", ("id", "c2"), ("1", "'new'"), ("1", "'old'")))
    window.row(Change((1, 6, 0), SHARD, "t.t", "D", ("id", "c2"), None, ("2", "'gone'")))
    window.row(Change((1, 7, 0), SHARD, "t.t", "I", ("id", "c2"), ("3", "'three'")))
    _flush(window, kwargs)
    columns = {"id": "id", "c2": "c2", "_source": "_source"}
    merge = window.merge_sql(f"{scratch_db}.t", columns, {"_source": "'s2'"}, (), sole_key=not unique)
    rows = f"SELECT _source, id, c2 FROM {target} ORDER BY _source, id"
    with contextlib.closing(connect_downstream(kwargs)) as conn, conn.cursor() as cur:
        for statement in merge:
            cur.execute(statement)
        conn.commit()
    assert sandbox.downstream.execute(rows) == [("s1", 1, "theirs"), ("s2", 1, "new"), ("s2", 3, "three")]
    if not unique:
        return
    window.row(Change((1, 8, 0), SHARD, "t.t", "I", ("id", "c2"), ("4", "'theirs'")))
    _flush(window, kwargs)
    merge = window.merge_sql(f"{scratch_db}.t", columns, {"_source": "'s2'"}, (), sole_key=False)
    with contextlib.closing(connect_downstream(kwargs)) as conn, conn.cursor() as cur:
        with pytest.raises(pymysql.err.IntegrityError, match="Duplicate entry 'theirs'"):
            for statement in merge:
                cur.execute(statement)
        conn.rollback()
    assert sandbox.downstream.execute(rows) == [("s1", 1, "theirs"), ("s2", 1, "new"), ("s2", 3, "three")]
