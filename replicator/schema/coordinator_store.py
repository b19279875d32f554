"""Where a coordinator keeps its state. The coordinator does no I/O itself: it hands
every change to a store, shard by shard, so persisting one DDL never rewrites the
schemas of a thousand untouched shards."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from replicator.shard_id import ShardId


@dataclass
class StoredState:
    shards: dict[ShardId, dict[str, Any]] = field(default_factory=dict)  # shard -> its state's data
    meta: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)


class CoordinatorStore(Protocol):
    def load(self) -> StoredState | None: ...

    def put_shard(self, shard: ShardId, data: dict[str, Any] | None) -> None:
        """Save one shard's state; None removes the shard."""

    def put_meta(self, meta: dict[str, Any]) -> None: ...

    def add_history(self, entry: dict[str, Any]) -> None: ...


class InMemoryStore:
    """Keeps the state in this process (tests, `shardmerge plan`)."""

    def __init__(self) -> None:
        self.state: StoredState | None = None

    def _state(self) -> StoredState:
        if self.state is None:
            self.state = StoredState()
        return self.state

    def load(self) -> StoredState | None:
        return self.state

    def put_shard(self, shard: ShardId, data: dict[str, Any] | None) -> None:
        shards = self._state().shards
        if data is None:
            shards.pop(shard, None)
        else:
            shards[shard] = data

    def put_meta(self, meta: dict[str, Any]) -> None:
        self._state().meta = meta

    def add_history(self, entry: dict[str, Any]) -> None:
        self._state().history.append(entry)
