"""The version of each downstream table of a task, as the meta schema holds it
(`table_version`): the fence that lets the daemons of one task, each on its own machine,
write one table (issue 75; docs/design.md "Batches checked at commit").

A batch reads the versions of its tables with a shared lock in its own transaction
(`read`), so none of them can change till it commits. A DDL first marks its table busy
(`begin_ddl`): that takes the row exclusively, which waits for the batches holding it to
commit, and commits the mark, so that no lock is held while the DDL runs (a DDL statement
commits its connection's transaction, and a DDL of minutes would hold every batch's lock
wait past its timeout). A batch that reads a busy table commits nothing and is tried again
(`TableBusy`, transient). The DDL's end (`end_ddl`) clears the mark and sets the version it
leaves: a batch built for another version is built again for the table as it is. A daemon
that dies with its table marked leaves it busy, for the coordinator that starts next to clear
once it finished the journal entries the dead one left (`TableHold.recovered`).

Versions are the coordinator's major versions of the table (`TargetInfo.major`)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from lattice import quote_string
from replicator.state.db import MetaDb
from replicator.transient import TableBusy

TABLE_VERSION_SQL = [
    """CREATE TABLE IF NOT EXISTS {m}.table_version (
  task VARCHAR(64) NOT NULL, target VARCHAR(255) NOT NULL, version BIGINT NOT NULL,
  busy TINYINT NOT NULL DEFAULT 0, PRIMARY KEY (task, target)) ENGINE=InnoDB"""
]


@dataclass(frozen=True)
class TableVersion:
    version: int
    busy: bool


class TableVersions:
    """The `table_version` rows of one task."""

    def __init__(self, db: MetaDb):
        self.db = db

    def read(self, cur, targets: Collection[str]) -> dict[str, TableVersion]:
        """In a batch's transaction on `cur`: its tables' versions, locked shared till it
        ends (a table with no row has none: it was never fenced)."""
        if not targets:
            return {}
        db = self.db
        names = ",".join(quote_string(t) for t in sorted(targets))
        cur.execute(
            f"SELECT target, version, busy FROM {db.q}.table_version WHERE task = {db.t} "
            f"AND target IN ({names}) LOCK IN SHARE MODE"
        )
        return {str(t): TableVersion(int(v), bool(b)) for t, v, b in cur.fetchall()}

    def check(self, cur, majors: dict[str, int]) -> dict[str, int]:
        """In a batch's transaction on `cur`, built for its tables' `majors`: those whose
        version is another now, with it (the batch is built again for them). TableBusy where
        a DDL is changing one (it commits nothing; tried again)."""
        seen = self.read(cur, majors)
        for target, at in seen.items():
            if at.busy:
                raise TableBusy(target)
        return {t: at.version for t, at in seen.items() if at.version != majors[t]}

    def begin_ddl(self, conn, target: str, version: int) -> None:
        """The table marked busy, on `conn` (autocommit): once the batches that read it
        committed. `version`: the table's, for a row made now."""
        db, t = self.db, quote_string(target)
        with conn.cursor() as cur:
            cur.execute("START TRANSACTION")
            if db.fence is not None:  # (a daemon whose lease is gone marks nothing)
                db.fence(cur)
            cur.execute(
                f"INSERT IGNORE INTO {db.q}.table_version (task, target, version, busy) "
                f"VALUES ({db.t}, {t}, {int(version)}, 0)"
            )
            # (the UPDATE takes the row exclusively: it waits for the batches that read it)
            cur.execute(f"UPDATE {db.q}.table_version SET busy = 1 WHERE task = {db.t} AND target = {t}")
            cur.execute("COMMIT")

    def end_ddl(self, conn, target: str, version: int) -> None:
        """The DDL ended, the table at `version`: batches go on (those built for another
        version built again)."""
        db, t = self.db, quote_string(target)
        with conn.cursor() as cur:
            cur.execute("START TRANSACTION")
            if db.fence is not None:
                db.fence(cur)
            cur.execute(
                f"INSERT INTO {db.q}.table_version (task, target, version, busy) "
                f"VALUES ({db.t}, {t}, {int(version)}, 0) "
                f"ON DUPLICATE KEY UPDATE version = VALUES(version), busy = 0"
            )
            cur.execute("COMMIT")

    def rows(self) -> dict[str, TableVersion]:
        """Every table's version, as they are (status, tests)."""
        db = self.db
        found = db.rows(f"SELECT target, version, busy FROM {db.q}.table_version WHERE task = {db.t}")
        return {str(t): TableVersion(int(v), bool(b)) for t, v, b in found}
