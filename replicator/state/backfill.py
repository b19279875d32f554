"""The Spark backfill, as the meta schema holds it: per source its state and the binlog
positions before it read (P0: the stream starts there) and after it ended (P1: safe mode
until there; `backfill`, whose p0/p1 are written only when a backfill hands off, so they
keep the last finished one's while another runs); and the backfill running or interrupted
(`backfill_start`, `backfill_table`, `backfill_chunk`): each source's P0 with the schemas
there, each table's plan, and each chunk of each shard's rows, with its row count once
committed downstream. A run after an interrupted one continues from them (`chunks.py`); the
handoff forgets them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass

from lattice import quote_string
from replicator.shard_id import ShardId
from replicator.state.chunks import Chunk, TablePlan
from replicator.state.db import MetaDb
from replicator.state.positions import Position

BACKFILL_SQL = [
    """CREATE TABLE IF NOT EXISTS {m}.backfill (
        task VARCHAR(64) NOT NULL, source VARCHAR(64) NOT NULL, state VARCHAR(16) NOT NULL,
        p0_file VARCHAR(255) NULL, p0_pos BIGINT NULL, p0_gtid TEXT NULL,
        p1_file VARCHAR(255) NULL, p1_pos BIGINT NULL, p1_gtid TEXT NULL,
        tables LONGTEXT NULL, message TEXT NULL, started_at DOUBLE NULL, finished_at DOUBLE NULL,
        PRIMARY KEY (task, source)) ENGINE=InnoDB""",
    """CREATE TABLE IF NOT EXISTS {m}.backfill_start (
        task VARCHAR(64) NOT NULL, source VARCHAR(64) NOT NULL,
        file VARCHAR(255) NOT NULL, pos BIGINT NOT NULL, gtid TEXT NULL, schema_json LONGTEXT NOT NULL,
        PRIMARY KEY (task, source)) ENGINE=InnoDB""",
    """CREATE TABLE IF NOT EXISTS {m}.backfill_table (
        task VARCHAR(64) NOT NULL, target VARCHAR(255) NOT NULL, plan LONGTEXT NOT NULL,
        losers CHAR(64) NOT NULL, PRIMARY KEY (task, target)) ENGINE=InnoDB""",
    """CREATE TABLE IF NOT EXISTS {m}.backfill_chunk (
        task VARCHAR(64) NOT NULL, target VARCHAR(255) NOT NULL, shard VARCHAR(255) NOT NULL,
        chunk INT NOT NULL, low DECIMAL(20,0) NULL, high DECIMAL(20,0) NULL, buckets INT NULL,
        copied BIGINT NULL, finished_at DOUBLE NULL,
        PRIMARY KEY (task, target, shard, chunk)) ENGINE=InnoDB""",
]


@dataclass(frozen=True)
class BackfillRecord:
    source: str
    state: str  # running, failed, done
    p0: Position | None
    p1: Position | None
    message: str | None
    p0_gtid: str | None = None


class BackfillStore:
    """The backfill's rows of one task."""

    def __init__(self, db: MetaDb):
        self.db = db

    def load(self) -> dict[str, BackfillRecord]:
        db = self.db
        rows = db.rows(
            f"SELECT source, state, p0_file, p0_pos, p1_file, p1_pos, message, p0_gtid "
            f"FROM {db.q}.backfill WHERE task={db.t}"
        )
        return {
            r[0]: BackfillRecord(
                r[0],
                r[1],
                Position(r[2], int(r[3])) if r[2] else None,
                Position(r[4], int(r[5])) if r[4] else None,
                r[6],
                r[7],
            )
            for r in rows
        }

    def sql(
        self,
        source: str,
        state: str,
        p0: Position | None = None,
        p1: Position | None = None,
        *,
        p0_gtid: str | None = None,
        p1_gtid: str | None = None,
        tables: Iterable[str] = (),
        message: str | None = None,
    ) -> str:
        db = self.db

        def text(value: str | None) -> str:
            return quote_string(value) if value is not None else "NULL"

        now = time.time()
        started = now if state == "running" else "NULL"
        finished = "NULL" if state == "running" else now
        return (
            f"INSERT INTO {db.q}.backfill (task, source, state, p0_file, p0_pos, p0_gtid, p1_file, p1_pos, "
            f"p1_gtid, tables, message, started_at, finished_at) VALUES ({db.t}, {quote_string(source)}, "
            f"{quote_string(state)}, {text(p0 and p0.file)}, {p0.pos if p0 else 'NULL'}, {text(p0_gtid)}, "
            f"{text(p1 and p1.file)}, {p1.pos if p1 else 'NULL'}, {text(p1_gtid)}, "
            f"{text(json.dumps(sorted(tables)))}, {text(message)}, {started}, {finished}) "
            f"ON DUPLICATE KEY UPDATE state=VALUES(state), message=VALUES(message), "
            f"finished_at=VALUES(finished_at), "
            + ", ".join(
                f"{c}=IFNULL(VALUES({c}), {c})"
                for c in ("p0_file", "p0_pos", "p0_gtid", "p1_file", "p1_pos", "p1_gtid")
            )
            + (", started_at=VALUES(started_at), tables=VALUES(tables)" if state == "running" else "")
        )

    # -- the backfill's plan and finished chunks (replicator/state/chunks.py) ------------------
    def sql_start(self, source: str, position: Position, gtid: str | None, schemas: dict[str, str]) -> str:
        db = self.db
        return (
            f"INSERT INTO {db.q}.backfill_start (task, source, file, pos, gtid, schema_json) VALUES "
            f"({db.t},{quote_string(source)},{quote_string(position.file)},{position.pos},"
            f"{quote_string(gtid) if gtid else 'NULL'},{quote_string(json.dumps(schemas, sort_keys=True))})"
        )

    def load_starts(self) -> dict[str, tuple[Position, str | None, dict[str, str]]]:
        """Per source: P0 of the backfill running or interrupted, its GTID, the schemas there."""
        db = self.db
        rows = db.rows(
            f"SELECT source, file, pos, gtid, schema_json FROM {db.q}.backfill_start WHERE task={db.t}"
        )
        return {r[0]: (Position(r[1], int(r[2])), r[3], json.loads(r[4])) for r in rows}

    def sql_table(self, plan: TablePlan) -> str:
        db = self.db
        data = {"shards": [list(s) for s in plan.shards], "joined": plan.joined, "policy": plan.policy}
        return (
            f"INSERT INTO {db.q}.backfill_table (task, target, plan, losers) VALUES ({db.t},"
            f"{quote_string(plan.target)},{quote_string(json.dumps(data))},{quote_string(plan.losers)}) "
            f"ON DUPLICATE KEY UPDATE plan=VALUES(plan), losers=VALUES(losers)"
        )

    def load_tables(self) -> dict[str, TablePlan]:
        db = self.db
        rows = db.rows(f"SELECT target, plan, losers FROM {db.q}.backfill_table WHERE task={db.t}")
        plans = {}
        for target, text, losers in rows:
            data = json.loads(text)
            shards = tuple((str(s), str(sql)) for s, sql in data["shards"])
            plans[target] = TablePlan(target, shards, data["joined"], data["policy"], losers)
        return plans

    def sql_chunks(self, target: str, shard: ShardId, chunks: Iterable[Chunk]) -> str:
        db = self.db

        def number(value: int | None) -> str:
            return "NULL" if value is None else str(value)

        values = ",".join(
            f"({db.t},{quote_string(target)},{quote_string(str(shard))},{c.index},{number(c.low)},"
            f"{number(c.high)},{number(c.buckets)})"
            for c in chunks
        )
        columns = "task, target, shard, chunk, low, high, buckets"
        return f"INSERT INTO {db.q}.backfill_chunk ({columns}) VALUES {values}"

    def sql_chunk_done(self, target: str, shard: ShardId, index: int, rows: int) -> str:
        db = self.db
        return (
            f"UPDATE {db.q}.backfill_chunk SET copied={int(rows)}, finished_at={time.time()} "
            f"WHERE task={db.t} AND target={quote_string(target)} AND shard={quote_string(str(shard))} "
            f"AND chunk={int(index)}"
        )

    def sql_chunks_pending(self, target: str) -> str:
        """Every chunk of the table to be copied again (the table starts over)."""
        db = self.db
        return (
            f"UPDATE {db.q}.backfill_chunk SET copied=NULL, finished_at=NULL "
            f"WHERE task={db.t} AND target={quote_string(target)}"
        )

    def load_chunks(self) -> dict[str, dict[ShardId, tuple[Chunk, ...]]]:
        """target -> shard -> its chunks in order, finished ones with their row counts."""
        db = self.db
        rows = db.rows(
            f"SELECT target, shard, chunk, low, high, buckets, copied FROM {db.q}.backfill_chunk "
            f"WHERE task={db.t} ORDER BY target, shard, chunk"
        )
        out: dict[str, dict[ShardId, list[Chunk]]] = {}
        for target, shard, index, low, high, buckets, copied in rows:
            chunk = Chunk(
                int(index),
                None if low is None else int(low),
                None if high is None else int(high),
                None if buckets is None else int(buckets),
                None if copied is None else int(copied),
            )
            out.setdefault(target, {}).setdefault(ShardId.parse(shard), []).append(chunk)
        return {t: {s: tuple(c) for s, c in shards.items()} for t, shards in out.items()}

    def sql_forget_plan(self) -> list[str]:
        """The running backfill's plan and chunks gone: it handed off, or another starts over."""
        db = self.db
        return [
            f"DELETE FROM {db.q}.{table} WHERE task={db.t}"
            for table in ("backfill_start", "backfill_table", "backfill_chunk")
        ]
