"""What operators did to blocked DDLs, as the meta schema keeps it (docs/dm.md): each `shardctl binlog
skip|replace|inject` and `shard-ddl-lock unlock`, with the
DDL it acted on, where that DDL is in its shard's binlog, what blocked it, the statements
given and what came of it. `shardctl binlog list` shows them beside the DDLs blocked now.

DM can set an operation ahead, for a binlog position not reached yet (and `binlog revert`
withdraws it); ours act at once on a DDL already blocked, so every row here is one done."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from lattice import quote_string
from replicator.shard_id import ShardId

OPERATION_SQL = """CREATE TABLE IF NOT EXISTS {m}.binlog_operation (
    task VARCHAR(64) NOT NULL, seq BIGINT NOT NULL AUTO_INCREMENT, target VARCHAR(255) NOT NULL,
    shard VARCHAR(255) NULL, position VARCHAR(255) NULL, command VARCHAR(32) NOT NULL,
    blocked VARCHAR(32) NOT NULL, ddl LONGTEXT NULL, statements LONGTEXT NOT NULL,
    outcome TEXT NOT NULL, done_at DOUBLE NOT NULL,
    PRIMARY KEY (seq), KEY by_task (task, seq)) ENGINE=InnoDB"""


@dataclass(frozen=True)
class Operation:
    target: str
    shard: ShardId | None  # None: a journal entry of no shard's DDL (enable-ddl-propagation's)
    position: str | None  # the DDL's binlog position (None: not known)
    command: str  # `binlog skip`, `binlog replace`, `binlog inject`, `shard-ddl-lock unlock`
    blocked: str  # what held the DDL (BlockedDDL.kind)
    ddl: str | None
    statements: tuple[str, ...]  # the SQL given (replace, inject)
    outcome: str  # the decision's message
    done_at: float

    def to_data(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "shard": str(self.shard) if self.shard is not None else None,
            "position": self.position,
            "command": self.command,
            "blocked": self.blocked,
            "ddl": self.ddl,
            "statements": list(self.statements),
            "outcome": self.outcome,
            "done_at": self.done_at,
        }


class OperationLog:
    """The binlog_operation table of one task (`q`: the meta schema quoted, `t`: the task quoted)."""

    def __init__(self, q: str, t: str):
        self.q, self.t = q, t

    def sql_record(self, op: Operation) -> str:
        def text(value: str | None) -> str:
            return quote_string(value) if value is not None else "NULL"

        shard = str(op.shard) if op.shard is not None else None
        return (
            f"INSERT INTO {self.q}.binlog_operation (task, target, shard, position, command, blocked, ddl, "
            f"statements, outcome, done_at) VALUES ({self.t},{quote_string(op.target)},{text(shard)},"
            f"{text(op.position)},{quote_string(op.command)},{quote_string(op.blocked)},{text(op.ddl)},"
            f"{quote_string(json.dumps(list(op.statements)))},{quote_string(op.outcome)},{op.done_at})"
        )

    def sql_load(self, last: int) -> str:
        """The last `last` operations, oldest first."""
        return (
            "SELECT target, shard, position, command, blocked, ddl, statements, outcome, done_at FROM "
            f"(SELECT * FROM {self.q}.binlog_operation WHERE task={self.t} "
            f"ORDER BY seq DESC LIMIT {int(last)}) AS recent ORDER BY seq"
        )

    @staticmethod
    def parse(rows: list[tuple]) -> list[Operation]:
        return [
            Operation(
                target,
                ShardId.parse(shard) if shard else None,
                position,
                command,
                blocked,
                ddl,
                tuple(json.loads(statements)),
                outcome,
                float(done_at),
            )
            for target, shard, position, command, blocked, ddl, statements, outcome, done_at in rows
        ]
