"""The admin API's server on its own: a client that gives up before the answer (a probe's
timeout while the downstream is away) is no error of the daemon's (issue 70: each logged an
ERROR with a BrokenPipe traceback)."""

from __future__ import annotations

import logging
import socket
import threading
import time

from replicator.api.admin import AdminServer
from replicator.config import AdminConfig
from tests.replication import free_port


def test_a_probe_that_gives_up_before_the_answer_logs_no_error(caplog):
    answered = threading.Event()

    def slow_ready() -> dict[str, str]:
        time.sleep(0.5)  # (the daemon's loop busy: the downstream away)
        answered.set()
        return {"target": "downstream unreachable"}

    server = AdminServer(AdminConfig(port=free_port()), {}, lambda: "", slow_ready)
    server.start()
    try:
        with caplog.at_level(logging.DEBUG, logger="shardmerge"):
            for _ in range(3):
                client = socket.create_connection(server.httpd.server_address[:2])
                client.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
                # gone before the answer, with a reset: the server's write fails
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                client.close()
                assert answered.wait(5)
                answered.clear()
            time.sleep(0.3)
    finally:
        server.stop()
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert errors == [], [r.getMessage() for r in errors]
    assert any("the client went away" in r.getMessage() for r in caplog.records)
