"""What the admin API's operations use of a running daemon (replicator/daemon/main_loop.py),
so that they need not import it (the daemon imports them to serve its routes), and the
pieces every operation shares: reading a request's body, finding a shard's group, and
waiting for a decision of a group's executor."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any, Protocol

from lattice import Flavor
from replicator.api.admin import AdminError, Calls
from replicator.apply.ddl_executor import GroupExecutor
from replicator.apply.ddl_job import DDLJob
from replicator.apply.meta import Meta
from replicator.apply.validator import Validator
from replicator.config import TaskConfig
from replicator.schema.coordinator import Decision
from replicator.schema.group import GroupView
from replicator.shard_flow import ShardFlows
from replicator.shard_id import ShardId
from replicator.source.routing import Router
from replicator.state.positions import ChangeId

if TYPE_CHECKING:
    from replicator.api.samples import Samples
    from replicator.daemon.resyncs import Resyncs

OPERATION_TIMEOUT = 120.0


class Daemon(Protocol):
    calls: Calls
    executors: Mapping[str, GroupExecutor]
    flavor: Flavor
    meta: Meta
    flows: ShardFlows
    router: Router
    config: TaskConfig
    validator: Validator | None
    resyncs: Resyncs
    stopping: threading.Event  # set: the daemon stops cleanly (as on SIGTERM)
    samples: Samples  # the last hour's lag and rows applied (replicator/api/samples.py)

    @property
    def sources(self) -> Collection[str]: ...

    def views(self) -> Mapping[str, GroupView]: ...

    def set_source_paused(self, source: str, paused: bool) -> None: ...

    def resume_shard(self, shard: ShardId) -> None: ...

    def mark_applied(self, shard: ShardId, part: int, change: ChangeId) -> None: ...

    def submit_operation(self, target: str, job: DDLJob) -> Future: ...

    def status(self) -> dict: ...


def required(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value.strip():
        raise AdminError(400, f"missing {name!r} (a string)")
    return value


def shard_of(body: dict[str, Any]) -> ShardId:
    try:
        return ShardId.parse(required(body, "shard"))
    except ValueError as exc:
        raise AdminError(400, str(exc)) from None


def group_view(daemon: Daemon, target: str) -> GroupView:
    views = daemon.views()
    if target not in views:
        known = ", ".join(sorted(views)) or "none"
        raise AdminError(404, f"no shard group {target!r}; the task's groups: {known}")
    return views[target]


def shard_target(daemon: Daemon, shard: ShardId) -> str:
    for target, c in daemon.views().items():
        if shard in c.shards:
            return target
    route = daemon.router.route(shard.schema, shard.table) if shard.source in daemon.sources else None
    if route is not None and daemon.flows.is_paused(shard):
        return route.target  # paused outside its group (its table left it): set-schema puts it back
    known = ", ".join(str(s) for c in daemon.views().values() for s in sorted(c.shards))
    raise AdminError(404, f"no shard {str(shard)!r} in the task (source.schema.table); shards: {known}")


def decision_data(decision: Decision) -> dict[str, Any]:
    return {
        "result": decision.result,
        "shard": str(decision.shard) if decision.shard is not None else None,
        "message": decision.message,
        "downstream": list(decision.downstream),
        "version": str(decision.version),
        "blocked": list(map(str, decision.blocked)),
        "unblocked": list(map(str, decision.unblocked)),
    }


def decided(daemon: Daemon, submit: Callable[[], Future], kind: str) -> Decision:
    """Submit a request on the daemon's main thread (`submit` returns the future of its
    group executor's decision) and wait here, in the HTTP thread, for the decision."""
    future: Future = daemon.calls.call(submit)
    try:
        return future.result(timeout=OPERATION_TIMEOUT)
    except FutureTimeout as exc:
        raise AdminError(
            504, f"{kind}: no decision within {OPERATION_TIMEOUT:.0f}s; see query-status"
        ) from exc
