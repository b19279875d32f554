"""The daemon's side of a resync of one shard (replicator/state/resync_store.py,
docs/operations/resync.md): read from the meta schema every watermark write, so that whichever
daemon of the task is active answers `shardmerge resync`, and a restart goes on where
the last one was.

- requested: the shard pauses where its source reads (its changes from there wait, parked
  or read again later), and once none of its changes before is buffered or in flight it
  is `ready`: the command may delete its rows downstream and copy them again.
- copied: the shard resumes; its changes before P0 (where the copy began) are in the copy
  and dropped (`ShardFlow.copied_from`), those before P1 (where it ended) go in safe mode,
  as a backfill's do: the copy may or may not hold them.
- streaming: the same after a restart, until its source's watermark is past P1; then the
  resync is forgotten.

Once every shard of a source is resynced, nothing before the earliest P0 is needed of it:
its source reads from there, forward past binlogs purged before it read them (the way
out of a purged binlog, `shardmerge resync --source`)."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

import pymysql

from replicator.apply.applier import Applier
from replicator.apply.meta import Meta
from replicator.daemon.pauses import Pauses
from replicator.daemon.safe_mode import SafeMode
from replicator.faults import crash_point
from replicator.shard_flow import ShardFlows
from replicator.shard_id import ShardId
from replicator.source.routing import Router
from replicator.source.source_state import SourceState
from replicator.state.pauses import Pause
from replicator.state.positions import ChangeId
from replicator.state.resync_store import PAUSED_FOR_RESYNC, Resync, ResyncState, ResyncStore
from replicator.transient import transient

log = logging.getLogger("shardmerge.daemon")


class Resyncs:
    def __init__(
        self,
        meta: Meta,
        flows: ShardFlows,
        pauses: Pauses,
        safe: SafeMode,
        sources: Mapping[str, SourceState],
        router: Router,
        shards_of: Callable[[str], Iterable[ShardId]],
    ):
        """`shards_of(source)`: the source's shards its groups have."""
        self.meta, self.flows, self.pauses, self.safe = meta, flows, pauses, safe
        self.sources, self.router, self.shards_of = sources, router, shards_of
        self.store = ResyncStore(meta.q, meta.t)
        self.applier: Applier | None = None  # (made after the pauses are read back)
        self.seen: dict[ShardId, Resync] = {}  # as the last poll read them (query-status)
        self.jobs: dict[str, subprocess.Popen] = {}  # `shardctl resync`'s, by what they copy

    def restore(self) -> None:
        """At the start, before any change is read: the shards a resync copied, their
        changes before the copy dropped and those of its time in safe mode."""
        for resync in self._load().values():
            if resync.state in (ResyncState.COPIED, ResyncState.STREAMING):
                self._copied(resync)

    def poll(self, floors: Mapping[str, ChangeId]) -> None:
        """What the resyncs ask now (`floors`: each source's last watermark written). With
        the downstream away, nothing: the watermarks' writes say so, and retry. A step that
        loses the downstream after it changed the daemon's memory (a pause or resume not
        saved) is not taken again from there: the error goes on, and the daemon starts
        again from what is saved (`StartAgain`; chaos: a resume lost as it was saved left
        the shard running in memory, its paused rows never read again)."""
        try:
            resyncs = self._load()
        except pymysql.err.MySQLError as exc:  # (nothing changed yet: next time)
            log.debug("resyncs not read (%s)", exc)
            return
        try:
            self._steps(resyncs, floors)
        except pymysql.err.MySQLError as exc:
            if transient(exc):
                raise
            log.warning("a resync's step failed (%s); it is taken again in a second", exc)

    def _steps(self, resyncs: Mapping[ShardId, Resync], floors: Mapping[str, ChangeId]) -> None:
        copied = set()
        for resync in resyncs.values():
            if resync.state == ResyncState.REQUESTED:
                self._requested(resync)
            elif resync.state == ResyncState.COPIED:
                self._resume(resync)
                copied.add(resync.shard.source)
            elif resync.state == ResyncState.STREAMING:
                self._streaming(resync, floors.get(resync.shard.source))
        for source in copied:
            self._skip_before_copies(source)

    def _load(self) -> dict[ShardId, Resync]:
        loaded = self.store.parse(self.meta.rows(self.store.sql_load()))
        # (a member's: its own sources' shards; the others' are other members')
        self.seen = {shard: r for shard, r in loaded.items() if shard.source in self.sources}
        return self.seen

    # -- `shardctl resync`: the command run for the operator -------------------------------------------
    def start_job(self, config_path: str | None, what: list[str]) -> int:
        """`shardmerge resync` (`what`: its --shard or --source and the name) started as a
        child of the daemon, its output in the daemon's log; returns its pid."""
        if config_path is None:
            raise ValueError("the daemon was not started from a config file: run `shardmerge resync` itself")
        name = " ".join(what)
        running = self.jobs.get(name)
        if running is not None and running.poll() is None:
            raise ValueError(f"a resync {name} is running already (pid {running.pid})")
        job = subprocess.Popen(
            [sys.executable, "-m", "replicator.cli.shardmerge", "resync", "--config", config_path, *what],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.jobs[name] = job
        threading.Thread(target=_relay, args=(job, name), name="resync-log", daemon=True).start()
        return job.pid

    # -- requested: the shard stops, its changes applied -------------------------------------------
    def _requested(self, resync: Resync) -> None:
        shard = resync.shard
        flow = self.flows.get(shard)
        pause = flow.pause if flow is not None else None
        if shard.source not in self.sources or self.router.route(shard.schema, shard.table) is None:
            self._refuse(resync, f"no route of the task takes {shard}")
        elif pause is not None and pause.reason != PAUSED_FOR_RESYNC:
            self._refuse(
                resync,
                f"shard {shard} is paused ({pause.reason}); resync copies its rows, not its schema: "
                "resolve that first",
            )
        elif pause is None:
            if flow is not None and flow.window is not None:
                return  # (its paused rows of before are being merged: next time)
            state = self.sources.get(shard.source)
            if state is None or state.position is None:
                return  # (its source has not started reading: next time)
            position = state.position
            self.pauses.set(Pause(shard, position, position.change(0), PAUSED_FOR_RESYNC))
        elif self.applier is not None and self.applier.shard_idle(shard):
            self.meta.execute([self.store.sql_state(replace(resync, state=ResyncState.READY))])
            log.info(
                "shard %s paused for its resync at %s; its rows may be copied again",
                shard,
                pause.position,
                extra={"shard": shard, "source": shard.source},
            )

    def _refuse(self, resync: Resync, message: str) -> None:
        log.warning("resync of %s refused: %s", resync.shard, message, extra={"shard": resync.shard})
        self.meta.execute([self.store.sql_state(replace(resync, state=ResyncState.REFUSED, message=message))])

    # -- copied: it resumes from the copy --------------------------------------------------------
    def _copied(self, resync: Resync) -> None:
        """Its changes before P0 dropped, those before P1 in safe mode."""
        self.flows[resync.shard].copied_from = resync.p0.change(0)
        state = self.sources.get(resync.shard.source)
        if state is not None:
            state.name_file(resync.p0)  # (a file its source may not have read yet)
        self.safe.shards = {**self.safe.shards, resync.shard: resync.p1.change(0)}

    def _resume(self, resync: Resync) -> None:
        shard = resync.shard
        self._copied(resync)
        # (saved first: a restart in between finds it streaming and its pause still there)
        self.meta.execute([self.store.sql_state(replace(resync, state=ResyncState.STREAMING))])
        crash_point("resync_streaming")
        log.info(
            "shard %s resynced: it streams from %s (its copy began there), in safe mode till %s",
            shard,
            resync.p0,
            resync.p1,
            extra={"shard": shard, "source": shard.source},
        )
        self._unpause(resync)

    def _skip_before_copies(self, source: str) -> None:
        """Every shard of the source resynced: it reads from the earliest copy's start on,
        if it has not read that far (its binlogs before may be purged)."""
        starts = [self.flows[shard].copied_from for shard in self.shards_of(source)]
        state = self.sources.get(source)
        if not starts or None in starts or state is None or state.position is None:
            return
        first = min(starts)
        if state.position.change(0) >= first:
            return
        state.history = self.meta.history.load(source)  # (the copies' schemas at their start)
        position = state.position_of(first)
        log.info(
            "source %s: every shard of it resynced; it reads from %s, where the first copy began",
            source,
            position,
            extra={"source": source, "position": str(position)},
        )
        state.rewind(position)

    def _unpause(self, resync: Resync) -> None:
        pause = self.flows[resync.shard].pause
        if pause is not None and pause.reason == PAUSED_FOR_RESYNC:
            self.pauses.resume(resync.shard)

    def _streaming(self, resync: Resync, floor: ChangeId | None) -> None:
        self._unpause(resync)  # (a restart came between its state and its resume)
        if floor is None or floor < resync.p1.change(0):
            return
        self.meta.execute([self.store.sql_forget(resync.shard)])
        self.flows[resync.shard].copied_from = None
        self.safe.shards = {s: p for s, p in self.safe.shards.items() if s != resync.shard}
        log.info(
            "shard %s: its resync is done (its source is past %s)",
            resync.shard,
            resync.p1,
            extra={"shard": resync.shard, "source": resync.shard.source},
        )


def _relay(job: subprocess.Popen, name: str) -> None:
    """The job's output into the daemon's log, and how it ended."""
    for line in job.stdout:
        log.info("resync %s: %s", name, line.rstrip())
    code = job.wait()
    (log.info if code == 0 else log.error)("resync %s ended (exit status %d)", name, code)
