"""Row events applied downstream as the binlog holds them (`replicator.source.row_events`).

On real binlogs of the sandbox: events of a table with every column family, their
table map made to name another table, applied by BINLOG statements, leave there
the rows the shard holds; decoded instead, they write the same rows. The rule of
which shard tables take their events as they are, table-driven. Then the daemon,
without extract columns (so events go as they are): rows end equal, a column one
shard adds keeps the others' events as they are, an event the server refuses is
applied as rows (and a row it refuses pauses its shard only), a target user without
the privilege gets rows, and SIGKILLs at random moments lose and repeat nothing."""

from __future__ import annotations

import random
import re
import threading
import time
import urllib.request

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import FormatDescriptionEvent
from pymysqlreplication.row_event import DeleteRowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent

from lattice import parse_table
from replicator.apply.applier import Applier
from replicator.apply.inspect import read_table
from replicator.apply.meta import Meta
from replicator.apply.table_refresh import update_info
from replicator.apply.target import TargetInfo
from replicator.identity_memo import IdentityMemo
from replicator.servers import connect_downstream
from replicator.shard_id import ShardId
from replicator.source import binlog_compat
from replicator.source.decode import patch_table_map
from replicator.source.messages import RowEvent
from replicator.source.row_events import (
    BinlogFormat,
    EventCodec,
    binlog_statement,
    fits,
    renamed_table_map,
    row_shape,
    rows_layout,
    statement_ended,
)
from replicator.state.positions import event_end
from replicator.state.task_state import Spread
from tests.replication import admin_task
from tests.server.test_rowcodec import COLUMNS, create, value

binlog_compat.install()

EVENTS = [FormatDescriptionEvent, TableMapEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent]


def raw(event) -> bytes:
    return bytes(event.packet.packet._data[1:])


def read_events(port: int, file: str, pos: int, end: int, tracked):
    """The format description, then (table map, rows event, library columns) of each rows event."""
    stream = BinLogStreamReader(
        {"host": "127.0.0.1", "port": port, "user": "root", "passwd": ""}, server_id=9911,
        resume_stream=True, log_file=file, log_pos=pos, blocking=False, only_events=EVENTS,
    )
    form, maps, units = None, {}, []
    for event in stream:
        if isinstance(event, FormatDescriptionEvent):
            form = BinlogFormat.of(raw(event))
        elif isinstance(event, TableMapEvent):
            patch_table_map(event.columns, tracked)
            maps[event.table_id] = (raw(event), list(event.columns))
        else:
            units.append((*maps[event.table_id], raw(event)))
        if event.packet.log_pos >= end:
            break
    stream.close()
    return form, units


def write_story(conn, rng: random.Random) -> list[tuple]:
    """120 rows of every column family, updates and deletes; the rows as the server holds them."""
    names = ["id", *COLUMNS]
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")
        cur.execute("SET SESSION time_zone = '+00:00'")
        for i in range(1, 121):
            row = [i] + [value(n, t, rng) for n, t in COLUMNS.items()]
            cur.execute(f"INSERT INTO t ({', '.join(names)}) VALUES ({', '.join('%s' for _ in names)})", row)
        cur.execute("UPDATE t SET pt = ST_GeomFromText('POINT(1 2)'), st = '', vc = CONCAT(vc, 'é') WHERE id % 3 = 0")
        cur.execute("UPDATE t SET id = id + 1000 WHERE id % 10 = 0")  # a key moved
        cur.execute("DELETE FROM t WHERE id % 7 = 0")
        cur.execute("SELECT * FROM t ORDER BY id")
        return list(cur.fetchall())


@pytest.fixture
def story(sandbox, scratch_db):
    up = sandbox.upstreams[0]
    up.execute(create(f"`{scratch_db}`.t"))
    tracked = parse_table(up.execute(f"SHOW CREATE TABLE `{scratch_db}`.t")[0][1])
    file, pos = up.execute("SHOW MASTER STATUS")[0][:2]
    with up.connect(scratch_db) as conn:
        stored = write_story(conn, random.Random(7))
    end = int(up.execute("SHOW MASTER STATUS")[0][1])
    form, units = read_events(up.port, file, int(pos), end, tracked)
    return tracked, form, units, stored


def test_events_applied_as_they_are_leave_the_rows_the_shard_holds(sandbox, scratch_db, story):
    _, form, units, stored = story
    down = sandbox.downstream
    down.execute(create(f"`{scratch_db}`.merged"))
    events = [form.event]
    for table_map, _, event in units:
        events += (renamed_table_map(table_map, scratch_db, "merged", form.checksum),
                   statement_ended(event, form.checksum))
    with down.connect(scratch_db) as conn, conn.cursor() as cur:
        cur.execute("START TRANSACTION")
        cur.execute(binlog_statement(events))
        cur.execute("COMMIT")
    assert len(units) >= 4 and down.execute(f"SELECT * FROM `{scratch_db}`.merged ORDER BY id") == stored


def test_a_resealed_event_keeps_a_checksum_the_server_checks(sandbox, scratch_db, story):
    """The server reads the CRC32 of an event in a BINLOG statement: renamed maps and
    ended events pass above only because they are sealed again right."""
    _, form, units, _ = story
    assert form.checksum
    sandbox.downstream.execute(create(f"`{scratch_db}`.merged"))
    table_map, _, event = units[0]
    broken = bytearray(statement_ended(event, form.checksum))
    broken[-10] ^= 0xFF  # a value's byte, the checksum as it was
    statement = binlog_statement([form.event, renamed_table_map(table_map, scratch_db, "merged", True), bytes(broken)])
    with pytest.raises(pymysql.err.MySQLError), sandbox.downstream.connect(scratch_db) as conn, conn.cursor() as cur:
        cur.execute(statement)


def test_decoded_events_write_the_rows_the_shard_holds(sandbox, scratch_db, story):
    tracked, form, units, stored = story
    down = sandbox.downstream
    down.execute(create(f"`{scratch_db}`.merged"))
    shard = ShardId("s1", scratch_db, "t")
    rows = []
    for k, (table_map, columns, event) in enumerate(units, start=1):
        unit = RowEvent((7, 4, event_end(k)), shard, f"{scratch_db}.merged", event, table_map, form,
                        EventCodec.of(tracked, columns), row_shape(tracked))
        decoded = unit.codec.changes(unit)
        layout = rows_layout(event, form.checksum)
        assert {c.op for c in decoded} == {layout.op} and all(c.id[:2] == (7, 4) for c in decoded)
        assert [c.id[2] for c in decoded] == sorted(c.id[2] for c in decoded) and decoded[-1].id <= unit.id
        rows += decoded
    with down.connect(scratch_db) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")
        cur.execute("SET SESSION time_zone = '+00:00'")
        for c in rows:
            if c.op == "I":
                cur.execute(f"INSERT INTO merged ({', '.join(c.columns)}) VALUES ({', '.join(c.values)})")
            else:
                key = c.before[(c.before_columns or c.columns).index("id")]
                if c.op == "D":
                    cur.execute(f"DELETE FROM merged WHERE id = {key}")
                else:
                    sets = ", ".join(f"`{n}` = {v}" for n, v in zip(c.columns, c.values, strict=True))
                    cur.execute(f"UPDATE merged SET {sets} WHERE id = {key}")
    assert down.execute(f"SELECT * FROM `{scratch_db}`.merged ORDER BY id") == stored


def test_an_event_that_no_longer_fits_goes_as_its_rows_a_moved_key_as_a_delete_and_an_insert(
    sandbox, scratch_db
):
    """The target changed since the worker sent the event (a column came in between):
    the applier writes the event's rows as statements, and an update that moved a key
    as a delete and an insert, as rows it is given decoded (an upsert by the new key
    would leave the old row behind: an extra row of the row-events chaos run)."""
    up, down = sandbox.upstreams[0], sandbox.downstream
    up.execute(f"CREATE TABLE `{scratch_db}`.s (id INT PRIMARY KEY, a INT NOT NULL)")
    tracked = parse_table(up.execute(f"SHOW CREATE TABLE `{scratch_db}`.s")[0][1])
    file, pos = up.execute("SHOW MASTER STATUS")[0][:2]
    up.execute([f"INSERT INTO `{scratch_db}`.s VALUES (1, 1), (2, 2), (3, 3)",
                f"UPDATE `{scratch_db}`.s SET id = id + 10 WHERE id <= 2",
                f"DELETE FROM `{scratch_db}`.s WHERE id = 3"])
    form, units = read_events(up.port, file, int(pos), int(up.execute("SHOW MASTER STATUS")[0][1]), tracked)
    down.execute(f"CREATE TABLE `{scratch_db}`.merged (id INT PRIMARY KEY, z INT NULL, a INT NOT NULL)")
    kwargs = {"host": down.host, "port": down.port, "user": down.user, "password": down.password}
    meta = Meta(lambda: connect_downstream(kwargs), f"{scratch_db}_meta", "task")
    meta.ensure()
    name = f"{scratch_db}.merged"
    target = TargetInfo(name, f"`{scratch_db}`.`merged`", {}, None, 1)
    with down.connect() as conn:
        update_info(target, read_table(conn, scratch_db, "merged"))
    shard = ShardId("s1", scratch_db, "s")
    refused = []
    applier = Applier(meta, {name: target}, kwargs, 2, 100, lambda changes: False, {},
                      lambda change, error: refused.append(error), spread=Spread(True))
    applier.start()
    try:
        for k, (table_map, columns, event) in enumerate(units, start=1):
            unit = RowEvent((7, 4 + k, event_end(1)), shard, name, event, table_map, form,
                            EventCodec.of(tracked, columns), row_shape(tracked))
            assert not fits(unit.shape, target.shape)
            applier.submit(unit)
        applier.wait_idle()
    finally:
        applier.stop()
        meta.close()
        down.execute(f"DROP DATABASE IF EXISTS `{scratch_db}_meta`")
    assert refused == []
    assert down.execute(f"SELECT id, z, a FROM `{scratch_db}`.merged ORDER BY id") == [(11, None, 1), (12, None, 2)]


def shape(sql: str):
    return row_shape(parse_table(sql))


BASE = "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10) NOT NULL, b DECIMAL(10,2) NULL) DEFAULT CHARSET=utf8mb4"


@pytest.mark.parametrize(("target", "fit", "why"), [
    (BASE, True, "the same table"),
    (BASE.replace("t (", "merged ("), True, "the name is not the shape"),
    (BASE.replace(" NULL)", " NULL, c INT NULL)"), True, "a column at the end, NULL for rows without it"),
    (BASE.replace(" NULL)", " NULL, c INT NOT NULL DEFAULT 7)"), True, "a column at the end with a default"),
    (BASE.replace(" NULL)", " NULL, c INT NOT NULL)"), False, "a column at the end no row may lack"),
    (BASE.replace(" NULL)", " NULL, c TEXT NOT NULL DEFAULT 'x')"), False,
     "a TEXT at the end: the server gives a row event's row '', not its default"),
    (BASE.replace(" NULL)", " NULL, c JSON NOT NULL DEFAULT 'null')"), False, "a JSON, a TEXT too"),
    (BASE.replace(" NULL)", " NULL, c BLOB NULL DEFAULT 'x')"), False, "a BLOB with a default, even nullable"),
    (BASE.replace(" NULL)", " NULL, c TEXT NULL)"), True, "a TEXT at the end, NULL for rows without it"),
    (BASE.replace(" NULL)", " NULL, c TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)"), False,
     "a default the server computes"),
    (BASE.replace("id INT PRIMARY KEY,", "id INT PRIMARY KEY, c INT NULL,"), False, "a column in between"),
    (BASE.replace("id INT", "id BIGINT"), False, "a wider integer: the bytes differ"),
    (BASE.replace("DECIMAL(10,2)", "DECIMAL(12,2)"), False, "another precision"),
    (BASE.replace("VARCHAR(10)", "VARCHAR(10) CHARACTER SET latin1"), False, "another character set"),
    (BASE.replace("VARCHAR(10) NOT NULL", "VARCHAR(10) NULL"), True, "NULL allowed where the shard has none"),
    (BASE.replace("b DECIMAL(10,2) NULL", "b DECIMAL(10,2) NOT NULL"), False, "no NULL where the shard has it"),
    (BASE.replace("a VARCHAR", "x VARCHAR"), False, "another column name in that place"),
    (BASE.replace(" NULL)", " NULL, g INT AS (id + 1))"), False, "a generated column"),
])
def test_which_shard_tables_take_their_events_as_they_are(target, fit, why):
    assert fits(shape(BASE), shape(target)) is fit, why


def test_the_memo_answers_as_fits_for_the_shapes_it_is_given_whatever_it_saw_before():
    # (shapes equal but not the same object, the same object with another target, and
    # more pairs than it keeps: each answer is fits' own)
    rng = random.Random(5)
    tables = [BASE, BASE.replace("id INT", "id BIGINT"), BASE.replace(" NULL)", " NULL, c INT NULL)")]
    kept = [shape(t) for t in tables]
    memo = IdentityMemo(fits)
    for _ in range(2000):
        shard, target = (rng.choice([rng.choice(kept), shape(rng.choice(tables))]) for _ in "st")
        for a, b in [(shard, target), (shard, target), (target, shard), (shard, None)]:
            assert memo(a, b) is fits(a, b)


def test_a_shard_with_a_generated_column_sends_no_events_as_they_are():
    assert shape(BASE.replace(" NULL)", " NULL, g INT AS (id + 1) VIRTUAL)")) is None


# -- the daemon ---------------------------------------------------------------------------------
CREATE = ("CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, note VARCHAR(20)) "
          "DEFAULT CHARSET=utf8mb4")


@pytest.fixture
def task(sandbox, tmp_path):
    t = admin_task(sandbox, tmp_path, CREATE, extract=False)
    t.metrics_url = t.addr + "/metrics"
    yield t
    t.cleanup()


def applied(task) -> tuple[int, int]:
    """(rows applied as statements, row events applied as they are), every source together."""
    rows, events, event_rows = applied_rows(task)
    return rows - event_rows, events


def applied_rows(task) -> tuple[int, int, int]:
    """(rows applied, row events applied as they are, their rows), every source together."""
    text = urllib.request.urlopen(task.metrics_url, timeout=10).read().decode()

    def total(name: str) -> int:
        return int(sum(float(v) for v in re.findall(rf"^{name}{{[^}}]*}} (\S+)$", text, re.M)))

    names = ("shardmerge_rows_applied_total", "shardmerge_row_events_applied_total",
             "shardmerge_row_event_rows_applied_total")
    return total(names[0]), total(names[1]), total(names[2])


def bulk(task, shard, first: int, n: int = 1000) -> None:
    task.sql(shard, "INSERT INTO {t} (id, amount, note) VALUES "
             + ",".join(f"({i}, {i}.25, 'n{i}')" for i in range(first, first + n)))


def churn(task, shard, salt: int) -> None:
    task.sql(shard, f"UPDATE {{t}} SET amount = amount + 1 WHERE id % 5 = {salt % 5}")
    task.sql(shard, f"DELETE FROM {{t}} WHERE id % 13 = {salt % 13}")


def test_rows_of_shards_like_the_target_go_as_row_events_and_end_equal(task):
    task.start()
    for n, shard in enumerate(task.shards):
        bulk(task, shard, n * 100_000)
        bulk(task, shard, n * 100_000 + 1000)
        churn(task, shard, n)
    task.wait_in_sync(timeout=90)
    rows, events, event_rows = applied_rows(task)
    # every row in an event, each counted (the server's answer to a BINLOG statement says none)
    written = sum(
        2000 + sum(i % 5 == n % 5 for i in ids) + sum(i % 13 == n % 13 for i in ids)
        for n in range(len(task.shards))
        for ids in [range(n * 100_000, n * 100_000 + 2000)]
    )
    assert rows == event_rows == written and events >= 4 * 4, (rows, event_rows, written, events)
    assert task.stop() == 0


def test_a_column_one_shard_adds_keeps_every_shard_on_row_events(task):
    """The target takes the column at its end: the other shards' events still fit
    (rows they insert get its default, rows they update keep it); a type widened
    downstream for one shard makes the others' rows go as statements."""
    task.start()
    for n, shard in enumerate(task.shards):
        bulk(task, shard, n * 100_000, 200)
    task.wait_in_sync(timeout=60)
    first, second = task.shards[0], task.shards[1]
    task.sql(first, "ALTER TABLE {t} ADD COLUMN extra INT NOT NULL DEFAULT 5")
    task.sql(first, "UPDATE {t} SET extra = id % 3")
    task.wait_in_sync(timeout=60)
    # (the worker hears of the new target after the DDL: events read before that, of the
    # shard that added the column, went as rows)
    rows, events = applied(task)
    for n, shard in enumerate(task.shards):
        bulk(task, shard, n * 100_000 + 500, 200)
        churn(task, shard, n)
    task.wait_in_sync(timeout=60)
    assert applied(task)[0] == rows, "every shard's events fit the table with the added column"
    rows, events = applied(task)
    task.sql(second, "ALTER TABLE {t} MODIFY amount DECIMAL(14,4) NOT NULL")
    for n, shard in enumerate(task.shards):
        churn(task, shard, n + 1)
    task.wait_in_sync(timeout=60)
    more_rows, more_events = applied(task)
    assert more_rows > rows and more_events >= events
    downstream = task.sandbox.downstream.execute(f"SELECT SUM(extra) FROM `{task.target_db}`.orders")[0][0]
    upstream = task.sql(first, "SELECT SUM(extra) FROM {t}")[0][0]
    others = sum(task.sql(s, "SELECT COUNT(*) FROM {t}")[0][0] for s in task.shards[1:])
    assert downstream == upstream + 5 * others  # the others' rows took the default
    assert task.stop() == 0


def test_rows_of_shards_lacking_a_text_column_at_the_end_get_its_default(task):
    """A TEXT or JSON column one shard adds at the end with a default: the server gives a
    row event's row '' there, not the default (its JSON null became '', refused by the
    column's CHECK, live stories seed 24837): the other shards' rows go as statements and
    get the default."""
    task.start()
    first = task.shards[0]
    task.sql(first, "ALTER TABLE {t} ADD COLUMN doc JSON NOT NULL DEFAULT '[]', ADD COLUMN txt TEXT NULL DEFAULT 'abc'")
    task.wait_in_sync(timeout=60)
    for n, shard in enumerate(task.shards):
        bulk(task, shard, n * 100_000 + 700, 50)
    task.wait_in_sync(timeout=60)
    down = task.sandbox.downstream.execute(
        f"SELECT doc, txt, COUNT(*) FROM `{task.target_db}`.orders GROUP BY doc, txt")
    assert [tuple(r) for r in down] == [("[]", "abc", 50 * len(task.shards))]
    assert task.stop() == 0


def test_an_event_the_server_refuses_goes_as_rows_and_a_refused_row_pauses_its_shard(task):
    """Without extract columns two shards' rows with one key collide downstream: the
    event is refused (duplicate key), its rows go as statements, and the row the
    server refuses then pauses its shard only, saying which row and why."""
    task.start()
    a, b, c, _ = task.shards
    bulk(task, a, 1, 50)
    task.wait_in_sync(timeout=60)
    task.sql(b, "INSERT INTO {t} (id, amount, note) VALUES (10, 1.00, 'clash'), (70000, 2.00, 'fine')")
    bulk(task, c, 200_000, 50)
    shard = str(task.shard_id(b))
    task.wait_for(lambda: f"shard {shard} paused" in task.log_text(), timeout=60, what="the refused row's pause")
    assert "refused the insert of the row id=10" in task.log_text()
    assert "row events refused" in task.log_text()

    def ids() -> set[int]:
        return {r[0] for r in task.sandbox.downstream.execute(f"SELECT id FROM `{task.target_db}`.orders")}

    task.wait_for(lambda: set(range(200_000, 200_050)) <= ids(), what="the other shards' rows")  # they go on
    assert 70000 not in ids()  # its shard waits
    assert task.stop() == 0


def test_a_target_user_without_the_privilege_gets_rows(sandbox, tmp_path, monkeypatch):
    user = "sm_no_binlog"
    grants = ("SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, REPLICATION SLAVE, "
              "BINLOG MONITOR, RELOAD")
    for inst in sandbox.instances:
        inst.execute([f"CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY 'pw'",
                      f"GRANT {grants} ON *.* TO '{user}'@'%'"])
    monkeypatch.setenv("SM_NO_BINLOG_PW", "pw")
    task = admin_task(sandbox, tmp_path, CREATE, extract=False, user=(user, "SM_NO_BINLOG_PW"))
    task.metrics_url = task.addr + "/metrics"
    try:
        task.start()
        for n, shard in enumerate(task.shards):
            bulk(task, shard, n * 100_000, 300)
            churn(task, shard, n)
        task.wait_in_sync(timeout=60)
        assert "may not run BINLOG statements" in task.log_text()
        rows, events = applied(task)
        assert rows > 0 and events == 0
        assert task.stop() == 0
    finally:
        task.cleanup()
        for inst in sandbox.instances:
            inst.execute(f"DROP USER IF EXISTS '{user}'@'%'")


@pytest.mark.long
def test_sigkill_at_random_moments_with_row_events_loses_and_repeats_nothing(sandbox, tmp_path):
    """With no safe mode after a crash (which writes rows, not events), every run
    applies events as they are, and is killed with some in flight."""
    task = admin_task(sandbox, tmp_path, CREATE, extract=False, options="  safe_mode_window: 0\n")
    task.metrics_url = task.addr + "/metrics"
    try:
        _killed_while_writing(task, random.Random(5))
    finally:
        task.cleanup()


def _killed_while_writing(task, rng: random.Random) -> None:
    stop = threading.Event()

    def writer():
        n = 0
        while not stop.is_set():
            for k, shard in enumerate(task.shards):
                bulk(task, shard, k * 1_000_000 + n * 300, 300)
                churn(task, shard, n + k)
            n += 1
            time.sleep(0.05)

    task.start()
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(6):
            time.sleep(rng.uniform(0.5, 1.5))
            task.kill()
            task.start()
    finally:
        stop.set()
        thread.join()
    task.wait_in_sync(timeout=120)
    assert applied(task)[1] > 0
    assert task.stop() == 0


def test_after_a_crash_the_catch_up_goes_as_row_events_once_past_the_highest_checkpoint(sandbox, tmp_path):
    """Issue 74: after an unclean stop every row went in safe mode for `safe_mode_window`
    (60 s by default): decoded, as upserts, the whole catch-up after a crash. Only the changes
    up to each source's highest checkpoint can have been applied (each batch commits its
    checkpoints with its rows), so those alone are read again in safe mode; the rows written
    once the daemon passed them, seconds after the crash, go as the row events they are."""
    task = admin_task(sandbox, tmp_path, CREATE, extract=False)
    task.metrics_url = task.addr + "/metrics"
    try:
        task.start()
        for n, shard in enumerate(task.shards):
            bulk(task, shard, n * 100_000)
        task.wait_in_sync(timeout=90)
        for n, shard in enumerate(task.shards):
            bulk(task, shard, n * 100_000 + 1000, 300)
            churn(task, shard, n)
        task.kill()  # (some of those read, some applied, some not)
        task.start()
        task.wait_in_sync(timeout=90)
        log = task.log_text()
        assert "the last stop was not clean: safe mode up to each source's highest checkpoint" in log, log[-3000:]
        _, before, _ = applied_rows(task)
        for n, shard in enumerate(task.shards):
            bulk(task, shard, n * 100_000 + 2000)
        task.wait_in_sync(timeout=90)
        _, events, event_rows = applied_rows(task)  # (counted since this start)
        assert events - before >= len(task.shards), (before, events)  # (each shard's bulk: one event or more)
        assert event_rows >= 1000 * len(task.shards), event_rows
        assert task.stop() == 0
    finally:
        task.cleanup()
