"""A daemon's start, once it holds its lease and its admin API listens (`Daemon.setup`), in
order: its sources opened (and followed where their servers moved), what was saved read
back (watermarks, pauses, parks, resumed shards' windows, checkpoints), each group opened;
the applier, the paths and the groups' DDL executors made and wired (an executor finishes
what its journal holds of a crash); the pauses restored, then the workers and the threads
started and what waited for them fed. The pieces themselves are in `startup.py`.

Threads: the main thread's, before the loop turns; the admin API's calls wait in `Calls`
meanwhile (its reads are served while the start waits for the applier, `Daemon.waiting`)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pymysql

from lattice import Flavor
from replicator import compiled
from replicator.apply.applier import Applier
from replicator.apply.ddl_executor import GroupExecutor
from replicator.apply.version_fence import DdlMarks, VersionFence
from replicator.daemon import startup
from replicator.daemon.ddl_path import DDLPath, ForwardToCoordinator, refused_entry, refused_entry_of
from replicator.daemon.dispatch import Dispatch
from replicator.daemon.membership import StandingChanged
from replicator.daemon.row_path import RowPath
from replicator.daemon.workers import native_shapes
from replicator.faults import fault_point, faults_armed
from replicator.heap import freeze_long_lived
from replicator.servers import connect, connect_downstream
from replicator.shard_id import ShardId
from replicator.source.binlog_end import END_TIMEOUT, EndProbe
from replicator.source.source_state import SourceGtids, SourceState
from replicator.source.spawn import start_fork_server
from replicator.state.positions import ChangeId, Position
from replicator.state.task_state import Spread

if TYPE_CHECKING:
    from replicator.daemon.main_loop import Daemon

log = logging.getLogger("shardmerge.daemon")


@dataclass(frozen=True)
class Saved:
    """What a start read back of the task's saved state, for the rest of the start."""

    partitions: int
    spread: Spread  # by source (the partitions take a source each) or by key
    draining: tuple[ShardId, ...]  # resumed before their parks were applied
    windows: Mapping[ShardId, tuple[int, int]]  # resumed shards' paused rows not merged yet
    checkpoints: dict[tuple[ShardId, int], ChangeId]  # (the applier takes them)


def start(d: Daemon) -> None:
    saved = _read_back(d)
    journal_done = _wire(d, saved)
    config, windows = d.config, saved.windows
    d.pauses.restore(d.views(), windows, lambda source: startup.binlog_end(config, d.sources[source]))
    # (a resumed shard's window reopened: its paused changes come from its park again)
    draining = [*saved.draining, *d.parking.drain([s for s in windows if d.flows[s].pause is None])]
    _windows_read_from_their_pause(d, windows)
    d.resyncs.restore()  # (before its park is fed or its source read)
    d.meta.task_state.mark_started(saved.partitions, saved.spread)
    native = native_shapes(d.applier, d.safe, d.infos)
    positions = {s: _resume_position(d, state) for s, state in d.sources.items()}
    epochs = d.tenure.stream_epochs(d.sources)
    d.workers.start(config, d.options, d.router, positions, native, d.log_format, epochs, d.flows.decided)
    freeze_long_lived()  # (after: the workers need nothing of it)
    d.applier.start()
    d.ends = EndProbe(
        [(source.id, source.connection_kwargs()) for source in config.sources],
        lambda kwargs: connect(kwargs, read_timeout=END_TIMEOUT),
    )
    d.ends.start()
    if d.validator is not None:
        d.validator.start()
    for executor in d.executors.values():
        executor.start()
    for shard in draining:  # (resumed before their parks were applied)
        d.parking.replay(shard, d.dispatch.parked)
    for shard in journal_done:
        log.info(
            "shard %s: the journal entry it paused for is done; it resumes",
            shard,
            extra={"shard": shard, "source": shard.source},
        )
        d.pauses.resume(shard)
    if faults_armed() and fault_point("start_lost"):
        # (tests: the downstream lost at the end of a start, everything started)
        raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server (a fault injected)")
    log.info("%s", compiled.status())
    log.info(
        "task %s running: %d sources, %d shard groups, %d partitions%s",
        config.task,
        len(d.sources),
        len(d.coordinators),
        saved.partitions,
        " (safe mode)" if d.safe() else "",
    )


def _read_back(d: Daemon) -> Saved:
    """The sources opened, the saved state read back, each group's coordinator opened."""
    config, meta, options = d.config, d.meta, d.options
    start_fork_server()  # (if `run` did not yet) its imports run while the daemon connects
    opened, watermarks = startup.open_sources(config, meta, d.router)
    if d.tenure.standing is not None:
        watermarks = _members_sources(d, opened, watermarks)
    d.safe.before = startup.backfill_ends(meta, config.task, watermarks)
    d.sources.update({s: SourceState(s, Flavor.parse(o.flavor)) for s, o in opened.items()})
    if startup.follow_moves(config, meta, opened, watermarks):
        watermarks = meta.watermarks.load()
        d.safe.before = startup.backfill_ends(meta, config.task, watermarks)  # (moved too)
    servers = meta.watermarks.server_ids()
    for s, o in opened.items():
        d.sources[s].server_id = servers.get(s, o.server_id)
    row_events = startup.row_events(options, d.flavor, d.sources)
    member = d.tenure.standing is not None
    # (a member's checkpoints are the task's, read by whichever member reads a source next:
    # spread over the task's sources, not its own)
    every = [s.id for s in d.task_config.sources] if member else d.sources
    partitions, spread = startup.partitions(meta, options, row_events, d.safe, every, member=member)
    startup.load_sources(config, meta, d.sources, watermarks, opened)
    here = d.sources  # (a member's: the shards of its sources only; others are other members')
    pauses, ddl_done = meta.pauses.load(), meta.ddl_done.load()
    d.flows.restore(
        {s: p for s, p in pauses.items() if s.source in here},
        {s: c for s, c in ddl_done.items() if s.source in here},
    )
    d.watermarks.floors = {s: bound for s, (_, bound, _) in watermarks.items()}
    draining = d.parking.restore(d.watermarks.floors)
    windows = startup.replays(meta, d.flows, here)  # (their paused rows not merged yet: read again)
    checkpoints = meta.checkpoints.load()
    if member or d.safe.unclean:
        d.safe.read_again(tops_read_again(checkpoints, watermarks, here))
    group_sources = {**d.sources, **_others_first_start(d)} if d.tenure.standing is not None else d.sources
    for target in d.router.targets():
        d.coordinators[target], d.infos[target] = startup.open_group(
            target, config, meta, d.down, d.flavor, group_sources, d.router, opens=d.tenure.coordinates
        )
    return Saved(partitions, spread, tuple(draining), windows, checkpoints)


def tops_read_again(
    checkpoints: Mapping[tuple[ShardId, int], ChangeId], watermarks: Mapping, sources: Collection[str]
) -> dict[str, ChangeId]:
    """Each of the sources' highest checkpoint, where it is at or past the watermark its
    reading starts from: the changes up to it are read again, some of them applied already."""
    tops: dict[str, ChangeId] = {}
    for (shard, _), cid in checkpoints.items():
        if shard.source in sources:
            tops[shard.source] = max(cid, tops.get(shard.source, cid))
    return {s: top for s, top in tops.items() if s not in watermarks or top >= watermarks[s][1]}


def _members_sources(d: Daemon, opened: Mapping, watermarks: dict) -> dict:
    """A member's start reads its own sources' watermarks only; one of them with none saved
    yet waits for the coordinator, which makes every source's first start (so that each
    group opens with every shard of the task)."""
    if not d.tenure.coordinates:
        new = sorted(s for s in opened if s not in watermarks)
        if new:
            raise StandingChanged(f"source {', '.join(new)} has no saved start yet: the coordinator makes it")
    return {s: w for s, w in watermarks.items() if s in opened}


def _others_first_start(d: Daemon) -> dict[str, SourceState]:
    """The coordinator's, where a source other members read has no saved start yet (a new
    task or source): it is opened and its start saved here, the member reading it starts
    from there; returned for the groups to open with its shards."""
    if not d.tenure.coordinates:
        return {}
    task = d.task_config
    saved = d.meta.watermarks.load()
    new = tuple(s for s in task.sources if s.id not in d.sources and s.id not in saved)
    others = replace(task, sources=new)
    if not others.sources:
        return {}
    opened, watermarks = startup.open_sources(others, d.meta, d.router)
    states = {s: SourceState(s, Flavor.parse(o.flavor)) for s, o in opened.items()}
    startup.load_sources(others, d.meta, states, watermarks, opened)
    return states


def _wire(d: Daemon, saved: Saved) -> list[ShardId]:
    """The validator, the applier, the paths and the groups' executors made and wired.
    Returns the shards paused for a journal entry that is done now (`_open_executor`)."""
    config, meta, options = d.config, d.meta, d.options

    def file_of(shard: ShardId, cid: ChangeId) -> str:
        return d.sources[shard.source].file_of(cid[0])

    d.validator = startup.validator(config, d.infos, d.down, meta, file_of, d.metrics)
    # (a task's members share its tables: each batch is checked against their versions)
    shared = d.tenure.standing is not None
    d.applier = d.pauses.applier = d.windows.applier = Applier(
        meta,
        d.infos,
        d.down,
        saved.partitions,
        options.batch_size,
        d.safe,
        saved.checkpoints,
        d.errors.put,  # (from an apply thread: handled by the main loop)
        options.max_backoff,
        metrics=d.metrics,
        spread=saved.spread,
        skip_refused=options.on_row_error == "skip",
        file_of=file_of,
        on_committed=d.validator.committed if d.validator is not None else None,
        waiting=d.waiting,
        versions=VersionFence(meta.table_versions, d.infos, d.flavor) if shared else None,
    )
    d.resyncs.applier = d.watermarks.applier = d.duties.applier = d.applier
    meta.gtids = SourceGtids(d.sources)
    d.rows = RowPath(d.flows, d.gate, d.executors, d.applier, d.windows, d.pauses, meta, d.infos, d.metrics)
    d.ddls = DDLPath(d.flows, d.gate, d.executors, d.rows, d.windows, d.pauses, meta, d.metrics)
    d.ddls.members = d.tenure.standing is not None
    if not d.tenure.coordinates:

        def settle() -> None:  # (the shard's rows before its DDL committed, as a barrier has them)
            d.applier.flush()
            d.applier.wait_idle()

        standing = d.tenure.standing
        d.ddls.forward = ForwardToCoordinator(
            meta, standing.member.name, standing.sources, settle, d.membership.groups, standing.groups
        )
    d.dispatch = Dispatch(
        d.sources,
        d.flows,
        d.executors,
        d.pauses,
        d.rows,
        d.ddls,
        d.metrics,
        d.workers.failed,
        d.results,
        d.errors,
    )
    d.pauses.feed = d.dispatch.parked
    d.rows.unreadable = d.dispatch.unreadable
    journal_done: list[ShardId] = []
    for target in d.coordinators:
        journal_done += _open_executor(d, target)
    return journal_done


def _open_executor(d: Daemon, target: str) -> list[ShardId]:
    """The group's DDL executor; it finishes what its journal holds of a crash, and a
    downstream DDL that failed there pauses its shard. Returns the shards paused for an
    entry that is done now."""
    coordinator = d.coordinators[target]
    # (a task's members share the table: the other members' batches hold on it while a DDL does)
    shared = d.tenure.standing is not None
    marks = DdlMarks(d.meta.table_versions, target, lambda: connect_downstream(d.down)) if shared else None
    executor = d.executors[target] = GroupExecutor(
        target,
        coordinator,
        coordinator.store,
        d.meta,
        d.applier,
        d.infos[target],
        d.down,
        d.results,
        d.config.filters.events,
        copy_mode=d.options.copy_ddl,
        flavors={source: state.flavor for source, state in d.sources.items()},
        marks=marks,
    )
    if not d.tenure.coordinates:
        # (a member that does not coordinate runs no DDL and finishes no journal entry: the
        # coordinator does; its executor only holds the group's view for its rows, and reads
        # the table once the decisions' statements ran, not between them)
        executor.await_entries()
        executor.refresh()
        d.flows.set_cleared(executor.publish().shards, executor.view.cleared)
        return []
    recovered, refused = executor.recover()
    # (from 0, so the first refusal is an increase to Prometheus, not a series appearing)
    d.metrics.journal_refused.inc(target, amount=0)
    if refused:  # (refused again: the first of them; the rest wait for it)
        d.metrics.journal_refused.inc(target)
    if recovered:
        log.info("%s: finished %d journal entries left by a crash", target, recovered)
    # shards paused for an entry that is done now (finished here, or by the operator's
    # hand before the stop): their pause and its way out are stale, they resume by
    # themselves once the daemon runs (issue 70: `journal retry` answered 404, and the
    # shard stayed paused till a person ran resume-shard, which no message named)
    pending = {e["seq"] for e in d.meta.journal.pending(target)}
    done = []
    for shard, pause in d.flows.pauses().items():
        seq = refused_entry_of(pause.reason, target)
        if seq is not None and seq not in pending:
            done.append(shard)
    first = refused[0][0]["seq"] if refused else None  # (the one refused; the rest wait for it)
    for entry, error in refused:
        shard = entry["shard"]
        if shard and not d.flows.is_paused(shard):
            waits = first if entry["seq"] != first else None
            d.pauses.pause(shard, None, refused_entry(target, entry["seq"], error, waits))
    executor.refresh()
    view = executor.publish()
    d.flows.set_cleared(view.shards, view.cleared)
    return done


def _windows_read_from_their_pause(d: Daemon, shards: Iterable[ShardId]) -> None:
    """What a resume keeps true (`Pauses.resume`): a reopened window that no park feeds
    is read from its shard's pause, its source's saved watermark not past it. One past
    it would lose the shard's rows of its paused time, shown running (live stories
    531012): said, and read from the pause all the same."""
    for shard in shards:
        window = d.flows[shard].window
        floor = d.watermarks.floors.get(shard.source)
        if window is None or shard in d.parking.shards or floor is None or floor <= window.hold:
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
        d.watermarks.back_to(shard.source, window.hold)
        d.rows.behind_watermark(shard)


def _resume_position(d: Daemon, state: SourceState) -> Position | None:
    """The watermark: before the workers run, the saved one or a paused shard's start."""
    for pause in d.flows.pauses().values():
        if pause.source == state.id:
            state.name_file(pause.position)
    bound = d.watermarks.bound(state)
    return state.position_of(bound) if bound is not None else None
