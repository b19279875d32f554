"""Safe mode of a member's start (issue 75): its sources' changes up to their highest
checkpoints are read again, some applied already, and go in safe mode; past them none was
applied, and they go as they are, however soon after the start."""

from __future__ import annotations

import pytest

from replicator.daemon.safe_mode import SafeMode
from replicator.daemon.starting import tops_read_again
from replicator.shard_id import ShardId
from replicator.source.messages import Change
from replicator.state.positions import Position

A, B = ShardId("s1", "db", "t1"), ShardId("s1", "db", "t2")
C = ShardId("s2", "db", "t1")


def change(shard: ShardId, cid) -> Change:
    return Change(cid, shard, "d.t", "I", ("id",), ("1",))


@pytest.mark.parametrize(
    ("cid", "shard", "safe"),
    [
        ((3, 100, 0), A, True),  # below the source's highest checkpoint
        ((3, 200, 5), A, True),  # at it: applied (a checkpoint is the last change committed)
        ((3, 200, 6), A, False),  # past it: never applied
        ((3, 150, 0), B, True),  # another shard of the source, below the source's top
        ((1, 0, 0), C, False),  # a source with no checkpoint: none of it applied
    ],
)
def test_a_change_goes_in_safe_mode_up_to_its_sources_highest_checkpoint(cid, shard, safe):
    mode = SafeMode(False)
    mode.read_again({"s1": (3, 200, 5)})
    assert mode([change(shard, cid)]) is safe


def test_safe_mode_ends_once_the_sources_watermark_passes_its_top():
    mode = SafeMode(False)
    mode.read_again({"s1": (3, 200, 5)})
    mode.passed("s1", (3, 200, 5))  # (the watermark: everything *below* it is applied)
    assert mode() and not mode.settled()
    mode.passed("s1", (3, 200, 6))
    assert not mode() and mode.settled()
    assert not mode([change(A, (3, 100, 0))])  # (read again later, by a rewind: the checkpoints skip it)


def test_the_tops_are_each_sources_highest_checkpoint_at_or_past_its_watermark():
    checkpoints = {
        (A, 0): (3, 100, 0), (A, 1): (3, 200, 5), (B, 0): (3, 150, 0),
        (C, 0): (2, 10, 0),  # below s2's watermark: nothing read again is applied
        (ShardId("s9", "db", "t1"), 0): (9, 9, 9),  # another member's source
    }
    watermarks = {"s1": (Position("b.000003", 4), (3, 90, 0), None), "s2": (Position("b.000002", 4), (2, 50, 0), None)}
    assert tops_read_again(checkpoints, watermarks, {"s1", "s2"}) == {"s1": (3, 200, 5)}
