"""A journal entry's statements on the real downstream with the applier running: rows of
other shards go on during the statements that let them (`journal_flows.flows`), and they
name the table as the statements before left it. A rename's start is a CHANGE, an ADD
of the old name and its default (which hold the rows), then an index on the old name
(which lets them go on): a row of a shard that has not renamed, applied while that index
is made, must clear the new name as the coordinator says, not leave it its default
(live stories seed 20049)."""

from __future__ import annotations

import contextlib
import queue
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

import pytest

from lattice import create, parse_table, render_table
from replicator.apply.applier import Applier
from replicator.apply.ddl_executor import GroupExecutor
from replicator.apply.ddl_job import DDLJob
from replicator.apply.inspect import read_table
from replicator.apply.meta import Meta
from replicator.apply.paused_window import PausedWindow
from replicator.apply.table_refresh import update_info
from replicator.apply.target import TargetInfo
from replicator.apply.version_fence import DdlMarks
from replicator.apply.windows import Windows
from replicator.config import Route
from replicator.schema.coordinator import Coordinator
from replicator.schema.plan import Player
from replicator.servers import connect_downstream
from replicator.shard_flow import ShardFlows
from replicator.shard_id import ShardId
from replicator.source.messages import Change
from replicator.source.routing import Router
from replicator.state.coordinator_store import MetaStore
from tests.server.test_applier_against_mariadb import fail_on_error

BASE = "CREATE TABLE t (id INT PRIMARY KEY, c4 DATE NULL DEFAULT '2020-01-02') DEFAULT CHARSET=utf8mb4"
RENAMES = ShardId("s1", "db", "t1")
STAYS = ShardId("s1", "db", "t2")


@dataclass
class Group:
    """A shard group on the real downstream: its coordinator (played by `player`), the
    applier writing rows and the executor running the decisions' journal entries."""

    target: str
    player: Player
    applier: Applier
    executor: GroupExecutor
    kwargs: dict


@contextlib.contextmanager
def group(sandbox, scratch_db, tables: dict[ShardId, str]) -> Iterator[Group]:
    target = f"{scratch_db}.t"
    down = sandbox.downstream
    kwargs = {"host": down.host, "port": down.port, "user": down.user, "password": down.password}
    meta = Meta(lambda: connect_downstream(kwargs), f"{scratch_db}_meta", "task")
    meta.ensure()
    coordinator = Coordinator(target, "mariadb", MetaStore(meta, target))
    player = Player(target, coordinator=coordinator)
    player.start(tables)
    down.execute(create(coordinator.target, target=target).sql)
    with connect_downstream(kwargs) as conn:
        table = read_table(conn, scratch_db, "t")
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
        yield Group(target, player, applier, executor, kwargs)
    finally:
        if applier is not None:
            applier.stop()
        meta.close()
        down.execute(f"DROP DATABASE IF EXISTS `{scratch_db}_meta`")


def test_rows_applied_while_a_statement_flows_name_the_table_the_statements_before_made(sandbox, scratch_db):
    down = sandbox.downstream
    tables = {RENAMES: BASE.replace(" t ", " t1 "), STAYS: BASE.replace(" t ", " t2 ")}
    with group(sandbox, scratch_db, tables) as g:
        decision = g.player.ddl(RENAMES, "ALTER TABLE t1 CHANGE c4 r2 DATE NULL DEFAULT '2020-01-02'")
        statements = list(decision.downstream)
        assert any("CHANGE COLUMN `c4` `r2`" in s for s in statements), statements
        flowing = [s for s in statements if "ADD INDEX IF NOT EXISTS" in s]
        assert flowing, statements  # the statement the rows go on during

        run_statement = g.executor.runner.statements.run

        def with_a_row(conn, statement, seq, index, last):
            run_statement(conn, statement, seq, index, last)
            if statement in flowing:  # a row of the shard that has not renamed, meanwhile
                g.applier.submit(Change((1, 4, 0), STAYS, g.target, "I", ("id", "c4"), ("7", "NULL")))
                g.applier.wait_idle()

        g.executor.runner.statements.run = with_a_row
        g.executor.runner.run(1, statements, 0, [s.after for s in decision.steps], decision.before)
        row = down.execute(f"SELECT c4, r2 FROM `{scratch_db}`.t WHERE id = 7")
        assert row == [(None, None)], f"the row's new name took its default: {row}\n" + render_table(
            read_table(connect_downstream(g.kwargs), scratch_db, "t"), "mariadb"
        )


def test_a_shard_that_drops_the_old_name_of_a_pending_rename_clears_the_new_one_no_more(sandbox, scratch_db):
    """While t1's rename of c4 to r2 is pending, t2 (with c4 only) clears r2 in its rows.
    Once t2 drops c4 it has neither name, and its rows take r2's default as a shard lacking
    the column: its DDL changes nothing downstream, yet the applier must know it at once
    (live stories L42: the NULL left in them refused the NOT NULL the rename ended with)."""
    tables = {s: BASE.replace(" t ", f" {s.table} ") for s in (RENAMES, STAYS, ShardId("s1", "db", "t3"))}
    with group(sandbox, scratch_db, tables) as g:

        def decide(shard: ShardId, sql: str):
            return g.executor._handle(DDLJob(shard, None, action=lambda _: g.player.ddl(shard, sql))).decision

        decide(RENAMES, "ALTER TABLE t1 CHANGE c4 r2 DATE NULL DEFAULT '2020-01-02'")
        assert g.executor.info.cleared.get(STAYS) == ("r2",)
        dropped = decide(STAYS, "ALTER TABLE t2 DROP COLUMN c4")
        assert not dropped.downstream, dropped.downstream
        g.applier.submit(Change((1, 5, 0), STAYS, g.target, "I", ("id",), ("5",)))
        g.applier.wait_idle()
        rows = sandbox.downstream.execute(f"SELECT r2, c4 FROM `{scratch_db}`.t WHERE id = 5")
        assert rows == [(date(2020, 1, 2), date(2020, 1, 2))]


def test_a_paused_shards_rows_merged_before_a_renames_result_is_taken_clear_the_new_name(sandbox, scratch_db):
    """t2 resumed from a pause; its rows of that time are merged (its source read past them)
    after t1's rename of c4 to r2 ran downstream but before the main loop took its result,
    so t2's flow does not know yet that its rows clear r2. They must clear it all the same,
    as the target's info says since that DDL, not take r2's default: the last shard's copy
    keeps it, where t2 wrote NULL (live stories L51, seed 54669)."""
    down = sandbox.downstream
    tables = {RENAMES: BASE.replace(" t ", " t1 "), STAYS: BASE.replace(" t ", " t2 ")}
    with group(sandbox, scratch_db, tables) as g:
        rename = "ALTER TABLE t1 CHANGE c4 r2 DATE NULL DEFAULT '2020-01-02'"
        g.executor._handle(DDLJob(RENAMES, None, action=lambda _: g.player.ddl(RENAMES, rename)))
        info = g.executor.info
        assert info.clears(STAYS) == ("r2",)
        flows = ShardFlows()
        flow = flows[STAYS]
        assert flow.cleared == ()  # (the result not taken)
        meta = g.executor.meta
        window = PausedWindow(
            STAYS,
            parse_table(tables[STAYS].replace(" t2 ", " `t2` ")),
            (1, 1, 0),
            (2, 0),
            meta.schema,
            "mariadb",
        )
        for statement in window.create_sql():
            down.execute(statement)
        window.row(Change((1, 4, 0), STAYS, g.target, "I", ("id", "c4"), ("9", "NULL")))
        flow.window = window
        route = Route("db", "t2", scratch_db, "t")
        windows = Windows(flows, {}, meta, g.kwargs, Router([route]), {g.target: info}, "mariadb", print)
        windows.applier = g.applier
        windows.merge(flow)
        assert flow.window is None, "the merge failed"
        rows = down.execute(f"SELECT c4, r2 FROM `{scratch_db}`.t WHERE id = 9")
        assert rows == [(None, None)], f"t2's row took the new name's default: {rows}"


CANCEL_BASE = (
    "CREATE TABLE t (id INT PRIMARY KEY, c3 DECIMAL(14,2) UNSIGNED NOT NULL) DEFAULT CHARSET=utf8mb4"
)
RENAMER, HOLDER, LACKS = (ShardId("s1", "db", name) for name in ("t2", "t1", "t3"))


def _settle(applier: Applier, seconds: float = 2.0) -> None:
    """Let the applier write what it has, unless a statement holds its batches."""
    applier.flush()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and (any(applier.pending.inflight.values()) or any(applier.pending.buffered.values())):
        time.sleep(0.02)


def test_rows_written_after_a_cancelled_renames_copy_get_the_old_names_own_default(sandbox, scratch_db):
    """A rename cancelled (its shard drops the new name) copies the new name back into the old
    one, whose default is NULL while the rename was pending; the entry's last statement makes
    it NOT NULL DEFAULT 0 again. A row of a shard lacking the column, written right after the
    copy, must wait for that statement (it flowed during the DROP INDEX between: it kept NULL,
    and the NOT NULL was refused, 1265; live stories L35, with kills: safe mode's REPLACEs)."""
    down = sandbox.downstream
    tables = {s: CANCEL_BASE.replace(" t ", f" {s.table} ") for s in (RENAMER, HOLDER, LACKS)}
    with group(sandbox, scratch_db, tables) as g:
        player, applier, executor, target = g.player, g.applier, g.executor, g.target

        def run(decision, hook=None) -> None:
            statements = list(decision.downstream)
            if hook is not None:
                executor.runner.statements.run = hook(executor.runner.statements.run, statements)
            executor.runner.run(1, statements, 0, [s.after for s in decision.steps], decision.before)

        run(player.ddl(LACKS, "ALTER TABLE t3 DROP COLUMN c3"))
        run(player.ddl(RENAMER, "ALTER TABLE t2 CHANGE c3 r6 DECIMAL(14,2) UNSIGNED NOT NULL"))
        cancel = player.ddl(RENAMER, "ALTER TABLE t2 DROP COLUMN r6")
        statements = list(cancel.downstream)
        copy = next(i for i, s in enumerate(statements) if "SET `c3` = `r6`" in s)
        assert copy < len(statements) - 2, statements  # statements after the copy, the last NOT NULL
        assert "NOT NULL DEFAULT 0" in statements[-1], statements

        def with_a_row(run_statement, statements):
            def run_one(conn, statement, seq, index, last):
                run_statement(conn, statement, seq, index, last)
                if index == copy + 2:  # right after the statement that follows the copy
                    applier.submit(Change((1, 9, 0), LACKS, target, "I", ("id",), ("9",)))
                    _settle(applier)

            return run_one

        run(cancel, with_a_row)
        applier.wait_idle()
        assert down.execute(f"SELECT c3 FROM `{scratch_db}`.t WHERE id = 9") == [(Decimal("0.00"),)]


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
        meta.execute([meta.journal.sql_entry(target, 1, STAYS, "2.0", [statement], [None])])
        executor = GroupExecutor(
            target, coordinator, MetaStore(meta, target), meta, applier, info, kwargs, queue.Queue()
        )
        recovered, refused = executor.recover()
        assert recovered == 0
        assert [entry["seq"] for entry, _ in refused] == [1]
        assert "pt-online-schema-change failed" in refused[0][1]
        assert [e["seq"] for e in meta.journal.pending(target)] == [1]  # still there, for the operator
    finally:
        meta.close()
        down.execute(f"DROP DATABASE IF EXISTS `{scratch_db}_meta`")


def test_a_member_reads_a_group_again_with_its_table_once_the_decisions_statements_ran(sandbox, scratch_db):
    """Issue 75: a member that does not coordinate reads the group again at each decision
    (`DDLJob.reload`). A decision commits before its statements run downstream: a table read
    in between, said to be at the decision's version, kept the member's batches built for
    the table of before under the version fence (chaos with partitions: rows still naming a
    rename's old name once it was dropped, refused). The member's executor reads the table
    once the decisions' journal entries are done and no DDL marks the table busy: neither
    while the entry waits to begin, nor while it runs."""
    tables = {RENAMES: BASE.replace(" t ", " t1 "), STAYS: BASE.replace(" t ", " t2 ")}
    with group(sandbox, scratch_db, tables) as g:
        meta = g.executor.meta
        coordinator = g.executor.coordinator
        meta.execute(coordinator.store.flush_sql())
        member = Coordinator(g.target, "mariadb", MetaStore(meta, g.target))
        info = TargetInfo(g.target, f"`{scratch_db}`.`t`", {}, None, 1)
        update_info(info, read_table(connect_downstream(g.kwargs), scratch_db, "t"))
        results: queue.Queue = queue.Queue()
        executor = GroupExecutor(g.target, member, MetaStore(meta, g.target), meta, g.applier, info, g.kwargs, results)
        executor.start()
        try:
            g.player.ddl(RENAMES, "ALTER TABLE t1 DROP COLUMN c4")
            decision = g.player.ddl(STAYS, "ALTER TABLE t2 DROP COLUMN c4")
            assert coordinator.version.major == 2 and decision.downstream, decision
            journal = meta.journal
            seq = journal.next_seq(g.target)
            entry = journal.sql_entry(g.target, seq, STAYS, str(decision.version), list(decision.downstream), [])
            with connect_downstream(g.kwargs) as conn:
                meta.execute([*coordinator.store.flush_sql(), entry])  # (the decisions and their entry)
                executor.submit(DDLJob(None, None, reload=g.target))
                with pytest.raises(queue.Empty):
                    results.get(timeout=0.6)  # (the entry has not begun: the member waits for it)
                meta.table_versions.begin_ddl(conn, g.target, 1)  # (the coordinator's mark)
                with pytest.raises(queue.Empty):
                    results.get(timeout=0.6)  # (it runs)
                for statement in decision.downstream:
                    conn.cursor().execute(statement)
                meta.execute([journal.sql_progress(g.target, seq, len(decision.downstream), True)])
                meta.table_versions.end_ddl(conn, g.target, 2)
            result = results.get(timeout=10)
            assert result.decided == meta.groups.history_count(g.target) and result.view is not None
            assert info.major == 2 and "c4" not in info.columns, (info.major, info.columns)
            assert member.version.major == 2
        finally:
            executor.stop()


def test_a_journal_entry_keeps_the_shared_table_marked_from_its_first_statement_to_its_last(sandbox, scratch_db):
    """Issue 75: where a task's members share the table, the coordinator's mark held their
    batches during each run of its entry's statements that holds rows, and ended between
    them, the table at the new version already: a member read it there (chaos with
    partitions). The mark now spans the entry, the statements that let the coordinator's own
    rows go on (a rename's index on its old name) too, and ends after the last."""
    tables = {RENAMES: BASE.replace(" t ", " t1 "), STAYS: BASE.replace(" t ", " t2 ")}
    with group(sandbox, scratch_db, tables) as g:
        meta = g.executor.meta
        marks = DdlMarks(meta.table_versions, g.target, lambda: connect_downstream(g.kwargs))
        executor = GroupExecutor(
            g.target, g.executor.coordinator, MetaStore(meta, g.target), meta, g.applier, g.executor.info,
            g.kwargs, queue.Queue(), marks=marks,
        )
        decision = g.player.ddl(RENAMES, "ALTER TABLE t1 CHANGE c4 r2 DATE NULL DEFAULT '2020-01-02'")
        statements = list(decision.downstream)
        flowing = [s for s in statements if "ADD INDEX IF NOT EXISTS" in s]
        assert flowing and len(statements) > len(flowing), statements
        busy: list[tuple[str, bool]] = []
        run_statement = executor.runner.statements.run

        def noting(conn, statement, seq, index, last):
            busy.append((statement, meta.table_versions.rows()[g.target].busy))
            run_statement(conn, statement, seq, index, last)

        executor.runner.statements.run = noting
        executor.runner.run(1, statements, 0, [s.after for s in decision.steps], decision.before)
        assert [s for s, _ in busy] == statements
        assert all(marked for _, marked in busy), busy  # (the flowing index too)
        assert not meta.table_versions.rows()[g.target].busy


def test_a_member_reads_its_group_as_it_is_past_an_entry_left_undone_and_waits_for_it_once(
    sandbox, scratch_db, monkeypatch, caplog
):
    """An entry the downstream refused waits for the operator (or its coordinator died): the
    table not busy, a member reading its group again waits ENTRY_WAIT for it, says so, reads
    the table as it is (as its start would), and does not wait for that entry again."""
    import replicator.apply.ddl_executor as ddl_executor

    monkeypatch.setattr(ddl_executor, "ENTRY_WAIT", 0.8)
    tables = {RENAMES: BASE.replace(" t ", " t1 "), STAYS: BASE.replace(" t ", " t2 ")}
    with group(sandbox, scratch_db, tables) as g:
        meta = g.executor.meta
        meta.execute(g.executor.coordinator.store.flush_sql())
        journal = meta.journal
        seq = journal.next_seq(g.target)
        meta.execute([journal.sql_entry(g.target, seq, STAYS, "1.1", ["ALTER TABLE nothing"], [])])
        member = Coordinator(g.target, "mariadb", MetaStore(meta, g.target))
        results: queue.Queue = queue.Queue()
        executor = GroupExecutor(
            g.target, member, MetaStore(meta, g.target), meta, g.applier, g.executor.info, g.kwargs, results
        )
        executor.start()
        try:
            said = f"journal entries {seq} not done"
            executor.submit(DDLJob(None, None, reload=g.target))
            assert results.get(timeout=10).view is not None
            assert caplog.text.count(said) == 1
            executor.submit(DDLJob(None, None, reload=g.target))
            assert results.get(timeout=10).view is not None
            assert caplog.text.count(said) == 1  # (not waited for again)
            meta.execute([journal.sql_progress(g.target, seq, 1, True)])  # (the operator's way out)
            seq2 = journal.next_seq(g.target)
            meta.execute([journal.sql_entry(g.target, seq2, STAYS, "1.2", ["ALTER TABLE nothing"], [])])
            executor.submit(DDLJob(None, None, reload=g.target))
            assert results.get(timeout=10).view is not None
            assert caplog.text.count(f"journal entries {seq2} not done") == 1  # (a new one is)
        finally:
            executor.stop()
