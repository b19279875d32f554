"""The fork server the source workers come from.

A spawned worker imports the worker module (the SQL parser and all) itself, 0.6 s of
CPU each, which on two cores delayed the first row by a second with four sources. So
the workers are forked from a server that made what they need once
(`replicator.source.preload`). The daemon has threads, so it never forks a worker
itself; the fork server is a process of its own, single-threaded, and ends with the
daemon (then the workers see their parent change, as they saw the daemon's end before).

`shardmerge run` forks the server from itself once it has imported the daemon, before
any thread starts (`fork=True`): the server then has the parser and the rest already,
where a server started afresh imports them all again beside the daemon (0.3 s of CPU
of a start of 1 s on two cores). Elsewhere (a daemon made in a process with threads,
as the tests do) the server is started afresh, as multiprocessing does.

Light on purpose: importing this module must cost nothing."""

from __future__ import annotations

import multiprocessing

PRELOAD = "replicator.source.preload"


def worker_entry(setup, pipe) -> None:
    """A worker process's target, named by this module: the fork server has imported the
    worker's (`PRELOAD`). Named by its own, the target's pickling imports it in the daemon,
    which reads no binlog: 20-40 ms of its start, before its first worker."""
    from replicator.source.worker import worker_main

    worker_main(setup, pipe)


def start_fork_server(fork: bool = False) -> None:
    """Start the fork server (once per process; later calls return at once). `fork`: by
    forking this process, where it has no other thread (else it is started afresh)."""
    multiprocessing.set_forkserver_preload([PRELOAD])
    from multiprocessing import forkserver

    if fork and _forked(forkserver._forkserver):
        return
    forkserver.ensure_running()


def _forked(server) -> bool:
    """The fork server made by forking this process: what `ForkServer.ensure_running`
    does, with a fork in place of a new interpreter (CPython 3.11's forkserver: its
    `main` and the three fields that say where the server is). False where that cannot
    be done safely: another thread runs, or the module is not the one this was made for."""
    import os
    import socket
    import threading
    from multiprocessing import connection, forkserver, resource_tracker

    fields = ("_forkserver_address", "_forkserver_alive_fd", "_forkserver_pid", "_lock")
    if threading.active_count() != 1 or not all(hasattr(server, f) for f in fields):
        return False
    with server._lock:
        if server._forkserver_pid is not None:
            return True
        resource_tracker.ensure_running()
        with socket.socket(socket.AF_UNIX) as listener:
            address = connection.arbitrary_address("AF_UNIX")
            listener.bind(address)
            os.chmod(address, 0o600)
            listener.listen()
            # every client holds the write end of "alive": the server ends when they all have
            alive_r, alive_w = os.pipe()
            try:
                pid = os.fork()
            except OSError:  # (no process to spare: a new interpreter is tried, and says why)
                os.close(alive_r)
                os.close(alive_w)
                os.unlink(address)
                return False
            if pid == 0:  # the server: it never returns to the daemon's code
                try:
                    os.close(alive_w)
                    import gc

                    gc.enable()  # (the daemon's start may have paused it: its workers collect)
                    forkserver.main(listener.fileno(), alive_r, [PRELOAD])
                finally:
                    os._exit(0)
            os.close(alive_r)
        server._forkserver_address = address
        server._forkserver_alive_fd = alive_w
        server._forkserver_pid = pid
    return True
