"""One statement of a journal entry run downstream, and its progress saved: an ALTER online
or through a copy (downstream_alter.py), then its progress; a row change (a rename's copy)
committed with its progress; a shard's TRUNCATE in batches, the last with its progress. What
runs now, and how, is `running` (`shardctl query-status`)."""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass

import pymysql

from replicator.apply.downstream_alter import run_alter
from replicator.apply.meta import Meta
from replicator.apply.shard_rows import batch_size, run_batches
from replicator.faults import crash_point, fault_point, faults_armed
from replicator.schema.coordinator import Coordinator

log = logging.getLogger("shardmerge.ddl")


@dataclass(frozen=True)
class RunningDDL:
    """A downstream statement under way: how it runs (online: instantly or in place; pt-osc;
    copy: the server's, holding the table's writes; rows: an UPDATE of a fill or a rename's
    copy) and since when (epoch seconds)."""

    statement: str
    how: str
    started: float


def is_dml(statement: str) -> bool:
    """A row change (which commits with the journal's progress), also under a `SET STATEMENT
    ... FOR` prefix (`Rules.lenient_prefix`)."""
    head = statement.lstrip()
    if head[:13].upper() == "SET STATEMENT":
        found = re.search(r"\bFOR\s+", head, re.IGNORECASE)
        head = head[found.end() :] if found else head
    return head[:6].upper() in ("UPDATE", "DELETE", "INSERT")


class StatementRunner:
    def __init__(self, target: str, coordinator: Coordinator, meta: Meta, connection: dict, copy_mode: str):
        """`copy_mode` (options.copy_ddl): how an ALTER needing a copy of the table runs
        (replicator/apply/downstream_alter.py)."""
        self.target = target
        self.coordinator = coordinator
        self.meta = meta
        self.connection = connection
        self.copy_mode = copy_mode
        self.running: RunningDDL | None = None  # the downstream ALTER running now (query-status)

    def run(self, conn, statement: str, seq: int, index: int, last: bool) -> None:
        progress = self.meta.journal.sql_progress(self.target, seq, index, last)
        with conn.cursor() as cur:
            shown = " ".join(statement.split())[:200]
            if is_dml(statement) and (limit := batch_size(statement)) is not None:
                # a shard's TRUNCATE: batches, each committed, the last with the progress
                self.running = RunningDDL(statement, "rows", time.time())
                started = time.perf_counter()
                rows = run_batches(cur, statement, limit, lambda: cur.execute(progress))
                seconds = time.perf_counter() - started
                log.info("%s: %s deleted %d rows in %.2f s", self.target, shown, rows, seconds)
                return
            if is_dml(statement):
                # data moves (the rename's copy) commit with their progress
                self.running = RunningDDL(statement, "rows", time.time())
                started = time.perf_counter()
                cur.execute("START TRANSACTION")
                rows = cur.execute(statement)
                cur.execute(progress)
                crash_point("ddl_copy_written")
                cur.execute("COMMIT")
                seconds = time.perf_counter() - started
                log.info("%s: %s changed %d rows in %.2f s", self.target, shown, rows, seconds)
                return
            self.running = RunningDDL(statement, "online", time.time())
            ran = run_alter(
                conn,
                statement,
                self.coordinator.flavor,
                self.copy_mode,
                self.connection,
                self.target,
                on_copy=self._running_as,
            )
            log.info("%s: %s ran %s in %.2f s", self.target, shown, ran.how, ran.seconds)
            crash_point("ddl_statement_ran")
            if faults_armed() and " DROP COLUMN " in statement.upper() and fault_point("drop_refused_after"):
                # (tests: an entry the downstream refuses after it changed the table)
                raise pymysql.err.InternalError(1105, "a fault the test injected")
            if faults_armed() and not last and fault_point("lost_between_statements"):
                # (tests: an entry's connection lost after a statement of it ran, before the next)
                raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server (a fault injected)")
            cur.execute(progress)

    def _running_as(self, how: str) -> None:
        running = self.running
        if running is not None:
            self.running = RunningDDL(running.statement, how, running.started)
