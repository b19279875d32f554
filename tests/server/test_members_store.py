"""The members of a task and who reads each source, on the sandbox's downstream server
(`replicator.state.members`): a member joined again is another epoch, an expired one is gone,
and a batch commits only while its member reads its sources; a reassignment waits for the
batches in flight and fences the ones after."""

from __future__ import annotations

import re
import time
from itertools import pairwise

import pymysql
import pytest

from replicator.daemon.rebalance import rebalance
from replicator.daemon.startup import stream_server_id
from replicator.servers import connect_downstream
from replicator.state.lease import REGISTERING
from replicator.state.members import Member, MemberExpired, MemberGone, Owner, SourcesLost
from tests.locks import waits_for_commit


def test_a_member_joined_again_is_another_epoch_and_one_expired_is_gone(scratch_meta):
    members = scratch_meta.meta.members
    a = members.join("a", "host-a", 30)
    b = members.join("b", "host-b", 0.3)
    assert a == Member("a", 1) and set(members.live()) == {"a", "b"}
    again = members.join("a", "host-a2", 30)
    assert again == Member("a", 2)
    assert not members.renew(a, 30), "the epoch before renewed"
    assert members.renew(again, 30)
    time.sleep(0.5)
    assert set(members.live()) == {"a"}, "b's row expired"
    members.leave(again)
    assert members.live() == {}
    # (cut off longer than its time to live, its sources may be others' by now: renewed in
    # the same epoch, it would be given them back with its batches of before)
    assert not members.renew(b, 30) and not members.holds(b), "an expired member renewed"
    assert members.holds(again) is False and members.holds(members.join("b", "host-b", 30))


def test_a_batch_commits_only_while_its_member_reads_its_sources(scratch_meta):
    meta = scratch_meta.meta
    members = meta.members
    a, b = members.join("a", "h", 30), members.join("b", "h", 30)
    meta.execute([members.sql_assign("s1", a), members.sql_assign("s2", a)])
    assert members.owners() == {"s1": Owner("a", 1), "s2": Owner("a", 1)}
    batch = scratch_meta.connect()
    waits_for_commit(
        batch,
        lambda cur: members.fence(cur, a, ["s1", "s2"]),
        lambda: meta.execute([members.sql_assign("s2", b)]),
        "the reassignment",
    )
    with batch.cursor() as cur:
        cur.execute("START TRANSACTION")
        members.fence(cur, a, ["s1"])
        with pytest.raises(SourcesLost, match=re.escape("member a (epoch 1) no longer reads s2")):
            members.fence(cur, a, ["s1", "s2"])
        members.fence(cur, b, ["s2"])
        cur.execute("ROLLBACK")
    a2 = members.join("a", "h", 30)
    with batch.cursor() as cur:
        cur.execute("START TRANSACTION")
        with pytest.raises(SourcesLost):  # (a started again reads nothing till given it)
            members.fence(cur, a2, ["s1"])
        cur.execute("ROLLBACK")
    meta.execute([members.sql_release("s1")])
    assert members.owners() == {"s2": Owner("b", 1)}
    batch.close()


def test_the_coordinator_gives_each_source_to_a_live_member_and_moves_only_what_must_move(scratch_meta):
    """Rebalancing on the real meta schema: three members share four sources; one expires and
    its sources go to the others; a member added takes from the busiest; one joined again
    under its name is given its sources again in its new epoch; a source gone is released."""
    meta = scratch_meta.meta
    members = meta.members
    sources = ["s1", "s2", "s3", "s4"]
    a, b = members.join("a", "h", 30), members.join("b", "h", 30)
    members.join("c", "h", 0.5)
    rebalance(meta, members, sources)
    owners = members.owners()
    assert set(owners) == set(sources) and {o.member for o in owners.values()} == {"a", "b", "c"}
    time.sleep(0.7)  # (c expires)
    lost = {s for s, o in owners.items() if o.member == "c"}
    moved = rebalance(meta, members, sources)
    assert set(moved) == lost and {after for _, after in moved.values()} <= {"a", "b"}
    assert sorted(o.member for o in members.owners().values()) == ["a", "a", "b", "b"]
    d = members.join("d", "h", 30)
    moved = rebalance(meta, members, sources)
    assert [after for _, after in moved.values()] == ["d"]
    assert rebalance(meta, members, sources) == {}  # (balanced: nothing moves)
    a2 = members.join("a", "h", 30)
    assert rebalance(meta, members, sources) == {}
    assert {s: o.epoch for s, o in members.owners().items() if o.member == "a"} == {
        s: a2.epoch for s, o in members.owners().items() if o.member == "a"
    }
    assert a2.epoch == a.epoch + 1 and b.epoch == 1 and d.epoch == 1
    moved = rebalance(meta, members, ["s1", "s2", "s3"])
    assert moved["s4"][1] is None
    assert set(members.owners()) == {"s1", "s2", "s3"}


def test_a_members_row_is_renewed_till_a_daemon_joins_again_under_its_name(scratch_meta):
    members = scratch_meta.meta.members
    a = members.join("a", "h", 0.6)
    told: list[Exception] = []
    renewal = members.renewal(a, 0.6, gone=told.append)
    renewal.start()
    try:
        time.sleep(1.5)  # (over twice its time to live: live only if renewed)
        assert set(members.live()) == {"a"} and told == []
        members.join("a", "elsewhere", 30)
        renewal.join(timeout=5)
        assert not renewal.is_alive()
        assert [(type(e), str(e)) for e in told] == [(MemberGone, "member a (epoch 1) joined again elsewhere")]
    finally:
        renewal.stop()


def test_a_member_whose_row_expired_is_told_so_and_not_renewed(scratch_meta):
    """Cut off longer than its time to live (here: its row made expired), the member is told
    it expired (it starts again, joining in a new epoch), and its row stays expired."""
    meta = scratch_meta.meta
    members = meta.members
    a = members.join("a", "h", 0.6)
    told: list[Exception] = []
    renewal = members.renewal(a, 0.6, gone=told.append)
    renewal.start()
    try:
        time.sleep(0.5)
        meta.execute([f"UPDATE {meta.q}.member SET expires = NOW(6) - INTERVAL 1 SECOND WHERE task = {meta.t}"])
        renewal.join(timeout=5)
        assert not renewal.is_alive()
        assert [type(e) for e in told] == [MemberExpired]
        assert "member a (epoch 1) expired" in str(told[0]) and not members.holds(a) and members.live() == {}
    finally:
        renewal.stop()


def test_a_gone_members_frozen_transaction_is_ended_before_its_source_is_given_out(scratch_meta):
    """Member a, cut off in a batch's transaction, holds its source's row (its session lives
    on the server for hours): its row expired, the rebalance giving s1 to b ends the sessions a
    registered and commits at once; a's transaction is rolled back, and the registrations of
    the epoch gone are forgotten. The live member's sessions are left alone."""
    meta = scratch_meta.meta
    members = meta.members
    a, b = members.join("a", "h", 0.5), members.join("b", "h", 30)
    meta.execute([members.sql_assign("s1", a)])

    def registered_by(member: Member):
        return connect_downstream(
            {**scratch_meta.kwargs, "init_command": members.registration(member), "client_flag": REGISTERING},
            autocommit=False,
        )

    frozen, alive = registered_by(a), registered_by(b)
    with frozen.cursor() as cur:
        members.fence(cur, a, ["s1"])  # (its batch's first statement: the row's shared lock)
    time.sleep(0.7)  # (a's row expires)
    began = time.monotonic()
    moved = rebalance(meta, members, ["s1"])
    assert time.monotonic() - began < 5, "the rebalance waited on the gone member's lock"
    assert moved == {"s1": ("a", "b")} and members.owners() == {"s1": Owner("b", 1)}
    with pytest.raises(pymysql.err.OperationalError), frozen.cursor() as cur:
        cur.execute("SELECT 1")
    with alive.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)
    assert meta.rows(f"SELECT member FROM {meta.q}.member_connection WHERE task = {meta.t}") == [("b",)]
    alive.close()


def test_a_live_readers_source_is_handed_over_by_it_after_its_drain(scratch_meta):
    """A member joins: the coordinator does not take a source from its live reader but asks
    the reader to hand it over; the reader, drained, gives it in its live epoch. Asked
    longer than the lease's time, the coordinator takes it; asked for a member gone since,
    the request is dropped."""
    meta = scratch_meta.meta
    members = meta.members
    sources = ["s1", "s2"]
    a = members.join("a", "h", 30)
    assert rebalance(meta, members, sources, ttl=30) == {"s1": (None, "a"), "s2": (None, "a")}
    b = members.join("b", "h", 30)
    assert rebalance(meta, members, sources, ttl=30) == {}  # (asked, not taken)
    assert members.handovers.handing(30) == {"s2": ("b", False)} and members.handovers.handing_from(a) == {"s2": "b"}
    assert members.handovers.handing_from(b) == {} and members.owners()["s2"] == Owner("a", a.epoch)
    assert rebalance(meta, members, sources, ttl=30) == {}  # (asked once: the wait goes on)
    assert members.handovers.hand_over(a) == {"s2": b}
    assert members.owners() == {"s1": Owner("a", a.epoch), "s2": Owner("b", b.epoch)}
    assert members.handovers.handing(30) == {} and rebalance(meta, members, sources, ttl=30) == {}


def test_a_source_asked_longer_than_the_leases_time_is_taken(scratch_meta):
    meta = scratch_meta.meta
    members = meta.members
    a = members.join("a", "h", 30)
    rebalance(meta, members, ["s1", "s2"], ttl=0.3)
    b = members.join("b", "h", 30)
    assert rebalance(meta, members, ["s1", "s2"], ttl=0.3) == {} and members.handovers.handing_from(a) == {"s2": "b"}
    time.sleep(0.5)  # (a did not hand it over: stuck, or its DDL waits)
    assert rebalance(meta, members, ["s1", "s2"], ttl=0.3) == {"s2": ("a", "b")}
    assert members.owners()["s2"] == Owner("b", b.epoch) and members.handovers.handing(30) == {}
    assert members.handovers.hand_over(a) == {}  # (too late: it gives nothing)


def test_a_request_for_a_member_gone_since_is_dropped(scratch_meta):
    meta = scratch_meta.meta
    members = meta.members
    a = members.join("a", "h", 30)
    rebalance(meta, members, ["s1", "s2"], ttl=30)
    members.join("b", "h", 0.5)
    rebalance(meta, members, ["s1", "s2"], ttl=30)
    assert members.handovers.handing_from(a) == {"s2": "b"}
    time.sleep(0.7)  # (b expires before a handed s2 over)
    assert rebalance(meta, members, ["s1", "s2"], ttl=30) == {}
    assert members.handovers.handing(30) == {} and members.handovers.hand_over(a) == {}
    assert {s: o.member for s, o in members.owners().items()} == {"s1": "a", "s2": "a"}


def test_each_new_reader_of_a_source_streams_it_under_the_other_server_id(scratch_meta):
    """A source's generation counts its readers (a member, in an epoch): it moves on when
    the source goes to another member or epoch, not when the same one is given it again, and
    two readers in a row stream under server ids one bit apart: the one before, cut off and
    healed, never ends its successor's stream (a server ends the older of two dumps of one id)."""
    meta = scratch_meta.meta
    members = meta.members
    a, b = members.join("a", "h", 30), members.join("b", "h", 30)
    meta.execute([members.sql_assign("s1", a)])
    assert members.generations() == {"s1": 1}
    meta.execute([members.sql_assign("s1", a)])  # (the same reader: the same stream)
    assert members.generations() == {"s1": 1}
    ids = [stream_server_id(7011, members.generations()["s1"])]
    for reader in (b, members.join("b", "h", 30), a):  # (another member, another epoch, back)
        meta.execute([members.sql_assign("s1", reader)])
        ids.append(stream_server_id(7011, members.generations()["s1"]))
    assert members.generations() == {"s1": 4}
    assert all(x != y for x, y in pairwise(ids)) and set(ids) == {7011, 7011 ^ 2**31}
