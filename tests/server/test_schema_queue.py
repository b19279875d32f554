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
