"""Upstream failover by GTID (issue 45, docs/operations/failover.md): a source's primary
dies, its replica (log_slave_updates, GTIDs) is promoted and the source pointed at it;
the daemon finds its saved positions in the replica's binlog by their GTIDs and reads
on from there: no row lost, none twice, a DDL followed once. On a sandbox of its own:
a primary (up1) and its replica (up2), whose binlog holds the same transactions at
other files and offsets."""

from __future__ import annotations

import dataclasses
import time

import pytest

from replicator.apply.meta import Meta
from replicator.apply.rebase import SavedPositions, rebase
from replicator.sandbox import Instance, Sandbox
from replicator.source.failover import FailoverError, NewBinlog
from replicator.source.gtid import Gtid, GtidState
from replicator.state.positions import Position
from replicator.state.saved_positions import Saved, SavedRows
from tests.replication import ReplicationTask
from tests.tcp_proxy import Proxy
from tests.traffic import Writer

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]

CREATE = (
    "CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, note VARCHAR(20) NULL) "
    "DEFAULT CHARSET=utf8mb4"
)


class PrimaryOnly:
    """What a ReplicationTask asks of a sandbox: the shards on the primary (replicated to
    the replica), the downstream. After the failover `up1` answers with the promoted one."""

    def __init__(self, sandbox: Sandbox, primary: Instance):
        self.sandbox = sandbox
        self.primary = primary

    @property
    def upstreams(self) -> list[Instance]:
        return [self.primary]

    @property
    def downstream(self) -> Instance:
        return self.sandbox.downstream

    def instance(self, name: str) -> Instance:
        return self.primary if name == "up1" else self.sandbox.instance(name)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    sb = Sandbox(tmp_path_factory.mktemp("failover"), upstreams=2, watchdog=True)
    sb.up()
    primary, replica = sb.instance("up1"), sb.instance("up2")
    # (the replica's binlog holds the primary's transactions at other files and offsets)
    replica.execute(["FLUSH BINARY LOGS", "FLUSH BINARY LOGS"])
    replica.execute(
        f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary.port}, MASTER_USER='root', "
        "MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos"
    )
    replica.execute("START SLAVE")
    try:
        yield sb
    finally:
        sb.down()


def gtid_pos(inst: Instance) -> GtidState:
    return GtidState.parse(inst.execute("SELECT @@gtid_binlog_pos")[0][0])


def wait_replicated(primary: Instance, replica: Instance, timeout: float = 60) -> None:
    target = gtid_pos(primary)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(gtid_pos(replica).passed(g) for g in target.last):
            return
        time.sleep(0.2)
    raise AssertionError(f"the replica did not get to {target}")


def gtid_at(inst: Instance, seq: int, pos: int) -> str:
    """The GTID of the transaction starting at (file sequence, offset), from the binlog."""
    rows = inst.execute(f"SHOW BINLOG EVENTS IN 'mysql-bin.{seq:06d}' FROM {pos} LIMIT 1")
    assert rows and rows[0][2] == "Gtid", f"no transaction starts at {seq}:{pos}: {rows}"
    return str(rows[0][5]).split()[-1]  # BEGIN GTID 0-101-57 / GTID 0-101-58


def decisions_of(task: ReplicationTask, words: str) -> int:
    rows = task.sandbox.downstream.execute(
        f"SELECT data FROM `{task.meta_schema}`.coordinator_history WHERE task = '{task.name}'"
    )
    return sum(1 for (data,) in rows if words in data)


def test_saved_positions_carry_the_gtids_the_server_has_there(pair):
    """Every checkpoint, handled DDL and the watermark name their place by a GTID, as
    the server's binlog has it (the watermark: the server's GTID state there)."""
    task = ReplicationTask(PrimaryOnly(pair, pair.instance("up1")), pair.root, CREATE)
    try:
        task.start()
        _, b = task.shards
        with Writer(task, rows_per_batch=20):
            time.sleep(1)
            task.sql(b, "ALTER TABLE {t} ADD COLUMN extra INT NULL")
            time.sleep(1.5)
        task.wait_in_sync(timeout=60)
        time.sleep(1.5)  # (a watermark written after the last rows)
        primary, q = pair.instance("up1"), f"`{task.meta_schema}`"
        checkpoints = task.sandbox.downstream.execute(f"SELECT file_seq, txn_pos, gtid FROM {q}.checkpoint")
        assert checkpoints
        for seq, pos, gtid in checkpoints:
            assert gtid == gtid_at(primary, seq, pos)
        ((seq, pos, gtid),) = task.sandbox.downstream.execute(
            f"SELECT file_seq, txn_pos, gtid FROM {q}.ddl_done"
        )
        assert gtid == gtid_at(primary, seq, pos)
        ((file, pos, state, server),) = task.sandbox.downstream.execute(
            f"SELECT file, txn_pos, gtid, server_id FROM {q}.watermark"
        )
        assert state == primary.execute(f"SELECT BINLOG_GTID_POS('{file}', {pos})")[0][0]
        assert server == primary.server_id
        assert task.stop() == 0
    finally:
        task.cleanup()


def test_a_source_whose_primary_fails_over_reads_on_from_the_promoted_replica_by_gtid(pair):
    """The source's host is a virtual IP (a relay here) that moves to the replica once it
    is promoted: the daemon finds another server there, ends (exit 3) and, started again,
    moves its positions by their GTIDs and reads on."""
    primary, replica = pair.instance("up1"), pair.instance("up2")
    vip = Proxy(primary.port)
    shim = PrimaryOnly(pair, dataclasses.replace(primary, port=vip.port))
    task = ReplicationTask(shim, pair.root, CREATE)
    try:
        task.start(group=True)
        a, b = task.shards
        with Writer(task, rows_per_batch=20):
            time.sleep(1)
            # a paused shard holds the watermark back: from there on every saved position
            # (its pause, the other shard's checkpoints and DDL) is read on the new server
            task.sql(a, "ALTER TABLE {t} MODIFY note VARCHAR(20) NULL DEFAULT 'x'")
            task.wait_for(lambda: "paused" in task.log_text(), what="shard a paused")
            time.sleep(1)
            task.sql(b, "ALTER TABLE {t} ADD COLUMN extra INT NULL")
            time.sleep(2)
        assert decisions_of(task, "ADD COLUMN extra") == 1
        wait_replicated(primary, replica)
        time.sleep(1)  # (the daemon applies what it read)
        pair.stop_instance("up1", graceful=False)
        replica.execute(["STOP SLAVE", "RESET SLAVE ALL"])  # promoted
        vip.point(replica.port)
        assert task.wait_exit(timeout=60) == 3, task.log_text()[-3000:]
        assert f"its server is another one now (server id {replica.server_id}, was {primary.server_id})" in (
            task.log_text()
        )
        task.start(group=True)
        assert f"server id {replica.server_id}, was {primary.server_id}): its saved positions moved" in (
            task.log_text()
        )
        writer = Writer(task, rows_per_batch=20)
        writer.next_id = 1_000_000  # (the rows before are there)
        with writer:
            time.sleep(1)
            task.sql(a, "ALTER TABLE {t} MODIFY note VARCHAR(20) NULL DEFAULT NULL")  # resumes it
            time.sleep(2)
        task.wait_in_sync(timeout=120)
        assert decisions_of(task, "ADD COLUMN extra") == 1, "the DDL read again was decided again"
        assert task.stop() == 0
    finally:
        vip.close()
        pair.start_instance("up1")
        task.cleanup()


def test_gtid_states_follow_transactions():
    state = GtidState.parse("0-101-5,1-7-3")
    assert str(state.after(Gtid.parse("0-102-6"))) == "0-102-6,1-7-3"
    assert state.passed(Gtid.parse("0-102-5")) and not state.passed(Gtid.parse("0-101-6"))
    assert not state.passed(Gtid.parse("2-1-1"))
    assert str(GtidState.parse("")) == "" and GtidState.parse(None).last == ()


def test_saved_positions_move_by_their_gtids():
    """The rules of the move, on a new binlog whose transactions sit elsewhere: below the
    watermark a checkpoint or handled DDL goes (and each table keeps its last schema at
    the baseline); from it on each goes where its transaction is, with its index there; a
    position saved as a GTID state goes where the transaction after that state starts."""
    g = Gtid.parse
    new = NewBinlog(
        GtidState.parse("0-101-10"),
        Position("b.000007", 400),
        starts={g("0-101-11"): Position("b.000007", 400), g("0-101-12"): Position("b.000007", 900)},
        ends={g("0-101-11"): Position("b.000007", 900), g("0-101-12"): Position("b.000008", 4)},
    )
    saved = SavedPositions(
        "s1",
        (3, 5000, 0),
        GtidState.parse("0-101-10"),
        SavedRows(
        checkpoints=(
            Saved(("s1.d.t1", "0"), (3, 100, 7), "0-101-2"),  # below the watermark
            Saved(("s1.d.t1", "1"), (3, 5600, 9), "0-101-12"),
        ),
        ddl_done=(Saved(("s1.d.t2",), (3, 5000, 0), "0-101-11"),),
        pauses=(Saved(("s1.d.t3",), (3, 5600, 4), "0-101-11"),),
        history=(
            ("d.t1", (3, 90, 0), "CREATE TABLE t1 (a INT)", "0-101-1"),
            ("d.t1", (3, 5000, 0), "CREATE TABLE t1 (a INT, b INT)", "0-101-11"),
        ),
        replays=(Saved(("s1.d.t4",), (3, 6000, 0), "0-101-12"),),
        dead_letters=(),
        backfill_end=(Saved((), (2, 70, 0), "0-101-1"),),
        ),
    )
    assert saved.wanted() == {g("0-101-11"), g("0-101-12")}
    out = "\n".join(rebase(Meta(lambda: None, "m", "task"), saved, new, 102))
    assert "DELETE FROM `m`.checkpoint WHERE task='task' AND shard='s1.d.t1' AND part='0'" in out
    assert "SET file_seq=7, txn_pos=900, idx=9 WHERE task='task' AND shard='s1.d.t1' AND part='1'" in out
    assert "UPDATE `m`.ddl_done SET file_seq=7, txn_pos=400, idx=0" in out
    assert "UPDATE `m`.pause SET file='b.000007', file_seq=7, txn_pos=900, idx=4" in out  # after 0-101-11
    assert "UPDATE `m`.replay SET file_seq=8, txn_pos=4" in out
    assert "p1_file='b.000007', p1_pos=400" in out  # (its safe mode had ended)
    assert "('task','s1','d.t1',0,0,-1,'CREATE TABLE t1 (a INT)','0-101-1')" in out
    assert "('task','s1','d.t1',7,400,0,'CREATE TABLE t1 (a INT, b INT)','0-101-11')" in out
    assert out.rstrip().endswith("server_id=VALUES(server_id)") and "'b.000007',7,400,0,'0-101-10'" in out

    lacking = NewBinlog(new.state, new.start, starts={g("0-101-11"): new.start})
    with pytest.raises(FailoverError, match=r"lacks transactions .*: 0-101-12"):
        rebase(Meta(lambda: None, "m", "task"), saved, lacking, 102)
