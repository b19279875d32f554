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
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from functools import reduce

import pymysql

from lattice import Family, Flavor, Table, key, materialize, quote_identifier, quote_string
from replicator.apply.inspect import read_table, table_exists
from replicator.compare import origin_filter
from replicator.config import TaskConfig
from replicator.servers import connect, connect_downstream
from replicator.shard_id import ShardId
from replicator.source.routing import Router
from replicator.spark.session import jdbc_properties, jdbc_url
from replicator.spark.shards import (
    Group,
    JobError,
    Shard,
    groups,
    require_primary_key,
    snapshot,
)
from replicator.spark.sql import key_text, project, row_hash, writable

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
    the union's), and when it is done (a `replicator.control.progress.Progress`)."""
    router = Router.from_config(config)
    flavor = Flavor.parse(config.target.flavor)
    down = config.target.connection_kwargs()
    snaps = [snapshot(source, router) for source in config.sources]
    report = VerifyReport([], [])
    for group in groups(config, router, snaps, tables):
        target = _own_key_first(_downstream_table(group, down), group.extract.values())
        diff = TableDiff(group.target)
        if listener is not None:
            listener.table_started(group.target, None)
        for piece in _slices(group, target, down, flavor):
            _compare(spark, piece, diff, chunk_rows)
            if listener is not None:
                listener.table_progress(group.target, diff.upstream_rows)
        if listener is not None:
            listener.table_done(group.target, diff.upstream_rows)
        if fix and not diff.equal:
            report.fix_sql += _fix_sql(group, target, flavor, diff)
        report.tables.append(diff)
    return report


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


def _slices(group: Group, target: Table, down: dict, flavor: Flavor) -> list[_Slice]:
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
            row_hash([(quote_identifier(c.name), c.type, True) for c in columns]),
            quote_identifier(pk.parts[0].column),
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
    return _Side(
        shard.source.connection_kwargs(),
        shard.quoted,
        shard.keep or "1=1",  # (rows its row filters drop are not downstream)
        key_text(pk, shard.model, target, fixed),
        tuple(key_parts),
        row_hash(parts),
        chunk_column,
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
