"""The members of a task and which of them reads each source, as the meta schema holds them
(issue 75: a shard group bigger than one machine; `replicator/daemon/assignment.py` decides).

A member is a daemon of the task on a machine of its own, under its name. It joins with a
new epoch (`join`: a member started again under the same name is another, and what the one
before it still had under way must not commit) and renews its row every third of its time to
live, as the lease's holder does; one whose row expired is gone. The member holding the
task's lease, the coordinator, writes who reads each source (`sql_assign`, in its fenced
transaction), each row naming the member and its epoch. A member's batches read the rows of
their sources with a shared lock (`fence`): they commit only while the member, in that epoch,
still reads every one of them; the coordinator's reassignment waits for those in flight, and
after it, the member's batches of that source commit nothing (`SourcesLost`), as the lease's
fence does for a standby taking over.

A member cut off from the downstream in a batch's transaction would hold its locks (the
source's row, its rows downstream) for as long as the server keeps its session: each of a
member's downstream connections registers as it opens (`registration`), and the coordinator
giving out the sources of a member gone (or of its epoch before) first ends those sessions
(`end_gone`), as a standby taking the lease does. Times are the downstream server's (NOW(6))."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from lattice import quote_string
from replicator.state import registered
from replicator.state.db import MetaDb
from replicator.state.handovers import Handovers
from replicator.state.member import Member
from replicator.state.registered import BOOT
from replicator.state.renewal import Gone, Renewal
from replicator.transient import SourcesLost

__all__ = [
    "MEMBER_ADDED", "MEMBER_SQL", "Known", "Member", "MemberExpired", "MemberGone", "Members", "Owner",
    "SourcesLost",
]

PRUNE_EVERY = 30  # renewals between two prunings of the member's registered connections
MEMBER_SQL = [
    """CREATE TABLE IF NOT EXISTS {m}.member (
  task VARCHAR(64) NOT NULL, name VARCHAR(255) NOT NULL, epoch BIGINT NOT NULL,
  host VARCHAR(255) NOT NULL, expires DATETIME(6) NOT NULL, joined DATETIME(6) NOT NULL,
  process VARCHAR(255) NOT NULL DEFAULT '', lag DOUBLE NULL, PRIMARY KEY (task, name)) ENGINE=InnoDB""",
    """CREATE TABLE IF NOT EXISTS {m}.source_owner (
  task VARCHAR(64) NOT NULL, source VARCHAR(64) NOT NULL, member VARCHAR(255) NOT NULL,
  member_epoch BIGINT NOT NULL, handing_to VARCHAR(255) NULL, handing_since DATETIME(6) NULL,
  generation BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (task, source)) ENGINE=InnoDB""",
    """CREATE TABLE IF NOT EXISTS {m}.source_moved (
  task VARCHAR(64) NOT NULL, source VARCHAR(64) NOT NULL, member VARCHAR(255) NOT NULL,
  PRIMARY KEY (task, source)) ENGINE=InnoDB""",
    """CREATE TABLE IF NOT EXISTS {m}.member_connection (
  task VARCHAR(64) NOT NULL, member VARCHAR(255) NOT NULL, epoch BIGINT NOT NULL,
  conn_id BIGINT UNSIGNED NOT NULL, booted BIGINT NULL, PRIMARY KEY (task, member, epoch, conn_id))
  ENGINE=InnoDB""",
]


# columns added since the table was first made (for the tools: the coordinator's name, each
# member's lag; a source's handover asked of its live reader)
MEMBER_ADDED = (
    ("member", "process", "VARCHAR(255) NOT NULL DEFAULT ''"), ("member", "lag", "DOUBLE NULL"),
    ("source_owner", "handing_to", "VARCHAR(255) NULL"),
    ("source_owner", "handing_since", "DATETIME(6) NULL"),
    ("source_owner", "generation", "BIGINT NOT NULL DEFAULT 0"),
)


class MemberGone(Gone):
    """The member's row is another epoch's: a daemon joined again under its name."""


class MemberExpired(Gone):
    """The member's row expired (cut off from the downstream, or frozen, longer than its time
    to live): its sources may be another's by now, and it joins again, in a new epoch (one
    renewed after that would be given its sources back, its batches of before let commit)."""


@dataclass(frozen=True)
class Known:
    """A member as the tools list it: its host, whether it lives, its process's lease name."""

    member: Member
    host: str
    live: bool
    process: str
    lag: float | None  # seconds its sources are behind, the most, as it last said (None: none read)


@dataclass(frozen=True)
class Owner:
    """Who reads a source: the member, in the epoch it had when it was given the source."""

    member: str
    epoch: int


class Members:
    """The `member` and `source_owner` rows of one task."""

    def __init__(self, db: MetaDb):
        self.db = db
        self.handovers = Handovers(db, self.sql_assign)

    def join(self, name: str, host: str, ttl: float, process: str = "") -> Member:
        """This member, live for `ttl` seconds, in a new epoch (`process`: the name its
        process takes the task's lease under: the tools tell the coordinator by it)."""
        db, n = self.db, quote_string(name)
        with db.session() as conn, conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {db.q}.member (task, name, epoch, host, expires, joined, process) VALUES "
                f"({db.t}, {n}, 1, {quote_string(host)}, {_until(ttl)}, NOW(6), {quote_string(process)}) "
                f"ON DUPLICATE KEY UPDATE epoch = epoch + 1, host = VALUES(host), expires = VALUES(expires), "
                f"joined = NOW(6), process = VALUES(process)"
            )
            cur.execute(f"SELECT epoch FROM {db.q}.member WHERE task = {db.t} AND name = {n}")
            return Member(name, int(cur.fetchone()[0]))

    def renew(self, member: Member, ttl: float) -> bool:
        """Live `ttl` seconds more; False where its row expired or is another epoch's now (it
        is gone)."""
        db = self.db
        with db.session() as conn, conn.cursor() as cur:
            return bool(
                cur.execute(
                    f"UPDATE {db.q}.member SET expires = {_until(ttl)} WHERE task = {db.t} AND "
                    f"name = {quote_string(member.name)} AND epoch = {member.epoch} AND expires > NOW(6)"
                )
            )

    def holds(self, member: Member) -> bool:
        """Whether the member's row is its epoch's and live."""
        db = self.db
        return bool(
            db.rows(
                f"SELECT 1 FROM {db.q}.member WHERE task = {db.t} AND name = {quote_string(member.name)} "
                f"AND epoch = {member.epoch} AND expires > NOW(6)"
            )
        )

    def _epoch(self, name: str) -> int | None:
        db = self.db
        rows = db.rows(f"SELECT epoch FROM {db.q}.member WHERE task = {db.t} AND name = {quote_string(name)}")
        return int(rows[0][0]) if rows else None

    def renewal(
        self,
        member: Member,
        ttl: float,
        count: Callable[[str, str], None] | None = None,
        gone: Callable[[Gone], None] | None = None,
    ) -> Renewal:
        """The thread that renews the member's row every third of `ttl` (`gone`: told once its
        row expired, `MemberExpired`, or a daemon joined again under its name, `MemberGone`)."""

        turns = iter(range(1, 1 << 62))

        def renew() -> None:
            if not self.renew(member, ttl):
                who = f"member {member.name} (epoch {member.epoch})"
                if self._epoch(member.name) == member.epoch:
                    raise MemberExpired(
                        f"{who} expired (cut off from the downstream longer than lease_ttl): it starts again "
                        "and joins in a new epoch"
                    )
                raise MemberGone(f"{who} joined again elsewhere")
            if next(turns) % PRUNE_EVERY == 0:
                self.prune(member)

        return Renewal("member", f"member {member.name} of task {self.db.task}", ttl / 3, renew, count, gone)

    def leave(self, member: Member) -> None:
        """A clean stop: gone now, for its sources to go to the others at once."""
        db = self.db
        with db.session() as conn, conn.cursor() as cur:
            cur.execute(
                f"UPDATE {db.q}.member SET expires = NOW(6) WHERE task = {db.t} AND "
                f"name = {quote_string(member.name)} AND epoch = {member.epoch}"
            )

    def registration(self, member: Member) -> str:
        """The statements each downstream connection of the member runs as it opens (the
        connection needs `CLIENT.MULTI_STATEMENTS`). A member of an epoch gone registers
        nothing; the member's row is read by a plain read first, which takes no lock (its
        renewal's would hold every new connection back)."""
        db, n = self.db, quote_string(member.name)
        return (
            f"SELECT epoch INTO @shardmerge_member_epoch FROM {db.q}.member WHERE task = {db.t} "
            f"AND name = {n}; "
            f"INSERT INTO {db.q}.member_connection (task, member, epoch, conn_id, booted) "
            f"SELECT {db.t}, {n}, {member.epoch}, CONNECTION_ID(), {BOOT} "
            f"AND @shardmerge_member_epoch = {member.epoch} ON DUPLICATE KEY UPDATE booted = VALUES(booted)"
        )

    def end_gone(self, live: dict[str, Member]) -> int:
        """The coordinator's, before it gives out a gone member's sources: the sessions of
        every member's epoch but the live ones ended (their transactions rolled back, their
        locks let go), and their registrations forgotten; how many were ended."""
        db = self.db
        with db.session() as conn, conn.cursor() as cur:
            cur.execute(
                f"SELECT member, epoch, conn_id, booted FROM {db.q}.member_connection WHERE task = {db.t}"
            )
            gone = [
                (str(m), int(e), int(c), b) for m, e, c, b in cur.fetchall()
                if str(m) not in live or live[str(m)].epoch != int(e)
            ]
            if not gone:
                return 0
            ended = registered.kill(cur, [(c, b) for _, _, c, b in gone])
            for name, epoch in sorted({(m, e) for m, e, _, _ in gone}):
                cur.execute(
                    f"DELETE FROM {db.q}.member_connection WHERE task = {db.t} AND "
                    f"member = {quote_string(name)} AND epoch = {epoch}"
                )
            return ended

    def prune(self, member: Member) -> None:
        """The member's registrations of connections closed since (a takeover kills none of
        them, and the table does not grow with every reconnect over months)."""
        db = self.db
        with db.session() as conn, conn.cursor() as cur:
            cur.execute(
                f"DELETE FROM {db.q}.member_connection WHERE task = {db.t} AND member = "
                f"{quote_string(member.name)} AND epoch = {member.epoch} AND conn_id NOT IN "
                f"(SELECT ID FROM information_schema.PROCESSLIST)"
            )

    def live(self) -> dict[str, Member]:
        """The members whose rows have not expired, by name."""
        db = self.db
        rows = db.rows(f"SELECT name, epoch FROM {db.q}.member WHERE task = {db.t} AND expires > NOW(6)")
        return {str(n): Member(str(n), int(e)) for n, e in rows}

    def owners(self) -> dict[str, Owner]:
        """source -> who reads it."""
        db = self.db
        rows = db.rows(f"SELECT source, member, member_epoch FROM {db.q}.source_owner WHERE task = {db.t}")
        return {str(s): Owner(str(m), int(e)) for s, m, e in rows}

    def sql_assign(self, source: str, member: Member) -> str:
        """The source read by `member` from now (the coordinator's transaction): the row taken
        exclusively, it waits for the batches of the member before that hold it."""
        db = self.db
        return (
            # (generation first: MariaDB assigns left to right, and it compares the reader before)
            f"INSERT INTO {db.q}.source_owner (task, source, member, member_epoch, generation) VALUES "
            f"({db.t}, {quote_string(source)}, {quote_string(member.name)}, {member.epoch}, 1) "
            f"ON DUPLICATE KEY UPDATE generation = IF(member <=> VALUES(member) AND "
            f"member_epoch <=> VALUES(member_epoch), generation, generation + 1), member = VALUES(member), "
            f"member_epoch = VALUES(member_epoch), "
            f"handing_to = NULL, handing_since = NULL"
        )

    def generations(self) -> dict[str, int]:
        """source -> how many readers it has had (each assignment to another member, or epoch,
        counts one): two readers in a row stream it under server ids one bit apart
        (`startup.stream_server_id`), so the one before, cut off and healed, never ends its
        successor's stream, nor the other way round."""
        db = self.db
        rows = db.rows(f"SELECT source, generation FROM {db.q}.source_owner WHERE task = {db.t}")
        return {str(s): int(g) for s, g in rows}

    def moved(self) -> dict[str, str]:
        """source -> the member the operator moved it to (`shardctl members move`)."""
        db = self.db
        rows = db.rows(f"SELECT source, member FROM {db.q}.source_moved WHERE task = {db.t}")
        return {str(s): str(m) for s, m in rows}

    def move(self, source: str, member: str) -> None:
        """The source read by `member` from the coordinator's next look on, for good (till
        moved again; while the member is gone, the rules give it to another)."""
        db = self.db
        db.execute([
            f"INSERT INTO {db.q}.source_moved (task, source, member) VALUES ({db.t}, {quote_string(source)}, "
            f"{quote_string(member)}) ON DUPLICATE KEY UPDATE member = VALUES(member)"
        ])

    def known(self) -> dict[str, Known]:
        """Every member the task has a row of, by name."""
        db = self.db
        rows = db.rows(
            f"SELECT name, epoch, host, expires > NOW(6), process, lag FROM {db.q}.member WHERE task = {db.t}"
        )
        return {
            str(n): Known(Member(str(n), int(e)), str(h), bool(a), str(p), lag if lag is None else float(lag))
            for n, e, h, a, p, lag in rows
        }

    def report(self, member: Member, lag: float | None) -> None:
        """How far behind the member's sources are (the most, seconds), for the tools."""
        db = self.db
        value = "NULL" if lag is None else repr(round(float(lag), 3))
        with db.session() as conn, conn.cursor() as cur:
            cur.execute(
                f"UPDATE {db.q}.member SET lag = {value} WHERE task = {db.t} AND "
                f"name = {quote_string(member.name)} AND epoch = {member.epoch}"
            )

    def listing(self, holder: str | None) -> dict[str, Any]:
        """Every member as the tools show it (`holder`: the name the task's live lease is held
        under: its member coordinates), and the sources the operator moved."""
        owners = self.owners()
        listed = {}
        for name, known in sorted(self.known().items()):
            epoch = known.member.epoch
            listed[name] = {
                "epoch": epoch,
                "host": known.host,
                "live": known.live,
                "coordinates": known.live and holder is not None and holder == known.process,
                "sources": sorted(s for s, o in owners.items() if (o.member, o.epoch) == (name, epoch))
                if known.live else [],
                "lag": known.lag if known.live else None,
            }
        return {"members": listed, "moved": self.moved()}

    def remove(self, name: str) -> bool:
        """A member gone (stopped, dead) forgotten: its row, its registrations, the sources
        moved to it. False (nothing done) while it lives: stopped cleanly first, its sources
        go to the others at once."""
        db, n = self.db, quote_string(name)
        with db.session() as conn, conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(
                f"SELECT expires > NOW(6) FROM {db.q}.member WHERE task = {db.t} AND name = {n} FOR UPDATE"
            )
            row = cur.fetchone()
            if row is not None and row[0]:
                cur.execute("ROLLBACK")
                return False
            owned = (("member", "name"), ("member_connection", "member"), ("source_moved", "member"))
            for table, column in owned:
                cur.execute(f"DELETE FROM {db.q}.{table} WHERE task = {db.t} AND {column} = {n}")
            cur.execute("COMMIT")
            return True

    def sql_release(self, source: str) -> str:
        """The source read by none (gone from the task's config)."""
        db = self.db
        return f"DELETE FROM {db.q}.source_owner WHERE task = {db.t} AND source = {quote_string(source)}"

    def fence(self, cur, member: Member, sources: Collection[str]) -> None:
        """In a batch's transaction on `cur`: the member reads each of `sources` till it
        commits, or SourcesLost."""
        if not sources:
            return
        db = self.db
        names = ",".join(quote_string(s) for s in sorted(sources))
        cur.execute(
            f"SELECT source FROM {db.q}.source_owner WHERE task = {db.t} AND source IN ({names}) AND "
            f"member = {quote_string(member.name)} AND member_epoch = {member.epoch} LOCK IN SHARE MODE"
        )
        held = {str(s) for (s,) in cur.fetchall()}
        lost = sorted(set(sources) - held)
        if lost:
            who = f"member {member.name} (epoch {member.epoch})"
            raise SourcesLost(f"{who} no longer reads {', '.join(lost)}")


def _until(ttl: float) -> str:
    return f"NOW(6) + INTERVAL {int(ttl * 1_000_000)} MICROSECOND"
