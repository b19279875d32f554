"""Row filters by expression (`filters.rows`, DM's expression filter): which of a shard's
row changes are dropped for their values, in the stream (the worker decides on each
decoded row) and in the reads of the backfill, verify and resync (a WHERE the source's
server evaluates). Both read the same condition text, and our evaluator answers as the
server does (tests/server/test_row_condition_against_mariadb.py), so the stream and the copies agree.

What a filter ignores: an insert where `ignore_insert` is TRUE of the row; an update
where the conditions given of `ignore_update_old` (the row before) and
`ignore_update_new` (the row after) are all TRUE; a delete where `ignore_delete` is TRUE
of the row. A copy reads the rows as they are, that is as inserts: it keeps those
`ignore_insert` does not ignore."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from lattice import Table, parse_table
from replicator.config import RowFilter
from replicator.row_condition import ConditionError, row_of_literals
from replicator.shard_id import ShardId, split_table_key
from replicator.source.messages import Change

Predicate = Callable[[dict], "int | None"]
KINDS = {"I": "insert", "U": "update", "D": "delete"}


def covering(filters: Iterable[RowFilter], shard: ShardId) -> list[RowFilter]:
    return [f for f in filters if f.covers(shard.schema, shard.table)]


FIX = "change the condition, or leave the table out of the filter's tables"


class RowFilterError(ValueError):
    """A condition that cannot be evaluated on a table: names the filter, the field, the
    condition and the table (`message`), and the fix."""

    def __init__(self, message: str, fix: str = FIX):
        super().__init__(f"{message}; {fix}")
        self.message, self.fix = message, fix

    def pause_reason(self, shard: ShardId) -> str:
        """Why the shard pauses (its table lost a column a condition reads), ending with the
        way out: the coordinator forgets the schema of a shard whose rows cannot be read,
        set-schema gives it back and reads its rows since the pause again."""
        return (
            f"{self.message}; way out: {self.fix} in the task config, restart the daemon, then "
            f"`shardctl set-schema --source {shard.source} --table {shard.table_key} --file F` "
            "(F: the table's SHOW CREATE TABLE) reads its rows since the pause again"
        )


@dataclass(frozen=True)
class _Compiled:
    columns: tuple[str, ...]  # what its conditions read, lowercased
    insert: Predicate | None
    update_old: Predicate | None
    update_new: Predicate | None
    delete: Predicate | None

    def ignores(self, change: Change) -> bool:
        if change.op == "I":
            return self._true(self.insert, change.columns, change.values)
        if change.op == "D":
            return self._true(self.delete, change.before_columns or change.columns, change.before)
        if self.update_old is None and self.update_new is None:
            return False
        return (
            self.update_old is None
            or self._true(self.update_old, change.before_columns or change.columns, change.before)
        ) and (self.update_new is None or self._true(self.update_new, change.columns, change.values))

    def _true(self, predicate: Predicate | None, columns, values) -> bool:
        if predicate is None or values is None:
            return False
        return predicate(row_of_literals(columns, values, self.columns)) == 1


@dataclass(frozen=True)
class TableRowFilter:
    """The row filters covering one shard, compiled for one version of its table."""

    compiled: tuple[_Compiled, ...]

    def ignores(self, change: Change) -> bool:
        """Whether the change is dropped: one of the filters ignores it."""
        return any(c.ignores(change) for c in self.compiled)


def compile_filters(filters: Iterable[RowFilter], shard: ShardId, table: Table) -> TableRowFilter | None:
    """The filters covering the shard over its table; None when none covers it.
    RowFilterError names a condition the table cannot evaluate (a column it lacks)."""
    found = []
    for row_filter in covering(filters, shard):
        predicates: dict[str, Predicate | None] = {}
        columns: list[str] = []
        for name, condition in row_filter.conditions():
            try:
                predicates[name] = condition.compile(table)
            except ConditionError as exc:
                raise RowFilterError(
                    f"{row_filter.path}.{name} ({condition.text!r}) cannot be evaluated on {shard}: {exc}"
                ) from None
            columns += condition.columns
        found.append(
            _Compiled(
                tuple(dict.fromkeys(columns)),
                predicates.get("ignore_insert"),
                predicates.get("ignore_update_old"),
                predicates.get("ignore_update_new"),
                predicates.get("ignore_delete"),
            )
        )
    return TableRowFilter(tuple(found)) if found else None


def check_tables(
    filters: Iterable[RowFilter], source: str, schemas: Mapping[str, str], flavor: str = "mariadb"
) -> None:
    """Every condition compiles on the tables it covers (`schemas`: "schema.table" ->
    CREATE TABLE); RowFilterError names the first that does not."""
    filters = tuple(filters)
    for key, create in schemas.items():
        shard = ShardId(source, *split_table_key(key))
        if create is not None and covering(filters, shard):
            compile_filters(filters, shard, parse_table(create, upstream=flavor, shown=True))


def keep_clause(filters: Iterable[RowFilter], shard: ShardId) -> str | None:
    """The WHERE a copy of the shard reads its rows with (rows as inserts): those no
    `ignore_insert` ignores; None when none covers the shard. `IS NOT TRUE` keeps the rows
    where the condition is FALSE or NULL, as the stream does."""
    conditions = [f.ignore_insert for f in covering(filters, shard) if f.ignore_insert is not None]
    if not conditions:
        return None
    return " AND ".join(f"(({c.text}) IS NOT TRUE)" for c in conditions)
