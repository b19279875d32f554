"""One shard's rows downstream, as a shard's TRUNCATE deletes them (issue 46).

Where the merged table's rows say their shard (extract columns for source, schema and
table) and an index leads with those columns (they lead the primary key: `ExtractColumns`),
the rows go by `DELETE ... WHERE <the shard's values> LIMIT BATCH`, run again until it
deletes fewer (`replicator.apply.shard_rows`): each batch reads the index range of the rows
it deletes and commits on its own, so no transaction holds a large shard's rows at once.
Elsewhere the rows cannot be told from the other shards' without reading them all, and the
shard pauses (`Unkeyed`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from lattice import Table, key, qualified_name
from replicator.schema.extract import PARTS, ExtractColumns
from replicator.shard_id import ShardId

BATCH = 5000  # rows a statement deletes: a transaction's rows and locks stay bounded


@dataclass(frozen=True)
class Unkeyed:
    """Why a shard's rows downstream cannot be deleted apart from the others'."""

    reason: str


def truncate_statement(
    extract: ExtractColumns, shard: ShardId, target: str, table: Table | None, others: Iterable[ShardId] = ()
) -> str | Unkeyed:
    """The batch statement deleting `shard`'s rows from `target` (`table`: as it is
    downstream, None before it exists), or why there is none (`others`: the group's shards)."""
    where = extract.origin(shard, others)
    if where is None and set(PARTS) <= extract.names.keys():
        return Unkeyed(
            f"TRUNCATE of {shard}: the values its patterns capture for the merged table {target}'s "
            f"extract columns ({extract.values(shard)}) do not tell its rows from another shard's"
        )
    if where is None:
        return Unkeyed(
            f"TRUNCATE of {shard}: the merged table {target} has no extract columns for source, "
            f"schema and table to tell {shard}'s rows from the other shards'"
        )
    if table is not None and not _leads_an_index(table, extract):
        return Unkeyed(
            f"TRUNCATE of {shard}: no index of the merged table {target} starts with the extract "
            f"columns, so deleting {shard}'s rows would read every shard's"
        )
    return f"DELETE FROM {qualified_name(target)} WHERE {where} LIMIT {BATCH}"


def _leads_an_index(table: Table, extract: ExtractColumns) -> bool:
    names = {key(extract.names[p]) for p in PARTS}
    return any({key(p.column) for p in ix.parts[: len(names)]} == names for ix in table.indexes)
