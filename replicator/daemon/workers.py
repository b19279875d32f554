"""The source workers (replicator/source/worker.py), a process per source, and their pipes:
started at the start, read by the main loop a bounded while per source and turn, told
when the targets' shapes change, stopped at the end (or killed, by an abandon); a worker's
failure is said, one that died ends the daemon. What a shard's resume asks of its
worker, a rewind, goes through its source's state (`SourceState.rewind`, `pauses.py`).

Threads: the main loop's only: the processes, the pipes, the sources' `paused` flags
(an operator's pause-task reaches them through the admin API's calls, served on the loop)
and `exit_code`."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from multiprocessing.connection import wait

from replicator.apply.applier import Applier
from replicator.apply.target import TargetInfo
from replicator.config import Options, TaskConfig
from replicator.daemon import startup
from replicator.daemon.safe_mode import SafeMode
from replicator.errors import DaemonError, ExitCode
from replicator.source.messages import NativeTargets, Stop, WorkerFailed
from replicator.source.routing import Router
from replicator.source.source_state import SourceState
from replicator.state.positions import ChangeId, Position

log = logging.getLogger("shardmerge.daemon")
DRAIN_FOR = 0.05  # seconds a turn of the loop takes messages from one source's pipe at most

Handle = Callable[[SourceState, object], None]  # what the loop does with a worker's message


class Workers:
    def __init__(self, sources: Mapping[str, SourceState], stopping: threading.Event):
        self.sources = sources
        self.stopping = stopping
        self.native: dict = {}  # the shapes the workers were last told (NativeTargets)
        # what `Daemon.run` returns once stopped: a worker's server moved, CONNECTION
        self.exit_code = ExitCode.OK

    def start(
        self,
        config: TaskConfig,
        options: Options,
        router: Router,
        positions: Mapping[str, Position | None],
        native: dict,
        log_format: str,
        epochs: Mapping[str, int],
        decided: Callable[[str], Mapping[str, ChangeId]],
    ) -> None:
        """A worker per source, reading from `positions`, told the `native` shapes; `epochs`:
        what each source's stream server id flips by; `decided`: as `start_workers` takes it."""
        self.native = native
        startup.start_workers(
            config, options, self.sources, router, positions, native, log_format, epochs, decided
        )

    def receive(self, timeout: float, handle: Handle) -> None:
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
                    handle(state, pipe.recv())
            except (EOFError, OSError):
                state.pipe = None

    def tell_native(self, shapes: dict) -> None:
        """Tell the workers when a target's shape changed (a DDL ran), safe mode ended
        or the target refused BINLOG statements. Events they sent before they heard it
        are checked again where they are applied."""
        if shapes == self.native:
            return
        self.native = shapes
        for state in self.sources.values():
            state.tell(NativeTargets(shapes))

    def failed(self, state: SourceState, message: WorkerFailed) -> None:
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

    def check(self) -> None:
        """A worker that died while the daemon runs ends it."""
        for state in self.sources.values():
            if state.process is not None and not state.process.is_alive() and not self.stopping.is_set():
                died = f"the worker of source {state.id} died: {state.error or 'no message'}"
                raise DaemonError(died, ExitCode.INTERNAL)

    def set_paused(self, source: str, paused: bool) -> None:
        """A paused source's pipe is not read: its worker, the pipe full, waits."""
        state = self.sources[source]
        if state.paused != paused:
            state.paused = paused
            log.info(
                "source %s %s",
                source,
                "paused" if paused else "resumed",
                extra={"source": source, "position": str(state.position)},
            )

    def stop(self, handle: Handle) -> None:
        """A clean stop's: the workers stopped, what they still send taken."""
        for state in self.sources.values():
            state.paused = False  # what the workers still send is taken, paused or not
            state.tell(Stop())
        # take what the workers still send, then stop taking
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(
            s.process and s.process.is_alive() for s in self.sources.values()
        ):
            self.receive(0.1, handle)
        self.receive(0, handle)
        for state in self.sources.values():
            if state.process is not None:
                state.process.join(timeout=5)
                if state.process.is_alive():
                    state.process.kill()

    def kill(self) -> None:
        """An abandon's: the workers stopped, or killed, whatever fails; what they still
        send is read and dropped, so that a worker flushing into a full pipe ends at once
        (it waited out the 5 s of its join, each start again of a member a stall)."""
        for state in self.sources.values():
            if state.process is not None:
                with contextlib.suppress(Exception):
                    state.tell(Stop())
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(
            s.process is not None and s.process.is_alive() for s in self.sources.values()
        ):
            for state in self.sources.values():
                with contextlib.suppress(Exception):
                    while state.pipe is not None and state.pipe.poll():
                        state.pipe.recv()
            time.sleep(0.01)
        for state in self.sources.values():
            if state.process is not None and state.process.is_alive():
                state.process.kill()
                state.process.join(timeout=5)


def native_shapes(applier: Applier | None, safe: SafeMode, infos: Mapping[str, TargetInfo]) -> dict:
    """What each target's rows hold, for the workers to send row events of shards
    holding the same as they are; none while every row is decoded anyway."""
    if applier is None or not applier.as_is or not safe.settled():
        return {}  # (safe mode: until every source has passed the end of its backfill)
    return {t: info.shape for t, info in infos.items() if info.shape is not None}
