"""The backfill: every routed shard's rows, projected onto its group's joined schema,
written in bulk into the downstream table, with the handoff to the binlog stream.

Handoff: each source's binlog position is taken before any row is read (P0) and
again when all are written (P1). The backfill records P0 as the source's
watermark, with the schemas there, so `shardmerge run` starts reading at P0; and
records P1, so the daemon applies the changes before it in safe mode (a row they
touch may have been copied already, or not). A table whose schema differs at P1
from P0 had a DDL during the backfill: reported, with what to do.

Nothing is written until every group is planned: the joins, the projections, the
keys of the shards, the downstream tables. A failure after that marks the backfill
failed in the meta schema (the daemon then refuses to start) and says how many rows
each table holds.

Resumable: each shard's rows are copied in chunks (replicator/state/chunks.py), one
Spark job and one downstream transaction each, and a chunk is recorded finished in
the meta schema once its rows are committed. A run killed in the middle (SIGKILL,
Ctrl-C: not a failure) leaves the backfill `running`; the next run with the same
plan continues it: it keeps the first run's P0 (every row copied since was read
after it, and the stream replays from there in safe mode), deletes downstream the
rows of the chunks not recorded (one may have committed just before the kill) and
copies those again. Spark's JDBC writer commits in a transaction of its own, so the
record cannot join it: hence the delete, which needs each shard's rows told apart
downstream (extract columns); a table whose rows are not, or whose merge policy
now drops other rows than the finished chunks did, is copied again from scratch.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import re
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from functools import reduce

import pymysql

from lattice import (
    Family,
    Flavor,
    Index,
    IndexKind,
    IndexPart,
    Table,
    materialize,
    parse_table,
    quote_identifier,
    quote_string,
    render_index,
    render_table,
)
from replicator.apply import schema_history
from replicator.apply.inspect import not_the_join, read_table, table_exists
from replicator.apply.meta import Meta
from replicator.compare import origin_filter
from replicator.config import ROWS_PER_SPLIT, TaskConfig
from replicator.servers import connect_downstream
from replicator.shard_id import ShardId
from replicator.source.routing import Router
from replicator.spark.session import jdbc_properties, jdbc_url
from replicator.spark.shards import (
    Group,
    JobError,
    Shard,
    SourceSnapshot,
    connect_source,
    estimate_rows,
    groups,
    plan_splits,
    require_primary_key,
    snapshot,
)
from replicator.spark.sql import (
    BIT,
    BYTES,
    DOUBLE,
    FLOAT,
    SHARD_COLUMN,
    Projection,
    ProjectionError,
    key_text,
    project,
    unique_keys,
)
from replicator.state.chunks import Chunk, TablePlan, interleave, losers_digest, plan_changes, where_any
from replicator.state.positions import Position, position_text

log = logging.getLogger(__name__)

POLICIES = ("fail", "keep-first", "keep-latest")
SPLIT = "__split"  # the first key column (or the text its chunks hash), which each read's chunk is on
ROW_KEY = "__key"  # the row's primary key as text, to drop the rows a merge policy loses
RANK = "__rank"
LATEST = "__latest"
REPORTED_COLLISIONS = 20
WRITE_BATCH = 10_000
LOCK_TAKE_WAIT = 2  # seconds a backfill waits for the task's lock another just let go of
LOCK_WAIT_TIMEOUT = 31_536_000  # the server's maximum: the lock's session idles while Spark copies


class Collisions(JobError):
    """Rows of different shards with the same key, under the `fail` policy."""


@dataclass(frozen=True)
class MergePolicy:
    name: str = "fail"
    column: str | None = None  # keep-latest: the row with the greatest value wins

    def __post_init__(self) -> None:
        if self.name not in POLICIES:
            raise JobError(f"merge policy {self.name!r}: expected one of {', '.join(POLICIES)}")
        if (self.name == "keep-latest") != (self.column is not None):
            raise JobError("merge policy keep-latest needs a column (--latest-column), and only it takes one")

    def __str__(self) -> str:
        return f"{self.name} {self.column}" if self.column else self.name


@dataclass(frozen=True)
class ShardResult:
    shard: ShardId
    rows: int  # the shard's rows downstream, those an interrupted run copied included
    seconds: float  # of this run
    dropped: int = 0  # rows that lost a key collision under the merge policy
    chunks: int = 1
    resumed_chunks: int = 0  # copied by an interrupted run, not again by this one


@dataclass(frozen=True)
class TableResult:
    target: str
    created: bool
    seconds: float = 0.0
    shards: tuple[ShardResult, ...] = ()
    restarted: str | None = None  # why a resumed backfill copied this table again from scratch

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.shards)

    @property
    def chunks(self) -> int:
        return sum(s.chunks for s in self.shards)

    @property
    def resumed_chunks(self) -> int:
        return sum(s.resumed_chunks for s in self.shards)


@dataclass(frozen=True)
class BackfillReport:
    tables: tuple[TableResult, ...]
    positions: dict[str, tuple[str, str]]  # source -> (P0, P1)
    ddl_during: tuple[str, ...]  # what changed during the backfill, and what to do
    resumed: bool = False  # continued an interrupted backfill

    def data(self) -> dict:
        """As JSON: `backfill --json`'s report, the log line of task_mode all."""
        return {
            "resumed": self.resumed,
            "tables": [
                {
                    "target": t.target,
                    "rows": t.rows,
                    "seconds": round(t.seconds, 1),
                    "chunks": t.chunks,
                    "resumed_chunks": t.resumed_chunks,
                    **({"restarted": t.restarted} if t.restarted else {}),
                    "shards": [
                        {
                            "shard": str(s.shard),
                            "rows": s.rows,
                            "dropped": s.dropped,
                            "chunks": s.chunks,
                            "resumed_chunks": s.resumed_chunks,
                        }
                        for s in t.shards
                    ],
                }
                for t in self.tables
            ],
            "positions": self.positions,
            "ddl_during": list(self.ddl_during),
        }


class Listener:
    """What the command line shows while the job runs (replicator/cli/progress.py)."""

    def note(self, text: str) -> None:
        """A sentence about the job as a whole: that it continues an interrupted one."""

    def table_started(self, target: str, estimated_rows: int) -> None: ...

    def table_chunks(self, target: str, total: int, done: int = 0, rows_done: int = 0) -> None:
        """The table's chunks, and those (with their rows) an interrupted run copied."""

    def table_progress(self, target: str, rows: int, chunks_done: int | None = None) -> None: ...

    def table_done(self, target: str, rows: int) -> None: ...


@dataclass(frozen=True)
class _Plan:
    group: Group
    target: Table  # materialized: what the downstream table is
    identity: TablePlan | None  # what a resumed run must find the same (None: a resync's)
    create: str | None  # CREATE TABLE, when the backfill makes the table
    deferred: tuple[Index, ...]  # secondary indexes added after the rows (faster)
    projections: dict[ShardId, Projection]
    chunks: dict[ShardId, tuple[Chunk, ...]]  # those finished (by an interrupted run) with their rows
    estimates: dict[ShardId, int]
    checked_keys: tuple[Index, ...]
    origins: dict[ShardId, str] | None  # each shard's rows downstream; None: not told apart
    truncate: bool = False  # empty the table before writing
    clear_pending: bool = False  # delete the rows of the unfinished chunks first (a resumed run)
    restarted: str | None = None


@dataclass(frozen=True)
class _Interrupted:
    """What the meta schema holds of a backfill that neither finished nor failed."""

    starts: dict[str, tuple[Position, str | None, dict[str, str]]]
    tables: dict[str, TablePlan]
    chunks: dict[str, dict[ShardId, tuple[Chunk, ...]]]

    @property
    def done(self) -> int:
        return sum(c.finished for shards in self.chunks.values() for cs in shards.values() for c in cs)

    @property
    def total(self) -> int:
        return sum(len(cs) for shards in self.chunks.values() for cs in shards.values())


def backfill(
    config: TaskConfig,
    spark,
    *,
    tables: Iterable[str] | None = None,
    policy: MergePolicy = MergePolicy(),
    truncate: bool = False,
    restart: bool = False,
    rows_per_split: int = ROWS_PER_SPLIT,
    listener: Listener | None = None,
) -> BackfillReport:
    """Copy the shards of every group (or of `tables`). An interrupted backfill of the
    task with the same plan is continued (its chunks, P0 and merge decisions kept);
    with another plan it is refused, unless `restart` (which starts over, emptying
    the tables). `truncate` empties tables that hold rows before a new backfill."""
    listener = listener or Listener()
    down = config.target.connection_kwargs()
    meta = Meta(lambda: _connect_down(down), config.target.meta_schema, config.task)
    try:
        meta.ensure()
        if meta.task_state.load() is not None:
            raise JobError(
                f"task {config.task} has already streamed (shardmerge run); a backfill now would rewind it. "
                f"Give the task a new name, or drop its rows from {config.target.meta_schema}"
            )
        with backfill_lock(down, config):
            previous = meta.backfill.load()
            interrupted = None if restart else _interrupted(meta, previous)
            router = Router.from_config(config)
            starts, plans = _plan(
                config, router, interrupted, tables, policy, truncate or restart, rows_per_split
            )
            # before anything is written: a collision under `fail` leaves the downstream as it was
            losers = {
                p.group.target: _collisions(spark, p, policy, interrupted is not None)
                if p.checked_keys
                else {}
                for p in plans
            }
            plans = [
                replace(p, identity=replace(p.identity, losers=losers_digest(losers[p.group.target])))
                for p in plans
            ]
            if interrupted is None:
                for plan in plans:
                    _make_ready(plan, down)
                meta.execute(_record_plan(meta, starts, plans))
            else:
                listener.note(
                    f"continuing the interrupted backfill of task {config.task}: {interrupted.done} of "
                    f"{interrupted.total} chunks were copied; the stream will start where it began ("
                    + ", ".join(f"{s.source.id} at {position_text(s.position, s.gtid)}" for s in starts)
                    + ")"
                )
                plans = [
                    _continue(p, interrupted.tables[p.group.target], meta, down, listener) for p in plans
                ]
            results: list[TableResult] = []
            try:
                for plan in plans:
                    results.append(_run_plan(spark, plan, down, meta, losers[plan.group.target], listener))
            except Exception as exc:
                raise _failure(meta, config, plans, starts, down, exc) from exc
            ends = [snapshot(source, router) for source in config.sources]
            # the handoff, and the plan forgotten: nothing is left to continue
            meta.execute(
                _handoff(meta, starts, ends, previous, _targets(plans)) + meta.backfill.sql_forget_plan()
            )
    finally:
        meta.close()
    positions = {
        s.source.id: (position_text(s.position, s.gtid), position_text(e.position, e.gtid))
        for s, e in zip(starts, ends, strict=True)
    }
    resumed = interrupted is not None
    return BackfillReport(tuple(results), positions, tuple(_ddl_during(plans, starts, ends)), resumed)


def _plan(
    config: TaskConfig,
    router: Router,
    interrupted: _Interrupted | None,
    tables: Iterable[str] | None,
    policy: MergePolicy,
    truncate: bool,
    rows_per_split: int,
) -> tuple[list[SourceSnapshot], list[_Plan]]:
    """Where each source's binlog is (P0: now, or where the interrupted backfill
    began) and each table's plan."""
    flavor = Flavor.parse(config.target.flavor)
    down = config.target.connection_kwargs()
    now = [snapshot(source, router) for source in config.sources]
    found = groups(config, router, now, tables)
    if interrupted is None:
        return now, [_prepare(g, flavor, down, policy, truncate, rows_per_split) for g in found]
    starts = _resumable(config, interrupted, {g.target: _identity(g, flavor, policy) for g in found})
    recorded = interrupted.chunks
    return starts, [_prepare(g, flavor, down, policy, truncate, 0, recorded.get(g.target, {})) for g in found]


def _connect_down(down: dict) -> pymysql.connections.Connection:
    try:
        return connect_downstream(down)
    except pymysql.err.MySQLError as exc:
        raise JobError(f"downstream {down['host']}:{down['port']} is unreachable: {exc}") from exc


def _targets(plans: list[_Plan]) -> list[str]:
    return [p.group.target for p in plans]


@contextmanager
def backfill_lock(down: dict, config: TaskConfig):
    """Holds a server lock, on the downstream, while the backfill runs: a second one of
    the task would otherwise take the first's progress for an interrupted run's. The
    lock dies with its session, so a killed backfill's is free at once."""
    name = (
        "shardmerge-backfill-"
        + hashlib.sha1(f"{config.target.meta_schema}/{config.task}".encode()).hexdigest()
    )
    conn = _connect_down(down)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION wait_timeout = {LOCK_WAIT_TIMEOUT}")
            # (a wait of a moment: the session of a backfill that just ended or was killed
            # frees its lock only once the server has ended it, after the client is gone;
            # make test: the run after an interrupted one found it still held)
            cur.execute(f"SELECT GET_LOCK(%s, {LOCK_TAKE_WAIT}), IS_USED_LOCK(%s)", (name, name))
            taken, holder = cur.fetchone()
        if taken != 1:
            raise JobError(
                f"a backfill of task {config.task} is running now (downstream connection {holder} holds its "
                f"lock); wait for it to end, or stop it first"
            )
        try:
            yield
        finally:
            with suppress(pymysql.err.MySQLError), conn.cursor() as cur:
                cur.execute("DO RELEASE_LOCK(%s)", (name,))  # (at once, not when the server ends the session)
    finally:
        conn.close()


# -- resuming -------------------------------------------------------------------------------
def _interrupted(meta: Meta, previous: dict) -> _Interrupted | None:
    """The backfill the meta schema says is running, which the lock says no process
    runs: killed. (A failed one starts over: its message says how.)"""
    if not previous or any(r.state != "running" for r in previous.values()):
        return None
    tables = meta.backfill.load_tables()
    if not tables:
        return None  # killed before its plan was recorded (or by a version without chunks)
    return _Interrupted(meta.backfill.load_starts(), tables, meta.backfill.load_chunks())


def _identity(group: Group, flavor: Flavor, policy: MergePolicy) -> TablePlan:
    shards = tuple((str(s.id), render_table(s.model)) for s in group.shards)
    return TablePlan(group.target, shards, render_table(materialize(group.joined, flavor)), str(policy))


def _resumable(
    config: TaskConfig, interrupted: _Interrupted, now: dict[str, TablePlan]
) -> list[SourceSnapshot]:
    """The snapshots the interrupted backfill began at, if this run may continue it;
    else an error saying why not and what to do."""
    problems = plan_changes(interrupted.tables, now)
    sources = [s.id for s in config.sources]
    if set(sources) != set(interrupted.starts):
        problems.append(
            f"its sources were {', '.join(sorted(interrupted.starts))}, "
            f"the config's are {', '.join(sorted(sources))}"
        )
    starts = []
    for source in config.sources:
        if source.id not in interrupted.starts:
            continue
        position, gtid, schemas = interrupted.starts[source.id]
        with connect_source(source) as conn, conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            files = {row[0] for row in cur.fetchall()}
        if position.file not in files:
            problems.append(
                f"source {source.id} no longer has the binlog {position.file} where it began (P0): "
                "the stream could not bring the copied rows up to date"
            )
        starts.append(SourceSnapshot(source, position, gtid, schemas))
    if problems:
        # a table of another schema than the join now is not emptied but refused: it must go
        stale = [
            t
            for t, plan in now.items()
            if t in interrupted.tables and interrupted.tables[t].joined != plan.joined
        ]
        drop = f"; drop {', '.join(stale)} first: the join's schema changed" if stale else ""
        raise JobError(
            f"an interrupted backfill of task {config.task} cannot be continued:\n"
            + "\n".join(f"- {p}" for p in problems)
            + "\nRun it with the config (and --tables, --merge) it had, or start over with "
            f"`shardmerge backfill --restart` (which empties the tables it copies{drop})."
        )
    return starts


def _continue(plan: _Plan, recorded: TablePlan, meta: Meta, down: dict, listener: Listener) -> _Plan:
    """How a resumed run copies a table: the unfinished chunks, their rows deleted
    first; or all of them again, when the finished ones cannot be kept."""
    target = plan.group.target
    finished = any(c.finished for cs in plan.chunks.values() for c in cs)
    pending = not all(c.finished for cs in plan.chunks.values() for c in cs)
    if plan.create is not None:
        reason = "the downstream table is gone"
    elif recorded.losers != plan.identity.losers:
        reason = f"the rows the merge policy ({recorded.policy}) drops are not those it dropped before"
    elif plan.origins is None and pending:
        reason = (
            "its rows do not say which shard they come from (no extract columns), so an unfinished "
            "chunk's rows cannot be deleted alone"
        )
    else:
        return replace(plan, clear_pending=True)
    plan = replace(
        plan,
        chunks={s: tuple(c.pending() for c in cs) for s, cs in plan.chunks.items()},
        truncate=plan.create is None,
        restarted=reason if finished else None,
    )
    # the chunks first: killed before the table is emptied, the next run empties it again
    meta.execute([meta.backfill.sql_chunks_pending(target), meta.backfill.sql_table(plan.identity)])
    _make_ready(plan, down)
    if finished:
        listener.note(f"{target}: copied again from scratch: {reason}")
    return plan


def _record_plan(meta: Meta, starts: list[SourceSnapshot], plans: list[_Plan]) -> list[str]:
    """A new backfill's plan, in one transaction: each source's P0 and schemas there,
    each table's plan and chunks; an earlier one's forgotten."""
    statements = meta.backfill.sql_forget_plan()
    for start in starts:
        statements.append(meta.backfill.sql_start(start.source.id, start.position, start.gtid, start.schemas))
        statements.append(meta.backfill.sql(start.source.id, "running", tables=_targets(plans)))
    for plan in plans:
        statements.append(meta.backfill.sql_table(plan.identity))
        for shard in plan.group.shards:
            statements.append(meta.backfill.sql_chunks(plan.group.target, shard.id, plan.chunks[shard.id]))
    return statements


# -- planning -------------------------------------------------------------------------------
def _prepare(
    group: Group,
    flavor: Flavor,
    down: dict,
    policy: MergePolicy,
    truncate: bool,
    rows_per_split: int,
    recorded: dict[ShardId, tuple[Chunk, ...]] | None = None,
) -> _Plan:
    """The table's plan; continuing an interrupted backfill (`recorded`: its chunks),
    with the chunks it planned: their ranges cover every row whatever came since."""
    target = materialize(group.joined, flavor)
    if policy.column is not None and target.column(policy.column) is None:
        raise JobError(
            f"{group.target}: keep-latest column {policy.column} is not a column of the joined table"
        )
    projections, chunks, estimates = {}, {}, {}
    colliding = [ix for ix in unique_keys(target) if _may_collide(ix, group)]
    ranges: dict[str, list[tuple[int, int] | None]] = {ix.name: [] for ix in colliding}
    for shard in group.shards:
        require_primary_key(shard)
        try:
            projections[shard.id] = project(shard.id, shard.model, target, group.extraction, flavor.value)
        except ProjectionError as exc:
            raise JobError(f"{group.target}: {exc}") from exc
        with connect_source(shard.source) as conn, conn.cursor() as cur:
            if recorded is None:
                planned = plan_splits(cur, shard, rows_per_split)
                chunks[shard.id], estimates[shard.id] = planned.chunks, planned.estimated_rows
            else:
                chunks[shard.id], estimates[shard.id] = recorded[shard.id], estimate_rows(cur, shard)
            for ix in colliding:  # (on the connection the shard is planned on)
                ranges[ix.name].append(_key_range(cur, ix, group, shard))
    create, deferred, holds_rows = _downstream_table(
        group, target, flavor, down, truncate, recorded is not None
    )
    checked = tuple(ix for ix in colliding if not _ranges_apart(ranges[ix.name]))
    return _Plan(
        group,
        target,
        _identity(group, flavor, policy),
        create,
        deferred,
        projections,
        chunks,
        estimates,
        checked,
        _origins(group, target),
        truncate=holds_rows,
    )


def _downstream_table(
    group: Group, target: Table, flavor: Flavor, down: dict, truncate: bool, resuming: bool
) -> tuple[str | None, tuple[Index, ...], bool]:
    """The CREATE TABLE when the table is missing, the secondary indexes to add after
    the rows, and whether the table holds rows to empty first. A table without some
    secondary indexes of the join is one a backfill made and has not finished."""
    schema, table = group.target.split(".", 1)
    with _connect_down(down) as conn, conn.cursor() as cur:
        if not table_exists(conn, schema, table):
            deferred = tuple(
                ix for ix in target.indexes if ix.kind not in (IndexKind.PRIMARY, IndexKind.UNIQUE)
            )
            bare = target.evolve(indexes=tuple(ix for ix in target.indexes if ix not in deferred))
            return render_table(bare, flavor, name=group.target), deferred, False
        existing = read_table(conn, schema, table)
        missing = tuple(
            ix
            for ix in target.indexes
            if ix.kind not in (IndexKind.PRIMARY, IndexKind.UNIQUE) and ix not in existing.indexes
        )
        bare = target.evolve(indexes=tuple(ix for ix in target.indexes if ix not in missing))
        if not_the_join(group.target, existing, bare, flavor) is not None:
            raise JobError(not_the_join(group.target, existing, target, flavor))
        if resuming:
            return None, missing, False  # it holds the finished chunks' rows
        cur.execute(f"SELECT 1 FROM {group.quoted} LIMIT 1")
        holds_rows = cur.fetchone() is not None
        if holds_rows and not truncate:
            raise JobError(f"downstream table {group.target} is not empty; pass --truncate to empty it first")
    return None, missing, holds_rows


def _origins(group: Group, target: Table) -> dict[ShardId, str] | None:
    """Per shard, the condition that selects its rows downstream: by the extract
    columns, when each shard fills them with values of its own."""
    if len(group.shards) == 1:
        return {group.shards[0].id: "1=1"}
    fixed = {s.id: group.fixed(s) for s in group.shards}
    columns = {c for values in fixed.values() for c in values}
    distinct = len({tuple(sorted(v.items(), key=str)) for v in fixed.values()}) == len(group.shards)
    if not columns or not distinct or any(target.column(c) is None for c in columns):
        return None
    return {s.id: origin_filter(group.extraction, s.id) for s in group.shards}


def _may_collide(index: Index, group: Group) -> bool:
    """Whether two rows may share a value of this key in the target: not when the
    key holds extract columns that tell every shard apart and each shard has a
    unique key within the rest of it."""
    columns = {p.column.lower() for p in index.parts}
    fixed = {
        s.id: tuple(sorted((c, v) for c, v in group.fixed(s).items() if c in columns)) for s in group.shards
    }
    if len(set(fixed.values())) < len(group.shards):
        return True
    return not all(_unique_within(shard, columns - {c for c, _ in fixed[shard.id]}) for shard in group.shards)


def _unique_within(shard: Shard, columns: set[str]) -> bool:
    """Whether the shard has a primary or unique key on some of these columns (lower case)."""
    return any(
        ix.kind in (IndexKind.PRIMARY, IndexKind.UNIQUE) and {p.column.lower() for p in ix.parts} <= columns
        for ix in shard.model.indexes
    )


def _key_range(cur, index: Index, group: Group, shard: Shard) -> tuple[int, int] | None:
    """The lowest and highest value of the key's first column in the shard, where that
    column is an integer of its own and the shard is unique on the key; (1, 0) when it
    holds no rows; None where the key's values cannot be told apart by ranges."""
    column = shard.model.column(index.parts[0].column)
    if column is None or column.key in group.fixed(shard) or column.type.family != Family.INTEGER:
        return None
    if not _unique_within(shard, {p.column.lower() for p in index.parts}):
        return None
    name = quote_identifier(column.name)
    cur.execute(f"SELECT MIN({name}), MAX({name}) FROM {shard.quoted}")
    low, high = cur.fetchone()
    return (1, 0) if low is None else (int(low), int(high))


def _ranges_apart(ranges: list[tuple[int, int] | None]) -> bool:
    """Whether the shards' key ranges (`_key_range`) are known and no two share a value:
    then no two rows can share a value of the key, and the Spark job that compares every
    key (most of a backfill's time where shards took their ids from ranges, or offsets
    far apart) is not needed. (Rows a shard writes after this read are no more checked
    than after the full comparison: the binlog's replay in safe mode takes them.)"""
    if any(r is None for r in ranges):
        return False
    held = sorted(r for r in ranges if r is not None and r[0] <= r[1])
    return all(a[1] < b[0] for a, b in itertools.pairwise(held))


# -- running ----------------------------------------------------------------------------------
def _make_ready(plan: _Plan, down: dict) -> None:
    """The downstream table made, or emptied: before the plan is recorded (a new
    backfill) or its chunks marked unfinished (a table copied again), so that it
    holds no rows but those of finished chunks once the first chunk is copied."""
    if plan.create is None and not plan.truncate:
        return
    with _connect_down(down) as conn, conn.cursor() as cur:
        if plan.create is not None:
            cur.execute(
                f"CREATE DATABASE IF NOT EXISTS {quote_identifier(plan.group.target.split('.', 1)[0])}"
            )
            cur.execute(plan.create)
        else:
            cur.execute(f"TRUNCATE TABLE {plan.group.quoted}")


def copy_shard(
    spark,
    group: Group,
    table: Table,
    shard: Shard,
    projection: Projection,
    rows_per_split: int,
    down: dict,
    listener: Listener,
) -> TableResult:
    """One shard's rows copied into the downstream table as it is (`table`, its rows of
    the shard deleted first: a resync, replicator/spark/resync.py), in chunks as a
    backfill's, none recorded: a resync interrupted starts over."""
    with connect_source(shard.source) as conn, conn.cursor() as cur:
        planned = plan_splits(cur, shard, rows_per_split)
    plan = _Plan(
        group,
        table,
        None,
        None,
        (),
        {shard.id: projection},
        {shard.id: planned.chunks},
        {shard.id: planned.estimated_rows},
        (),
        None,
    )
    return _run_plan(spark, plan, down, None, {}, listener)


def _run_plan(
    spark, plan: _Plan, down: dict, meta: Meta | None, losers: dict[ShardId, set[str]], listener: Listener
) -> TableResult:
    """Copies the table's unfinished chunks, several at a time (one Spark job each,
    every shard's in turn), each recorded once its rows are committed (`meta` None: not
    recorded)."""
    group = plan.group
    target = group.target
    started = time.perf_counter()
    if plan.clear_pending:
        _clear_pending(plan, down)
    chunks = {shard: list(cs) for shard, cs in plan.chunks.items()}
    before = {shard: sum(c.finished for c in cs) for shard, cs in chunks.items()}
    listener.table_started(target, sum(plan.estimates.values()))
    pending = interleave([[(s, c) for c in chunks[s.id] if not c.finished] for s in group.shards])
    spans: dict[ShardId, tuple[float, float]] = {}
    done_chunks = sum(before.values())
    done_rows = sum(c.rows or 0 for cs in chunks.values() for c in cs)
    listener.table_chunks(target, sum(len(cs) for cs in chunks.values()), done_chunks, done_rows)
    stop = threading.Event()

    def copy(shard: Shard, chunk: Chunk) -> tuple[Shard, Chunk, float, float]:
        if stop.is_set():
            raise _Stopped
        began = time.perf_counter()
        rows = _write_chunk(spark, plan, shard, chunk, down, losers.get(shard.id, set()))
        if meta is not None:
            meta.execute([meta.backfill.sql_chunk_done(target, shard.id, chunk.index, rows)])
        return shard, chunk.done(rows), began, time.perf_counter()

    # twice the cores: while one chunk's job runs, the next is planned (its DataFrame, its
    # JDBC metadata queries), which takes the driver about as long as copying a small chunk
    workers = max(1, min(len(pending), 2 * spark.sparkContext.defaultParallelism))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="backfill") as pool:
        futures = [pool.submit(copy, shard, chunk) for shard, chunk in pending]
        try:
            for future in as_completed(futures):
                shard, chunk, began, ended = future.result()
                chunks[shard.id][chunk.index] = chunk
                first, _ = spans.get(shard.id, (began, ended))
                spans[shard.id] = (min(first, began), ended)
                done_chunks, done_rows = done_chunks + 1, done_rows + (chunk.rows or 0)
                listener.table_progress(target, done_rows, chunks_done=done_chunks)
        except BaseException:
            stop.set()
            for future in futures:
                future.cancel()
            for shard in group.shards:
                spark.sparkContext.cancelJobGroup(_job_group(target, shard.id))
            raise
    if plan.deferred:
        with _connect_down(down) as conn, conn.cursor() as cur:
            cur.execute(
                f"ALTER TABLE {group.quoted} " + ", ".join(f"ADD {render_index(ix)}" for ix in plan.deferred)
            )
    shards = tuple(
        ShardResult(
            shard.id,
            sum(c.rows or 0 for c in chunks[shard.id]),
            spans[shard.id][1] - spans[shard.id][0] if shard.id in spans else 0.0,
            dropped=len(losers.get(shard.id, ())),
            chunks=len(chunks[shard.id]),
            resumed_chunks=before[shard.id],
        )
        for shard in group.shards
    )
    result = TableResult(
        target, plan.create is not None, time.perf_counter() - started, shards, restarted=plan.restarted
    )
    listener.table_done(target, result.rows)
    return result


class _Stopped(Exception):
    """A chunk not begun because another failed (or the run is interrupted)."""


def _clear_pending(plan: _Plan, down: dict) -> None:
    """Deletes downstream the rows of each shard's unfinished chunks: one may have
    committed before its record was (Spark's writer and the meta schema cannot share
    a transaction), and rows are copied by INSERT."""
    with _connect_down(down) as conn, conn.cursor() as cur:
        for shard in plan.group.shards:
            pending = [c for c in plan.chunks[shard.id] if not c.finished]
            if pending:
                where = where_any(pending, _split_key(plan, shard, downstream=True))
                cur.execute(f"DELETE FROM {plan.group.quoted} WHERE {plan.origins[shard.id]} AND ({where})")


def _job_group(target: str, shard: ShardId) -> str:
    return f"backfill {target} {shard}"


def _split_key(plan: _Plan, shard: Shard, *, downstream: bool = False) -> str:
    """What the shard's chunks are on, upstream or downstream: the first key column
    for ranges; for hash buckets its canonical text (as verify compares keys), so
    that a row falls into the same bucket on both sides whatever the column's type
    or character set downstream."""
    key = require_primary_key(shard)[0]
    column = plan.target.column(key)
    if all(c.buckets is None for c in plan.chunks[shard.id]):
        return quote_identifier(column.name if downstream else key)
    index = Index("chunk", IndexKind.PRIMARY, (IndexPart(column.name),))
    if downstream:
        return key_text(index, plan.target, plan.target, {})
    return key_text(index, shard.model, plan.target, plan.group.fixed(shard))


def _read(spark, plan: _Plan, shard: Shard, select: list[str], chunks: Iterable[Chunk]):
    """One DataFrame over the shard's chunks, one partition each. The split column
    is exposed by the subquery and the chunks' ranges pushed into it by the server's
    optimizer."""
    split = _split_key(plan, shard)
    query = f"(SELECT {', '.join(select)}, {split} AS {SPLIT} FROM {shard.quoted}{shard.where}) q"
    props = jdbc_properties(shard.source.connection_kwargs()) | {"fetchsize": "10000"}
    url = jdbc_url(shard.source.host, shard.source.port)
    predicates = [c.where(SPLIT) for c in chunks]
    return spark.read.jdbc(url, query, predicates=predicates, properties=props).drop(SPLIT)


def _spark_type(kind: str) -> str:
    return {FLOAT: "FLOAT", DOUBLE: "DOUBLE", BYTES: "BINARY", BIT: "DECIMAL(20,0)"}.get(kind, "STRING")


def _write_chunk(spark, plan: _Plan, shard: Shard, chunk: Chunk, down: dict, losers: set[str]) -> int:
    """Copies one chunk: one Spark task, whose JDBC writer commits its rows in one
    transaction. Returns how many rows it wrote."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    spark.sparkContext.setJobGroup(_job_group(plan.group.target, shard.id), f"backfill of {shard.id}")
    projection = plan.projections[shard.id]
    select = list(projection.select)
    if losers:
        select.append(f"{_primary_key_text(plan, shard)} AS {ROW_KEY}")
    df = _read(spark, plan, shard, select, (chunk,))
    # one call into the JVM for all columns (a chunk's DataFrame is built anew each time)
    df = df.selectExpr(
        *(
            f"CAST({quote_identifier(c)} AS {_spark_type(k)}) AS {quote_identifier(c)}"
            for c, k in zip(projection.columns, projection.kinds, strict=True)
        ),
        *([ROW_KEY] if losers else []),
    )
    if losers:
        df = df.where(~F.col(ROW_KEY).isin(list(losers))).drop(ROW_KEY)
    observation = Observation()  # a name of its own: chunks of the session run side by side
    df = df.observe(observation, F.count(F.lit(1)).alias("rows"))
    (
        df.write.mode("append")
        .option("batchsize", WRITE_BATCH)
        .jdbc(
            jdbc_url(down["host"], down["port"], write=True),
            plan.group.quoted,
            properties=jdbc_properties(down),
        )
    )
    return int(observation.get["rows"])


def _primary_key_text(plan: _Plan, shard: Shard) -> str:
    pk = plan.target.primary_key or unique_keys(plan.target)[0]
    return key_text(pk, shard.model, plan.target, plan.group.fixed(shard))


# -- collisions ------------------------------------------------------------------------------
def _collisions(spark, plan: _Plan, policy: MergePolicy, resumed: bool = False) -> dict[ShardId, set[str]]:
    """Rows that share a key of the target. Under `fail` a report of them is
    raised; otherwise, per shard, the primary keys (as key text) of the rows that
    lose: all but the first shard's (keep-first) or the greatest value's (keep-latest).
    The same rows give the same losers (ties go to the smaller key), which is what
    lets a resumed run keep the chunks an interrupted one copied."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    group = plan.group
    names = [f"__k{i}" for i in range(len(plan.checked_keys))]
    frames = []
    for rank, shard in enumerate(group.shards):
        fixed = group.fixed(shard)
        select = [
            f"{key_text(ix, shard.model, plan.target, fixed)} AS {name}"
            for ix, name in zip(plan.checked_keys, names, strict=True)
        ]
        select.append(f"{_primary_key_text(plan, shard)} AS {ROW_KEY}")
        if policy.column is not None:
            select.append(f"{_latest(plan, shard, policy.column)} AS {LATEST}")
        df = _read(spark, plan, shard, select, plan.chunks[shard.id])
        frames.append(df.withColumn(RANK, F.lit(rank)).withColumn(SHARD_COLUMN, F.lit(str(shard.id))))
    keys = reduce(lambda a, b: a.unionByName(b), frames).cache()
    try:
        if policy.name == "fail":
            _raise_collisions(group, plan, keys, names, resumed)
            return {}
        order = [F.col(RANK).asc(), F.col(ROW_KEY).asc()]
        if policy.column is not None:
            order.insert(0, F.col(LATEST).desc_nulls_last())
        lost = None
        for name in names:
            ranked = keys.where(F.col(name).isNotNull()).withColumn(
                "__n", F.row_number().over(Window.partitionBy(name).orderBy(*order))
            )
            these = ranked.where(F.col("__n") > 1).select(SHARD_COLUMN, ROW_KEY)
            lost = these if lost is None else lost.union(these)
        losers: dict[ShardId, set[str]] = {}
        for row in lost.distinct().collect():
            losers.setdefault(ShardId.parse(row[SHARD_COLUMN]), set()).add(row[ROW_KEY])
        if losers:
            log.warning(
                "%s: %d rows lose a key collision (%s)",
                group.target,
                sum(len(v) for v in losers.values()),
                policy.name,
            )
        return losers
    finally:
        keys.unpersist()


def _latest(plan: _Plan, shard: Shard, column: str) -> str:
    target_column = plan.target.column(column)
    mine = shard.model.column(column)
    expr = quote_identifier(mine.name) if mine is not None else f"({target_column.default.sql})"
    if target_column.type.family in (Family.INTEGER, Family.DECIMAL, Family.FLOAT, Family.YEAR, Family.BIT):
        return f"CAST({expr} AS DOUBLE)"
    return f"CAST({expr} AS CHAR)"  # temporal values as text sort in time order


def _raise_collisions(group: Group, plan: _Plan, keys, names: list[str], resumed: bool) -> None:
    from pyspark.sql import functions as F

    lines, total = [], 0
    for index, name in zip(plan.checked_keys, names, strict=True):
        dup = (
            keys.where(F.col(name).isNotNull())
            .groupBy(name)
            .agg(F.count(F.lit(1)).alias("n"), F.sort_array(F.collect_list(SHARD_COLUMN)).alias("shards"))
            .where(F.col("n") > 1)
            .cache()
        )
        count = dup.count()
        total += count
        for row in dup.limit(REPORTED_COLLISIONS).collect():
            lines.append(
                f"  key {index.name} ({', '.join(p.column for p in index.parts)}) = "
                f"{_unhex(row[name])}: {', '.join(row['shards'])}"
            )
        dup.unpersist()
    if total:
        raise Collisions(
            f"{group.target}: {total} key values are held by more than one row (merge policy fail); "
            f"{'nothing more' if resumed else 'nothing'} was written. First ones:\n"
            + "\n".join(lines[:REPORTED_COLLISIONS])
            + "\n"
            "Choose --merge keep-first or --merge keep-latest --latest-column C, or fix the shards."
        )


def _unhex(text: str) -> str:
    """A key as SQL literals, `(95, 'abc')`, from its comparison text (each part is the
    hex of its canonical form): numbers as numbers, text quoted, other bytes as x'..'."""
    parts = []
    for part in text.split(":"):
        try:
            raw = bytes.fromhex(part)
        except ValueError:
            parts.append(part)
            continue
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError:
            parts.append(f"x'{part}'")
            continue
        parts.append(value if _NUMBER.fullmatch(value) else quote_string(value))
    return "(" + ", ".join(parts) + ")"


_NUMBER = re.compile(r"-?\d+(\.\d+)?")


# -- handoff --------------------------------------------------------------------------------
def _handoff(
    meta: Meta,
    starts: list[SourceSnapshot],
    ends: list[SourceSnapshot],
    previous: dict,
    targets: list[str],
) -> list[str]:
    """The stream's starting point per source: P0 (or an earlier backfill's, which
    this one must not skip past), the schemas there, and safe mode until P1."""
    statements = []
    for start, end in zip(starts, ends, strict=True):
        source = start.source.id
        earlier = previous.get(source)
        p0, p1, gtid = start.position, end.position, start.gtid
        # (p0 and p1 are written by a handoff only: the last finished backfill's, while
        # a later one runs, fails or is interrupted)
        if earlier is not None and earlier.p0 is not None:
            if earlier.p0 < p0:
                p0, gtid = earlier.p0, earlier.p0_gtid
            if earlier.p1 is not None and p1 < earlier.p1:
                p1 = earlier.p1
        bound = start.position.change(-1)
        statements += schema_history.start_rows(meta, source, bound, dict(start.schemas))
        statements.append(meta.watermarks.sql(source, p0, p0.change(0), gtid=gtid))
        statements.append(
            meta.backfill.sql(source, "done", p0, p1, p0_gtid=gtid, p1_gtid=end.gtid, tables=targets)
        )
    return statements


def _failure(
    meta: Meta,
    config: TaskConfig,
    plans: list[_Plan],
    starts: list[SourceSnapshot],
    down: dict,
    exc: Exception,
) -> JobError:
    """Records the failure (the daemon will not start on a partial backfill) and
    the error that says what is downstream now."""
    held = []
    try:
        with _connect_down(down) as conn, conn.cursor() as cur:
            for plan in plans:
                schema, table = plan.group.target.split(".", 1)
                if table_exists(conn, schema, table):
                    cur.execute(f"SELECT COUNT(*) FROM {plan.group.quoted}")
                    held.append(f"{plan.group.target} holds {cur.fetchone()[0]} rows")
    except (pymysql.err.MySQLError, JobError):
        held.append("the downstream could not be counted")
    message = _cause(exc)
    try:
        meta.execute([meta.backfill.sql(s.source.id, "failed", message=message) for s in starts])
    except pymysql.err.MySQLError:
        log.error("could not record the failed backfill in %s", config.target.meta_schema)
    return JobError(
        f"backfill of task {config.task} failed: {message}\nPartly written: {'; '.join(held) or 'nothing'}. "
        "`shardmerge run` refuses to start until a backfill succeeds: fix the cause and run "
        "`shardmerge backfill --truncate` again."
    )


def _cause(exc: Exception) -> str:
    """The innermost cause of a failure: a Spark job's error is a Java stack trace
    whose last "Caused by" names what went wrong (the server's error, say)."""
    text = str(exc)
    causes = [line.strip() for line in text.splitlines() if line.strip().startswith("Caused by: ")]
    if causes:
        return causes[-1].removeprefix("Caused by: ")[:500]
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(exc).__name__}: {first[:500]}"


def _ddl_during(plans: list[_Plan], starts: list[SourceSnapshot], ends: list[SourceSnapshot]) -> list[str]:
    before = {s.source.id: s.schemas for s in starts}
    after = {e.source.id: e.schemas for e in ends}
    notes = []
    for plan in plans:
        for shard in plan.group.shards:
            key = shard.id.table_key
            old, new = before[shard.source.id].get(key), after[shard.source.id].get(key)
            if old == new or (old is not None and new is not None and parse_table(old) == parse_table(new)):
                continue
            now = "dropped" if new is None else f"now:\n{new}"
            notes.append(
                f"shard {shard.id} changed its schema during the backfill ({now}). The stream replays the "
                f"DDL from P0, but rows read after it ran were projected onto the schema before it. Once "
                f"`shardmerge run` has passed the backfill's end, run `shardmerge verify --fix-sql FILE` "
                f"for {plan.group.target} and apply the fixes, or backfill it again (--tables "
                f"{plan.group.target} --truncate) while no DDL runs."
            )
    return notes
