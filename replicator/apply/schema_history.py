"""The schema history's rows (`schema_history`, state/history.py: each tracked table's CREATE
TABLE after a change of its source), written from here alone: which rows, and in which
transaction, is one module's rule (issue 72). A worker restarts, and a paused shard is read
again, with the tables these rows say, so each row must be saved with what it stands for:

- a shard's DDL its group decides: its tables as its source's tracker left them, with the
  decision (`decision_rows`, in the decision's transaction with the shard's `ddl_done` and
  the coordinator's state): a crash before that commits reads the DDL again from the binlog;
- the table a decision sets for a shard whose rows could not be read (`Pin`): with the same
  decision (`pin_rows`);
- a DDL the daemon reads that no decision saves, when it reads it, in a transaction of its own
  (`written_on_read`); so is a DDL of a paused shard, which its park may carry: the park lets
  the source's watermark pass it before its decision, and a start there reads the tables the
  rows say (live stories 610981: a start past a parked ADD COLUMN read the shard's later rows
  without it, and paused it as unreadable);
- a source's tables where its reading starts, with that start (`start_rows`): a source's first
  start (daemon/startup.py), a backfill's handoff (spark/backfill.py) and a resync's
  (spark/resync.py)."""

from __future__ import annotations

from collections.abc import Mapping

from replicator.apply.meta import Meta
from replicator.shard_id import ShardId
from replicator.source.messages import DDLEvent, Pin
from replicator.source.source_state import SourceState
from replicator.state.positions import ChangeId


def _rows(meta: Meta, source: str, change: ChangeId, tables: Mapping[str, str | None]) -> list[str]:
    """The statement writing `tables` (CREATE TABLE, None: gone) after `change` of `source`
    (none for no tables)."""
    statement = meta.history.sql(source, change, dict(tables))
    return [statement] if statement else []


def decision_rows(meta: Meta, change: DDLEvent) -> list[str]:
    """A shard's DDL its group decided: written with the decision."""
    return _rows(meta, change.source, change.id, change.tables)


def pin_rows(meta: Meta, shard: ShardId, pin: Pin) -> list[str]:
    """The table a decision pinned for `shard`: written with the decision (and where the
    worker said an earlier pin there, in its place: `SourceState.pin`)."""
    again = meta.history.sql_pinned_again(shard.source, pin.id, pin.table, pin.create)
    return [again, *_rows(meta, shard.source, pin.id, {pin.table: pin.create})]


def start_rows(meta: Meta, source: str, bound: ChangeId, schemas: Mapping[str, str]) -> list[str]:
    """A source's tables where its reading starts (`bound`, before its first change): written
    with the start."""
    return _rows(meta, source, bound, schemas)


def written_on_read(meta: Meta, state: SourceState, message: DDLEvent, paused: bool = False) -> None:
    """A DDL as the daemon reads it from its source's worker: kept in the source's history
    (`SourceState.record`), and written now, in a transaction of its own, where no decision
    writes it: a DDL of no shard goes to no group's executor; a shard's DDL read again as
    another table than its entry says is written again (it may go to no executor: pinned,
    decided before); so is a `paused` shard's (its park may carry the source's watermark past
    it before its decision); a shard's DDL otherwise is written by its decision."""
    changed = state.record(message.id, message.tables) if message.tables else {}
    if paused and message.shard is not None and message.tables:
        meta.execute(_rows(meta, state.id, message.id, message.tables))
        return
    if changed and message.shard is not None:
        # a DDL read again with the table a decision pinned before it (`Pin`): read first,
        # while a conflict held the shard, its worker had not that table, and the entry saved
        # with its decision is not the shard's table; the history is read at a restart
        # (live stories 210045: resumed, the column the unfollowed DDL added was lost
        # after the next restart, its rows paused the shard again)
        meta.execute(_rows(meta, state.id, message.id, changed))
    if message.shard is None and message.tables:
        meta.execute(_rows(meta, state.id, message.id, message.tables))
