"""The differential DDL corpus (tests/ddl_corpus.py): how it reads mysqltest files, and a
fixed sample of MariaDB's own test suite replayed against the sandbox, on the upstream
side (our tracker) and the downstream side (the coordinator and its DDL). `make corpus` runs
the whole selection."""

from __future__ import annotations

from replicator.sandbox import Sandbox
from tests.ddl_corpus import (
    CRASH,
    DIFFER,
    SETUPS,
    SUITE,
    Extraction,
    extract,
    extract_file,
    read_commands,
    run_all,
)
from tests.ddl_corpus_downstream import AGREE

# A made-up .test file with the mysqltest forms the reader must know.
MYSQLTEST = """\
# a comment; with a semicolon
--source include/have_innodb.inc
let $engine= InnoDB;
create table t1 (a int,
  b varchar(10) default 'x;y');
--error ER_DUP_FIELDNAME
alter table t1 add a int;
error 1060;
alter table t1 add b int;
delimiter |;
create table t2 (c int)|
delimiter ;|
if ($engine == InnoDB)
{
  alter table t1 add c int;
}
eval alter table t1 engine=$engine;
drop table t1, t2;
--perl
print "create table t9 (a int);\\n";
EOF
create table t3 (a int); rename table t3 to t4; alter table t4 add b int; drop table t4;
create temporary table t5 (a int);
alter table t5 add b int;
drop table t5;
create table t6 (a int) partition by hash (a);
create table other.t7 (a int);
"""


def test_reads_statements_as_mysqltest() -> None:
    commands = read_commands(MYSQLTEST)
    sqls = [c.sql for c in commands]
    assert sqls[0] == "create table t1 (a int,\n  b varchar(10) default 'x;y')"
    assert [c.expect_error for c in commands[:3]] == [False, True, True]
    assert sqls[3] == "create table t2 (c int)"
    assert [c.conditional for c in commands if c.sql == "alter table t1 add c int"] == [True]
    assert [c.evaluated for c in commands if "$engine" in c.sql] == [True]
    assert not any("t9" in sql for sql in sqls)  # a perl block is not SQL
    assert commands[0].line == 4 and commands[3].line == 11


def test_groups_one_table_from_create_to_drop() -> None:
    extraction = Extraction()
    extract_file("main/x.test", MYSQLTEST, extraction)
    by_table = {s.table: [step.sql for step in s.steps] for s in extraction.sequences}
    # t1: its conditional ALTER and its eval ALTER are left out and end its story there
    assert by_table["t1"] == [
        "create table t1 (a int,\n  b varchar(10) default 'x;y')",
        "alter table t1 add a int",
        "alter table t1 add b int",
    ]
    assert by_table["t2"] == ["create table t2 (c int)"]  # a DROP of two tables is not replayed
    assert by_table["t3"] == [
        "create table t3 (a int)",
        "rename table t3 to t4",
        "alter table t4 add b int",
        "drop table t4",
    ]
    assert set(by_table) == {"t1", "t2", "t3"}  # no temporary, partitioned or other schema's table
    assert extraction.sequences[0].source == "main/x.test:4"
    assert extraction.left_out["temporary table"] == 1
    assert extraction.left_out["hidden by a temporary table"] == 2


def test_the_suite_is_installed() -> None:
    assert (SUITE / "main").is_dir(), f"no MariaDB test suite in {SUITE}: `make setup` installs mariadb-test"
    extraction = extract()
    assert len(extraction.sequences) > 1000


SAMPLE_SIZE = 30


def test_sample_agrees_with_mariadb(sandbox: Sandbox) -> None:
    """The first sequences of the selection, sorted by file and line (a few seconds), on
    both sides. Upstream: no statement crashes our code, and every table both sides hold
    is the same. Downstream (one shard, two identical shards): nothing crashes, the server
    takes every statement we emit, no shard stays paused, and the downstream table is the
    join, which is the upstream table, but for one known difference (below)."""
    sample = extract().sequences[:SAMPLE_SIZE]
    run = run_all(sandbox.upstreams[0], sample, sandbox.downstream)
    bad = [
        f"{v.outcome} {v.sequence.path}:{v.step.line}: {v.step.sql}\n{v.detail}"
        for v in run.verdicts
        if v.outcome in (CRASH, DIFFER)
    ]
    assert not bad, "\n".join(bad)
    assert len(run.verdicts) > SAMPLE_SIZE
    down = run.downstream
    assert down is not None and not down.broken and not down.inspect
    bad = [
        f"{v.setup}: {v.outcome} {v.sequence.path}:{v.step.line}: {v.step.sql}\n  emitted: {v.emitted}\n  {v.detail}"
        for v in down.verdicts
        if v.outcome != AGREE
    ]
    assert not bad, "\n".join(bad)
    for setup in SETUPS:
        assert down.counts(setup)[AGREE] > SAMPLE_SIZE
