"""A shard's ALTER that converts its values in place, on real servers with the daemon as a
process (issue 43, live stories seed 20196): no row event carries the new values, and the
downstream column changes otherwise (the other shard keeps the old type, or a string holds
both), so with extract columns the shard's rows downstream are converted as the server
converted them upstream (replicator/schema/row_fixes.py). Each case converts values one
way the join's types would not: an ENUM's index, a SET's bits, a time's digits, rounding."""

from __future__ import annotations

import time

import pytest

from tests.replication import ReplicationTask

pytestmark = pytest.mark.timeout(240)

CASES = {  # NOT NULL: a shard lacking the column gives its rows a filler, not NULL (below)
    "enum-to-smallint": ("ENUM('x','y','z') NOT NULL", "SMALLINT NOT NULL", ["'x'", "'z'", "'y'"]),
    "set-to-int": ("SET('a','b','c') NOT NULL", "INT NOT NULL", ["'a,c'", "'b'", "''"]),
    "smallint-to-enum": ("SMALLINT NOT NULL", "ENUM('x','y','z') NOT NULL", ["1", "3", "2"]),
    "datetime-to-bigint": ("DATETIME NOT NULL", "BIGINT NOT NULL", ["'2024-02-29 12:30:45'", "'1999-12-31 23:59:59'"]),
    "fraction-rounded": ("DATETIME(3) NULL", "DATETIME NULL", ["'2024-02-29 12:30:45.678'", "'2024-01-01 00:00:00.123'"]),
    "scale-rounded": ("DECIMAL(6,2) NULL", "DECIMAL(6,1) NULL", ["1.25", "-3.75", "0.04"]),
    # (a CHAR gives values back without trailing spaces: live stories seed 27072)
    "trailing-spaces-dropped": ("VARCHAR(30) NULL", "CHAR(30) NULL", ["'a  '", "'b'", "'  c '"]),
    # (a shorter VARCHAR cuts the trailing spaces past its length: live stories L44)
    "trailing-spaces-cut": (
        "VARCHAR(70) NULL", "VARCHAR(60) NULL", ["CONCAT('a', REPEAT(' ', 69))", "'b  '", "CONCAT(REPEAT('c', 60), '  ')"]
    ),
    # (the shard's ALTER cuts its values, as a DDL without strict mode's refusal may: the
    # conversion downstream cuts them alike, live stories L48, seed 52062)
    "datetime-cut-to-varchar": (
        "DATETIME(3) NULL", "VARCHAR(20) NULL", ["'2024-02-29 12:30:45.678'", "'1999-12-31 23:59:59.5'"]
    ),
}
# The cases whose ALTER runs without strict mode (under SET STATEMENT, which the tracker reads
# through: the DDL is the ALTER).
LENIENT = {"datetime-cut-to-varchar": "SET STATEMENT sql_mode = '' FOR "}
# Two shards with the column in types of two families do not join (the shard pauses until the
# other converts too, and then the downstream ALTER converts every row): those conversions
# meet another shard that lacks the column, whose rows hold the old type's filler ('x', '',
# 0, a zero date), so the column becomes a string holding both. Within a family the other
# shard may keep the column.
SAME_FAMILY = {"fraction-rounded", "scale-rounded", "trailing-spaces-dropped", "trailing-spaces-cut"}


# (a conversion within a family meets a shard that lacks the column in make test-long: the
# one that lacks it is met by every other conversion in make test)
@pytest.fixture(params=[(c, other) if other == "keeps" or c not in SAME_FAMILY
                        else pytest.param((c, other), marks=pytest.mark.long)
                        for c in sorted(CASES) for other in ("lacks", "keeps")
                        if other == "lacks" or c in SAME_FAMILY], ids=lambda p: "-other-".join(p))
def case(sandbox, tmp_path, request):
    name, other = request.param
    old, new, values = CASES[name]
    t = ReplicationTask(sandbox, tmp_path, f"CREATE TABLE {{table}} (id INT PRIMARY KEY, c {old})",
                        shards_per_server=1)
    if other == "lacks":
        t.sql(t.shards[1], "ALTER TABLE {t} DROP COLUMN c")
    yield t, new, values, other, LENIENT.get(name, "")
    t.cleanup()


def test_a_shard_converting_its_column_has_its_rows_converted_downstream(case):
    task, new, values, other, lenient = case
    a, b = task.shards
    task.start()
    task.sql(a, "INSERT INTO {t} VALUES " + ", ".join(f"({i}, {v})" for i, v in enumerate(values)))
    task.sql(b, "INSERT INTO {t} (id) VALUES (100), (101)")
    task.wait_in_sync()
    task.sql(a, f"{lenient}ALTER TABLE {{t}} MODIFY c {new}")  # the column changes otherwise downstream
    task.wait_in_sync()
    # then the other shard has the new type too
    task.sql(b, f"ALTER TABLE {{t}} {'ADD COLUMN' if other == 'lacks' else 'MODIFY'} c {new}")
    task.wait_in_sync()
    assert "Traceback" not in task.log_text()


def test_a_column_added_while_paused_and_converted_holds_the_converted_value(sandbox, tmp_path):
    """Its rows got the column's default when it was added, which the later MODIFY converted
    (an ENUM's first member to 1), before the shard resumed."""
    task = ReplicationTask(sandbox, tmp_path, "CREATE TABLE {table} (id INT PRIMARY KEY, v INT NULL DEFAULT 1)",
                           shards_per_server=1)
    try:
        a, b = task.shards
        task.start()
        for k, shard in enumerate(task.shards):
            task.sql(shard, f"INSERT INTO {{t}} VALUES ({k * 100 + 1}, 0), ({k * 100 + 2}, 0)")
        task.sql(b, "ALTER TABLE {t} ADD COLUMN n SMALLINT NOT NULL DEFAULT 7")
        task.sql(a, "ALTER TABLE {t} ADD COLUMN n ENUM('x','y') NOT NULL")  # ENUM and SMALLINT: no join
        task.sql(a, "INSERT INTO {t} VALUES (3, 0, 'y')")
        task.sql(a, "ALTER TABLE {t} MODIFY n SMALLINT NOT NULL DEFAULT 7")  # 'x' is 1, 'y' 2: resumed
        task.wait_in_sync(timeout=90)
        rows = task.sandbox.downstream.execute(
            f"SELECT id, n FROM `{task.target_db}`.orders WHERE _table = '{a[2]}' ORDER BY id")
        assert [tuple(map(int, r)) for r in rows] == [(1, 1), (2, 1), (3, 2)]
    finally:
        task.cleanup()


@pytest.mark.parametrize("first", ["other", "itself"], ids=["other-renames-first", "its-resume-starts-it"])
def test_a_column_dropped_added_again_and_renamed_while_paused_holds_the_value_it_got(sandbox, tmp_path, first):
    """A paused shard drops its column, adds it again (its rows get the default upstream) and
    renames it. Downstream the rename's CHANGE moves every row's old value into the new
    name, the shard's too, which no row event sets: its rows are set to the value they
    got, whether another shard's rename started it or the shard's own resume does (live
    stories L57, seed 72065)."""
    task = ReplicationTask(
        sandbox, tmp_path, "CREATE TABLE {table} (id INT PRIMARY KEY, c INT NOT NULL DEFAULT 5, v INT NULL DEFAULT 1)",
        shards_per_server=1)
    try:
        a, b = task.shards
        task.start()
        task.sql(a, "INSERT INTO {t} VALUES (1, 9, 0), (2, 8, 0)")
        task.sql(b, "INSERT INTO {t} VALUES (100, 7, 0)")
        task.wait_in_sync()
        task.sql(a, "ALTER TABLE {t} ALTER COLUMN v SET DEFAULT 2")  # defaults 1 and 2 differ: paused
        task.sql(a, "ALTER TABLE {t} DROP COLUMN c")
        task.sql(a, "ALTER TABLE {t} ADD COLUMN c INT NOT NULL DEFAULT 5")
        task.sql(a, "ALTER TABLE {t} RENAME COLUMN c TO r")
        steps = [(b, "RENAME COLUMN c TO r"), (a, "ALTER COLUMN v SET DEFAULT 1")]  # the second resumes it
        for shard, change in steps if first == "other" else steps[::-1]:
            time.sleep(1.0)
            task.sql(shard, f"ALTER TABLE {{t}} {change}")
        task.wait_in_sync(timeout=90)
        rows = task.sandbox.downstream.execute(
            f"SELECT _table, id, r FROM `{task.target_db}`.orders ORDER BY id")
        assert [(t, int(i), int(r)) for t, i, r in rows] == [(a[2], 1, 5), (a[2], 2, 5), (b[2], 100, 7)]
        log = task.log_text()
        assert "Traceback" not in log and "resumed" in log
    finally:
        task.cleanup()


@pytest.mark.parametrize("crash_at", ["ddl_statement_ran:3", "ddl_copy_written:1", "ddl_copy_written:3",
                                      "ddl_statement_ran:4"], ids=["create", "copy", "write-back", "drop"])
def test_killed_in_a_conversion_it_finishes_it(sandbox, tmp_path, crash_at):
    """The journal entry of a conversion: the ALTER to a VARCHAR, then the scratch table's
    DROP IF EXISTS, CREATE, copy, conversion, write-back and DROP (the rows' statements
    commit with the journal's progress, the others may run again). Killed in one of them,
    the restarted daemon finishes the entry: the rows are the shard's, no scratch is left."""
    old, new, values = CASES["enum-to-smallint"]
    task = ReplicationTask(sandbox, tmp_path, f"CREATE TABLE {{table}} (id INT PRIMARY KEY, c {old})",
                           shards_per_server=1)
    a, b = task.shards

    def story() -> None:
        task.sql(a, "INSERT INTO {t} VALUES " + ", ".join(f"({i}, {v})" for i, v in enumerate(values)))
        task.sql(b, "INSERT INTO {t} (id) VALUES (100), (101)")
        time.sleep(1.0)
        task.sql(a, f"ALTER TABLE {{t}} MODIFY c {new}")

    try:
        task.sql(b, "ALTER TABLE {t} DROP COLUMN c")
        task.crash_and_recover(crash_at, story)
        log = task.log_text()
        assert "changed 3 rows" in log  # (the shard's rows, converted)
        assert not [t for (t,) in task.sandbox.downstream.execute(f"SHOW TABLES FROM `{task.target_db}`")
                    if t.startswith("__shardmerge_convert_")]
    finally:
        task.cleanup()


THROUGH = {  # the shard's type, the other shard's (wider: the downstream type), its rows' values
    "decimal-scale": ("DECIMAL(6,2)", "DECIMAL(8,4)", ["1.50", "-3.75", "0.00"]),
    "datetime-fraction": ("DATETIME", "DATETIME(3)", ["'2024-02-29 12:30:45'", "'1999-12-31 23:59:59'"]),
    "float-in-double": ("FLOAT", "DOUBLE", ["1.1", "-3.75", "0"]),
}


@pytest.mark.parametrize("who", ["the-other", "itself"])
@pytest.mark.parametrize("name", sorted(THROUGH))
def test_values_held_in_a_wider_type_read_as_their_own_once_a_string(sandbox, tmp_path, name, who):
    """Downstream the shard's values are held in the other shard's wider type (a DECIMAL(6,2)'s
    1.50 as 1.5000). When the column becomes a VARCHAR (the first shard's MODIFY pauses it, the
    second's resumes it), the server's conversion writes the wider type's text, which the
    shard's rows upstream never read (live stories seed 22159): they are converted from their
    own type, whichever of the two shards went first."""
    own, wider, values = THROUGH[name]
    task = ReplicationTask(sandbox, tmp_path, f"CREATE TABLE {{table}} (id INT PRIMARY KEY, c {own} NULL)",
                           shards_per_server=1)
    try:
        a, b = task.shards
        task.sql(b, f"ALTER TABLE {{t}} MODIFY c {wider} NULL")
        task.start()
        task.sql(a, "INSERT INTO {t} VALUES " + ", ".join(f"({i}, {v})" for i, v in enumerate(values)))
        task.sql(b, "INSERT INTO {t} VALUES (100, NULL), (101, NULL)")
        task.wait_in_sync()
        first, then = (b, a) if who == "the-other" else (a, b)
        task.sql(first, "ALTER TABLE {t} MODIFY c VARCHAR(40) NULL")
        time.sleep(1.0)  # (a string joins no number nor time: the shard pauses till the other's)
        task.sql(then, "ALTER TABLE {t} MODIFY c VARCHAR(40) NULL")
        task.wait_in_sync()
        texts = [v for (v,) in task.sql(a, "SELECT c FROM {t} ORDER BY id")]
        downstream = task.sandbox.downstream.execute(
            f"SELECT c FROM `{task.target_db}`.orders WHERE _table = '{a[2]}' ORDER BY id")
        assert [v for (v,) in downstream] == texts
    finally:
        task.cleanup()


def test_values_cut_by_a_lenient_alter_are_cut_alike_when_converted_downstream(sandbox, tmp_path):
    """A shard's DATETIME(3), held downstream as the other shard's DATETIME(6), made a
    VARCHAR(20) without strict mode (SET STATEMENT sql_mode = ''): its ALTER cuts each value to
    20 characters. The shard pauses (a string joins no time) until the other does the same;
    then its rows are converted downstream from their own type, and the conversion cuts them
    as the shard's ALTER did, where strict mode refused it (Data too long) and stopped the
    group (live stories L48, seed 52062)."""
    task = ReplicationTask(sandbox, tmp_path, "CREATE TABLE {table} (id INT PRIMARY KEY, c DATETIME(3) NULL)",
                           shards_per_server=1)
    try:
        a, b = task.shards
        task.sql(b, "ALTER TABLE {t} MODIFY c DATETIME(6) NULL")
        task.start()
        task.sql(a, "INSERT INTO {t} VALUES (1, '2024-02-29 12:30:45.678'), (2, '1999-12-31 23:59:59.5')")
        task.sql(b, "INSERT INTO {t} VALUES (100, '2024-01-01 10:00:00.123456'), (101, NULL)")
        task.wait_in_sync()
        task.sql(a, "SET STATEMENT sql_mode = '' FOR ALTER TABLE {t} MODIFY c VARCHAR(20) NULL")
        time.sleep(1.0)  # (paused till the other's)
        task.sql(b, "SET STATEMENT sql_mode = '' FOR ALTER TABLE {t} MODIFY c VARCHAR(20) NULL")
        task.wait_in_sync()
        downstream = task.sandbox.downstream.execute(
            f"SELECT id, c FROM `{task.target_db}`.orders WHERE _table = '{a[2]}' ORDER BY id")
        assert [tuple(r) for r in downstream] == [(1, "2024-02-29 12:30:45."), (2, "1999-12-31 23:59:59.")]
        log = task.log_text()
        assert "Traceback" not in log and "failed" not in log  # (the conversion, and no shard paused by it)
        assert "resumed" in log
    finally:
        task.cleanup()


def test_a_paused_shard_converting_twice_has_its_rows_converted_through_both(sandbox, tmp_path):
    """A DATETIME made a DATE pauses its shard (no join with the other's DATETIME(6)); made a
    DATETIME(6) again it resumes, its rows at midnight upstream: each MODIFY converted what
    the one before gave (live stories seed 23033), and so are its rows downstream."""
    task = ReplicationTask(sandbox, tmp_path, "CREATE TABLE {table} (id INT PRIMARY KEY, c DATETIME NOT NULL)",
                           shards_per_server=1)
    try:
        a, b = task.shards
        task.sql(b, "ALTER TABLE {t} MODIFY c DATETIME(6) NOT NULL")
        task.start()
        task.sql(a, "INSERT INTO {t} VALUES (1, '2024-02-29 12:30:45'), (2, '1999-12-31 23:59:59')")
        task.sql(b, "INSERT INTO {t} VALUES (100, '2024-01-01 10:00:00.5')")
        task.wait_in_sync()
        task.sql(a, "ALTER TABLE {t} MODIFY c DATE NOT NULL")
        task.sql(a, "ALTER TABLE {t} MODIFY c DATETIME(6) NOT NULL")
        task.wait_in_sync()
        rows = task.sandbox.downstream.execute(
            f"SELECT id, CAST(c AS CHAR) FROM `{task.target_db}`.orders WHERE _table = '{a[2]}' ORDER BY id")
        assert [tuple(r) for r in rows] == [(1, "2024-02-29 00:00:00.000000"), (2, "1999-12-31 00:00:00.000000")]
    finally:
        task.cleanup()


def test_a_paused_shard_that_renamed_a_column_has_its_other_conversions_read_from_its_own_type(sandbox, tmp_path):
    """A shard pauses on a DATETIME(6) made a BIGINT, renames another column while paused,
    and the other shard's same DDLs resume it with the column a string downstream (holding
    the dates of a shard that left): its rows are converted from the DATETIME(6) they hold
    downstream, as upstream, not read as the BIGINT it has now (live stories seed 24581:
    the conversion refused the dates, and the DDL and the shards stopped)."""
    task = ReplicationTask(sandbox, tmp_path,
                           "CREATE TABLE {table} (id INT PRIMARY KEY, c DATETIME(6) NOT NULL, d VARCHAR(10))",
                           shards_per_server=2)
    try:
        a, b, c, d = task.shards
        task.start()
        for n, shard in enumerate(task.shards):
            task.sql(shard, f"INSERT INTO {{t}} VALUES ({n * 10 + 1}, '2024-02-27 12:30:45.123456', 'x'), "
                            f"({n * 10 + 2}, '1999-12-31 23:59:59', NULL)")
        task.wait_in_sync()
        task.sql(c, "DROP TABLE {t}")  # its dates stay downstream
        task.sql(d, "DROP TABLE {t}")
        task.shards = [a, b]  # (compared: the two left)
        task.sql(a, "ALTER TABLE {t} MODIFY c BIGINT UNSIGNED NOT NULL")
        task.sql(a, "ALTER TABLE {t} CHANGE d e VARCHAR(10)")
        task.sql(b, "ALTER TABLE {t} CHANGE d e VARCHAR(10)")
        task.sql(b, "ALTER TABLE {t} MODIFY c BIGINT UNSIGNED NOT NULL")
        task.wait_in_sync()
        column = task.sandbox.downstream.execute(
            f"SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '{task.target_db}' "
            "AND TABLE_NAME = 'orders' AND COLUMN_NAME = 'c'")
        assert [tuple(r) for r in column] == [("varchar",)]
        for shard in (a, b):
            upstream = task.sql(shard, "SELECT id, CAST(c AS CHAR), e FROM {t} ORDER BY id")
            rows = task.sandbox.downstream.execute(
                f"SELECT id, c, e FROM `{task.target_db}`.orders WHERE _table = '{shard[2]}' ORDER BY id")
            assert [tuple(r) for r in rows] == [tuple(r) for r in upstream]
    finally:
        task.cleanup()


@pytest.mark.parametrize("moved", [False, True], ids=["written-under-the-old-name", "moved-by-the-rename"])
def test_a_pending_renames_old_name_made_a_string_reads_the_resumed_shards_values_as_theirs(
    sandbox, tmp_path, moved
):
    """A third shard renames a TIMESTAMP column away (pending: the others still have the
    name, and write it); one makes it a VARCHAR and pauses (another holds it as
    TIMESTAMP(6)); when the TIMESTAMP(6) shard leaves, the first resumes with the column a
    string downstream: its rows read '2024-01-01 10:00:00' as upstream, not the '.000000'
    of the wider type (live stories seed 24045). Its rows written under the old name after
    the rename started (a pending rename's old name was left out), and written before it,
    which the rename's CHANGE moved into r: those are converted from its own TIMESTAMP too,
    into c1, where the rename's copies read a row's value first."""
    task = ReplicationTask(sandbox, tmp_path, "CREATE TABLE {table} (id INT PRIMARY KEY, c1 TIMESTAMP NULL)",
                           shards_per_server=2)

    def rename() -> None:
        task.sql(b, "ALTER TABLE {t} CHANGE c1 r TIMESTAMP NULL")
        task.wait_for(lambda: "CHANGE COLUMN `c1` `r`" in task.log_text(), what="the rename downstream")

    try:
        a, b, c, d = task.shards
        task.start()
        task.sql(d, "DROP TABLE {t}")
        task.shards = [a, b, c]
        if not moved:
            rename()  # (before a's rows: else its CHANGE moves them into r, as documented)
        task.sql(a, "INSERT INTO {t} VALUES (1, '2024-01-01 10:00:00'), (2, NULL)")
        task.sql(c, "INSERT INTO {t} VALUES (21, '2024-01-01 11:00:00')")
        task.sql(c, "ALTER TABLE {t} MODIFY c1 TIMESTAMP(6) NULL")
        task.wait_in_sync(timeout=120)
        task.sql(a, "ALTER TABLE {t} MODIFY c1 VARCHAR(60) NULL")
        task.wait_for(lambda: f"{a[2]} paused from" in task.log_text(), what=f"{a[2]} to pause")
        if moved:
            rename()
        task.sql(c, "DROP TABLE {t}")
        task.shards = [a, b]
        task.wait_in_sync(timeout=120)
        rows = task.sandbox.downstream.execute(
            f"SELECT id, c1 FROM `{task.target_db}`.orders WHERE _table = '{a[2]}' ORDER BY id")
        assert [tuple(r) for r in rows] == [(1, "2024-01-01 10:00:00"), (2, None)]
    finally:
        task.cleanup()


def test_a_shard_resumed_by_a_rename_that_starts_has_its_rows_converted_where_the_rename_moved_them(
    sandbox, tmp_path
):
    """A shard's VARCHAR made a CHAR in another character set pauses it (latin1 and utf8mb4 do
    not join); upstream its trailing spaces are gone. The other shard's rename of the column
    resumes it: the rename starts, its CHANGE moves every row's value into the new name and
    the old name comes back empty for the shard that still has it. The resumed shard's rows
    are converted from where the CHANGE moved them, not from the empty old name: while the
    rename is pending, a row's value is its old name's, else its new name's (live stories
    L56, seed 70128)."""
    task = ReplicationTask(
        sandbox, tmp_path, "CREATE TABLE {table} (id INT PRIMARY KEY, c VARCHAR(4) CHARACTER SET latin1 NULL)",
        shards_per_server=1)
    try:
        a, b = task.shards
        task.start()
        task.sql(a, "INSERT INTO {t} VALUES (1, 'x  '), (2, ' '), (3, 'y'), (4, NULL)")
        task.sql(b, "INSERT INTO {t} VALUES (100, 'z ')")
        task.wait_in_sync()
        task.sql(a, "ALTER TABLE {t} MODIFY c CHAR(4) CHARACTER SET utf8mb4 NULL")
        time.sleep(1.0)  # (paused: the character sets do not join)
        task.sql(b, "ALTER TABLE {t} RENAME COLUMN c TO r")
        task.wait_in_sync()
        upstream = [tuple(r) for r in task.sql(a, "SELECT id, c FROM {t} ORDER BY id")]
        assert upstream == [(1, "x"), (2, ""), (3, "y"), (4, None)]
        downstream = task.sandbox.downstream.execute(
            f"SELECT id, COALESCE(c, r) FROM `{task.target_db}`.orders WHERE _table = '{a[2]}' ORDER BY id")
        assert [tuple(r) for r in downstream] == upstream
        log = task.log_text()
        assert "Traceback" not in log and "resumed" in log
    finally:
        task.cleanup()


def test_a_shard_converting_the_new_name_of_a_rename_another_started_has_every_row_converted(sandbox, tmp_path):
    """Another shard starts a rename; this one writes rows under the old name (its column
    then), renames too, and converts the new name in place (VARCHAR to CHAR: trailing
    spaces gone upstream) while the rename still waits for the rest: every row of it is
    converted downstream, those written under the old name after the start too (they hold
    their values downstream in the old name, converted now and cleared there), and the
    rename's last copy does not bring any back unconverted (live stories 120025, 130021:
    their spaces or fractions kept). On the old code it failed when the rows under the old
    name were applied after the start's CHANGE (seen in `make test`), not every run."""
    task = ReplicationTask(sandbox, tmp_path, "CREATE TABLE {table} (id INT PRIMARY KEY, c VARCHAR(10) NULL)")
    try:
        a, starter, *rest = task.shards
        task.start()
        task.sql(a, "INSERT INTO {t} VALUES (1, 'a   '), (2, 'b')")
        # (one server's binlog holds these in this order; compared once the rename ended)
        task.sql(starter, "ALTER TABLE {t} CHANGE c r VARCHAR(10) NULL")  # (the rename starts)
        task.sql(a, "INSERT INTO {t} VALUES (3, 'c   '), (4, '  d  ')")  # (under the old name)
        task.sql(a, "ALTER TABLE {t} CHANGE c r VARCHAR(10) NULL")
        task.sql(a, "ALTER TABLE {t} MODIFY r CHAR(10) NULL")  # (converts: the others still wait)
        time.sleep(3)
        for shard in rest:
            task.sql(shard, "ALTER TABLE {t} CHANGE c r VARCHAR(10) NULL")  # (the rename ends)
        task.wait_in_sync(timeout=90)
        rows = task.sandbox.downstream.execute(
            f"SELECT id, r FROM `{task.target_db}`.orders WHERE _table = '{a[2]}' ORDER BY id")
        assert [tuple(r) for r in rows] == [(1, "a"), (2, "b"), (3, "c"), (4, "  d")]
        assert "Traceback" not in task.log_text()
    finally:
        task.cleanup()
