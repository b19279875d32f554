"""How every part of shardmerge opens a connection to a server, and tells which kind of
server it is. One place, so the daemon, the preflight check, the Spark jobs and the
sandbox agree on credentials, timeouts, character set and session settings, and a
new setting (a timeout, TLS) reaches all of them at once."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from pymysql.connections import Connection as _PyMySQLConnection

CONNECT_TIMEOUT = 10.0  # seconds to the handshake: an unreachable server fails fast

# What every downstream session runs before its first statement: one statement, one
# round trip per connection (a partition's reconnect waits on it)
# a replicated 0 in an AUTO_INCREMENT column must stay 0; errors must be loud
DOWNSTREAM_SQL_MODE = "SESSION sql_mode = 'STRICT_TRANS_TABLES,NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'"
DOWNSTREAM_SESSION = (
    "SET SESSION time_zone = '+00:00',"  # the binlog gives TIMESTAMPs in UTC
    f" {DOWNSTREAM_SQL_MODE},"
    " SESSION foreign_key_checks = 0",
)


class Connection(_PyMySQLConnection):
    """pymysql's connection, but for TLS where the server offers it (the preferred mode,
    with no CA to verify by) on one context per process, which loads no CA certificate:
    pymysql makes one for every connection, loading the system's CA certificates that
    this mode never verifies by, 30-50 ms of CPU each, which made a tenth of the daemon's
    start and as much of every worker's (re)connect."""

    def _create_ssl_ctx(self, sslp):
        if isinstance(sslp, dict) and not sslp:
            return preferred_tls_context()
        return super()._create_ssl_ctx(sslp)


_PREFERRED: list[ssl.SSLContext] = []
_PREFERRED_LOCK = threading.Lock()


def preferred_tls_context() -> ssl.SSLContext:
    """The process's TLS context of the preferred mode, made on first use."""
    with _PREFERRED_LOCK:
        if not _PREFERRED:
            # pymysql's context for a TLS block without a CA (encrypted, nothing verified),
            # but for the CA store it loads: 1 ms against 30-50
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            context.verify_flags &= ~ssl.VERIFY_X509_STRICT
            _PREFERRED.append(context)
        return _PREFERRED[0]


def connect(
    server: Mapping[str, Any],
    *,
    session: Sequence[str] = (),
    connect_timeout: float = CONNECT_TIMEOUT,
    read_timeout: float | None = None,
    autocommit: bool = True,
    **options: Any,
) -> Connection:
    """A connection to `server` (host, port, user, password and what else pymysql takes:
    a config's `connection_kwargs()`), in utf8mb4, with `session` run first.
    `read_timeout` bounds reads and writes alike (None: none, as a binlog dump needs)."""
    conn = Connection(
        **{
            "charset": "utf8mb4",
            "connect_timeout": connect_timeout,
            "read_timeout": read_timeout,
            "write_timeout": read_timeout,
            "autocommit": autocommit,
            **server,
            **options,
        }
    )
    if session:
        try:
            with conn.cursor() as cur:
                for statement in session:
                    cur.execute(statement)
        except BaseException:
            conn.close()
            raise
    return conn


def connect_downstream(server: Mapping[str, Any], **options: Any) -> Connection:
    """A connection to the downstream server in the session the applier writes in."""
    return connect(server, session=DOWNSTREAM_SESSION, **options)


def flavor_of(version: str) -> str:
    """mariadb, tidb or mysql, from VERSION() (10.11.6-MariaDB-log, 8.0.11-TiDB-v7.5.0, 8.0.36)."""
    lowered = version.lower()
    if "mariadb" in lowered:
        return "mariadb"
    if "tidb" in lowered:
        return "tidb"
    return "mysql"


def server_version(conn: Connection) -> str:
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        return str(cur.fetchone()[0])


def server_flavor(conn: Connection) -> str:
    return flavor_of(server_version(conn))
