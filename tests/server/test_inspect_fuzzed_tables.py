"""`read_table` (information_schema, which the DDL journal and the downstream checks rely
on) reads every table the schema fuzzer makes as SHOW CREATE TABLE shows it: the
fuzzer's stories (seeded) played on a real MariaDB, both read after every statement it
takes. The fuzzer's oracle no longer calls product code, so this check lives here."""

from __future__ import annotations

import pymysql
import pytest

from lattice import parse_table
from replicator.apply.inspect import read_table
from tests.fuzz.generator import table_of
from tests.fuzz.oracle import UPSTREAM_SESSION
from tests.fuzz.story import offline_story
from tests.tables import differences

SEEDS = range(20)


@pytest.fixture
def conn(sandbox):
    conn = sandbox.upstreams[0].connect()
    for statement in UPSTREAM_SESSION:
        conn.cursor().execute(statement)
    yield conn
    conn.close()


def _shown(cur, db: str, table: str):
    cur.execute(f"SHOW CREATE TABLE `{db}`.`{table}`")
    return parse_table(cur.fetchone()[1])


@pytest.mark.parametrize("seed", SEEDS)
def test_read_table_reads_each_fuzzed_table_as_show_create_table(conn, seed):
    story = offline_story(seed)
    db = f"inspect_fz_{seed}"
    cur = conn.cursor()
    cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
    cur.execute(f"CREATE DATABASE `{db}`")
    cur.execute(f"USE `{db}`")
    read = 0
    try:
        statements = [(s, sql) for s, sql in story["shards"].items()]
        statements += [(st["shard"], st["ddl"]) for st in story["steps"] if "ddl" in st]
        for shard, sql in statements:
            try:
                cur.execute(sql)
            except pymysql.err.MySQLError:
                continue  # a step MariaDB refuses is not part of the story
            if sql.lstrip().upper().startswith("DROP"):
                continue
            name = table_of(shard)
            shown, inspected = _shown(cur, db, name), read_table(conn, db, name)
            assert inspected == shown, f"{shard} after `{sql}`: {differences(inspected, shown)}"
            read += 1
    finally:
        cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
    assert read > len(story["shards"])
