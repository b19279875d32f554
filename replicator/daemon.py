"""`shardmerge run`: the daemon of a task.

It starts one worker process per source, keeps one coordinator and one DDL thread
per shard group (target table), and applies rows with the applier. The main loop
routes what workers send: row changes to the applier (unless already applied, or
their shard is paused, or waiting behind its own DDL), DDLs to their group's
executor. It writes every source's watermark about once a second, and on SIGTERM
stops cleanly: workers stop, every routed change is committed, the watermarks are
written and the stop is recorded as clean.

Paused shards ("re-read from the paused position"): while a shard is paused its
changes are dropped and the source's watermark stays before the first one, so a
restart reads them again; when the shard resumes, its worker is rewound to the
pause position with the schemas of that position (what it sent before it took the
rewind is dropped), and every change the daemon has already routed is dropped on
the way, so only the paused shard's rows come back. What the watermark is, and
who holds it back, is in `replicator.apply.watermark`.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import queue
import signal
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import wait

import pymysql

from lattice import Flavor, materialize, parse_table
from replicator.apply.applier import Applier, TargetInfo
from replicator.apply.ddl_executor import DDLJob, DDLResult, GroupExecutor, update_info
from replicator.apply.gate import DDLGate
from replicator.apply.inspect import not_the_join, read_table, table_exists
from replicator.apply.meta import RESUMING, BackfillRecord, Meta, MetaStore, Pause
from replicator.apply.refused import Refused
from replicator.apply.validator import Validator
from replicator.apply.watermark import watermark
from replicator.apply.windows import Windows
from replicator.config import TaskConfig
from replicator.control.admin import READY_TIMEOUT, AdminError, AdminServer, Calls
from replicator.control.operations import routes
from replicator.errors import ExitCode
from replicator.faults import crash_point
from replicator.heap import freeze_long_lived
from replicator.metrics import Metrics
from replicator.schema.coordinator import Coordinator
from replicator.schema.event_filter import ROW_KINDS, ignored_rows
from replicator.schema.group import GroupView
from replicator.servers import connect, connect_downstream, server_flavor
from replicator.shard_flow import Admission, ShardFlow, ShardFlows
from replicator.shard_id import ShardId, split_table_key
from replicator.source.messages import (
    Change,
    Changes,
    DDLEvent,
    Heartbeat,
    NativeTargets,
    Rewind,
    Rewound,
    RowEvent,
    Stop,
    WorkerFailed,
)
from replicator.source.positions import ZERO, ChangeId, Position, file_sequence
from replicator.source.routing import Router
from replicator.source.row_events import ROWS_OPS
from replicator.source.schema_change import ReplayRename
from replicator.source.spawn import start_fork_server
from replicator.source.upstream import binlog_position, watched_schemas

OUTSIDE_GROUP = "not in its group"

log = logging.getLogger("shardmerge.daemon")
WATERMARK_EVERY = 1.0
FLUSH_EVERY = 0.02  # seconds a partial batch may wait before it is sent to its partition


class DaemonError(RuntimeError):
    """The daemon cannot start or go on; `code` says what kind of thing is wrong."""

    def __init__(self, message: str, code: ExitCode = ExitCode.CONFIG):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class FirstRead:
    """A new source's start (None: its configured GTID) and its tables' CREATE TABLE there."""

    position: Position | None
    schemas: dict[str, str]


@dataclass
class SourceState:
    id: str
    flavor: str
    history: list[tuple[ChangeId, str, str | None]] = field(default_factory=list)
    position: Position | None = None  # the start of the transaction the worker reads
    furthest: Position | None = None  # the furthest it has read (a rewind sets `position` back)
    files: dict[int, str] = field(default_factory=dict)  # file sequence -> name
    event_time: float = 0.0
    connected: bool = False
    error: str | None = None
    received: int = 0
    process: multiprocessing.process.BaseProcess | None = None
    pipe: object = None
    paused: bool = False  # by the operator: its pipe is not read
    rewinds: int = 0  # Rewinds sent to the worker
    rewinding: int = 0  # the Rewind not acknowledged yet (0: none): what arrives before is stale
    reconnects: int = 0  # streams lost and tried again

    def file_of(self, seq: int) -> str:
        if seq in self.files:
            return self.files[seq]
        base = next(iter(self.files.values()), "mysql-bin.000001").rsplit(".", 1)[0]
        return f"{base}.{seq:06d}"

    def schemas_at(self, position: Position) -> dict[str, str]:
        """The tracked tables' CREATE TABLE as they were where `position` starts."""
        bound = position.change(0)
        tables: dict[str, str | None] = {}
        for cid, key, sql in self.history:
            if cid < bound:
                tables[key] = sql
        return {k: v for k, v in tables.items() if v is not None}


class Daemon:
    def __init__(self, config: TaskConfig, log_format: str = "text"):
        self.config = config
        self.log_format = log_format
        self.options = config.options
        self.router = Router.from_config(config)
        self.flavor = Flavor.parse(config.target.flavor)
        self.down = config.target.connection_kwargs()
        self.meta = Meta(lambda: connect_downstream(self.down), config.target.meta_schema, config.task)
        self.sources: dict[str, SourceState] = {}
        self.coordinators: dict[str, Coordinator] = {}
        self.executors: dict[str, GroupExecutor] = {}
        self.infos: dict[str, TargetInfo] = {}
        self.results: queue.Queue[DDLResult] = queue.Queue()
        self.errors: queue.Queue[Refused] = queue.Queue()
        events = config.filters.events
        self.flows = ShardFlows(lambda shard: ignored_rows(events, shard))  # each shard's live state
        self.gate = DDLGate()  # shards' DDLs in progress and what waits behind them
        self.filtered: dict[ShardId, dict[str, int]] = {}  # events filters.events ignored, per kind
        self.validator: Validator | None = None  # continuous validation (config validator.mode)
        self.stopping = threading.Event()
        self.safe_until = 0.0
        self.safe_before: dict[str, ChangeId] = {}  # source -> end of its backfill (P1)
        self.started = time.time()
        self.applier: Applier | None = None
        self.calls = Calls()  # admin API requests, served by the main loop
        self.metrics = Metrics()
        self.admin: AdminServer | None = None
        self.waiters: dict[int, tuple[str, Future]] = {}  # id(operator job) -> its group, its decision
        self._native: dict = {}  # the shapes the workers were last told (NativeTargets)
        self.downstream_error: str | None = None  # the last watermark write's failure, until one works
        # resumed shards' rows of their paused time, through scratch tables (apply/windows.py)
        self.windows = Windows(
            self.flows,
            self.sources,
            self.meta,
            self.down,
            self.router,
            self.infos,
            config.target.flavor,
            self._set_pause,
        )

    # -- lifecycle ----------------------------------------------------------------------------
    def run(self) -> int:
        signal.signal(signal.SIGTERM, lambda *_: self.stopping.set())
        signal.signal(signal.SIGINT, lambda *_: self.stopping.set())
        self.setup()
        try:
            self.loop()
        finally:
            self.shutdown()
        return 0

    def stop(self) -> None:
        self.stopping.set()

    def setup(self) -> None:
        self._start_admin()  # first: a port in use stops the start before anything else ran
        start_fork_server()  # (if `run` did not yet) its imports run while the daemon connects
        sources = self.config.sources
        # each source is asked what it is while the downstream is made ready: the two wait
        # on different servers
        known: Future[set[str]] = Future()
        with ThreadPoolExecutor(max(1, min(8, len(sources)))) as pool:
            reads = [pool.submit(self._open_source, s, known) for s in sources]
            try:
                self._wait_for_downstream()
                self.meta.ensure()
                self._load_backfill()
                watermarks = self.meta.load_watermarks()
            except BaseException as exc:
                known.set_exception(exc)
                raise
            known.set_result(set(watermarks))
            opened = [r.result() for r in reads]
        for source, (flavor, _) in zip(sources, opened, strict=True):
            self.sources[source.id] = SourceState(source.id, flavor)
        partitions, by_source = self._partitions()
        self._load_sources(watermarks, {s.id: first for s, (_, first) in zip(sources, opened, strict=True)})
        self.flows.restore(self.meta.load_pauses(), self.meta.load_ddl_done())
        windows = {}  # resumed shards whose paused rows were not merged yet: read again
        for shard, (to, renames) in self.meta.load_replays().items():
            if self.flows[shard].pause is not None:
                windows[shard] = to
            else:
                self.flows[shard].replay_to, self.flows[shard].replayed = to, renames
        checkpoints = self.meta.load_checkpoints()
        for target in self.router.targets():
            self._setup_group(target)
        self.applier = Applier(
            self.meta,
            self.infos,
            self.down,
            partitions,
            self.options.batch_size,
            self._safe_mode,
            checkpoints,
            self._apply_error,
            self.options.max_backoff,
            metrics=self.metrics,
            by_source=by_source,
            skip_refused=self.options.on_row_error == "skip",
        )
        self.applier.file_of = lambda shard, cid: self.sources[shard.source].file_of(cid[0])
        self.windows.applier = self.applier
        if self.config.validator.mode != "off":
            self.validator = Validator(
                self.config.validator.mode,
                self.config.validator.error_delay,
                self.infos,
                lambda: connect_downstream(self.down),
                self.meta,
                self.applier.file_of,
                lambda target, result, n: self.metrics.validated_rows.inc(target, result, amount=n),
            )
            self.applier.on_committed = self.validator.committed
        for target, coordinator in self.coordinators.items():
            store = coordinator.store
            self.executors[target] = GroupExecutor(
                target,
                coordinator,
                store,
                self.meta,
                self.applier,
                self.infos[target],
                self.down,
                self.results,
                self.config.filters.events,
                copy_mode=self.options.copy_ddl,
            )
            recovered, refused = self.executors[target].recover()
            if recovered:
                log.info("%s: finished %d journal entries left by a crash", target, recovered)
            for entry, error in refused:
                shard = entry["shard"]
                if shard and not self.flows.is_paused(shard):
                    self._pause(shard, None, _refused_entry(target, entry["seq"], error))
            self.executors[target].refresh()
            view = self.executors[target].publish()
            self.flows.set_cleared(view.shards, view.cleared)
        for shard, block in self._blocked().items():
            if not self.flows.is_paused(shard):  # blocked but its pause was not saved before a crash
                self._pause_at(shard, block, save=True)
        grouped = {s for view in self.views().values() for s in view.shards}
        for shard in [s for s in self.flows.pauses() if s not in grouped]:
            self._unpause_left(shard)  # it left while paused, the daemon killed before it said so
        blocked = self._blocked()
        for shard, until in windows.items():
            if self.flows[shard].pause is not None and shard not in blocked:
                if until == RESUMING:  # resumed by a decision, the daemon stopped before it said how far
                    until = self._binlog_end(shard.source)
                self.windows.reopen(shard, until)
        self.applier.dropped.update({shard: pause.first for shard, pause in self.flows.pauses().items()})
        self.meta.mark_started(partitions, "source" if by_source else "key")
        self._start_workers()
        freeze_long_lived()  # (after: the workers need nothing of it)
        self.applier.start()
        if self.validator is not None:
            self.validator.start()
        for executor in self.executors.values():
            executor.start()
        log.info(
            "task %s running: %d sources, %d shard groups, %d partitions%s",
            self.config.task,
            len(self.sources),
            len(self.coordinators),
            partitions,
            " (safe mode)" if self._safe_mode() else "",
        )

    def shutdown(self) -> None:
        log.info("stopping")
        if self.admin is not None:
            self.admin.stop()
        for state in self.sources.values():
            state.paused = False  # what the workers still send is taken, paused or not
        for state in self.sources.values():
            if state.pipe is not None:
                with contextlib.suppress(BrokenPipeError, OSError):
                    state.pipe.send(Stop())
        # take what the workers still send, then stop taking
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(
            s.process and s.process.is_alive() for s in self.sources.values()
        ):
            self._receive(0.1)
        self._receive(0)
        for state in self.sources.values():
            if state.process is not None:
                state.process.join(timeout=5)
                if state.process.is_alive():
                    state.process.kill()
        while any(not e.idle() for e in self.executors.values()):
            self._ddl_results()
            time.sleep(0.05)
        self._ddl_results()
        failed = self.applier is not None and self.applier.failure is not None
        if self.applier is not None:
            if not failed:
                self.applier.wait_idle()
                self._write_watermarks()
            self.applier.stop()
        if self.validator is not None:
            self.validator.stop()
        for executor in self.executors.values():
            executor.stop()
        if failed:
            # not marked clean: the next start runs in safe mode for a while
            self.meta.close()
            log.error("stopped after an applier failure")
            return
        self.meta.mark_stopped()
        self.meta.close()
        log.info("stopped cleanly")

    # -- setup pieces --------------------------------------------------------------------------
    def _wait_for_downstream(self) -> None:
        backoff = 0.5
        while True:
            try:
                connect_downstream(self.down).close()
                return
            except pymysql.err.MySQLError as exc:
                if self.stopping.is_set():
                    raise DaemonError(
                        f"downstream {self.down['host']}:{self.down['port']} unreachable: {exc}",
                        ExitCode.CONNECTION,
                    ) from exc
                log.warning(
                    "downstream %s:%s unreachable (%s); retrying in %.1fs",
                    self.down["host"],
                    self.down["port"],
                    exc,
                    backoff,
                )
                time.sleep(backoff)
                backoff = min(backoff * 2, self.options.max_backoff)

    def _partitions(self) -> tuple[int, bool]:
        """How many partitions, and whether changes are spread over them by source (row
        events applied as they are) rather than by key. A checkpoint means something
        only under the spread it was written with: after an unclean stop the last
        run's is kept until a clean one."""
        state = self.meta.task_state()
        wanted = (self.options.workers, self._row_events())
        if state is None:
            return wanted
        clean, count, spread = state
        stored = (count, spread == "source")
        if not clean:
            self.safe_until = time.monotonic() + self.options.safe_mode_window
            log.info("the last stop was not clean: safe mode for %.0fs", self.options.safe_mode_window)
        if stored != wanted:
            if clean:
                # after a clean stop every checkpoint is below the watermarks: start afresh
                self.meta.clear_checkpoints()
                return wanted
            log.warning(
                "keeping %d partitions by %s until a clean stop (the config asks %d by %s)",
                count,
                spread,
                wanted[0],
                "source" if wanted[1] else "key",
            )
        return stored

    def _row_events(self) -> bool:
        """Row events can go as they are: MariaDB sources and target (BINLOG statements)."""
        return (
            self.options.row_events
            and self.flavor is Flavor.MARIADB
            and all(s.flavor == "mariadb" for s in self.sources.values())
        )

    def _load_backfill(self) -> None:
        """After a backfill the stream starts where it began reading (P0, its watermark)
        and changes before the point it ended (P1) are applied in safe mode: the rows
        they touch may or may not have been copied already."""
        records = self.meta.load_backfill()
        unfinished = [r for r in records.values() if r.state != "done"]
        if unfinished:
            raise DaemonError(_unfinished_backfill(self.config.task, unfinished), ExitCode.WAITING)
        for record in records.values():
            if record.p1 is not None:
                self.safe_before[record.source] = record.p1.change(0)
        if self.safe_before:
            log.info(
                "after the backfill: safe mode until %s",
                ", ".join(f"{s} passes {records[s].p1}" for s in sorted(self.safe_before)),
            )

    def _open_source(self, source, known: Future[set[str]]) -> tuple[str, FirstRead | None]:
        """A source's flavor (as configured, else as its server says) and, if it has no
        watermark yet (`known`: the sources that have one), where it starts and its
        tables' schemas there: on one connection."""
        conn = None
        with contextlib.suppress(pymysql.err.MySQLError):
            conn = connect(source.connection_kwargs(), connect_timeout=5)
        try:
            flavor = source.flavor or "mariadb"
            if not source.flavor and conn is not None:
                with contextlib.suppress(pymysql.err.MySQLError):
                    flavor = server_flavor(conn)
            if source.id in known.result():
                return flavor, None
            if conn is None:
                conn = connect(source.connection_kwargs())  # unreachable: its error stops the start
            return flavor, self._first_read(source, conn)
        finally:
            if conn is not None:
                conn.close()

    def _first_read(self, source, conn) -> FirstRead:
        """No checkpoint yet: start where the config says, or where the binlog is now,
        with the tables' schemas as they are now."""
        with conn.cursor() as cur:
            if source.start is not None and source.start.file:
                position = Position(source.start.file, source.start.pos or 4)
            elif source.start is not None and source.start.gtid:
                position = None
            else:
                position, _ = binlog_position(cur, source.id)
            return FirstRead(position, watched_schemas(cur, self.router))

    def _load_sources(self, watermarks: dict, first: dict[str, FirstRead | None]) -> None:
        writes: list[str] = []
        for source in self.config.sources:
            state = self.sources[source.id]
            state.history = self.meta.load_history(source.id)
            if source.id in watermarks:
                position, _, _ = watermarks[source.id]
                state.position = position
                state.files[file_sequence(position.file)] = position.file
                continue
            writes += self._first_start(source, state, first[source.id])
        if writes:
            # every new source's start position and schemas in one transaction, before
            # anything else: a crash later in the first start resumes from these positions
            crash_point("first_start_read")
            self.meta.execute(writes)
            crash_point("first_start_saved")

    def _first_start(self, source, state: SourceState, read: FirstRead) -> list[str]:
        """The statements saving a new source's start (`_first_read`)."""
        position, schemas = read.position, read.schemas
        bound = position.change(-1) if position else (0, 0, -1)
        state.history = [(bound, k, sql) for k, sql in schemas.items()]
        state.position = position
        writes = [self.meta.sql_history(source.id, bound, schemas)] if schemas else []
        if position is not None:
            state.files[file_sequence(position.file)] = position.file
            writes.append(self.meta.sql_watermark(source.id, position, position.change(0)))
        log.info(
            "source %s: first start at %s with %d tracked tables",
            source.id,
            position or f"GTID {source.start.gtid}",
            len(schemas),
        )
        return [w for w in writes if w]

    def _setup_group(self, target: str) -> None:
        route = next(r for r in self.config.routes if r.target == target)  # (all fill the same columns)
        store = MetaStore(self.meta, target)
        upstream = next(iter(self.sources.values())).flavor if self.sources else "mariadb"
        extract = route.coordinator_extract()
        coordinator = Coordinator(target, self.flavor, store, upstream=upstream, **extract)
        self.coordinators[target] = coordinator
        if coordinator.target is None:
            self._first_group_start(target, coordinator, store)
        schema, table = target.split(".", 1)
        with connect_downstream(self.down) as conn:
            existing = read_table(conn, schema, table) if table_exists(conn, schema, table) else None
        info = TargetInfo(target, f"`{schema}`.`{table}`", {}, None, coordinator.version.major)
        if existing is not None:
            update_info(info, existing, self.flavor)
        self.infos[target] = info

    def _first_group_start(self, target: str, coordinator: Coordinator, store: MetaStore) -> None:
        shards = []
        for source_id, state in self.sources.items():
            for key, sql in (
                state.schemas_at(state.position).items()
                if state.position
                else {k: v for _, k, v in state.history if v}.items()
            ):
                schema, table = split_table_key(key)
                route = self.router.route(schema, table)
                if route is not None and route.target == target:
                    shards.append((ShardId(source_id, schema, table), sql))
        if not shards:
            raise DaemonError(f"no upstream table is routed to {target}; check the routes and filters")
        statements: list[str] = []
        for shard, sql in shards:
            statements += coordinator.add_shard(shard, parse_table(sql, shown=True)).downstream
        schema, table = target.split(".", 1)
        with connect_downstream(self.down) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{schema}`")
            if table_exists(conn, schema, table):
                wanted = materialize(coordinator.target, self.flavor)
                problem = not_the_join(target, read_table(conn, schema, table), wanted, self.flavor)
                if problem is not None:
                    raise DaemonError(problem)
                statements = []  # already there (a backfill made it)
            for statement in statements:
                cur.execute(statement)
        self.meta.execute(store.flush_sql())
        log.info(
            "%s: %d shards joined; downstream table ready (version %s)",
            target,
            len(shards),
            coordinator.version,
        )

    def _start_workers(self) -> None:
        # (imported here: the fork server has it; the daemon's start needs none of it)
        from replicator.source.worker import WorkerSetup, worker_main

        ctx = multiprocessing.get_context("forkserver")  # see replicator.source.spawn
        self._native = self._native_shapes()
        for source in self.config.sources:
            state = self.sources[source.id]
            position = self._resume_position(state)
            schemas = state.schemas_at(position) if position else {k: v for _, k, v in state.history if v}
            setup = WorkerSetup(
                source=source.id,
                connection=source.connection_kwargs(),
                server_id=source.server_id,
                router=self.router,
                position=position,
                gtid=source.start.gtid if source.start else None,
                schemas=schemas,
                upstream=state.flavor,
                heartbeat=min(self.options.heartbeat, 0.5),
                max_backoff=self.options.max_backoff,
                task=self.config.task,
                log_format=self.log_format,
                log_level=logging.getLevelName(logging.getLogger().level),
                native=self._native,
            )
            here, there = ctx.Pipe()
            process = ctx.Process(
                target=worker_main, args=(setup, there), name=f"worker-{source.id}", daemon=True
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

    def _resume_position(self, state: SourceState) -> Position | None:
        """The watermark: before the workers run, the saved one or a paused shard's start."""
        for pause in self.flows.pauses().values():
            if pause.source == state.id:
                state.files.setdefault(file_sequence(pause.position.file), pause.position.file)
        bound = self._bound(state)
        return Position(state.file_of(bound[0]), bound[1]) if bound is not None else None

    # -- the main loop ---------------------------------------------------------------------------
    def loop(self) -> None:
        last_watermark = last_flush = time.monotonic()
        while not self.stopping.is_set():
            self._receive(FLUSH_EVERY)
            self.calls.serve_pending()
            self.applier.check()
            self._ddl_results()
            self._apply_errors()
            self.windows.merge_ready()
            self._tell_native()
            now = time.monotonic()
            if now - last_flush >= FLUSH_EVERY:
                self.applier.flush()
                last_flush = now
            if now - last_watermark >= WATERMARK_EVERY:
                self._write_watermarks()
                last_watermark = now
            for state in self.sources.values():
                if state.process is not None and not state.process.is_alive() and not self.stopping.is_set():
                    died = f"the worker of source {state.id} died: {state.error or 'no message'}"
                    raise DaemonError(died, ExitCode.INTERNAL)

    def _native_shapes(self) -> dict:
        """What each target's rows hold, for the workers to send row events of shards
        holding the same as they are; none while every row is decoded anyway."""
        if self.applier is None or not self.applier.as_is or self.options.safe_mode or self.safe_before:
            return {}  # (safe_before: until every source has passed the end of its backfill)
        if time.monotonic() < self.safe_until:
            return {}
        return {t: info.shape for t, info in self.infos.items() if info.shape is not None}

    def _tell_native(self) -> None:
        """Tell the workers when a target's shape changed (a DDL ran), safe mode ended
        or the target refused BINLOG statements. Events they sent before they heard it
        are checked again where they are applied."""
        shapes = self._native_shapes()
        if shapes == self._native:
            return
        self._native = shapes
        for state in self.sources.values():
            if state.pipe is not None:
                with contextlib.suppress(BrokenPipeError, OSError):
                    state.pipe.send(NativeTargets(shapes))

    def _receive(self, timeout: float) -> None:
        pipes = {s.pipe: s for s in self.sources.values() if s.pipe is not None and not s.paused}
        if not pipes:
            time.sleep(timeout)
            return
        for pipe in wait(list(pipes), timeout):
            state = pipes[pipe]
            try:
                while pipe.poll():
                    self._message(state, pipe.recv())
            except (EOFError, OSError):
                state.pipe = None

    def _message(self, state: SourceState, message) -> None:
        if state.rewinding and not isinstance(message, WorkerFailed):
            if isinstance(message, Rewound) and message.seq == state.rewinding:
                state.rewinding = 0
            return
        if isinstance(message, Changes):
            self._note_position(state, message.position)
            if message.items:
                state.event_time = message.event_time or state.event_time
            else:  # nothing new read: a heartbeat's time stands
                state.event_time = max(state.event_time, message.event_time)
            state.connected, state.error = True, None
            for change in message.items:
                self._change(change)
            state.received += len(message.items)
        elif isinstance(message, DDLEvent):
            self._schema_change(state, message)
        elif isinstance(message, Heartbeat):
            if message.position:
                self._note_position(state, message.position)
            if message.connected:
                # the server's heartbeat: the stream is read to its end, nothing is behind
                # (an idle source shows no lag, not the age of its last event)
                state.event_time = max(state.event_time, message.event_time)
            state.connected, state.error = message.connected, message.error
            if not message.connected:  # the worker lost the stream and tries again after a backoff
                state.reconnects += 1
                self.metrics.reconnects.inc(state.id)
        elif isinstance(message, WorkerFailed):
            state.error = message.error
            log.error(
                "source %s: worker failed: %s",
                state.id,
                message.error,
                extra={"source": state.id, "position": str(state.position) if state.position else None},
            )

    def _note_position(self, state: SourceState, text: str) -> None:
        if not text:
            return
        position = Position.parse(text)
        state.position = position
        if state.furthest is None or state.furthest < position:
            state.furthest = position
        state.files[file_sequence(position.file)] = position.file

    def _change(self, change: Change) -> None:
        shard = change.shard
        flow = self.flows[shard]
        admission = flow.admit(
            change.id,
            _op(change),
            lambda: self._in_group(change),
            lambda: self.applier.already_applied(change),
            lambda: self.gate.closed(shard),
        )
        if admission.routed:
            flow.routed = change.id
        if admission is Admission.SUBMIT:
            self._submit(flow, change)
        elif admission is Admission.HELD:
            self.gate.hold(shard, change)  # cleared on release: its DDL may start a rename
        elif admission is Admission.FILTERED:
            self._filtered(shard, ROW_KINDS[_op(change)])
        elif admission is Admission.LEFT:
            self._pause_outside(change)

    def _filtered(self, shard: ShardId, kind: str) -> None:
        counts = self.filtered.setdefault(shard, {})
        counts[kind] = counts.get(kind, 0) + 1
        self.metrics.filtered_events.inc(str(shard), kind)

    def _submit(self, flow: ShardFlow, change: Change | RowEvent) -> None:
        """To the applier; a row event as its rows where the shard clears a column of a
        pending rename (its events hold no such thing), those not applied already."""
        if flow.window is not None and self.windows.take(flow, change):
            return
        if flow.replay_to is not None and change.id[:2] > flow.replay_to:
            flow.replay_to, flow.replayed = None, ()
            self.meta.execute([self.meta.sql_replayed(flow.shard)])
        if flow.replay_to is not None:
            rows = change.codec.changes(change) if isinstance(change, RowEvent) else [change]
            info = self.infos[change.target]
            for row in rows:
                if not self.applier.already_applied(row):
                    self.applier.submit(_clear_renamed(flow, _replayed(row, flow.replayed, info.columns)))
        elif not isinstance(change, RowEvent):
            self.applier.submit(_clear_renamed(flow, change))
        elif not flow.cleared:
            self.applier.submit(change)
        else:
            for row in change.codec.changes(change):
                if not self.applier.already_applied(row):
                    self.applier.submit(_clear_renamed(flow, row))

    def _schema_change(self, state: SourceState, message: DDLEvent) -> None:
        if message.tables:
            for key, sql in message.tables.items():
                state.history.append((message.id, key, sql))
        if message.shard is None:
            if message.tables:
                statement = self.meta.sql_history(state.id, message.id, message.tables)
                self.meta.execute([statement])
            return
        flow = self.flows[message.shard]
        if flow.window is not None and self.windows.take_ddl(flow, message):
            return
        if flow.decided_before(message.id):
            return  # handled before a restart or a rewind; the tracker has followed it again
        if message.target not in self.executors:
            return
        crash_point("ddl_seen")
        job = DDLJob(message.shard, message)
        if self.gate.closed(message.shard):
            self.gate.hold(message.shard, job)  # after the changes before it
        else:
            self._start_ddl(job)

    def _start_ddl(self, job: DDLJob) -> None:
        """Hand a DDL to its group's executor; the shard's later changes wait. Every
        earlier change is submitted by now, so the executor's barrier covers them."""
        self.gate.start(job)
        self.executors[job.change.target].submit(job)
        crash_point("ddl_queued")

    def _release(self, shard: ShardId) -> None:
        """The shard's DDL is done: submit what waited behind it, up to its next DDL."""
        changes, next_job = self.gate.finish(shard)
        if not self.flows.is_paused(shard):
            flow = self.flows[shard]
            for change in changes:
                # as the DDL left the shard: a rename it started clears the old name in the
                # rows written right behind it, else the last shard's copy overwrites them
                self._submit(flow, change)
        crash_point("shard_released")
        if next_job is not None:
            self._start_ddl(next_job)

    def _ddl_results(self) -> None:
        while True:
            try:
                result = self.results.get_nowait()
            except queue.Empty:
                return
            self._ddl_result(result)

    def _ddl_result(self, result: DDLResult) -> None:
        job, decision = result.job, result.decision
        shard = job.shard
        if job.change is None:  # an operator's request: answer it; a refusal pauses nothing
            target, waiter = self.waiters.pop(id(job))
            if decision is None:
                self.flows[shard].discard_on_resume = False
                waiter.set_exception(AdminError(409, result.error or "the request failed"))
                return
            for resumed in decision.unblocked:
                self._resume(resumed, scratch=True)
            if self.flows.is_paused(shard) and shard not in decision.blocked:
                self._resume(shard, scratch=True)
            self.flows[shard].discard_on_resume = False
            self.metrics.ddl_decisions.inc(target, decision.result)
            waiter.set_result(decision)
            return
        target = job.change.target
        self.metrics.ddl_decisions.inc(target, decision.result if decision else "failed")
        if result.filtered:
            self._filtered(shard, result.filtered)
        if job.change is not None:
            self.flows[shard].decided(job.change.id)
        if result.view is not None and job.change is not None:
            self.flows.set_cleared(result.view.shards, result.view.cleared)
        if decision is None:
            log.error(
                "DDL of %s failed: %s; the shard pauses",
                shard,
                result.error,
                extra={
                    "shard": shard,
                    "source": shard.source,
                    "position": job.change and job.change.position,
                },
            )
            self._pause(shard, job.change, self._failed_ddl_reason(target, result.error))
            if job.change is not None:
                self._release(shard)
            return
        if shard in decision.blocked and not self.flows.is_paused(shard):
            self._pause(shard, job.change, result.block_reason or decision.message)
        self._left_paused(shard, result.view)
        self._rejoined(shard, result.view, decision)
        for resumed in decision.unblocked:
            self.flows[resumed].replayed = (result.resumed_renames or {}).get(resumed, ())
            self._resume(resumed, job.change if resumed == shard else None, scratch=True)
        if job.change is not None:
            self._release(shard)

    def _in_group(self, change: Change) -> bool:
        """A row of a shard its group does not have (its table left: dropped or renamed
        away) must not reach the applier: the downstream table is not its join."""
        executor = self.executors.get(change.target)
        return executor is None or change.shard in executor.view.shards

    # -- pauses --------------------------------------------------------------------------------
    def _pause_outside(self, change: Change) -> None:
        state = self.sources[change.shard.source]
        position = Position(state.file_of(change.id[0]), change.id[1])
        reason = (
            f"{OUTSIDE_GROUP}: rows of {change.shard} arrived while its table is not in the group "
            f"{change.target} (dropped or renamed away); they wait until a table comes back under "
            f"its name, or `shardctl set-schema` puts the shard back"
        )
        self._set_pause(Pause(change.shard, position, change.id, reason))

    def _left_paused(self, shard: ShardId, view: GroupView | None) -> None:
        """A paused shard whose table left the group (DROP TABLE, RENAME TABLE away) is
        paused no more: nothing can resume it, and its pause would hold its source's
        watermark for good. What it wrote while paused is not downstream: it goes with
        its table (the rows downstream are those it had when it paused), said in the log."""
        if view is not None and shard not in view.shards:
            self._unpause_left(shard)

    def _unpause_left(self, shard: ShardId) -> None:
        pause = self.flows[shard].pause
        if pause is None or pause.reason.startswith(OUTSIDE_GROUP):
            return
        log.warning(
            "shard %s left its group while paused (%s): the rows it wrote since %s are not downstream",
            shard,
            pause.reason,
            pause.position,
            extra={"shard": shard, "source": pause.source, "position": str(pause.position)},
        )
        self.flows[shard].discard_on_resume = True
        self._resume(shard)

    def _rejoined(self, shard: ShardId, view: GroupView | None, decision) -> None:
        """A shard paused outside its group resumes once a DDL puts it back."""
        pause = self.flows[shard].pause
        if pause is None or not pause.reason.startswith(OUTSIDE_GROUP) or shard in decision.blocked:
            return
        if view is not None and shard in view.shards:
            self._resume(shard)

    def _pause(self, shard: ShardId, change: DDLEvent | None, reason: str) -> None:
        if change is not None:
            position = Position.parse(change.next_position)
            first = position.change(0)
        else:
            state = self.sources[shard.source]
            position = state.position
            first = position.change(0)
        self._set_pause(Pause(shard, position, first, reason))

    def _pause_at(self, shard: ShardId, block, save: bool) -> None:
        state = self.sources.get(shard.source)
        position = state.position if state and state.position else None
        if block.position:
            position = Position.parse(block.position)
        if position is None:
            return
        self._set_pause(Pause(shard, position, position.change(0), block.reason), save)

    def _set_pause(self, pause: Pause, save: bool = True, also: list[str] = ()) -> None:
        """`also`: statements saved with the pause (the refused row it is for)."""
        self.flows[pause.shard].pause = pause
        self.gate.drop_changes(pause.shard)  # its changes will be read again; its DDLs wait on
        if self.applier is not None:
            self.applier.drop_from(pause.shard, pause.first)
        if save:
            self.meta.execute([self.meta.sql_pause(pause), *also])
        log.warning(
            "shard %s paused from %s: %s",
            pause.shard,
            pause.position,
            pause.reason,
            extra={"shard": pause.shard, "source": pause.source, "position": str(pause.position)},
        )

    def _resume(self, shard: ShardId, by: DDLEvent | None = None, scratch: bool = False) -> None:
        """`scratch`: a blocked shard a decision resumes, whose table may have changed while
        paused: its rows of that time go through a scratch table (`Windows.open`); a shard paused by
        a row has them read again row by row (its refused row handled as the operator said).
        `by`: the shard's own DDL that resumes it (its rows up to its end are of its paused
        time, read there or not)."""
        flow = self.flows[shard]
        pause, flow.pause = flow.pause, None
        if pause is None:
            if flow.window is None and flow.replay_to is None:
                self.meta.execute([self.meta.sql_replayed(shard)])  # (its decision saved one)
            return
        state = self.sources[pause.source]
        replay = []
        window = None
        if not flow.discard_on_resume and state.furthest is not None:
            # what it wrote while paused has been read up to here (kept across a restart)
            until = (file_sequence(state.furthest.file), state.furthest.pos)
            if by is not None:  # (its DDLs after it were decided as any shard's: not of the window)
                end = Position.parse(by.next_position)
                until = (file_sequence(end.file), end.pos)
            window = self.windows.open(pause, until) if scratch else None
            if window is None:
                flow.replay_to = until
            replay = [self.meta.sql_replay(shard, until, flow.replayed if window is None else ())]
        # (a window keeps the pause saved till its merge: a restart reads it again from there)
        self.meta.execute([*([] if window is not None else [self.meta.sql_unpause(shard)]), *replay])
        flow.window = window
        crash_point("shard_resumed")
        self.applier.dropped.pop(shard, None)
        if flow.discard_on_resume:
            # binlog skip: the rows written since the pause are dropped, not read again
            flow.discard_on_resume = False
            log.info(
                "shard %s resumes; its rows since %s are discarded",
                shard,
                pause.position,
                extra={"shard": shard, "source": pause.source, "position": str(pause.position)},
            )
            return
        first = pause.first
        flow.routed = (first[0], first[1], first[2] - 1)
        # (a DDL of it read past its paused time waits for its rows before it, read again:
        # handed on at once, it ran before them; live stories seed 25519)
        if replay:
            self.gate.drop_jobs_from(shard, until)
        # never forward of what the daemon has taken (a rewind not acknowledged yet has
        # set that back, and this one replaces it): shards resumed together each need
        # their own pause read again, and a later pause is not yet read at all
        # (`routed` drops what a shard has had)
        position = pause.position
        if state.position is not None and state.position < position:
            position = state.position
        log.info(
            "shard %s resumes: re-reading source %s from %s",
            shard,
            pause.source,
            position,
            extra={"shard": shard, "source": pause.source, "position": str(position)},
        )
        if state.pipe is not None:
            # what the worker sends until it has rewound was read before: dropped, and
            # read again (for the resumed shard, the pipe may hold its newer changes,
            # which would otherwise pass before its older ones are read again)
            state.rewinds += 1
            state.rewinding = state.rewinds
            state.position = position  # everything from here is read again
            state.files.setdefault(file_sequence(position.file), position.file)
            state.pipe.send(Rewind(str(position), state.schemas_at(position), state.rewinds))

    def _binlog_end(self, source_id: str) -> tuple[int, int]:
        source = next(s for s in self.config.sources if s.id == source_id)
        with contextlib.closing(connect(source.connection_kwargs())) as conn, conn.cursor() as cur:
            position, _ = binlog_position(cur, source_id)
        self.sources[source_id].files.setdefault(file_sequence(position.file), position.file)
        return file_sequence(position.file), position.pos

    def _apply_error(self, refused: Refused) -> None:
        self.errors.put(refused)  # from an apply thread: handled by the main loop

    def _apply_errors(self) -> None:
        while True:
            try:
                refused = self.errors.get_nowait()
            except queue.Empty:
                return
            shard, cid = refused.shard, refused.id
            position = Position(self.sources[shard.source].file_of(cid[0]), cid[1])
            which = f"--source {shard.source} --table {shard.table_key}"
            message = (
                f"{refused.message}, at {position}; fix the downstream table (or the row upstream), then "
                f"`shardctl handle-error {which} retry` reads the shard's rows again from here (`skip`: "
                "leave the row out, into the dead-letter table; `replace --sql ...`: write it your way)"
            )
            pending = self.meta.sql_dead_letter(refused, position.file, "pending")
            self._set_pause(Pause(shard, position, (cid[0], cid[1], 0), message), also=[pending])

    def _blocked(self) -> dict:
        blocked = {}
        for view in self.views().values():
            blocked.update(view.blocked)
        return blocked

    def views(self) -> dict[str, GroupView]:
        """Each group as its last decision left it (replicator/schema/group.py): what
        this thread, the admin API and the metrics read of the coordinators."""
        return {target: executor.view for target, executor in self.executors.items()}

    # -- watermarks and safe mode ------------------------------------------------------------------
    def _write_watermarks(self) -> None:
        statements = []
        for state in self.sources.values():
            bound = self._bound(state)
            if bound is None:
                continue
            if state.id in self.safe_before and bound >= self.safe_before[state.id]:
                # all of the source before the backfill's end is applied: safe mode is over for it
                # (replaced, not changed in place: the applier's threads read it)
                self.safe_before = {s: p for s, p in self.safe_before.items() if s != state.id}
                log.info("source %s passed the end of the backfill: safe mode off for it", state.id)
            position = Position(state.file_of(bound[0]), bound[1])
            statements.append(self.meta.sql_watermark(state.id, position, bound, event_time=state.event_time))
        if statements:
            try:
                self.meta.execute(statements)
            except pymysql.err.MySQLError as exc:
                log.warning("watermarks not written (%s); will retry", exc)
                self.downstream_error = f"{self.down['host']}:{self.down['port']}: {exc}"
                return
            self.downstream_error = None  # (written every second: the target's probe too)
            crash_point("watermark_written", after="shard_released")

    def _bound(self, state: SourceState) -> ChangeId | None:
        """The source's watermark (the rule is in `replicator.apply.watermark`)."""
        if state.position is None:
            return None
        holders = [self.gate.oldest, self._paused_from]
        if self.applier is not None:
            holders.append(self.applier.oldest)
        return watermark(state.id, state.position.change(0), holders)

    def _paused_from(self, source: str) -> ChangeId | None:
        return self.flows.paused_from(source)

    def _safe_mode(self, changes: list[Change] | None = None) -> bool:
        if self.options.safe_mode or time.monotonic() < self.safe_until:
            return True
        safe_before = self.safe_before
        if changes is None or not safe_before:
            return bool(safe_before)
        return any(c.id < safe_before.get(c.shard.source, ZERO) for c in changes)

    # -- status ------------------------------------------------------------------------------------
    def _start_admin(self) -> None:
        admin = self.config.admin
        if not admin.port:
            return
        self.admin = AdminServer(
            admin,
            routes(self),
            lambda: self.calls.call(self.render_metrics),
            lambda: self.calls.call(self.not_ready, timeout=READY_TIMEOUT),
        )
        try:
            self.admin.start()
        except OSError as exc:
            self.admin = None
            raise DaemonError(
                f"admin API: cannot listen on {admin.host}:{admin.port} ({exc.strerror or exc}); "
                "set admin.port in the task config (0: no admin API)"
            ) from exc

    # -- the admin API's side ------------------------------------------------------------------
    def resume_shard(self, shard: ShardId) -> None:
        self._resume(shard)

    def mark_applied(self, shard: ShardId, part: int, change: ChangeId) -> None:
        """An operator left a refused row out or wrote it their way (handle-error): its
        checkpoint, saved with that, holds here too. The shard is paused: nothing of it
        is in flight."""
        self.applier.checkpoints[(shard, part)] = change
        if change > self.applier.top.get(shard, ZERO):
            self.applier.top[shard] = change

    def set_source_paused(self, source: str, paused: bool) -> None:
        state = self.sources[source]
        if state.paused != paused:
            state.paused = paused
            log.info(
                "source %s %s",
                source,
                "paused" if paused else "resumed",
                extra={"source": source, "position": str(state.position)},
            )

    def submit_operation(self, target: str, job: DDLJob) -> Future:
        future: Future = Future()
        self.waiters[id(job)] = (target, future)
        self.executors[target].submit(job)
        return future

    def _failed_ddl_reason(self, target: str | None, error: str | None) -> str:
        pending = self.meta.pending_journal(target) if target else []
        if not pending:
            return error or "the DDL failed"
        return _refused_entry(target, pending[0]["seq"], error or "the DDL failed")

    def not_ready(self) -> dict[str, str]:
        """What keeps the daemon from doing its work, by part: a source whose stream is not
        connected, a target it could not write to lately, a failed applier."""
        out = {}
        for s in self.sources.values():
            if not s.connected:
                out[f"source {s.id}"] = s.error or "connecting"
        if self.downstream_error is not None:
            out["target"] = self.downstream_error
        if self.applier is not None and self.applier.failure is not None:
            out["applier"] = "a partition failed; see the log"
        return out

    def _refused_of(self, shard: ShardId) -> dict:
        """The row the downstream refused that a paused shard waits on, if that is why."""
        pending = self.meta.dead_letters(shard, "pending")
        if not pending:
            return {}
        entry = pending[-1]
        return {"refused": {k: entry[k] for k in ("seq", "target", "key", "statement", "error")}}

    def render_metrics(self) -> str:
        now = time.time()
        m = self.metrics
        m.lag.set_all({(s.id,): max(0.0, now - s.event_time) for s in self.sources.values() if s.event_time})
        m.paused_sources.set_all({(s.id,): float(s.paused) for s in self.sources.values()})
        m.connected.set_all({(s.id,): float(s.connected) for s in self.sources.values()})
        views = self.views()
        m.blocked.set_all({(t,): float(len(v.blocked)) for t, v in views.items()})
        paused = self.flows.pauses()
        m.paused_shards.set_all({(t,): float(sum(s in paused for s in v.shards)) for t, v in views.items()})
        if self.applier is not None:
            m.queue_depth.set_all({(str(i),): float(q.qsize()) for i, q in enumerate(self.applier.queues)})
        if self.validator is not None:
            m.validator_pending.set_all({(t,): float(n) for t, n in self.validator.pending_counts.items()})
        return m.render()

    def status(self) -> dict:
        now = time.time()
        return {
            "task": self.config.task,
            "task_mode": self.config.task_mode,
            "phase": "streaming",
            "sources": {
                s.id: {
                    "position": str(s.position) if s.position else None,
                    "connected": s.connected,
                    "error": s.error,
                    "received": s.received,
                    "reconnects": s.reconnects,
                    "lag": round(max(0.0, now - s.event_time), 3) if s.event_time else None,
                    "state": "paused" if s.paused else "running" if s.connected else "connecting",
                }
                for s in self.sources.values()
            },
            "groups": {
                t: {
                    "version": str(view.version),
                    "blocked": {str(k): v.to_data() for k, v in view.blocked.items()},
                    "ddl_running": _running(self.executors.get(t), now),
                }
                for t, view in self.views().items()
            },
            "paused": {
                str(k): {"position": str(p.position), "reason": p.reason, **self._refused_of(k)}
                for k, p in self.flows.pauses().items()
            },
            "filtered": {str(k): dict(c) for k, c in self.filtered.items()},
            "validation": self.validator.status() if self.validator is not None else None,
            "applied": self.applier.applied if self.applier else 0,
            "downstream_reconnects": self.applier.reconnects if self.applier else 0,
        }


def _running(executor: GroupExecutor | None, now: float) -> dict | None:
    """The downstream statement a group's executor runs now, how, and for how long."""
    running = executor.running if executor is not None else None
    if running is None:
        return None
    return {"statement": running.statement, "how": running.how, "seconds": round(now - running.started, 1)}


def _op(change: Change | RowEvent) -> str:
    """I, U or D: a row event's is its type's."""
    return ROWS_OPS[change.event[4]] if isinstance(change, RowEvent) else change.op


def _replayed(change: Change, renames: tuple[ReplayRename, ...], downstream: dict[str, str]) -> Change:
    """A row a shard wrote while paused, read again once it resumed, in the downstream table
    as it is now: under the names its renames made meanwhile gave its columns (`c4` is `r1`
    once it renamed c4 to r1: the rename may have finished downstream, c4 gone), and without
    the columns no longer there (it dropped them meanwhile, or renamed them away)."""

    def moved(columns: tuple[str, ...]) -> tuple[str, ...]:
        names = list(columns)
        for rename in renames:
            old, new = rename.old.lower(), rename.new
            lower = [n.lower() for n in names]
            # (a row that has the new name, after the shard added the old one again, is not
            # renamed; a held column's values go where the others' do while it is downstream)
            if old in lower and new.lower() not in lower and not (rename.held and old in downstream):
                names[lower.index(old)] = new
        return tuple(names)

    def kept(columns: tuple[str, ...], values: tuple[str, ...] | None):
        pairs = [
            (c, v)
            for c, v in zip(columns, values or (None,) * len(columns), strict=True)
            if c.lower() in downstream
        ]
        return tuple(c for c, _ in pairs), None if values is None else tuple(v for _, v in pairs)

    columns, values = kept(moved(change.columns), change.values)
    before_columns, before = change.before_columns, change.before
    if change.before is not None:
        before_columns, before = kept(moved(change.before_columns or change.columns), change.before)
    return change._replace(columns=columns, values=values, before_columns=before_columns, before=before)


def _clear_renamed(flow: ShardFlow, change: Change) -> Change:
    """While a rename is pending, a shard's writes set NULL the column of the rename
    it does not write (GroupState.cleared says which and why)."""
    names = flow.cleared
    if not names or change.values is None:
        return change
    present = {k.lower() for k in change.columns}
    # not values: by the time the row is written the rename may have finished and
    # the column be gone; the applier clears it only if it is still there
    return change._replace(clear=tuple(n for n in names if n.lower() not in present))


def _refused_entry(target: str, seq: int, error: str) -> str:
    return (
        f"downstream DDL of {target} (journal entry {seq}) failed: {error}; fix the downstream and run "
        f"`shardctl journal retry --target {target} --seq {seq}`, or `journal skip` if done by hand"
    )


def _unfinished_backfill(task: str, records: list[BackfillRecord]) -> str:
    states = "; ".join(
        f"source {r.source}: {r.state}" + (f" ({r.message})" if r.message else "") for r in records
    )
    return (
        f"the backfill of task {task} did not finish ({states}); the downstream tables may be partly "
        f"filled. Run `shardmerge backfill` again before `shardmerge run`: an interrupted one continues "
        f"from its unfinished chunks, a failed one starts over (with --truncate)."
    )


def run_daemon(config: TaskConfig) -> int:
    return Daemon(config).run()
