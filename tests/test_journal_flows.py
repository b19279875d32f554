"""A journal entry's statements on the real downstream with the applier running: rows of
other shards go on during the statements that let them (`GroupExecutor._flows`), and they
name the table as the statements before left it. A rename's start is a CHANGE, an ADD
of the old name and its default (which hold the rows), then an index on the old name
(which lets them go on): a row of a shard that has not renamed, applied while that index
is made, must clear the new name as the coordinator says, not leave it its default
(live stories seed 20049)."""

from __future__ import annotations

import queue

from lattice import create, render_table
from replicator.apply.applier import Applier, TargetInfo
from replicator.apply.ddl_executor import GroupExecutor, update_info
from replicator.apply.inspect import read_table
from replicator.apply.meta import Meta, MetaStore
from replicator.schema.coordinator import Coordinator
from replicator.schema.plan import Player
from replicator.servers import connect_downstream
from replicator.shard_id import ShardId
from replicator.source.messages import Change
from tests.test_applier import fail_on_error

BASE = "CREATE TABLE t (id INT PRIMARY KEY, c4 DATE NULL DEFAULT '2020-01-02') DEFAULT CHARSET=utf8mb4"
RENAMES = ShardId("s1", "db", "t1")
STAYS = ShardId("s1", "db", "t2")


def test_rows_applied_while_a_statement_flows_name_the_table_the_statements_before_made(sandbox, scratch_db):
    target = f"{scratch_db}.t"
    down = sandbox.downstream
    kwargs = {"host": down.host, "port": down.port, "user": down.user, "password": down.password}
    meta = Meta(lambda: connect_downstream(kwargs), f"{scratch_db}_meta", "task")
    meta.ensure()
    coordinator = Coordinator(target, "mariadb", MetaStore(meta, target))
    player = Player(target, coordinator=coordinator)
    player.start({RENAMES: BASE.replace(" t ", " t1 "), STAYS: BASE.replace(" t ", " t2 ")})
    down.execute(create(coordinator.target, target=target).sql)
    with connect_downstream(kwargs) as conn:
        table = read_table(conn, scratch_db, "t")
    executor = None
    applier = None
    try:
        applier = Applier(meta, {}, kwargs, 2, 10, lambda changes: False, {}, fail_on_error)
        info = TargetInfo(target, f"`{scratch_db}`.`t`", {}, None, 1)
        update_info(info, table)
        applier.targets[target] = info
        applier.start()
        executor = GroupExecutor(
            target, coordinator, MetaStore(meta, target), meta, applier, info, kwargs, queue.Queue()
        )
        decision = player.ddl(RENAMES, "ALTER TABLE t1 CHANGE c4 r2 DATE NULL DEFAULT '2020-01-02'")
        statements = list(decision.downstream)
        assert any("CHANGE COLUMN `c4` `r2`" in s for s in statements), statements
        flowing = [s for s in statements if "ADD INDEX IF NOT EXISTS" in s]
        assert flowing, statements  # the statement the rows go on during

        run_statement = executor._run_statement

        def with_a_row(conn, statement, seq, index, last):
            run_statement(conn, statement, seq, index, last)
            if statement in flowing:  # a row of the shard that has not renamed, meanwhile
                applier.submit(Change((1, 4, 0), STAYS, target, "I", ("id", "c4"), ("7", "NULL")))
                applier.wait_idle()

        executor._run_statement = with_a_row
        executor.run_journal(1, statements, 0, [s.after for s in decision.steps], decision.before)
        row = down.execute(f"SELECT c4, r2 FROM `{scratch_db}`.t WHERE id = 7")
        assert row == [(None, None)], f"the row's new name took its default: {row}\n" + render_table(
            read_table(connect_downstream(kwargs), scratch_db, "t"), "mariadb"
        )
    finally:
        if applier is not None:
            applier.stop()
        meta.close()
        down.execute(f"DROP DATABASE IF EXISTS `{scratch_db}_meta`")


def test_a_journal_entry_the_copy_tool_refuses_waits_for_an_operator_when_the_daemon_starts(
    sandbox, scratch_db
):
    """A crash left a journal entry whose ALTER needs a copy, which pt-online-schema-change
    refuses (a table without a key): starting again reports the entry as refused, to wait
    for `journal retry` or `skip`, and does not die of it (live stories seed 20131)."""
    target = f"{scratch_db}.k"
    down = sandbox.downstream
    kwargs = {"host": down.host, "port": down.port, "user": down.user, "password": down.password}
    down.execute(f"CREATE TABLE `{scratch_db}`.k (n INT NOT NULL)")
    meta = Meta(lambda: connect_downstream(kwargs), f"{scratch_db}_meta", "task")
    meta.ensure()
    try:
        coordinator = Coordinator(target, "mariadb", MetaStore(meta, target))
        with connect_downstream(kwargs) as conn:
            info = TargetInfo(target, f"`{scratch_db}`.`k`", {}, None, 1)
            update_info(info, read_table(conn, scratch_db, "k"))
        applier = Applier(meta, {target: info}, kwargs, 1, 10, lambda changes: False, {}, fail_on_error)
        statement = f"ALTER TABLE `{scratch_db}`.`k` MODIFY COLUMN `n` bigint NOT NULL"
        meta.execute([meta.sql_journal(target, 1, STAYS, "2.0", [statement], [None])])
        executor = GroupExecutor(
            target, coordinator, MetaStore(meta, target), meta, applier, info, kwargs, queue.Queue()
        )
        recovered, refused = executor.recover()
        assert recovered == 0
        assert [entry["seq"] for entry, _ in refused] == [1]
        assert "pt-online-schema-change failed" in refused[0][1]
        assert [e["seq"] for e in meta.pending_journal(target)] == [1]  # still there, for the operator
    finally:
        meta.close()
        down.execute(f"DROP DATABASE IF EXISTS `{scratch_db}_meta`")
