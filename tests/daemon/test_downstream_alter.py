"""A downstream ALTER runs the most online way the server has for it (on the sandbox's
downstream MariaDB, with the real pt-online-schema-change): instantly, in place without a
lock, or as a copy, by pt-online-schema-change while other writes go on, or by the server."""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest

from lattice import Flavor
from replicator.apply.downstream_alter import CopyFailed, alter_specs, online_ways, run_alter
from tests.replication import admin_task

ROWS = 20_000

needs_pt_osc = pytest.mark.skipif(
    shutil.which("pt-online-schema-change") is None, reason="pt-online-schema-change is not installed"
)


@pytest.fixture
def table(sandbox, scratch_db):
    down = sandbox.downstream
    down.execute(
        [
            f"CREATE TABLE `{scratch_db}`.t (id BIGINT NOT NULL PRIMARY KEY, n INT NOT NULL, s VARCHAR(20))",
            f"INSERT INTO `{scratch_db}`.t SELECT seq, seq % 1000, CONCAT('s', seq) FROM seq_1_to_{ROWS}",
        ],
        scratch_db,
    )
    return f"{scratch_db}.t"


def server_of(sandbox) -> dict:
    down = sandbox.downstream
    return {"host": down.host, "port": down.port, "user": down.user, "password": down.password}


def alter(sandbox, target: str, spec: str, copy_mode: str = "pt-osc", on_copy=lambda how: None):
    schema, name = target.split(".")
    statement = f"ALTER TABLE `{schema}`.`{name}` {spec}"
    with sandbox.downstream.connect() as conn:
        return run_alter(conn, statement, Flavor.MARIADB, copy_mode, server_of(sandbox), target, on_copy)


def column_type(sandbox, target: str, column: str) -> str:
    schema, name = target.split(".")
    ((found,),) = sandbox.downstream.execute(
        f"SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA='{schema}' "
        f"AND TABLE_NAME='{name}' AND COLUMN_NAME='{column}'"
    )
    return found


@pytest.mark.parametrize(
    ("spec", "how"),
    [
        ("ADD COLUMN c VARCHAR(10) NULL DEFAULT NULL AFTER n", "instant"),
        ("ALTER COLUMN n SET DEFAULT 5", "instant"),
        ("DROP COLUMN s", "instant"),
        ("ADD INDEX ix_n (n)", "inplace"),
        ("MODIFY COLUMN s VARCHAR(20) NOT NULL", "inplace"),
    ],
)
def test_a_change_the_server_can_make_online_runs_so(sandbox, table, spec, how):
    ran = alter(sandbox, table, spec, copy_mode="blocking")
    assert ran.how == how


def test_a_copy_the_server_would_hold_writes_for_runs_as_its_copy_when_told(sandbox, table):
    heard = []
    ran = alter(sandbox, table, "MODIFY COLUMN n BIGINT NOT NULL", copy_mode="blocking", on_copy=heard.append)
    assert (ran.how, heard) == ("copy", ["copy"])
    assert column_type(sandbox, table, "n") == "bigint(20)"


@needs_pt_osc
def test_a_copy_by_pt_osc_keeps_every_row_and_lets_writes_through_meanwhile(sandbox, table):
    """Writes made while pt-online-schema-change copies reach the new table (its triggers);
    none waits for the copy: the longest is far below the copy's time."""
    schema, name = table.split(".")
    stop, longest, written = threading.Event(), [0.0], []

    def writer() -> None:
        with sandbox.downstream.connect(autocommit=True) as conn, conn.cursor() as cur:
            n = ROWS
            while not stop.is_set():
                n += 1
                started = time.perf_counter()
                cur.execute(f"INSERT INTO `{schema}`.`{name}` VALUES ({n}, 7, 'new')")
                cur.execute(f"UPDATE `{schema}`.`{name}` SET s = 'moved' WHERE id = {n - ROWS}")
                longest[0] = max(longest[0], time.perf_counter() - started)
                written.append(n)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        ran = alter(sandbox, table, "MODIFY COLUMN n BIGINT NOT NULL")
    finally:
        stop.set()
        thread.join()
    assert ran.how == "pt-osc" and column_type(sandbox, table, "n") == "bigint(20)"
    ((count, moved),) = sandbox.downstream.execute(
        f"SELECT COUNT(*), SUM(s = 'moved') FROM `{schema}`.`{name}`"
    )
    assert written and count == ROWS + len(written) and moved == len(written)
    assert longest[0] < ran.seconds / 2, (longest[0], ran.seconds)
    leftovers = sandbox.downstream.execute(
        f"SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA='{schema}' AND TABLE_NAME <> 't'"
    )
    assert leftovers == []


@needs_pt_osc
def test_what_a_killed_pt_osc_left_is_cleared_before_the_next(sandbox, table):
    schema, name = table.split(".")
    sandbox.downstream.execute(
        [
            f"CREATE TABLE `{schema}`.`_{name}_new` LIKE `{schema}`.`{name}`",
            f"CREATE TRIGGER `{schema}`.`pt_osc_{schema}_{name}_ins` AFTER INSERT ON `{schema}`.`{name}` "
            f"FOR EACH ROW REPLACE INTO `{schema}`.`_{name}_new` (id, n, s) VALUES (NEW.id, NEW.n, NEW.s)",
        ]
    )
    ran = alter(sandbox, table, "MODIFY COLUMN n BIGINT NOT NULL")
    assert ran.how == "pt-osc" and column_type(sandbox, table, "n") == "bigint(20)"
    assert sandbox.downstream.execute(f"SHOW TRIGGERS FROM `{schema}`") == []


@needs_pt_osc
def test_pt_osc_refusing_says_so_in_its_own_words(sandbox, scratch_db):
    """A table without a primary or unique key cannot be copied by triggers."""
    sandbox.downstream.execute(f"CREATE TABLE `{scratch_db}`.k (n INT NOT NULL)")
    with pytest.raises(CopyFailed, match=r"pt-online-schema-change failed on .*(PRIMARY KEY|unique)"):
        alter(sandbox, f"{scratch_db}.k", "MODIFY COLUMN n BIGINT NOT NULL")


@pytest.mark.parametrize(
    ("flavor", "ways"),
    [
        (Flavor.MARIADB, ("ALGORITHM=INSTANT", "ALGORITHM=INPLACE, LOCK=NONE")),
        (Flavor.MYSQL, ("ALGORITHM=INSTANT", "ALGORITHM=INPLACE, LOCK=NONE")),
        (Flavor.TIDB, ()),  # online by design: its ALTERs go as they are
    ],
)
def test_the_ways_tried_per_flavor(flavor, ways):
    assert online_ways(flavor) == ways


def test_the_specs_of_an_alter_are_what_follows_its_table():
    assert alter_specs("ALTER TABLE `a`.`t` MODIFY COLUMN n BIGINT", "a.t") == "MODIFY COLUMN n BIGINT"
    with pytest.raises(CopyFailed, match=r"not an ALTER of a\.t"):
        alter_specs("ALTER TABLE `a`.`u` MODIFY COLUMN n BIGINT", "a.t")


SHARD_TABLE = "CREATE TABLE {table} (id INT PRIMARY KEY, n INT NOT NULL, amount DECIMAL(10,2) NOT NULL)"
BALLAST = 300_000  # rows downstream of no shard, so that the copy takes seconds


def group_status(task) -> dict:
    with urllib.request.urlopen(f"{task.addr}/api/v1/status", timeout=10) as response:
        (group,) = json.load(response)["groups"].values()
    return group


@contextlib.contextmanager
def b_writing(task, ballast: int) -> Iterator[None]:
    """The task started with a row on each shard, `ballast` rows downstream of no shard (so
    that a rebuild of the table takes seconds), and shard b writing a row at a time till the
    block ends."""
    b = task.shards[1]
    stop, ids = threading.Event(), itertools.count(1000)

    def write_b() -> None:
        while not stop.is_set():
            task.sql(b, f"INSERT INTO {{t}} VALUES ({next(ids)}, 1, 1.5)")

    task.start()
    for shard in task.shards:
        task.sql(shard, "INSERT INTO {t} VALUES (1, 1, 1.5)")
    task.wait_in_sync(timeout=60)
    task.sandbox.downstream.execute(
        f"INSERT INTO `{task.target_db}`.orders (id, n, amount, _source, _schema, _table) "
        f"SELECT seq, 0, 0, 'ballast', 'b', 't' FROM seq_1_to_{ballast}",
        task.target_db,
    )
    writer = threading.Thread(target=write_b)
    writer.start()
    try:
        yield
    finally:
        stop.set()
        writer.join()


@needs_pt_osc
def test_the_daemon_widens_downstream_by_pt_osc_while_the_other_shards_rows_go_on(sandbox, tmp_path):
    """A shard's INT made BIGINT needs a copy downstream: query-status shows it running by
    pt-osc, and the rows of another shard keep arriving downstream meanwhile."""
    task = admin_task(sandbox, tmp_path, SHARD_TABLE, shards_per_server=1)
    a, b = task.shards
    down = sandbox.downstream
    orders = f"`{task.target_db}`.orders"
    try:
        with b_writing(task, BALLAST):
            task.sql(a, "ALTER TABLE {t} MODIFY n BIGINT NOT NULL")
            task.wait_for(
                lambda: (group_status(task).get("ddl_running") or {}).get("how") == "pt-osc",
                what="the copy by pt-osc in query-status",
            )
            of_b = f"SELECT COUNT(*) FROM {orders} WHERE _table = '{b[2]}'"
            ((before,),) = down.execute(of_b)
            task.wait_for(lambda: down.execute(of_b)[0][0] > before + 20, what="b's rows during the copy")
            assert (group_status(task).get("ddl_running") or {}).get("how") == "pt-osc", "the copy was over"
        task.wait_for(lambda: group_status(task).get("ddl_running") is None, timeout=120, what="the copy's end")
        assert column_type(sandbox, f"{task.target_db}.orders", "n") == "bigint(20)"
        down.execute(f"DELETE FROM {orders} WHERE _source = 'ballast'")
        task.wait_in_sync(timeout=60)
        assert "ran pt-osc" in task.log_text()
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_a_rename_relaxing_its_column_lets_the_other_shards_rows_go_on_while_it_rebuilds(sandbox, tmp_path):
    """The rename (docs/design.md "Renaming columns") makes the new name nullable: NOT NULL to NULL rebuilds the table.
    That MODIFY runs first, under the old name, with the other shard's rows still applied
    (the executor's `journal_flows`); the rename itself and the old name's return hold them for no
    time; the old name's index builds with them flowing too. Both renamed, the rows are the
    shards'."""
    task = admin_task(sandbox, tmp_path, SHARD_TABLE, shards_per_server=1)
    a, b = task.shards
    down = sandbox.downstream
    orders = f"`{task.target_db}`.orders"
    of_b = f"SELECT COUNT(*) FROM {orders} WHERE _table = '{b[2]}'"
    seen: dict[str, list[int]] = {}
    try:
        with b_writing(task, 4 * BALLAST):  # (under the old name)
            task.sql(a, "ALTER TABLE {t} RENAME COLUMN amount TO total")
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                running = (group_status(task).get("ddl_running") or {}).get("statement") or ""
                if seen and not running:
                    break  # (the entry is over)
                for what in ("MODIFY COLUMN `amount`", "INDEX IF NOT EXISTS"):
                    if what in running:
                        seen.setdefault(what, []).append(down.execute(of_b)[0][0])
                time.sleep(0.05)
        modify = seen.get("MODIFY COLUMN `amount`", [])
        assert len(modify) >= 2 and modify[-1] > modify[0], f"b's rows while the column relaxed: {seen}"
        task.sql(b, "ALTER TABLE {t} RENAME COLUMN amount TO total")
        task.wait_for(lambda: group_status(task).get("ddl_running") is None, timeout=120, what="the DDL's end")
        down.execute(f"DELETE FROM {orders} WHERE _source = 'ballast'")
        task.wait_in_sync(timeout=60)
        assert task.stop() == 0
    finally:
        task.cleanup()
