"""Two standbys taking an expired lease at once, on a real server (replicator/apply/lease.py):
one takes it, the other sees who did and waits on as a standby (chaos, issue 70: the one
that lost the race waited on its own session's lock for ever, and when the winner froze,
no standby took over)."""

from __future__ import annotations

import contextlib
import threading
import time

import pymysql
import pytest

from replicator.apply.lease import REGISTERING, Lease
from replicator.apply.meta import Meta
from replicator.servers import connect_downstream


def test_the_standby_that_loses_the_race_for_an_expired_lease_says_who_won(sandbox, scratch_db):
    down = sandbox.downstream
    kwargs = {"host": down.host, "port": down.port, "user": down.user, "password": down.password}
    meta = Meta(lambda: connect_downstream(kwargs), f"{scratch_db}_meta", "task")
    meta.ensure()

    def lease(name: str) -> Lease:
        return Lease(lambda: connect_downstream(kwargs), meta.q, "task", 1.0, name=f"elsewhere:1:{name}")

    first, loser, winner = lease("first"), lease("loser"), lease("winner")
    try:
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
    finally:
        for each in (first, loser, winner):
            each.close()
        meta.close()


def test_a_connection_whose_id_a_restart_gave_again_is_still_the_holders_at_a_takeover(sandbox, scratch_db):
    """After a restart the downstream gives connection ids again: a registration of the
    same id in the same epoch from before it must not hide the new connection from the
    takeover (chaos: kept, the takeover left the frozen holder's session alive, and its
    lock on the lease row kept the standby waiting)."""
    down = sandbox.downstream
    kwargs = {"host": down.host, "port": down.port, "user": down.user, "password": down.password}
    meta = Meta(lambda: connect_downstream(kwargs), f"{scratch_db}_meta", "task")
    meta.ensure()
    holder = Lease(lambda: connect_downstream(kwargs), meta.q, "task", 1.0, name="elsewhere:1:holder")
    standby = Lease(lambda: connect_downstream(kwargs), meta.q, "task", 1.0, name="elsewhere:1:standby")
    session = connect_downstream(kwargs, client_flag=REGISTERING)
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
        for each in (holder, standby):
            each.close()
        with contextlib.suppress(Exception):
            session.close()
        meta.close()


def test_a_connection_registers_past_the_renewals_lock_and_one_of_an_old_epoch_registers_nothing(
    sandbox, scratch_db
):
    """Each connection of the holder registers as it opens (`init_command`): while another
    session holds the lease row's lock (a renewal's, a takeover's) it opens at once; a
    daemon whose epoch a standby took registers nothing (issue 70: nothing of an old epoch
    commits, registrations included)."""
    down = sandbox.downstream
    kwargs = {"host": down.host, "port": down.port, "user": down.user, "password": down.password}
    meta = Meta(lambda: connect_downstream(kwargs), f"{scratch_db}_meta", "task")
    meta.ensure()
    holder = Lease(lambda: connect_downstream(kwargs), meta.q, "task", 1.0, name="elsewhere:1:holder")
    standby = Lease(lambda: connect_downstream(kwargs), meta.q, "task", 1.0, name="elsewhere:1:standby")
    locker = connect_downstream(kwargs, autocommit=False)

    def opened() -> tuple[int, float]:
        began = time.monotonic()
        conn = connect_downstream(
            {**kwargs, "init_command": registration, "client_flag": REGISTERING}, read_timeout=10
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
        for each in (holder, standby):
            each.close()
        with contextlib.suppress(Exception):
            locker.close()
        meta.close()
