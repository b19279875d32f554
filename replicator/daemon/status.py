"""What a running daemon tells the admin API: its status, its metrics, and what keeps
it from being ready. Read on the main loop's thread (`Calls`), so nothing it reads
changes under it."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import pymysql

from replicator.apply.applier import Applier
from replicator.apply.ddl_executor import GroupExecutor
from replicator.apply.meta import Meta
from replicator.apply.validator import Validator
from replicator.config import TaskConfig
from replicator.daemon.ddl_path import refused_entry_of
from replicator.daemon.duties import Duties
from replicator.daemon.parking import Parking
from replicator.daemon.resyncs import Resyncs
from replicator.daemon.row_path import RowPath
from replicator.daemon.tenure import Tenure
from replicator.daemon.watermarks import Watermarks
from replicator.metrics import Metrics
from replicator.schema.group import GroupView
from replicator.shard_flow import ShardFlows
from replicator.shard_id import ShardId
from replicator.source.binlog_end import BinlogEnd, EndProbe
from replicator.source.source_state import SourceState
from replicator.state.lease import LeaseView
from replicator.state.pauses import Pause
from replicator.state.resync_store import PAUSED_FOR_RESYNC, Resync, ResyncState


class Running(Protocol):
    """What the status reads of the daemon (replicator/daemon/main_loop.py)."""

    config: TaskConfig
    sources: Mapping[str, SourceState]
    flows: ShardFlows
    executors: Mapping[str, GroupExecutor]
    meta: Meta
    metrics: Metrics
    applier: Applier | None
    validator: Validator | None
    rows: RowPath
    duties: Duties  # (its `downstream_error`)
    tenure: Tenure  # (its `lease`)
    parking: Parking
    resyncs: Resyncs
    watermarks: Watermarks
    ends: EndProbe | None

    def views(self) -> Mapping[str, GroupView]: ...


def not_ready(daemon: Running) -> dict[str, str]:
    """What keeps the daemon from doing its work, by part: a source whose stream is not
    connected, a target it could not write to lately, a failed applier."""
    out = {}
    for s in daemon.sources.values():
        if not s.connected:
            out[f"source {s.id}"] = s.error or "connecting"
    if daemon.duties.downstream_error is not None:
        out["target"] = daemon.duties.downstream_error
    if daemon.applier is not None and daemon.applier.failure is not None:
        out["applier"] = "a partition failed; see the log"
    return out


def render_metrics(daemon: Running) -> str:
    now = time.time()
    m, sources = daemon.metrics, daemon.sources.values()
    m.lag.set_all({(s.id,): max(0.0, now - s.event_time) for s in sources if s.event_time})
    m.paused_sources.set_all({(s.id,): float(s.paused) for s in sources})
    m.connected.set_all({(s.id,): float(s.connected) for s in sources})
    parked = {shard: size for shard in daemon.parking.shards if (size := daemon.parking.size(shard))}
    m.parked_rows.set_all({(str(k),): float(v.rows) for k, v in parked.items()})
    m.parked_bytes.set_all({(str(k),): float(v.bytes) for k, v in parked.items()})
    # (beside each park, so `parked / limit` matches shard for shard in PromQL)
    m.park_limit.set_all({(str(k),): float(daemon.parking.limit) for k in parked})
    lease = daemon.tenure.lease
    m.active.set_all({(lease.name,): float(lease.held.epoch)} if lease is not None and lease.held else {})
    m.role.set_all({(daemon.config.task, lease.name, "active"): 1.0} if lease is not None else {})
    standing = daemon.tenure.standing
    m.member.set_all(
        {(daemon.config.task, standing.member.name, str(standing.member.epoch),
          "coordinator" if standing.coordinator else "member"): 1.0}
        if standing is not None else {}
    )
    ends = daemon.ends.ends if daemon.ends is not None else {}
    behind = {s.id: _behind(s, end) for s in sources if (end := ends.get(s.id)) is not None}
    m.behind_bytes.set_all({(i,): float(b) for i, (b, _) in behind.items() if b is not None})
    m.behind_transactions.set_all({(i,): float(t) for i, (_, t) in behind.items() if t is not None})
    views = daemon.views()
    m.blocked.set_all({(t,): float(len(v.blocked)) for t, v in views.items()})
    paused = daemon.flows.pauses()
    m.paused_shards.set_all({(t,): float(sum(s in paused for s in v.shards)) for t, v in views.items()})
    m.journal_held.set_all({(t,): float(len(_held_entries(t, paused.values()))) for t in views})
    if daemon.applier is not None:
        m.queue_depth.set_all({(str(p.part),): float(p.queue.qsize()) for p in daemon.applier.parts})
    if daemon.validator is not None:
        m.validator_pending.set_all({(t,): float(n) for t, n in daemon.validator.pending_counts.items()})
    return m.render()


def _held_entries(target: str, pauses: Iterable[Pause]) -> set[int]:
    """The journal entries of `target` held now, as the shards paused on them say (each such
    pause names its entry: the refused one, or one waiting for it)."""
    return {seq for p in pauses if (seq := refused_entry_of(p.reason, target)) is not None}


def _member(standing) -> dict[str, Any] | None:
    if standing is None:
        return None
    member = standing.member
    return {
        "name": member.name,
        "epoch": member.epoch,
        "coordinator": standing.coordinator,
        "sources": sorted(standing.sources),
    }


def _members(daemon: Running) -> dict[str, Any] | None:
    if daemon.tenure.standing is None:
        return None
    try:
        return daemon.meta.members.listing(LeaseView(daemon.meta).holder())
    except pymysql.err.MySQLError as exc:  # (the downstream away: the rest of the status still says)
        return {"error": str(exc)}


def status(daemon: Running) -> dict[str, Any]:
    now = time.time()
    applier, validator, lease = daemon.applier, daemon.validator, daemon.tenure.lease
    views = daemon.views()
    ends = daemon.ends.ends if daemon.ends is not None else {}
    paused = daemon.flows.pauses()
    return {
        "task": daemon.config.task,
        "role": "active",
        "task_mode": daemon.config.task_mode,
        "phase": "streaming",
        "stage": "sync",  # (DM's stages: dump and load are `shardmerge backfill`'s)
        # DM's `synced`: every change each source's binlog had when last asked is applied,
        # and no shard waits
        "synced": not paused and _applied_to_the_end(daemon, ends),
        # the daemon running the task (one of its daemons: the others wait as standbys)
        "daemon": {"name": lease.name, "epoch": lease.held.epoch} if lease and lease.held else None,
        # one member of the task's, reading its share of the sources (issue 75)
        "member": _member(daemon.tenure.standing),
        # every member of the task, as the store has them (each one's lag as it last said)
        "members": _members(daemon),
        "sources": {s.id: _source(s, now, ends.get(s.id)) for s in daemon.sources.values()},
        "groups": {
            t: {
                "version": str(view.version),
                "blocked": {str(k): v.to_data() for k, v in view.blocked.items()},
                "ddl_running": _running(daemon.executors.get(t), now),
                "retrying": _retrying(daemon.executors.get(t)),
            }
            for t, view in views.items()
        },
        "paused": {
            str(k): {
                "position": str(p.position),
                # held at a DDL: its own position, as `binlog list` and `--pos` take it (the
                # pause's is past it, where the shard is read again from)
                **_held_at(views, k),
                "reason": _reason(p.reason, daemon.resyncs.seen.get(k)),
                **_parked(daemon.parking, k),
                **_refused_of(daemon.meta, k),
            }
            for k, p in paused.items()
        },
        "resyncs": {
            str(k): {
                "state": str(r.state),
                **({"p0": str(r.p0)} if r.p0 else {}),
                **({"p1": str(r.p1)} if r.p1 else {}),
                **({"message": r.message} if r.message else {}),
            }
            for k, r in daemon.resyncs.seen.items()
        },
        "filtered": {str(k): dict(c) for k, c in daemon.rows.counts.items()},
        "filtered_rows": {str(k): dict(c) for k, c in daemon.rows.row_counts.items()},
        "dropped": {str(k): dict(c) for k, c in daemon.rows.dropped_counts.items()},
        # work waiting on an error a retry cures, with its attempt (replicator/transient.py)
        "retrying": _retrying_all(daemon),
        "validation": validator.status() if validator is not None else None,
        "applied": applier.tally.applied if applier else 0,  # rows
        "applied_events": applier.tally.applied_events if applier else 0,  # row events among them
        "downstream_reconnects": applier.tally.reconnects if applier else 0,
    }


def _held_at(views: Mapping[str, GroupView], shard: ShardId) -> dict[str, str]:
    block = next((v.blocked[shard] for v in views.values() if shard in v.blocked), None)
    return {"held_at": block.position} if block is not None and block.position else {}


def _reason(reason: str, resync: Resync | None) -> str:
    """A shard paused for a resync whose command failed: why, and the way out (it said
    "being copied" for good)."""
    if reason == PAUSED_FOR_RESYNC and resync is not None and resync.state == ResyncState.FAILED:
        return f"resync {resync.message}"
    return reason


def _applied_to_the_end(daemon: Running, ends: Mapping[str, BinlogEnd]) -> bool:
    for state in daemon.sources.values():
        end, bound = ends.get(state.id), daemon.watermarks.bound(state)
        if end is None or bound is None or bound < end.end.change(0):
            return False
    return True


def _behind(s: SourceState, end: BinlogEnd) -> tuple[int | None, int | None]:
    """Bytes and transactions of the source's binlog past where it is read (None: not known)."""
    return end.bytes_behind(s.position) if s.position else None, end.transactions_behind(s.trail.read)


def _source(s: SourceState, now: float, end: BinlogEnd | None) -> dict[str, Any]:
    behind = {}
    if end is not None:
        behind_bytes, behind_transactions = _behind(s, end)
        behind = {
            "binlog_end": str(end.end),  # the server's, when last asked (every few seconds)
            "behind_bytes": behind_bytes,
            "behind_transactions": behind_transactions,
        }
    return {
        **behind,
        "events_per_s": round(s.rate.per_second(time.monotonic(), s.received), 1),
        "position": str(s.position) if s.position else None,
        "connected": s.connected,
        "error": s.error,
        "received": s.received,
        "reconnects": s.reconnects,
        "lag": round(max(0.0, now - s.event_time), 3) if s.event_time else None,
        "state": "paused" if s.paused else "running" if s.connected else "connecting",
        # the server it reads and the GTID state where it reads (docs/operations/failover.md)
        "server_id": s.server_id,
        "gtid": s.trail.read,
    }


def _parked(parking: Parking, shard: ShardId) -> dict:
    """What the paused shard's park holds (docs/operations/long-pauses.md)."""
    size = parking.size(shard)
    return {"parked": {"rows": size.rows, "bytes": size.bytes}} if size is not None else {}


def _refused_of(meta: Meta, shard: ShardId) -> dict:
    """The row the downstream refused that a paused shard waits on, if that is why."""
    pending = meta.dead_letters.list(shard, "pending")
    if not pending:
        return {}
    entry = pending[-1]
    return {"refused": {k: entry[k] for k in ("seq", "target", "key", "statement", "error")}}


def _running(executor: GroupExecutor | None, now: float) -> dict | None:
    """The downstream statement a group's executor runs now, how, and for how long."""
    running = executor.running if executor is not None else None
    if running is None:
        return None
    return {"statement": running.statement, "how": running.how, "seconds": round(now - running.started, 1)}


def _retrying(executor: GroupExecutor | None) -> dict | None:
    """A journal entry of the group waiting on an error a retry cures (replicator/transient.py)."""
    retrying = executor.retrying if executor is not None else None
    return retrying.to_data() if retrying is not None else None


def _retrying_all(daemon: Running) -> list[dict]:
    """Every part waiting to try its work again: the applier's partitions, the groups'
    decisions and journal entries."""
    out = []
    if daemon.applier is not None:
        out += [r.to_data() for _, r in sorted(dict(daemon.applier.retrying).items())]
    for executor in daemon.executors.values():
        if executor.retrying is not None:
            out.append(executor.retrying.to_data())
    return out
