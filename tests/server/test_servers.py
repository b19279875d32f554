"""The one way to open a connection (replicator/servers.py), against a real MariaDB."""

from __future__ import annotations

import pymysql
import pytest

from replicator.sandbox import Sandbox
from replicator.servers import connect, connect_downstream, server_flavor


def server(sandbox: Sandbox, **changes) -> dict:
    down = sandbox.downstream
    return {"host": down.host, "port": down.port, "user": down.user, "password": down.password, **changes}


def variables(conn, *names: str) -> tuple:
    with conn.cursor() as cur:
        cur.execute("SELECT " + ", ".join(f"@@SESSION.{n}" for n in names))
        return cur.fetchone()


def test_a_downstream_session_runs_in_utc_strict_and_without_foreign_key_checks(sandbox):
    with connect_downstream(server(sandbox)) as conn:
        zone, mode, fk, charset = variables(conn, "time_zone", "sql_mode", "foreign_key_checks", "character_set_client")
    assert (zone, fk, charset) == ("+00:00", 0, "utf8mb4")
    assert set(mode.split(",")) == {"STRICT_TRANS_TABLES", "NO_AUTO_VALUE_ON_ZERO", "NO_ENGINE_SUBSTITUTION"}


def test_a_plain_connection_autocommits_and_keeps_the_servers_session(sandbox):
    with connect(server(sandbox)) as conn:
        autocommit, zone = variables(conn, "autocommit", "time_zone")
    assert (autocommit, zone) == (1, "SYSTEM")


def test_the_read_timeout_reaches_the_connection(sandbox):
    with (
        connect(server(sandbox), read_timeout=1) as conn,
        conn.cursor() as cur,
        pytest.raises(pymysql.err.OperationalError),
    ):
        cur.execute("SELECT SLEEP(3)")


def test_a_session_statement_that_fails_closes_the_connection_and_says_why(sandbox):
    with pytest.raises(pymysql.err.MySQLError, match="no_such_variable"):
        connect(server(sandbox), session=("SET SESSION no_such_variable = 1",))


def test_wrong_credentials_are_refused_within_the_timeout(sandbox):
    with pytest.raises(pymysql.err.OperationalError) as refused:
        connect(server(sandbox, password="wrong"))
    assert refused.value.args[0] == 1045


def test_the_sandbox_server_is_mariadb(sandbox):
    with connect(server(sandbox)) as conn:
        assert server_flavor(conn) == "mariadb"


def test_connections_share_one_tls_context_in_the_preferred_mode(sandbox):
    """pymysql made a context per connection (loading the system's CA certificates,
    30 ms of CPU each); the preferred mode has one per process, and a configured CA
    still gets a context of its own."""
    with connect(server(sandbox)) as a, connect_downstream(server(sandbox)) as b:
        assert a.ctx is not None and a.ctx is b.ctx
        own = a._create_ssl_ctx({"verify_mode": "none", "check_hostname": False})
        assert own is not a.ctx
