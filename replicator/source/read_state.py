"""Where a source worker reads, and what it has read since its last message.

One `ReadState` per worker process, owned by that process's single thread: the loop and
its handlers change it in turn, one event at a time, and no other thread ever sees it
(which is why it has no lock). Handlers reach its fields through it each time, never
keeping one of them: a send or a rewind puts new objects in their place."""

from __future__ import annotations

import time

from replicator.shard_id import ShardId
from replicator.source.gtid import GtidCursor, TxnGtids
from replicator.source.messages import Change, Dropped, RowEvent
from replicator.source.row_events import BinlogFormat
from replicator.state.positions import ChangeId, Position, file_sequence


class ReadState:
    def __init__(self, position: Position | None, gtid: str | None) -> None:
        self.position = position  # start of the transaction being read
        self.gtid = gtid
        # the GTID state where `position` is (None: not known, or not a MariaDB server),
        # and of the transactions read since the last message that had changes or a DDL,
        # their GTID and the state before (replicator/source/gtid.py)
        self.cursor: GtidCursor | None = None
        self.txns = TxnGtids()
        self.file = position.file if position else None
        # row events read in the current transaction, per table: an id must not depend
        # on whether another table's rows could be decoded (positions.row_index)
        self.index: dict[str, int] = {}
        self.batch: list[Change | RowEvent | Dropped] = []
        self.filtered: dict[tuple[ShardId, str], int] = {}  # rows filters.rows dropped, since the last send
        self.form: BinlogFormat | None = None  # the binlog's format description event
        self.last_event_time = 0.0
        self._capped = 0  # the server's second whose events were all read after it ended
        self.last_send = 0.0

    def state_text(self) -> str | None:
        return self.cursor.text if self.cursor is not None else None

    def transaction_id(self) -> ChangeId:
        """The id of the start of the transaction being read (a DDL's, or its dropped rows')."""
        return (file_sequence(self.file), self.position.pos, 0)

    def seen(self, end: int, timestamp) -> None:
        """An event read, the next one starting at `end`. Its time is the server's second,
        made finer by when it arrived: it was written in [T, T+1) and not after it was read,
        so a source read as it writes shows its lag to the millisecond, not 0.03 s one moment
        and 1.03 s the next (one read behind is at most a second early)."""
        if timestamp:
            ended = float(timestamp) + 1.0
            # (read after its second ended: so are the next events of that second, whose time
            # is then set with no clock read)
            self.last_event_time = ended if timestamp == self._capped else min(time.time(), ended)
            if self.last_event_time == ended:
                self._capped = timestamp
        if self.position is None and self.file:
            self.position = Position(self.file, end)

    def passed(self, start: Position | None, routed: bool) -> None:
        """The transaction that started at `start` (its GTID in `self.gtid`) is read:
        the state moves past it; `routed`: it had changes or a DDL sent."""
        state, gtid = self.cursor, self.gtid
        if state is None or not gtid or start is None:
            return
        if routed:
            self.txns.add((file_sequence(start.file), start.pos), gtid, state.text)
        state.passed(gtid)
        self.gtid = None

    def transaction_ended(self, end: int, routed: bool) -> None:
        """The transaction being read ended, the next one starting at `end`."""
        self.passed(self.position, routed)
        self.position = Position(self.file, end)
        self.index = {}

    def drop_unsent(self) -> None:
        """What was read and not sent, let go: it is read again (a rewind)."""
        self.batch.clear()
        self.txns = TxnGtids()
        self.index = {}
