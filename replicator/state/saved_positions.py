"""A source's positions as saved in every table that holds one (issue 45, docs/operations/failover.md):
read as they are (`SavedPositionStore.load`), and the statements that move them
to a new server's binlog once the failover found where each goes (replicator/apply/rebase.py
works that out by their GTIDs; this module only knows the tables)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from lattice import quote_string
from replicator.state.db import MetaDb
from replicator.state.positions import ChangeId, Position

# (table, its change id, its CREATE TABLE, its GTID)
HistoryEntry = tuple[str, ChangeId, "str | None", "str | None"]


@dataclass(frozen=True)
class Saved:
    """One saved change: a row's key columns (as SQL literals), its id, its transaction's GTID."""

    key: tuple[str, ...]
    change: ChangeId
    gtid: str | None


@dataclass(frozen=True)
class SavedRows:
    """Every saved position of one source."""

    checkpoints: tuple[Saved, ...]  # key: shard, part
    ddl_done: tuple[Saved, ...]  # key: shard
    pauses: tuple[Saved, ...]  # key: shard; gtid: the state where its transaction starts
    history: tuple[HistoryEntry, ...]
    replays: tuple[Saved, ...]  # key: shard; gtid: the state at its end
    dead_letters: tuple[Saved, ...]  # key: seq (pending ones)
    backfill_end: tuple[Saved, ...]  # (none or one) P1, below which safe mode runs; gtid: the state there


class SavedPositionStore:
    def __init__(self, db: MetaDb):
        self.db = db

    def load(self, source: str) -> SavedRows:
        db = self.db
        q, t, s = db.q, db.t, quote_string(source)
        # (a shard id starts with its source's; the pattern is an argument: it holds a %)
        prefix = (source.replace("_", "\\_") + ".%",)
        mine = f"task={t} AND shard LIKE %s"

        def saved(sql: str, keys: int) -> tuple[Saved, ...]:
            rows = db.rows(sql, prefix if "%s" in sql else ())
            return tuple(
                Saved(
                    tuple(map(str, r[:keys])), (int(r[keys]), int(r[keys + 1]), int(r[keys + 2])), r[keys + 3]
                )
                for r in rows
            )

        return SavedRows(
            checkpoints=saved(
                f"SELECT shard, part, file_seq, txn_pos, idx, gtid FROM {q}.checkpoint WHERE task={t} "
                f"AND source={s}",
                2,
            ),
            ddl_done=saved(f"SELECT shard, file_seq, txn_pos, idx, gtid FROM {q}.ddl_done WHERE {mine}", 1),
            pauses=saved(
                f"SELECT shard, file_seq, txn_pos, idx, gtid FROM {q}.pause WHERE task={t} AND source={s}", 1
            ),
            history=tuple(
                (str(r[0]), (int(r[1]), int(r[2]), int(r[3])), r[4], r[5])
                for r in db.rows(
                    f"SELECT tbl, file_seq, txn_pos, idx, create_sql, gtid FROM {q}.schema_history "
                    f"WHERE task={t} AND source={s} ORDER BY file_seq, txn_pos, idx"
                )
            ),
            replays=saved(f"SELECT shard, file_seq, txn_pos, 0, gtid FROM {q}.replay WHERE {mine}", 1),
            dead_letters=saved(
                f"SELECT seq, file_seq, txn_pos, idx, gtid FROM {q}.dead_letter WHERE {mine} "
                f"AND state='pending'",
                1,
            ),
            backfill_end=tuple(
                Saved((), Position(file, int(pos)).change(0), gtid)
                for file, pos, gtid in db.rows(
                    f"SELECT p1_file, p1_pos, p1_gtid FROM {q}.backfill WHERE task={t} AND source={s} "
                    f"AND p1_file IS NOT NULL"
                )
            ),
        )

    # -- the moves ---------------------------------------------------------------------------
    def sql_checkpoint(self, item: Saved, at: ChangeId | None) -> str:
        """A checkpoint moved to `at` (None: dropped, below the watermark)."""
        return self._move("checkpoint", ("shard", "part"), item, at)

    def sql_ddl_done(self, item: Saved, at: ChangeId | None) -> str:
        return self._move("ddl_done", ("shard",), item, at)

    def _move(self, table: str, names: tuple[str, ...], item: Saved, at: ChangeId | None) -> str:
        q, key = self.db.q, f"task={self.db.t} AND {_where(item.key, names)}"
        if at is None:
            return f"DELETE FROM {q}.{table} WHERE {key}"
        return f"UPDATE {q}.{table} SET file_seq={at[0]}, txn_pos={at[1]}, idx={at[2]} WHERE {key}"

    def sql_pause(self, item: Saved, at: Position, idx: int) -> str:
        db = self.db
        return (
            f"UPDATE {db.q}.pause SET file={quote_string(at.file)}, file_seq={at.key[0]}, txn_pos={at.pos}, "
            f"idx={idx} WHERE task={db.t} AND {_where(item.key, ('shard',))}"
        )

    def sql_dead_letter(self, item: Saved, at: Position) -> str:
        return (
            f"UPDATE {self.db.q}.dead_letter SET file={quote_string(at.file)}, file_seq={at.key[0]}, "
            f"txn_pos={at.pos}, idx={item.change[2]} WHERE seq={int(item.key[0])}"
        )

    def sql_replay(self, item: Saved, end: Position) -> str:
        db = self.db
        return (
            f"UPDATE {db.q}.replay SET file_seq={end.key[0]}, txn_pos={end.key[1]} "
            f"WHERE task={db.t} AND {_where(item.key, ('shard',))}"
        )

    def sql_history(self, source: str, rows: Iterable[HistoryEntry]) -> list[str]:
        """The source's schema history replaced by `rows`."""
        q, t, s = self.db.q, self.db.t, quote_string(source)
        out = [f"DELETE FROM {q}.schema_history WHERE task={t} AND source={s}"]
        values = ",".join(
            f"({t},{s},{quote_string(table)},{c[0]},{c[1]},{c[2]},"
            f"{quote_string(sql) if sql is not None else 'NULL'},{quote_string(gtid) if gtid else 'NULL'})"
            for table, c, sql, gtid in rows
        )
        if values:
            out.append(
                f"INSERT INTO {q}.schema_history (task, source, tbl, file_seq, txn_pos, idx, create_sql, "
                f"gtid) VALUES {values}"
            )
        return out

    def sql_backfill_end(self, source: str, end: Position) -> str:
        db = self.db
        return (
            f"UPDATE {db.q}.backfill SET p1_file={quote_string(end.file)}, p1_pos={end.pos} "
            f"WHERE task={db.t} AND source={quote_string(source)}"
        )


def _where(keys: tuple[str, ...], names: tuple[str, ...]) -> str:
    return " AND ".join(f"{n}={quote_string(k)}" for n, k in zip(names, keys, strict=True))
