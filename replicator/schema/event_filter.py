"""DM's binlog event filters (`filters.events` of the task config): which events of a
shard are ignored, and what ignoring a DDL means so that the downstream table and the
coordinator's view of it stay one:

- `insert`, `update`, `delete`: the shard's row changes of that kind are dropped.
- `truncate table`, `drop table`: the statement is ignored; downstream keeps the shard's
  rows, and a dropped table stays in its group (a table created again under its name is
  then a change of its schema).
- `add index`, `drop index`: the shard's index changes of that kind are not followed;
  the coordinator sees the shard's indexes as they were (its other changes go on).
- `drop column`: a column the shard drops (not one it renames) is dropped from the
  shard's table as the coordinator sees it (its rows no longer carry it), but the
  downstream table keeps it, and the values its rows hold, for good: the coordinator
  pins it (`Coordinator.pin`), nullable, as the shard's new rows leave it NULL.
- `sql` patterns: a DDL whose text matches is ignored where it changes nothing a row
  depends on (indexes, options, comments, nothing); one that changes columns cannot be
  ignored without the downstream refusing the shard's rows later: the shard pauses and
  says so (set-schema or skip is the way out).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from lattice import Column, IndexKind, Table, key
from replicator.config import EventFilter
from replicator.shard_id import ShardId
from replicator.source.schema_change import ChangeKind, SchemaChange

ROW_KINDS = {"I": "insert", "U": "update", "D": "delete"}


def _covering(filters: Iterable[EventFilter], shard: ShardId) -> list[EventFilter]:
    return [f for f in filters if f.covers(shard.schema, shard.table)]


def ignored_rows(filters: Iterable[EventFilter], shard: ShardId) -> frozenset[str]:
    """The row operations (I, U, D) of the shard that are dropped."""
    kinds = {k for f in _covering(filters, shard) for k in f.ignore}
    return frozenset(op for op, kind in ROW_KINDS.items() if kind in kinds)


def taken(
    filters: Iterable[EventFilter], change: SchemaChange, current: Table | None
) -> tuple[SchemaChange, str | None]:
    """The change as the coordinator takes it (`current`: the shard's table as it sees
    it), and the kind of filter that ignored (part of) it: one of EVENT_KINDS or "sql";
    None where none did. Under `drop column` the change is followed as it is, and named
    where it drops a column: the drop is what is ignored downstream (`kept_columns`)."""
    covering = _covering(filters, change.shard)
    if not covering:
        return change, None
    kinds = {k for f in covering for k in f.ignore}
    if change.kind is ChangeKind.TRUNCATE and "truncate table" in kinds:
        return replace(change, kind=ChangeKind.NONE), "truncate table"
    if change.kind is ChangeKind.DROP and "drop table" in kinds:
        return replace(change, kind=ChangeKind.NONE), "drop table"
    patterns = (p for f in covering for p in f.sql)
    pattern = next((p for p in patterns if re.search(p, change.statement, re.IGNORECASE)), None)
    if pattern is not None:
        before, after = change.before, change.after
        if before is not None and after is not None and _row_columns(before) != _row_columns(after):
            problem = (
                f"the event filter's sql pattern {pattern!r} ignores this DDL, but it changes the shard's "
                "columns: the downstream table would refuse its rows"
            )
            return replace(change, kind=ChangeKind.UNSUPPORTED, problem=problem), "sql"
        return replace(change, kind=ChangeKind.NONE), "sql"
    seen, named = _index_changes_taken(change, current, kinds)
    if named is None and "drop column" in kinds and _dropped(seen):
        # the change is followed as it is: the kept columns are pinned (`kept_columns`)
        named = "drop column"
    return seen, named


def kept_columns(filters: Iterable[EventFilter], change: SchemaChange) -> tuple[Column, ...]:
    """The columns (as the shard had them) that a `drop column` filter covering the shard
    keeps downstream after `change` (as `taken` returns it) drops them."""
    covering = _covering(filters, change.shard)
    if not any("drop column" in f.ignore for f in covering):
        return ()
    return _dropped(change)


def _dropped(change: SchemaChange) -> tuple[Column, ...]:
    """The columns an ALTER drops: gone from the shard's table and not renamed. A rename
    whose new name the same statement drops is a drop of the old name (its values go).
    Generated columns aside: they hold no values of their own to keep."""
    before, after = change.before, change.after
    if change.kind is not ChangeKind.ALTER or before is None or after is None:
        return ()
    renamed = {key(r.old) for r in change.renames if after.column(r.new) is not None}
    return tuple(
        c
        for c in before.columns
        if c.key not in after.column_map and c.key not in renamed and c.generated is None
    )


def _index_changes_taken(
    change: SchemaChange, current: Table | None, kinds: set[str]
) -> tuple[SchemaChange, str | None]:
    """`add index` and `drop index`: the change with the shard's index changes left out."""
    ignore_add, ignore_drop = "add index" in kinds, "drop index" in kinds
    if change.kind is not ChangeKind.ALTER or not (ignore_add or ignore_drop) or current is None:
        return change, None
    after = _indexes_as_seen(change.after, current, ignore_add, ignore_drop)
    if after == change.after:
        return change, None
    # the filter is named where this statement's own index changes are ignored, not
    # where the coordinator's view only keeps out one ignored before
    named = _ignored_here(change, ignore_add, ignore_drop)
    if after == current and named is not None:
        return replace(change, kind=ChangeKind.NONE), named
    return replace(change, after=after), named


def _row_columns(table: Table) -> tuple[Column, ...]:
    """What a row depends on: the columns, their comments aside."""
    return tuple(replace(c, comment=None) for c in table.columns)


def _ignored_here(change: SchemaChange, ignore_add: bool, ignore_drop: bool) -> str | None:
    if change.before is None:
        return None
    own = _indexes_as_seen(change.after, change.before, ignore_add, ignore_drop).index_map
    if any(k not in own for k in change.after.index_map):
        return "add index"
    if any(k not in change.after.index_map for k in own):
        return "drop index"
    return None


def _indexes_as_seen(after: Table, current: Table, ignore_add: bool, ignore_drop: bool) -> Table:
    """`after` with the secondary indexes it added (or dropped) since `current` left as
    `current` had them; the primary key is always followed."""
    now = after.index_map
    seen = current.index_map
    kept = []
    for index in current.indexes:
        standing = all(after.column(p.column) for p in index.parts)
        if index.key in now:
            kept.append(now[index.key])
        elif ignore_drop and index.kind is not IndexKind.PRIMARY and standing:
            kept.append(index)  # its drop is ignored (its columns are still there)
    for index in after.indexes:
        if index.key not in seen and (index.kind is IndexKind.PRIMARY or not ignore_add):
            kept.append(index)
    return replace(after, indexes=tuple(kept))
