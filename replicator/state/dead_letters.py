"""Rows that did not go downstream as written, as the meta schema holds them: those the
downstream refused (`dead_letter`: pending while their shard waits for the operator's
`handle-error`, skipped under `on_row_error: skip`, then how they were handled), and those
continuous validation found differing (`validation_error`, open till cleared)."""

from __future__ import annotations

import time
from typing import Any, Protocol

from lattice import quote_string
from replicator.shard_id import ShardId
from replicator.state.db import MetaDb
from replicator.state.positions import ChangeId

DEAD_LETTER_SQL = [
    """CREATE TABLE IF NOT EXISTS {m}.dead_letter (
        task VARCHAR(64) NOT NULL, seq BIGINT NOT NULL AUTO_INCREMENT, shard VARCHAR(255) NOT NULL,
        target VARCHAR(255) NOT NULL, file VARCHAR(255) NOT NULL, file_seq BIGINT NOT NULL,
        txn_pos BIGINT NOT NULL, idx BIGINT NOT NULL, part INT NOT NULL, row_key TEXT NOT NULL,
        statement LONGTEXT NOT NULL, error TEXT NOT NULL, state VARCHAR(16) NOT NULL, action LONGTEXT NULL,
        created_at DOUBLE NOT NULL, handled_at DOUBLE NULL, gtid VARCHAR(64) NULL,
        PRIMARY KEY (seq), KEY by_shard (task, shard, state)) ENGINE=InnoDB""",
    """CREATE TABLE IF NOT EXISTS {m}.validation_error (
        task VARCHAR(64) NOT NULL, seq BIGINT NOT NULL AUTO_INCREMENT, target VARCHAR(255) NOT NULL,
        shard VARCHAR(255) NOT NULL, row_key TEXT NOT NULL, problem TEXT NOT NULL, file VARCHAR(255) NOT NULL,
        file_seq BIGINT NOT NULL, txn_pos BIGINT NOT NULL, idx BIGINT NOT NULL,
        state VARCHAR(16) NOT NULL, created_at DOUBLE NOT NULL,
        PRIMARY KEY (seq), KEY by_state (task, state)) ENGINE=InnoDB""",
]
# columns added since the tables were first made: (table, column, definition)
DEAD_LETTER_ADDED = (("dead_letter", "gtid", "VARCHAR(64) NULL"),)

_LETTER = (
    *("seq", "shard", "target", "file", "file_seq", "txn_pos", "idx", "part", "key", "statement", "error"),
    *("state", "action", "created_at", "handled_at"),
)
_ERROR = (
    *("seq", "target", "shard", "key", "problem", "file", "file_seq", "txn_pos", "idx"),
    *("state", "created_at"),
)


class RefusedRow(Protocol):
    """What the dead-letter table keeps of a refused row (`replicator.apply.refused.Refused`)."""

    shard: ShardId
    target: str
    id: ChangeId
    part: int
    key: str
    statement: str
    error: str


def _columns(names: tuple[str, ...]) -> str:
    return ", ".join("row_key" if n == "key" else n for n in names)


class DeadLetterStore:
    """The `dead_letter` rows of one task."""

    def __init__(self, db: MetaDb):
        self.db = db

    def sql_add(self, refused: RefusedRow, file: str, state: str) -> str:
        """A refused row: `pending` while its shard waits for the operator (handle-error),
        `skipped` when on_row_error: skip let it go."""
        db, r, cid = self.db, refused, refused.id
        texts = (str(r.shard), r.target, file, r.key, r.statement, r.error, state)
        shard, target, file, key, statement, error, state = (quote_string(t) for t in texts)
        return (
            f"INSERT INTO {db.q}.dead_letter (task, shard, target, file, file_seq, txn_pos, idx, part, "
            f"row_key, statement, error, state, created_at, gtid) VALUES ({db.t},{shard},{target},{file},"
            f"{cid[0]},{cid[1]},{cid[2]},{r.part},{key},{statement},{error},{state},{time.time()},"
            f"{db.own_gtid(r.shard.source, cid)})"
        )

    def sql_handled(self, seq: int, state: str, action: str | None = None) -> str:
        db = self.db
        return (
            f"UPDATE {db.q}.dead_letter SET state={quote_string(state)}, "
            f"action={quote_string(action) if action is not None else 'NULL'}, handled_at={time.time()} "
            f"WHERE task={db.t} AND seq={int(seq)}"
        )

    def list(self, shard: ShardId | None = None, state: str | None = None) -> list[dict[str, Any]]:
        db = self.db
        where, args = [f"task={db.t}"], []
        if shard is not None:
            where.append("shard=%s")
            args.append(str(shard))
        if state is not None:
            where.append("state=%s")
            args.append(state)
        rows = db.rows(
            f"SELECT {_columns(_LETTER)} FROM {db.q}.dead_letter WHERE {' AND '.join(where)} ORDER BY seq",
            tuple(args),
        )
        return [dict(zip(_LETTER, row, strict=True)) for row in rows]


class ValidationErrorStore:
    """The `validation_error` rows of one task (replicator/apply/validator.py)."""

    def __init__(self, db: MetaDb):
        self.db = db

    def sql_add(self, target: str, shard: ShardId, key: str, problem: str, file: str, cid: ChangeId) -> str:
        db = self.db
        texts = (target, str(shard), key, problem, file)
        target, shard_text, key, problem, file = (quote_string(t) for t in texts)
        return (
            f"INSERT INTO {db.q}.validation_error (task, target, shard, row_key, problem, file, file_seq, "
            f"txn_pos, idx, state, created_at) VALUES ({db.t},{target},{shard_text},{key},{problem},{file},"
            f"{cid[0]},{cid[1]},{cid[2]},'open',{time.time()})"
        )

    def list(self, state: str | None = "open") -> list[dict[str, Any]]:
        db = self.db
        where = f"task={db.t}" + (f" AND state={quote_string(state)}" if state else "")
        rows = db.rows(f"SELECT {_columns(_ERROR)} FROM {db.q}.validation_error WHERE {where} ORDER BY seq")
        return [dict(zip(_ERROR, row, strict=True)) for row in rows]

    def clear(self, seq: int | None = None) -> int:
        """Mark open errors cleared (one, or all); returns how many."""
        db = self.db
        with db.session() as conn, conn.cursor() as cur:
            only = f" AND seq={int(seq)}" if seq is not None else ""
            return cur.execute(
                f"UPDATE {db.q}.validation_error SET state='cleared' WHERE task={db.t} AND state='open'{only}"
            )
