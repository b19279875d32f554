"""A journal entry's statements run downstream one by one, each followed by the journal's
progress (statement_run.py), the applier's batches on the table held or let go on as each
allows (journal_flows.py, table_hold.py), and what the applier knows of the table read again
after them (table_refresh.py). An entry a crash or an error broke off is finished from where
its recovery says (`finish`): the statement that was running is compared with the table it
should leave (`DownstreamStep.after`, journaled with it): equal means it ran, so it is
skipped; otherwise it is run. A DDL is never run twice or lost."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from lattice import Table, is_old_name_index_statement, table_from_data
from replicator.apply.inspect import read_table, table_exists, with_server_choices
from replicator.apply.journal_flows import flows
from replicator.apply.meta import Meta
from replicator.apply.statement_run import StatementRunner, is_dml
from replicator.apply.table_hold import TableHold
from replicator.apply.table_refresh import TableRefresh
from replicator.apply.version_fence import DdlMarks
from replicator.schema.row_fixes import on_scratch
from replicator.servers import connect_downstream
from replicator.transient import transient

log = logging.getLogger("shardmerge.ddl")


class JournalRunner:
    def __init__(
        self, meta: Meta, table: TableRefresh, statements: StatementRunner, marks: DdlMarks | None = None
    ):
        """`table`: the group's downstream table (its name, its connection's settings, what
        the applier knows of it); `statements`: how each statement runs; `marks`: where the
        task's daemons share the table, its mark that holds their batches (`TableHold`)."""
        self.meta = meta
        self.table = table
        self.statements = statements
        self.hold = TableHold(table.info, marks)
        self.target, self.connection = table.target, table.connection

    def run(
        self,
        seq: int,
        statements: list[str],
        start: int,
        tables: Sequence[Table | None],
        before: Table | None,
    ) -> None:
        """Run statements[start:] of journal entry `seq`, recording progress after each
        (`tables`: the downstream table after each statement, None where not known;
        `before`: before statements[start]). The applier's batches on the table wait
        meanwhile, except during the statements that may let them go on (`flows`): then
        they go on, their rows as statements (a row event names columns by their place,
        which an ALTER may move). What the applier knows of the table, and the columns
        its rows clear, is read again after the statements that hold its batches, before
        they go on: a column one of them added (the new name of a rename) is one a flowing
        statement's rows must name, or they would take its default (L05:
        a rename's new name got its default, not the NULL its shards clear it to)."""
        conn = connect_downstream(self.connection)
        try:
            with self.hold.entry():
                i = start
                while i < len(statements):
                    named, flavor = set(self.table.info.columns), self.table.coordinator.flavor
                    flowing = flows(named, before, tables[i:], statements[i:], flavor)
                    j = i
                    while j < len(statements) and flowing[j - i] == flowing[0]:
                        j += 1
                    self._held(conn, seq, statements, i, j, flowing[0])
                    before, i = tables[j - 1], j
                with self.hold.held(False):
                    self.table.refresh(conn)
        finally:
            self.statements.running = None
            conn.close()

    def _held(self, conn, seq: int, statements: list[str], i: int, j: int, flowing: bool) -> None:
        """statements[i:j], the applier's batches held meanwhile, or let go on (`flowing`)."""
        with self.hold.held(flowing):
            try:
                for k in range(i, j):
                    self.statements.run(conn, statements[k], seq, k + 1, k + 1 == len(statements))
            except BaseException as exc:
                # what ran of the entry changed the table: the applier's batches must
                # name the columns it has now, read before they go on (live stories
                # 120004: a rename's entry refused after its DROP of the old name, the
                # other shards' rows named it still, each refused and paused). Broken
                # off by a transient error, they wait for its retry (`TableHold.held`).
                if not flowing and not transient(exc):
                    self.table.refresh_quietly()
                raise
            if not flowing and j < len(statements):
                self.table.refresh(conn)

    def run_entry(self, entry: dict, start: int) -> None:
        """Run a journal entry's statements from `start` on (the first of them holds the
        rows when the entry has no table before it)."""
        tables = [table_from_data(t) if t is not None else None for t in entry["tables"]]
        self.run(entry["seq"], entry["statements"], start, tables, tables[start - 1] if start > 0 else None)

    def finish(self, entry: dict) -> None:
        """A journal entry finished from where its progress says, the statement that was
        running skipped if the table shows it ran."""
        statements, tables, start = entry["statements"], entry["tables"], entry["next_index"]
        if (
            start < len(statements)
            and not is_dml(statements[start])
            # (these change no column to tell they ran by, and may run again)
            and not is_old_name_index_statement(statements[start])
            and not on_scratch(statements[start])
            and self._already(tables[start])
        ):
            log.info(
                "%s: journal %d statement %d had run before the crash; skipping it",
                self.target,
                entry["seq"],
                start,
            )
            start += 1
            self.meta.execute(
                [self.meta.journal.sql_progress(self.target, entry["seq"], start, start == len(statements))]
            )
        log.info("%s: finishing journal entry %d from statement %d", self.target, entry["seq"], start)
        self.run_entry(entry, start)

    def _already(self, expected: dict | None) -> bool:
        schema, table = self.target.split(".", 1)
        conn = connect_downstream(self.connection)
        try:
            if not table_exists(conn, schema, table):
                return expected is None
            if expected is None:
                return False
            actual = read_table(conn, schema, table)
            return _same(actual, table_from_data(expected))
        finally:
            conn.close()

    def run_given(self, statements: Sequence[str]) -> None:
        """Statements an operator gives for the downstream (`shardctl binlog inject` or
        `replace` on an entry the downstream refused), in order, each committed as it runs,
        with the applier's batches on the table held: they may change the table under them.
        What the applier knows of the table is read again after them."""
        conn = connect_downstream(self.connection)
        try:
            with self.hold.held(False):
                for statement in statements:
                    shown = " ".join(statement.split())[:200]
                    with conn.cursor() as cur:
                        cur.execute(statement)  # (autocommit: each commits as it runs)
                    log.info("%s: ran the operator's statement %s", self.target, shown)
                self.table.refresh(conn)
        finally:
            conn.close()


def _same(actual: Table, expected: Table) -> bool:
    return actual == with_server_choices(expected, actual)
