"""A row the downstream refused: which row, where it was going, and why, for the
operator (the shard's pause, `query-status`, the dead-letter table) and for the way
out they choose (`shardctl handle-error`, or `on_row_error: skip`)."""

from __future__ import annotations

from dataclasses import dataclass

from replicator.shard_id import ShardId
from replicator.source.messages import Change
from replicator.state.positions import ChangeId

VERBS = {"I": "insert", "U": "update", "D": "delete"}


@dataclass(frozen=True)
class Refused:
    shard: ShardId
    target: str
    id: ChangeId
    part: int  # the applier partition it went to: its checkpoint says it is done once handled
    op: str
    key: str  # the row's key downstream, as SQL literals: `id=2, _source='s1'`
    statement: str  # what was sent for it
    error: str  # the server's message and error number

    @classmethod
    def of(
        cls, change: Change, key_columns: tuple[str, ...] | None, part: int, statement: str, error: Exception
    ) -> Refused:
        values = change.row() if change.op == "I" else change.before_row()
        row = {k.lower(): v for k, v in values.items()}
        parts = [f"{k}={row.get(k.lower(), 'NULL')}" for k in key_columns or ()]
        key = ", ".join(parts) if parts else "without a key"
        reason = f"{error.args[1]} (error {error.args[0]})" if len(error.args) >= 2 else str(error)
        return cls(change.shard, change.target, change.id, part, change.op, key, statement, reason)

    @property
    def message(self) -> str:
        """Which table refused which row, and why: what an operator needs to find it."""
        return f"{self.target} refused the {VERBS[self.op]} of the row {self.key}: {self.error}"
