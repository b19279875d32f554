"""Paused shards, and the replay of a resumed shard's paused time, as the meta schema holds
them (`pause` and `replay`).

A shard pauses at a change (`Pause.first`) and its rows are read again from there when it
resumes; a shard a decision resumed keeps its pause row, under `RESUMING_REASON`, till its
rows of the paused time are merged (`replay`: up to where, and the renames it made
meanwhile), so a restart reads them again from its pause."""

from __future__ import annotations

import json
from dataclasses import dataclass

from lattice import quote_string
from replicator.shard_id import ShardId
from replicator.state.db import MetaDb
from replicator.state.positions import ChangeId, Position

PAUSE_SQL = [
    """CREATE TABLE IF NOT EXISTS {m}.pause (
        task VARCHAR(64) NOT NULL, shard VARCHAR(255) NOT NULL, source VARCHAR(64) NOT NULL,
        file VARCHAR(255) NOT NULL, file_seq BIGINT NOT NULL, txn_pos BIGINT NOT NULL, idx BIGINT NOT NULL,
        reason TEXT NOT NULL, gtid VARCHAR(255) NULL, PRIMARY KEY (task, shard)) ENGINE=InnoDB""",
    """CREATE TABLE IF NOT EXISTS {m}.replay (
        task VARCHAR(64) NOT NULL, shard VARCHAR(255) NOT NULL, file_seq BIGINT NOT NULL,
        txn_pos BIGINT NOT NULL, renames TEXT NOT NULL, gtid VARCHAR(255) NULL,
        PRIMARY KEY (task, shard)) ENGINE=InnoDB""",
]

# columns added since the tables were first made: (table, column, definition)
PAUSE_ADDED = (
    ("pause", "gtid", "VARCHAR(255) NULL"),
    ("replay", "gtid", "VARCHAR(255) NULL"),
)

# the replay of a shard a decision resumed, saved with the decision: how far its paused
# rows go is known only when the daemon resumes it (or at the next start)
RESUMING = (0, 0)
# the reason a resumed shard's pause row is kept under till its rows of the paused time are
# merged (a restart reads it again from there): its pause is over, no way out applies to it
# (a pause again meanwhile saves its own reason over it: `sql_pause`)
RESUMING_REASON = "resuming: its rows written while paused are being merged; it runs again by itself"


@dataclass(frozen=True)
class Pause:
    shard: ShardId
    position: Position  # re-read from here
    first: ChangeId  # the first change of the shard not applied
    reason: str

    @property
    def source(self) -> str:
        return self.shard.source


@dataclass(frozen=True)
class ReplayRename:
    """A rename a shard made while paused, for its rows of that time read again once it
    resumes (Daemon._replayed). `held`: its old column was in the table the shard had when
    it paused, so downstream that name holds the shard's values, as the other shards' rows do
    (a pending rename moves them, a cancelled one has them back); otherwise the shard added
    the old column while paused, and a column of that name downstream is another's (a rename
    of others into that name): the values are the new name's."""

    old: str
    new: str
    held: bool = True

    def to_data(self) -> list:
        return [self.old, self.new, self.held]

    @classmethod
    def from_data(cls, data: list) -> ReplayRename:
        return cls(*data)  # (saved before `held` was: [old, new])


class PauseStore:
    """The `pause` and `replay` rows of one task."""

    def __init__(self, db: MetaDb):
        self.db = db

    def load(self) -> dict[ShardId, Pause]:
        db = self.db
        rows = db.rows(
            f"SELECT shard, file, file_seq, txn_pos, idx, reason FROM {db.q}.pause WHERE task={db.t}"
        )
        pauses = (
            Pause(ShardId.parse(shard), Position(file, int(pos)), (int(seq), int(pos), int(idx)), why)
            for shard, file, seq, pos, idx, why in rows
        )
        return {p.shard: p for p in pauses}

    def sql_pause(self, pause: Pause) -> str:
        db, f = self.db, pause.first
        return (
            f"INSERT INTO {db.q}.pause (task, shard, source, file, file_seq, txn_pos, idx, reason, gtid) "
            f"VALUES ({db.t},{quote_string(str(pause.shard))},{quote_string(pause.source)},"
            f"{quote_string(pause.position.file)},{f[0]},{f[1]},{f[2]},{quote_string(pause.reason)},"
            f"{db.gtid_before(pause.source, f)}) ON DUPLICATE KEY UPDATE reason=VALUES(reason)"
        )

    def sql_resuming(self, shard: ShardId) -> str:
        """A resumed shard whose pause is kept till its paused rows merge: said so (its old
        reason named ways out that no longer apply)."""
        db = self.db
        return (
            f"UPDATE {db.q}.pause SET reason={quote_string(RESUMING_REASON)} "
            f"WHERE task={db.t} AND shard={quote_string(str(shard))}"
        )

    def sql_watermark_back(self, shard: ShardId) -> str:
        """The shard's source's watermark back to its saved pause where it is past it: its
        rows from there are read again from the binlog (run before its pause row goes)."""
        db = self.db
        return (
            f"UPDATE {db.q}.watermark w JOIN {db.q}.pause p ON p.task = w.task AND p.source = w.source "
            f"SET w.file = p.file, w.file_seq = p.file_seq, w.txn_pos = p.txn_pos, w.idx = p.idx, "
            f"w.gtid = p.gtid WHERE w.task={db.t} AND p.shard={quote_string(str(shard))} "
            f"AND (w.file_seq, w.txn_pos, w.idx) > (p.file_seq, p.txn_pos, p.idx)"
        )

    def sql_unpause(self, shard: ShardId) -> str:
        db = self.db
        return f"DELETE FROM {db.q}.pause WHERE task={db.t} AND shard={quote_string(str(shard))}"

    # -- replays of a resumed shard's paused time ----------------------------------------------
    def load_replays(self) -> dict[ShardId, tuple[tuple[int, int], tuple[ReplayRename, ...]]]:
        db = self.db
        rows = db.rows(f"SELECT shard, file_seq, txn_pos, renames FROM {db.q}.replay WHERE task={db.t}")
        return {
            ShardId.parse(shard): ((int(seq), int(pos)), tuple(map(ReplayRename.from_data, json.loads(data))))
            for shard, seq, pos, data in rows
        }

    def sql_replay(self, shard: ShardId, to: tuple[int, int], renames: tuple[ReplayRename, ...]) -> str:
        """A resumed shard's rows read again up to `to` are of its paused time (`RESUMING`:
        saved with the decision that resumes it, before the daemon knows how far)."""
        db = self.db
        data = json.dumps([r.to_data() for r in renames])
        state = db.gtid_before(shard.source, (*to, 0)) if to != RESUMING else "NULL"
        return (
            f"REPLACE INTO {db.q}.replay (task, shard, file_seq, txn_pos, renames, gtid) VALUES "
            f"({db.t},{quote_string(str(shard))},{to[0]},{to[1]},{quote_string(data)},{state})"
        )

    def sql_replayed(self, shard: ShardId) -> str:
        db = self.db
        return f"DELETE FROM {db.q}.replay WHERE task={db.t} AND shard={quote_string(str(shard))}"
