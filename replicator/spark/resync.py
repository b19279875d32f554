"""`shardmerge resync`: one shard's rows copied again while the daemon streams the others
(issue 45, docs/operations/resync.md): the way out of a shard's rows found wrong downstream
(verify) and of its binlog purged before its changes were read.

With the daemon through the resync table (replicator/state/resync_store.py): the shard
pauses and its changes in flight are applied; then its rows downstream are deleted (by
the extract columns: refused where rows do not say their shard), P0 is taken (where its
source's binlog is), its rows are copied with Spark from its upstream table, and P1 is
taken; the daemon streams the shard from P0, its changes before P1 in safe mode (a row
they touch may be copied already or not), as it does after a backfill. No gap: every
change after P0 is streamed; no double: the copy is of the table after P0, and the
changes before P1 are applied as upserts and deletes.

Without a daemon running the task (none holds its lease) the command pauses the shard
itself, at its source's watermark; the next `shardmerge run` streams it from P0."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pymysql

from lattice import Table, parse_table
from replicator.apply import schema_history
from replicator.apply.inspect import read_table, table_exists
from replicator.apply.meta import Meta
from replicator.apply.statements import keys_in
from replicator.compare import origin_filter
from replicator.config import ROWS_PER_SPLIT, Route, SourceConfig, TaskConfig
from replicator.schema import way_out
from replicator.schema.way_out import with_way_out
from replicator.servers import connect_downstream
from replicator.shard_id import ShardId
from replicator.source.routing import Router
from replicator.source.row_filter import keep_clause
from replicator.spark.backfill import Listener, copy_shard
from replicator.spark.shards import Group, JobError, Shard, SourceSnapshot, require_primary_key, snapshot
from replicator.spark.sql import ProjectionError, extract_values, project
from replicator.state.pauses import Pause
from replicator.state.positions import position_text
from replicator.state.resync_store import PAUSED_FOR_RESYNC, Resync, ResyncState, ResyncStore

log = logging.getLogger(__name__)

DELETE_BATCH = 10_000
POLL = 0.5


@dataclass(frozen=True)
class ShardCopy:
    shard: ShardId
    target: str
    deleted: int  # its rows downstream before
    copied: int


@dataclass(frozen=True)
class ResyncReport:
    shards: tuple[ShardCopy, ...]
    p0: str
    p1: str
    seconds: float
    streaming: bool  # a daemon took it over (else the next `shardmerge run` does)

    def data(self) -> dict:
        return {
            "shards": [
                {"shard": str(c.shard), "target": c.target, "deleted": c.deleted, "copied": c.copied}
                for c in self.shards
            ],
            "p0": self.p0,
            "p1": self.p1,
            "seconds": round(self.seconds, 1),
            "streaming": self.streaming,
        }


@dataclass(frozen=True)
class _Planned:
    """A shard to copy: where its rows go and how they are told apart there."""

    shard: ShardId
    route: Route
    origin: str


def resync(
    config: TaskConfig,
    spark,
    shards: Sequence[ShardId],
    *,
    rows_per_split: int = ROWS_PER_SPLIT,
    listener: Listener | None = None,
    wait: float = 120.0,
) -> ResyncReport:
    """Copy the shards, all of one source, again from one position of it (module
    docstring). `wait`: seconds for the daemon to pause them."""
    listener = listener or Listener()
    started = time.perf_counter()
    down = config.target.connection_kwargs()
    meta = Meta(lambda: connect_downstream(down), config.target.meta_schema, config.task)
    store = ResyncStore(meta.q, meta.t)
    try:
        meta.ensure()
        router = Router.from_config(config)
        source = _source(config, shards)
        planned = [_plan(config, router, meta, shard) for shard in shards]
        for shard in shards:
            _request(meta, store, shard)
        try:
            listener.note(f"{_names(shards)}: waiting for the daemon to pause and apply what it has of them")
            for shard in shards:
                _wait_ready(meta, store, shard, wait)
            start = snapshot(source, router)
            since = position_text(start.position, start.gtid)
            meta.execute(
                [
                    store.sql_state(Resync(p.shard, ResyncState.COPYING, start.position, start.gtid))
                    for p in planned
                ]
            )
            copies = [_copy(config, spark, p, start, down, rows_per_split, listener) for p in planned]
            end = snapshot(source, router)
            changed = [s for s in shards if _changed(start, end, s)]
            if changed:
                raise JobError(
                    f"{_names(changed)}: the table changed while it was copied (a DDL after {since}); "
                    "run `shardmerge resync` again"
                )
        except Exception as exc:
            # (query-status says so, with the way out, instead of "being copied" for good; the
            # shard stays paused for it, and the same command asks again)
            _failed(meta, store, shards, exc)
            raise
        # the schemas where the stream takes over: a source whose every shard is copied
        # reads from there (replicator/daemon/resyncs.py), past binlogs purged before
        history = schema_history.start_rows(meta, source.id, start.position.change(-1), dict(start.schemas))
        copied = [
            Resync(p.shard, ResyncState.COPIED, start.position, start.gtid, end.position, end.gtid)
            for p in planned
        ]
        meta.execute([*history, *map(store.sql_state, copied)])
        streaming = all([_wait_streaming(meta, store, shard) for shard in shards])
    finally:
        meta.close()
    return ResyncReport(
        tuple(copies), since, position_text(end.position, end.gtid), time.perf_counter() - started, streaming
    )


def shards_of_source(config: TaskConfig, source: str) -> list[ShardId]:
    """The source's shards its groups have (`resync --source`), as the meta schema says."""
    down = config.target.connection_kwargs()
    meta = Meta(lambda: connect_downstream(down), config.target.meta_schema, config.task)
    try:
        meta.ensure()
        known = meta.groups.shards()
    finally:
        meta.close()
    shards = sorted({shard for shard in known if shard.source == source})
    if not shards:
        raise JobError(f"task {config.task} has no shard of source {source!r} (has it streamed?)")
    return shards


def _changed(start: SourceSnapshot, end: SourceSnapshot, shard: ShardId) -> bool:
    """Whether a DDL changed the shard's table between the snapshots: compared as the schema
    model reads them, not as text (SHOW CREATE TABLE carries AUTO_INCREMENT=N, which every
    insert moves: a shard written during its copy never finished, issue 71)."""
    before, after = start.schemas.get(shard.table_key), end.schemas.get(shard.table_key)
    if before is None or after is None:
        return before != after
    flavor = start.source.flavor or "mariadb"
    return parse_table(before, upstream=flavor, shown=True) != parse_table(after, upstream=flavor, shown=True)


def _failed(meta: Meta, store: ResyncStore, shards: Sequence[ShardId], exc: Exception) -> None:
    """The resyncs that did not finish, said failed with why and the way out."""
    why = str(exc) if isinstance(exc, JobError) else f"{type(exc).__name__}: {exc}"
    with contextlib.suppress(pymysql.err.MySQLError):
        meta.execute([store.sql_failed(shard, failed_message(shard, why)) for shard in shards])


def failed_message(shard: ShardId, why: str) -> str:
    return with_way_out(f"failed: {why}", way_out.resync_failed(shard))


def _names(shards: Sequence[ShardId]) -> str:
    return "shard " + str(shards[0]) if len(shards) == 1 else f"{len(shards)} shards"


def _source(config: TaskConfig, shards: Sequence[ShardId]) -> SourceConfig:
    sources = {s.source for s in shards}
    if len(sources) != 1:
        raise JobError(f"shards of one source at a time: {', '.join(sorted(sources))}")
    (name,) = sources
    source = next((s for s in config.sources if s.id == name), None)
    if source is None:
        raise JobError(f"task {config.task} has no source {name!r} (a shard is source.schema.table)")
    return source


def _plan(config: TaskConfig, router: Router, meta: Meta, shard: ShardId) -> _Planned:
    route = router.route(shard.schema, shard.table)
    if route is None:
        raise JobError(f"no route of task {config.task} takes shard {shard} (a shard is source.schema.table)")
    return _Planned(shard, route, _origin(meta, route.target, route.extracts or route.extract_columns, shard))


def _copy(
    config: TaskConfig,
    spark,
    planned: _Planned,
    start: SourceSnapshot,
    down: dict,
    rows_per_split: int,
    listener: Listener,
) -> ShardCopy:
    """The shard's rows downstream deleted, and copied again from its table upstream."""
    shard_id, route = planned.shard, planned.route
    target = route.target
    sql = start.schemas.get(shard_id.table_key)
    if sql is None:
        raise JobError(f"shard {shard_id}: table {shard_id.table_key} is not on source {start.source.id}")
    model = parse_table(sql, upstream=start.source.flavor or "mariadb", shown=True)
    shard = Shard(shard_id, start.source, model, keep_clause(config.filters.rows, shard_id))
    require_primary_key(shard)
    with contextlib.closing(connect_downstream(down)) as conn:
        schema, table = target.split(".", 1)
        if not table_exists(conn, schema, table):
            raise JobError(f"downstream table {target} does not exist; `shardmerge backfill` makes it")
        downstream = read_table(conn, schema, table)
        group = Group(target, (shard,), downstream, route.extract_columns, route.extracts)
        extraction = route.extracts or route.extract_columns
        try:
            projection = project(shard_id, model, downstream, extraction, config.target.flavor)
        except ProjectionError as exc:
            raise JobError(f"{target}: {exc}") from exc
        listener.note(f"shard {shard_id}: deleting its rows in {target}")
        deleted = _delete_rows(conn, group.quoted, downstream, planned.origin)
    listener.note(f"shard {shard_id}: copying its rows")
    copied = copy_shard(spark, group, downstream, shard, projection, rows_per_split, down, listener)
    return ShardCopy(shard_id, target, deleted, copied.rows)


def _origin(meta: Meta, target: str, extraction, shard: ShardId) -> str:
    """The condition selecting the shard's rows downstream: its extract columns' values,
    which no other shard of the group has."""
    others = [s for s in meta.groups.shards(target) if s != shard]
    fixed = extract_values(extraction, shard)
    if not fixed or any(extract_values(extraction, s) == fixed for s in others):
        raise JobError(
            f"shard {shard}: its rows in {target} do not say they are its (no extract columns, or "
            "another shard fills them with the same values), so they cannot be deleted alone; copy the "
            "whole group again with `shardmerge backfill --truncate` instead"
        )
    return origin_filter(extraction, shard)


def _request(meta: Meta, store: ResyncStore, shard: ShardId) -> None:
    resync = store.parse(meta.rows(store.sql_load())).get(shard)
    if resync is not None and resync.state in (ResyncState.COPIED, ResyncState.STREAMING):
        raise JobError(
            f"shard {shard} was resynced: the daemon streams it from {resync.p0} and forgets the resync "
            f"once its source is past {resync.p1}; run it again after that"
        )
    meta.execute([store.sql_request(shard, time.time())])


def _wait_ready(meta: Meta, store: ResyncStore, shard: ShardId, wait: float) -> None:
    """Till the daemon paused the shard and applied its rows in flight; with no daemon
    holding the task's lease, the shard paused here."""
    deadline = time.monotonic() + wait
    while True:
        resync = store.parse(meta.rows(store.sql_load())).get(shard)
        if resync is not None and resync.state == ResyncState.READY:
            return
        if resync is not None and resync.state == ResyncState.REFUSED:
            raise JobError(f"the daemon refused the resync: {resync.message}")
        if _pause_without_daemon(meta, store, shard):
            return
        if time.monotonic() > deadline:
            raise JobError(
                f"no daemon of task {meta.task} paused shard {shard} within {wait:.0f} s, though one holds "
                "the task's lease: see its log; the request stays, and `shardmerge resync` again waits for it"
            )
        time.sleep(POLL)


def _pause_without_daemon(meta: Meta, store: ResyncStore, shard: ShardId) -> bool:
    """No daemon holds the lease: the shard paused at its source's watermark (everything
    before is applied), in a transaction that holds the lease's row, so a daemon starting
    now finds the pause."""
    with meta.session() as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        if meta.lease.lock_live(cur):
            cur.execute("ROLLBACK")
            return False
        watermark = meta.watermarks.load().get(shard.source)
        if watermark is None:
            cur.execute("ROLLBACK")
            raise JobError(
                f"source {shard.source} of task {meta.task} has not streamed yet: nothing to resync"
            )
        position, bound, _ = watermark
        cur.execute(meta.pauses.sql_pause(Pause(shard, position, bound, PAUSED_FOR_RESYNC)))
        cur.execute(store.sql_state(Resync(shard, ResyncState.READY)))
        cur.execute("COMMIT")
    return True


def _delete_rows(conn, quoted: str, table: Table, origin: str) -> int:
    """The shard's rows downstream deleted in batches along the primary key: each row of
    the table read once, each batch deleted by its keys."""
    primary = table.primary_key
    names = tuple(table.column(p.column).name for p in primary.parts)
    columns = ", ".join(f"`{n}`" for n in names)
    deleted, last = 0, None
    with conn.cursor() as cur:
        while True:
            after = f" AND {_after(names, last, conn.escape)}" if last is not None else ""
            order = f"ORDER BY {columns} LIMIT {DELETE_BATCH}"
            cur.execute(f"SELECT {columns} FROM {quoted} WHERE {origin}{after} {order}")
            keys = cur.fetchall()
            if not keys:
                return deleted
            literals = [tuple(conn.escape(v) for v in key) for key in keys]
            cur.execute(f"DELETE FROM {quoted} WHERE {origin} AND {keys_in(names, literals)}")
            deleted += cur.rowcount
            conn.commit()
            last = keys[-1]


def _after(names: tuple[str, ...], key: tuple, literal: Callable) -> str:
    """Keys after `key` in the key's order, as ranges the server reads by the key."""
    first, rest = names[0], names[1:]
    if not rest:
        return f"`{first}` > {literal(key[0])}"
    return (
        f"(`{first}` > {literal(key[0])} OR (`{first}` = {literal(key[0])} AND "
        f"{_after(rest, key[1:], literal)}))"
    )


def _wait_streaming(meta: Meta, store: ResyncStore, shard: ShardId, wait: float = 30.0) -> bool:
    """Whether a daemon took the copied shard over (it streams it) within `wait` s."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        resync = store.parse(meta.rows(store.sql_load())).get(shard)
        if resync is None or resync.state == ResyncState.STREAMING:
            return True
        with contextlib.suppress(pymysql.err.MySQLError):
            if not meta.lease.live():
                return False  # (no daemon: the next start streams it)
        time.sleep(POLL)
    return False
