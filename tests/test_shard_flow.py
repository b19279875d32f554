"""A shard's live state in the daemon (replicator/shard_flow.py)."""

from __future__ import annotations

from replicator.apply.meta import Pause
from replicator.shard_flow import ShardFlows
from replicator.shard_id import ShardId
from replicator.source.positions import Position

A, B, C = ShardId("s1", "db", "a"), ShardId("s1", "db", "b"), ShardId("s2", "db", "c")


def pause(shard: ShardId, file_seq: int, pos: int) -> Pause:
    position = Position(f"mysql-bin.{file_seq:06d}", pos)
    return Pause(shard, position, (file_seq, pos, 0), "because")


def test_a_change_read_again_is_one_routed_before():
    flow = ShardFlows()[A]
    assert not flow.read_before((1, 10, 0))
    flow.routed = (1, 10, 2)
    assert flow.read_before((1, 10, 2)) and flow.read_before((1, 4, 0))
    assert not flow.read_before((1, 10, 3)) and not flow.read_before((2, 4, 0))


def test_the_last_ddl_decided_only_moves_forward():
    flow = ShardFlows()[A]
    assert not flow.decided_before((1, 4, 0))
    flow.decided((1, 50, 0))
    flow.decided((1, 20, 0))  # an older one handled again after a rewind
    assert flow.ddl_done == (1, 50, 0)
    assert flow.decided_before((1, 20, 0)) and not flow.decided_before((1, 60, 0))


def test_a_source_is_held_back_by_its_earliest_paused_shard_only():
    flows = ShardFlows()
    flows.restore({A: pause(A, 2, 300), B: pause(B, 1, 900), C: pause(C, 1, 4)}, {})
    assert flows.paused_from("s1") == (1, 900, 0)
    assert flows.paused_from("s2") == (1, 4, 0)
    assert flows.paused_from("s3") is None
    flows[B].pause = None
    assert flows.paused_from("s1") == (2, 300, 0)
    assert set(flows.pauses()) == {A, C} and flows.is_paused(A) and not flows.is_paused(B)


def test_a_restart_restores_pauses_and_decided_ddls():
    flows = ShardFlows()
    flows.restore({A: pause(A, 1, 4)}, {B: (3, 7, 0)})
    assert flows[A].paused and flows[B].ddl_done == (3, 7, 0) and not flows[B].paused


def test_a_groups_cleared_columns_replace_what_its_shards_had():
    flows = ShardFlows()
    flows.set_cleared([A, B], {A: ["old"], B: ["x", "y"]})
    flows.set_cleared([A, B], {B: ["y"]})  # A's rename finished
    assert (flows[A].cleared, flows[B].cleared) == ((), ("y",))


def test_naming_a_shard_does_not_make_it_known_to_get():
    flows = ShardFlows()
    assert flows.get(A) is None and not flows.is_paused(A)
    flows[A]
    assert flows.get(A) is not None
