"""A task's members on the admin API (issue 75, `shardmerge run --member`; `shardctl members`):
who they are, which sources each reads, which coordinates; moving a source to a member, and
forgetting a member gone. Any member's API serves them: they read and write the meta schema's
store, which the coordinator follows at its next look (once a second)."""

from __future__ import annotations

from typing import Any

from replicator.api.admin import AdminError, Route
from replicator.api.daemon_api import Daemon
from replicator.state.lease import LeaseView

ONE_DAEMON = "this task runs one daemon, no members: start its daemons with `shardmerge run --member NAME`"


def routes(daemon: Daemon) -> dict[tuple[str, str], Route]:
    call = daemon.calls.call
    return {
        ("GET", "/api/v1/members"): lambda body, p: call(lambda: listing(daemon)),
        ("POST", "/api/v1/members/move"): lambda body, p: call(lambda: move(daemon, body)),
        ("POST", "/api/v1/members/remove"): lambda body, p: call(lambda: remove(daemon, body)),
    }


def listing(daemon: Daemon) -> dict[str, Any]:
    """Each member: its host, whether it lives, the sources it reads, whether it coordinates,
    its lag; and the sources the operator moved."""
    return daemon.meta.members.listing(LeaseView(daemon.meta).holder())


def move(daemon: Daemon, body: dict[str, Any]) -> dict[str, Any]:
    source, member = body.get("source"), body.get("to")
    sources = [s.id for s in daemon.task_config.sources]
    if source not in sources:
        task = daemon.config.task
        raise AdminError(400, f"no source {source!r} in task {task}: one of {', '.join(sources)}")
    known = daemon.meta.members.known()
    if not known:
        raise AdminError(409, ONE_DAEMON)
    if member not in known or not known[member].live:
        live = sorted(n for n, k in known.items() if k.live)
        raise AdminError(409, f"no live member {member!r}: move {source} to one of {', '.join(live)}")
    daemon.meta.members.move(source, member)
    return {"source": source, "to": member, "moved": True}


def remove(daemon: Daemon, body: dict[str, Any]) -> dict[str, Any]:
    name = body.get("member")
    known = daemon.meta.members.known()
    if not known:
        raise AdminError(409, ONE_DAEMON)
    if name not in known:
        task = daemon.config.task
        raise AdminError(404, f"no member {name!r} in task {task}: one of {', '.join(sorted(known))}")
    if not daemon.meta.members.remove(name):
        raise AdminError(
            409,
            f"member {name} is live: stop it first (SIGTERM, or `shardctl stop-task` against its admin "
            "API); its sources go to the other members at once; then remove it",
        )
    return {"member": name, "removed": True}
