"""The fork server the source workers come from.

A spawned worker imports the worker module (the SQL parser and all) itself, 0.6 s of
CPU each, which on two cores delayed the first row by a second with four sources. So
the workers are forked from a server that made what they need once
(`replicator.source.preload`). The daemon has threads, so it never forks itself; the
fork server is a process of its own, single-threaded, and ends with the daemon (then
the workers see their parent change, as they saw the daemon's end before).
`shardmerge run` starts it before it imports the daemon, so the two import side by
side.

Light on purpose: importing this module must cost nothing."""

from __future__ import annotations

import multiprocessing

PRELOAD = "replicator.source.preload"


def start_fork_server() -> None:
    """Start the fork server (once per process; later calls return at once)."""
    multiprocessing.set_forkserver_preload([PRELOAD])
    from multiprocessing import forkserver

    forkserver.ensure_running()
