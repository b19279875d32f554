"""`shardmerge resync`: one shard's rows copied again while the daemon streams the others
(issue 45, README "Resync a shard"): the way out of a shard's rows found wrong downstream
(verify) and of its binlog purged before its changes were read.

With the daemon through the resync table (replicator/apply/resync_store.py): the shard
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
from collections.abc import Callable
from dataclasses import dataclass, replace

import pymysql

from lattice import Table, parse_table
from replicator.apply.applier import keys_in
from replicator.apply.inspect import read_table, table_exists
from replicator.apply.meta import Meta, Pause
from replicator.apply.resync_store import PAUSED_FOR_RESYNC, Resync, ResyncState, ResyncStore
from replicator.compare import origin_filter
from replicator.config import ROWS_PER_SPLIT, TaskConfig
from replicator.servers import connect_downstream
from replicator.shard_id import ShardId
from replicator.source.positions import position_text
from replicator.source.routing import Router
from replicator.spark.backfill import Listener, copy_shard
from replicator.spark.shards import Group, JobError, Shard, require_primary_key, snapshot
from replicator.spark.sql import ProjectionError, extract_values, project

log = logging.getLogger(__name__)

DELETE_BATCH = 10_000
POLL = 0.5


@dataclass(frozen=True)
class ResyncReport:
    shard: ShardId
    target: str
    deleted: int  # its rows downstream before
    copied: int
    p0: str
    p1: str
    seconds: float
    streaming: bool  # a daemon took it over (else the next `shardmerge run` does)

    def data(self) -> dict:
        return {
            "shard": str(self.shard),
            "target": self.target,
            "deleted": self.deleted,
            "copied": self.copied,
            "p0": self.p0,
            "p1": self.p1,
            "seconds": round(self.seconds, 1),
            "streaming": self.streaming,
        }


def resync(
    config: TaskConfig,
    spark,
    shard_id: ShardId,
    *,
    rows_per_split: int = ROWS_PER_SPLIT,
    listener: Listener | None = None,
    wait: float = 120.0,
) -> ResyncReport:
    """Copy the shard again (module docstring). `wait`: seconds for the daemon to pause it."""
    listener = listener or Listener()
    started = time.perf_counter()
    down = config.target.connection_kwargs()
    meta = Meta(lambda: connect_downstream(down), config.target.meta_schema, config.task)
    store = ResyncStore(meta.q, meta.t)
    try:
        meta.ensure()
        router = Router.from_config(config)
        source = next((s for s in config.sources if s.id == shard_id.source), None)
        route = router.route(shard_id.schema, shard_id.table) if source is not None else None
        if route is None:
            raise JobError(
                f"no route of task {config.task} takes shard {shard_id}; shards are source.schema.table"
            )
        target = route.target
        extraction = route.extracts or route.extract_columns
        origin = _origin(meta, target, extraction, shard_id)
        _request(meta, store, shard_id)
        listener.note(f"shard {shard_id}: waiting for the daemon to pause it and apply its rows in flight")
        _wait_ready(meta, store, shard_id, wait)
        start = snapshot(source, router)
        sql = start.schemas.get(shard_id.table_key)
        if sql is None:
            raise JobError(f"shard {shard_id}: table {shard_id.table_key} is not on source {source.id}")
        model = parse_table(sql, upstream=source.flavor or "mariadb", shown=True)
        shard = Shard(shard_id, source, model)
        require_primary_key(shard)
        resyncing = Resync(shard_id, ResyncState.COPYING, start.position, start.gtid)
        meta.execute([store.sql_state(resyncing)])
        with contextlib.closing(connect_downstream(down)) as conn:
            schema, table = target.split(".", 1)
            if not table_exists(conn, schema, table):
                raise JobError(f"downstream table {target} does not exist; `shardmerge backfill` makes it")
            downstream = read_table(conn, schema, table)
            group = Group(target, (shard,), downstream, route.extract_columns, route.extracts)
            try:
                projection = project(shard_id, model, downstream, extraction, config.target.flavor)
            except ProjectionError as exc:
                raise JobError(f"{target}: {exc}") from exc
            listener.note(f"shard {shard_id}: deleting its rows in {target}")
            deleted = _delete_rows(conn, group.quoted, downstream, origin)
        listener.note(f"shard {shard_id}: copying its rows from {position_text(start.position, start.gtid)}")
        copied = copy_shard(spark, group, downstream, shard, projection, rows_per_split, down, listener)
        end = snapshot(source, router)
        if end.schemas.get(shard_id.table_key) != sql:
            raise JobError(
                f"shard {shard_id}: its table changed while it was copied (a DDL after "
                f"{position_text(start.position, start.gtid)}); run `shardmerge resync` again"
            )
        meta.execute(
            [store.sql_state(replace(resyncing, state=ResyncState.COPIED, p1=end.position, p1_gtid=end.gtid))]
        )
        streaming = _wait_streaming(meta, store, shard_id)
    finally:
        meta.close()
    return ResyncReport(
        shard_id,
        target,
        deleted,
        copied.rows,
        position_text(start.position, start.gtid),
        position_text(end.position, end.gtid),
        time.perf_counter() - started,
        streaming,
    )


def _origin(meta: Meta, target: str, extraction, shard: ShardId) -> str:
    """The condition selecting the shard's rows downstream: its extract columns' values,
    which no other shard of the group has."""
    others = [s for s in _group_shards(meta, target) if s != shard]
    fixed = extract_values(extraction, shard)
    if not fixed or any(extract_values(extraction, s) == fixed for s in others):
        raise JobError(
            f"shard {shard}: its rows in {target} do not say they are its (no extract columns, or "
            "another shard fills them with the same values), so they cannot be deleted alone; copy the "
            "whole group again with `shardmerge backfill --truncate` instead"
        )
    return origin_filter(extraction, shard)


def _group_shards(meta: Meta, target: str) -> list[ShardId]:
    rows = meta.rows(
        f"SELECT shard FROM {meta.q}.coordinator_shard WHERE task={meta.t} AND target=%s", (target,)
    )
    return [ShardId.parse(r[0]) for r in rows]


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
        cur.execute(f"SELECT expires > NOW(6) FROM {meta.q}.lease WHERE task={meta.t} FOR UPDATE")
        held = cur.fetchone()
        if held is not None and held[0]:
            cur.execute("ROLLBACK")
            return False
        watermark = meta.load_watermarks().get(shard.source)
        if watermark is None:
            cur.execute("ROLLBACK")
            raise JobError(
                f"source {shard.source} of task {meta.task} has not streamed yet: nothing to resync"
            )
        position, bound, _ = watermark
        cur.execute(meta.sql_pause(Pause(shard, position, bound, PAUSED_FOR_RESYNC)))
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
            held = meta.rows(f"SELECT expires > NOW(6) FROM {meta.q}.lease WHERE task={meta.t}")
            if not held or not held[0][0]:
                return False  # (no daemon: the next start streams it)
        time.sleep(POLL)
    return False
