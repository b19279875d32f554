"""The daemon's own tables in the downstream (`shardmerge_meta` by default).

Everything the daemon must know after a crash lives here, written in the same
transactions as the data it describes:

- checkpoint: per (source, shard, partition) the last change applied, committed
  with the rows (so a row is never applied twice nor lost); watermark: per source, a change
  id below which everything is applied; reading resumes at the transaction that holds it
  (replicator/state/progress.py);
- schema_history: every tracked table's CREATE TABLE after each DDL, so a worker
  can restart (or re-read a paused shard) with the schemas of that position; ddl_done: the
  last DDL of each shard the coordinator has handled (replicator/state/history.py);
- coordinator_*: each shard group's coordinator state (replicator/state/coordinator_store.py);
- ddl_journal: downstream DDL written down before it runs (seed 003; replicator/state/journal.py);
- pause, replay: shards whose rows wait, from which change on, and why; shards resumed whose
  rows of their paused time are being read again (replicator/state/pauses.py);
- task_state: whether the last stop was clean, and the partition count;
- backfill: per source, the state of the Spark backfill and the binlog positions
  before it read (P0: the stream starts there) and after it ended (P1: safe mode
  until there); p0/p1 are only written when a backfill hands off, so they keep the
  last finished one's while another runs;
- backfill_start, backfill_table, backfill_chunk: the backfill running (or
  interrupted): each source's P0 with the schemas there, each table's plan, and
  each chunk of each shard's rows, with its row count once committed downstream. A
  run after an interrupted one continues from them (replicator/state/chunks.py);
  the handoff forgets them.
- park: what paused shards' sources sent of them (replicator/apply/park.py);
- resync: shards copied again by `shardmerge resync` (replicator/apply/resync_store.py).
- binlog_operation: what operators did to blocked DDLs (replicator/apply/operation_log.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pymysql

from lattice import quote_string
from replicator.apply.lease import LEASE_SQL
from replicator.apply.operation_log import OPERATION_SQL
from replicator.apply.park import PARK_SQL
from replicator.apply.resync_store import RESYNC_SQL
from replicator.shard_id import ShardId
from replicator.state.chunks import Chunk, TablePlan
from replicator.state.coordinator_store import COORDINATOR_SQL, GroupStates
from replicator.state.db import MetaDb
from replicator.state.dead_letters import (
    DEAD_LETTER_ADDED,
    DEAD_LETTER_SQL,
    DeadLetterStore,
    ValidationErrorStore,
)
from replicator.state.history import HISTORY_ADDED, HISTORY_SQL, DdlDoneStore, HistoryStore
from replicator.state.journal import JOURNAL_ADDED, JOURNAL_SQL, JournalStore
from replicator.state.pauses import PAUSE_ADDED, PAUSE_SQL, PauseStore
from replicator.state.positions import Position
from replicator.state.progress import PROGRESS_ADDED, PROGRESS_SQL, CheckpointStore, WatermarkStore

SCHEMA_SQL = [
    *PROGRESS_SQL,
    *HISTORY_SQL,
    *JOURNAL_SQL,
    *DEAD_LETTER_SQL,
    *COORDINATOR_SQL,
    """CREATE TABLE IF NOT EXISTS {m}.task_state (
        task VARCHAR(64) NOT NULL, clean_stop TINYINT NOT NULL, partitions INT NOT NULL,
        started_at DOUBLE NULL, stopped_at DOUBLE NULL, spread VARCHAR(16) NOT NULL DEFAULT 'key',
        PRIMARY KEY (task)) ENGINE=InnoDB""",
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
    *LEASE_SQL,
    *PAUSE_SQL,
    PARK_SQL,
    RESYNC_SQL,
    OPERATION_SQL,
]


# columns added since a table was first made: (table, column, definition)
ADDED_COLUMNS = (
    ("task_state", "spread", "VARCHAR(16) NOT NULL DEFAULT 'key'"),
    # the GTIDs naming each saved position on any server (issue 45: failover)
    *PAUSE_ADDED,
    *PROGRESS_ADDED,
    *HISTORY_ADDED,
    *DEAD_LETTER_ADDED,
    *JOURNAL_ADDED,
    # when the server a registered connection is on started (issue 70: a takeover kills the
    # old holder's connections, not the ids a restarted server gave other sessions)
    ("lease_connection", "booted", "BIGINT NULL"),
)


@dataclass(frozen=True)
class BackfillRecord:
    source: str
    state: str  # running, failed, done
    p0: Position | None
    p1: Position | None
    message: str | None
    p0_gtid: str | None = None


class Meta(MetaDb):
    """Reads and writes of the meta schema. Methods named sql_* return statements
    to run inside a caller's transaction. (Being split table by table into the stores of
    replicator/state/: `pauses`, `checkpoints`, `watermarks`, `history`, `ddl_done`,
    `journal`, `dead_letters`, `validation_errors`, `groups`.)"""

    def __init__(self, connect: Callable[[], pymysql.connections.Connection], schema: str, task: str):
        super().__init__(connect, schema, task)
        self.pauses = PauseStore(self)
        self.checkpoints = CheckpointStore(self)
        self.watermarks = WatermarkStore(self)
        self.history = HistoryStore(self)
        self.ddl_done = DdlDoneStore(self)
        self.journal = JournalStore(self)
        self.dead_letters = DeadLetterStore(self)
        self.validation_errors = ValidationErrorStore(self)
        self.groups = GroupStates(self)

    def ensure(self) -> None:
        """The meta schema's tables, those missing made (every one on a first start), and
        the columns later versions added (one query when all is there: a restart)."""
        self.make_tables(SCHEMA_SQL, ADDED_COLUMNS)

    # -- task state ------------------------------------------------------------------
    def task_state(self) -> tuple[bool, int, str] | None:
        """Whether the last run stopped cleanly, and how its changes were spread over
        partitions: how many, and "key" or "source" (the checkpoints mean that)."""
        rows = self.rows(
            f"SELECT clean_stop, partitions, spread FROM {self.q}.task_state WHERE task={self.t}"
        )
        return (bool(rows[0][0]), int(rows[0][1]), str(rows[0][2])) if rows else None

    def mark_started(self, partitions: int, spread: str = "key") -> None:
        self.execute(
            [
                f"INSERT INTO {self.q}.task_state (task, clean_stop, partitions, spread, started_at) "
                f"VALUES ({self.t}, 0, {partitions}, '{spread}', {time.time()}) ON DUPLICATE KEY UPDATE "
                f"clean_stop=0, partitions={partitions}, spread='{spread}', started_at={time.time()}"
            ]
        )

    def mark_stopped(self) -> None:
        self.execute(
            [f"UPDATE {self.q}.task_state SET clean_stop=1, stopped_at={time.time()} WHERE task={self.t}"]
        )

    # -- backfill ----------------------------------------------------------------------
    def load_backfill(self) -> dict[str, BackfillRecord]:
        rows = self.rows(
            f"SELECT source, state, p0_file, p0_pos, p1_file, p1_pos, message, p0_gtid "
            f"FROM {self.q}.backfill WHERE task={self.t}"
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

    def sql_backfill(
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
        def text(value: str | None) -> str:
            return quote_string(value) if value is not None else "NULL"

        now = time.time()
        started = now if state == "running" else "NULL"
        finished = "NULL" if state == "running" else now
        return (
            f"INSERT INTO {self.q}.backfill (task, source, state, p0_file, p0_pos, p0_gtid, p1_file, p1_pos, "
            f"p1_gtid, tables, message, started_at, finished_at) VALUES ({self.t}, {quote_string(source)}, "
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
    def sql_backfill_start(
        self, source: str, position: Position, gtid: str | None, schemas: dict[str, str]
    ) -> str:
        return (
            f"INSERT INTO {self.q}.backfill_start (task, source, file, pos, gtid, schema_json) VALUES "
            f"({self.t},{quote_string(source)},{quote_string(position.file)},{position.pos},"
            f"{quote_string(gtid) if gtid else 'NULL'},{quote_string(json.dumps(schemas, sort_keys=True))})"
        )

    def load_backfill_starts(self) -> dict[str, tuple[Position, str | None, dict[str, str]]]:
        """Per source: P0 of the backfill running or interrupted, its GTID, the schemas there."""
        rows = self.rows(
            f"SELECT source, file, pos, gtid, schema_json FROM {self.q}.backfill_start WHERE task={self.t}"
        )
        return {r[0]: (Position(r[1], int(r[2])), r[3], json.loads(r[4])) for r in rows}

    def sql_backfill_table(self, plan: TablePlan) -> str:
        data = {"shards": [list(s) for s in plan.shards], "joined": plan.joined, "policy": plan.policy}
        return (
            f"INSERT INTO {self.q}.backfill_table (task, target, plan, losers) VALUES ({self.t},"
            f"{quote_string(plan.target)},{quote_string(json.dumps(data))},{quote_string(plan.losers)}) "
            f"ON DUPLICATE KEY UPDATE plan=VALUES(plan), losers=VALUES(losers)"
        )

    def load_backfill_tables(self) -> dict[str, TablePlan]:
        rows = self.rows(f"SELECT target, plan, losers FROM {self.q}.backfill_table WHERE task={self.t}")
        plans = {}
        for target, text, losers in rows:
            data = json.loads(text)
            shards = tuple((str(s), str(sql)) for s, sql in data["shards"])
            plans[target] = TablePlan(target, shards, data["joined"], data["policy"], losers)
        return plans

    def sql_backfill_chunks(self, target: str, shard: ShardId, chunks: Iterable[Chunk]) -> str:
        def number(value: int | None) -> str:
            return "NULL" if value is None else str(value)

        values = ",".join(
            f"({self.t},{quote_string(target)},{quote_string(str(shard))},{c.index},{number(c.low)},"
            f"{number(c.high)},{number(c.buckets)})"
            for c in chunks
        )
        columns = "task, target, shard, chunk, low, high, buckets"
        return f"INSERT INTO {self.q}.backfill_chunk ({columns}) VALUES {values}"

    def sql_chunk_done(self, target: str, shard: ShardId, index: int, rows: int) -> str:
        return (
            f"UPDATE {self.q}.backfill_chunk SET copied={int(rows)}, finished_at={time.time()} "
            f"WHERE task={self.t} AND target={quote_string(target)} AND shard={quote_string(str(shard))} "
            f"AND chunk={int(index)}"
        )

    def sql_chunks_pending(self, target: str) -> str:
        """Every chunk of the table to be copied again (the table starts over)."""
        return (
            f"UPDATE {self.q}.backfill_chunk SET copied=NULL, finished_at=NULL "
            f"WHERE task={self.t} AND target={quote_string(target)}"
        )

    def load_backfill_chunks(self) -> dict[str, dict[ShardId, tuple[Chunk, ...]]]:
        """target -> shard -> its chunks in order, finished ones with their row counts."""
        rows = self.rows(
            f"SELECT target, shard, chunk, low, high, buckets, copied FROM {self.q}.backfill_chunk "
            f"WHERE task={self.t} ORDER BY target, shard, chunk"
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

    def sql_forget_backfill_plan(self) -> list[str]:
        """The running backfill's plan and chunks gone: it handed off, or another starts over."""
        return [
            f"DELETE FROM {self.q}.{table} WHERE task={self.t}"
            for table in ("backfill_start", "backfill_table", "backfill_chunk")
        ]
