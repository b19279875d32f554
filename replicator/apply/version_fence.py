"""A batch's tables checked against their versions in the meta schema, in the batch's own
transaction (`VersionFence`), where the daemons of one task on many machines write the same
tables (issue 75; state/table_versions.py). What a daemon knows of a table another daemon's
DDL changed (`TargetInfo`) is read again from the server before the batch is built for it;
a batch on a table a DDL is changing commits nothing and is tried again (`TableBusy`).

One daemon alone needs none of this: its DDL holds its own batches (`TableHold`), and a
batch costs no statement more."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lattice import Flavor
from replicator.apply.inspect import read_table, table_exists
from replicator.apply.table_refresh import table_fields
from replicator.apply.target import TargetInfo
from replicator.state.table_versions import Cleared, TableVersions, same_cleared


class VersionFence:
    """Threads: every partition's thread checks its batches through it, each on its own
    connection; a table read again is a new value put whole into its `TargetInfo` (as the
    DDL executor puts one), which two threads reading it at once, under the same version
    (their shared locks keep it), make alike."""

    def __init__(self, versions: TableVersions, targets: Mapping[str, TargetInfo], flavor: Flavor | str):
        self.versions = versions
        self.targets = targets
        self.flavor = flavor

    def check(self, cur, majors: Mapping[str, int]) -> None:
        """In the batch's transaction on `cur`, built for its tables' `majors`: the tables
        locked at their versions till it commits, those whose version moved read again
        (the batch is then built for them as they are: `statements`' projection)."""
        for target, at in self.versions.check(cur, majors).items():
            info = self.targets[target]
            # (L65: a decision's rename changes what the shards' rows clear, and the table,
            # but not its version: a minor change, its CHANGE's old name made again)
            cleared = at.cleared is not None and not same_cleared(at.cleared, info.cleared)
            if info.major == at.version and not cleared:
                continue  # (read again already, for another batch)
            schema, table = target.split(".", 1)
            fields = {"major": at.version, **({"cleared": at.cleared} if cleared else {})}
            if table_exists(cur.connection, schema, table):
                fields.update(table_fields(read_table(cur.connection, schema, table), self.flavor))
            info.update(**fields)  # (one new value: no thread sees half of it)


class DdlMarks:
    """A group's table marked busy in the meta schema while its DDL's statements hold the
    applier's batches (`TableHold`), and its version set when they end: the other daemons
    of the task hold their batches on it meanwhile, and build them for it as it is after.
    Each mark on a connection of its own (DDLs are few)."""

    def __init__(self, versions: TableVersions, target: str, connect: Callable[[], Any]):
        self.versions = versions
        self.target = target
        self.connect = connect

    def begin(self, version: int) -> None:
        """Once the batches on it committed (`version`: the table's, for a row made now)."""
        self._mark(self.versions.begin_ddl, version)

    def end(self, version: int, cleared: Cleared | None = None) -> None:
        """`cleared`: the columns each shard's rows clear at `version` (`TargetTable.cleared`)."""
        self._mark(lambda conn, target, v: self.versions.end_ddl(conn, target, v, cleared), version)

    def cleared(self, version: int, cleared: Cleared) -> None:
        """What the shards' rows clear changed with no DDL (`TableVersions.set_cleared`)."""
        self._mark(lambda conn, target, v: self.versions.set_cleared(conn, target, v, cleared), version)

    def _mark(self, write: Callable[[Any, str, int], None], version: int) -> None:
        conn = self.connect()
        try:
            write(conn, self.target, version)
        finally:
            conn.close()
