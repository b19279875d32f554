"""A shard's highest checkpoint (`Checkpoints.top`) as partitions' threads commit its
batches at once: it ends at the highest they marked, never a lower one set last (issue 72:
read, compared and set by several threads; a lower top takes changes applied for not
applied, applied again after a rewind)."""

from __future__ import annotations

import sys
import threading

from replicator.apply.checkpoints import Checkpoints
from replicator.shard_id import ShardId

SHARD = ShardId("s1", "db", "t1")
HIGHEST = (2, 0, 0)  # (a later binlog file than any the others mark)


def test_partitions_marking_one_shard_at_once_leave_its_highest_checkpoint():
    partitions, marks = 6, 3000
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # (threads switched between any two bytecodes, near enough)
    try:
        for _ in range(8):
            checkpoints = Checkpoints({}, partitions, lambda change: [0])
            start = threading.Barrier(partitions)

            def commit(part: int, checkpoints=checkpoints, start=start) -> None:
                start.wait()
                for n in range(marks):
                    checkpoints.mark(SHARD, part, (1, n, 0))
                    if part == 0 and n == marks // 2:
                        checkpoints.mark(SHARD, part, HIGHEST)  # (amid the others' lower ones)
                        return

            threads = [threading.Thread(target=commit, args=(p,)) for p in range(partitions)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert checkpoints.top[SHARD] == HIGHEST
    finally:
        sys.setswitchinterval(interval)
