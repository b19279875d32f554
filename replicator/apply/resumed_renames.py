"""The renames a decision's resumed shards need on their rows read again (`DDLResult.
resumed_renames`): those each made while blocked, and the resuming DDL's own. Taken before the
decision (`paused_renames`: the blocks it may lift) and worked out after it."""

from __future__ import annotations

from dataclasses import dataclass

from lattice import key
from replicator.apply.ddl_job import DDLJob
from replicator.schema.coordinator import Coordinator, Decision
from replicator.shard_id import ShardId
from replicator.state.pauses import ReplayRename


@dataclass(frozen=True)
class PausedRenames:
    """A blocked shard's renames, and the columns (keys) of the table it had when it paused."""

    renames: tuple[tuple[str, str], ...]
    had: frozenset[str]


def paused_renames(coordinator: Coordinator) -> dict[ShardId, PausedRenames]:
    out = {}
    for shard, block in coordinator.blocked.items():
        state = coordinator.shards.get(shard)
        accepted = state.accepted if state is not None else None
        had = frozenset(c.key for c in accepted.columns) if accepted is not None else frozenset()
        out[shard] = PausedRenames(block.renames, had)
    return out


def resumed_renames(
    job: DDLJob, decision: Decision, paused: dict[ShardId, PausedRenames]
) -> dict[ShardId, tuple[ReplayRename, ...]]:
    """What the rows of each shard the decision resumed, read again, need renamed."""
    out = {}
    change = job.change.change if job.change is not None else None
    for shard in decision.unblocked:
        before = paused.get(shard, PausedRenames((), frozenset()))
        pairs = list(before.renames)
        if shard == job.shard and change is not None:
            pairs += [(r.old, r.new) for r in change.renames]
        if pairs:
            out[shard] = tuple(ReplayRename(old, new, held=key(old) in before.had) for old, new in pairs)
    return out
