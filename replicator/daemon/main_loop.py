"""The daemon of a task: it wires the stages together and routes what the workers
send. Row changes go to the applier (unless already applied, or their shard is paused,
or waiting behind its own DDL), DDLs to their group's executor, whose decisions come
back here to pause and resume shards (`pauses.py`). It writes every source's watermark
about once a second, and on SIGTERM stops cleanly: workers stop, every routed change is
committed, the watermarks are written and the stop is recorded as clean."""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from multiprocessing.connection import wait
from typing import TypeVar

import pymysql

from lattice import Flavor
from replicator.api.admin import AdminServer, Calls
from replicator.api.operations import routes
from replicator.apply.applier import Applier
from replicator.apply.ddl_executor import DDLJob, DDLResult, GroupExecutor
from replicator.apply.gate import DDLGate
from replicator.apply.meta import Meta
from replicator.apply.refused import Refused
from replicator.apply.target import TargetInfo
from replicator.apply.validator import Validator
from replicator.apply.windows import Windows
from replicator.config import TaskConfig
from replicator.daemon import startup, status
from replicator.daemon.ddl_path import DDLPath, refused_entry, refused_entry_of
from replicator.daemon.parking import Parked, Parking
from replicator.daemon.pauses import Pauses
from replicator.daemon.resyncs import Resyncs
from replicator.daemon.row_path import UNEXPLAINED_DROP, RowPath
from replicator.daemon.safe_mode import SafeMode
from replicator.daemon.watchdog import Watchdog
from replicator.daemon.watermarks import Watermarks
from replicator.errors import DaemonError, ExitCode, StartAgain
from replicator.faults import fault_point, faults_armed
from replicator.heap import freeze_long_lived, thaw
from replicator.metrics import Metrics
from replicator.schema import way_out
from replicator.schema.coordinator import Coordinator
from replicator.schema.event_filter import ignored_rows
from replicator.schema.group import GroupView
from replicator.schema.way_out import with_way_out
from replicator.servers import connect_downstream
from replicator.shard_flow import ShardFlows
from replicator.shard_id import ShardId
from replicator.source.messages import (
    Changes,
    DDLEvent,
    Dropped,
    Heartbeat,
    NativeTargets,
    Stop,
    WorkerFailed,
)
from replicator.source.routing import Router
from replicator.source.schema_change import ChangeKind, SchemaChange
from replicator.source.source_state import SourceGtids, SourceState
from replicator.source.spawn import start_fork_server
from replicator.state.lease import REGISTERING, Lease, Renewer
from replicator.state.pauses import Pause
from replicator.state.positions import ChangeId, Position
from replicator.transient import error_kind, transient

log = logging.getLogger("shardmerge.daemon")
WATERMARK_EVERY = 1.0
FLUSH_EVERY = 0.02  # seconds a partial batch may wait before it is sent to its partition
DRAIN_FOR = 0.05  # seconds a turn of the loop takes messages from one source's pipe at most

T = TypeVar("T")


class Daemon:
    def __init__(
        self,
        config: TaskConfig,
        log_format: str = "text",
        stopping: threading.Event | None = None,
        again: Mapping[str, int] | None = None,
    ):
        """`stopping`: set by SIGTERM or SIGINT (given: one that outlives a start again);
        `again`: how often this process started a daemon again before, by error (`StartAgain`)."""
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
        self.pauses = Pauses(self.flows, self.gate, self.meta, self.sources)
        self.journal_done: list[ShardId] = []  # (at a start: shards paused for an entry done since)
        # paused shards' changes kept in the meta schema, so their sources read on
        self.parking = self.pauses.parking = Parking(
            self.meta, self.flows, self.sources, self.options.park_limit
        )
        self.validator: Validator | None = None  # continuous validation (config validator.mode)
        self.stopping = stopping if stopping is not None else threading.Event()
        self.exit_code = ExitCode.OK  # what `run` returns once stopped
        self.safe = SafeMode(self.options.safe_mode)
        self.watermarks = Watermarks(self.sources, self.meta, self.gate, self.parking, self.safe)
        self.pauses.watermark_back = self.watermarks.back_to
        self.applier: Applier | None = None
        self.rows: RowPath  # (these two made with the applier, at the start)
        self.ddls: DDLPath
        self.calls = Calls()  # admin API requests, served by the main loop
        self.watchdog = Watchdog()  # where the main loop is when it stops turning
        self.metrics = Metrics()
        for kind, times in (again or {}).items():
            self.metrics.retries.inc("start", kind, amount=times)
        self.admin: AdminServer | None = None
        self._native: dict = {}  # the shapes the workers were last told (NativeTargets)
        self.lease: Lease | None = None  # this daemon runs the task while it holds it
        self.renewer: Renewer | None = None
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
            self.pauses.set,
        )
        self.pauses.windows = self.windows
        # shards copied again by `shardmerge resync`, while the others stream
        self.resyncs = Resyncs(
            self.meta,
            self.flows,
            self.pauses,
            self.safe,
            self.sources,
            self.router,
            lambda source: [s for view in self.views().values() for s in view.shards if s.source == source],
        )

    # -- lifecycle ----------------------------------------------------------------------------
    def run(self) -> int:
        signal.signal(signal.SIGTERM, lambda *_: self.stopping.set())
        signal.signal(signal.SIGINT, lambda *_: self.stopping.set())
        Watchdog.dump_on_sigusr1()
        try:
            if not self._hold_lease():
                return 0  # stopped while a standby
            self.setup()
        except Exception as exc:
            if not transient(exc):
                raise
            raise self._start_again(exc, ran=False) from exc
        self.watchdog.start()
        abandoned = False
        try:
            self.loop()
        except Exception as exc:
            # A write of this thread's own lost the downstream (a pause, a resume, a parked
            # change, an operator's call): what it had changed in memory may be ahead of what
            # is saved. Crash-only: all of it is dropped, and the next start reads the saved
            # state again, as after a SIGKILL (issue 70: the daemon exited 3 for a supervisor)
            if not transient(exc):
                raise
            abandoned = True
            log.warning("a write of the main loop lost the downstream (%s); this daemon starts again", exc)
            raise self._start_again(exc, ran=True) from exc
        finally:
            self.watchdog.stop()
            if not abandoned:
                self.shutdown()
        return int(self.exit_code)

    def _hold_lease(self) -> bool:
        """Run the task only while holding its lease (replicator/state/lease.py): wait as a
        standby till then; from then on every downstream connection registers itself, and
        every transaction that writes checks the lease is still this daemon's."""
        startup.wait_for_downstream(self.down, self.stopping, self.options.max_backoff)
        self.meta.ensure()
        self.lease = Lease(
            lambda: connect_downstream(self.down), self.meta.q, self.config.task, self.options.lease_ttl
        )
        self.admin = startup.start_standby_admin(self.config, lambda: self.lease.waiting_for)
        try:
            if not self.lease.acquire(self.stopping):
                return False
        finally:
            self._stop_admin()  # (the active's admin API starts in `setup`)
        self.down["init_command"] = self.lease.registration()
        self.down["client_flag"] = self.down.get("client_flag", 0) | REGISTERING
        self.meta.close()  # (its connections so far did not register)
        self.lease.close()
        self.meta.fence = self.lease.fence
        self.lease.on_lost = _lease_lost
        self.renewer = Renewer(self.lease, self.metrics.retries.inc)
        self.renewer.start()
        return True

    def setup(self) -> None:
        config, meta, options = self.config, self.meta, self.options
        self.admin = startup.start_admin(
            config, routes(self), self.calls, self.render_metrics, self.not_ready
        )
        start_fork_server()  # (if `run` did not yet) its imports run while the daemon connects
        opened, watermarks = startup.open_sources(config, meta, self.router, self.down, self.stopping)
        self.safe.before = startup.backfill_ends(meta, config.task)
        self.sources.update({s: SourceState(s, Flavor.parse(o.flavor)) for s, o in opened.items()})
        if startup.follow_moves(config, meta, opened, watermarks):
            watermarks = meta.watermarks.load()
            self.safe.before = startup.backfill_ends(meta, config.task)  # (moved too)
        servers = meta.watermarks.server_ids()
        for s, o in opened.items():
            self.sources[s].server_id = servers.get(s, o.server_id)
        row_events = startup.row_events(options, self.flavor, self.sources)
        partitions, by_source = startup.partitions(meta, options, row_events, self.safe)
        startup.load_sources(config, meta, self.sources, watermarks, opened)
        self.flows.restore(meta.pauses.load(), meta.ddl_done.load())
        self.watermarks.floors = {s: bound for s, (_, bound, _) in watermarks.items()}
        draining = self.parking.restore(self.watermarks.floors)
        windows = startup.replays(meta, self.flows)  # (their paused rows not merged yet: read again)
        checkpoints = meta.checkpoints.load()
        for target in self.router.targets():
            self.coordinators[target], self.infos[target] = startup.open_group(
                target, config, meta, self.down, self.flavor, self.sources, self.router
            )

        def file_of(shard: ShardId, cid: ChangeId) -> str:
            return self.sources[shard.source].file_of(cid[0])

        self.validator = startup.validator(config, self.infos, self.down, meta, file_of, self.metrics)
        self.applier = self.pauses.applier = self.windows.applier = Applier(
            meta,
            self.infos,
            self.down,
            partitions,
            options.batch_size,
            self.safe,
            checkpoints,
            self.errors.put,  # (from an apply thread: handled by the main loop)
            options.max_backoff,
            metrics=self.metrics,
            by_source=by_source,
            skip_refused=options.on_row_error == "skip",
            file_of=file_of,
            on_committed=self.validator.committed if self.validator is not None else None,
            waiting=self._waiting,
        )
        self.resyncs.applier = self.watermarks.applier = self.applier
        meta.gtids = SourceGtids(self.sources)
        self.rows = RowPath(
            self.flows,
            self.gate,
            self.executors,
            self.applier,
            self.windows,
            self.pauses,
            meta,
            self.infos,
            self.metrics,
        )
        self.ddls = DDLPath(
            self.flows, self.gate, self.executors, self.rows, self.windows, self.pauses, meta, self.metrics
        )
        self.pauses.feed = self._parked
        self.rows.unreadable = self._unreadable
        for target in self.coordinators:
            self._open_executor(target)
        self.pauses.restore(
            self.views(), windows, lambda source: startup.binlog_end(config, self.sources[source])
        )
        # (a resumed shard's window reopened: its paused changes come from its park again)
        draining += self.parking.drain([s for s in windows if self.flows[s].pause is None])
        self._windows_read_from_their_pause(windows)
        self.resyncs.restore()  # (before its park is fed or its source read)
        meta.task_state.mark_started(partitions, "source" if by_source else "key")
        self._native = self._native_shapes()
        positions = {s: self._resume_position(state) for s, state in self.sources.items()}
        epoch = self.lease.held.epoch if self.lease is not None and self.lease.held is not None else 1
        startup.start_workers(
            config, options, self.sources, self.router, positions, self._native, self.log_format, epoch
        )
        freeze_long_lived()  # (after: the workers need nothing of it)
        self.applier.start()
        if self.validator is not None:
            self.validator.start()
        for executor in self.executors.values():
            executor.start()
        for shard in draining:  # (resumed before their parks were applied)
            self.parking.replay(shard, self._parked)
        for shard in self.journal_done:
            log.info(
                "shard %s: the journal entry it paused for is done; it resumes",
                shard,
                extra={"shard": shard, "source": shard.source},
            )
            self.resume_shard(shard)
        self.journal_done.clear()
        if faults_armed() and fault_point("start_lost"):
            # (tests: the downstream lost at the end of a start, everything started)
            raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server (a fault injected)")
        log.info(
            "task %s running: %d sources, %d shard groups, %d partitions%s",
            config.task,
            len(self.sources),
            len(self.coordinators),
            partitions,
            " (safe mode)" if self.safe() else "",
        )

    def _open_executor(self, target: str) -> None:
        """The group's DDL executor; it finishes what its journal holds of a crash, and a
        downstream DDL that failed there pauses its shard."""
        coordinator = self.coordinators[target]
        executor = self.executors[target] = GroupExecutor(
            target,
            coordinator,
            coordinator.store,
            self.meta,
            self.applier,
            self.infos[target],
            self.down,
            self.results,
            self.config.filters.events,
            copy_mode=self.options.copy_ddl,
            flavors={source: state.flavor for source, state in self.sources.items()},
        )
        recovered, refused = executor.recover()
        if recovered:
            log.info("%s: finished %d journal entries left by a crash", target, recovered)
        # shards paused for an entry that is done now (finished here, or by the operator's
        # hand before the stop): their pause and its way out are stale, they resume by
        # themselves once the daemon runs (issue 70: `journal retry` answered 404, and the
        # shard stayed paused till a person ran resume-shard, which no message named)
        pending = {e["seq"] for e in self.meta.journal.pending(target)}
        for shard, pause in self.flows.pauses().items():
            seq = refused_entry_of(pause.reason, target)
            if seq is not None and seq not in pending:
                self.journal_done.append(shard)
        first = refused[0][0]["seq"] if refused else None  # (the one refused; the rest wait for it)
        for entry, error in refused:
            shard = entry["shard"]
            if shard and not self.flows.is_paused(shard):
                waits = first if entry["seq"] != first else None
                self.pauses.pause(shard, None, refused_entry(target, entry["seq"], error, waits))
        executor.refresh()
        view = executor.publish()
        self.flows.set_cleared(view.shards, view.cleared)

    def _windows_read_from_their_pause(self, shards: Iterable[ShardId]) -> None:
        """What a resume keeps true (`Pauses.resume`): a reopened window that no park feeds
        is read from its shard's pause, its source's saved watermark not past it. One past
        it would lose the shard's rows of its paused time, shown running (live stories
        531012): said, and read from the pause all the same."""
        for shard in shards:
            window = self.flows[shard].window
            floor = self.watermarks.floors.get(shard.source)
            if window is None or shard in self.parking.shards or floor is None or floor <= window.hold:
                continue
            log.error(
                "shard %s: source %s's saved watermark %s is past its paused rows not merged yet (from "
                "%s), which no park holds: its source reads again from there",
                shard,
                shard.source,
                floor,
                window.hold,
                extra={"shard": shard, "source": shard.source},
            )
            self.watermarks.back_to(shard.source, window.hold)
            self.rows.behind_watermark(shard)

    def _resume_position(self, state: SourceState) -> Position | None:
        """The watermark: before the workers run, the saved one or a paused shard's start."""
        for pause in self.flows.pauses().values():
            if pause.source == state.id:
                state.name_file(pause.position)
        bound = self.watermarks.bound(state)
        return state.position_of(bound) if bound is not None else None

    def _start_again(self, exc: Exception, ran: bool) -> StartAgain:
        """What was started stopped (`_abandon`); the error that says to start again."""
        self._abandon()
        return StartAgain(f"{type(exc).__name__}: {exc}", error_kind(exc), ran=ran)

    def _abandon(self) -> None:
        """Stop what a start that failed (or a running daemon that lost the downstream) had
        started, as a crash would leave it (the next start finds its stop unclean): workers,
        threads, the lease's renewal, connections. A thread of it still writing fails its
        fence (the lease given up), and must not end the process: the next start runs in it."""
        if self.lease is not None:
            self.lease.on_lost = None
        for state in self.sources.values():
            if state.process is not None:
                with contextlib.suppress(Exception):
                    state.tell(Stop())
                    state.process.join(timeout=5)
                if state.process.is_alive():
                    state.process.kill()
        parts = [*self.executors.values(), self.validator, self.applier, self.renewer]
        for part in filter(None, parts):
            with contextlib.suppress(Exception):
                part.stop()
        if self.lease is not None:
            with contextlib.suppress(Exception):
                self.lease.release()
        with contextlib.suppress(Exception):
            self.meta.close()
        self._stop_admin()
        self.calls.refuse_pending("the daemon lost the downstream and starts again: ask again in a while")
        thaw()  # (what `freeze_long_lived` kept of this start is garbage now)

    def shutdown(self) -> None:
        log.info("stopping")
        try:
            self._stop_parts()
        finally:
            self._stop_admin()

    def _stop_admin(self) -> None:
        """Late in the stop: while the API answers, the process is stopping (`shardctl
        stop-task` waits for that; requests to the loop are answered 503 meanwhile). Before
        the lease goes: a standby taking over may listen on the same address."""
        if self.admin is not None:
            self.admin.stop()
            self.admin = None

    def _stop_parts(self) -> None:
        for state in self.sources.values():
            state.paused = False  # what the workers still send is taken, paused or not
            state.tell(Stop())
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
            _drain(self.results, self.ddls.result)
            time.sleep(0.05)
        _drain(self.results, self.ddls.result)
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
        self.meta.task_state.mark_stopped()
        self.meta.close()
        self._stop_admin()
        if self.renewer is not None:
            self.renewer.stop()
            self.lease.release()  # (a standby takes over at once)
        log.info("stopped cleanly")

    # -- the main loop ---------------------------------------------------------------------------
    def loop(self) -> None:
        last_watermark = last_flush = time.monotonic()
        while not self.stopping.is_set():
            self.watchdog.turned()
            self._receive(FLUSH_EVERY)
            self.calls.serve_pending()
            self.applier.check()
            _drain(self.results, self.ddls.result)
            _drain(self.errors, self.pauses.refused)
            self.windows.merge_ready()
            self._tell_native()
            now = time.monotonic()
            if now - last_flush >= FLUSH_EVERY:
                self.applier.flush()
                last_flush = now
            if now - last_watermark >= WATERMARK_EVERY:
                self._write_watermarks()
                self.resyncs.poll(self.watermarks.floors)
                last_watermark = now
            for state in self.sources.values():
                if state.process is not None and not state.process.is_alive() and not self.stopping.is_set():
                    died = f"the worker of source {state.id} died: {state.error or 'no message'}"
                    raise DaemonError(died, ExitCode.INTERNAL)

    def _waiting(self) -> None:
        """The main thread waits for the applier (its queues full): it answers reads
        meanwhile, and counts as turning."""
        self.watchdog.turned()
        self.calls.serve_reads()

    def _native_shapes(self) -> dict:
        """What each target's rows hold, for the workers to send row events of shards
        holding the same as they are; none while every row is decoded anyway."""
        if self.applier is None or not self.applier.as_is or not self.safe.settled():
            return {}  # (safe mode: until every source has passed the end of its backfill)
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
            state.tell(NativeTargets(shapes))

    def _receive(self, timeout: float) -> None:
        pipes = {s.pipe: s for s in self.sources.values() if s.pipe is not None and not s.paused}
        if not pipes:
            time.sleep(timeout)
            return
        for pipe in wait(list(pipes), timeout):
            state = pipes[pipe]
            # (a bounded drain: rows arriving faster than this thread takes them must not keep
            # it from the rest of its turn, the admin API's calls and the DDLs' results; the
            # pipe filling up holds the worker back meanwhile)
            until = time.monotonic() + DRAIN_FOR
            try:
                while pipe.poll() and time.monotonic() < until:
                    self._message(state, pipe.recv())
            except (EOFError, OSError):
                state.pipe = None

    def _message(self, state: SourceState, message) -> None:
        if state.stale(message):
            return
        if isinstance(message, Changes):
            state.took_changes(message)
            for change in message.items:
                self.rows.change(change)
            if message.filtered:
                self.rows.rows_filtered(message.filtered)
        elif isinstance(message, DDLEvent):
            state.took_ddl(message)
            self.ddls.schema_change(state, message)
        elif isinstance(message, Heartbeat):
            if state.took_heartbeat(message):
                self.metrics.reconnects.inc(state.id)
        elif isinstance(message, WorkerFailed):
            state.error = message.error
            if message.server_moved:
                # (started again, by its supervisor or a standby, it moves them: `follow_moves`)
                self.exit_code = ExitCode.CONNECTION
                self.stopping.set()
            log.error(
                "source %s: worker failed: %s",
                state.id,
                message.error,
                extra={"source": state.id, "position": str(state.position) if state.position else None},
            )

    def views(self) -> dict[str, GroupView]:
        """Each group as its last decision left it (replicator/schema/group.py): what
        this thread, the admin API and the metrics read of the coordinators."""
        return {target: executor.view for target, executor in self.executors.items()}

    # -- watermarks ------------------------------------------------------------------------------
    def _write_watermarks(self) -> None:
        written = self.watermarks.write()
        if isinstance(written, pymysql.err.MySQLError):
            log.warning("watermarks not written (%s); will retry", written)
            self.downstream_error = f"{self.down['host']}:{self.down['port']}: {written}"
        elif written:
            self.downstream_error = None  # (written every second: the target's probe too)

    def _parked(self, item: Parked) -> None:
        """A resumed shard's parked change or DDL, as its source sent it."""
        if isinstance(item, DDLEvent):
            self.ddls.schema_change(self.sources[item.source], item)
        else:
            self.rows.change(item)

    def _unreadable(self, drop: Dropped) -> None:
        """A running shard's rows its worker could not read (`RowPath.dropped`): it pauses
        there as one whose rows cannot be read (`Coordinator.pause_shard`), its way out
        `set-schema`, which has them read again; never left out silently."""
        state = self.sources[drop.shard.source]
        position = str(state.position_of(drop.id))
        problem = f"its worker could not read its rows at {position} ({drop.reason or 'no reason given'})"
        log.error(
            "shard %s: %d %s: %s; it pauses there",
            drop.shard,
            drop.events,
            UNEXPLAINED_DROP,
            problem,
            extra={"shard": drop.shard, "source": drop.shard.source, "position": position},
        )
        change = SchemaChange(drop.shard, ChangeKind.UNREADABLE, "", problem=problem)
        event = DDLEvent(drop.shard.source, drop.id, position, position, drop.target, change)
        if self.flows[drop.shard].decided_before(drop.id) or drop.target not in self.executors:
            # (no decision can be asked for it: paused by the daemon, `resume-shard` reads it again)
            reason = with_way_out(problem, way_out.unreadable_rows(drop.shard))
            self.pauses.set(Pause(drop.shard, Position.parse(position), drop.id, reason), readable=False)
            return
        self.ddls.schema_change(state, event)

    # -- the admin API's side (replicator/api/operations.py) -----------------------------------
    def resume_shard(self, shard: ShardId) -> None:
        self.pauses.resume(shard)

    def pause_shard(self, shard: ShardId, reason: str) -> Position:
        """The shard pauses where its source has read (an operator's pause-task --table)."""
        position = self.sources[shard.source].position
        self.pauses.set(Pause(shard, position, position.change(0), reason))
        return position

    def mark_applied(self, shard: ShardId, part: int, change: ChangeId) -> None:
        """An operator left a refused row out or wrote it their way (handle-error): its
        checkpoint, saved with that, holds here too. The shard is paused: nothing of it
        is in flight."""
        self.applier.checkpoints.mark(shard, part, change)

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
        return self.ddls.submit_operation(target, job)

    def status(self) -> dict:
        return status.status(self)

    def render_metrics(self) -> str:
        return status.render_metrics(self)

    def not_ready(self) -> dict[str, str]:
        return status.not_ready(self)


def _lease_lost(reason: str) -> None:
    """Another daemon runs the task now (or will): this one must write nothing more. Its
    transactions in flight fail their fence; it ends at once, its state is all in the
    downstream (a supervisor may start it again: it waits as a standby)."""
    log.error("%s; this daemon stops now, writing nothing more", reason)
    logging.shutdown()
    os._exit(ExitCode.WAITING)


def _drain(items: queue.Queue[T], handle: Callable[[T], object]) -> None:
    """Handle what other threads put in `items` so far."""
    while True:
        try:
            item = items.get_nowait()
        except queue.Empty:
            return
        handle(item)


def run_daemon(config: TaskConfig) -> int:
    return Daemon(config).run()
