"""The state a task's daemon saved in the downstream meta schema, read without the
daemon: where each source resumes, each group's version and blocked shards (with
the DDL, the reason and the binlog position), paused shards, and the chunks of a
backfill running or interrupted."""

from __future__ import annotations

from typing import Any

from lattice import render_table
from replicator.apply.meta import Meta
from replicator.config import TaskConfig
from replicator.schema.coordinator import Coordinator
from replicator.servers import connect_downstream
from replicator.source.routing import Router
from replicator.state.coordinator_store import MetaStore
from replicator.state.lease import Lease
from replicator.state.pauses import RESUMING_REASON
from replicator.state.positions import position_text


def _running_daemon(meta: Meta, config: TaskConfig) -> dict[str, Any] | None:
    lease = Lease(meta.connect, meta.q, config.task, config.options.lease_ttl)
    try:
        return lease.holder()
    finally:
        lease.close()


def saved_status(config: TaskConfig) -> dict[str, Any]:
    down = config.target.connection_kwargs()
    meta = Meta(lambda: connect_downstream(down), config.target.meta_schema, config.task)
    meta.ensure()
    groups = {}
    for target in Router.from_config(config).targets():
        route = next(r for r in config.routes if r.target == target)  # (all fill the same columns)
        coordinator = Coordinator(
            target, config.target.flavor, MetaStore(meta, target), **route.coordinator_extract()
        )
        groups[target] = {
            "version": str(coordinator.version),
            "shards": list(map(str, sorted(coordinator.shards))),
            "blocked": {str(s): b.to_data() for s, b in coordinator.blocked.items()},
            "columns": coordinator.column_states(),
            "table": render_table(coordinator.target, config.target.flavor, name=target)
            if coordinator.target
            else None,
            "history": coordinator.group.history,
        }
    records = meta.backfill.load()
    pauses = meta.pauses.load()
    blocked = {s for g in groups.values() for s in g["blocked"]}
    daemon = _running_daemon(meta, config)
    if meta.task_state.load() is not None:
        # (what the task does now: a stream whose daemon is down is stopped, wherever it was)
        phase = "streaming" if daemon is not None and daemon["live"] else "stopped"
    elif records and all(r.state == "done" for r in records.values()):
        phase = "backfilled"
    elif records:
        phase = "backfill " + ", ".join(sorted({r.state for r in records.values()}))
    else:
        phase = "not started"
    # a backfill running or interrupted: how far each table's chunks are
    backfill = {
        target: {
            "chunks": sum(len(cs) for cs in shards.values()),
            "done": sum(c.finished for cs in shards.values() for c in cs),
            "rows": sum(c.rows or 0 for cs in shards.values() for c in cs),
        }
        for target, shards in meta.backfill.load_chunks().items()
    }
    return {
        "task": config.task,
        "task_mode": config.task_mode,
        "phase": phase,
        # the daemon holding the task's lease (live: not expired), the others standbys
        "daemon": daemon,
        "members": _members(meta),
        "sources": {s: {"position": position_text(p, g)} for s, (p, _, g) in meta.watermarks.load().items()},
        "groups": groups,
        "backfill": backfill,
        # a resumed shard whose paused rows are not merged yet is resuming, not paused: no way
        # out applies to it (the daemon's own status has it running)
        "paused": {
            str(s): {"position": str(p.position), **_held_at(groups, str(s)), "reason": p.reason}
            for s, p in pauses.items()
            if p.reason != RESUMING_REASON or str(s) in blocked
        },
        "resuming": sorted(
            str(s) for s, p in pauses.items() if p.reason == RESUMING_REASON and str(s) not in blocked
        ),
    }


def _members(meta: Meta) -> dict[str, dict[str, Any]]:
    """The task's live members (issue 75, `shardmerge run --member`) and the sources each
    reads, as the coordinator gave them out (none: one daemon runs the task)."""
    owners = meta.members.owners()
    return {
        name: {
            "epoch": m.epoch,
            "sources": sorted(s for s, o in owners.items() if (o.member, o.epoch) == (name, m.epoch)),
        }
        for name, m in sorted(meta.members.live().items())
    }


def _held_at(groups: dict[str, dict], shard: str) -> dict[str, str]:
    """Held at a DDL: its own position (as the daemon's status gives it)."""
    block = next((g["blocked"][shard] for g in groups.values() if shard in g["blocked"]), None)
    return {"held_at": block["position"]} if block and block.get("position") else {}
