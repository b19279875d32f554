"""What the applier holds and has not committed yet (`Pending`), counted per shard and per
source: what a shard's DDL waits for (the DDL barrier, `wait_shard`), what the watermark
holds back (`replicator.apply.watermark`), and whether a partition's thread has died."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Mapping

from replicator.shard_id import ShardId
from replicator.source.messages import Change, RowEvent
from replicator.state.positions import ChangeId


class ApplierFailed(RuntimeError):
    """A partition thread died of an unexpected error; nothing after it is committed."""


class Pending:
    """Changes routed and not yet committed: in buffers (`buffered`, counted by the daemon's
    thread alone, in `Buffers`; read here under the lock) or in batches sent to a partition
    (`inflight`, `inflight_ids`: under the lock, which the partitions' threads notify as
    their batches commit). `failure` is written once, by a partition's thread that dies."""

    def __init__(self, buffered: Mapping[ShardId, int]):
        self.lock = threading.Condition()
        self.buffered = buffered  # shard -> changes in buffers
        self.inflight: dict[ShardId, int] = defaultdict(int)  # shard -> changes in sent batches
        self.inflight_ids: dict[str, dict[int, ChangeId]] = defaultdict(dict)  # source -> {batch: min id}
        self.failure: str | None = None
        self._seq = 0

    def sent(self, counts: Mapping[ShardId, int], first: Mapping[str, ChangeId]) -> int:
        """A batch goes to its partition (the daemon's thread, before it leaves the
        buffers): its changes per shard, the smallest id of each source. Its number."""
        with self.lock:
            self._seq += 1
            for source, cid in first.items():
                self.inflight_ids[source][self._seq] = cid
            for shard, n in counts.items():
                self.inflight[shard] += n
            return self._seq

    def done(self, changes: list[Change | RowEvent], seq: int) -> None:
        """The batch `seq` is committed (a partition's thread)."""
        counts: dict[ShardId, int] = defaultdict(int)
        for change in changes:
            counts[change.shard] += 1
        with self.lock:
            for shard, n in counts.items():
                self.inflight[shard] -= n
                if not self.inflight[shard]:
                    del self.inflight[shard]
            for source in list(self.inflight_ids):
                self.inflight_ids[source].pop(seq, None)
            self.lock.notify_all()

    def sent_ids(self, source: str) -> list[ChangeId]:
        """The smallest id of each of the source's batches sent and not committed."""
        with self.lock:
            return list(self.inflight_ids[source].values())

    def failed(self, failure: str) -> None:
        """A partition's thread died: whoever waits on the applier hears of it."""
        self.failure = failure
        with self.lock:
            self.lock.notify_all()

    def check(self) -> None:
        """Raise if a partition thread has died."""
        if self.failure is not None:
            raise ApplierFailed(self.failure)

    def wait_shard(self, shard: ShardId, timeout: float | None = None) -> bool:
        """Block until every routed change of the shard is committed (the DDL barrier).
        Called from a DDL thread: the daemon's loop flushes partial batches meanwhile."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.lock:
            # buffered first: a flush counts a change in flight before it leaves the buffers
            while self.buffered.get(shard, 0) > 0 or self.inflight[shard] > 0:
                self.check()
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self.lock.wait(remaining if remaining is not None else 1.0)
        return True

    def shard_idle(self, shard: ShardId) -> bool:
        """Whether none of the shard's changes is buffered or in flight."""
        with self.lock:
            return self.buffered.get(shard, 0) == 0 and self.inflight[shard] == 0

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing is buffered or in flight (the buffers flushed before), or
        `timeout` seconds passed; whether it is idle."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.lock:
            while any(self.inflight.values()) or any(self.buffered.values()):
                self.check()
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                self.lock.wait(1.0 if deadline is None else min(1.0, max(0.01, deadline - time.monotonic())))
        return True
