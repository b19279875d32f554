"""A source's handover from its live reader to another member (issue 75), in the task's
`source_owner` rows: the coordinator asks it (`sql_hand`), the reader, drained (its batches
committed, its watermarks written, its stream closed), gives it in one transaction
(`hand_over`); asked longer than the lease's time, the coordinator takes it as from a member
gone (`replicator/daemon/rebalance.py`)."""

from __future__ import annotations

from collections.abc import Callable

from lattice import quote_string
from replicator.state.db import MetaDb
from replicator.state.member import Member


class Handovers:
    """The handover columns of one task's `source_owner` rows (`assign`: the statement that
    gives a source to a member, `Members.sql_assign`, which clears them)."""

    def __init__(self, db: MetaDb, assign: Callable[[str, Member], str]):
        self.db, self._assign = db, assign

    def sql_hand(self, source: str, to: str) -> str:
        """The source's live reader asked to hand it over to member `to` (the coordinator's
        transaction): it drains first, then gives it (`hand_over`). Asked of another member
        than before, the wait starts again."""
        n = quote_string(to)
        # (handing_since first: MariaDB assigns left to right, and it reads the old handing_to)
        return self._set(source, f"handing_since = IF(handing_to <=> {n}, handing_since, NOW(6)), "
                                 f"handing_to = {n}")

    def sql_unhand(self, source: str) -> str:
        """The source's handover asked no more."""
        return self._set(source, "handing_to = NULL, handing_since = NULL")

    def _set(self, source: str, assignments: str) -> str:
        db = self.db
        where = f"task = {db.t} AND source = {quote_string(source)}"
        return f"UPDATE {db.q}.source_owner SET {assignments} WHERE {where}"

    def handing(self, ttl: float) -> dict[str, tuple[str, bool]]:
        """source -> (the member its reader is asked to hand it to, whether it was asked
        longer than `ttl` seconds ago: the coordinator gives it without the drain then)."""
        db = self.db
        rows = db.rows(
            f"SELECT source, handing_to, handing_since < NOW(6) - INTERVAL {int(ttl * 1_000_000)} "
            f"MICROSECOND FROM {db.q}.source_owner WHERE task = {db.t} AND handing_to IS NOT NULL"
        )
        return {str(s): (str(m), bool(late)) for s, m, late in rows}

    def handing_from(self, member: Member) -> dict[str, str]:
        """The sources `member` (in its epoch) is asked to hand over: source -> to whom."""
        db = self.db
        rows = db.rows(
            f"SELECT source, handing_to FROM {db.q}.source_owner WHERE task = {db.t} AND handing_to IS NOT "
            f"NULL AND member = {quote_string(member.name)} AND member_epoch = {member.epoch}"
        )
        return {str(s): str(m) for s, m in rows}

    def hand_over(self, member: Member) -> dict[str, Member]:
        """The member, drained (every batch of its sources committed, its watermarks written),
        gives each source it is asked to hand over to that member, in its live epoch, in one
        transaction; a request to a member gone is dropped (the coordinator asks again). What
        it gave."""
        db = self.db
        given: dict[str, Member] = {}
        with db.session() as conn, conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(
                f"SELECT o.source, m.name, m.epoch FROM {db.q}.source_owner o LEFT JOIN {db.q}.member m "
                f"ON m.task = o.task AND m.name = o.handing_to AND m.expires > NOW(6) WHERE o.task = {db.t} "
                f"AND o.handing_to IS NOT NULL AND o.member = {quote_string(member.name)} "
                f"AND o.member_epoch = {member.epoch} FOR UPDATE"
            )
            for source, name, epoch in cur.fetchall():
                if name is None:
                    cur.execute(self.sql_unhand(str(source)))
                    continue
                given[str(source)] = Member(str(name), int(epoch))
                cur.execute(self._assign(str(source), given[str(source)]))
            cur.execute("COMMIT")
        return given
