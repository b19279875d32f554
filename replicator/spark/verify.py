"""Verification: the union of the shards, projected onto the joined schema, against
the downstream table.

Each side is cut into chunks on the primary key (ranges of its first column when
that is an integer, else buckets of a hash of the key); each server counts and sums
a 60-bit hash of the rows per chunk in one pushed-down GROUP BY, so only a few
numbers per chunk travel. Chunks that differ are narrowed to rows: both sides'
(key, hash) pairs of those chunks, joined in Spark, give the missing, extra and
different rows; the fix SQL is rendered from the rows themselves.

With extract columns every shard is compared with its own rows downstream, on the
columns it has. Without them the downstream rows cannot be told apart by origin, so
the union of the shards is compared on the columns all shards have.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from functools import partial, reduce

import pymysql

from lattice import Family, Flavor, Table, key, materialize, quote_identifier, quote_string
from replicator.apply.inspect import read_table, table_exists
from replicator.apply.meta import Meta
from replicator.compare import origin_filter
from replicator.config import TaskConfig
from replicator.schema.coordinator import Coordinator
from replicator.servers import connect, connect_downstream
from replicator.shard_id import ShardId
from replicator.source.routing import Router
from replicator.source.upstream import binlog_position
from replicator.spark.session import jdbc_properties, jdbc_url
from replicator.spark.shards import (
    Group,
    JobError,
    Shard,
    connect_source,
    groups,
    require_primary_key,
    snapshot,
)
from replicator.spark.sql import key_text, project, row_hash, writable
from replicator.state.coordinator_store import MetaStore
from replicator.state.positions import file_sequence

CHUNK_ROWS = 10_000
MAX_CHUNKS = 100_000


@dataclass(frozen=True)
class _Side:
    """One server's part of a slice: rows of a table (under a condition) and the
    SQL of their key text, key columns as text, and hash."""

    connection: dict  # pymysql connect kwargs of its server
    table: str  # quoted
    where: str
    key: str
    key_parts: tuple[str, ...]
    hash: str
    chunk_column: str  # quoted first key column, for integer ranges
    # each key part's column (quoted), or its fixed value where the side has it as a constant
    # (an extract column upstream): rows looked up again by key (`_recheck`)
    key_columns: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True)
class _Slice:
    name: str  # the shard, or the table for a union
    up: tuple[_Side, ...]  # one per shard, in the order of `shards`
    down: _Side
    shards: tuple[Shard, ...]
    target: Table


@dataclass
class TableDiff:
    target: str
    upstream_rows: int = 0
    downstream_rows: int = 0
    chunks: int = 0
    chunks_differing: int = 0
    # (shard, the target's primary key values as text); the shard is None for extra rows
    missing: list[tuple[ShardId, tuple]] = field(default_factory=list)
    extra: list[tuple[ShardId | None, tuple]] = field(default_factory=list)
    different: list[tuple[ShardId, tuple]] = field(default_factory=list)
    # rows the stream changed upstream in every look verify took (a hot row): not compared,
    # neither counted as differing nor fixed; verify run again looks at them again
    unsettled: list[tuple[ShardId | None, tuple]] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return not (self.missing or self.extra or self.different)


@dataclass
class VerifyReport:
    tables: list[TableDiff]
    fix_sql: list[str]

    @property
    def equal(self) -> bool:
        return all(t.equal for t in self.tables)


def verify(
    config: TaskConfig,
    spark,
    *,
    tables=None,
    chunk_rows: int = CHUNK_ROWS,
    fix: bool = False,
    listener=None,
) -> VerifyReport:
    """`listener`: told as each table starts, its rows checked as each shard's are (or
    the union's), and when it is done (a `replicator.cli.progress.Progress`)."""
    router = Router.from_config(config)
    snaps = [snapshot(source, router) for source in config.sources]
    report = VerifyReport([], [])
    stream = Stream(config)
    try:
        _verify_groups(config, spark, router, snaps, tables, chunk_rows, fix, listener, stream, report)
    finally:
        stream.close()
    return report


def _verify_groups(config, spark, router, snaps, tables, chunk_rows, fix, listener, stream, report) -> None:
    flavor = Flavor.parse(config.target.flavor)
    down = config.target.connection_kwargs()
    for group in groups(config, router, snaps, tables):
        target = _own_key_first(_downstream_table(group, down), group.extract.values())
        diff = TableDiff(group.target)
        if listener is not None:
            listener.table_started(group.target, None)
        found = []
        renames = stream.pending_renames(group.target, target)
        for piece in _slices(group, target, down, flavor, renames):
            seen = TableDiff(group.target)
            _compare(spark, piece, seen, chunk_rows)
            diff.upstream_rows += seen.upstream_rows
            diff.downstream_rows += seen.downstream_rows
            diff.chunks += seen.chunks
            diff.chunks_differing += seen.chunks_differing
            found.append((piece, seen))
            if listener is not None:
                listener.table_progress(group.target, diff.upstream_rows)
        # a row that differs may be one the stream has not applied yet: looked at again once
        # the stream has passed where each source is now, reported only if it still differs
        sources = {s.source.id: s.source for s in group.shards}
        for piece, seen in found:
            if not seen.equal:
                _recheck(piece, seen, diff, partial(stream.wait_past, sources))
        if listener is not None:
            listener.table_done(group.target, diff.upstream_rows)
        if fix and not diff.equal:
            report.fix_sql += _fix_sql(group, target, flavor, diff)
        report.tables.append(diff)


def _downstream_table(group: Group, down: dict) -> Table:
    schema, table = group.target.split(".", 1)
    try:
        with connect_downstream(down) as conn:
            if not table_exists(conn, schema, table):
                raise JobError(f"downstream table {group.target} does not exist: nothing to verify")
            return read_table(conn, schema, table)
    except pymysql.err.MySQLError as exc:
        raise JobError(f"downstream {down['host']}:{down['port']} is unreachable: {exc}") from exc


def _own_key_first(target: Table, extract: Iterable[str]) -> Table:
    """The table with its primary key's extract columns last: the shards' own key leads the
    key as verify chunks, matches and shows it (downstream the extract columns lead it, see
    ExtractColumns._keyed_apart)."""
    pk = target.primary_key
    if pk is None:
        return target
    names = {key(c) for c in extract}
    parts = sorted(pk.parts, key=lambda p: key(p.column) in names)  # (stable: each side in order)
    return replace(
        target, indexes=tuple(replace(ix, parts=tuple(parts)) if ix is pk else ix for ix in target.indexes)
    )


def _slices(
    group: Group, target: Table, down: dict, flavor: Flavor, renames: Iterable[tuple[str, str]] = ()
) -> list[_Slice]:
    """`renames`: pending column renames (old, new): downstream a row's value is under either
    name while one is pending, and the rename's last copy leaves it COALESCE(old, new) in the
    new one: compared so, as the group means it, not as a difference to undo."""
    moved = {}
    for old, new in renames:
        if target.column(old) is not None and target.column(new) is not None:
            both = f"COALESCE({quote_identifier(old)}, {quote_identifier(new)})"
            moved[key(old)] = moved[key(new)] = both
    pk = target.primary_key
    if pk is None:
        raise JobError(f"downstream table {group.target} has no primary key: rows cannot be matched")
    for shard in group.shards:
        require_primary_key(shard)
    by_origin = bool(group.extract) and all(target.column(c) is not None for c in group.extract.values())
    units = [(s,) for s in group.shards] if by_origin else [group.shards]
    slices = []
    for shards in units:
        columns = [
            c
            for c in writable(target)
            if all(s.model.column(c.name) is not None or c.key in group.fixed(s) for s in shards)
        ]
        where = origin_filter(group.extraction, shards[0].id) if by_origin else "1=1"
        ups = tuple(_upstream_side(group, target, s, columns) for s in shards)
        down_side = _Side(
            down,
            group.quoted,
            where,
            key_text(pk, target, target, {}),
            tuple(_as_text(quote_identifier(p.column), target.column(p.column)) for p in pk.parts),
            row_hash([(moved.get(c.key, quote_identifier(c.name)), c.type, True) for c in columns]),
            quote_identifier(pk.parts[0].column),
            tuple((quote_identifier(p.column), None) for p in pk.parts),
        )
        name = str(shards[0].id) if by_origin else group.target
        slices.append(_Slice(name, ups, down_side, tuple(shards), target))
    return slices


def _upstream_side(group: Group, target: Table, shard: Shard, columns) -> _Side:
    pk = target.primary_key
    fixed = group.fixed(shard)
    parts = []
    for column in columns:
        if column.key in fixed:
            parts.append((quote_string(fixed[column.key]), column.type, False))
        else:
            mine = shard.model.column(column.name)
            parts.append((quote_identifier(mine.name), column.type, mine.type == column.type))
    key_parts = []
    for p in pk.parts:
        column = target.column(p.column)
        if column.key in fixed:
            key_parts.append(f"CAST({quote_string(fixed[column.key])} AS CHAR)")
        else:
            key_parts.append(_as_text(quote_identifier(shard.model.column(column.name).name), column))
    first = target.column(pk.parts[0].column)
    chunk_column = (
        quote_string(fixed[first.key])
        if first.key in fixed
        else quote_identifier(shard.model.column(first.name).name)
    )
    key_columns = []
    for p in pk.parts:
        column = target.column(p.column)
        if column.key in fixed:
            key_columns.append(("", fixed[column.key]))
        else:
            key_columns.append((quote_identifier(shard.model.column(column.name).name), None))
    return _Side(
        shard.source.connection_kwargs(),
        shard.quoted,
        shard.keep or "1=1",  # (rows its row filters drop are not downstream)
        key_text(pk, shard.model, target, fixed),
        tuple(key_parts),
        row_hash(parts),
        chunk_column,
        tuple(key_columns),
    )


def _as_text(expr: str, column) -> str:
    if column.type.family in (Family.BINARY, Family.SPATIAL):
        return f"CONCAT('0x', HEX({expr}))"
    return f"CAST({expr} AS CHAR)"


# -- comparing ------------------------------------------------------------------------------
def _chunking(piece: _Slice, chunk_rows: int, target: Table) -> tuple[str, ...]:
    """The chunk expression of each side (the same function of the key on both)."""
    first = target.column(target.primary_key.parts[0].column)
    sides = (*piece.up, piece.down)
    shapes = [_shape(side) for side in sides]
    total = sum(count for count, _, _ in shapes)
    n = max(1, min(MAX_CHUNKS, math.ceil(total / 2 / max(1, chunk_rows))))
    if first.type.family == Family.INTEGER and all(not s.chunk_column.startswith("'") for s in piece.up):
        bounds = [int(b) for _, low, high in shapes for b in (low, high) if b is not None]
        if not bounds:
            return tuple("0" for _ in sides)
        low, high = min(bounds), max(bounds)
        width = max(1, math.ceil((high - low + 1) / n))
        return tuple(f"FLOOR(({s.chunk_column} - {low}) / {width})" for s in sides)
    return tuple(f"CRC32({s.key}) % {n}" for s in sides)


def _queries(connection: dict, queries: list[str]) -> list[list[tuple]]:
    """The rows of each query, on one connection to the server (in UTC, as the jobs)."""
    try:
        with (
            connect(connection, session=("SET SESSION time_zone = '+00:00'",)) as conn,
            conn.cursor() as cur,
        ):
            results = []
            for sql in queries:
                cur.execute(sql)
                results.append(list(cur.fetchall()))
            return results
    except pymysql.err.MySQLError as exc:
        raise JobError(f"{connection['host']}:{connection['port']}: {exc}") from exc


def _shape(side: _Side) -> tuple:
    """The side's row count and the range of its chunk column, in one scan."""
    c = side.chunk_column
    (((count, low, high),),) = _queries(
        side.connection, [f"SELECT COUNT(*), MIN({c}), MAX({c}) FROM {side.table} WHERE {side.where}"]
    )
    return int(count), low, high


def _read(spark, side: _Side, sql: str):
    props = jdbc_properties(side.connection)
    host, port = side.connection["host"], side.connection["port"]
    return spark.read.jdbc(jdbc_url(host, port), f"({sql}) q", properties=props)


def _compare(spark, piece: _Slice, diff: TableDiff, chunk_rows: int) -> None:
    from pyspark.sql import functions as F

    sides = (*piece.up, piece.down)
    chunks = _chunking(piece, chunk_rows, piece.target)
    frames = []
    for i, (side, chunk) in enumerate(zip(sides, chunks, strict=True)):
        sql = (
            f"SELECT {chunk} AS c, COUNT(*) AS n, CAST(SUM({side.hash}) AS CHAR) AS h "
            f"FROM {side.table} WHERE {side.where} GROUP BY 1"
        )
        frames.append(
            _read(spark, side, sql).withColumn("side", F.lit("down" if i == len(sides) - 1 else "up"))
        )
    sums: dict[tuple[str, int], list] = {}
    for row in reduce(lambda a, b: a.unionByName(b), frames).collect():
        entry = sums.setdefault((row["side"], int(row["c"])), [0, 0])
        entry[0] += int(row["n"])
        entry[1] += int(Decimal(row["h"] or 0))
    all_chunks = {c for _, c in sums}
    bad = sorted(c for c in all_chunks if sums.get(("up", c), [0, 0]) != sums.get(("down", c), [0, 0]))
    diff.upstream_rows += sum(v[0] for (s, _), v in sums.items() if s == "up")
    diff.downstream_rows += sum(v[0] for (s, _), v in sums.items() if s == "down")
    diff.chunks += len(all_chunks)
    diff.chunks_differing += len(bad)
    if bad:
        _narrow(spark, piece, chunks, bad, diff)


def _narrow(spark, piece: _Slice, chunks: tuple[str, ...], bad: list[int], diff: TableDiff) -> None:
    """Rows of the differing chunks: (key, hash) of both sides, joined on the key."""
    from pyspark.sql import functions as F

    sides = (*piece.up, piece.down)
    wanted = ", ".join(str(c) for c in bad)
    width = len(piece.down.key_parts)
    names = [f"p{j}" for j in range(width)]
    up_frames, down_frame = [], None
    for i, (side, chunk) in enumerate(zip(sides, chunks, strict=True)):
        parts = ", ".join(f"{p} AS p{j}" for j, p in enumerate(side.key_parts))
        sql = (
            f"SELECT {side.key} AS k, CAST({side.hash} AS CHAR) AS h, {parts} FROM {side.table} "
            f"WHERE {side.where} AND {chunk} IN ({wanted})"
        )
        frame = _read(spark, side, sql)
        if i < len(piece.up):
            up_frames.append(frame.withColumn("s", F.lit(str(piece.shards[i].id))))
        else:
            down_frame = frame
    up = reduce(lambda a, b: a.unionByName(b), up_frames)
    up = up.select("k", F.col("h").alias("uh"), "s", *[F.col(n).alias("u" + n) for n in names])
    down = down_frame.select(
        F.col("k").alias("dk"), F.col("h").alias("dh"), *[F.col(n).alias("d" + n) for n in names]
    )
    joined = up.join(down, up["k"] == down["dk"], "full_outer")
    for row in joined.collect():
        if row["k"] is None:
            diff.extra.append((None, tuple(row["d" + n] for n in names)))
        elif row["dk"] is None:
            diff.missing.append((ShardId.parse(row["s"]), tuple(row["u" + n] for n in names)))
        elif row["uh"] != row["dh"]:
            diff.different.append((ShardId.parse(row["s"]), tuple(row["u" + n] for n in names)))


# -- looking again ----------------------------------------------------------------------------
RECHECK_BATCH = 500  # keys a statement looks up
RECHECK_ROUNDS = 3  # looks at a row the stream keeps changing before it is left unsettled
STREAM_WAIT = 120.0  # seconds verify waits for the stream to pass where the sources are


def _recheck(piece: _Slice, seen: TableDiff, diff: TableDiff, wait_past: Callable[[], None]) -> None:
    """The rows `seen` found differing, read again by their keys: upstream, then (once the
    stream is past where the sources are after that read) downstream, then upstream again.
    A row the same in both upstream reads is compared (a difference goes into `diff`); one
    the stream changed between them (live traffic on it) is looked at again, at most
    RECHECK_ROUNDS times, then left in `diff.unsettled`. (Comparing a single upstream read
    with the downstream one reported a row updated between the two reads as different.)"""
    keys = {values for _, values in seen.missing + seen.different + seen.extra}
    for _ in range(RECHECK_ROUNDS):
        before = _upstream(piece, keys)
        wait_past()
        down = dict(_by_key(piece.down, keys))
        after = _upstream(piece, keys)
        moving = set()
        for values in sorted(keys, key=str):
            mine, theirs = before.get(values), down.get(values)
            if mine != after.get(values):
                moving.add(values)
            elif mine is None and theirs is not None:
                diff.extra.append((None, values))
            elif mine is not None and theirs is None:
                diff.missing.append((mine[0], values))
            elif mine is not None and mine[1] != theirs:
                diff.different.append((mine[0], values))
        keys = moving
        if not keys:
            return
    last = _upstream(piece, keys)
    diff.unsettled += [(last[v][0] if v in last else None, v) for v in sorted(keys, key=str)]


def _upstream(piece: _Slice, keys: set[tuple]) -> dict[tuple, tuple[ShardId, str]]:
    """The shards' rows with these keys: key values as text -> (shard, hash)."""
    up: dict[tuple, tuple[ShardId, str]] = {}
    for side, shard in zip(piece.up, piece.shards, strict=True):
        for values, hashed in _by_key(side, keys):
            up[values] = (shard.id, hashed)
    return up


def _by_key(side: _Side, keys: set[tuple]) -> list[tuple[tuple, str]]:
    """(key values as text, hash) of the side's rows with these keys."""
    queries = lookups(side, keys)
    rows = [row for result in _queries(side.connection, queries) for row in result] if queries else []
    return [(tuple(None if v is None else str(v) for v in row[:-1]), str(row[-1])) for row in rows]


def lookups(side: _Side, keys: set[tuple]) -> list[str]:
    """The statements reading the side's rows with these keys, by the key's columns: an
    equality on each (no row constructor, which MariaDB reads by a scan), so each key is one
    probe of the primary key (tests/server/test_statement_reads.py counts its reads)."""
    wanted = [
        values
        for values in keys
        if all(fixed is None or fixed == v for (_, fixed), v in zip(side.key_columns, values, strict=True))
    ]
    parts = ", ".join(side.key_parts)
    queries = []
    for start in range(0, len(wanted), RECHECK_BATCH):
        conditions = [
            "("
            + " AND ".join(
                f"{column} = {_literal_of_text(v)}"
                for (column, fixed), v in zip(side.key_columns, values, strict=True)
                if fixed is None
            )
            + ")"
            for values in wanted[start : start + RECHECK_BATCH]
        ]
        queries.append(
            f"SELECT {parts}, CAST({side.hash} AS CHAR) FROM {side.table} "
            f"WHERE {side.where} AND ({' OR '.join(conditions)})"
        )
    return queries


class Stream:
    """What the task's daemon has applied, as its meta schema says: where each source's
    watermark is, and the groups' pending renames."""

    def __init__(self, config: TaskConfig):
        self.config = config
        down = config.target.connection_kwargs()
        self.meta = Meta(lambda: connect_downstream(down), config.target.meta_schema, config.task)

    def pending_renames(self, target: str, table: Table) -> list[tuple[str, str]]:
        """The group's column renames some shards ran and others not yet (none where the task
        never streamed)."""
        route = next((r for r in self.config.routes if r.target == target), None)
        try:
            if route is None or not self._streamed():
                return []
            coordinator = Coordinator(
                target, self.config.target.flavor, MetaStore(self.meta, target), **route.coordinator_extract()
            )
        except pymysql.err.MySQLError:
            return []
        return [(r.old, r.new) for r in coordinator.renames if r.started]

    def _streamed(self) -> bool:
        schema = self.config.target.meta_schema
        sql = "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s"
        rows = self.meta.rows(sql, (schema, "lease"))
        return bool(rows and int(rows[0][0]))

    def wait_past(self, sources: dict) -> None:
        """Till the daemon's watermark of each source is past where its binlog is now (at
        most STREAM_WAIT seconds; not at all with no daemon running the task)."""
        try:
            if not self._streamed() or not self._running():
                return
            ends = {}
            for name, source in sources.items():
                with connect_source(source) as conn, conn.cursor() as cur:
                    position, _ = binlog_position(cur, name)
                ends[name] = (file_sequence(position.file), position.pos)
            deadline = time.monotonic() + STREAM_WAIT
            while time.monotonic() < deadline:
                marks = self.meta.watermarks.load()
                if all(name in marks and marks[name][1][:2] >= end for name, end in ends.items()):
                    return
                time.sleep(0.5)
        except pymysql.err.MySQLError:
            return  # (looked at again as they are)

    def close(self) -> None:
        self.meta.close()

    def _running(self) -> bool:
        return self.meta.lease.live()


# -- fix SQL ---------------------------------------------------------------------------------
def _fix_sql(group: Group, target: Table, flavor: Flavor, diff: TableDiff) -> list[str]:
    """REPLACE for rows missing or different downstream (the shard's row, projected
    as the backfill does), DELETE for rows only downstream."""
    pk = [target.column(p.column) for p in target.primary_key.parts]
    counts = f"{len(diff.missing)} missing, {len(diff.different)} different, {len(diff.extra)} extra"
    out = [f"-- {group.target}: {counts}"]
    wanted: dict[ShardId, list[tuple]] = {}
    for shard_id, values in diff.missing + diff.different:
        wanted.setdefault(shard_id, []).append(values)
    joined = materialize(group.joined, flavor)
    for shard in group.shards:
        if shard.id not in wanted:
            continue
        fixed = group.fixed(shard)
        projection = project(shard.id, shard.model, joined, group.extraction, flavor.value)
        names = ", ".join(quote_identifier(c) for c in projection.columns)
        # values as the driver returns them natively: _literal renders them
        select = f"SELECT {', '.join(projection.select)} FROM {shard.quoted} WHERE "
        queries = [
            select
            + " AND ".join(
                f"{quote_identifier(shard.model.column(c.name).name)} = {_literal_of_text(v)}"
                for c, v in zip(pk, values, strict=True)
                if c.key not in fixed
            )
            for values in wanted[shard.id]
        ]
        for rows in _queries(shard.source.connection_kwargs(), queries):
            if rows:  # else gone upstream since: the stream deletes it downstream
                values = ", ".join(_literal(v) for v in rows[0])
                out.append(f"REPLACE INTO {group.quoted} ({names}) VALUES ({values});")
    for _, values in diff.extra:
        conditions = [
            f"{quote_identifier(c.name)} = {_literal_of_text(v)}" for c, v in zip(pk, values, strict=True)
        ]
        out.append(f"DELETE FROM {group.quoted} WHERE {' AND '.join(conditions)};")
    return out


def _literal_of_text(value: str) -> str:
    return value if value.startswith("0x") else quote_string(value)


def _literal(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes | bytearray):
        return "0x" + value.hex() if value else "''"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int | Decimal):
        return str(value)
    return quote_string(str(value))
