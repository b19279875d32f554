"""A TCP relay standing for a virtual IP in front of a database server: clients connect
to its port, and `point` moves it to another server (its open connections dropped), as
a failover moves a VIP or a DNS name."""

from __future__ import annotations

import contextlib
import socket
import threading


class Proxy:
    def __init__(self, target_port: int, host: str = "127.0.0.1", bind: str | None = None):
        """`bind`: the address it listens on (by default `host`, where the servers are)."""
        self.host, self.target = host, target_port
        self._server = socket.create_server((bind or host, 0))
        self.port = self._server.getsockname()[1]
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def point(self, target_port: int) -> None:
        """New connections go to `target_port`; those open now are cut."""
        with self._lock:
            self.target = target_port
            cut, self._open = self._open, []
        for sock in cut:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def close(self) -> None:
        self._closed = True
        self.point(self.target)
        with contextlib.suppress(OSError):
            self._server.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection((self.host, self.target), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_relay, args=(a, b), daemon=True).start()


def _relay(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    for sock in (source, sink):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
