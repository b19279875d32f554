"""`check` of the row filters (`filters.rows`) on a source's tables: each condition
compiles on each table it covers (its columns are there), and the source's server takes
the WHERE a backfill reads the table with."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pymysql

from lattice import parse_table, quote_identifier
from replicator.config import RowFilter
from replicator.errors import reason_of
from replicator.shard_id import ShardId
from replicator.source.row_filter import RowFilterError, compile_filters, covering, keep_clause

Query = Callable[[Any, str], list[tuple[Any, ...]]]


def row_filter_problems(
    conn: Any, source_id: str, tables: Iterable[tuple[str, str]], filters: Sequence[RowFilter], query: Query
) -> list[tuple[str, str, str]]:
    """(table, message, fix) of each routed table a filter covers and cannot filter."""
    problems = []
    for schema, table in tables:
        shard = ShardId(source_id, schema, table)
        if not covering(filters, shard):
            continue
        quoted = f"{quote_identifier(schema)}.{quote_identifier(table)}"
        name = f"{schema}.{table}"
        create = query(conn, f"SHOW CREATE TABLE {quoted}")[0][1]
        try:
            compile_filters(filters, shard, parse_table(create, shown=True))
        except RowFilterError as exc:
            problems.append((name, exc.message, exc.fix))
            continue
        keep = keep_clause(filters, shard)
        if keep is None:
            continue
        try:
            query(conn, f"SELECT 1 FROM {quoted} WHERE {keep} LIMIT 0")
        except pymysql.MySQLError as exc:
            problems.append(
                (
                    name,
                    f"the server refuses the backfill's read with its ignore_insert: {reason_of(exc)}",
                    "write the condition as the source's server takes it",
                )
            )
    return problems
