"""The downstream DDL journal, as the meta schema holds it (`ddl_journal`, docs/design.md "The DDL
journal"): a
group's downstream statements written down before they run, with how many ran, so a
restart finishes (or skips) an entry a crash broke off, and an entry the downstream
refused waits for the operator (`journal retry` / `skip`)."""

from __future__ import annotations

import json
from typing import Any

from lattice import quote_string
from replicator.shard_id import ShardId
from replicator.state.db import MetaDb

JOURNAL_SQL = [
    """CREATE TABLE IF NOT EXISTS {m}.ddl_journal (
        task VARCHAR(64) NOT NULL, target VARCHAR(255) NOT NULL, seq BIGINT NOT NULL,
        shard VARCHAR(255) NULL, version VARCHAR(32) NOT NULL,
        statements LONGTEXT NOT NULL, tables LONGTEXT NOT NULL, next_index INT NOT NULL DEFAULT 0,
        done TINYINT NOT NULL DEFAULT 0,
        created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
        position VARCHAR(255) NULL, ddl LONGTEXT NULL,
        PRIMARY KEY (task, target, seq)) ENGINE=InnoDB""",
]
# columns added since the table was first made: the shard's DDL an entry comes of, and its
# binlog position (issue 46: `shardctl binlog` names a DDL the downstream refused as DM
# does, by its position)
JOURNAL_ADDED = (
    ("ddl_journal", "position", "VARCHAR(255) NULL"),
    ("ddl_journal", "ddl", "LONGTEXT NULL"),
)


class JournalStore:
    """The `ddl_journal` entries of one task, per group (`target`)."""

    def __init__(self, db: MetaDb):
        self.db = db

    def pending(self, target: str) -> list[dict[str, Any]]:
        """The group's entries not done, oldest first."""
        db = self.db
        rows = db.rows(
            f"SELECT seq, shard, version, statements, tables, next_index, position, ddl "
            f"FROM {db.q}.ddl_journal WHERE task={db.t} AND target=%s AND done=0 ORDER BY seq",
            (target,),
        )
        return [
            {
                "seq": int(r[0]),
                "shard": ShardId.parse(r[1]) if r[1] else None,
                "version": r[2],
                "statements": json.loads(r[3]),
                "tables": json.loads(r[4]),
                "next_index": int(r[5]),
                "position": r[6],
                "ddl": r[7],
            }
            for r in rows
        ]

    def unfinished(self, target: str, start: int, end: int) -> dict[int, float]:
        """The group's entries seq `start` to `end` - 1 not done, with the seconds since each
        was made (a range of the primary key: those a member waits for)."""
        db = self.db
        rows = db.rows(
            f"SELECT seq, TIMESTAMPDIFF(MICROSECOND, created_at, NOW(6)) FROM {db.q}.ddl_journal "
            f"WHERE task={db.t} AND target=%s AND seq >= %s AND seq < %s AND done = 0",
            (target, int(start), int(end)),
        )
        return {int(seq): int(age) / 1e6 for seq, age in rows}

    def next_seq(self, target: str) -> int:
        db = self.db
        rows = db.rows(
            f"SELECT COALESCE(MAX(seq), 0) FROM {db.q}.ddl_journal WHERE task={db.t} AND target=%s",
            (target,),
        )
        return int(rows[0][0]) + 1

    def sql_entry(
        self,
        target: str,
        seq: int,
        shard: ShardId | None,
        version: str,
        statements: list[str],
        tables: list[Any],
        position: str | None = None,
        ddl: str | None = None,
    ) -> str:
        """`position` and `ddl`: the shard's DDL the entry comes of, where it is in its binlog
        (None: an operator's request, such as enable-ddl-propagation)."""
        db = self.db
        return (
            f"INSERT INTO {db.q}.ddl_journal "
            f"(task, target, seq, shard, version, statements, tables, position, ddl) VALUES "
            f"({db.t},{quote_string(target)},{seq},{quote_string(str(shard)) if shard else 'NULL'},"
            f"{quote_string(version)},{quote_string(json.dumps(statements))},"
            f"{quote_string(json.dumps(tables))},"
            f"{quote_string(position) if position is not None else 'NULL'},"
            f"{quote_string(ddl) if ddl is not None else 'NULL'})"
        )

    def sql_progress(self, target: str, seq: int, next_index: int, done: bool) -> str:
        db = self.db
        return (
            f"UPDATE {db.q}.ddl_journal SET next_index={next_index}, done={int(done)} "
            f"WHERE task={db.t} AND target={quote_string(target)} AND seq={seq}"
        )
