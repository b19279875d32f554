"""replicator.api.request_origin: the admin API refuses what another site's page could send
it through the operator's browser (DNS rebinding, a plain cross-site POST), and serves its
clients and its own page. The pure rule, then a real server asked with raw requests."""

from __future__ import annotations

import http.client
import json

import pytest

from replicator.api.admin import AdminServer
from replicator.api.request_origin import refusal
from replicator.config import AdminConfig
from tests.replication import free_port

JSON = "application/json"

CASES = [
    # (host, origin, method, content type, token, api) -> refused with (status or None)
    ("127.0.0.1:8080", None, "GET", None, False, True, None),  # shardctl, curl
    ("localhost:8080", None, "POST", JSON, False, True, None),
    ("[::1]:8080", None, "GET", None, False, True, None),
    ("127.0.0.2", None, "GET", None, False, True, None),  # (all of 127/8 is the loopback)
    ("LOCALHOST", None, "GET", None, False, True, None),
    ("127.0.0.1:8080", "http://127.0.0.1:8080", "POST", "application/x-www-form-urlencoded", False, False, None),
    # DNS rebinding: another site's name for 127.0.0.1, without a token
    ("evil.example:8080", None, "GET", None, False, True, 403),
    ("evil.example", None, "GET", None, False, False, 403),  # the live view's page too
    (None, None, "GET", None, False, True, 403),
    ("10.0.0.5:8080", None, "GET", None, False, True, 403),
    # with a token the name is free (the token is what a rebinding page cannot send)
    ("shardmerge-admin:8080", None, "GET", None, True, True, None),
    # a page of another origin, token or not
    ("127.0.0.1:8080", "https://evil.example", "POST", JSON, False, True, 403),
    ("shardmerge-admin:8080", "https://evil.example", "GET", None, True, True, 403),
    ("127.0.0.1:8080", "null", "POST", JSON, False, True, 403),  # a sandboxed page
    ("127.0.0.1:8080", "http://127.0.0.1:9090", "GET", None, False, True, 403),  # another port
    ("shardmerge-admin:8080", "http://shardmerge-admin:8080", "GET", None, True, True, None),
    # a POST to the API without a token says JSON (a plain cross-site POST cannot)
    ("127.0.0.1:8080", None, "POST", "text/plain", False, True, 415),
    ("127.0.0.1:8080", None, "POST", None, False, True, 415),
    ("127.0.0.1:8080", None, "POST", "application/json; charset=utf-8", False, True, None),
    ("shardmerge-admin:8080", None, "POST", "text/plain", True, True, None),  # (its token decides)
]


@pytest.mark.parametrize(("host", "origin", "method", "content_type", "token", "api", "status"), CASES)
def test_refusal(host, origin, method, content_type, token, api, status):
    got = refusal(host, origin, method, content_type, token, api)
    assert (got[0] if got else None) == status
    if got:
        assert got[1]  # says why, and what to do


@pytest.fixture
def server():
    calls = []
    routes = {("POST", "/api/v1/tasks/pause"): lambda body, params: calls.append(body) or {"paused": True}}
    admin = AdminServer(AdminConfig(port=free_port()), routes, lambda: "up 1\n", dict)
    admin.start()
    admin.calls = calls
    try:
        yield admin
    finally:
        admin.stop()


def ask(admin: AdminServer, method: str, path: str, headers: dict, body: bytes | None = None):
    host, port = admin.httpd.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.putrequest(method, path, skip_host=True)
    for name, value in headers.items():
        conn.putheader(name, value)
    if body is not None:
        conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
    response = conn.getresponse()
    return response.status, response.read()


def test_a_rebound_name_reads_nothing_and_a_cross_site_post_runs_nothing(server):
    port = server.httpd.server_address[1]
    status, body = ask(server, "GET", "/metrics", {"Host": f"evil.example:{port}"})
    assert status == 403 and b"127.0.0.1, ::1 or localhost" in body
    plain = {"Host": f"127.0.0.1:{port}", "Content-Type": "text/plain", "Origin": "https://evil.example"}
    status, _ = ask(server, "POST", "/api/v1/tasks/pause", plain, b'{"reason": "x"}')
    assert status == 403
    no_origin = {"Host": f"127.0.0.1:{port}", "Content-Type": "text/plain"}
    status, _ = ask(server, "POST", "/api/v1/tasks/pause", no_origin, b'{"reason": "x"}')
    assert status == 415
    assert server.calls == []  # nothing ran
    # and its own clients are served
    status, body = ask(server, "GET", "/metrics", {"Host": f"localhost:{port}"})
    assert status == 200 and body == b"up 1\n"
    good = {"Host": f"127.0.0.1:{port}", "Content-Type": JSON}
    status, body = ask(server, "POST", "/api/v1/tasks/pause", good, b'{"reason": "x"}')
    assert status == 200 and json.loads(body) == {"paused": True} and server.calls == [{"reason": "x"}]
    status, _ = ask(server, "GET", "/healthz", {"Host": "evil.example"})  # (probes are not asked)
    assert status == 200
