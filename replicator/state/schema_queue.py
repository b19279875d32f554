"""Schema changes a member of the task sends the coordinator, and the coordinator's answers,
as the meta schema holds them (`schema_queue`; issue 75: only the member holding the task's
lease decides DDL, for the whole group).

A member whose worker reads a shard's DDL sends it here (`sql_send`, in its transaction fenced
by its sources) and holds that shard's rows behind it; its source's other shards go on. The
coordinator takes what was sent in order (`sent`), decides each as its own workers' DDLs, and
writes its answer (`sql_answer`); the member takes every answer to its shards (`answered`,
`sql_forget_entries`) and starts again for the one it waits for. A DDL sent again (the member
started again and read it again) is the same entry: one decision. The event and the answer are
pickled with a format version, as a paused shard's park is: the members of a task run one
version (one of another is refused, named)."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

from lattice import quote_string
from replicator.shard_id import ShardId
from replicator.state.db import MetaDb
from replicator.state.positions import ChangeId

FORMAT = 1
SCHEMA_QUEUE_SQL = [
    """CREATE TABLE IF NOT EXISTS {m}.schema_queue (
  task VARCHAR(64) NOT NULL, seq BIGINT NOT NULL AUTO_INCREMENT, member VARCHAR(255) NOT NULL,
  shard VARCHAR(255) NOT NULL, file_seq BIGINT NOT NULL, pos BIGINT NOT NULL, idx BIGINT NOT NULL,
  format INT NOT NULL, event LONGBLOB NOT NULL, answer LONGBLOB NULL,
  PRIMARY KEY (seq), UNIQUE KEY one_ddl (task, shard, file_seq, pos, idx)) ENGINE=InnoDB"""
]


class QueueFormatError(Exception):
    """An entry written by a member of another version: the task's members must run one."""


@dataclass(frozen=True)
class Answered:
    """An entry the coordinator answered: its order, the shard and change, the answer."""

    seq: int
    shard: ShardId
    change: ChangeId
    answer: Any


@dataclass(frozen=True)
class Sent:
    """A schema change a member sent: its entry's order, the member, and the event."""

    seq: int
    member: str
    event: Any  # (a worker's DDLEvent)


class SchemaQueue:
    """The `schema_queue` rows of one task."""

    def __init__(self, db: MetaDb):
        self.db = db

    def sql_send(self, member: str, shard: ShardId, change: ChangeId, event: Any) -> str:
        """The member's schema change of `shard` at `change`, for the coordinator (a second
        sending of the same is the same entry)."""
        db = self.db
        data = _blob(event)
        return (
            f"INSERT IGNORE INTO {db.q}.schema_queue (task, member, shard, file_seq, pos, idx, format, "
            f"event) VALUES ({db.t}, {quote_string(member)}, {quote_string(str(shard))}, {int(change[0])}, "
            f"{int(change[1])}, {int(change[2])}, {FORMAT}, {data})"
        )

    def sent(self, after: int = 0) -> list[Sent]:
        """What was sent after entry `after` and is not answered, in the order it was sent."""
        db = self.db
        rows = db.rows(
            f"SELECT seq, member, format, event FROM {db.q}.schema_queue WHERE task = {db.t} "
            f"AND seq > {int(after)} AND answer IS NULL ORDER BY seq"
        )
        return [Sent(int(seq), str(member), _loaded(fmt, event, seq)) for seq, member, fmt, event in rows]

    def sql_answer(self, seq: int, answer: Any) -> str:
        """The coordinator's answer to entry `seq` (in its decision's transaction)."""
        db = self.db
        where = f"task = {db.t} AND seq = {int(seq)}"
        return f"UPDATE {db.q}.schema_queue SET answer = {_blob(answer)} WHERE {where}"

    def answered(self) -> list[Answered]:
        """Every answered entry of the task (a queue: the few DDLs in flight, no more; read
        whole, as the members' shards are many and their entries few)."""
        db = self.db
        rows = db.rows(
            f"SELECT seq, shard, file_seq, pos, idx, format, answer FROM {db.q}.schema_queue "
            f"WHERE task = {db.t} AND answer IS NOT NULL ORDER BY seq"
        )
        return [
            Answered(int(seq), ShardId.parse(str(shard)), (int(f), int(p), int(i)), _loaded(fmt, answer, seq))
            for seq, shard, f, p, i, fmt, answer in rows
        ]

    def sql_forget_entries(self, seqs: list[int]) -> str:
        """Entries `seqs`, taken (by primary key)."""
        db = self.db
        listed = ", ".join(str(int(s)) for s in seqs)
        return f"DELETE FROM {db.q}.schema_queue WHERE task = {db.t} AND seq IN ({listed})"


def _blob(value: Any) -> str:
    return "x'" + pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL).hex() + "'"


def _loaded(fmt: int, data: bytes, seq: int) -> Any:
    if int(fmt) != FORMAT:
        raise QueueFormatError(
            f"schema queue entry {seq} was written in format {fmt}, this daemon reads {FORMAT}: "
            "run one version of shardmerge on every member of the task"
        )
    return pickle.loads(data)
