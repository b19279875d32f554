"""Schema changes a member sends the coordinator and its answers, on the sandbox's downstream
server (`replicator.state.schema_queue`): in the order sent, one entry for a DDL sent twice, the
event as the worker read it, the answer to its member; another version's entry refused, named."""

from __future__ import annotations

import pytest

from lattice import parse_table
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
    assert queue.answer(T1, first.id) is None
    meta.execute([queue.sql_answer(sent[0].seq, {"ran": True, "version": 2})])
    assert queue.answer(T1, first.id) == {"ran": True, "version": 2}
    assert [s.event for s in queue.sent()] == [second]  # (answered: not the coordinator's any more)
    meta.execute([queue.sql_forget(T1, (1, 100, 0))])
    assert queue.answer(T1, first.id) is None and [s.event for s in queue.sent()] == [second]


def test_an_entry_of_another_version_is_refused_naming_the_fix(scratch_meta):
    meta = scratch_meta.meta
    event = ddl(T1, 100)
    meta.execute([meta.schema_queue.sql_send("a", T1, event.id, event)])
    meta.execute([f"UPDATE {meta.q}.schema_queue SET format = 99"])
    with pytest.raises(QueueFormatError, match="run one version of shardmerge on every member"):
        meta.schema_queue.sent()


@pytest.mark.parametrize("up_to", [(1, 0, 5), (1, 1, 9), (1, 2, 0), (2, 0, 0)])
def test_forgetting_a_shards_answered_entries_reads_only_those_it_deletes(scratch_meta, up_to):
    """Among the shard's 30 answered entries and another shard's 3,000, the DELETE up to a
    change deletes exactly the shard's at or before it, in the order (file, position, index),
    and reads no more rows than it deletes and a probe that ends each of its three ranges (a
    row constructor's comparison, which MariaDB reads by no index, read every one)."""
    meta = scratch_meta.meta
    for shard, n in ((T1, 30), (T2, 3000)):
        meta.execute([
            f"INSERT INTO {meta.q}.schema_queue (task, member, shard, file_seq, pos, idx, format, event, answer) "
            f"SELECT {meta.t}, 'a', '{shard}', 1 + seq DIV 1000, seq MOD 1000 DIV 10, seq MOD 10, 1, x'00', x'00' "
            f"FROM {meta.q}.seq_0_to_{n - 1}"
        ])
    gone = sum(1 for n in range(30) if (1, n // 10, n % 10) <= up_to)
    with scratch_meta.connect() as conn, conn.cursor() as cur:
        cur.execute("FLUSH STATUS")
        cur.execute(meta.schema_queue.sql_forget(T1, up_to))
        deleted = cur.rowcount
        cur.execute("SHOW SESSION STATUS LIKE 'Handler_read%'")
        read = sum(int(v) for _, v in cur.fetchall())
        conn.commit()
        cur.execute(f"SELECT shard, COUNT(*) FROM {meta.q}.schema_queue GROUP BY shard ORDER BY shard")
        left = dict(cur.fetchall())
    assert deleted == gone
    assert left.get(str(T1), 0) == 30 - gone and left[str(T2)] == 3000
    assert read <= deleted + 3, (read, deleted)
