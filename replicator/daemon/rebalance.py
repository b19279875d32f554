"""The coordinator's step that gives each source of the task to a member (issue 75): read the
live members and who reads what, decide (`assignment.assign`, a value in and a value out), and
write what moved in one transaction of the meta schema, fenced by the task's lease as every
write of the coordinator is.

A source whose reader lives is not taken from it: its reader is asked to hand it over
(`Members.sql_hand`), drains (its batches committed, its watermarks written, its stream
closed) and gives it itself (`Members.hand_over`), so that the new reader starts where it
stopped, with nothing to read again and no stream of the old one still open under the
source's server id. A reader that has not handed it over within the lease's time (stuck,
its DDL waiting) loses it as a member gone does: at the commit that gives it out, its
batches of the source in flight commit first (the rows' shared locks), those after commit
nothing (`Members.fence`); a member gone has its sessions ended first (`Members.end_gone`)."""

from __future__ import annotations

from collections.abc import Sequence

from replicator.daemon.assignment import assign, moves
from replicator.state.db import MetaDb
from replicator.state.members import Member, Members, Owner

Moves = dict[str, tuple[str | None, str | None]]  # source -> (its member before, after; None: none)


def rebalance(db: MetaDb, members: Members, sources: Sequence[str], ttl: float = 0.0) -> Moves:
    """Each of `sources` given to a live member (none while no member lives); what moved. A
    source whose reader lives is asked of it for `ttl` seconds first (0: taken at once)."""
    live, owners = members.live(), members.owners()
    before = {source: owner.member for source, owner in owners.items()}
    after = assign(sources, live, before, members.moved())
    moved = decided = moves(before, after)
    if ttl > 0:
        handing = members.handovers.handing(ttl)
        late = {s for s, (_, over) in handing.items() if over}  # (asked longer than the lease's time)
        asked = {
            s: to for s, (_, to) in moved.items()
            if to is not None and s in owners and not _gone(owners[s], live) and s not in late
        }
        handovers = members.handovers
        writes = [handovers.sql_hand(s, to) for s, to in asked.items() if handing.get(s, ("",))[0] != to]
        # (asked of a reader that keeps the source now: the member it was to go to is gone)
        writes += [handovers.sql_unhand(s) for s in handing if s not in asked and s not in moved]
        if writes:
            db.execute(writes)
        moved = {s: m for s, m in moved.items() if s not in asked}
    # (a member joined again under its name is another epoch: the sources it keeps are given
    # to it again, in the epoch it has now)
    kept = [s for s, m in after.items() if s in owners and s not in decided]
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
