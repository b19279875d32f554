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

Versions are the coordinator's major versions of the table (`TargetInfo.major`). The DDL's
end also says which columns each shard's rows clear as of that version (`cleared`:
GroupState.cleared): a daemon's batch built before it took that DDL clears them too, as the
coordinator's own do (L65: a rename's CHANGE moved a shard's old values into the new name,
and that shard's rows, written under the old name by another daemon, must clear it there)."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from lattice import quote_string
from replicator.shard_id import ShardId
from replicator.state.db import MetaDb
from replicator.transient import TableBusy

TABLE_VERSION_SQL = [
    """CREATE TABLE IF NOT EXISTS {m}.table_version (
  task VARCHAR(64) NOT NULL, target VARCHAR(255) NOT NULL, version BIGINT NOT NULL,
  busy TINYINT NOT NULL DEFAULT 0, cleared TEXT NULL, PRIMARY KEY (task, target)) ENGINE=InnoDB"""
]
TABLE_VERSION_ADDED = (("table_version", "cleared", "TEXT NULL"),)

Cleared = Mapping[ShardId, tuple[str, ...]]


@dataclass(frozen=True)
class TableVersion:
    version: int
    busy: bool
    cleared: Cleared | None = None  # None: not said (a row a DDL's end has not written)


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
            f"SELECT target, version, busy, cleared FROM {db.q}.table_version WHERE task = {db.t} "
            f"AND target IN ({names}) LOCK IN SHARE MODE"
        )
        return {str(t): TableVersion(int(v), bool(b), _cleared(c)) for t, v, b, c in cur.fetchall()}

    def check(self, cur, targets: Collection[str]) -> dict[str, TableVersion]:
        """In a batch's transaction on `cur`: its tables as they are (the batch is built
        for them), or TableBusy where a DDL is changing one (it commits nothing; tried
        again)."""
        seen = self.read(cur, targets)
        for target, at in seen.items():
            if at.busy:
                raise TableBusy(target)
        return seen

    def begin_ddl(self, conn, target: str, version: int) -> None:
        """The table marked busy, on `conn` (autocommit): once the batches that read it
        committed. `version`: the table's, for a row made now."""
        db, t = self.db, quote_string(target)
        self._fenced(
            conn,
            f"INSERT IGNORE INTO {db.q}.table_version (task, target, version, busy) "
            f"VALUES ({db.t}, {t}, {int(version)}, 0)",
            # (the UPDATE takes the row exclusively: it waits for the batches that read it)
            f"UPDATE {db.q}.table_version SET busy = 1 WHERE task = {db.t} AND target = {t}",
        )

    def end_ddl(self, conn, target: str, version: int, cleared: Cleared | None = None) -> None:
        """The DDL ended, the table at `version`, each shard's rows clearing `cleared`:
        batches go on (those built for another version built again)."""
        self._fenced(conn, self._upsert(target, version, cleared, "version = VALUES(version), busy = 0, "))

    def set_cleared(self, conn, target: str, version: int, cleared: Cleared) -> None:
        """The columns each shard's rows clear, changed by a decision with no DDL (a shard
        dropped the new name of a pending rename: L42), on `conn` (autocommit)."""
        self._fenced(conn, self._upsert(target, version, cleared, ""))

    def _upsert(self, target: str, version: int, cleared: Cleared | None, also: str) -> str:
        db, t = self.db, quote_string(target)
        said = "NULL" if cleared is None else quote_string(_cleared_text(cleared))
        return (
            f"INSERT INTO {db.q}.table_version (task, target, version, busy, cleared) "
            f"VALUES ({db.t}, {t}, {int(version)}, 0, {said}) "
            f"ON DUPLICATE KEY UPDATE {also}cleared = VALUES(cleared)"
        )

    def _fenced(self, conn, *statements: str) -> None:
        """`statements` in a transaction of their own on `conn`, behind the lease's fence (a
        daemon whose lease is gone marks nothing)."""
        with conn.cursor() as cur:
            cur.execute("START TRANSACTION")
            if self.db.fence is not None:
                self.db.fence(cur)
            for statement in statements:
                cur.execute(statement)
            cur.execute("COMMIT")

    def rows(self) -> dict[str, TableVersion]:
        """Every table's version, as they are (status, tests)."""
        db = self.db
        found = db.rows(f"SELECT target, version, busy FROM {db.q}.table_version WHERE task = {db.t}")
        return {str(t): TableVersion(int(v), bool(b)) for t, v, b in found}


def same_cleared(a: Cleared, b: Cleared) -> bool:
    return {s: tuple(n) for s, n in a.items() if n} == {s: tuple(n) for s, n in b.items() if n}


def _cleared_text(cleared: Cleared) -> str:
    return json.dumps({str(s): list(names) for s, names in sorted(cleared.items()) if names}, sort_keys=True)


def _cleared(text: str | bytes | None) -> Cleared | None:
    if text is None:
        return None
    return {ShardId.parse(s): tuple(names) for s, names in json.loads(text).items()}
