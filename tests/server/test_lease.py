"""The lease on a real server (replicator/state/lease.py): a start after a clean stop takes
the released lease as no takeover; two standbys taking an expired lease at once:
one takes it, the other sees who did and waits on as a standby (chaos, issue 70: the one
that lost the race waited on its own session's lock for ever, and when the winner froze,
no standby took over)."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field

import pymysql
import pytest

from replicator.apply.meta import Meta
from replicator.servers import connect_downstream
from replicator.state.lease import REGISTERING, Lease


@dataclass
class Downstream:
    """The downstream's connection arguments, a meta schema of the test's own, and leases
    of task `task` on it (1 s to live) by name."""

    kwargs: dict
    meta: Meta
    leases: list[Lease] = field(default_factory=list)

    def lease(self, name: str) -> Lease:
        made = Lease(lambda: connect_downstream(self.kwargs), self.meta.q, "task", 1.0, name=f"elsewhere:1:{name}")
        self.leases.append(made)
        return made


@pytest.fixture
def down(sandbox, scratch_db):
    server = sandbox.downstream
    kwargs = {"host": server.host, "port": server.port, "user": server.user, "password": server.password}
    meta = Meta(lambda: connect_downstream(kwargs), f"{scratch_db}_meta", "task")
    meta.ensure()
    made = Downstream(kwargs, meta)
    yield made
    for lease in made.leases:
        lease.close()
    meta.close()


def test_the_standby_that_loses_the_race_for_an_expired_lease_says_who_won(down):
    first, loser, winner = down.lease("first"), down.lease("loser"), down.lease("winner")
    assert first.acquire(threading.Event())
    time.sleep(1.2)  # (its lease expires unrenewed)
    kill = loser._kill

    def meanwhile(cur, old) -> None:
        # between the loser's look and its update: the winner takes the lease
        assert winner._take() is None
        kill(cur, old)

    loser._kill = meanwhile
    answer: list = []
    thread = threading.Thread(target=lambda: answer.append(loser._take()), daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive(), "the standby that lost the race hangs"
    assert answer[0] is not None and answer[0].name == winner.name and answer[0].epoch == 2, answer
    assert loser.held is None and winner.held is not None and winner.held.epoch == 2


def test_a_connection_whose_id_a_restart_gave_again_is_still_the_holders_at_a_takeover(down):
    """After a restart the downstream gives connection ids again: a registration of the
    same id in the same epoch from before it must not hide the new connection from the
    takeover (chaos: kept, the takeover left the frozen holder's session alive, and its
    lock on the lease row kept the standby waiting)."""
    meta, holder, standby = down.meta, down.lease("holder"), down.lease("standby")
    session = connect_downstream(down.kwargs, client_flag=REGISTERING)
    try:
        assert holder.acquire(threading.Event())
        with session.cursor() as cur:
            # the row its id left before the restart (another boot), then its own registration
            cur.execute(
                f"INSERT INTO {meta.q}.lease_connection (task, epoch, conn_id, booted) "
                f"SELECT 'task', {holder.held.epoch}, CONNECTION_ID(), 12345"
            )
            cur.execute(holder.registration())
        session.commit()
        time.sleep(1.2)  # (the holder frozen: its lease expires)
        assert standby._take() is None
        with pytest.raises(pymysql.err.OperationalError), session.cursor() as cur:
            cur.execute("SELECT 1")  # killed by the takeover
    finally:
        with contextlib.suppress(Exception):
            session.close()


def test_a_connection_registers_past_the_renewals_lock_and_one_of_an_old_epoch_registers_nothing(down):
    """Each connection of the holder registers as it opens (`init_command`): while another
    session holds the lease row's lock (a renewal's, a takeover's) it opens at once; a
    daemon whose epoch a standby took registers nothing (issue 70: nothing of an old epoch
    commits, registrations included)."""
    meta, holder, standby = down.meta, down.lease("holder"), down.lease("standby")
    locker = connect_downstream(down.kwargs, autocommit=False)

    def opened() -> tuple[int, float]:
        began = time.monotonic()
        conn = connect_downstream(
            {**down.kwargs, "init_command": registration, "client_flag": REGISTERING}, read_timeout=10
        )
        took = time.monotonic() - began
        with conn.cursor() as cur:
            cur.execute("SELECT CONNECTION_ID()")
            (conn_id,) = cur.fetchone()
        conn.close()
        return int(conn_id), took

    def registered(conn_id: int) -> list:
        return meta.rows(f"SELECT epoch FROM {meta.q}.lease_connection WHERE conn_id = {conn_id}")

    try:
        assert holder.acquire(threading.Event())
        registration = holder.registration()
        with locker.cursor() as cur:
            cur.execute(f"SELECT * FROM {meta.q}.lease WHERE task = 'task' FOR UPDATE")
        conn_id, took = opened()
        assert took < 0.9, f"a new connection waited {took:.1f} s on the lease row's lock"
        locker.rollback()
        assert [tuple(r) for r in registered(conn_id)] == [(1,)]
        time.sleep(1.2)  # (the holder frozen: its lease expires)
        assert standby._take() is None and standby.held.epoch == 2
        conn_id, _ = opened()  # (the old holder, woken, opens a connection)
        assert registered(conn_id) == []
        assert meta.rows(f"SELECT COUNT(*) FROM {meta.q}.lease_connection WHERE epoch < 2")[0][0] == 0
    finally:
        with contextlib.suppress(Exception):
            locker.close()


def test_a_start_after_a_clean_stop_takes_the_released_lease_without_a_takeover(down, caplog):
    first, second = down.lease("first"), down.lease("second")
    assert first.acquire(threading.Event())
    first.release()
    held = first.holder()
    assert (held["holder"], held["live"], held["released"]) == ("elsewhere:1:first", False, True)
    caplog.clear()  # (the first's own start, if another test left INFO on)
    with caplog.at_level("INFO", logger="shardmerge"):
        assert second.acquire(threading.Event())
    assert second.held is not None and second.held.epoch == 2
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "shardmerge.lease"]
    assert said == [("INFO", "holding the lease of task task (epoch 2, after elsewhere:1:first (released))")]
    # a lease left to expire is still a takeover, and says so
    time.sleep(1.2)
    caplog.clear()
    third = down.lease("third")
    with caplog.at_level("INFO", logger="shardmerge"):
        assert third.acquire(threading.Event())
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "shardmerge.lease"]
    assert said == [("WARNING", "took over task task from elsewhere:1:second (its lease expired): epoch 3")]


def test_a_process_that_starts_again_takes_its_live_lease_back_in_a_new_epoch_and_no_one_else_does(down):
    """A member of a task starts again to follow its sources (`tenure.join`): its process
    keeps one lease name, takes back the lease it held while it lives (its earlier start's
    writes fenced by the new epoch), and another daemon cannot take it meanwhile."""
    held = down.lease("member")
    assert held.try_acquire() and held.held.epoch == 1
    other = down.lease("other")
    assert not other.try_acquire()
    again = down.lease("member")  # (the same name: the process's next start)
    assert again.try_acquire() and again.held.epoch == 2
    with pytest.raises(Exception, match="task task is run by elsewhere:1:member now \\(epoch 2\\)"):
        held.renew()  # (the start before: no longer the holder)
    assert not other.try_acquire()
