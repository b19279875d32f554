"""This daemon as one member of its task (issue 75: a shard group bigger than one machine):
which sources a start of it reads, whether it coordinates, and when it must start again.

At each start a member joins in a new epoch (`Members.join`; a start again in its process is
another epoch too, so what the start before left in flight commits nothing) and tries the
task's lease once: the member holding it is the coordinator, which gives the sources to the
live members (`rebalance`) and decides every shard's DDL. A start runs with a `Standing`, a
value: the member, the sources it reads, whether it coordinates. While it runs, `tick` (once
a second, on the main loop) compares that value with the store's:

- the coordinator gives the sources out again (a member died, left, or joined);
- a member asked to hand a source over (the coordinator moves it from a live reader:
  `rebalance`) drains, gives it and starts again (`HandOver`, `shutdown.hand_over`): its
  successor reads on where it stopped;
- a member whose sources are no longer those it started with starts again (crash-only, as
  after a SIGKILL: what it read of a source it lost is read again by that source's new
  member from the saved watermark and checkpoints; its batches of it commit nothing meanwhile,
  `Members.fence`);
- a member that does not coordinate starts again once the lease is free, to try for it.
  The coordinator's decisions it takes as it runs: a group whose decisions moved is read again
  (`replicator/daemon/ddl_path.py`: the columns a pending rename clears in its rows, the
  table); it starts again only where a decision did more than that to its shards (one blocked,
  one paused resumed: its start takes the group as it is).

Starting again is how a member follows a change of the assignment: the start is proven under
kills (tests/chaos.py), a second move of a live source costs about a second of its other
sources' flow, and no part of a running daemon has to learn to drop or add a source."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from replicator.daemon.rebalance import Moves, rebalance
from replicator.state.lease import LeaseView
from replicator.state.members import Member, Members, Owner


class StandingChanged(Exception):
    """A member's start cannot run with its standing as it is (its sources, or its right to
    the lease, changed; what it reads is not set up yet by the coordinator): it starts again."""


class HandOver(StandingChanged):
    """The coordinator asks the member to hand sources over to others (`rebalance`): it drains,
    gives them (`Members.hand_over`), and starts again without them."""


@dataclass(frozen=True)
class Standing:
    """What one start of a member runs with."""

    member: Member
    sources: frozenset[str]  # the sources it reads
    coordinator: bool  # holds the task's lease: gives the sources out, decides DDL
    # each group's decisions so far, read before the start opens the groups (a member that
    # does not coordinate takes a group as its start read it, and reads it again once it moved)
    groups: Mapping[str, int] = field(default_factory=dict)

    @property
    def runs(self) -> bool:
        """Whether a start has anything to run (else it waits for a source, or the lease)."""
        return self.coordinator or bool(self.sources)


class Membership:
    def __init__(
        self,
        members: Members,
        lease: LeaseView,
        name: str,
        host: str,
        ttl: float,
        sources: Sequence[str],
        groups: Callable[[], Mapping[str, int]] = dict,
        process: str = "",
    ):
        """`sources`: the task's, as its config names them; `ttl`: seconds a member's row lives
        unrenewed (the task's `lease_ttl`); `groups`: each group's decisions so far (its
        history's newest entry)."""
        self.members, self.lease = members, lease
        self.name, self.host, self.ttl, self.process = name, host, ttl, process
        self.sources = tuple(sources)
        self.groups = groups
        # why the lease this member held as coordinator is another's now, told by its renewer's
        # thread (a string, put whole); the main loop's next look starts the member again
        self.lost: str | None = None

    def join(self) -> Member:
        self.lost = None
        return self.members.join(self.name, self.host, self.ttl, self.process)

    def standing(self, member: Member, coordinator: bool) -> Standing:
        """What a start of `member` runs with; the coordinator gives the sources out first."""
        if coordinator:
            self.rebalance()
        return Standing(member, self._read_by(member), coordinator, dict(self.groups()))

    def rebalance(self) -> Moves:
        """The coordinator's: each source to a live member (in its fenced transaction); a live
        reader is asked to hand its source over for up to the lease's time first."""
        return rebalance(self.members.db, self.members, self.sources, self.ttl)

    def tick(self, standing: Standing, lag: float | None = None) -> str | None:
        """Why the member must start again, if it must (see the module's docstring); `lag`:
        how far behind its sources are, the most (seconds), said for the tools."""
        if self.lost is not None:
            return f"{self.lost}: member {standing.member.name} starts again, as a member"
        if not self.members.holds(standing.member):
            # (cut off longer than its time to live: its sources may be others' already, and
            # renewed in this epoch it would be given them back with its batches of before)
            member = standing.member
            return f"member {member.name} (epoch {member.epoch}) expired: it joins again in a new epoch"
        self.members.report(standing.member, lag)
        if standing.coordinator:
            self.rebalance()
        now = self._read_by(standing.member)
        if now != standing.sources:
            return f"member {standing.member.name} reads {_names(now)} now, not {_names(standing.sources)}"
        handing = self.members.handovers.handing_from(standing.member)
        if handing:
            asked = ", ".join(f"{s} to {m}" for s, m in sorted(handing.items()))
            raise HandOver(f"member {standing.member.name} is asked to hand over {asked}")
        if standing.coordinator:
            return None
        if not self.lease.live():
            task, name = self.members.db.task, standing.member.name
            return f"the lease of task {task} is free: member {name} tries for it"
        return None

    def fence(self, standing: Standing) -> Callable[[object], None]:
        """What each of the member's writing transactions checks: it reads its sources still."""
        return lambda cur: self.members.fence(cur, standing.member, standing.sources)

    def leave(self, member: Member) -> None:
        """A clean stop's: its sources go to the others at the coordinator's next tick."""
        self.members.leave(member)

    def _read_by(self, member: Member) -> frozenset[str]:
        mine = Owner(member.name, member.epoch)
        owners = self.members.owners()
        return frozenset(s for s, owner in owners.items() if owner == mine and s in self.sources)


def _names(sources: frozenset[str]) -> str:
    return ", ".join(sorted(sources)) or "no source"
