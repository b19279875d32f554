"""What a shard group's DDL executor (ddl_executor.py) is given and what it answers: a job
(a shard's DDL, or an operator's request on the group) in, its result back to the daemon,
and the error of a decision whose statements wait behind an entry the downstream refused."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from replicator.schema.coordinator import Coordinator, Decision
from replicator.schema.group import GroupView
from replicator.shard_id import ShardId
from replicator.source.messages import DDLEvent, Pin
from replicator.state.pauses import ReplayRename


@dataclass(frozen=True)
class DDLJob:
    shard: ShardId | None  # None: a request on the whole group (DDL propagation)
    change: DDLEvent | None  # None for requests that come from an operator
    action: Callable[[Coordinator], Decision] | None = None
    # an operator's that says what the shard's table is (set-schema, binlog replace): a shard
    # paused as one whose rows could not be read has them read again with it
    # (`DecisionWrites._pins`)
    states_table: bool = False
    # a shard another member reads (issue 75): its DDL came through the schema queue, this
    # entry of it, which the decision answers
    queued: int | None = None
    # a member that does not coordinate (issue 75): this group (its target) read again as
    # the coordinator's decisions left it, no decision made here
    reload: str | None = None


class JournalWaits(Exception):
    """A decision's downstream statements wait for an earlier journal entry of the group
    that the downstream refused: they were made for the table after it."""

    def __init__(self, seq: int, first: int, error: str):
        super().__init__(f"waits for journal entry {first}, which failed: {error}")
        self.seq, self.first, self.error = seq, first, error


@dataclass(frozen=True)
class DDLResult:
    job: DDLJob
    decision: Decision | None
    error: str | None = None
    journal: int | None = None  # failed: the journal entry that did not run (None: none)
    waits_for: int | None = None  # ... as it waits for this earlier one, which failed
    block_reason: str | None = None  # why the shard is blocked, when it is
    filtered: str | None = None  # the event filter kind that changed the DDL (event_filter.taken)
    # the renames each shard this decision resumed made while paused (and the resuming DDL's)
    resumed_renames: dict[ShardId, tuple[ReplayRename, ...]] | None = None
    view: GroupView | None = None  # the group after the job (None: the job failed)
    # not decided: its shard paused at one of its rows before it, read again after them
    # when it resumes (`_read_again`)
    deferred: bool = False
    # the tables the decision set for shards it resumed whose rows could not be read, saved
    # with it (`DecisionWrites._pins`)
    pins: Mapping[ShardId, Pin] = field(default_factory=dict)
    # a group read again (`DDLJob.reload`): the coordinator's decisions it holds
    decided: int | None = None
