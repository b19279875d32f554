"""The coordinator's step that gives each source of the task to a member (issue 75): read the
live members and who reads what, decide (`assignment.assign`, a value in and a value out), and
write what moved in one transaction of the meta schema, fenced by the task's lease as every
write of the coordinator is. A member it moves a source from loses it at that commit: its
batches of the source in flight commit first (the rows' shared locks), those after commit
nothing (`Members.fence`); a member gone has its sessions ended first (`Members.end_gone`)."""

from __future__ import annotations

from collections.abc import Sequence

from replicator.daemon.assignment import assign, moves
from replicator.state.db import MetaDb
from replicator.state.members import Member, Members, Owner

Moves = dict[str, tuple[str | None, str | None]]  # source -> (its member before, after; None: none)


def rebalance(db: MetaDb, members: Members, sources: Sequence[str]) -> Moves:
    """Each of `sources` given to a live member (none while no member lives); what moved."""
    live, owners = members.live(), members.owners()
    before = {source: owner.member for source, owner in owners.items()}
    after = assign(sources, live, before, members.moved())
    moved = moves(before, after)
    # (a member joined again under its name is another epoch: the sources it keeps are given
    # to it again, in the epoch it has now)
    kept = [s for s, m in after.items() if s in owners and s not in moved]
    again = [s for s in kept if owners[s].epoch != live[after[s]].epoch]
    if any(_gone(owners[s], live) for s in (*moved, *again) if s in owners):
        # (a gone member's transaction, cut off in flight, holds the source's row and its rows
        # downstream for hours: the writes below, and the new reader's, would wait on it)
        members.end_gone(live)
    writes = [
        members.sql_assign(s, live[m]) if m is not None else members.sql_release(s)
        for s, (_, m) in moved.items()
    ]
    writes += [members.sql_assign(s, live[after[s]]) for s in again]
    if writes:
        db.execute(writes)
    return moved


def _gone(owner: Owner, live: dict[str, Member]) -> bool:
    """Whether the member's epoch that reads a source is gone (dead, cut off, started again)."""
    return owner.member not in live or live[owner.member].epoch != owner.epoch
