"""Where a coordinator keeps its state. The coordinator does no I/O itself: it hands
every change to a store, shard by shard, so persisting one DDL never rewrites the
schemas of a thousand untouched shards. In the meta schema (`MetaStore`), a group's state
is its shards' rows (`coordinator_shard`), its own (`coordinator_meta`) and its decisions'
history (`coordinator_history`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from lattice import quote_string
from replicator.shard_id import ShardId
from replicator.state.db import MetaDb

COORDINATOR_SQL = [
    """CREATE TABLE IF NOT EXISTS {m}.coordinator_shard (
        task VARCHAR(64) NOT NULL, target VARCHAR(255) NOT NULL, shard VARCHAR(255) NOT NULL,
        data LONGTEXT NOT NULL, PRIMARY KEY (task, target, shard)) ENGINE=InnoDB""",
    """CREATE TABLE IF NOT EXISTS {m}.coordinator_meta (
        task VARCHAR(64) NOT NULL, target VARCHAR(255) NOT NULL, data LONGTEXT NOT NULL,
        PRIMARY KEY (task, target)) ENGINE=InnoDB""",
    """CREATE TABLE IF NOT EXISTS {m}.coordinator_history (
        task VARCHAR(64) NOT NULL, target VARCHAR(255) NOT NULL, seq BIGINT NOT NULL, data LONGTEXT NOT NULL,
        PRIMARY KEY (task, target, seq)) ENGINE=InnoDB""",
]


@dataclass
class StoredState:
    shards: dict[ShardId, dict[str, Any]] = field(default_factory=dict)  # shard -> its state's data
    meta: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)


class CoordinatorStore(Protocol):
    def load(self) -> StoredState | None: ...

    def put_shard(self, shard: ShardId, data: dict[str, Any] | None) -> None:
        """Save one shard's state; None removes the shard."""

    def put_meta(self, meta: dict[str, Any]) -> None: ...

    def add_history(self, entry: dict[str, Any]) -> None: ...


class InMemoryStore:
    """Keeps the state in this process (tests, `shardmerge plan`)."""

    def __init__(self) -> None:
        self.state: StoredState | None = None

    def _state(self) -> StoredState:
        if self.state is None:
            self.state = StoredState()
        return self.state

    def load(self) -> StoredState | None:
        return self.state

    def put_shard(self, shard: ShardId, data: dict[str, Any] | None) -> None:
        shards = self._state().shards
        if data is None:
            shards.pop(shard, None)
        else:
            shards[shard] = data

    def put_meta(self, meta: dict[str, Any]) -> None:
        self._state().meta = meta

    def add_history(self, entry: dict[str, Any]) -> None:
        self._state().history.append(entry)


class GroupStates:
    """The coordinator state of each group (`target`) of one task, as saved."""

    def __init__(self, db: MetaDb):
        self.db = db

    def load(self, target: str) -> StoredState | None:
        """As one decision's transaction left it: read in one snapshot (a member reads a group
        while the coordinator decides, issue 75)."""
        db = self.db
        where = f"WHERE task={db.t} AND target=%s"
        meta, shards, history = db.read_together([
            (f"SELECT data FROM {db.q}.coordinator_meta {where}", (target,)),
            (f"SELECT shard, data FROM {db.q}.coordinator_shard {where}", (target,)),
            (f"SELECT data FROM {db.q}.coordinator_history {where} ORDER BY seq", (target,)),
        ])
        if not meta:
            return None
        return StoredState(
            shards={ShardId.parse(s): json.loads(d) for s, d in shards},
            meta=json.loads(meta[0][0]),
            history=[json.loads(h[0]) for h in history],
        )

    def shards(self, target: str | None = None) -> list[ShardId]:
        """The shards the groups have (of `target`'s group only, where given)."""
        db = self.db
        where, args = ("", ()) if target is None else (" AND target=%s", (target,))
        return [ShardId.parse(r[0]) for r in db.rows(
            f"SELECT shard FROM {db.q}.coordinator_shard WHERE task={db.t}{where}", args
        )]

    def recent_history(self, target: str, last: int) -> list[dict[str, Any]]:
        """The group's `last` history entries, newest first (the live view shows these, not
        every version since the task began)."""
        db = self.db
        rows = db.rows(
            f"SELECT data FROM {db.q}.coordinator_history WHERE task={db.t} AND target=%s "
            f"ORDER BY seq DESC LIMIT %s",
            (target, last),
        )
        return [json.loads(r[0]) for r in rows]

    def history_count(self, target: str) -> int:
        """The group's history entries: their seqs run 1, 2, ... and none is deleted, so the
        newest seq, read at the primary key's end (not a count of every row: the live view
        asks at each refresh)."""
        db = self.db
        rows = db.rows(
            f"SELECT COALESCE(MAX(seq), 0) FROM {db.q}.coordinator_history WHERE task={db.t} AND target=%s",
            (target,),
        )
        return int(rows[0][0])


class MetaStore:
    """A CoordinatorStore over the meta schema. Writes are held until `flush_sql`
    hands them to the transaction that also writes the DDL journal, so a decision
    and the statements it calls for are saved together or not at all."""

    def __init__(self, db: MetaDb, target: str):
        self.meta = db
        self.target = target
        self.tq = quote_string(target)
        self.pending: list[str] = []
        self.states = GroupStates(db)
        self.history_seq = self.states.history_count(target)

    def load(self) -> StoredState | None:
        return self.states.load(self.target)

    def put_shard(self, shard: ShardId, data: dict[str, Any] | None) -> None:
        m, t, s = self.meta.q, self.meta.t, quote_string(str(shard))
        if data is None:
            self.pending.append(
                f"DELETE FROM {m}.coordinator_shard WHERE task={t} AND target={self.tq} AND shard={s}"
            )
        else:
            self.pending.append(
                f"INSERT INTO {m}.coordinator_shard (task, target, shard, data) VALUES "
                f"({t},{self.tq},{s},{quote_string(json.dumps(data))}) "
                f"ON DUPLICATE KEY UPDATE data=VALUES(data)"
            )

    def put_meta(self, meta: dict[str, Any]) -> None:
        m, t = self.meta.q, self.meta.t
        self.pending = [s for s in self.pending if "coordinator_meta" not in s]  # only the last one counts
        self.pending.append(
            f"INSERT INTO {m}.coordinator_meta (task, target, data) VALUES "
            f"({t},{self.tq},{quote_string(json.dumps(meta))}) ON DUPLICATE KEY UPDATE "
            f"data=VALUES(data)"
        )

    def add_history(self, entry: dict[str, Any]) -> None:
        self.history_seq += 1
        m, t = self.meta.q, self.meta.t
        self.pending.append(
            f"INSERT INTO {m}.coordinator_history (task, target, seq, data) VALUES "
            f"({t},{self.tq},{self.history_seq},{quote_string(json.dumps(entry))})"
        )

    def flush_sql(self) -> list[str]:
        out, self.pending = self.pending, []
        return out
