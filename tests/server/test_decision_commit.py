"""Decide, commit, then install (issue 70): a fault at the commit of every kind of decision
leaves the coordinator's memory equal to what the meta schema holds, and the next DDL is
decided as a restarted daemon decides it.

Each row sets a group of three shards up, then takes one decision of its kind through
`DecisionCommit` on a real downstream, with a fault at its commit:
- the connection killed (`KILL CONNECTION` from another session) between BEGIN and the
  writes: transient, so the decision is read back and taken again, and it commits once;
- the lease lost (`LeaseLost` from the fence, as `Lease.fence` raises it): not transient,
  so it raises, and the state is the one before the decision."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from lattice import Table
from replicator.apply.decision_commit import DecisionCommit
from replicator.apply.meta import Meta
from replicator.schema.coordinator import Coordinator, Decision
from replicator.schema.group import Result
from replicator.schema.plan import _table
from replicator.servers import connect_downstream
from replicator.shard_id import ShardId
from replicator.source.schema_change import ChangeKind, SchemaChange
from replicator.source.tracker import change_of
from replicator.state.coordinator_store import InMemoryStore, MetaStore
from replicator.state.lease import LeaseLost
from replicator.transient import Backoff, Retrier

S = ShardId.parse
S1, S2, S3, S4 = S("s1.db.t1"), S("s2.db.t2"), S("s3.db.t3"), S("s4.db.t4")
BASE = "CREATE TABLE t (id INT PRIMARY KEY, a INT NOT NULL)"

Op = Callable[[Coordinator], Decision]


def ddl(shard: ShardId, statement: str) -> Op:
    """The shard's DDL, read on its current table as its tracker reads it."""

    def run(c: Coordinator) -> Decision:
        return c.apply(change_of(shard, c.shards[shard].current, statement, "mariadb"))

    return run


def table(create: str = BASE) -> Table:
    return _table(create, "test")


ADD: Op = lambda c: c.add_shard(S4, table())  # noqa: E731
DROP: Op = lambda c: c.apply(SchemaChange(S3, ChangeKind.DROP, "DROP TABLE t3"))  # noqa: E731
CONFLICT = ddl(S1, "ALTER TABLE t1 MODIFY a VARCHAR(10) NOT NULL")
SET_SCHEMA: Op = lambda c: c.set_schema(S1, table())  # noqa: E731
SKIP: Op = lambda c: c.skip_ddl(S1)  # noqa: E731


@dataclass(frozen=True)
class Row:
    kind: str
    setup: tuple[Op, ...]
    decision: Op
    result: Result
    renames: int  # pending renames after the decision


ROWS = [
    Row("add", (), ADD, Result.APPLIED, 0),
    Row("alter", (), ddl(S1, "ALTER TABLE t1 ADD COLUMN b INT"), Result.APPLIED, 0),
    Row("rename start", (), ddl(S1, "ALTER TABLE t1 RENAME COLUMN a TO a2"), Result.APPLIED, 1),
    Row(
        "rename finish",
        (ddl(S1, "ALTER TABLE t1 RENAME COLUMN a TO a2"), ddl(S2, "ALTER TABLE t2 RENAME COLUMN a TO a2")),
        ddl(S3, "ALTER TABLE t3 RENAME COLUMN a TO a2"),
        Result.APPLIED,
        0,
    ),
    Row("drop", (ddl(S3, "ALTER TABLE t3 ADD COLUMN c INT"),), DROP, Result.APPLIED, 0),
    Row("conflict", (), CONFLICT, Result.CONFLICT, 0),
    Row("resume", (CONFLICT,), ddl(S1, "ALTER TABLE t1 MODIFY a INT NOT NULL"), Result.RESOLVED, 0),
    Row("set-schema", (CONFLICT,), SET_SCHEMA, Result.RESOLVED, 0),
    Row("skip", (CONFLICT,), SKIP, Result.RESOLVED, 0),
]

NEXT = ddl(S2, "ALTER TABLE t2 ADD COLUMN n BIGINT NULL")  # the DDL after the fault


def state(c: Coordinator) -> dict:
    """What a coordinator holds, as it saves it: every shard's state and the group's (a
    copy: the group's parts change in place)."""
    shards = {str(s): st.to_data() for s, st in sorted(c.shards.items())}
    return json.loads(json.dumps({"shards": shards, "group": c.group._meta()}))


def same(d: Decision) -> tuple:
    return (d.result, d.downstream, str(d.version), d.blocked, d.unblocked, d.message)


class KillAtCommit:
    """A fence that kills its own connection from another session, once."""

    def __init__(self, down):
        self.down, self.fired = down, 0

    def __call__(self, cur) -> None:
        if not self.fired:
            self.fired += 1
            self.down.execute(f"KILL CONNECTION {cur.connection.thread_id()}")


class LoseLease:
    def __init__(self):
        self.fired = 0

    def __call__(self, cur) -> None:
        self.fired += 1
        raise LeaseLost("another daemon holds the lease of task task (epoch 2)")


@pytest.mark.parametrize("fault", ["killed connection", "lease lost"])
@pytest.mark.parametrize("row", ROWS, ids=[r.kind for r in ROWS])
def test_a_fault_at_a_decisions_commit_leaves_memory_as_saved(sandbox, scratch_db, row, fault):
    down = sandbox.downstream
    kwargs = {"host": down.host, "port": down.port, "user": down.user, "password": down.password}
    target = f"{scratch_db}.t"
    meta = Meta(lambda: connect_downstream(kwargs), f"{scratch_db}_meta", "task")
    meta.ensure()
    try:
        store = MetaStore(meta, target)
        c = Coordinator(target, "mariadb", store)
        control = Coordinator(target, "mariadb", InMemoryStore())  # the same, with no fault
        retrier = Retrier("decision", threading.Event(), backoff=Backoff(first=0.05))
        commits = DecisionCommit(c, store, meta, target, retrier)
        for op in (*(lambda c, s=s: c.add_shard(s, table()) for s in (S1, S2, S3)), *row.setup):
            commits.run(lambda op=op: (op(c), store.flush_sql()))
            op(control)
        before = state(c)
        saved = meta.groups.history_count(target)

        meta.fence = injected = KillAtCommit(down) if fault == "killed connection" else LoseLease()
        if fault == "killed connection":
            decision = commits.run(lambda: (row.decision(c), store.flush_sql()))
            expected = row.decision(control)
            assert same(decision) == same(expected)
            assert decision.result == row.result and len(c.renames) == row.renames
            assert meta.groups.history_count(target) == saved + 1  # taken again, saved once
        else:
            with pytest.raises(LeaseLost):
                commits.run(lambda: (row.decision(c), store.flush_sql()))
            assert state(c) == before  # nothing of the decision stayed in memory
            assert meta.groups.history_count(target) == saved
        assert injected.fired == 1
        meta.fence = None

        restarted = Coordinator(target, "mariadb", MetaStore(meta, target))
        assert state(c) == state(restarted)
        # the next DDL: decided alike in memory and after a restart (on a store never saved)
        twin = Coordinator(target, "mariadb", MetaStore(meta, target))
        assert same(NEXT(c)) == same(NEXT(twin))
    finally:
        meta.close()


def test_a_member_reads_the_group_again_as_each_committed_decision_left_it(sandbox, scratch_db):
    """Issue 75: a member that does not coordinate takes the coordinator's decisions while it
    runs (`Coordinator.reload`, on the group's executor thread): after each decision committed
    by the coordinator (a rename pending, a conflict, its end), the member's group holds what
    the coordinator's holds, and the count of decisions it took; a read in one snapshot never
    mixes two decisions (`MetaDb.read_together`: a write committed between its queries is not
    seen by any of them)."""
    down = sandbox.downstream
    kwargs = {"host": down.host, "port": down.port, "user": down.user, "password": down.password}
    target = f"{scratch_db}.t"
    meta = Meta(lambda: connect_downstream(kwargs), f"{scratch_db}_meta", "task")
    meta.ensure()
    other = Meta(lambda: connect_downstream(kwargs), f"{scratch_db}_meta", "task")
    try:
        store = MetaStore(meta, target)
        c = Coordinator(target, "mariadb", store)
        commits = DecisionCommit(c, store, meta, target, Retrier("decision", threading.Event()))
        ops = [
            *(lambda c, s=s: c.add_shard(s, table()) for s in (S1, S2, S3)),
            ddl(S1, "ALTER TABLE t1 RENAME COLUMN a TO b"),
            CONFLICT,
            ddl(S2, "ALTER TABLE t2 RENAME COLUMN a TO b"),
        ]
        member = Coordinator(target, "mariadb", MetaStore(other, target))
        for n, op in enumerate(ops, start=1):
            commits.run(lambda op=op: (op(c), store.flush_sql()))
            assert member.reload() == meta.groups.history_count(target) == n
            assert state(member) == state(c) and member.view() == c.view()

        def queries():
            yield (f"SELECT COUNT(*) FROM {meta.q}.coordinator_history", ())
            meta.execute([f"DELETE FROM {meta.q}.coordinator_history WHERE seq = 1"])  # (between the two)
            yield (f"SELECT COUNT(*) FROM {meta.q}.coordinator_history", ())

        first, second = other.read_together(queries())
        assert first == second == [(len(ops),)]
        assert meta.rows(f"SELECT COUNT(*) FROM {meta.q}.coordinator_history") == [(len(ops) - 1,)]
    finally:
        meta.close()
        other.close()
