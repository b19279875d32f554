"""A source's saved positions moved to its new server's binlog (issue 45, docs/operations/failover.md):
read from the meta schema (`SavedPositions`), found in the new
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

from replicator.apply.meta import Meta
from replicator.source.failover import FailoverError, NewBinlog
from replicator.source.gtid import Gtid, GtidState
from replicator.state.positions import ChangeId, Position
from replicator.state.saved_positions import HistoryEntry, Saved, SavedRows

BASELINE: ChangeId = (0, 0, -1)  # the schema history's entries before every position


@dataclass(frozen=True)
class SavedPositions:
    source: str
    watermark: ChangeId
    state: GtidState  # at the watermark
    rows: SavedRows  # every saved position of the source, as the meta schema holds them

    @classmethod
    def load(cls, meta: Meta, source: str, watermark: ChangeId, state: str | None) -> SavedPositions:
        return cls(source, watermark, GtidState.parse(state), meta.saved_positions.load(source))

    def _after(self, saved: Saved) -> bool:
        return saved.change >= self.watermark

    def wanted(self) -> set[Gtid]:
        """The GTIDs of the saved changes from the watermark on, and of the last
        transaction before each saved state."""
        rows = self.rows
        own = [*rows.checkpoints, *rows.ddl_done, *rows.dead_letters]
        states = [*rows.pauses, *(r for r in rows.replays if r.change[:2] != (0, 0)), *rows.backfill_end]
        gtids = {saved.gtid for saved in own if self._after(saved)}
        gtids |= {gtid for (_, change, _, gtid) in rows.history if change >= self.watermark}
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
    store = meta.saved_positions
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

    # (a saved change below the watermark tells nothing of what is read from the new one on)
    out = [store.sql_checkpoint(item, moved(item)) for item in saved.rows.checkpoints]
    out += [store.sql_ddl_done(item, moved(item)) for item in saved.rows.ddl_done]

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

    for item in saved.rows.pauses:  # (from the watermark on: a pause holds it)
        out.append(store.sql_pause(item, after(item), item.change[2] if saved._after(item) else 0))
    letters = saved.rows.dead_letters
    out += [store.sql_dead_letter(item, start(item)) for item in letters if saved._after(item)]
    # (a RESUMING replay, at (0, 0): its end is set when the daemon resumes it)
    out += [store.sql_replay(item, after(item)) for item in saved.rows.replays if item.change[:2] != (0, 0)]
    out += store.sql_history(saved.source, _history(saved, new))
    # (below the watermark: its safe mode ended)
    out += [store.sql_backfill_end(saved.source, after(item)) for item in saved.rows.backfill_end]
    out.append(
        meta.watermarks.sql(
            saved.source, new.start, new.start.change(0), gtid=str(saved.state) or None, server_id=server_id
        )
    )
    return out


def _history(saved: SavedPositions, new: NewBinlog) -> list[HistoryEntry]:
    """Each table's last CREATE TABLE below the watermark at `BASELINE`; those from the
    watermark on where their DDL's transaction is now."""
    before: dict[str, tuple[str | None, str | None]] = {}
    after: list[HistoryEntry] = []
    for table, change, sql, gtid in saved.rows.history:
        if change < saved.watermark:
            before[table] = (sql, gtid)
        else:
            start = new.start_of(Gtid.parse(gtid)) if gtid else None
            at = start or new.start
            after.append((table, (*at.key, change[2]), sql, gtid))
    return [(table, BASELINE, sql, gtid) for table, (sql, gtid) in before.items() if sql is not None] + after
