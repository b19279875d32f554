"""MariaDB GTIDs: what lets a source move from one server to another (issue 45).

A binlog position (`positions.Position`) is one server's: the same transaction sits at
another file and offset on a replica. Its GTID (domain-server-seq) is the same on every
server that logged it, and a server's GTID state (the last GTID of each domain, as
`gtid_binlog_pos` says) is where a reader stands. The worker follows the state as it
reads; the daemon keeps, beside each position it writes, the GTID that names it there
(`GtidTrail`), so a failover can find that place in the new server's binlog
(`replicator.source.failover`)."""

from __future__ import annotations

from dataclasses import dataclass

from replicator.source.positions import ChangeId


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


@dataclass(frozen=True)
class TxnGtid:
    """A transaction of the stream: its GTID and the state before it."""

    gtid: str
    before: str


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

    def note(self, txns: dict[tuple[int, int], TxnGtid], read: str | None) -> None:
        for start, txn in txns.items():
            self._own[start], self._before[start] = txn.gtid, txn.before
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
        for kept in (self._own, self._before):
            for start in [s for s in kept if s < below[:2]]:
                del kept[start]

    def __len__(self) -> int:
        return len(self._before)
