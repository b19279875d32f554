"""The daemon of a task: it wires the stages together and routes what the workers
send. Row changes go to the applier (unless already applied, or their shard is paused,
or waiting behind its own DDL), DDLs to their group's executor, whose decisions come
back here to pause and resume shards (`pauses.py`). It writes every source's watermark
about once a second, and on SIGTERM stops cleanly: workers stop, every routed change is
committed, the watermarks are written and the stop is recorded as clean.

`Daemon` is the facade: it makes the parts, runs the lifecycle and the main loop, and is
what the admin API's operations use (`replicator/api/daemon_api.py`). Its concerns are
parts of their own: the lease it runs under (`tenure.py`), its start (`starting.py`),
the source workers' processes and pipes (`workers.py`), the routing of what reaches the
loop (`dispatch.py`), the loop's periodic duties (`duties.py`), and its stop, clean or to
start again (`shutdown.py`).

Threads: the main thread runs `run` (the wait as a standby, the start, the loop, the
stop) and owns the state of every part. Other threads reach it through queues and calls
only: the admin API's HTTP threads through `calls` (served at each turn of the loop, its
reads also while the loop waits for the applier), the DDL executors' threads through
`results`, the apply threads through `errors`; the lease's renewer ends the process when
the lease is lost (`tenure.py`)."""

from __future__ import annotations

import logging
import queue
import signal
import socket
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import replace

from lattice import Flavor
from replicator.api.admin import AdminServer, Calls
from replicator.api.operations import routes
from replicator.api.samples import Samples
from replicator.api.view_data import live_page
from replicator.apply.applier import Applier
from replicator.apply.ddl_executor import GroupExecutor
from replicator.apply.ddl_job import DDLJob, DDLResult
from replicator.apply.gate import DDLGate
from replicator.apply.meta import Meta
from replicator.apply.refused import Refused
from replicator.apply.target import TargetInfo
from replicator.apply.validator import Validator
from replicator.apply.windows import Windows
from replicator.config import TaskConfig
from replicator.daemon import starting, startup, status
from replicator.daemon.ddl_path import DDLPath
from replicator.daemon.dispatch import Dispatch
from replicator.daemon.duties import FLUSH_EVERY, Duties
from replicator.daemon.membership import HandOver, Membership, StandingChanged
from replicator.daemon.parking import Parking
from replicator.daemon.pauses import Pauses
from replicator.daemon.resyncs import Resyncs
from replicator.daemon.row_path import RowPath
from replicator.daemon.safe_mode import SafeMode
from replicator.daemon.shutdown import hand_over, start_again, stop_cleanly
from replicator.daemon.tenure import PROCESS_LEASE_NAME, Tenure
from replicator.daemon.watchdog import Watchdog
from replicator.daemon.watermarks import Watermarks
from replicator.daemon.workers import Workers, native_shapes
from replicator.metrics import Metrics
from replicator.schema.coordinator import Coordinator
from replicator.schema.event_filter import ignored_rows
from replicator.schema.group import GroupView
from replicator.servers import connect_downstream
from replicator.shard_flow import ShardFlows
from replicator.shard_id import ShardId
from replicator.source.binlog_end import EndProbe
from replicator.source.routing import Router
from replicator.source.source_state import SourceState
from replicator.state.lease import LeaseView
from replicator.state.pauses import Pause
from replicator.state.positions import ChangeId, Position
from replicator.transient import transient

log = logging.getLogger("shardmerge.daemon")


class Daemon:
    def __init__(
        self,
        config: TaskConfig,
        log_format: str = "text",
        stopping: threading.Event | None = None,
        again: Mapping[str, int] | None = None,
        meta_ready: bool = False,
        member: str | None = None,
        kept: startup.KeptAdmin | None = None,
    ):
        """`stopping`: set by SIGTERM or SIGINT (given: one that outlives a start again);
        `again`: how often this process started a daemon again before, by error (`StartAgain`);
        `meta_ready`: the meta schema's tables made just before (`apply/early_meta.py`);
        `member`: the daemon runs as this member of the task, beside others (issue 75,
        `membership.py`), not as its only daemon under its lease; `kept`: a member's admin
        API, kept listening across its starts again."""
        self.config = config  # (a member's start: the sources it reads)
        self.task_config = config  # (every source of the task)
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
        # paused shards' changes kept in the meta schema, so their sources read on
        self.parking = self.pauses.parking = Parking(
            self.meta, self.flows, self.sources, self.options.park_limit
        )
        self.validator: Validator | None = None  # continuous validation (config validator.mode)
        self.ends: EndProbe | None = None  # where the sources' binlogs end (for the status)
        self.stopping = stopping if stopping is not None else threading.Event()
        self.safe = SafeMode(self.options.safe_mode)
        self.watermarks = Watermarks(self.sources, self.meta, self.gate, self.parking, self.safe)
        self.pauses.watermark_back = self.watermarks.back_to
        self.applier: Applier | None = None
        self.rows: RowPath  # (these three made with the applier, at the start)
        self.ddls: DDLPath
        self.dispatch: Dispatch
        self.calls = Calls()  # admin API requests, served by the main loop
        self.watchdog = Watchdog()  # where the main loop is when it stops turning
        self.metrics = Metrics()
        for kind, times in (again or {}).items():
            self.metrics.retries.inc("start", kind, amount=times)
        self.admin: AdminServer | None = None
        self.kept, self.member_name = kept, member
        # its lease
        self.tenure = Tenure(config, self.down, self.meta, self.metrics, self.stopping, meta_ready)
        self.membership = None if member is None else Membership(
            self.meta.members,
            LeaseView(self.meta),
            member,
            socket.gethostname(),
            self.options.lease_ttl,
            [s.id for s in config.sources],
            lambda: {t: self.meta.groups.history_count(t) for t in self.router.targets()},
            PROCESS_LEASE_NAME,
        )
        self.workers = Workers(self.sources, self.stopping)  # the sources' worker processes
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
        self.samples = Samples()  # the last hour's lag and rows applied, for the live view
        self.duties = Duties(  # the loop's periodic ones
            self.watermarks, self.resyncs, self.down, self.sources, self.samples
        )

    # -- lifecycle ----------------------------------------------------------------------------
    def run(self) -> int:
        signal.signal(signal.SIGTERM, lambda *_: self.stopping.set())
        signal.signal(signal.SIGINT, lambda *_: self.stopping.set())
        Watchdog.dump_on_sigusr1()
        try:
            if not self._tenure():
                return 0  # stopped while a standby, or a member waiting for a source
            self.setup()
        except Exception as exc:
            if not transient(exc) and not isinstance(exc, StandingChanged):
                raise
            raise start_again(self, exc, ran=False) from exc
        self.watchdog.start()
        abandoned = False
        try:
            self.loop()
        except HandOver as exc:
            abandoned = True
            log.info("%s: it drains, hands them over and starts again", exc)
            raise hand_over(self, exc, self.options.lease_ttl) from exc
        except StandingChanged as exc:
            abandoned = True
            log.info("%s; this member starts again", exc)
            raise start_again(self, exc, ran=True) from exc
        except Exception as exc:
            # A write of this thread's own lost the downstream (a pause, a resume, a parked
            # change, an operator's call): what it had changed in memory may be ahead of what
            # is saved. Crash-only: all of it is dropped, and the next start reads the saved
            # state again, as after a SIGKILL (issue 70: the daemon exited 3 for a supervisor)
            if not transient(exc):
                raise
            abandoned = True
            log.warning("a write of the main loop lost the downstream (%s); this daemon starts again", exc)
            raise start_again(self, exc, ran=True) from exc
        finally:
            self.watchdog.stop()
            if not abandoned:
                self.shutdown()
        return int(self.workers.exit_code)

    def _tenure(self) -> bool:
        """Under the task's lease, or as one of its members: then the start reads only the
        sources the member reads (`Standing`)."""
        if self.membership is None:
            return self.tenure.acquire()
        # (a member's admin API, kept from its start before, says why it does not answer yet)
        kept = self.kept.server if self.kept is not None else None
        standing = self.tenure.join(self.membership, kept.between if kept is not None else None)
        if standing is None:
            return False
        read = tuple(s for s in self.config.sources if s.id in standing.sources)
        self.config = replace(self.config, sources=read)
        self.duties.membership = (self.membership, standing)
        return True

    def setup(self) -> None:
        """The start, the lease held (`starting.py`), its admin API first."""
        self.admin = startup.start_admin(
            self.config,
            routes(self),
            self.calls,
            self.render_metrics,
            self.not_ready,
            lambda: live_page(self),  # (the live view at `/`)
            self.kept,
        )
        starting.start(self)

    def shutdown(self) -> None:
        stop_cleanly(self)

    # -- the main loop ---------------------------------------------------------------------------
    def loop(self) -> None:
        self.duties.begin()
        while not self.stopping.is_set():
            self.watchdog.turned()
            self.workers.receive(FLUSH_EVERY, self.dispatch.message)
            self.calls.serve_pending()
            self.applier.check()
            self.dispatch.take_results()
            if self.ddls.members:
                self.ddls.members_turn()
            self.dispatch.take_refused()
            self.windows.merge_ready()
            self.workers.tell_native(native_shapes(self.applier, self.safe, self.infos))
            self.duties.turn()
            self.workers.check()

    def waiting(self) -> None:
        """The main thread waits for the applier (its queues full): it answers reads
        meanwhile, and counts as turning."""
        self.watchdog.turned()
        self.calls.serve_reads()
        self.duties.waiting_turn()

    def views(self) -> dict[str, GroupView]:
        """Each group as its last decision left it (replicator/schema/group.py): what
        this thread, the admin API and the metrics read of the coordinators."""
        return {target: executor.view for target, executor in self.executors.items()}

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
        self.workers.set_paused(source, paused)

    def submit_operation(self, target: str, job: DDLJob) -> Future:
        return self.ddls.submit_operation(target, job)

    def status(self) -> dict:
        return status.status(self)

    def render_metrics(self) -> str:
        return status.render_metrics(self)

    def not_ready(self) -> dict[str, str]:
        return status.not_ready(self)


def run_daemon(config: TaskConfig) -> int:
    return Daemon(config).run()
