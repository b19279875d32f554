"""The pieces of a daemon's start, each from what it is given to what it makes: the
downstream waited for, the partitions chosen, the backfill's end read, each source
opened (a new one's first position and schemas saved), each shard group's coordinator
and target read (a new group's downstream table made), the workers started."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pymysql

from lattice import Flavor, materialize, parse_table
from replicator.api.admin import READY_TIMEOUT, AdminServer, Calls, Route
from replicator.api.admin_error import AdminError
from replicator.api.view_model import LivePage
from replicator.apply import schema_history
from replicator.apply.inspect import not_the_join, read_table, table_exists
from replicator.apply.meta import Meta
from replicator.apply.rebase import SavedPositions, rebase
from replicator.apply.table_refresh import update_info
from replicator.apply.target import TargetInfo
from replicator.apply.validator import Validator
from replicator.config import STANDBY_FLIP, Options, SourceConfig, TaskConfig
from replicator.daemon.membership import StandingChanged
from replicator.daemon.safe_mode import SafeMode
from replicator.errors import DaemonError, ExitCode, connect_failure
from replicator.faults import crash_point
from replicator.metrics import Metrics, standby_metrics
from replicator.schema.coordinator import Coordinator
from replicator.server_rules import server_rules
from replicator.servers import connect, connect_downstream, server_flavor
from replicator.shard_flow import ShardFlows
from replicator.shard_id import ShardId, split_table_key
from replicator.source.failover import FailoverError, read_new_binlog, server_id
from replicator.source.routing import Router
from replicator.source.row_filter import RowFilterError, check_tables
from replicator.source.source_state import FirstRead, SourceState
from replicator.source.upstream import binlog_position, watched_schemas
from replicator.state.backfill import BackfillRecord
from replicator.state.coordinator_store import MetaStore
from replicator.state.pauses import RESUMING, RESUMING_REASON
from replicator.state.positions import ChangeId, Position, file_sequence
from replicator.state.task_state import Spread

log = logging.getLogger("shardmerge.daemon")


class KeptAdmin:
    """A member's admin API across the starts again of its process (issue 75: a member
    starts again at every DDL decision of its group): its address keeps listening, answering
    503 with Retry-After while the member starts again, then the next start's handlers. Only
    the main thread holds it."""

    def __init__(self) -> None:
        self.server: AdminServer | None = None

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def start_admin(
    config: TaskConfig,
    routes: Mapping[tuple[str, str], Route],
    calls: Calls,
    metrics: Callable[[], str],
    not_ready: Callable[[], dict[str, str]],
    page: Callable[[], LivePage],
    kept: KeptAdmin | None = None,
) -> AdminServer | None:
    """The admin API, first: a port in use stops the start before anything else ran. `page`:
    what its live view shows, read on the main thread; `kept`: a member's, listening since
    its process's first start, takes this start's handlers."""
    admin = config.admin
    if not admin.port:
        return None
    server = AdminServer(
        admin,
        routes,
        lambda: calls.read(metrics),
        lambda: calls.read(not_ready, timeout=READY_TIMEOUT),
        page=lambda: calls.read(page),
    )
    if kept is not None and kept.server is not None:
        kept.server.serve(server)
        return kept.server
    if kept is not None:
        kept.server = server
    try:
        server.start()
    except OSError as exc:
        raise DaemonError(
            f"admin API: cannot listen on {admin.host}:{admin.port} ({exc.strerror or exc}); "
            "set admin.port in the task config (0: no admin API)"
        ) from exc
    return server


def start_standby_admin(
    config: TaskConfig, waiting_for: Callable[[], object], name: str
) -> AdminServer | None:
    """The admin API of a daemon waiting as a standby (`waiting_for`: the lease's holder, a
    `Holder`, or None while not known; `name`: this daemon's, as its lease would hold it):
    answered from its HTTP thread, from those values alone."""
    admin = config.admin
    if not admin.port:
        return None

    def holder() -> dict[str, object] | None:
        held = waiting_for()
        return {"name": held.name, "epoch": held.epoch} if held is not None else None

    def status(_body: dict, _params: list[str]) -> dict[str, object]:
        return {"task": config.task, "role": "standby", "daemon": holder()}

    def ready() -> dict[str, str]:
        held = holder()
        by = f"run by {held['name']}" if held else "its holder not known yet"
        return {"standby": f"waiting for the lease of task {config.task} ({by})"}

    def page() -> LivePage:
        """The live view is the active daemon's: a browser opening this one is told where."""
        held = holder()
        by = f"by {held['name']} (epoch {held['epoch']})" if held else "by a daemon not known yet"
        raise AdminError(
            503,
            f"this daemon is a standby of task {config.task}: the task is run {by}, and the live view "
            "is on that daemon's admin API; this one takes over when its lease expires "
            "(docs/operations/high-availability.md)",
        )

    metrics = standby_metrics(config.task, name)  # (the same while it waits)
    server = AdminServer(
        admin,
        {("GET", "/api/v1/status"): status},
        lambda: metrics,
        ready,
        "standby",
        page=page,
    )
    try:
        server.start()
    except OSError as exc:  # (the active's, on this machine: the standby serves none till it takes over)
        log.info("standby: no admin API on %s:%s (%s)", admin.host, admin.port, exc.strerror or exc)
        return None
    return server


def wait_for_downstream(down: dict[str, Any], stopping: threading.Event, max_backoff: float) -> None:
    backoff = 0.5
    while True:
        try:
            connect_downstream(down).close()
            return
        except pymysql.err.MySQLError as exc:
            if stopping.is_set():
                raise DaemonError(
                    f"downstream {down['host']}:{down['port']} unreachable: {exc}", ExitCode.CONNECTION
                ) from exc
            log.warning(
                "downstream %s:%s unreachable (%s); retrying in %.1fs",
                down["host"],
                down["port"],
                exc,
                backoff,
            )
            time.sleep(backoff)
            backoff = min(backoff * 2, max_backoff)


def partitions(
    meta: Meta,
    options: Options,
    row_events: bool,
    safe: SafeMode,
    sources: Iterable[str],
    member: bool = False,
) -> tuple[int, Spread]:
    """How many partitions, and how changes are spread over them: by source (row events
    applied as they are) or by key. A checkpoint means something only under the spread
    it was written with: after an unclean stop the last run's is kept until a clean one,
    and the sources are read again in safe mode up to their highest checkpoints
    (`SafeMode.read_again`), and for `safe_mode_window` seconds if set. A `member` of the
    task (issue 75) reads its sources so at every start (it may read a source another member
    died reading; the task's stop is never clean while members come and go) and keeps the
    spread saved: the checkpoints are the other members' too."""
    last = meta.task_state.load()
    wanted = (options.workers, Spread.of(row_events, sources))
    if last is None:
        return wanted
    if not last.clean and not member:
        safe.after_unclean_stop(options.safe_mode_window)
        window = f", and for {options.safe_mode_window:.0f}s" if options.safe_mode_window else ""
        log.info("the last stop was not clean: safe mode up to each source's highest checkpoint%s", window)
    stored = (last.partitions, last.spread)
    if stored != wanted:
        if last.clean and not member:
            # after a clean stop every checkpoint is below the watermarks: start afresh
            meta.checkpoints.clear()
            return wanted
        log.warning(
            "keeping %d partitions by %s until a clean stop (the config asks %d by %s)",
            last.partitions,
            last.spread.label,
            wanted[0],
            wanted[1].label,
        )
    return stored


def row_events(options: Options, flavor: Flavor, sources: Mapping[str, SourceState]) -> bool:
    """Row events can go as they are: sources and target that replay them (BINLOG statements)."""
    return (
        options.row_events
        and server_rules(flavor).binlog_replay
        and all(server_rules(s.flavor).binlog_replay for s in sources.values())
    )


def backfill_ends(
    meta: Meta, task: str, watermarks: Mapping[str, tuple[Position, ChangeId, str | None]]
) -> dict[str, ChangeId]:
    """After a backfill the stream starts where it began reading (P0, its watermark)
    and changes before the point it ended (P1) are applied in safe mode: the rows
    they touch may or may not have been copied already. Source -> P1, for the sources
    whose saved watermark has not passed it (a later start says nothing of the others)."""
    records = meta.backfill.load()
    unfinished = [r for r in records.values() if r.state != "done"]
    if unfinished:
        raise DaemonError(_unfinished_backfill(task, unfinished), ExitCode.WAITING)
    ends = {
        r.source: r.p1.change(0)
        for r in records.values()
        if r.p1 is not None and (r.source not in watermarks or watermarks[r.source][1] < r.p1.change(0))
    }
    if ends:
        log.info(
            "after the backfill: safe mode until %s",
            ", ".join(f"{s} passes {records[s].p1}" for s in sorted(ends)),
        )
    return ends


@dataclass(frozen=True)
class OpenedSource:
    flavor: str
    first: FirstRead | None  # a new source's start
    server_id: int | None  # of its server (None: not reachable now)


def open_sources(
    config: TaskConfig, meta: Meta, router: Router
) -> tuple[dict[str, OpenedSource], dict[str, tuple[Position, ChangeId, str | None]]]:
    """Each source asked what it is while the saved watermarks are read (the two wait on
    different servers; the downstream was reached and the meta schema made by the lease's
    tenure, `tenure.py`)."""
    known: Future[set[str]] = Future()
    with ThreadPoolExecutor(max(1, min(8, len(config.sources)))) as pool:
        reads = [pool.submit(open_source, s, i, known, router) for i, s in enumerate(config.sources)]
        try:
            watermarks = meta.watermarks.load()
        except BaseException as exc:
            known.set_exception(exc)
            raise
        known.set_result(set(watermarks))
        return {s.id: r.result() for s, r in zip(config.sources, reads, strict=True)}, watermarks


def replays(meta: Meta, flows: ShardFlows, sources: Collection[str]) -> dict[ShardId, tuple[int, int]]:
    """The resumed shards whose rows of their paused time are read again: those whose
    pause is kept as resuming have their scratch window reopened (returned: shard -> how
    far), the others their rows replayed row by row (of `sources`: a member's are its
    own). One resumed row by row has no pause saved: with one, it paused again since (a
    row refused again after `handle-error retry`), and stays so, its replay as it was (L63:
    taken for a window, it resumed at the start with no word of the operator, its refused
    row in the window; paused there for rows that could not be replayed, its DROP TABLE
    was decided, and its rows since the pause discarded)."""
    windows = {}
    for shard, (to, renames) in meta.pauses.load_replays().items():
        if shard.source not in sources:
            continue
        pause = flows[shard].pause
        if pause is not None and (pause.reason == RESUMING_REASON or to == RESUMING):
            windows[shard] = to
        else:
            flows[shard].replay_to, flows[shard].replayed = to, renames
    return windows


def validator(
    config: TaskConfig,
    infos: Mapping[str, TargetInfo],
    down: dict[str, Any],
    meta: Meta,
    file_of: Callable[[ShardId, ChangeId], str],
    metrics: Metrics,
) -> Validator | None:
    """Continuous validation (config validator.mode), checking what the applier commits
    (the applier hands it each transaction: `Validator.committed`)."""
    if config.validator.mode == "off":
        return None
    for target in infos:  # (from 0, so the first failed rows are an increase to Prometheus)
        for result in ("validated", "failed"):
            metrics.validated_rows.inc(target, result, amount=0)
    checker = Validator(
        config.validator.mode,
        config.validator.error_delay,
        infos,
        lambda: connect_downstream(down),
        meta,
        file_of,
        lambda target, result, n: metrics.validated_rows.inc(target, result, amount=n),
    )
    return checker


def open_source(source: SourceConfig, index: int, known: Future[set[str]], router: Router) -> OpenedSource:
    """A source's flavor (as configured, else as its server says), its server's id and,
    if it has no watermark yet (`known`: the sources that have one), where it starts and
    its tables' schemas there: on one connection. `index`: its place in the config's sources."""
    conn = None
    with contextlib.suppress(pymysql.err.MySQLError):
        conn = connect(source.connection_kwargs(), connect_timeout=5)
    try:
        flavor, server = source.flavor or "mariadb", None
        if conn is not None:
            with contextlib.suppress(pymysql.err.MySQLError):
                flavor = source.flavor or server_flavor(conn)
                server = server_id(conn)
        if source.id in known.result():
            return OpenedSource(flavor, None, server)
        if conn is None:
            conn = _connect_new(source, index)
        return OpenedSource(flavor, _first_read(source, conn, router), server)
    finally:
        if conn is not None:
            conn.close()


def _connect_new(source: SourceConfig, index: int) -> Any:
    """A new source has no saved position to wait from: unreachable, it stops the start,
    named with its address as `shardmerge check` names it."""
    try:
        return connect(source.connection_kwargs())
    except pymysql.err.MySQLError as exc:
        message, fix = connect_failure(f"sources[{index}]", source.host, source.port, exc)
        raise DaemonError(f"source {source.id}: {message}; {fix}", ExitCode.CONNECTION) from exc


def follow_moves(
    config: TaskConfig, meta: Meta, opened: Mapping[str, OpenedSource], watermarks: Mapping[str, tuple]
) -> bool:
    """A source whose server is another one than its positions were saved on (a primary
    failed over to its replica, the source pointed elsewhere): its saved positions moved
    to the new server's binlog by their GTIDs (replicator/apply/rebase.py). A source
    saved without its server's id takes this one's. True: positions moved."""
    saved = meta.watermarks.server_ids()
    moved, adopted = False, []
    for source in config.sources:
        now, then = opened[source.id].server_id, saved.get(source.id)
        if source.id not in watermarks or now is None or now == then:
            continue
        position, bound, gtid = watermarks[source.id]
        if then is None:
            adopted.append(meta.watermarks.sql(source.id, position, bound, gtid=gtid, server_id=now))
            continue
        if not server_rules(opened[source.id].flavor).moves_by_gtid:
            raise DaemonError(
                f"source {source.id}: its server is another one (server id {now}, was {then}); moving "
                "its positions by GTID needs MariaDB. Point the source back at its old server, or copy "
                "its shards again (backfill)",
                ExitCode.CONFIG,
            )
        if gtid is None:
            raise DaemonError(
                f"source {source.id}: its server is another one (server id {now}, was {then}) and its "
                "watermark was saved without a GTID (by an older version), so it cannot be found there. "
                "Point the source back at its old server till it saved one, or copy its shards again "
                "(backfill)",
                ExitCode.CONFIG,
            )
        meta.execute(_moved_to(source, meta, bound, gtid, now))
        log.warning(
            "source %s: its server is another one (server id %d, was %d): its saved positions moved "
            "to that server's binlog by their GTIDs, from GTID %s",
            source.id,
            now,
            then,
            gtid,
            extra={"source": source.id},
        )
        moved = True
    if adopted:
        meta.execute(adopted)
    return moved


def _moved_to(source: SourceConfig, meta: Meta, bound: ChangeId, gtid: str, server: int) -> list[str]:
    saved = SavedPositions.load(meta, source.id, bound, gtid)
    conn = connect(source.connection_kwargs())
    try:
        with conn.cursor() as cur:
            end, _ = binlog_position(cur, source.id)
    finally:
        conn.close()
    try:
        new = read_new_binlog(
            source.id, source.connection_kwargs(), source.server_id, saved.state, saved.wanted(), end
        )
        return rebase(meta, saved, new, server)
    except FailoverError as exc:
        raise DaemonError(str(exc), ExitCode.CONFIG) from exc


def _first_read(source: SourceConfig, conn, router: Router) -> FirstRead:
    """No checkpoint yet: start where the config says, or where the binlog is now,
    with the tables' schemas as they are now."""
    with conn.cursor() as cur:
        if source.start is not None and source.start.file:
            position = Position(source.start.file, source.start.pos or 4)
        elif source.start is not None and source.start.gtid:
            position = None
        else:
            position, _ = binlog_position(cur, source.id)
        return FirstRead(position, watched_schemas(cur, router))


def load_sources(
    config: TaskConfig,
    meta: Meta,
    sources: Mapping[str, SourceState],
    watermarks: Mapping[str, tuple],
    opened: Mapping[str, OpenedSource],
) -> None:
    """Each source's schema history and where it resumes; a new source's start saved."""
    writes: list[str] = []
    for source in config.sources:
        state = sources[source.id]
        state.history = meta.history.load(source.id)
        if source.id in watermarks:
            position, _, gtid = watermarks[source.id]
            state.position = position
            state.trail.read = gtid  # (till its worker says, from the server)
            state.name_file(position)
            continue
        writes += _first_start(meta, source, state, opened[source.id])
    if writes:
        # every new source's start position and schemas in one transaction, before
        # anything else: a crash later in the first start resumes from these positions
        crash_point("first_start_read")
        meta.execute(writes)
        crash_point("first_start_saved")


def _first_start(meta: Meta, source: SourceConfig, state: SourceState, opened: OpenedSource) -> list[str]:
    """The statements saving a new source's start (`_first_read`)."""
    position, schemas = opened.first.position, opened.first.schemas
    bound = position.change(-1) if position else (0, 0, -1)
    state.history = [(bound, k, sql) for k, sql in schemas.items()]
    state.position = position
    writes = schema_history.start_rows(meta, source.id, bound, schemas)
    if position is not None:
        state.name_file(position)
        start = meta.watermarks.sql(source.id, position, position.change(0), server_id=opened.server_id)
        writes.append(start)
    log.info(
        "source %s: first start at %s with %d tracked tables",
        source.id,
        position or f"GTID {source.start.gtid}",
        len(schemas),
    )
    return [w for w in writes if w]


class NotOpened(StandingChanged):
    """A member that does not coordinate found a group the coordinator has not opened yet."""


def open_group(
    target: str,
    config: TaskConfig,
    meta: Meta,
    down: dict[str, Any],
    flavor: Flavor,
    sources: Mapping[str, SourceState],
    router: Router,
    opens: bool = True,
) -> tuple[Coordinator, TargetInfo]:
    """A shard group's coordinator, as saved (a new group: its shards joined and its
    downstream table made, unless `opens` is false: a member that does not coordinate waits
    for the one that does), and what the applier knows of its table."""
    route = next(r for r in config.routes if r.target == target)  # (all fill the same columns)
    store = MetaStore(meta, target)
    upstream = next(iter(sources.values())).flavor if sources else "mariadb"
    coordinator = Coordinator(target, flavor, store, upstream=upstream, **route.coordinator_extract())
    if coordinator.target is None:
        if not opens:
            raise NotOpened(f"shard group {target} is not opened yet: the coordinator opens it")
        _first_group_start(target, coordinator, store, meta, down, flavor, sources, router)
    schema, table = target.split(".", 1)
    with connect_downstream(down) as conn:
        existing = read_table(conn, schema, table) if table_exists(conn, schema, table) else None
    info = TargetInfo(target, f"`{schema}`.`{table}`", {}, None, coordinator.version.major)
    if existing is not None:
        update_info(info, existing, flavor)
    return coordinator, info


def _first_group_start(
    target: str,
    coordinator: Coordinator,
    store: MetaStore,
    meta: Meta,
    down: dict[str, Any],
    flavor: Flavor,
    sources: Mapping[str, SourceState],
    router: Router,
) -> None:
    shards = []
    for source_id, state in sources.items():
        schemas = state.schemas_at(state.position) if state.position else state.latest_schemas()
        for key, sql in schemas.items():
            schema, table = split_table_key(key)
            route = router.route(schema, table)
            if route is not None and route.target == target:
                shards.append((ShardId(source_id, schema, table), sql))
    if not shards:
        raise DaemonError(f"no upstream table is routed to {target}; check the routes and filters")
    statements: list[str] = []
    for shard, sql in shards:
        statements += coordinator.add_shard(shard, parse_table(sql, shown=True)).downstream
    schema, table = target.split(".", 1)
    with connect_downstream(down) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{schema}`")
        if table_exists(conn, schema, table):
            wanted = materialize(coordinator.target, flavor)
            problem = not_the_join(target, read_table(conn, schema, table), wanted, flavor)
            if problem is not None:
                raise DaemonError(problem)
            statements = []  # already there (a backfill made it)
        for statement in statements:
            cur.execute(statement)
    meta.execute(store.flush_sql())
    log.info(
        "%s: %d shards joined; downstream table ready (version %s)", target, len(shards), coordinator.version
    )


def stream_server_id(configured: int, epoch: int) -> int:
    """The replica server_id a daemon streams a source's binlog with: the configured one
    under an odd lease epoch, that one XOR 2^31 under an even one (the config refuses ids
    that would make two streams share one). A standby taking over holds the next epoch, so
    its streams never share an id with the daemon it took the task from (a server ends the
    older of two dumps of one id: issue 70, the new active's streams kicked the frozen
    one's, and woken, it would kick them back). A task's members flip each source's by its
    generation (`Members.generations`): its next reader streams under the other id."""
    return configured if epoch % 2 else configured ^ STANDBY_FLIP


def start_workers(
    config: TaskConfig,
    options: Options,
    sources: Mapping[str, SourceState],
    router: Router,
    positions: Mapping[str, Position | None],
    native: dict,
    log_format: str,
    epochs: Mapping[str, int] | None = None,
    decided: Callable[[str], Mapping[str, ChangeId]] = lambda source: {},
) -> None:
    """One worker process per source, reading from `positions` (None: its GTID); `epochs`:
    what each source's stream server id flips by (`stream_server_id`; 1 where not given);
    `decided`: each source's shards' last DDLs handled (`SourceState.pins_from`)."""
    from replicator.source.spawn import worker_entry
    from replicator.source.worker_setup import WorkerSetup

    ctx = multiprocessing.get_context("forkserver")  # see replicator.source.spawn
    for source in config.sources:
        state = sources[source.id]
        position = positions[source.id]
        schemas = state.schemas_at(position) if position else state.latest_schemas()
        try:
            check_tables(config.filters.rows, source.id, schemas, str(state.flavor))
        except RowFilterError as exc:
            raise DaemonError(f"{config.path or 'config'}: {exc}", ExitCode.CONFIG) from None
        setup = WorkerSetup(
            source=source.id,
            connection=source.connection_kwargs(),
            server_id=stream_server_id(source.server_id, (epochs or {}).get(source.id, 1)),
            router=router,
            position=position,
            gtid=source.start.gtid if source.start else None,
            schemas=schemas,
            upstream=state.flavor,
            upstream_server=state.server_id,
            heartbeat=min(options.heartbeat, 0.5),
            max_backoff=options.max_backoff,
            task=config.task,
            log_format=log_format,
            log_level=logging.getLevelName(logging.getLogger().level),
            native=native,
            pins=state.pins_from(position, decided(source.id)) if position else (),
        )
        here, there = ctx.Pipe()
        process = ctx.Process(
            target=worker_entry, args=(setup, there), name=f"worker-{source.id}", daemon=True
        )
        process.start()
        there.close()
        state.pipe, state.process = here, process
        log.info(
            "source %s: reading from %s",
            source.id,
            position or "its GTID",
            extra={"source": source.id, "position": str(position) if position else None},
        )


def binlog_end(config: TaskConfig, state: SourceState) -> tuple[int, int]:
    """Where the source's binlog ends now."""
    source = next(s for s in config.sources if s.id == state.id)
    with contextlib.closing(connect(source.connection_kwargs())) as conn, conn.cursor() as cur:
        position, _ = binlog_position(cur, state.id)
    state.name_file(position)
    return file_sequence(position.file), position.pos


def _unfinished_backfill(task: str, records: list[BackfillRecord]) -> str:
    states = "; ".join(
        f"source {r.source}: {r.state}" + (f" ({r.message})" if r.message else "") for r in records
    )
    return (
        f"the backfill of task {task} did not finish ({states}); the downstream tables may be partly "
        f"filled. Run `shardmerge backfill` again before `shardmerge run`: an interrupted one continues "
        f"from its unfinished chunks, a failed one starts over (with --truncate)."
    )
