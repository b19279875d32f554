"""What a source worker is started with: the setup the daemon hands its process
(`WorkerSetup`, pickled over to it), and the part of it that never changes there, which
the worker's handlers share (`WorkerContext`, frozen)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from lattice import Flavor
from replicator.server_rules import ServerRules, server_rules
from replicator.source.messages import Pin
from replicator.source.routing import Router
from replicator.source.row_events import RowShape
from replicator.state.positions import Position


@dataclass
class WorkerSetup:
    source: str
    connection: dict[str, Any]  # pymysql connect kwargs of the source
    server_id: int  # the replica server id we stream with
    router: Router
    position: Position | None  # a transaction start; None: start from `gtid`
    gtid: str | None
    schemas: dict[str, str]  # "schema.table" -> CREATE TABLE at `position`
    upstream: Flavor = Flavor.MARIADB
    upstream_server: int | None = None  # the id of the server the positions are in (None: any)
    heartbeat: float = 1.0
    max_backoff: float = 30.0
    task: str = ""
    log_format: str = "text"
    log_level: str = "INFO"
    native: dict[str, RowShape] = field(default_factory=dict)  # see NativeTargets
    pins: tuple[Pin, ...] = ()  # tables decisions set from `position` on (`SourceState.pins_from`)


@dataclass(frozen=True)
class WorkerContext:
    """The source a worker reads and how, the same for the life of its process: handed to
    each of its handlers, which keep what they read of it and change none of it."""

    source: str
    connection: Mapping[str, Any]  # pymysql connect kwargs of the source (read-only)
    server_id: int  # the replica server id we stream with
    router: Router
    upstream: Flavor = Flavor.MARIADB
    upstream_server: int | None = None  # the id of the server the positions are in (None: any)
    heartbeat: float = 1.0
    max_backoff: float = 30.0
    # the daemon's process when the worker started: another parent means it is gone
    parent: int = field(default_factory=os.getppid)
    rules: ServerRules = field(init=False)  # (asked per row event: looked up once)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rules", server_rules(self.upstream))

    @classmethod
    def of(cls, setup: WorkerSetup) -> WorkerContext:
        return cls(
            source=setup.source,
            connection=MappingProxyType(dict(setup.connection)),
            server_id=setup.server_id,
            router=setup.router,
            upstream=setup.upstream,
            upstream_server=setup.upstream_server,
            heartbeat=setup.heartbeat,
            max_backoff=setup.max_backoff,
        )

    def daemon_gone(self) -> bool:
        """The daemon was killed (a worker outliving it would hold our replica server id)."""
        return os.getppid() != self.parent
