"""A write that must wait for a transaction in flight holding a shared lock (a fence), and
run once it commits: how the server tests show a fence holds back what would move it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def waits_for_commit(conn, hold: Callable[[Any], Any], write: Callable[[], object], what: str) -> Any:
    """`hold(cur)` in a transaction on `conn`; meanwhile `write()`, on its own connection in a
    thread, must not finish within a second, and must once the transaction commits. Returns
    what `hold` returned."""
    done = threading.Event()
    with conn.cursor() as cur:
        cur.execute("START TRANSACTION")
        held = hold(cur)
        thread = threading.Thread(target=lambda: (write(), done.set()))
        thread.start()
        assert not done.wait(1.0), f"{what} did not wait for the transaction in flight"
        cur.execute("COMMIT")
    assert done.wait(10.0), f"{what} did not run once the transaction committed"
    thread.join()
    return held
