"""How far each source's changes are applied, as the meta schema holds it: per (shard,
partition) the last change committed with its rows (`checkpoint`), and per source the change
below which everything is applied, where reading resumes (`watermark`). Each position is
saved with its GTIDs (issue 45: failover moves them to another server by those)."""

from __future__ import annotations

from collections.abc import Iterable

from lattice import quote_string
from replicator.shard_id import ShardId
from replicator.state.db import MetaDb, gtid_literal
from replicator.state.positions import ChangeId, Position

PROGRESS_SQL = [
    """CREATE TABLE IF NOT EXISTS {m}.checkpoint (
        task VARCHAR(64) NOT NULL, source VARCHAR(64) NOT NULL, shard VARCHAR(255) NOT NULL,
        part INT NOT NULL, file_seq BIGINT NOT NULL, txn_pos BIGINT NOT NULL, idx BIGINT NOT NULL,
        gtid VARCHAR(64) NULL,
        updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
        PRIMARY KEY (task, source, shard, part)) ENGINE=InnoDB""",
    """CREATE TABLE IF NOT EXISTS {m}.watermark (
        task VARCHAR(64) NOT NULL, source VARCHAR(64) NOT NULL,
        file VARCHAR(255) NOT NULL, file_seq BIGINT NOT NULL, txn_pos BIGINT NOT NULL, idx BIGINT NOT NULL,
        gtid VARCHAR(255) NULL, event_time DOUBLE NULL, server_id BIGINT NULL,
        updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
        PRIMARY KEY (task, source)) ENGINE=InnoDB""",
]
# columns added since the tables were first made: (table, column, definition)
PROGRESS_ADDED = (
    ("checkpoint", "gtid", "VARCHAR(64) NULL"),
    ("watermark", "server_id", "BIGINT NULL"),
)


class CheckpointStore:
    """The `checkpoint` rows of one task: (shard, partition) -> the last change applied."""

    def __init__(self, db: MetaDb):
        self.db = db

    def load(self) -> dict[tuple[ShardId, int], ChangeId]:
        db = self.db
        rows = db.rows(f"SELECT shard, part, file_seq, txn_pos, idx FROM {db.q}.checkpoint WHERE task={db.t}")
        return {(ShardId.parse(r[0]), int(r[1])): (int(r[2]), int(r[3]), int(r[4])) for r in rows}

    def clear(self) -> None:
        db = self.db
        db.execute([f"DELETE FROM {db.q}.checkpoint WHERE task={db.t}"])

    def committed(self, cur, shard: ShardId, part: int) -> ChangeId | None:
        """The partition's last change applied, read on `cur` (a connection of the caller's:
        after a lost connection, the applier asks whether its batch committed)."""
        db = self.db
        cur.execute(
            # (by the whole primary key: without its source the lookup read every checkpoint
            # of the task)
            f"SELECT file_seq, txn_pos, idx FROM {db.q}.checkpoint WHERE task={db.t} AND source=%s "
            f"AND shard=%s AND part=%s",
            (shard.source, str(shard), part),
        )
        row = cur.fetchone()
        return None if row is None else (int(row[0]), int(row[1]), int(row[2]))

    def sql(self, rows: Iterable[tuple[ShardId, int, ChangeId]]) -> str:
        """(shard, partition, last change applied) rows."""
        db = self.db
        values = ",".join(
            f"({db.t},{quote_string(shard.source)},{quote_string(str(shard))},{part},"
            f"{cid[0]},{cid[1]},{cid[2]},{db.own_gtid(shard.source, cid)})"
            for shard, part, cid in rows
        )
        return (
            f"INSERT INTO {db.q}.checkpoint (task, source, shard, part, file_seq, txn_pos, idx, gtid) "
            f"VALUES {values} ON DUPLICATE KEY UPDATE file_seq=VALUES(file_seq), txn_pos=VALUES(txn_pos), "
            f"idx=VALUES(idx), gtid=VALUES(gtid)"
        )


class WatermarkStore:
    """The `watermark` rows of one task: per source, where reading resumes."""

    def __init__(self, db: MetaDb):
        self.db = db

    def load(self) -> dict[str, tuple[Position, ChangeId, str | None]]:
        db = self.db
        rows = db.rows(
            f"SELECT source, file, file_seq, txn_pos, idx, gtid FROM {db.q}.watermark WHERE task={db.t}"
        )
        return {r[0]: (Position(r[1], int(r[3])), (int(r[2]), int(r[3]), int(r[4])), r[5]) for r in rows}

    def server_ids(self) -> dict[str, int]:
        """Per source, the id of the server its watermark is a position of (where saved)."""
        db = self.db
        rows = db.rows(f"SELECT source, server_id FROM {db.q}.watermark WHERE task={db.t}")
        return {r[0]: int(r[1]) for r in rows if r[1] is not None}

    def sql(
        self,
        source: str,
        position: Position,
        bound: ChangeId,
        gtid: str | None = None,
        event_time: float | None = None,
        server_id: int | None = None,
    ) -> str:
        """`gtid`: the GTID state at `bound`'s transaction; `server_id`: of the server whose
        binlog the position is in (None: as saved before)."""
        db = self.db
        e = repr(event_time) if event_time else "NULL"
        kept = "server_id" if server_id is None else "VALUES(server_id)"
        return (
            f"INSERT INTO {db.q}.watermark (task, source, file, file_seq, txn_pos, idx, gtid, event_time, "
            f"server_id) VALUES ({db.t},{quote_string(source)},{quote_string(position.file)},{bound[0]},"
            f"{bound[1]},{bound[2]},{gtid_literal(gtid)},{e},{'NULL' if server_id is None else server_id}) "
            f"ON DUPLICATE KEY UPDATE file=VALUES(file), file_seq=VALUES(file_seq), "
            f"txn_pos=VALUES(txn_pos), idx=VALUES(idx), gtid=VALUES(gtid), event_time=VALUES(event_time), "
            f"server_id={kept}"
        )
