"""TLS on every connection: a source's or the target's `tls` block reaches the
connection factory, the binlog stream and the daemon; checked against MariaDB
servers started with certificates of a CA made here."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pymysql
import pytest

from replicator.config import ConfigError, TlsConfig, parse_config
from replicator.sandbox import Sandbox
from replicator.servers import connect
from replicator.spark.session import jdbc_properties
from tests.replication import ReplicationTask

CREATE = "CREATE TABLE {table} (id INT PRIMARY KEY, note VARCHAR(20)) DEFAULT CHARSET=utf8mb4"


def _ca(folder: Path, name: str) -> None:
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
         "-keyout", str(folder / f"{name}.key"), "-out", str(folder / f"{name}.pem")],
        check=True, capture_output=True,
    )


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    """A CA, a server certificate it signed for 127.0.0.1, and a CA that signed nothing."""
    folder = tmp_path_factory.mktemp("tls")
    _ca(folder, "ca")
    _ca(folder, "other")
    subprocess.run(
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
         "-keyout", str(folder / "server.key"), "-out", str(folder / "server.csr")],
        check=True, capture_output=True,
    )
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    subprocess.run(
        ["openssl", "x509", "-req", "-in", str(folder / "server.csr"), "-CA", str(folder / "ca.pem"),
         "-CAkey", str(folder / "ca.key"), "-CAcreateserial", "-days", "2", "-extfile", str(folder / "san.ext"),
         "-out", str(folder / "server.pem")],
        check=True, capture_output=True,
    )
    return folder


@pytest.fixture(scope="module")
def tls_sandbox(certs, tmp_path_factory):
    sandbox = Sandbox(
        tmp_path_factory.mktemp("tls-sandbox") / "sandbox",
        upstreams=1,
        server_options=[f"--ssl-ca={certs / 'ca.pem'}", f"--ssl-cert={certs / 'server.pem'}",
                        f"--ssl-key={certs / 'server.key'}"],
    )
    sandbox.up()
    yield sandbox
    sandbox.down()


def _cipher(server, tls: TlsConfig) -> str:
    login = {"host": "127.0.0.1", "port": server.port, "user": "root", "password": ""}
    with connect({**login, **tls.connection_kwargs()}) as conn, conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        return cur.fetchone()[1]


@pytest.mark.parametrize("mode, encrypted", [
    ("disabled", False), ("preferred", True), ("required", True), ("verify_ca", True), ("verify_identity", True),
])
def test_each_mode_against_a_server_offering_tls(tls_sandbox, certs, mode, encrypted):
    ca = str(certs / "ca.pem") if mode.startswith("verify") else None
    assert bool(_cipher(tls_sandbox.downstream, TlsConfig(mode, ca=ca))) == encrypted


def test_a_server_certificate_of_another_ca_is_refused(tls_sandbox, certs):
    with pytest.raises(pymysql.err.OperationalError):
        _cipher(tls_sandbox.downstream, TlsConfig("verify_ca", ca=str(certs / "other.pem")))


def test_required_tls_against_a_server_without_it_is_refused(sandbox):
    with pytest.raises(pymysql.err.OperationalError) as refused:
        _cipher(sandbox.downstream, TlsConfig("required"))
    assert "SSL is required" in str(refused.value)
    assert _cipher(sandbox.downstream, TlsConfig("preferred")) == ""  # preferred falls back to clear


def test_rows_replicate_over_tls_for_an_account_that_requires_it(tls_sandbox, certs, tmp_path, monkeypatch):
    """The daemon's every connection (binlog stream, tracker, applier, meta) uses TLS: the
    account it logs in with is refused any other."""
    for server in tls_sandbox.instances:
        server.execute([
            "CREATE USER IF NOT EXISTS 'tls'@'%' IDENTIFIED BY 'tls-secret' REQUIRE SSL",
            "GRANT ALL PRIVILEGES ON *.* TO 'tls'@'%'",
        ])
    monkeypatch.setenv("SHARDMERGE_TLS_PASSWORD", "tls-secret")
    task = ReplicationTask(tls_sandbox, tmp_path, CREATE, user=("tls", "SHARDMERGE_TLS_PASSWORD"),
                           tls=f"{{mode: verify_identity, ca: {certs / 'ca.pem'}}}")
    try:
        task.start()
        for n, shard in enumerate(task.shards):
            task.sql(shard, f"INSERT INTO {{t}} VALUES (1, 'n{n}'), (2, 'n{n}')")
            task.sql(shard, "UPDATE {t} SET note = 'changed' WHERE id = 2")
        task.wait_in_sync()
        assert task.stop() == 0
    finally:
        task.cleanup()


def _config(tls: dict) -> dict:
    return {
        "task": "t",
        "sources": [{"id": "s1", "host": "h", "user": "u", "server_id": 7, "tls": tls}],
        "target": {"host": "d", "user": "u", "flavor": "mariadb"},
        "routes": [{"schema": "a", "table": "b", "target": "x.y"}],
    }


@pytest.mark.parametrize("tls, message", [
    ({"mode": "verify_ca"}, "checks the server's certificate against a CA: give its file as ca"),
    ({"mode": "required", "cert": "CERT"}, "a client certificate needs its key"),
    ({"mode": "required", "ca": "/no/such/ca.pem"}, "sources[0].tls.ca: expected a readable file"),
    ({"mode": "required", "ca": "~no_such_user_here/ca.pem"}, "sources[0].tls.ca: expected a readable file"),
    ({"mode": "sometimes"}, "expected one of disabled, preferred, required, verify_ca, verify_identity"),
    ({"mode": "disabled", "ca": "CERT"}, "mode disabled uses no certificates"),
])
def test_a_tls_block_that_cannot_work_is_refused_naming_the_field(certs, tls, message):
    tls = {k: str(certs / "ca.pem") if v == "CERT" else v for k, v in tls.items()}
    with pytest.raises(ConfigError) as refused:
        parse_config(_config(tls))
    assert message in str(refused.value)
    assert "sources[0].tls" in str(refused.value)


@pytest.mark.parametrize("mode, expected", [
    ("disabled", {}),
    ("preferred", {}),  # Connector/J has no preferred mode: in clear
    ("required", {"useSsl": "true", "trustServerCertificate": "true"}),
    ("verify_ca", {"useSsl": "true", "serverSslCert": "CA", "disableSslHostnameVerification": "true"}),
    ("verify_identity", {"useSsl": "true", "serverSslCert": "CA"}),
])
def test_spark_reads_and_writes_with_the_same_tls(certs, mode, expected):
    ca = str(certs / "ca.pem")
    source = parse_config(_config({"mode": mode, **({"ca": ca} if mode.startswith("verify") else {})})).sources[0]
    properties = jdbc_properties(source.connection_kwargs())
    tls = {k: v for k, v in properties.items() if k not in ("user", "password", "driver")}
    assert tls == {k: ca if v == "CA" else v for k, v in expected.items()}
