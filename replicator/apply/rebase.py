"""A source's saved positions moved to its new server's binlog (issue 45, README
"Upstream failover"): read from the meta schema (`SavedPositions`), found in the new
binlog by their GTIDs (`replicator.source.failover`), rewritten in one transaction
(`rebase`).

Below the watermark nothing is read again: a checkpoint or a handled DDL there says
nothing about what is read from the new watermark on (it goes), and of the schema
history only each table's last CREATE TABLE before it is kept (the schemas the worker
starts with). From the watermark on each saved change is found by the GTID of its
transaction, with its index in it; a position saved as a GTID state (a replay's end)
goes where the transaction after that state starts. A saved change whose GTID the new
server lacks was read from the old server only: the move stops with the GTIDs it lacks."""

from __future__ import annotations

from dataclasses import dataclass

from lattice import quote_string
from replicator.apply.meta import Meta
from replicator.source.failover import FailoverError, NewBinlog
from replicator.source.gtid import Gtid, GtidState
from replicator.state.positions import ChangeId, Position

BASELINE: ChangeId = (0, 0, -1)  # the schema history's entries before every position


@dataclass(frozen=True)
class Saved:
    """One saved change: a row's key columns (as SQL literals), its id, its transaction's GTID."""

    key: tuple[str, ...]
    change: ChangeId
    gtid: str | None


@dataclass(frozen=True)
class SavedPositions:
    source: str
    watermark: ChangeId
    state: GtidState  # at the watermark
    checkpoints: tuple[Saved, ...]  # key: shard, part
    ddl_done: tuple[Saved, ...]  # key: shard
    pauses: tuple[Saved, ...]  # key: shard; gtid: the state where its transaction starts
    history: tuple[tuple[str, ChangeId, str | None, str | None], ...]  # table, id, CREATE TABLE, GTID
    replays: tuple[Saved, ...]  # key: shard; gtid: the state at its end
    dead_letters: tuple[Saved, ...]  # key: seq (pending ones)
    backfill_end: tuple[Saved, ...]  # (none or one) P1, below which safe mode runs; gtid: the state there

    @classmethod
    def load(cls, meta: Meta, source: str, watermark: ChangeId, state: str | None) -> SavedPositions:
        q, t, s = meta.q, meta.t, quote_string(source)
        # (a shard id starts with its source's; the pattern is an argument: it holds a %)
        prefix = (source.replace("_", "\\_") + ".%",)
        mine = f"task={t} AND shard LIKE %s"

        def saved(sql: str, keys: int) -> tuple[Saved, ...]:
            rows = meta.rows(sql, prefix if "%s" in sql else ())
            return tuple(
                Saved(
                    tuple(map(str, r[:keys])), (int(r[keys]), int(r[keys + 1]), int(r[keys + 2])), r[keys + 3]
                )
                for r in rows
            )

        return cls(
            source,
            watermark,
            GtidState.parse(state),
            saved(
                f"SELECT shard, part, file_seq, txn_pos, idx, gtid FROM {q}.checkpoint WHERE task={t} "
                f"AND source={s}",
                2,
            ),
            saved(f"SELECT shard, file_seq, txn_pos, idx, gtid FROM {q}.ddl_done WHERE {mine}", 1),
            saved(
                f"SELECT shard, file_seq, txn_pos, idx, gtid FROM {q}.pause WHERE task={t} AND source={s}", 1
            ),
            tuple(
                (str(r[0]), (int(r[1]), int(r[2]), int(r[3])), r[4], r[5])
                for r in meta.rows(
                    f"SELECT tbl, file_seq, txn_pos, idx, create_sql, gtid FROM {q}.schema_history "
                    f"WHERE task={t} AND source={s} ORDER BY file_seq, txn_pos, idx"
                )
            ),
            saved(f"SELECT shard, file_seq, txn_pos, 0, gtid FROM {q}.replay WHERE {mine}", 1),
            saved(
                f"SELECT seq, file_seq, txn_pos, idx, gtid FROM {q}.dead_letter WHERE {mine} "
                f"AND state='pending'",
                1,
            ),
            tuple(
                Saved((), Position(file, int(pos)).change(0), gtid)
                for file, pos, gtid in meta.rows(
                    f"SELECT p1_file, p1_pos, p1_gtid FROM {q}.backfill WHERE task={t} AND source={s} "
                    f"AND p1_file IS NOT NULL"
                )
            ),
        )

    def _after(self, saved: Saved) -> bool:
        return saved.change >= self.watermark

    def wanted(self) -> set[Gtid]:
        """The GTIDs of the saved changes from the watermark on, and of the last
        transaction before each saved state."""
        own = [*self.checkpoints, *self.ddl_done, *self.dead_letters]
        states = [*self.pauses, *(r for r in self.replays if r.change[:2] != (0, 0)), *self.backfill_end]
        gtids = {saved.gtid for saved in own if self._after(saved)}
        gtids |= {gtid for (_, change, _, gtid) in self.history if change >= self.watermark}
        missing = [saved for saved in [*own, *states] if self._after(saved) and saved.gtid is None]
        if missing or None in gtids:
            raise FailoverError(
                f"source {self.source}: positions saved without their GTID (by an older version, or read "
                "before the server's GTID state was known) cannot be found on another server. Point the "
                "source back at its old server, or copy its shards again (backfill)"
            )
        found = {Gtid.parse(g) for g in gtids if g is not None}
        for saved in states:
            if self._after(saved) and saved.gtid:
                found |= set(GtidState.parse(saved.gtid).last)
        return {g for g in found if not self.state.passed(g)}


def rebase(meta: Meta, saved: SavedPositions, new: NewBinlog, server_id: int) -> list[str]:
    """The statements moving the source's saved positions to the new binlog."""
    q, t, s = meta.q, meta.t, quote_string(saved.source)
    lacking = sorted((g for g in saved.wanted() if new.start_of(g) is None), key=lambda g: (g.domain, g.seq))
    if lacking:
        shown = ", ".join(map(str, lacking[:5])) + (
            f" and {len(lacking) - 5} more" if len(lacking) > 5 else ""
        )
        raise FailoverError(
            f"source {saved.source}: its new server lacks transactions its old server sent, which were "
            f"applied downstream: {shown}. Their rows stay downstream; copy the source's shards again "
            "(backfill) or point it back at its old server"
        )

    def start(item: Saved) -> Position:
        """Where the saved change's transaction starts now (at the watermark: one the
        watermark's state has passed, or one below it)."""
        found = new.start_of(Gtid.parse(item.gtid)) if item.gtid and saved._after(item) else None
        return found or new.start

    def moved(item: Saved) -> ChangeId | None:
        """Where the saved change is now; None: below the watermark."""
        return (*start(item).key, item.change[2]) if saved._after(item) else None

    def where(keys: tuple[str, ...], names: tuple[str, ...]) -> str:
        return " AND ".join(f"{n}={quote_string(k)}" for n, k in zip(names, keys, strict=True))

    out: list[str] = []
    # (a saved change below the watermark tells nothing of what is read from the new one on)
    for table, names, items in (
        ("checkpoint", ("shard", "part"), saved.checkpoints),
        ("ddl_done", ("shard",), saved.ddl_done),
    ):
        for item in items:
            at, key = moved(item), f"task={t} AND {where(item.key, names)}"
            out.append(
                f"DELETE FROM {q}.{table} WHERE {key}"
                if at is None
                else f"UPDATE {q}.{table} SET file_seq={at[0]}, txn_pos={at[1]}, idx={at[2]} WHERE {key}"
            )

    def after(item: Saved) -> Position:
        """Where the transaction after the saved GTID state starts now."""
        if not saved._after(item) or not item.gtid:
            return new.start
        found = new.after(GtidState.parse(item.gtid))
        if found is None:
            raise FailoverError(
                f"source {saved.source}: the position after GTID {item.gtid} is not on its new server"
            )
        return found

    for item in saved.pauses:  # (from the watermark on: a pause holds it)
        at, idx = after(item), item.change[2] if saved._after(item) else 0
        out.append(
            f"UPDATE {q}.pause SET file={quote_string(at.file)}, file_seq={at.key[0]}, txn_pos={at.pos}, "
            f"idx={idx} WHERE task={t} AND {where(item.key, ('shard',))}"
        )
    for item in saved.dead_letters:
        if saved._after(item):
            at = start(item)
            out.append(
                f"UPDATE {q}.dead_letter SET file={quote_string(at.file)}, file_seq={at.key[0]}, "
                f"txn_pos={at.pos}, idx={item.change[2]} WHERE seq={int(item.key[0])}"
            )
    for item in saved.replays:
        if item.change[:2] == (0, 0):
            continue  # (RESUMING: its end is set when the daemon resumes it)
        end = after(item)
        out.append(
            f"UPDATE {q}.replay SET file_seq={end.key[0]}, txn_pos={end.key[1]} "
            f"WHERE task={t} AND {where(item.key, ('shard',))}"
        )
    out += _history(meta, saved, new)
    for item in saved.backfill_end:  # (below the watermark: its safe mode ended)
        end = after(item)
        out.append(
            f"UPDATE {q}.backfill SET p1_file={quote_string(end.file)}, p1_pos={end.pos} "
            f"WHERE task={t} AND source={s}"
        )
    out.append(
        meta.watermarks.sql(
            saved.source, new.start, new.start.change(0), gtid=str(saved.state) or None, server_id=server_id
        )
    )
    return out


def _history(meta: Meta, saved: SavedPositions, new: NewBinlog) -> list[str]:
    """Each table's last CREATE TABLE below the watermark at `BASELINE`; those from the
    watermark on where their DDL's transaction is now."""
    q, t, s = meta.q, meta.t, quote_string(saved.source)
    before: dict[str, tuple[str | None, str | None]] = {}
    after: list[tuple[str, ChangeId, str | None, str | None]] = []
    for table, change, sql, gtid in saved.history:
        if change < saved.watermark:
            before[table] = (sql, gtid)
        else:
            start = new.start_of(Gtid.parse(gtid)) if gtid else None
            at = start or new.start
            after.append((table, (*at.key, change[2]), sql, gtid))
    rows = [(table, BASELINE, sql, gtid) for table, (sql, gtid) in before.items() if sql is not None] + after
    out = [f"DELETE FROM {q}.schema_history WHERE task={t} AND source={s}"]
    if rows:
        values = ",".join(
            f"({t},{s},{quote_string(table)},{c[0]},{c[1]},{c[2]},"
            f"{quote_string(sql) if sql is not None else 'NULL'},{quote_string(gtid) if gtid else 'NULL'})"
            for table, c, sql, gtid in rows
        )
        out.append(
            f"INSERT INTO {q}.schema_history (task, source, tbl, file_seq, txn_pos, idx, create_sql, gtid) "
            f"VALUES {values}"
        )
    return out
