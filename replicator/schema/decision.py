"""What a shard group's coordinator answers (`Decision`), and what every step of a decision
takes besides the `GroupState` it decides over: the group's settings (`GroupContext`), a
value fixed for the coordinator's life, and the `DecisionRows` of the decision under way,
passed down the steps (issue 72: a decision is a function of the state, its settings and
its arguments; nothing is kept on the side between two decisions)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from lattice import DownstreamStep, Flavor, Table
from replicator.schema.acceptance import Acceptance
from replicator.schema.extract import ExtractColumns
from replicator.schema.group import Result, ShardState, Version
from replicator.schema.group_state import GroupState
from replicator.schema.rows_plan import DecisionRows, RowsPlan
from replicator.shard_id import ShardId
from replicator.state.coordinator_store import CoordinatorStore


@dataclass(frozen=True)
class Gave:
    """A shard's table a way out gave (set-schema, binlog replace or skip of a DDL we could not
    follow) before the DDLs the shard ran after that one were decided on it, in the same
    decision (`Block.stacked`): its table from that DDL on, which its rows are read with, and
    where the DDLs so decided end (`through`: the last one's position; None: not known)."""

    shard: ShardId
    table: Table
    through: str | None


@dataclass(frozen=True)
class Decision:
    result: Result
    shard: ShardId | None
    ddl: str
    message: str
    steps: tuple[DownstreamStep, ...]  # the downstream statements, each with the table after it
    joined: Table
    version: Version
    blocked: tuple[ShardId, ...]
    unblocked: tuple[ShardId, ...] = ()
    before: Table | None = None  # the downstream table before the steps, as the flavor holds it
    gave: tuple[Gave, ...] = ()

    def then(self, after: Decision, what: str) -> Decision:
        """This decision, then `after` (of the same request, `what` it decided): its outcome,
        the statements and the shards resumed of both (a shard blocked again by `after` not)."""
        both = (*self.unblocked, *after.unblocked)
        unblocked = tuple(dict.fromkeys(s for s in both if s not in after.blocked))
        result = after.result
        if unblocked and result in (Result.APPLIED, Result.IGNORED):
            result = Result.RESOLVED
        return replace(
            after,
            result=result,
            ddl=self.ddl,
            message=f"{self.message}; then {what} -> {after.result}: {after.message}",
            steps=(*self.steps, *after.steps),
            unblocked=unblocked,
            before=self.before if self.steps else after.before,
            gave=(*self.gave, *after.gave),
        )

    @property
    def downstream(self) -> tuple[str, ...]:
        """The downstream statements to run, in order."""
        return tuple(step.sql for step in self.steps)


class CoordinatorError(ValueError):
    """A request the coordinator cannot take (unknown shard, bad CREATE TABLE)."""


@dataclass(frozen=True)
class GroupContext:
    """A group's settings, as its decisions read them: `target_name` is the downstream
    `schema.table`; `extract` the extract columns as the group's table has them."""

    target_name: str
    flavor: Flavor
    extract: ExtractColumns
    upstream: str  # the kind of server the shards' DDLs are read as (`change_of`)
    clock: Callable[[], float]  # stamps the history's entries: the caller's time, not the decision's
    store: CoordinatorStore  # where each decision's end saves the group (`GroupState.save`)

    def rows(self, group: GroupState) -> RowsPlan:
        """The fixes the shards' rows get, over the group as it stands (replicator/schema/rows_plan.py)."""
        return RowsPlan(
            self.target_name,
            self.flavor,
            self.extract,
            group.shards,
            group.ledger,
            group.fills,
            group.propagated,
            group.propagation,
        )

    def acceptance(self, group: GroupState, now: DecisionRows) -> Acceptance:
        return Acceptance(group, now, lambda: self.rows(group))


def state_of(group: GroupState, shard: ShardId) -> ShardState:
    """The shard's state; a request naming a shard the group lacks is refused."""
    state = group.shards.get(shard)
    if state is None:
        raise CoordinatorError(f"unknown shard {shard}; known: {names(sorted(group.shards)) or 'none'}")
    return state


def names(shards: Iterable[ShardId]) -> str:
    return ", ".join(map(str, shards))
