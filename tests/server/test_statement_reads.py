"""Every statement shardmerge sends to a keyed table reads only the rows it changes.

On tables of 100,000 rows and more (a single-column key, a composite key, the merged
table of four shards keyed with extract columns), each statement shape the applier, the
coordinator and backfill recovery build is run by the same code the daemon runs, in a
transaction rolled back, and the server's Handler_read_* counters must not exceed the
rows it wrote (Handler_write/update/delete) by more than the one probe that ends a range.
A statement that scans, as a row constructor IN of one element does on MariaDB, reads the
whole table and fails this.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pymysql
import pytest

from replicator.apply.applier import Applier
from replicator.apply.inspect import read_table
from replicator.apply.meta import Meta
from replicator.apply.shard_rows import batch_size
from replicator.apply.statement_run import is_dml
from replicator.apply.statements import statements
from replicator.apply.table_refresh import update_info
from replicator.apply.target import TargetInfo
from replicator.compare import origin_filter
from replicator.schema.coordinator import Coordinator
from replicator.schema.plan import Player
from replicator.schema.shard_rows import BATCH
from replicator.shard_id import ShardId
from replicator.source.messages import Change
from replicator.spark.verify import RECHECK_BATCH, _Side, lookups
from replicator.state.chunks import range_chunks, where_any

ROWS = 100_000
SHARDS = tuple(ShardId(f"s{1 + i % 2}", f"db{i}", "t") for i in range(4))
EXTRACT = {"source": "_source", "schema": "_schema", "table": "_table"}
SHARD_TABLE = "CREATE TABLE t (id BIGINT PRIMARY KEY, a INT NOT NULL, b VARCHAR(32))"
READS = ("first", "key", "last", "next", "prev", "rnd", "rnd_next")
WRITES = ("write", "update", "delete")


@dataclass(frozen=True)
class Keyed:
    """A table of the test and how its rows are made: `values(n)` is row n's literals."""

    name: str
    create: str
    columns: tuple[str, ...]
    values: Callable[[int], tuple[str, ...]]
    shard: ShardId = SHARDS[0]


def _single(n: int) -> tuple[str, ...]:
    return (str(n), str(n % 97), f"'b{n}'")


def _composite(n: int) -> tuple[str, ...]:
    return (str(n // 4), f"'k{n % 4}'", str(n % 97), f"'b{n}'")


TABLES = (
    Keyed("single", "(id BIGINT PRIMARY KEY, a INT NOT NULL, b VARCHAR(32))", ("id", "a", "b"), _single),
    Keyed(
        "composite",
        "(k1 BIGINT NOT NULL, k2 VARCHAR(8) NOT NULL, a INT NOT NULL, b VARCHAR(32), PRIMARY KEY (k1, k2))",
        ("k1", "k2", "a", "b"),
        _composite,
    ),
)


class Server:
    """One connection to the downstream, counting what each statement reads and writes."""

    def __init__(self, conn) -> None:
        self.conn = conn

    def run(self, sql: str) -> None:
        with self.conn.cursor() as cur:
            cur.execute(sql)

    def _handlers(self) -> dict[str, int]:
        with self.conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Handler_%'")
            return {name[len("Handler_") :].lower(): int(value) for name, value in cur.fetchall()}

    def measure(self, statements: list[str], keep: bool = False) -> tuple[int, int]:
        """Rows read and rows written by the statements, rolled back afterwards unless `keep`."""
        self.run("START TRANSACTION")
        before = self._handlers()
        try:
            for sql in statements:
                self.run(sql)
            after = self._handlers()
        finally:
            self.run("COMMIT" if keep else "ROLLBACK")
        read = sum(after[f"read_{k}"] - before[f"read_{k}"] for k in READS)
        return read, sum(after[k] - before[k] for k in WRITES)


@pytest.fixture(scope="module")
def server(sandbox) -> Iterator[Server]:
    db = f"reads_{uuid.uuid4().hex[:8]}"
    down = sandbox.downstream
    conn = down.connect(autocommit=True)
    try:
        server = Server(conn)
        server.run(f"CREATE DATABASE `{db}`")
        server.run(f"USE `{db}`")
        for table in TABLES:
            server.run(f"CREATE TABLE {table.name} {table.create}")
        server.run(f"INSERT INTO single SELECT seq, seq % 97, CONCAT('b', seq) FROM seq_1_to_{ROWS}")
        server.run(
            f"INSERT INTO composite SELECT seq DIV 4, CONCAT('k', seq % 4), seq % 97, CONCAT('b', seq) "
            f"FROM seq_1_to_{ROWS}"
        )
        yield server
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
        conn.close()


def _info(server: Server, name: str) -> TargetInfo:
    db = _db(server)
    info = TargetInfo(f"{db}.{name}", f"`{db}`.`{name}`", {}, None, 1)
    update_info(info, read_table(server.conn, db, name))
    return info


def _applier(info: TargetInfo, safe: bool = False) -> Applier:
    return Applier(
        Meta(lambda: None, "m", "task"), {info.name: info}, {}, 1, 100, lambda _: safe, {}, lambda _: None
    )


def _statements(info: TargetInfo, changes: list[Change], safe: bool = False) -> list[str]:
    """The statements the applier sends for these changes (an update that moves its key
    split as the applier splits it)."""
    applier = _applier(info, safe)
    routed = [half for change in changes for _, half in applier.partitioner.halves(change)]
    return statements(routed, {info.name: info}, {info.name: info.major}, safe)


# Row changes of each shape, on rows n that exist (below ROWS) or do not (above).
def _insert(t: Keyed, info: TargetInfo, rows: range) -> list[Change]:
    return [Change((1, 1, n), t.shard, info.name, "I", t.columns, t.values(n)) for n in rows]


def _update(t: Keyed, info: TargetInfo, rows: range, moved: int = 0) -> list[Change]:
    b = t.columns.index("b")

    def after(n: int) -> tuple[str, ...]:
        row = t.values(n + moved)
        return (*row[:b], "'changed'", *row[b + 1 :])

    return [Change((1, 1, n), t.shard, info.name, "U", t.columns, after(n), t.values(n)) for n in rows]


def _delete(t: Keyed, info: TargetInfo, rows: range) -> list[Change]:
    return [Change((1, 1, n), t.shard, info.name, "D", t.columns, None, t.values(n)) for n in rows]


NEW = range(ROWS + 10, ROWS + 20)
SHAPES: list[tuple[str, Callable[[Keyed, TargetInfo], list[Change]], bool, bool]] = [
    # (what, changes, safe mode, sole key)
    ("insert of one row", lambda t, i: _insert(t, i, range(ROWS + 5, ROWS + 6)), False, True),
    ("multi-row insert", lambda t, i: _insert(t, i, NEW), False, True),
    ("upsert of one update", lambda t, i: _update(t, i, range(500, 501)), False, True),
    ("upsert of a run of updates", lambda t, i: _update(t, i, range(500, 510)), False, True),
    ("update by the key", lambda t, i: _update(t, i, range(700, 701)), False, False),
    ("delete of one row", lambda t, i: _delete(t, i, range(900, 901)), False, True),
    ("delete of a run of rows", lambda t, i: _delete(t, i, range(900, 920)), False, True),
    (
        "update that moves its key",
        lambda t, i: _update(t, i, range(1100, 1101), moved=ROWS + 50),
        False,
        True,
    ),
    (
        "rows deleted and made again (sysbench's transaction) as an upsert",
        lambda t, i: [*_update(t, i, range(1600, 1610)), *_delete(t, i, range(1600, 1610)),
                      *_insert(t, i, range(1600, 1610))],
        False,
        True,
    ),
    ("safe-mode insert as REPLACE", lambda t, i: _insert(t, i, range(1300, 1305)), True, True),
    ("safe-mode upsert of a run of updates", lambda t, i: _update(t, i, range(1400, 1410)), True, True),
    ("safe-mode insert, another unique key", lambda t, i: _insert(t, i, range(1300, 1305)), True, False),
    ("safe-mode update, another unique key: DELETE + INSERT", lambda t, i: _update(t, i, range(1400, 1401)), True, False),
]


def _assert_reads_only_what_it_changes(server: Server, statements: list[str]) -> None:
    read, wrote = server.measure(statements)
    assert wrote > 0, f"the statements changed nothing: {statements}"
    assert read <= wrote + len(statements), (
        f"read {read} rows to change {wrote}: {[s[:160] for s in statements]}"
    )


@pytest.mark.parametrize("table", TABLES, ids=[t.name for t in TABLES])
@pytest.mark.parametrize(("what", "changes", "safe", "sole"), SHAPES, ids=[s[0] for s in SHAPES])
def test_each_applier_statement_reads_only_the_rows_it_changes(server, table, what, changes, safe, sole):
    info = _info(server, table.name)
    info.update(sole_key=sole)
    _assert_reads_only_what_it_changes(server, _statements(info, changes(table, info), safe))


def test_safe_mode_with_another_unique_key_refuses_a_row_meeting_another_and_deletes_none(server):
    """L60: safe mode applies a row again by deleting its own by its key and inserting it; a
    REPLACE deleted every row any unique key met, another row of the shard holding the value
    of a key only the downstream has (its shard dropped it, the operator skipped that DDL).
    The meeting is refused now (then the shard pauses with a way out), as out of safe mode."""
    server.run("CREATE TABLE two_keys (id INT PRIMARY KEY, u INT NOT NULL, UNIQUE KEY (u))")
    try:
        server.run("INSERT INTO two_keys VALUES (1, 7)")
        info = _info(server, "two_keys")
        assert not info.sole_key
        shard = SHARDS[0]

        def insert(row: tuple[str, str]) -> list[str]:
            return _statements(info, [Change((1, 1, 1), shard, info.name, "I", ("id", "u"), row)], safe=True)

        for statement in insert(("1", "7")):  # applied again: the same row, once
            server.run(statement)
        with pytest.raises(pymysql.err.IntegrityError) as refused:
            for statement in insert(("2", "7")):
                server.run(statement)
        assert refused.value.args[0] == 1062
        with server.conn.cursor() as cur:
            cur.execute("SELECT id, u FROM two_keys ORDER BY id")
            assert cur.fetchall() == ((1, 7),)
    finally:
        server.run("DROP TABLE two_keys")


def test_the_detector_catches_a_row_constructor_in_of_one_element(server):
    """The form the applier once sent for a lone delete reads the whole table."""
    read, wrote = server.measure(["DELETE FROM composite WHERE (k1,k2) IN ((10,'k2'))"])
    assert wrote == 1 and read >= ROWS


# -- the merged table: four shards' rows told apart by extract columns ---------------------
@pytest.fixture(scope="module")
def merged(server) -> Player:
    """`merged`, made by the coordinator for four shards, each with ROWS / 4 rows."""
    player = Player("x.merged", coordinator=Coordinator("x.merged", "mariadb", extract_columns=EXTRACT))
    decisions = player.start({shard: SHARD_TABLE for shard in SHARDS})
    for statement in (s for d in decisions for s in d.downstream):
        server.run(statement.replace("`x`.", ""))
    per_shard = ROWS // len(SHARDS)
    for shard in SHARDS:
        server.run(
            f"INSERT INTO merged (id, a, b, _source, _schema, _table) SELECT seq, seq % 97, CONCAT('b', seq), "
            f"'{shard.source}', '{shard.schema}', '{shard.table}' FROM seq_1_to_{per_shard}"
        )
    return player


def _downstream(server: Server, player: Player, shard: ShardId, ddl: str) -> list[tuple[str, int, int]]:
    """The coordinator's statements for a shard's DDL, run in order; for each one on rows,
    what it read and wrote (rolled back where no later statement of the DDL needs it)."""
    decision = player.ddl(shard, ddl)
    statements = [s.replace("`x`.", "") for s in decision.downstream]
    measured = []
    for n, statement in enumerate(statements):
        if not is_dml(statement):
            server.run(statement)
            continue
        # (opening the table after a DDL reads its persistent statistics: not the statement's reads)
        server.run("SELECT * FROM merged LIMIT 0")
        read, wrote = server.measure([statement], keep=n < len(statements) - 1)
        measured.append((statement, read, wrote))
    return measured


def test_the_extract_columns_lead_the_primary_key(server, merged):
    primary = read_table(server.conn, _db(server), "merged").primary_key
    assert [p.column for p in primary.parts] == ["_source", "_schema", "_table", "id"]


def test_merged_table_statements_read_only_the_rows_they_change(server, merged):
    info = _info(server, "merged")
    shard = SHARDS[2]
    table = Keyed("merged", "", ("id", "a", "b", "_source", "_schema", "_table"), _merged_row(shard), shard)
    for what, changes, safe, sole in SHAPES:
        info.update(sole_key=sole)
        statements = _statements(info, changes(table, info), safe)
        read, wrote = server.measure(statements)
        assert wrote > 0 and read <= wrote + len(statements), (what, read, wrote, statements)


def _merged_row(shard: ShardId) -> Callable[[int], tuple[str, ...]]:
    def values(n: int) -> tuple[str, ...]:
        return (str(n), str(n % 97), f"'b{n}'", f"'{shard.source}'", f"'{shard.schema}'", f"'{shard.table}'")

    return values


def test_a_shard_fill_reads_only_that_shards_rows(server, merged):
    """A shard adding a column whose rows downstream hold another value: its rows are set."""
    assert not _downstream(server, merged, SHARDS[0], "ALTER TABLE t ADD COLUMN c INT NOT NULL")
    ((fill, read, wrote),) = _downstream(
        server, merged, SHARDS[1], "ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 5"
    )
    assert fill.startswith("UPDATE")
    assert wrote == ROWS // len(SHARDS) and read <= wrote + 1


def test_a_shards_truncate_deletes_its_rows_in_batches_reading_only_them(server, merged):
    """Issue 46: the batches of `run_batches`, each read by the key's range of the rows it
    deletes (EXPLAIN: the primary key, a range on the extract columns), together every row
    of the shard and no other (rolled back afterwards)."""
    (statement,) = merged.ddl(SHARDS[3], "TRUNCATE TABLE t").downstream
    statement = statement.replace("`x`.", "")
    assert batch_size(statement) == BATCH
    with server.conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("EXPLAIN " + statement)
        (plan,) = cur.fetchall()
    assert plan["key"] == "PRIMARY" and plan["type"] == "range", plan
    server.run("SELECT * FROM merged LIMIT 0")
    server.run("START TRANSACTION")
    batches = []
    try:
        while True:
            before = server._handlers()
            with server.conn.cursor() as cur:
                rows = cur.execute(statement)
            after = server._handlers()
            read = sum(after[f"read_{k}"] - before[f"read_{k}"] for k in READS)
            batches.append((read, rows))
            if rows < BATCH:
                break
        with server.conn.cursor() as cur:
            cur.execute("SELECT _schema, COUNT(*) FROM merged GROUP BY _schema")
            left = dict(cur.fetchall())
    finally:
        server.run("ROLLBACK")
    per_shard = ROWS // len(SHARDS)
    assert sum(rows for _, rows in batches) == per_shard and len(batches) == per_shard // BATCH + 1
    assert all(read <= rows + 1 for read, rows in batches), batches
    assert left == {s.schema: per_shard for s in SHARDS[:3]}


def test_backfill_recovery_deletes_read_only_the_unfinished_chunks_rows(server, merged):
    """`_clear_pending`'s statement: a shard's unfinished chunks, by the shard's key."""
    shard = SHARDS[1]
    chunks = range_chunks(1, ROWS // len(SHARDS), 8)
    pending = [chunks[2], chunks[3], chunks[6]]
    where = where_any(pending, "`id`")
    read, wrote = server.measure([f"DELETE FROM merged WHERE {origin_filter(EXTRACT, shard)} AND ({where})"])
    assert wrote == sum(_rows_in(c) for c in pending) and read <= wrote + 2


def test_a_renames_last_copy_reads_only_the_rows_written_under_the_old_name(server, merged):
    """The rename (docs/design.md "Renaming columns"): the first shard's rename moves every value to the new name and
    brings the old name back, empty and indexed; rows the other shards write meanwhile hold
    their value there; the last shard's copy moves just those (lattice/old_name_index.py)."""
    started = _downstream(server, merged, SHARDS[0], "ALTER TABLE t CHANGE b bb VARCHAR(32)")
    assert not started  # (statements on columns only)
    late, written = SHARDS[1], 40
    server.run(
        f"UPDATE merged SET b = CONCAT('late', id), bb = NULL WHERE {origin_filter(EXTRACT, late)} "
        f"AND id BETWEEN 1000 AND {999 + written}"
    )
    for shard in SHARDS[1:3]:
        assert not _downstream(server, merged, shard, "ALTER TABLE t CHANGE b bb VARCHAR(32)")
    ((copy, read, wrote),) = _downstream(server, merged, SHARDS[3], "ALTER TABLE t CHANGE b bb VARCHAR(32)")
    assert copy.startswith("UPDATE") and wrote == written and read <= wrote + 1, (copy, read, wrote)
    with server.conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM merged WHERE bb LIKE 'late%' AND {origin_filter(EXTRACT, late)}")
        assert cur.fetchone()[0] == written


def _rows_in(chunk) -> int:
    low = chunk.low if chunk.low is not None else 1
    high = chunk.high if chunk.high is not None else ROWS // len(SHARDS) + 1
    return high - low


def _db(server: Server) -> str:
    with server.conn.cursor() as cur:
        cur.execute("SELECT DATABASE()")
        return cur.fetchone()[0]


def test_verifys_lookups_by_key_read_only_the_rows_they_look_for(server, merged):
    """Issue 71: verify reads again by key the rows it found differing (`_recheck`), in
    batches of RECHECK_BATCH keys: one probe of the primary key each, on the merged table
    (its shard's extract columns in each key) and on a shard's table (whose key holds them
    as constants), for keys that are there and keys that are not."""
    shard, other = SHARDS[1], SHARDS[2]
    per_shard = ROWS // len(SHARDS)
    there = [(shard.source, shard.schema, shard.table, str(n)) for n in range(7, per_shard, per_shard // 300)]
    gone = [(shard.source, shard.schema, shard.table, str(ROWS + n)) for n in range(1, 301)]
    theirs = [(other.source, other.schema, other.table, str(n)) for n in range(1, 101)]
    keys = {*there, *gone, *theirs}
    columns = ("`_source`", "`_schema`", "`_table`", "`id`")
    down = _Side({}, "merged", origin_filter(EXTRACT, shard), "", columns, "CRC32(id)", "`id`",
                 tuple((c, None) for c in columns))
    constants = tuple(f"'{v}'" for v in (shard.source, shard.schema, shard.table))
    up = _Side({}, "single", "1=1", "", (*constants, "`id`"), "CRC32(id)", "`id`",
               (("", shard.source), ("", shard.schema), ("", shard.table), ("`id`", None)))
    for side, found in ((down, len(there)), (up, len(there))):
        statements = lookups(side, keys)
        assert len(statements) == -(-len(keys if side is down else {*there, *gone}) // RECHECK_BATCH)
        server.run("SELECT * FROM merged LIMIT 0")
        read, _ = server.measure(statements)
        with server.conn.cursor() as cur:
            rows = sum(cur.execute(sql) for sql in statements)
        assert rows == found, (side.table, rows)
        # (the other shard's keys are no probe: its rows cannot be this side's)
        assert read <= len(there) + len(gone), (side.table, read, [s[:200] for s in statements])
