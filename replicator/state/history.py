"""What each source's tables were, DDL by DDL, and the last DDL of each shard handled, as
the meta schema holds them: every tracked table's CREATE TABLE after each DDL
(`schema_history`), so a worker can restart, or read a paused shard again, with the schemas
of that position; and per shard the last DDL the coordinator has handled (`ddl_done`)."""

from __future__ import annotations

from lattice import quote_string
from replicator.shard_id import ShardId
from replicator.state.db import MetaDb
from replicator.state.positions import ChangeId

HISTORY_SQL = [
    """CREATE TABLE IF NOT EXISTS {m}.schema_history (
        task VARCHAR(64) NOT NULL, source VARCHAR(64) NOT NULL, tbl VARCHAR(255) NOT NULL,
        file_seq BIGINT NOT NULL, txn_pos BIGINT NOT NULL, idx BIGINT NOT NULL,
        create_sql LONGTEXT NULL, gtid VARCHAR(64) NULL,
        PRIMARY KEY (task, source, tbl, file_seq, txn_pos, idx)) ENGINE=InnoDB""",
    """CREATE TABLE IF NOT EXISTS {m}.ddl_done (
        task VARCHAR(64) NOT NULL, shard VARCHAR(255) NOT NULL,
        file_seq BIGINT NOT NULL, txn_pos BIGINT NOT NULL, idx BIGINT NOT NULL, gtid VARCHAR(64) NULL,
        PRIMARY KEY (task, shard)) ENGINE=InnoDB""",
]
# columns added since the tables were first made: (table, column, definition)
HISTORY_ADDED = (
    ("schema_history", "gtid", "VARCHAR(64) NULL"),
    ("ddl_done", "gtid", "VARCHAR(64) NULL"),
)


class HistoryStore:
    """The `schema_history` rows of one task: (source, change, table) -> its CREATE TABLE
    after that change (None: gone)."""

    def __init__(self, db: MetaDb):
        self.db = db

    def load(self, source: str) -> list[tuple[ChangeId, str, str | None]]:
        db = self.db
        rows = db.rows(
            f"SELECT file_seq, txn_pos, idx, tbl, create_sql FROM {db.q}.schema_history "
            f"WHERE task={db.t} AND source=%s ORDER BY file_seq, txn_pos, idx",
            (source,),
        )
        return [((int(r[0]), int(r[1]), int(r[2])), r[3], r[4]) for r in rows]

    def sql(self, source: str, change: ChangeId, tables: dict[str, str | None]) -> str | None:
        if not tables:
            return None
        db = self.db
        values = ",".join(
            f"({db.t},{quote_string(source)},{quote_string(tbl)},{change[0]},{change[1]},{change[2]},"
            f"{quote_string(sql) if sql is not None else 'NULL'},{db.own_gtid(source, change)})"
            for tbl, sql in tables.items()
        )
        return (
            f"INSERT INTO {db.q}.schema_history (task, source, tbl, file_seq, txn_pos, idx, create_sql, "
            f"gtid) VALUES {values} ON DUPLICATE KEY UPDATE create_sql=VALUES(create_sql), gtid=VALUES(gtid)"
        )


    def sql_pinned_again(self, source: str, pin: ChangeId, table: str, create: str) -> str:
        """Before a pin's row is written again with another table: the worker's word of the
        earlier pin (the transaction's own entry holding that pin's table) takes the new one
        (`SourceState.pin`)."""
        db = self.db
        at = f"h.file_seq={pin[0]} AND h.txn_pos={pin[1]}"
        return (
            f"UPDATE {db.q}.schema_history h JOIN {db.q}.schema_history p ON p.task=h.task AND "
            f"p.source=h.source AND p.tbl=h.tbl AND p.file_seq=h.file_seq AND p.txn_pos=h.txn_pos "
            f"AND p.idx={pin[2]} SET h.create_sql={quote_string(create)} WHERE h.task={db.t} AND "
            f"h.source={quote_string(source)} AND h.tbl={quote_string(table)} AND {at} AND h.idx=0 "
            f"AND h.create_sql <=> p.create_sql"
        )


class DdlDoneStore:
    """The `ddl_done` rows of one task: per shard, the last DDL its group has handled."""

    def __init__(self, db: MetaDb):
        self.db = db

    def load(self) -> dict[ShardId, ChangeId]:
        db = self.db
        rows = db.rows(f"SELECT shard, file_seq, txn_pos, idx FROM {db.q}.ddl_done WHERE task={db.t}")
        return {ShardId.parse(r[0]): (int(r[1]), int(r[2]), int(r[3])) for r in rows}

    def sql(self, shard: ShardId, change: ChangeId) -> str:
        db = self.db
        return (
            f"INSERT INTO {db.q}.ddl_done (task, shard, file_seq, txn_pos, idx, gtid) VALUES "
            f"({db.t},{quote_string(str(shard))},{change[0]},{change[1]},{change[2]},"
            f"{db.own_gtid(shard.source, change)}) ON DUPLICATE KEY UPDATE file_seq=VALUES(file_seq), "
            f"txn_pos=VALUES(txn_pos), idx=VALUES(idx), gtid=VALUES(gtid)"
        )
