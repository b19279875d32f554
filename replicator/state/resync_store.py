"""Resyncs of one shard (issue 45, docs/operations/resync.md), as the meta schema holds them.

`shardmerge resync` copies one shard's rows again while the daemon streams the others.
The two agree through this table, whichever daemon of the task is active, as they do
through the lease: the command asks (`REQUESTED`); the daemon pauses the shard and, once
the shard's rows in flight are applied, says so (`READY`); the command deletes the
shard's rows downstream and copies them again from its upstream (`COPYING`, from P0:
where the binlog was before it read), then says where the stream takes over
(`COPIED`: P0, and P1 where the binlog was once it had copied); the daemon resumes the
shard from P0, its changes before P1 in safe mode (`STREAMING`), and forgets the resync
once its source's watermark is past P1. A daemon that refuses a resync says why
(`REFUSED`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from lattice import quote_string
from replicator.shard_id import ShardId
from replicator.state.positions import Position

RESYNC_SQL = """CREATE TABLE IF NOT EXISTS {m}.resync (
    task VARCHAR(64) NOT NULL, shard VARCHAR(255) NOT NULL, state VARCHAR(16) NOT NULL,
    p0_file VARCHAR(255) NULL, p0_pos BIGINT NULL, p0_gtid TEXT NULL,
    p1_file VARCHAR(255) NULL, p1_pos BIGINT NULL, p1_gtid TEXT NULL,
    message TEXT NULL, requested_at DOUBLE NOT NULL,
    PRIMARY KEY (task, shard)) ENGINE=InnoDB"""

# the reason a shard paused for its resync gives (`query-status`); its pause is the resync's
PAUSED_FOR_RESYNC = "resync: its rows are being copied again (shardmerge resync)"


class ResyncState(StrEnum):
    REQUESTED = "requested"
    READY = "ready"
    COPYING = "copying"
    COPIED = "copied"
    STREAMING = "streaming"
    REFUSED = "refused"
    FAILED = "failed"  # the command ended before the copy was done (its message says why)


@dataclass(frozen=True)
class Resync:
    shard: ShardId
    state: ResyncState
    p0: Position | None = None
    p0_gtid: str | None = None
    p1: Position | None = None
    p1_gtid: str | None = None
    message: str | None = None


def _position(file: str | None, pos: int | None) -> Position | None:
    return Position(file, int(pos)) if file is not None and pos is not None else None


def _text(value: str | None) -> str:
    return "NULL" if value is None else quote_string(value)


class ResyncStore:
    """The resync table of one task (`q`: the meta schema quoted, `t`: the task quoted)."""

    def __init__(self, q: str, t: str):
        self.q, self.t = q, t

    def sql_load(self) -> str:
        return (
            "SELECT shard, state, p0_file, p0_pos, p0_gtid, p1_file, p1_pos, p1_gtid, message "
            f"FROM {self.q}.resync WHERE task={self.t}"
        )

    @staticmethod
    def parse(rows: list[tuple]) -> dict[ShardId, Resync]:
        out = {}
        for shard, state, p0_file, p0_pos, p0_gtid, p1_file, p1_pos, p1_gtid, message in rows:
            resync = Resync(
                ShardId.parse(shard),
                ResyncState(state),
                _position(p0_file, p0_pos),
                p0_gtid,
                _position(p1_file, p1_pos),
                p1_gtid,
                message,
            )
            out[resync.shard] = resync
        return out

    def sql_request(self, shard: ShardId, now: float) -> str:
        """A new resync of the shard (one refused or finished before is replaced)."""
        return (
            f"REPLACE INTO {self.q}.resync (task, shard, state, requested_at) VALUES "
            f"({self.t}, {quote_string(str(shard))}, '{ResyncState.REQUESTED}', {now})"
        )

    def sql_state(self, resync: Resync) -> str:
        """The resync as given (its state, positions and message)."""
        p0, p1 = resync.p0, resync.p1
        return (
            f"UPDATE {self.q}.resync SET state='{resync.state}', "
            f"p0_file={_text(p0.file if p0 else None)}, p0_pos={p0.pos if p0 else 'NULL'}, "
            f"p0_gtid={_text(resync.p0_gtid)}, "
            f"p1_file={_text(p1.file if p1 else None)}, p1_pos={p1.pos if p1 else 'NULL'}, "
            f"p1_gtid={_text(resync.p1_gtid)}, message={_text(resync.message)} "
            f"WHERE task={self.t} AND shard={quote_string(str(resync.shard))}"
        )

    def sql_failed(self, shard: ShardId, message: str) -> str:
        """A resync the command could not finish (one the daemon took over stays as it is)."""
        return (
            f"UPDATE {self.q}.resync SET state='{ResyncState.FAILED}', message={quote_string(message)} "
            f"WHERE task={self.t} AND shard={quote_string(str(shard))} "
            f"AND state IN ('{ResyncState.REQUESTED}', '{ResyncState.READY}', '{ResyncState.COPYING}')"
        )

    def sql_forget(self, shard: ShardId) -> str:
        return f"DELETE FROM {self.q}.resync WHERE task={self.t} AND shard={quote_string(str(shard))}"
