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
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import reduce

import pymysql

from lattice import (
    Family,
    Flavor,
    Index,
    IndexKind,
    Table,
    materialize,
    parse_table,
    quote_identifier,
    quote_string,
    render_index,
    render_table,
)
from replicator.apply.meta import Meta
from replicator.config import TaskConfig
from replicator.schema.inspect import not_the_join, read_table, table_exists
from replicator.servers import connect_downstream
from replicator.shard_id import ShardId
from replicator.source.positions import position_text
from replicator.source.routing import Router
from replicator.spark.session import jdbc_properties, jdbc_url
from replicator.spark.shards import (
    Group,
    JobError,
    Shard,
    SourceSnapshot,
    connect_source,
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

log = logging.getLogger(__name__)

POLICIES = ("fail", "keep-first", "keep-latest")
SPLIT = "__split"  # the first key column, which each read's range is on
ROW_KEY = "__key"  # the row's primary key as text, to drop the rows a merge policy loses
RANK = "__rank"
LATEST = "__latest"
REPORTED_COLLISIONS = 20
ROWS_PER_SPLIT = 200_000
WRITE_BATCH = 10_000


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


@dataclass
class ShardResult:
    shard: ShardId
    rows: int
    seconds: float
    dropped: int = 0  # rows that lost a key collision under the merge policy


@dataclass
class TableResult:
    target: str
    created: bool
    seconds: float = 0.0
    shards: list[ShardResult] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.shards)


@dataclass
class BackfillReport:
    tables: list[TableResult]
    positions: dict[str, tuple[str, str]]  # source -> (P0, P1)
    ddl_during: list[str]  # what changed during the backfill, and what to do

    def data(self) -> dict:
        """As JSON: `backfill --json`'s report, the log line of task_mode all."""
        return {
            "tables": [
                {
                    "target": t.target,
                    "rows": t.rows,
                    "seconds": round(t.seconds, 1),
                    "shards": [
                        {"shard": str(s.shard), "rows": s.rows, "dropped": s.dropped} for s in t.shards
                    ],
                }
                for t in self.tables
            ],
            "positions": self.positions,
            "ddl_during": self.ddl_during,
        }


class Listener:
    """What the command line shows while the job runs."""

    def table_started(self, target: str, estimated_rows: int) -> None: ...

    def table_progress(self, target: str, rows: int) -> None: ...

    def table_done(self, target: str, rows: int) -> None: ...


@dataclass
class _Plan:
    group: Group
    target: Table  # materialized: what the downstream table is
    create: str | None  # CREATE TABLE, when the backfill makes the table
    deferred: tuple[Index, ...]  # secondary indexes added after the rows (faster)
    projections: dict[str, Projection]
    splits: dict[str, tuple[str, ...]]
    estimates: dict[str, int]
    checked_keys: tuple[Index, ...]


def backfill(
    config: TaskConfig,
    spark,
    *,
    tables: Iterable[str] | None = None,
    policy: MergePolicy = MergePolicy(),
    truncate: bool = False,
    rows_per_split: int = ROWS_PER_SPLIT,
    listener: Listener | None = None,
) -> BackfillReport:
    listener = listener or Listener()
    router = Router.from_config(config)
    flavor = Flavor.parse(config.target.flavor)
    down = config.target.connection_kwargs()
    meta = Meta(lambda: _connect_down(down), config.target.meta_schema, config.task)
    try:
        meta.ensure()
        if meta.task_state() is not None:
            raise JobError(
                f"task {config.task} has already streamed (shardmerge run); a backfill now would rewind it. "
                f"Give the task a new name, or drop its rows from {config.target.meta_schema}"
            )
        previous = meta.load_backfill()
        starts = [snapshot(source, router) for source in config.sources]
        plans = [
            _prepare(group, flavor, down, policy, truncate, rows_per_split)
            for group in groups(config, router, starts, tables)
        ]
        # before anything is written: a collision under `fail` leaves the downstream as it was
        losers = {p.group.target: _collisions(spark, p, policy) if p.checked_keys else {} for p in plans}
        meta.execute(
            [
                meta.sql_backfill(s.source.id, "running", p0_gtid=s.gtid, tables=_targets(plans))
                for s in starts
            ]
        )
        results: list[TableResult] = []
        try:
            for plan in plans:
                results.append(_run_plan(spark, plan, down, losers[plan.group.target], listener))
        except Exception as exc:
            raise _failure(meta, config, plans, starts, down, exc) from exc
        ends = [snapshot(source, router) for source in config.sources]
        meta.execute(_handoff(meta, starts, ends, previous, _targets(plans)))
    finally:
        meta.close()
    positions = {
        s.source.id: (position_text(s.position, s.gtid), position_text(e.position, e.gtid))
        for s, e in zip(starts, ends, strict=True)
    }
    return BackfillReport(results, positions, _ddl_during(plans, starts, ends))


def _connect_down(down: dict) -> pymysql.connections.Connection:
    try:
        return connect_downstream(down)
    except pymysql.err.MySQLError as exc:
        raise JobError(f"downstream {down['host']}:{down['port']} is unreachable: {exc}") from exc


def _targets(plans: list[_Plan]) -> list[str]:
    return [p.group.target for p in plans]


# -- planning -------------------------------------------------------------------------------
def _prepare(
    group: Group, flavor: Flavor, down: dict, policy: MergePolicy, truncate: bool, rows_per_split: int
) -> _Plan:
    target = materialize(group.joined, flavor)
    if policy.column is not None and target.column(policy.column) is None:
        raise JobError(
            f"{group.target}: keep-latest column {policy.column} is not a column of the joined table"
        )
    projections, splits, estimates = {}, {}, {}
    for shard in group.shards:
        require_primary_key(shard)
        try:
            projections[shard.id] = project(shard.id, shard.model, target, group.extraction, flavor.value)
        except ProjectionError as exc:
            raise JobError(f"{group.target}: {exc}") from exc
        with connect_source(shard.source) as conn, conn.cursor() as cur:
            planned = plan_splits(cur, shard, rows_per_split, on=SPLIT)
        splits[shard.id], estimates[shard.id] = planned.predicates, planned.estimated_rows
    create, deferred = _downstream_table(group, target, flavor, down, truncate)
    checked = tuple(
        ix for ix in unique_keys(target) if _may_collide(ix, group) and not _ranges_apart(ix, group)
    )
    return _Plan(group, target, create, deferred, projections, splits, estimates, checked)


def _downstream_table(
    group: Group, target: Table, flavor: Flavor, down: dict, truncate: bool
) -> tuple[str | None, tuple[Index, ...]]:
    schema, table = group.target.split(".", 1)
    with _connect_down(down) as conn, conn.cursor() as cur:
        if not table_exists(conn, schema, table):
            deferred = tuple(
                ix for ix in target.indexes if ix.kind not in (IndexKind.PRIMARY, IndexKind.UNIQUE)
            )
            bare = target.evolve(indexes=tuple(ix for ix in target.indexes if ix not in deferred))
            return render_table(bare, flavor, name=group.target), deferred
        problem = not_the_join(group.target, read_table(conn, schema, table), target, flavor)
        if problem is not None:
            raise JobError(problem)
        cur.execute(f"SELECT 1 FROM {group.quoted} LIMIT 1")
        if cur.fetchone() is not None and not truncate:
            raise JobError(f"downstream table {group.target} is not empty; pass --truncate to empty it first")
    return None, ()


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


def _ranges_apart(index: Index, group: Group) -> bool:
    """Whether the key's first column holds integers in ranges that no two shards
    share, while each shard is unique on the key: then no two rows can share a value
    of it, and the Spark job that compares every key (most of a backfill's time where
    shards took their ids from ranges, or offsets far apart) is not needed. Two index
    lookups per shard. (Rows a shard writes after this read are no more checked than
    after the full comparison: the binlog's replay in safe mode takes them.)"""
    first = index.parts[0].column
    columns = {p.column.lower() for p in index.parts}
    ranges = []
    for shard in group.shards:
        column = shard.model.column(first)
        if column is None or column.key in group.fixed(shard) or column.type.family != Family.INTEGER:
            return False
        if not _unique_within(shard, columns):
            return False
        with connect_source(shard.source) as conn, conn.cursor() as cur:
            name = quote_identifier(column.name)
            cur.execute(f"SELECT MIN({name}), MAX({name}) FROM {shard.quoted}")
            low, high = cur.fetchone()
        if low is not None:
            ranges.append((int(low), int(high)))
    ranges.sort()
    return all(a[1] < b[0] for a, b in itertools.pairwise(ranges))


# -- running ----------------------------------------------------------------------------------
def _run_plan(
    spark, plan: _Plan, down: dict, losers: dict[ShardId, set[str]], listener: Listener
) -> TableResult:
    group = plan.group
    result = TableResult(group.target, created=plan.create is not None)
    started = time.perf_counter()
    if plan.create is not None:
        schema = group.target.split(".", 1)[0]
        with _connect_down(down) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {quote_identifier(schema)}")
            cur.execute(plan.create)
    else:
        with _connect_down(down) as conn, conn.cursor() as cur:
            cur.execute(f"TRUNCATE TABLE {group.quoted}")
    listener.table_started(group.target, sum(plan.estimates.values()))
    watcher = _Watcher(spark, plan, lambda rows: listener.table_progress(group.target, rows))
    watcher.start()
    try:
        with ThreadPoolExecutor(max_workers=len(group.shards), thread_name_prefix="backfill") as pool:
            futures = [
                pool.submit(_write_shard, spark, plan, shard, down, losers.get(shard.id, set()))
                for shard in group.shards
            ]
            try:
                result.shards = [f.result() for f in futures]
            except BaseException:
                for shard in group.shards:
                    spark.sparkContext.cancelJobGroup(_job_group(group.target, shard.id))
                raise
    finally:
        watcher.stop()
    if plan.deferred:
        with _connect_down(down) as conn, conn.cursor() as cur:
            cur.execute(
                f"ALTER TABLE {group.quoted} " + ", ".join(f"ADD {render_index(ix)}" for ix in plan.deferred)
            )
    result.seconds = time.perf_counter() - started
    listener.table_done(result.target, result.rows)
    return result


def _job_group(target: str, shard: ShardId) -> str:
    return f"backfill {target} {shard}"


def _read(spark, shard: Shard, select: list[str], predicates: tuple[str, ...]):
    """One DataFrame over all of a shard's splits. The split column is exposed by
    the subquery and the ranges pushed into it by the server's optimizer."""
    key = require_primary_key(shard)[0]
    query = f"(SELECT {', '.join(select)}, {quote_identifier(key)} AS {SPLIT} FROM {shard.quoted}) q"
    props = jdbc_properties(shard.source.connection_kwargs()) | {"fetchsize": "10000"}
    url = jdbc_url(shard.source.host, shard.source.port)
    return spark.read.jdbc(url, query, predicates=list(predicates), properties=props).drop(SPLIT)


def _spark_type(kind: str):
    from pyspark.sql import types as T

    return {
        FLOAT: T.FloatType(),
        DOUBLE: T.DoubleType(),
        BYTES: T.BinaryType(),
        BIT: T.DecimalType(20, 0),
    }.get(kind, T.StringType())


def _write_shard(spark, plan: _Plan, shard: Shard, down: dict, losers: set[str]) -> ShardResult:
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    spark.sparkContext.setJobGroup(_job_group(plan.group.target, shard.id), f"backfill of {shard.id}")
    started = time.perf_counter()
    projection = plan.projections[shard.id]
    select = list(projection.select)
    if losers:
        select.append(f"{_primary_key_text(plan, shard)} AS {ROW_KEY}")
    df = _read(spark, shard, select, plan.splits[shard.id])
    df = df.select(
        [
            F.col(quote_identifier(c)).cast(_spark_type(k))
            for c, k in zip(projection.columns, projection.kinds, strict=True)
        ]
        + ([F.col(ROW_KEY)] if losers else [])
    )
    if losers:
        df = df.where(~F.col(ROW_KEY).isin(list(losers))).drop(ROW_KEY)
    observation = Observation(f"rows {shard.id}")
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
    rows = int(observation.get["rows"])
    return ShardResult(shard.id, rows, time.perf_counter() - started, dropped=len(losers))


def _primary_key_text(plan: _Plan, shard: Shard) -> str:
    pk = plan.target.primary_key or unique_keys(plan.target)[0]
    return key_text(pk, shard.model, plan.target, plan.group.fixed(shard))


# -- collisions ------------------------------------------------------------------------------
def _collisions(spark, plan: _Plan, policy: MergePolicy) -> dict[ShardId, set[str]]:
    """Rows that share a key of the target. Under `fail` a report of them is
    raised; otherwise, per shard, the primary keys (as key text) of the rows that
    lose: all but the first shard's (keep-first) or the greatest value's (keep-latest)."""
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
        df = _read(spark, shard, select, plan.splits[shard.id])
        frames.append(df.withColumn(RANK, F.lit(rank)).withColumn(SHARD_COLUMN, F.lit(str(shard.id))))
    keys = reduce(lambda a, b: a.unionByName(b), frames).cache()
    try:
        if policy.name == "fail":
            _raise_collisions(group, plan, keys, names)
            return {}
        order = [F.col(RANK).asc()]
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


def _raise_collisions(group: Group, plan: _Plan, keys, names: list[str]) -> None:
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
            f"nothing was written. First ones:\n" + "\n".join(lines[:REPORTED_COLLISIONS]) + "\n"
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


class _Watcher:
    """Rows done of a table, from the tasks Spark has finished (each split is one
    task; a split's rows are estimated as the shard's estimate over its splits)."""

    def __init__(self, spark, plan: _Plan, report: Callable[[int], None]):
        self.tracker = spark.sparkContext.statusTracker()
        self.plan = plan
        self.report = report
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="backfill-progress", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()

    def _loop(self) -> None:
        while not self.stopping.wait(0.5):
            self.report(self.rows())

    def rows(self) -> int:
        done = 0
        for shard in self.plan.group.shards:
            per_split = self.plan.estimates[shard.id] / max(1, len(self.plan.splits[shard.id]))
            for job in self.tracker.getJobIdsForGroup(_job_group(self.plan.group.target, shard.id)):
                info = self.tracker.getJobInfo(job)
                for stage in info.stageIds if info else ():
                    stage_info = self.tracker.getStageInfo(stage)
                    if stage_info is not None:
                        done += int(stage_info.numCompletedTasks * per_split)
        return done


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
        if earlier is not None and earlier.state == "done" and earlier.p0 is not None:
            if earlier.p0 < p0:
                p0, gtid = earlier.p0, earlier.p0_gtid
            if earlier.p1 is not None and p1 < earlier.p1:
                p1 = earlier.p1
        bound = start.position.change(-1)
        history = meta.sql_history(source, bound, dict(start.schemas))
        if history:
            statements.append(history)
        statements.append(meta.sql_watermark(source, p0, p0.change(0), gtid=gtid))
        statements.append(
            meta.sql_backfill(source, "done", p0, p1, p0_gtid=gtid, p1_gtid=end.gtid, tables=targets)
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
        meta.execute([meta.sql_backfill(s.source.id, "failed", message=message) for s in starts])
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
