"""The shard groups a Spark job works on: every routed upstream table with its
schema, grouped by target, with the group's joined schema; and how to split one
shard's rows into reads that run in parallel."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import pymysql

from lattice import Family, Flavor, Table, parse_table, quote_identifier
from replicator.config import Extract, SourceConfig, TaskConfig
from replicator.errors import CliError
from replicator.schema.coordinator import Coordinator
from replicator.schema.group import Result
from replicator.servers import connect
from replicator.shard_id import ShardId, split_table_key
from replicator.source.routing import Router
from replicator.source.row_filter import keep_clause
from replicator.source.upstream import binlog_position, watched_schemas
from replicator.spark.sql import extract_values
from replicator.state.chunks import Chunk, hash_chunks, range_chunks
from replicator.state.coordinator_store import InMemoryStore
from replicator.state.positions import Position

MAX_SPLITS = 256


class JobError(CliError):
    """A Spark job cannot go on; says what and where."""


@dataclass(frozen=True)
class SourceSnapshot:
    source: SourceConfig
    position: Position
    gtid: str | None
    schemas: dict[str, str]  # schema.table -> CREATE TABLE, the watched tables


@dataclass(frozen=True)
class Shard:
    id: ShardId
    source: SourceConfig
    model: Table
    # the WHERE its rows are read with where row filters cover it (row_filter.keep_clause)
    keep: str | None = None

    @property
    def where(self) -> str:
        """` WHERE ...` of a read of its rows, or nothing."""
        return f" WHERE {self.keep}" if self.keep else ""

    @property
    def schema(self) -> str:
        return self.id.schema

    @property
    def table(self) -> str:
        return self.id.table

    @property
    def quoted(self) -> str:
        return f"{quote_identifier(self.schema)}.{quote_identifier(self.table)}"


@dataclass(frozen=True)
class Group:
    target: str  # schema.table downstream
    shards: tuple[Shard, ...]
    joined: Table  # the join of the shards, with the extract columns
    extract: dict[str, str]  # source/schema/table -> extract column
    extracts: tuple[Extract, ...] = ()  # how each is filled (Route.extracts)

    @property
    def quoted(self) -> str:
        schema, table = self.target.split(".", 1)
        return f"{quote_identifier(schema)}.{quote_identifier(table)}"

    @property
    def extraction(self) -> tuple[Extract, ...] | dict[str, str]:
        """The extract columns with how each is filled (whole names for a bare mapping)."""
        return self.extracts or self.extract

    def fixed(self, shard: Shard) -> dict[str, str | None]:
        """The extract columns' values in the shard's rows."""
        return extract_values(self.extraction, shard.id)


def connect_source(source: SourceConfig, **kwargs) -> pymysql.connections.Connection:
    try:
        return connect(source.connection_kwargs(), **kwargs)
    except pymysql.err.MySQLError as exc:
        raise JobError(f"source {source.id} ({source.host}:{source.port}) is unreachable: {exc}") from exc


def snapshot(source: SourceConfig, router: Router) -> SourceSnapshot:
    """Where the source's binlog is, then the schemas: a DDL in between is seen at
    the end, as one during the job would be."""
    with connect_source(source) as conn, conn.cursor() as cur:
        position, gtid = binlog_position(cur, source.id)
        schemas = watched_schemas(cur, router)
    return SourceSnapshot(source, position, gtid, schemas)


def groups(
    config: TaskConfig,
    router: Router,
    snapshots: Iterable[SourceSnapshot],
    targets: Iterable[str] | None = None,
) -> list[Group]:
    """The shard groups to work on (all, or those named), each with its join; an
    error for a name that is no target, a group without shards, or shards that do
    not join."""
    wanted = set(targets) if targets else None
    known = router.targets()
    if wanted is not None and wanted - set(known):
        raise JobError(
            f"no route has target {', '.join(sorted(wanted - set(known)))}; targets: {', '.join(known)}"
        )
    shards: dict[str, list[Shard]] = {t: [] for t in known if wanted is None or t in wanted}
    for snap in snapshots:
        for key, sql in snap.schemas.items():
            schema, table = split_table_key(key)
            route = router.route(schema, table)
            if route is None or route.target not in shards:
                continue
            model = parse_table(sql, upstream=snap.source.flavor or "mariadb", shown=True)
            shard_id = ShardId(snap.source.id, schema, table)
            shard = Shard(shard_id, snap.source, model, keep_clause(config.filters.rows, shard_id))
            shards[route.target].append(shard)
    flavor = Flavor.parse(config.target.flavor)
    out = []
    for target, members in shards.items():
        if not members:
            raise JobError(f"no upstream table is routed to {target}; check the routes and filters")
        route = next(r for r in config.routes if r.target == target)  # (all fill the same columns)
        extract = route.extract_columns
        coordinator = Coordinator(target, flavor, InMemoryStore(), **route.coordinator_extract())
        for shard in sorted(members, key=lambda s: s.id):
            decision = coordinator.add_shard(shard.id, shard.model)
            if decision.result == Result.CONFLICT:
                raise JobError(f"{target}: shard {shard.id} does not join the others: {decision.message}")
        members = tuple(_config_order(config, members))
        out.append(Group(target, members, coordinator.target, extract, route.extracts))
    return out


def _config_order(config: TaskConfig, shards: list[Shard]) -> list[Shard]:
    """Shards in the order the config lists their sources, then by name: what
    "first" means for the keep-first merge policy."""
    rank = {s.id: i for i, s in enumerate(config.sources)}
    return sorted(shards, key=lambda s: (rank[s.source.id], s.schema, s.table))


def require_primary_key(shard: Shard) -> tuple[str, ...]:
    pk = shard.model.primary_key
    if pk is None:
        raise JobError(
            f"shard {shard.id} has no primary key: its rows cannot be split into parallel reads, "
            "told apart from another shard's, or replayed from the binlog without duplicates. "
            "Add one upstream, or leave the table out with the task's filters."
        )
    return tuple(shard.model.column(p.column).name for p in pk.parts)


@dataclass(frozen=True)
class Splits:
    chunks: tuple[Chunk, ...]  # cover the table once, whatever rows come later
    estimated_rows: int


def estimate_rows(cur, shard: Shard) -> int:
    """The server's estimate of the shard's row count (InnoDB's is a sample)."""
    cur.execute(
        "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s",
        (shard.schema, shard.table),
    )
    row = cur.fetchone()
    return int(row[0] or 0) if row else 0


def plan_splits(cur, shard: Shard, rows_per_split: int) -> Splits:
    """Ranges of the first primary key column when it is an integer (each read then
    walks its part of the index), else buckets of a hash of it."""
    key = require_primary_key(shard)
    estimate = estimate_rows(cur, shard)
    n = max(1, min(MAX_SPLITS, math.ceil(estimate / max(1, rows_per_split))))
    first = shard.model.column(key[0])
    if n == 1:
        return Splits((Chunk(0),), estimate)
    if first.type.family == Family.INTEGER:
        real = quote_identifier(first.name)
        cur.execute(f"SELECT MIN({real}), MAX({real}) FROM {shard.quoted}")
        low, high = cur.fetchone()
        if low is None:
            return Splits((Chunk(0),), estimate)
        return Splits(range_chunks(int(low), int(high), n), estimate)
    return Splits(hash_chunks(n), estimate)
