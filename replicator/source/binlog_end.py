"""Where each source server's binlog ends, asked every few seconds, and how far behind it a
position is: DM's `query-status` gap between the master's binlog and the syncer's.

One thread asks every source (`SHOW BINARY LOGS` and `@@gtid_binlog_pos`, which the user's
BINLOG MONITOR privilege allows) and installs the answers as one new immutable mapping;
readers take the mapping it holds at that moment and share nothing else with it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import pymysql

from replicator.source.gtid import GtidState
from replicator.state.positions import Position

log = logging.getLogger("shardmerge.daemon")

EVERY = 5.0  # seconds between two questions to a server
END_TIMEOUT = 10.0  # seconds an answer may take


@dataclass(frozen=True)
class BinlogEnd:
    """A server's binlog files in order, with their sizes (the last one's: where it ends),
    its GTID position then, and when it was asked."""

    files: tuple[tuple[str, int], ...]
    gtid: str | None
    at: float

    @property
    def end(self) -> Position:
        name, size = self.files[-1]
        return Position(name, size)

    def bytes_behind(self, position: Position) -> int | None:
        """Bytes of binlog from `position` to the end (None: its file is not the server's,
        purged or of another server)."""
        names = [name for name, _ in self.files]
        if position.file not in names:
            return None
        at = names.index(position.file)
        rest = sum(size for _, size in self.files[at:])
        return max(0, rest - position.pos)

    def transactions_behind(self, gtid: str | None) -> int | None:
        """Transactions the server wrote after the GTID position `gtid` (MariaDB's
        domain-server-seq, per domain; None where either is not known)."""
        if not gtid or not self.gtid:
            return None
        ours, theirs = _sequences(gtid), _sequences(self.gtid)
        if ours is None or theirs is None:
            return None
        return sum(max(0, seq - ours.get(domain, 0)) for domain, seq in theirs.items())


def _sequences(gtid: str) -> dict[int, int] | None:
    """Each domain's last sequence number (None: not a MariaDB GTID position, MySQL's set)."""
    try:
        return {g.domain: g.seq for g in GtidState.parse(gtid).last}
    except ValueError:
        return None


class EndProbe(threading.Thread):
    """Asks each source where its binlog ends, every `every` seconds; `ends` is the last
    answers, a mapping replaced whole (a source that did not answer is left out)."""

    def __init__(
        self, sources: Sequence[tuple[str, dict[str, Any]]], connect: Callable[..., Any], every: float = EVERY
    ):
        super().__init__(name="binlog-ends", daemon=True)
        self.sources, self.connect, self.every = list(sources), connect, every
        self.ends: Mapping[str, BinlogEnd] = MappingProxyType({})
        self.done = threading.Event()
        self._conns: dict[str, Any] = {}

    def run(self) -> None:
        while True:
            ends = {}
            for source, kwargs in self.sources:
                end = self._ask(source, kwargs)
                if end is not None:
                    ends[source] = end
            self.ends = MappingProxyType(ends)
            if self.done.wait(self.every):
                break
        for conn in self._conns.values():
            with contextlib.suppress(Exception):
                conn.close()

    def stop(self) -> None:
        self.done.set()

    def _ask(self, source: str, kwargs: dict[str, Any]) -> BinlogEnd | None:
        try:
            conn = self._conns.get(source)
            if conn is None:
                conn = self._conns[source] = self.connect(kwargs)
            with conn.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                files = tuple((str(row[0]), int(row[1])) for row in cur.fetchall())
                gtid = None
                with contextlib.suppress(pymysql.err.MySQLError):  # (not on MySQL)
                    cur.execute("SELECT @@gtid_binlog_pos")
                    gtid = str(cur.fetchone()[0] or "") or None
            return BinlogEnd(files, gtid, time.time()) if files else None
        except (pymysql.err.MySQLError, OSError) as exc:
            # (the stream itself reports a source that is away: here it only has no end shown)
            log.debug("source %s: where its binlog ends is not known now (%s)", source, exc)
            with contextlib.suppress(Exception):
                self._conns.pop(source).close()
            return None
