"""End to end on the sandbox: real binlogs, the real daemon process, 2 sources × 2
shard tables → 1 target. Rows and DDLs interleave; after the workload stops and the
daemon catches up, the downstream table equals the union of the shards row for row
(projected onto the joined schema) and its schema equals the coordinator's.
The same holds when the daemon is killed with SIGKILL at chosen points and
restarted: nothing lost, nothing duplicated."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys
import threading
import time

import pytest

from replicator.compiled import MODULES
from tests.replication import REPO, ReplicationTask

CREATE = ("CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, note VARCHAR(20), "
          "created DATE NOT NULL DEFAULT '2026-01-01') DEFAULT CHARSET=utf8mb4")


class Workload:
    """Rows and DDLs on four shards, in different orders on different shards: add a
    column, widen a type, an index, a rename, a drop, with inserts, updates and
    deletes in between."""

    def __init__(self, task: ReplicationTask, seed: int = 7):
        self.task = task
        self.random = random.Random(seed)
        self.next_id = {s: itertools.count(1) for s in task.shards}
        self.note = dict.fromkeys(task.shards, "note")  # the name of the note column now

    def rows(self, shard, n: int) -> None:
        ids = [next(self.next_id[shard]) for _ in range(n)]
        values = ",".join(f"({i}, {i}.25, 'r{i}')" for i in ids)
        self.task.sql(shard, f"INSERT INTO {{t}} (id, amount, `{self.note[shard]}`) VALUES {values}")

    def churn(self, shard) -> None:
        self.task.sql(shard, f"UPDATE {{t}} SET amount = amount + 1, `{self.note[shard]}` = 'upd' "
                             f"WHERE id % 7 = {self.random.randint(0, 6)}")
        self.task.sql(shard, f"DELETE FROM {{t}} WHERE id % 11 = {self.random.randint(0, 10)}")

    def rename(self, shard) -> None:
        self.task.sql(shard, "ALTER TABLE {t} RENAME COLUMN note TO remark")
        self.note[shard] = "remark"

    def steps(self):
        a, b, c, d = self.task.shards
        every = self.task.shards
        yield lambda: [self.rows(s, 40) for s in every]
        yield lambda: self.task.sql(a, "ALTER TABLE {t} ADD COLUMN coupon VARCHAR(10) NOT NULL DEFAULT ''")
        yield lambda: [self.rows(s, 15) for s in (a, c)]
        yield lambda: self.task.sql(c, "ALTER TABLE {t} ADD COLUMN coupon VARCHAR(10) NOT NULL DEFAULT ''")
        yield lambda: self.task.sql(b, "ALTER TABLE {t} MODIFY amount DECIMAL(12,4) NOT NULL")
        yield lambda: [self.churn(s) for s in every]
        yield lambda: self.task.sql(d, "ALTER TABLE {t} ADD INDEX by_created (created)")
        yield lambda: self.rename(b)
        yield lambda: [self.rows(s, 10) for s in every]
        yield lambda: self.rename(a)
        yield lambda: [self.churn(s) for s in (a, b)]
        yield lambda: self.task.sql(b, "ALTER TABLE {t} ADD COLUMN coupon VARCHAR(10) NOT NULL DEFAULT ''")
        yield lambda: self.rename(d)
        yield lambda: self.task.sql(d, "ALTER TABLE {t} ADD COLUMN coupon VARCHAR(10) NOT NULL DEFAULT ''")
        yield lambda: [self.rows(s, 20) for s in every]
        yield lambda: self.rename(c)
        yield lambda: self.task.sql(a, "ALTER TABLE {t} DROP COLUMN created")
        yield lambda: [self.churn(s) for s in every]
        yield lambda: [self.rows(s, 25) for s in every]

    def run(self, pause: float = 0.05) -> None:
        for step in self.steps():
            step()
            time.sleep(pause)


@pytest.fixture
def task(sandbox, tmp_path):
    t = ReplicationTask(sandbox, tmp_path, CREATE)
    yield t
    t.cleanup()


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "as-python"])
def test_rows_and_ddls_interleaved_end_equal(task, pure):
    """The row path compiled (`make compiled`, as `make setup` builds it) and as Python."""
    task.pure = pure
    task.start()
    said = next(line for line in task.log_text().splitlines() if " row path " in line)
    if pure:
        assert "row path as Python (SHARDMERGE_PURE set)" in said
    else:  # (a module edited since `make compiled` would run as Python, and say so here)
        assert f"row path compiled: {len(MODULES)} of {len(MODULES)} modules" in said, said
    Workload(task).run()
    task.wait_in_sync(timeout=90)
    table = task.coordinator_table()
    assert table.column("remark") is not None and table.column("note") is None  # the rename finished
    assert table.column("coupon") is not None and not table.column("coupon").partial
    assert table.column("created").partial  # dropped on one shard only
    assert table.column("amount").type.precision == 12
    assert task.stop() == 0
    assert "stopped cleanly" in task.log_text()


@pytest.mark.parametrize("crash_at", [
    "batch_written:4",  # rows written, transaction not committed
    "batch_committed:6",  # committed, before the daemon knew
    "ddl_decided:2",  # the coordinator decided, nothing saved yet
    "ddl_journaled:3",  # the journal is written, the downstream DDL not run
    "ddl_statement_ran:2",  # a downstream DDL ran, its journal progress not written
])
def test_killed_at_a_crash_point_and_restarted(task, crash_at):
    task.crash_and_recover(crash_at, Workload(task).run)


def test_sigkill_at_random_moments_loses_and_duplicates_nothing(task):
    rng = random.Random(11)
    task.start()
    workload = threading.Thread(target=Workload(task).run, kwargs={"pause": 0.2})
    workload.start()
    while workload.is_alive():
        time.sleep(rng.uniform(0.5, 1.5))
        task.kill()
        task.start()
    workload.join()
    task.wait_in_sync(timeout=90)
    assert task.stop() == 0


def test_killed_while_a_shard_is_blocked(task):
    a, _b, c, d = task.shards
    w = Workload(task)
    task.start()
    for s in task.shards:
        w.rows(s, 10)
    task.sql(a, "ALTER TABLE {t} ADD COLUMN extra INT")
    task.sql(c, "ALTER TABLE {t} ADD COLUMN extra DATETIME")  # conflict: c pauses
    task.sql(c, "INSERT INTO {t} (id, amount, extra) VALUES (900, 1, '2026-11-21 10:00:00')")
    w.rows(d, 5)
    blocked = str(task.shard_id(c))
    task.wait_for(lambda: blocked in task.log_text() and "paused" in task.log_text(), what="the conflict")
    task.kill()
    task.start()
    task.sql(a, "ALTER TABLE {t} DROP COLUMN extra")  # non-intrusive resolution
    task.wait_in_sync(timeout=90)
    assert "resumes" in task.log_text()
    assert task.stop() == 0


def test_unparseable_ddl_blocks_only_its_shard(task):
    a, b, c, d = task.shards
    w = Workload(task)
    task.start()
    task.sql(b, "ALTER TABLE {t} ADD COLUMN packed BLOB COMPRESSED=zlib")  # MariaDB takes it, we cannot read it
    w.rows(b, 5)
    for s in (a, c, d):
        w.rows(s, 20)
    task.wait_for(lambda: str(task.shard_id(b)) in _status(task)["groups"][f"{task.target_db}.orders"]["blocked"],
                  what="the blocked shard in the status")
    block = _status(task)["groups"][f"{task.target_db}.orders"]["blocked"][str(task.shard_id(b))]
    assert block["kind"] == "unsupported"
    assert "COMPRESSED=zlib" in block["ddl"] and "at line 1, column" in block["reason"]
    assert block["position"].startswith("mysql-bin.")
    # the other shards keep flowing
    down = task.sandbox.downstream
    task.wait_for(lambda: down.execute(f"SELECT COUNT(*) FROM `{task.target_db}`.orders WHERE _table='{a[2]}'")[0][0]
                  == 20, what="rows of the other shards")
    assert down.execute(f"SELECT COUNT(*) FROM `{task.target_db}`.orders WHERE _table='{b[2]}'")[0][0] == 0
    assert task.stop() == 0


def test_rows_right_behind_a_rename_waiting_downstream_keep_their_new_values(task):
    """A shard's rows that wait behind its rename (its earlier rows wait on a lock
    downstream) clear the old name as the rename left the shard: the last shard's copy
    from the old name then leaves their new values alone (they were lost when the
    clearing was decided before the rename was)."""
    a, b, c, d = task.shards
    task.start()
    task.sql(b, "ALTER TABLE {t} RENAME COLUMN note TO remark")  # the rename is pending from here
    task.wait_for(lambda: (task.coordinator_table() or task.upstream_join()).column("remark") is not None,
                  what="the rename started downstream")
    for n, shard in enumerate(task.shards):  # a's rows hold their values under note
        column = "remark" if shard == b else "note"
        task.sql(shard, f"INSERT INTO {{t}} (id, amount, {column}) VALUES (1, 1, 'n{n}'), (2, 2, 'n{n}'), (3, 3, 'n{n}')")
    down = task.sandbox.downstream
    # (not in sync by the shards' columns while the rename is pending: count the rows)
    task.wait_for(lambda: down.execute(f"SELECT COUNT(*) FROM `{task.target_db}`.orders")[0][0] == 12,
                  what="the rows downstream")
    with down.connect() as lock, lock.cursor() as cur:
        cur.execute("START TRANSACTION")
        cur.execute(f"SELECT * FROM `{task.target_db}`.orders WHERE _table = '{a[2]}' AND id = 3 FOR UPDATE")
        task.sql(a, "UPDATE {t} SET amount = 4 WHERE id = 3")  # waits on the lock downstream
        task.sql(a, "ALTER TABLE {t} RENAME COLUMN note TO remark")  # its barrier waits for that row
        task.sql(a, "UPDATE {t} SET remark = 'new' WHERE id < 3")  # routed while the rename waits
        time.sleep(2.0)
        cur.execute("ROLLBACK")
    for shard in (c, d):
        task.sql(shard, "ALTER TABLE {t} RENAME COLUMN note TO remark")
    task.wait_in_sync()
    rows = down.execute(f"SELECT id, remark FROM `{task.target_db}`.orders WHERE _table = '{a[2]}' ORDER BY id")
    assert rows == [(1, "new"), (2, "new"), (3, "n0")]
    assert task.stop() == 0


def _status(task):
    from replicator.cli.status import saved_status

    return saved_status(task.config)


def test_an_upstream_restarted_mid_stream(task):
    a, _b, c, _d = task.shards
    w = Workload(task)
    task.start()
    for s in task.shards:
        w.rows(s, 20)
    task.sandbox.restart_instance(a[0])
    for s in task.shards:
        w.rows(s, 20)
    task.sandbox.stop_instance(c[0])
    w.rows(a, 10)
    time.sleep(2)
    task.sandbox.start_instance(c[0])
    for s in task.shards:
        w.rows(s, 10)
    task.wait_in_sync(timeout=90)
    assert "reconnecting" in task.log_text()
    assert task.stop() == 0


def test_the_downstream_unavailable_for_a_while(task):
    w = Workload(task)
    task.start()
    for s in task.shards:
        w.rows(s, 20)
    task.wait_in_sync(timeout=60)
    task.sandbox.stop_instance("down")
    for s in task.shards:
        w.rows(s, 30)
    time.sleep(5)
    task.sandbox.start_instance("down")
    for s in task.shards:
        w.rows(s, 10)
    task.wait_in_sync(timeout=90)
    assert "downstream unavailable" in task.log_text()
    assert task.stop() == 0


def test_a_config_with_a_typo_is_refused_naming_the_field(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text("task: t\nsources:\n  - id: s1\n    host: 127.0.0.1\n    prot: 3306\n    user: root\n"
                    "    server_id: 5\ntarget: {host: 127.0.0.1, port: 3306, user: root, flavor: mariadb}\n"
                    "routes: [{schema: a, table: b, target: c.d}]\n")
    proc = subprocess.run([sys.executable, "-m", "replicator.cli.shardmerge", "run", "--config", str(path)],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 2
    assert "sources[0]: unknown field 'prot' (did you mean 'port'?)" in proc.stderr


def test_rows_read_with_the_tracker_names_without_row_metadata(task):
    """binlog_row_metadata=MINIMAL: the binlog has no column names or signedness; the
    tracker's schema at each position supplies them (across a rename, an added column
    and an unsigned one)."""
    upstreams = task.sandbox.upstreams
    for inst in upstreams:
        inst.execute("SET GLOBAL binlog_row_metadata = MINIMAL")
    try:
        a, b, c, d = task.shards
        w = Workload(task)
        task.start()
        for s in task.shards:
            w.rows(s, 10)
        task.sql(a, "ALTER TABLE {t} ADD COLUMN big INT UNSIGNED NOT NULL DEFAULT 4000000000")
        task.sql(a, "INSERT INTO {t} (id, amount, big) VALUES (500, 1, 4294967295)")
        w.rename(b)
        for s in task.shards:
            w.rows(s, 10)
        w.churn(b)
        for s in (a, c, d):  # the rename finishes: the old rows' values are in one column again
            w.rename(s)
        task.wait_in_sync(timeout=90)
        down = task.sandbox.downstream
        assert down.execute(f"SELECT big FROM `{task.target_db}`.orders WHERE id = 500")[0][0] == 4294967295
        assert task.stop() == 0
        assert "UNKNOWN_COL" not in task.log_text()
    finally:
        for inst in upstreams:
            inst.execute("SET GLOBAL binlog_row_metadata = FULL")


def test_a_first_start_from_a_gtid_position(task):
    """start: {gtid: ...}: the rows after that GTID position are replicated (also those
    written before the daemon started), the rows before it are not."""
    w = Workload(task)
    for s in task.shards:
        w.rows(s, 10)  # ids 1-10: before the start position
    text = task.config_path.read_text()
    for i, inst in enumerate(task.sandbox.upstreams, start=1):
        gtid = inst.execute("SELECT @@gtid_binlog_pos")[0][0]
        line = next(x for x in text.splitlines() if x.startswith("    server_id:") and x.endswith(f"{i}"))
        text = text.replace(line, f'{line}\n    start: {{gtid: "{gtid}"}}', 1)
    task.config_path.write_text(text)
    for s in task.shards:
        w.rows(s, 10)  # ids 11-20: after it, before the daemon runs
    task.start()
    for s in task.shards:
        w.rows(s, 10)  # ids 21-30
    down = task.sandbox.downstream
    expected = list(range(11, 31))

    def ids(shard):
        return [
            r[0]
            for r in down.execute(
                f"SELECT id FROM `{task.target_db}`.orders WHERE _table='{shard[2]}' AND _schema='{shard[1]}' "
                "ORDER BY id"
            )
        ]

    task.wait_for(lambda: all(ids(s) == expected for s in task.shards), timeout=60, what="rows 11-30 only")
    assert "first start at GTID" in task.log_text()
    assert task.stop() == 0


def test_a_regex_route_fills_a_typed_column_with_what_its_pattern_captures(sandbox, tmp_path):
    """DM's extract-table: `orders_(\\d+)` puts the shard's number in an INT column that
    joins the key, so equal ids of different shards stay apart; the backfill-free start
    creates the column with its type."""
    t = ReplicationTask(sandbox, tmp_path, CREATE, extract=False)
    try:
        text = t.config_path.read_text()
        old = f'  - schema: "{t.name}_db*"\n    table: "orders_*"\n'
        new = (f'  - schema_regex: "{t.name}_db[0-9]+"\n    table_regex: "orders_[0-9]+"\n'
               '    extract:\n      source: _source\n'
               '      table: {column: shard_no, regex: "orders_([0-9]+)", type: "SMALLINT UNSIGNED"}\n')
        assert old in text
        t.config_path.write_text(text.replace(old, new))
        t.start()
        for shard in t.shards:
            t.sql(shard, "INSERT INTO {t} (id, amount, note) VALUES (1, 1.5, 'one'), (2, 2.5, 'two')")
        down = sandbox.downstream

        def merged():
            return sorted(down.execute(f"SELECT _source, shard_no, id FROM `{t.target_db}`.orders"))

        want = sorted((t.source_of(s[0]), int(s[2].split("_")[1]), i) for s in t.shards for i in (1, 2))
        t.wait_for(lambda: merged() == want, what="every shard's rows, apart by shard_no")
        (column,) = down.execute(
            "SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_NAME = 'orders' "
            f"AND COLUMN_NAME = 'shard_no' AND TABLE_SCHEMA = '{t.target_db}'"
        )
        assert column == ("smallint(5) unsigned",)
        key = down.execute(f"SHOW KEYS FROM `{t.target_db}`.orders WHERE Key_name = 'PRIMARY'")
        assert [k[4] for k in key] == ["_source", "shard_no", "id"]  # the extract columns lead
        assert t.stop() == 0
    finally:
        t.cleanup()


@pytest.mark.parametrize("extract", [True, False], ids=["extract", "no-extract"])
def test_rows_of_tables_with_mariadb_hash_keys(sandbox, tmp_path, extract):
    """A UNIQUE key too long for a B-tree, or written USING HASH, MariaDB keeps as a hash in a
    hidden column its row events carry (live stories seed 9627: a MODIFY widening a UNIQUE
    VARCHAR paused its shard, the binlog having a column more than the table). Rows flow
    while keys become hash keys and B-trees again, and every shard's rows arrive."""
    create = ("CREATE TABLE {table} (id INT PRIMARY KEY, code VARCHAR(1000) NOT NULL, tag VARCHAR(20), "
              "n INT, UNIQUE KEY by_code (code), UNIQUE KEY by_tag (tag) USING HASH) DEFAULT CHARSET=utf8mb4")
    task = ReplicationTask(sandbox, tmp_path, create, extract=extract)
    try:
        a, b, c, d = task.shards
        ids = itertools.count(1)

        def rows(shard, n: int = 20) -> None:
            values = ",".join(f"({i}, 'c{i}-{'x' * (i % 50)}', 't{i}', {i})"
                              for i in (next(ids) for _ in range(n)))
            task.sql(shard, f"INSERT INTO {{t}} (id, code, tag, n) VALUES {values}")
            task.sql(shard, "UPDATE {t} SET n = -n, tag = CONCAT(tag, 'u') WHERE id % 3 = 0")
            task.sql(shard, "DELETE FROM {t} WHERE id % 7 = 0")

        task.start()
        for s in task.shards:
            rows(s)
        task.sql(a, "ALTER TABLE {t} MODIFY code VARCHAR(60) NOT NULL")  # a B-tree again
        task.sql(b, "ALTER TABLE {t} ADD COLUMN note TEXT, ADD UNIQUE KEY by_note (note)")  # two hash keys
        task.sql(c, "ALTER TABLE {t} COMMENT 'x'")  # the written USING HASH forgotten
        task.sql(d, "CREATE UNIQUE INDEX by_n USING HASH ON {t} (n)")
        for s in task.shards:
            rows(s)
        task.sql(a, "ALTER TABLE {t} MODIFY code VARCHAR(900) NOT NULL")  # a hash key again
        for s in task.shards:
            rows(s)
        if extract:
            task.wait_in_sync(timeout=90)
        else:
            task.wait_for(lambda: task.union_difference() is None, timeout=90, what="the union of the shards")
        assert _status(task)["paused"] == {}
        assert "columns for" not in task.log_text()
        assert task.stop() == 0
    finally:
        task.cleanup()
