"""A source worker's messages to the daemon: each as it is (`send`), and the changes read
so far as one `Changes` with where the stream is and its transactions' GTIDs (`flush`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from replicator.source.gtid import TxnGtids
from replicator.source.messages import Changes, Message
from replicator.source.read_state import ReadState
from replicator.state.positions import file_sequence

SEND_EVERY = 500  # changes per message: big enough to amortise the pipe, small enough to flow
SEND_INTERVAL = 0.01  # seconds: how long changes of committed transactions may wait in the worker


class Outbox:
    def __init__(self, source: str, read: ReadState, send: Callable[[Message], None]) -> None:
        self.source = source
        self.read = read
        self._send = send  # the pipe's (a test's list's append)

    def send(self, message: Message) -> None:
        self._send(message)

    def flush(self, force: bool = True) -> None:
        read = self.read
        if not read.batch and not force:
            return
        state = read.state_text()
        if read.index and state is not None and read.gtid and read.position is not None:
            # (a transaction sent in parts: its changes may be applied before it ends)
            read.txns.add((file_sequence(read.position.file), read.position.pos), read.gtid, state)
        self._send(
            Changes(
                self.source,
                read.batch,
                str(read.position),
                read.last_event_time,
                state,
                read.txns,
                read.filtered,
            )
        )
        read.batch, read.txns, read.filtered = [], TxnGtids(), {}
        read.last_send = time.monotonic()
