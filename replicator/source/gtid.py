"""MariaDB GTIDs: what lets a source move from one server to another (issue 45).

A binlog position (`positions.Position`) is one server's: the same transaction sits at
another file and offset on a replica. Its GTID (domain-server-seq) is the same on every
server that logged it, and a server's GTID state (the last GTID of each domain, as
`gtid_binlog_pos` says) is where a reader stands. The worker follows the state as it
reads; the daemon keeps, beside each position it writes, the GTID that names it there
(`GtidTrail`), so a failover can find that place in the new server's binlog
(`replicator.source.failover`)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from replicator.state.positions import ChangeId


@dataclass(frozen=True)
class Gtid:
    domain: int
    server: int
    seq: int

    @classmethod
    def parse(cls, text: str) -> Gtid:
        # (once per transaction read: a split, not a regular expression)
        parts = text.strip().split("-")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise ValueError(f"not a MariaDB GTID (domain-server-seq): {text!r}")
        return cls(int(parts[0]), int(parts[1]), int(parts[2]))

    def __str__(self) -> str:
        return f"{self.domain}-{self.server}-{self.seq}"


@dataclass(frozen=True)
class GtidState:
    """The last GTID of each domain a reader has passed (MariaDB's gtid_binlog_pos at a
    position; empty at the start of a binlog with no transaction before)."""

    last: tuple[Gtid, ...] = ()  # one per domain, by domain

    @classmethod
    def parse(cls, text: str | None) -> GtidState:
        parts = [Gtid.parse(p) for p in (text or "").split(",") if p.strip()]
        return cls(tuple(sorted(parts, key=lambda g: g.domain)))

    def __str__(self) -> str:
        return ",".join(str(g) for g in self.last)

    def after(self, gtid: Gtid) -> GtidState:
        """The state once the transaction `gtid` is passed."""
        others = [g for g in self.last if g.domain != gtid.domain]
        return GtidState(tuple(sorted([*others, gtid], key=lambda g: g.domain)))

    def passed(self, gtid: Gtid) -> bool:
        """Whether a reader at this state has passed transaction `gtid` (a domain's
        sequence numbers grow along the binlog)."""
        return any(g.domain == gtid.domain and g.seq >= gtid.seq for g in self.last)

    @property
    def domains(self) -> tuple[int, ...]:
        return tuple(g.domain for g in self.last)


class GtidCursor:
    """A reader's GTID state, moved past each transaction it reads: the worker's hot
    path (a transaction or more per row under an OLTP load), so the state is kept as
    its text and the last GTID text of each domain, never parsed again; the server's
    own GTIDs, in its own format."""

    __slots__ = ("_last", "text")

    def __init__(self, state: GtidState) -> None:
        self._last = {str(g.domain): str(g) for g in state.last}
        self.text = str(state)

    def passed(self, gtid: str) -> None:
        last = self._last
        last[gtid[: gtid.index("-")]] = gtid
        if len(last) == 1:
            self.text = gtid
        else:
            self.text = ",".join(last[domain] for domain in sorted(last, key=int))


@dataclass(frozen=True)
class TxnGtids:
    """The transactions of a message, by start (file sequence, offset): their GTID
    (`own`) and the state before them (`before`). Two dicts rather than an object per
    transaction: a message carries up to thousands, pickled, read and merged at C speed
    (the states before consecutive transactions are one string object each, which
    pickle writes once)."""

    own: dict[tuple[int, int], str] = field(default_factory=dict)
    before: dict[tuple[int, int], str] = field(default_factory=dict)

    def add(self, start: tuple[int, int], gtid: str, before: str) -> None:
        self.own[start], self.before[start] = gtid, before


class GtidTrail:
    """What the daemon knows of a source's GTIDs between its watermark and where its
    worker reads: the state at the read position, the GTID of each transaction it was
    sent changes or a DDL of, and the state where each of those starts (and where the
    transaction after a DDL starts), by start (file sequence, offset). Positions below
    the watermark are let go (`trim`). Read by the applier's threads, changed by the
    daemon's: dict lookups, no iteration across threads."""

    def __init__(self, read: str | None = None) -> None:
        self.read = read  # the state at the read position (None: not known)
        self._own: dict[tuple[int, int], str] = {}
        self._before: dict[tuple[int, int], str] = {}

    def note(self, txns: TxnGtids | None, read: str | None) -> None:
        if txns is not None:
            self._own.update(txns.own)
            self._before.update(txns.before)
        if read is not None:
            self.read = read

    def note_ddl(self, start: ChangeId, after: ChangeId, gtid: str, before: str) -> None:
        """A DDL's transaction at `start`, the next one at `after`."""
        self._own[start[:2]], self._before[start[:2]] = gtid, before
        self._before[after[:2]] = str(GtidState.parse(before).after(Gtid.parse(gtid)))

    def own(self, change: ChangeId) -> str | None:
        """The GTID of the transaction holding `change`."""
        return self._own.get(change[:2])

    def before(self, change: ChangeId, read: ChangeId) -> str | None:
        """The state where `change`'s transaction starts (`read`: the read position's
        id, where the state is `self.read`)."""
        if change[:2] == read[:2]:
            return self.read
        return self._before.get(change[:2])

    def trim(self, below: ChangeId) -> None:
        # (from the front: starts are noted in binlog order, and the watermark is written
        # often, so a scan of every start would be the daemon's work on each transaction
        # again and again; one noted out of order is let go once those before it are)
        cut = below[:2]
        for kept in (self._own, self._before):
            for start in list(itertools.takewhile(lambda s: s < cut, kept)):
                del kept[start]

    def __len__(self) -> int:
        return len(self._before)
