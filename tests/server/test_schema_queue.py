"""Schema changes a member sends the coordinator and its answers, on the sandbox's downstream
server (`replicator.state.schema_queue`): in the order sent, one entry for a DDL sent twice, the
event as the worker read it, the answer to its member; another version's entry refused, named."""

from __future__ import annotations

import pytest

from lattice import parse_table
from replicator.apply.ddl_job import DDLJob
from replicator.daemon.ddl_path import ForwardToCoordinator
from replicator.shard_id import ShardId
from replicator.source.messages import DDLEvent
from replicator.source.schema_change import ChangeKind, SchemaChange
from replicator.state.schema_queue import QueueFormatError

T1, T2 = ShardId("s1", "db", "t1"), ShardId("s2", "db", "t1")
BEFORE = "CREATE TABLE t1 (id INT PRIMARY KEY)"
AFTER = "CREATE TABLE t1 (id INT PRIMARY KEY, note VARCHAR(20) NULL)"


def ddl(shard: ShardId, pos: int) -> DDLEvent:
    change = SchemaChange(
        shard, ChangeKind.ALTER, "ALTER TABLE t1 ADD note VARCHAR(20) NULL", parse_table(BEFORE), parse_table(AFTER)
    )
    return DDLEvent(shard.source, (1, pos, 0), f"mariadb-bin.000001:{pos}", "mariadb-bin.000001:900", "down.t1", change,
                    {"db.t1": AFTER}, gtid="0-1-7")


def test_changes_go_in_order_once_each_and_answers_come_back_to_their_member(scratch_meta):
    meta = scratch_meta.meta
    queue = meta.schema_queue
    first, second = ddl(T1, 100), ddl(T2, 200)
    meta.execute([queue.sql_send("a", T1, first.id, first)])
    meta.execute([queue.sql_send("b", T2, second.id, second)])
    meta.execute([queue.sql_send("a", T1, first.id, first)])  # (read again after a restart)
    sent = queue.sent()
    assert [(s.member, s.event) for s in sent] == [("a", first), ("b", second)]
    assert queue.sent(after=sent[0].seq) == sent[1:]
    assert queue.answered() == []
    meta.execute([queue.sql_answer(sent[0].seq, {"ran": True, "version": 2})])
    assert [(e.shard, e.answer) for e in queue.answered()] == [(T1, {"ran": True, "version": 2})]
    assert [s.event for s in queue.sent()] == [second]  # (answered: not the coordinator's any more)
    meta.execute([queue.sql_forget_entries([sent[0].seq])])
    assert queue.answered() == [] and [s.event for s in queue.sent()] == [second]


def test_an_entry_of_another_version_is_refused_naming_the_fix(scratch_meta):
    meta = scratch_meta.meta
    event = ddl(T1, 100)
    meta.execute([meta.schema_queue.sql_send("a", T1, event.id, event)])
    meta.execute([f"UPDATE {meta.q}.schema_queue SET format = 99"])
    with pytest.raises(QueueFormatError, match="run one version of shardmerge on every member"):
        meta.schema_queue.sent()


def test_forgetting_answered_entries_reads_only_those_it_deletes(scratch_meta):
    """Among 3,000 answered entries, the DELETE of 30 by their order deletes exactly those and
    reads no more rows than it deletes (by the primary key)."""
    meta = scratch_meta.meta
    meta.execute([
        f"INSERT INTO {meta.q}.schema_queue (task, member, shard, file_seq, pos, idx, format, event, answer) "
        f"SELECT {meta.t}, 'a', '{T1}', 1, seq, 0, 1, x'00', x'00' FROM {meta.q}.seq_0_to_2999"
    ])
    seqs = [seq for (seq,) in meta.rows(f"SELECT seq FROM {meta.q}.schema_queue ORDER BY seq")][::100]
    with scratch_meta.connect() as conn, conn.cursor() as cur:
        cur.execute("FLUSH STATUS")
        cur.execute(meta.schema_queue.sql_forget_entries(seqs))
        deleted = cur.rowcount
        cur.execute("SHOW SESSION STATUS LIKE 'Handler_read%'")
        read = sum(int(v) for _, v in cur.fetchall())
        conn.commit()
        cur.execute(f"SELECT seq FROM {meta.q}.schema_queue")
        left = {seq for (seq,) in cur.fetchall()}
    assert deleted == len(seqs) == 30
    assert len(left) == 2970 and not left & set(seqs)
    assert read <= deleted + 3, (read, deleted)


def test_a_members_answered_entries_are_read_with_their_shard_and_change(scratch_meta):
    meta = scratch_meta.meta
    queue = meta.schema_queue
    first, second = ddl(T1, 100), ddl(T2, 200)
    meta.execute([queue.sql_send("a", T1, first.id, first), queue.sql_send("b", T2, second.id, second)])
    assert queue.answered() == []
    (entry, _) = queue.sent()
    meta.execute([queue.sql_answer(entry.seq, {"decided": False, "error": "refused"})])
    (answered,) = queue.answered()
    assert (answered.shard, answered.change, answered.answer) == (T1, first.id, {"decided": False, "error": "refused"})
    meta.execute([queue.sql_forget_entries([answered.seq])])
    assert queue.answered() == [] and [s.event for s in queue.sent()] == [second]


def test_a_member_takes_every_answer_to_its_shards_and_starts_again_for_the_one_it_waits_for(scratch_meta):
    """Member b (reading s2) took no answer of s1's; it takes the answer to a DDL it sent before
    it started again (not waited for: its start took what the decision committed), and starts
    again for the one it waits for, naming the coordinator's refusal."""
    meta = scratch_meta.meta
    queue = meta.schema_queue
    other, before_restart, waited = ddl(T1, 100), ddl(T2, 200), ddl(T2, 300)
    forward = ForwardToCoordinator(meta, "b", {"s2"}, settle=lambda: None)
    meta.execute([queue.sql_send("a", T1, other.id, other), queue.sql_send("b", T2, before_restart.id, before_restart)])
    forward(DDLJob(T2, waited))
    answers = [{"decided": True}, {"decided": True}, {"decided": False, "error": "no"}]
    for entry, answer in zip(queue.sent(), answers, strict=True):
        meta.execute([queue.sql_answer(entry.seq, answer)])
    taken, reason = forward.answered()
    assert taken == [] and reason == f"the coordinator did not decide the DDL of shard {T2} at {waited.position} (no)"
    assert [(e.shard, e.change) for e in queue.answered()] == [(T1, other.id)]


@pytest.mark.parametrize(
    ("answer", "goes_on"),
    [
        ({"decided": True, "blocked": False, "resumed": [], "filtered": None}, True),
        ({"decided": True, "blocked": False, "resumed": [str(T1)], "filtered": None}, True),  # (another's)
        ({"decided": True, "blocked": False, "resumed": [str(ShardId("s2", "db", "t9"))]}, False),  # (its own)
        ({"decided": True, "blocked": True, "resumed": []}, False),
        ({"decided": True}, False),  # (a coordinator of before: what it resumed not said)
    ],
)
def test_a_decided_ddl_goes_on_without_a_start_again_unless_the_decision_did_more(scratch_meta, answer, goes_on):
    """Issue 75: a member took every decision by starting again. A DDL decided and left
    running goes on as the decision left the group (read again, `DDLPath._read_group`); one
    whose decision blocked it, or resumed a shard of the member's (its paused rows to read
    again), still has the member start again."""
    meta = scratch_meta.meta
    queue = meta.schema_queue
    waited = ddl(T2, 300)
    forward = ForwardToCoordinator(meta, "b", {"s2"}, settle=lambda: None)
    job = DDLJob(T2, waited)
    forward(job)
    meta.execute([queue.sql_answer(queue.sent()[0].seq, answer)])
    taken, reason = forward.answered()
    if goes_on:
        assert taken == [(job, answer)] and reason is None
    else:
        assert taken == [] and reason == f"the coordinator decided the DDL of shard {T2} at {waited.position}"
    assert queue.answered() == []  # (taken either way)
