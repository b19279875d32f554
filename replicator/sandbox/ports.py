"""Free 127.0.0.1 ports for the sandbox's servers (and the local Spark cluster's)."""

from __future__ import annotations

import socket


def free_ports(count: int) -> list[int]:
    # Hold all sockets open together so the kernel hands out distinct ports.
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def port_is_free(port: int) -> bool:
    # SO_REUSEADDR like mariadbd itself, so TIME_WAIT leftovers do not count as taken.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
