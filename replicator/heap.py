"""The daemon's long-lived state out of the garbage collector's way.

A shard group of a thousand shards of a hundred columns is a few hundred thousand
objects (tables, columns, types) that live as long as the daemon. Every full
collection of the cyclic garbage collector walks all of them: measured by
bench/ddl_coordination.py, that is a pause of 3 to 6 ms every few hundred DDL
decisions, the whole of the p99. Frozen once the state is loaded, they are left out
of every later collection. Only what exists at that moment is frozen (nothing is
frozen again later, so cyclic garbage made afterwards is still collected).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def freeze_long_lived() -> None:
    # No collection first: it walked every object of the start (the parser's modules
    # and all, 70-90 ms on the way to the first row) to find no garbage (0 unreachable
    # objects at the start of bench/replication.py); the collector's own runs during
    # the start leave little, and what they left stays, once.
    gc.freeze()


def thaw() -> None:
    """A daemon that starts again in its process (`StartAgain`): what it froze of the start
    it abandons is garbage, collected once it is no longer frozen."""
    gc.unfreeze()


@contextmanager
def collector_paused() -> Iterator[None]:
    """No collection while the start imports its modules: what an import makes lives as
    long as the process, so a collection then walks a growing heap to free nothing (15% of
    the daemon's imports, 0.47 s against 0.40). What was made meanwhile is frozen after,
    else the first collection once the collector runs again walks all of it at once (a
    pause of 0.1-0.2 s on the way to the first row); then the collector runs as before."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()
