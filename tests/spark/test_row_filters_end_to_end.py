"""Issue 46, row filters by expression (`filters.rows`, DM's expression filter), on the
operator's path: a condition that cannot be evaluated is refused by `shardmerge check`
and `run` naming the table, the field, the condition and the fix; the live daemon drops
the rows the conditions ignore (inserts, updates by their old and new values, deletes)
and counts them; the Spark backfill reads only the rows the stream keeps, and verify
then finds no difference."""

from __future__ import annotations

import json
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from replicator.config import load_config
from replicator.spark.backfill import backfill
from replicator.spark.resync import resync
from replicator.spark.verify import verify
from tests.daemon.test_operator import shardctl
from tests.replication import ReplicationTask, admin_task
from tests.spark.test_backfill import shardmerge

pytestmark = pytest.mark.timeout(600)

CREATE = "CREATE TABLE {table} (id INT NOT NULL, amount INT, note VARCHAR(20), PRIMARY KEY (id))"


def with_row_filters(task: ReplicationTask, block: str) -> None:
    task.config_path.write_text(task.config_path.read_text() + "filters:\n  rows:\n" + block)
    task.config = load_config(task.config_path)


def shard_glob(shard) -> str:
    return f'["{shard[1]}.{shard[2]}"]'


def pause_reason(task: ReplicationTask, shard) -> str | None:
    """Why the shard is paused, as `shardctl query-status` says (None: it is not)."""
    status = json.loads(shardctl(task, "query-status", "--json").stdout)
    return status["paused"].get(str(task.shard_id(shard)), {}).get("reason")


def set_schema_as_upstream(task: ReplicationTask, shard, workdir) -> None:
    """`shardctl set-schema` with the shard's table as its server shows it."""
    path = workdir / f"{shard[2]}.sql"
    path.write_text(task.sql(shard, "SHOW CREATE TABLE {t}")[0][1])
    sid = task.shard_id(shard)
    done = shardctl(task, "set-schema", "--source", sid.source, "--table", sid.table_key, "--file", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def filtered_rows(task: ReplicationTask) -> dict[tuple[str, str], float]:
    """shardmerge_filtered_rows_total by (shard, kind), from `shardctl metrics`."""
    metrics = {f.name: f for f in text_string_to_metric_families(shardctl(task, "metrics").stdout)}
    return {
        (s.labels["shard"], s.labels["kind"]): s.value
        for s in metrics["shardmerge_filtered_rows"].samples
        if s.name == "shardmerge_filtered_rows_total"
    }


# -- config errors -----------------------------------------------------------------------------
@pytest.fixture
def task(sandbox, tmp_path):
    t = admin_task(sandbox, tmp_path, CREATE)
    yield t
    t.cleanup()


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("NOW() > amount", "NOW() is not deterministic"),
        (
            "SOUNDEX(note) = 'x'",
            "function SOUNDEX() is not supported in a row filter; supported: comparisons",
        ),
        ("amount IN (SELECT 1)", "a subquery is not supported"),
        ("amount >", "not a SQL condition"),
    ],
)
def test_check_refuses_a_condition_no_table_can_evaluate(task, condition, expected):
    with_row_filters_text = (
        task.config_path.read_text()
        + f"filters:\n  rows:\n    - tables: ['*.*']\n      ignore_delete: \"{condition}\"\n"
    )
    task.config_path.write_text(with_row_filters_text)
    result = shardmerge("check", "--config", str(task.config_path))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "filters.rows[0].ignore_delete" in result.stderr and expected in result.stderr
    assert "Traceback" not in result.stderr


def test_a_misspelled_field_gets_a_did_you_mean(task):
    task.config_path.write_text(
        task.config_path.read_text()
        + "filters:\n  rows:\n    - tables: ['*.*']\n      ignore_inserts: 'amount > 1'\n"
    )
    result = shardmerge("check", "--config", str(task.config_path))
    assert result.returncode == 2
    assert "filters.rows[0]: unknown field 'ignore_inserts' (did you mean 'ignore_insert'?)" in result.stderr


def test_check_and_run_name_a_column_the_table_lacks(task):
    first = task.shards[0]
    with_row_filters(task, f"    - tables: {shard_glob(first)}\n      ignore_insert: \"state = 'gone'\"\n")
    result = shardmerge("check", "--config", str(task.config_path))
    assert result.returncode != 0
    line = next(line for line in result.stdout.splitlines() if "filters.rows[0].ignore_insert" in line)
    assert f"{first[1]}.{first[2]}" in line
    assert (
        "\"state = 'gone'\"" in line
        and "no column 'state'" in line
        and "its columns: id, amount, note" in line
    )
    assert "change the condition, or leave the table out of the filter's tables" in line
    task.start(wait=False)
    assert task.wait_exit(60) == 2
    log = task.log_text()
    assert "filters.rows[0].ignore_insert" in log and "no column 'state'" in log and "Traceback" not in log


# -- the stream --------------------------------------------------------------------------------
def test_the_stream_drops_the_rows_the_conditions_ignore_and_counts_them(task):
    filtered, other, *_ = task.shards
    with_row_filters(
        task,
        f"    - tables: {shard_glob(filtered)}\n"
        "      ignore_insert: \"note = 'skip'\"\n"  # a _ci collation: 'SKIP' too
        "      ignore_update_old: 'amount < 100'\n"
        "      ignore_update_new: 'amount >= 100'\n"  # both: an update from below 100 to 100 or more
        "      ignore_delete: 'amount = 31 OR note IS NULL'\n",
    )
    task.start()
    for shard in (filtered, other):
        task.sql(
            shard, "INSERT INTO {t} VALUES (1, 10, 'keep'), (2, 20, 'SKIP'), (3, 30, 'x'), (4, 40, NULL)"
        )
        task.sql(shard, "UPDATE {t} SET amount = 150 WHERE id = 1")  # ignored: 10 -> 150
        task.sql(shard, "UPDATE {t} SET amount = 31 WHERE id = 3")  # kept: 30 -> 31
        task.sql(shard, "UPDATE {t} SET amount = 200 WHERE id = 1")  # kept: old 150 is not < 100
        task.sql(shard, "DELETE FROM {t} WHERE id IN (3, 4)")  # both ignored
        task.sql(shard, "INSERT INTO {t} VALUES (5, 50, 'last')")

    def rows(shard):
        src = task.source_of(shard[0])
        return task.sandbox.downstream.execute(
            f"SELECT id, amount, note FROM `{task.target_db}`.orders WHERE _source = '{src}' "
            f"AND _schema = '{shard[1]}' AND _table = '{shard[2]}' ORDER BY id"
        )

    task.wait_for(
        lambda: any(r[0] == 5 for r in rows(filtered)) and any(r[0] == 5 for r in rows(other)),
        timeout=60,
        what="the last rows",
    )
    assert [tuple(r) for r in rows(filtered)] == [
        (1, 200, "keep"),
        (3, 31, "x"),
        (4, 40, None),
        (5, 50, "last"),
    ]
    assert [tuple(r) for r in rows(other)] == [(1, 200, "keep"), (2, 20, "SKIP"), (5, 50, "last")]
    shard = str(task.shard_id(filtered))
    assert filtered_rows(task) == {(shard, "insert"): 1, (shard, "update"): 1, (shard, "delete"): 2}
    status = shardctl(task, "query-status").stdout
    assert "rows dropped by filters.rows" in status and "delete 2, insert 1, update 1" in status
    assert task.stop() == 0


# -- backfill and verify -----------------------------------------------------------------------
@pytest.fixture
def big(sandbox, tmp_path):
    t = ReplicationTask(sandbox, tmp_path, CREATE)
    yield t
    t.cleanup()


def test_backfill_reads_only_the_rows_the_stream_keeps_and_verify_agrees(big, spark):
    task = big
    first, second, *_ = task.shards
    with_row_filters(
        task,
        f"    - tables: {shard_glob(first)}\n      ignore_insert: \"note LIKE 'skip%' OR amount % 10 = 3\"\n",
    )
    for shard in task.shards:
        task.sql(
            shard,
            "INSERT INTO {t} SELECT seq, seq, IF(seq % 7 = 0, CONCAT('Skip ', seq), NULL) "
            f"FROM `{shard[1]}`.seq_1_to_700",
        )
    backfill(task.config, spark)
    down = task.sandbox.downstream
    src = task.source_of(first[0])
    count = down.execute(
        f"SELECT COUNT(*) FROM `{task.target_db}`.orders WHERE _source = '{src}' AND _schema = '{first[1]}' "
        f"AND _table = '{first[2]}'"
    )[0][0]
    # 700 rows, 100 with a note 'Skip n' (ci: LIKE 'skip%'), 70 ending in 3, 10 of those both
    assert count == 700 - 100 - 70 + 10
    assert down.execute(f"SELECT COUNT(*) FROM `{task.target_db}`.orders")[0][0] == count + 700 * 3
    report = verify(task.config, spark, chunk_rows=200)
    (table,) = report.tables
    assert table.equal, (table.missing[:3], table.extra[:3], table.different[:3])
    assert table.upstream_rows == table.downstream_rows == count + 700 * 3
    # the stream from where the backfill ended keeps the same rows
    task.start()
    for shard in (first, second):
        task.sql(shard, "INSERT INTO {t} VALUES (1001, 1, 'SKIP me'), (1002, 13, 'x'), (1003, 5, 'kept')")
    task.wait_for(
        lambda: down.execute(f"SELECT COUNT(*) FROM `{task.target_db}`.orders WHERE id = 1003")[0][0] == 2,
        timeout=60,
        what="the streamed rows",
    )
    assert task.stop() == 0
    checked = shardmerge("verify", "--config", str(task.config_path), "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert json.loads(checked.stdout.splitlines()[-1])["equal"] is True


def streamed_below_10_ignored(task: ReplicationTask) -> tuple[str, str, str]:
    """Two shards given 200 rows each, amount = id, the first's inserts below 10 ignored:
    the daemon started, those rows streamed downstream. Returns the filtered shard."""
    filtered, _ = task.shards
    with_row_filters(task, f"    - tables: {shard_glob(filtered)}\n      ignore_insert: 'amount < 10'\n")
    task.start()
    for shard in task.shards:
        task.sql(shard, f"INSERT INTO {{t}} SELECT seq, seq, NULL FROM `{shard[1]}`.seq_1_to_200")
    task.wait_for(
        lambda: (
            task.sandbox.downstream.execute(f"SELECT COUNT(*) FROM `{task.target_db}`.orders")[0][0]
            == 191 + 200
        ),
        timeout=60,
        what="the streamed rows",
    )
    return filtered


def test_resync_copies_again_only_the_rows_the_filter_keeps(sandbox, spark, tmp_path):
    task = ReplicationTask(sandbox, tmp_path, CREATE, shards_per_server=1)
    try:
        filtered = streamed_below_10_ignored(task)
        down = task.sandbox.downstream
        table = f"`{task.target_db}`.orders"
        assert task.stop() == 0
        src = task.source_of(filtered[0])
        origin = f"_source = '{src}' AND _schema = '{filtered[1]}' AND _table = '{filtered[2]}'"
        down.execute(f"DELETE FROM {table} WHERE {origin} AND id > 150")  # damaged by hand
        resync(task.config, spark, [task.shard_id(filtered)], rows_per_split=50)
        rows = down.execute(f"SELECT MIN(amount), COUNT(*) FROM {table} WHERE {origin}")
        assert tuple(rows[0]) == (10, 191)
        report = verify(task.config, spark, chunk_rows=100)
        assert report.tables[0].equal
    finally:
        task.cleanup()


# -- a shard's table loses a column a condition reads ------------------------------------------
STATUS = "CREATE TABLE {table} (id INT NOT NULL, amount INT, status VARCHAR(10), PRIMARY KEY (id))"


def test_a_shard_losing_a_filtered_column_pauses_and_the_way_out_loses_no_row(sandbox, tmp_path):
    task = admin_task(sandbox, tmp_path, STATUS)
    try:
        filtered, other, *_ = task.shards  # (the same source: its watermark moves on with the other's rows)
        base = task.config_path.read_text()
        with_row_filters(
            task, f"    - tables: {shard_glob(filtered)}\n      ignore_insert: \"status = 'test'\"\n"
        )
        task.start()
        down = task.sandbox.downstream

        def ids(shard):
            src = task.source_of(shard[0])
            return [
                r[0]
                for r in down.execute(
                    f"SELECT id FROM `{task.target_db}`.orders WHERE _source = '{src}' "
                    f"AND _schema = '{shard[1]}' AND _table = '{shard[2]}' ORDER BY id"
                )
            ]

        for shard in (filtered, other):
            task.sql(shard, "INSERT INTO {t} VALUES (1, 10, 'ok'), (2, 20, 'test')")
        task.wait_for(
            lambda: ids(filtered) == [1] and ids(other) == [1, 2], timeout=60, what="the first rows"
        )
        task.sql(filtered, "ALTER TABLE {t} DROP COLUMN status")
        task.sql(filtered, "INSERT INTO {t} VALUES (3, 30), (4, 40)")
        shard = task.shard_id(filtered)

        task.wait_for(lambda: pause_reason(task, filtered) is not None, timeout=60, what="the shard's pause")
        way_out = (
            f"; way out: change the condition, or leave the table out of the filter's tables in the task "
            f"config, restart the daemon, then `shardctl set-schema --source {shard.source} --table "
            f"{shard.table_key} --file F` (F: the table's SHOW CREATE TABLE) reads its rows since the pause again"
        )
        assert pause_reason(task, filtered) == (
            f"filters.rows[0].ignore_insert (\"status = 'test'\") cannot be evaluated on {shard}: "
            f"no column 'status' in {filtered[2]} (its columns: id, amount)" + way_out
        )
        # the other shards go on, its source's watermark with them, past the paused shard's rows
        for n in range(3, 13):
            task.sql(other, f"INSERT INTO {{t}} VALUES ({n}, {n}, 'x')")
            task.sql(filtered, f"INSERT INTO {{t}} VALUES ({n + 2}, {n})")
            time.sleep(0.3)
        task.wait_for(lambda: ids(other) == list(range(1, 13)), timeout=60, what="the other shard's rows")
        time.sleep(2)  # (a watermark write or two: options.heartbeat 1)
        assert ids(filtered) == [1] and pause_reason(task, filtered) is not None
        assert task.stop() == 0
        # restarted as it was, the daemon refuses the condition
        task.start(wait=False)
        assert task.wait_exit(60) == 2
        assert "no column 'status'" in task.log_text().splitlines()[-1]
        # the way out: the condition reads a column the table has now
        task.config_path.write_text(base)
        with_row_filters(task, f"    - tables: {shard_glob(filtered)}\n      ignore_insert: 'amount = 40'\n")
        task.start()
        task.sql(filtered, "INSERT INTO {t} VALUES (20, 20)")
        set_schema_as_upstream(task, filtered, tmp_path)
        kept = [1, 3, *range(5, 15), 20]  # 2 'test' before, 4 (amount 40) after the change
        task.wait_for(lambda: ids(filtered) == kept, timeout=60, what="the paused shard's rows")
        task.sql(filtered, "INSERT INTO {t} VALUES (21, 40), (22, 22)")
        task.wait_for(lambda: ids(filtered) == [*kept, 22], timeout=60, what="the resumed shard's rows")
        assert pause_reason(task, filtered) is None
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_rows_dropped_are_counted_once_when_their_source_is_read_again(sandbox, tmp_path):
    task = admin_task(sandbox, tmp_path, STATUS)
    try:
        counted_shard, pausing, *_ = task.shards  # (one source: a pause of one has it read the other again)
        with_row_filters(
            task,
            f'    - tables: ["{counted_shard[1]}.orders_1*"]\n      ignore_insert: "status = \'test\'"\n',
        )
        task.start()
        task.sql(pausing, "ALTER TABLE {t} DROP COLUMN status")
        task.sql(pausing, "INSERT INTO {t} VALUES (1, 10)")

        task.wait_for(lambda: pause_reason(task, pausing) is not None, timeout=60, what="the shard's pause")
        task.sql(counted_shard, "INSERT INTO {t} VALUES (1, 10, 'test'), (2, 20, 'test'), (3, 30, 'ok')")
        down = task.sandbox.downstream
        table = f"`{task.target_db}`.orders"
        task.wait_for(
            lambda: down.execute(f"SELECT COUNT(*) FROM {table} WHERE id = 3")[0][0] == 1, what="the kept row"
        )

        assert filtered_rows(task) == {(str(task.shard_id(counted_shard)), "insert"): 2}
        # the paused shard resumed with the condition unchanged: its source is read again from
        # its pause (the dropped rows with it), and the shard pauses again
        runs = task.log_text().count("re-reading source s1")
        set_schema_as_upstream(task, pausing, tmp_path)
        task.wait_for(lambda: task.log_text().count("re-reading source s1") > runs, what="the read again")
        task.wait_for(
            lambda: pause_reason(task, pausing) is not None, timeout=60, what="the shard's pause again"
        )
        task.sql(counted_shard, "INSERT INTO {t} VALUES (4, 40, 'test'), (5, 50, 'ok')")
        task.wait_for(
            lambda: down.execute(f"SELECT COUNT(*) FROM {table} WHERE id = 5")[0][0] == 1, what="the last row"
        )
        assert filtered_rows(task) == {(str(task.shard_id(counted_shard)), "insert"): 3}
        assert task.stop() == 0
    finally:
        task.cleanup()


@pytest.mark.long
def test_shardctl_resync_of_a_filtered_shard_copies_only_the_kept_rows(sandbox, tmp_path):
    """The operator's path: the daemon running, `shardctl resync` has it run the copy,
    rows written to both shards meanwhile, then `shardmerge verify` finds no difference."""
    task = admin_task(sandbox, tmp_path, CREATE, shards_per_server=1)
    try:
        filtered = streamed_below_10_ignored(task)
        down = task.sandbox.downstream
        table = f"`{task.target_db}`.orders"
        shard = task.shard_id(filtered)
        origin = f"_source = '{shard.source}' AND _schema = '{shard.schema}' AND _table = '{shard.table}'"
        down.execute(  # damaged by hand: rows gone, and rows the filter ignores upstream
            [
                f"DELETE FROM {table} WHERE {origin} AND id > 150",
                f"INSERT INTO {table} (id, amount, note, _source, _schema, _table) VALUES "
                f"(-1, 1, 'ignored', '{shard.source}', '{shard.schema}', '{shard.table}')",
            ]
        )
        done = shardctl(task, "resync", "--source", shard.source, "--table", shard.table_key)
        assert done.returncode == 0 and "started by the daemon" in done.stdout, done.stdout + done.stderr
        for n in range(201, 211):  # meanwhile: amount n % 20, below 10 for half of them
            for s in task.shards:
                task.sql(s, f"INSERT INTO {{t}} VALUES ({n}, {n % 20}, 'meanwhile')")
        task.wait_for(
            lambda: f"resync --shard {shard} ended (exit status 0)" in task.log_text(),
            timeout=300,
            what="the resync job",
        )
        kept = 191 + len([n for n in range(201, 211) if n % 20 >= 10])
        task.wait_for(
            lambda: down.execute(f"SELECT COUNT(*) FROM {table}")[0][0] == kept + 210,
            timeout=60,
            what="every kept row",
        )
        rows = down.execute(f"SELECT MIN(amount), COUNT(*), COUNT(DISTINCT id) FROM {table} WHERE {origin}")
        assert tuple(rows[0]) == (10, kept, kept)
        assert task.stop() == 0
        checked = shardmerge("verify", "--config", str(task.config_path), "--json")
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert json.loads(checked.stdout.splitlines()[-1])["equal"] is True
    finally:
        task.cleanup()
