"""Members of one task as their daemons see them (`replicator.daemon.membership`), on the
sandbox's downstream: the lease holder coordinates and gives the sources out; each member's
start runs with the sources it reads then; a member whose sources changed (one died, one
joined) or that may take the free lease is told to start again, and one that lost a source
commits nothing of it."""

from __future__ import annotations

import re
import threading
import time

import pytest

from replicator.daemon.ddl_path import ForwardToCoordinator
from replicator.daemon.membership import HandOver, Membership
from replicator.state.lease import Lease, LeaseView
from replicator.state.members import SourcesLost

SOURCES = ("s1", "s2", "s3")


def membership(meta, name: str, ttl: float = 30.0) -> Membership:
    return Membership(meta.members, LeaseView(meta), name, f"host-{name}", ttl, SOURCES)


def test_members_follow_the_coordinators_assignment_and_start_again_when_it_changes(scratch_meta):
    meta_a, meta_b, meta_c = scratch_meta.meta, scratch_meta.another(), scratch_meta.another()
    lease = Lease(scratch_meta.connect, meta_a.q, meta_a.task, 30.0)
    assert lease.acquire(threading.Event())
    meta_a.fence = lease.fence  # (as the coordinator's daemon writes)
    a, b, c = membership(meta_a, "a"), membership(meta_b, "b", ttl=1.0), membership(meta_c, "c")

    # b joins first: it reads nothing till the coordinator gives it its share
    b_member = b.join()
    early = b.standing(b_member, coordinator=False)
    assert early.sources == frozenset() and not early.runs
    a_standing = a.standing(a.join(), coordinator=True)
    assert a_standing.coordinator and a_standing.sources == {"s1", "s3"}
    assert b.tick(early) == "member b reads s2 now, not no source"
    b_standing = b.standing(b_member, coordinator=False)
    assert b_standing.sources == {"s2"} and b_standing.runs
    assert a.tick(a_standing) is None and b.tick(b_standing) is None  # (nothing changed)

    # c joins: the busiest (two sources more than c) is asked to hand one over; drained, it
    # gives it, and starts again
    c_member = c.join()
    with pytest.raises(HandOver, match="member a is asked to hand over s3 to c"):
        a.tick(a_standing)
    assert c.tick(c.standing(c_member, False)) is None  # (asked, not given yet)
    assert meta_a.members.handovers.hand_over(a_standing.member) == {"s3": c_member}
    assert a.tick(a_standing) == "member a reads s1 now, not s1, s3"
    assert b.tick(b_standing) is None
    a_standing, c_standing = a.standing(a_standing.member, True), c.standing(c_member, False)
    assert (a_standing.sources, c_standing.sources) == ({"s1"}, {"s3"})

    # b dies (its row unrenewed): at the coordinator's tick its source goes to the least busy
    time.sleep(1.2)
    assert a.tick(a_standing) == "member a reads s1, s2 now, not s1"
    assert c.tick(c_standing) is None
    with scratch_meta.connect() as conn, conn.cursor() as cur:
        cur.execute("START TRANSACTION")
        with pytest.raises(SourcesLost, match=re.escape("member b (epoch 1) no longer reads s2")):
            b.fence(b_standing)(cur)  # (b's batch in flight, were it alive: commits nothing)
        a.fence(a.standing(a_standing.member, False))(cur)
        cur.execute("ROLLBACK")

    # the coordinator stops cleanly: another member starts again to try for the lease
    lease.release()
    assert c.tick(c_standing) == "the lease of task task is free: member c tries for it"


def test_a_member_that_does_not_coordinate_reads_a_group_decided_for_again_without_starting_again(scratch_meta):
    """It holds each group as its start read it (a pending rename's columns to clear in its
    rows, say): a decision of the coordinator's for the group no longer has it start again
    (every shard of its sources held for about a second, at each decision of a DDL wave):
    the group's count moved, `moved` names it (once a second), and the member reads it again
    (`DDLPath._read_group`); taken, it is not named again."""
    meta_a, meta_b = scratch_meta.meta, scratch_meta.another()
    lease = Lease(scratch_meta.connect, meta_a.q, meta_a.task, 30.0)
    assert lease.acquire(threading.Event())
    meta_a.fence = lease.fence
    decided = {"shop.orders": 3}
    a, b = (Membership(m.members, LeaseView(m), n, "h", 30.0, SOURCES, lambda: dict(decided))
            for m, n in ((meta_a, "a"), (meta_b, "b")))
    b_member = b.join()
    a_standing = a.standing(a.join(), coordinator=True)
    b_standing = b.standing(b_member, coordinator=False)
    forward = ForwardToCoordinator(meta_b, "b", b_standing.sources, lambda: None, b.groups, b_standing.groups)
    assert b_standing.groups == {"shop.orders": 3} and b.tick(b_standing) is None and forward.moved() == []
    decided["shop.orders"] = 4
    assert b.tick(b_standing) is None and a.tick(a_standing) is None
    assert forward.moved() == []  # (looked at once a second)
    forward._next_count = 0.0
    assert forward.moved() == ["shop.orders"]
    forward.known["shop.orders"] = 4  # (read again: `DDLPath._group_read`)
    forward._next_count = 0.0
    assert forward.moved() == []
