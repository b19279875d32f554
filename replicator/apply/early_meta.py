"""The meta schema made ready while `shardmerge run` imports the rest of the daemon.

A first start has the downstream create the meta schema's tables, about 0.1 s of the
server's time (each CREATE TABLE makes a file), and any start connects there first. The
imports that come before are 0.3 s of this process's CPU, so a thread does the former
meanwhile: it mostly waits on the server, which leaves the interpreter to the imports.

Best effort: what it cannot do (the downstream unreachable, a grant missing) the daemon's
start does again, and reports as it always did (`replicator.daemon.tenure`). Its one result, whether
the tables are there, is handed over in a Future; the thread ends before the fork server
is forked, which needs a process of one thread (`replicator.source.spawn`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

from replicator.apply.meta import Meta
from replicator.servers import connect_downstream

log = logging.getLogger("shardmerge.daemon")

CONNECT_TIMEOUT = 5.0  # (a downstream that does not answer: the start's own wait says so)
WAIT = 15.0  # seconds the start waits for it at most (its DDL behind a lock: it goes on)


class EarlyMeta:
    def __init__(self, down: Mapping[str, Any], schema: str, task: str):
        """`down`: the downstream's connection settings; `schema`: the meta schema's name."""
        self._meta = Meta(lambda: connect_downstream(down, connect_timeout=CONNECT_TIMEOUT), schema, task)
        self._done: Future[bool] = Future()
        self._thread = threading.Thread(target=self._run, name="early-meta", daemon=True)

    @classmethod
    def begin(cls, down: Mapping[str, Any], schema: str, task: str) -> EarlyMeta:
        early = cls(down, schema, task)
        early._thread.start()
        return early

    def _run(self) -> None:
        made = False
        try:
            self._meta.ensure()
            made = True
        except Exception as exc:  # (the start does it again, and says why where it fails)
            log.debug("the meta schema not made ready before the start: %s", exc)
        finally:
            self._meta.close()
            self._done.set_result(made)

    def ready(self) -> bool:
        """Whether the meta schema's tables are there, once the thread ended (False when it
        did not end in time: it is a thread still, and the fork server starts afresh)."""
        self._thread.join(WAIT)
        return self._done.done() and self._done.result() and not self._thread.is_alive()
