"""The routed tables of a source whose rows its worker cannot read, and why: their rows go
as `Dropped`, and the daemon hears of each once (`Problems.report`, or the DDL it could not
follow), so it pauses their shards."""

from __future__ import annotations

from collections.abc import Iterable

from replicator.shard_id import ShardId, table_key
from replicator.source.messages import DDLEvent
from replicator.source.outbox import Outbox
from replicator.source.read_state import ReadState
from replicator.source.schema_change import ChangeKind, SchemaChange
from replicator.source.worker_setup import WorkerContext


class Problems:
    def __init__(self, context: WorkerContext, read: ReadState, outbox: Outbox) -> None:
        self.context, self.read, self.outbox = context, read, outbox
        self._reasons: dict[str, str] = {}  # "schema.table" -> why its rows cannot be read

    def __contains__(self, key: str) -> bool:
        return key in self._reasons

    def reason(self, key: str) -> str:
        return self._reasons.get(key, "")

    def mark(self, keys: Iterable[str], reason: str) -> None:
        """These tables' rows cannot be read, said to the daemon otherwise than by `report`
        (the DDL the tracker could not follow; a fault a test injected: not at all)."""
        self._reasons.update(dict.fromkeys(keys, reason))

    def clear(self, key: str) -> None:
        """The table's schema is known again (a DDL made it, or a decision set it)."""
        self._reasons.pop(key, None)

    def reset(self) -> None:
        self._reasons.clear()

    def report(self, schema: str, table: str, reason: str) -> None:
        """A routed table we cannot read: the daemon pauses its shard (once)."""
        key = table_key(schema, table)
        if key in self._reasons:
            return
        self._reasons[key] = reason
        self.outbox.flush(force=True)
        route = self.context.router.route(schema, table)
        shard = ShardId(self.context.source, schema, table)
        self.outbox.send(
            DDLEvent(
                source=self.context.source,
                id=self.read.transaction_id(),
                position=str(self.read.position),
                next_position=str(self.read.position),
                target=route.target if route else None,
                change=SchemaChange(shard, ChangeKind.UNREADABLE, "", problem=reason),
            )
        )
