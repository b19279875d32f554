"""How to reach one sandbox server (a connection, statements run, a ping), what `status` tells
of it, and the error every part of the sandbox raises."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import pymysql
from pymysql.connections import Connection
from pymysql.constants import CLIENT

from replicator.servers import connect, server_version

Role = Literal["upstream", "downstream"]

# The kernel limit for AF_UNIX paths is 108 bytes including the NUL.
_MAX_SOCKET_PATH = 100


class SandboxError(RuntimeError):
    """A sandbox server could not be set up, started, reached or stopped."""


@dataclass(frozen=True, kw_only=True)
class Instance:
    """How to reach one sandbox server. Immutable: a restarted server keeps its port."""

    name: str
    role: Role
    host: str = "127.0.0.1"
    port: int
    server_id: int
    datadir: Path
    user: str = "root"
    password: str = ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def error_log(self) -> Path:
        return self.datadir / "error.log"

    @property
    def tmpdir(self) -> Path:
        # Not inside the datadir, where any directory shows up as a database.
        return self.datadir.with_name(self.datadir.name + ".tmp")

    @property
    def socket_path(self) -> Path:
        path = self.datadir / "s.sock"
        if len(str(path)) <= _MAX_SOCKET_PATH:
            return path
        return Path("/tmp") / f"shardmerge-{self.port}.sock"

    def connect(self, database: str | None = None, **kwargs: Any) -> Connection:
        server = {"host": self.host, "port": self.port, "user": self.user, "password": self.password}
        # max_allowed_packet as the servers have it (commands.COMMON_SERVER_OPTIONS)
        return connect(server, database=database, **{"max_allowed_packet": 1 << 30, **kwargs})

    def execute(self, sql: str | Iterable[str], database: str | None = None) -> list[tuple[Any, ...]]:
        """Run one statement, several `;`-separated ones, or a list of them; return the rows of
        the last one (empty for statements without a result set)."""
        statements = [sql] if isinstance(sql, str) else list(sql)
        # The server splits multi-statement strings, which is safe with ';' inside literals.
        conn = self.connect(database, client_flag=CLIENT.MULTI_STATEMENTS)
        rows: list[tuple[Any, ...]] = []
        try:
            with conn.cursor() as cur:
                for statement in statements:
                    cur.execute(statement)
                    rows = list(cur.fetchall())
                    while cur.nextset():
                        rows = list(cur.fetchall())
        finally:
            conn.close()
        return rows

    def ping(self, timeout: float = 1.0) -> bool:
        """True when the server answers `SELECT 1`."""
        try:
            conn = self.connect(connect_timeout=timeout, read_timeout=max(timeout, 5))
        except pymysql.MySQLError:
            return False
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT 1")
                return cur.fetchone() == (1,)
        except pymysql.MySQLError:
            return False
        finally:
            conn.close()


@dataclass(frozen=True)
class InstanceStatus:
    name: str
    role: Role
    host: str
    port: int
    server_id: int
    pid: int | None
    running: bool
    version: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def running_version(inst: Instance) -> str | None:
    """The server's version, or None when it does not answer."""
    try:
        conn = inst.connect(connect_timeout=1, read_timeout=5)
    except pymysql.MySQLError:
        return None
    try:
        return server_version(conn)
    except pymysql.MySQLError:
        return None
    finally:
        conn.close()
