"""What the applier knows of a group's downstream table (`TargetInfo`, target.py), read again
from the server after the group's DDL changed it: its columns, key and row shape, and the
columns each shard's rows clear as the coordinator has them."""

from __future__ import annotations

import contextlib

import pymysql

from lattice import Flavor, IndexKind, Table
from replicator.apply.inspect import read_table, table_exists
from replicator.apply.target import TargetInfo
from replicator.schema.coordinator import Coordinator
from replicator.servers import connect_downstream
from replicator.shard_id import ShardId
from replicator.source.row_events import row_shape

UNIQUE_KINDS = (IndexKind.PRIMARY, IndexKind.UNIQUE)


class TableRefresh:
    def __init__(self, target: str, coordinator: Coordinator, info: TargetInfo, connection: dict):
        self.target = target
        self.coordinator = coordinator
        self.info = info
        self.connection = connection

    def refresh(self, conn: pymysql.connections.Connection | None = None) -> None:
        """Update what the applier knows of the table from the server itself."""
        own = conn is None
        conn = conn or connect_downstream(self.connection)
        try:
            schema, table = self.target.split(".", 1)
            if table_exists(conn, schema, table):
                update_info(self.info, read_table(conn, schema, table), self.coordinator.flavor)
            self.info.update(major=self.coordinator.version.major, cleared=self.cleared())
        finally:
            if own:
                conn.close()

    def refresh_quietly(self) -> None:
        """`refresh` on a connection of its own, if the downstream answers (else the next
        entry, or the start after, reads it)."""
        with contextlib.suppress(pymysql.err.MySQLError):
            self.refresh()

    def cleared(self) -> dict[ShardId, tuple[str, ...]]:
        return {s: tuple(c) for s, c in self.coordinator.group.cleared().items()}


def update_info(info: TargetInfo, table: Table, flavor: Flavor | str = "mariadb") -> None:
    info.update(**table_fields(table, flavor))


def table_fields(table: Table, flavor: Flavor | str = "mariadb") -> dict:
    """What the applier knows of a downstream table (fields of `TargetTable`), from the table."""
    key = table_key(table)
    return {
        "columns": {c.key: c.name for c in table.columns if c.generated is None},
        "not_null": frozenset(c.key for c in table.columns if not c.nullable),
        "shape": row_shape(table, flavor),
        "key": key,
        # an upsert can only stand in for an UPDATE when the key it matches on is the
        # only unique one: another would let it overwrite the row that key names
        "sole_key": key is not None and sum(i.kind in UNIQUE_KINDS for i in table.indexes) == 1,
    }


def table_key(table: Table) -> tuple[str, ...] | None:
    """The columns that identify a row downstream: the primary key, else the first
    unique key over NOT NULL columns."""
    pk = table.primary_key
    if pk is not None and all(p.length is None for p in pk.parts):
        return tuple(table.column(p.column).name for p in pk.parts)
    for index in table.indexes:
        if index.kind.value == "unique" and all(
            p.length is None and (c := table.column(p.column)) is not None and not c.nullable
            for p in index.parts
        ):
            return tuple(table.column(p.column).name for p in index.parts)
    return None
