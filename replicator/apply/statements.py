"""The SQL a batch of changes becomes downstream: batch in, statements out, nothing else.

Consecutive inserts of one table and column list go into one INSERT, consecutive deletes
into one, consecutive row events into one BINLOG statement; without safe mode a batch of
rows on tables with one unique key goes as its net effect (`replicator.apply.net`). A
batch built for an older major version of a table is written for the table as it is now
(docs/design.md "Batches checked at commit"). Every statement on a keyed table reads only the rows it changes
(`tests/server/test_statement_reads.py`). The applier sends what this builds; it keeps the
partitions, threads and retries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import lru_cache
from operator import itemgetter

from replicator.apply.net import fold
from replicator.apply.target import TargetInfo, TargetTable
from replicator.source.messages import Change, RowEvent
from replicator.source.row_events import binlog_statement, renamed_table_map, statement_ended

log = logging.getLogger("shardmerge.applier")

EVENTS_PER_STATEMENT = 1 << 20  # bytes of row events in one BINLOG statement (base64 makes 4/3)

Targets = Mapping[str, TargetTable]


def statements(
    changes: list[Change | RowEvent], infos: Mapping[str, TargetInfo], majors: Mapping[str, int], safe: bool
) -> list[str]:
    """Statements for a run of changes, in order (`majors`: the version of each table the
    batch was built for; `safe`: safe mode, whose inserts replace and updates delete and
    replace, so a change applied before is applied again to the same result; on a table
    with another unique key, a row's own is deleted by its key and it is inserted)."""
    targets = {name: info.now for name, info in infos.items()}  # (each table as it is now, once)
    folded = None if safe else _folded(changes, targets, majors)
    if folded is not None:
        return folded
    out: list[str] = []
    i = 0
    while i < len(changes):
        c = changes[i]
        if isinstance(c, RowEvent):
            i = _events(changes, i, out)
            continue
        info = targets[c.target]
        stale = majors.get(c.target, info.major) != info.major
        if c.op == "I":
            cols, rows, j = _row_run(changes, i, info, stale)
            if safe and info.key and not info.sole_key:
                # (a REPLACE deletes every row one of the table's unique keys meets, not only
                # the row's own: another row of the shard that holds the value of a key only
                # the downstream has would go, unseen. The row's own goes by its key; a
                # meeting on another key is refused, as it is out of safe mode: L60)
                keys = [_after_key(x, info) for x in changes[i:j]]
                out.append(f"DELETE FROM {info.quoted} WHERE {keys_in(info.key, keys)}")
                out.append(_insert("INSERT", info, cols, rows))
            else:
                out.append(_insert("REPLACE" if safe else "INSERT", info, cols, rows))
            i = j
        elif c.op == "D" and info.key:
            keys = [_key(c, info)]
            j = i + 1
            while j < len(changes) and changes[j].op == "D" and changes[j].target == c.target:
                keys.append(_key(changes[j], info))
                j += 1
            out.append(f"DELETE FROM {info.quoted} WHERE {keys_in(info.key, keys)}")
            i = j
        elif c.op == "D":
            out.append(f"DELETE FROM {info.quoted} WHERE {_match(c, info, stale)} LIMIT 1")
            i += 1
        elif info.sole_key:
            # consecutive updates as one upsert: one statement instead of one per
            # row; the same result while the row is there (and updates keep keys:
            # one that moves its key was split into a delete and an insert). In safe mode
            # too: with the key the table's only unique one, the upsert of the row as it is
            # after is what deleting it by its key and replacing it leaves, there or not
            # (a statement per row made the minute of safe mode after a crash a stall:
            # ~150 rows a second of an update-heavy load)
            cols, rows, j = _row_run(changes, i, info, stale)
            out.append(_insert("INSERT", info, cols, rows, upsert=True))
            i = j
        else:
            cols, after = _row(c, info, stale)
            if safe and info.key:
                out.append(f"DELETE FROM {info.quoted} WHERE {_where_key(c, info)}")
                out.append(_insert("REPLACE" if info.sole_key else "INSERT", info, cols, [after]))
            else:
                sets = ",".join(f"`{n}`={v}" for n, v in zip(cols, after, strict=True))
                where = _where_key(c, info) if info.key else _match(c, info, stale) + " LIMIT 1"
                out.append(f"UPDATE {info.quoted} SET {sets} WHERE {where}")
            i += 1
    return out


def keys_in(names: tuple[str, ...], keys: list[tuple[str, ...]]) -> str:
    """The condition selecting the rows of these keys, in a form the server looks up by
    the key: MariaDB reads the whole table for a row constructor IN of one element
    (`(a,b) IN ((1,2))`), and uses the key for equalities and for two elements or more."""
    if len(keys) == 1:
        return " AND ".join(f"`{n}`={v}" for n, v in zip(names, keys[0], strict=True))
    if len(names) == 1:
        return f"`{names[0]}` IN ({','.join(k[0] for k in keys)})"
    rows = ",".join("(" + ",".join(k) + ")" for k in keys)
    return f"({','.join(f'`{n}`' for n in names)}) IN ({rows})"


def _folded(
    changes: list[Change | RowEvent], targets: Targets, majors: Mapping[str, int]
) -> list[str] | None:
    """Each table's DELETE, INSERT and upsert of the batch's net effect; None where a
    change may not be folded (a row event, a table with another unique key or none, a
    key whose changes do not fold)."""
    by_target: dict[str, list[Change]] = {}
    for c in changes:
        if isinstance(c, RowEvent) or not targets[c.target].sole_key:
            return None
        by_target.setdefault(c.target, []).append(c)
    out: list[str] = []
    for target, rows in by_target.items():
        info = targets[target]
        net = fold(rows, lambda c, info=info: _key(c, info), lambda c, info=info: _after_key(c, info))
        if net is None:
            return None
        stale = majors.get(target, info.major) != info.major
        deletes, runs = list(net.deletes), ({}, {})
        for upsert, images in ((False, net.inserts), (True, net.upserts)):
            for image in images:
                cols, values = _row(image, info, stale)
                runs[upsert].setdefault(cols, []).append(values)
        for delete, image in net.replaced:
            # A row deleted and made again whose insert names every column of the table is
            # the upsert of its image: one statement and one write of the row where a DELETE
            # and an INSERT were two (sysbench's transactions: the downstream's CPU for them
            # a sixth to a fifth less, bench/sysbench.py). Naming fewer, it is deleted and inserted, so
            # the columns it does not name take their defaults
            cols, values = _row(image, info, stale)
            whole = len(cols) == len(info.columns)
            if not whole:
                deletes.append(delete)
            runs[whole].setdefault(cols, []).append(values)
        if deletes:
            keys = [_key(c, info) for c in deletes]
            out.append(f"DELETE FROM {info.quoted} WHERE {keys_in(info.key, keys)}")
        for upsert in (False, True):
            out += [_insert("INSERT", info, c, values, upsert=upsert) for c, values in runs[upsert].items()]
    return out


def _events(changes: list[Change | RowEvent], i: int, out: list[str]) -> int:
    """BINLOG statements for the row events from changes[i] on: each source's format
    description first (the server reads the events by it), then each event after
    its table map, made to name the target. Returns where the run ends."""
    events: list[bytes] = []
    size = 0
    form = None
    while i < len(changes) and isinstance(changes[i], RowEvent):
        unit = changes[i]
        if unit.form != form:
            form = unit.form
            events.append(form.event)
        table_map = _named(unit.table_map, unit.target, form.checksum)
        events += (table_map, statement_ended(unit.event, form.checksum))
        size += len(table_map) + len(unit.event)
        i += 1
        if size >= EVENTS_PER_STATEMENT:
            out.append(binlog_statement(events))
            events, size, form = [], 0, None
    if events:
        out.append(binlog_statement(events))
    # the server leaves the session at the last event's time: the statements after it
    # (decoded rows' CURRENT_TIMESTAMP defaults, the checkpoint's updated_at) take now
    out.append("SET timestamp = DEFAULT")
    return i


@lru_cache(maxsize=4096)  # (a table map names one table: one per table and target; a lock inside)
def _named(table_map: bytes, target: str, checksum) -> bytes:
    """The table map made to name the target table."""
    schema, table = target.split(".", 1)
    return renamed_table_map(table_map, schema, table, checksum)


def _row_run(
    changes: list[Change], i: int, info: TargetTable, stale: bool
) -> tuple[tuple[str, ...], list[tuple[str, ...]], int]:
    """The rows after of changes[i] and the changes that follow it with the same
    operation, target and columns; and where the run ends."""
    first = changes[i]
    cols, row = _row(first, info, stale)
    rows = [row]
    j = i + 1
    while j < len(changes) and changes[j].op == first.op and changes[j].target == first.target:
        more_cols, more = _row(changes[j], info, stale)
        if more_cols != cols:
            break
        rows.append(more)
        j += 1
    return cols, rows, j


def _insert(
    verb: str, info: TargetTable, cols: tuple[str, ...], rows: list[tuple[str, ...]], upsert: bool = False
) -> str:
    names = ",".join(f"`{n}`" for n in cols)
    sql = f"{verb} INTO {info.quoted} ({names}) VALUES " + ",".join("(" + ",".join(r) + ")" for r in rows)
    if upsert:
        sql += " ON DUPLICATE KEY UPDATE " + ",".join(f"`{n}`=VALUES(`{n}`)" for n in cols)
    return sql


def _row(change: Change, info: TargetTable, stale: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The columns and literals to write for a change's row after."""
    cols, values = _project(change.columns, change.values, info, stale)
    # (most rows clear nothing: no tuple built for them, it is per row)
    for names in (change.clear, info.cleared.get(change.shard, ()) if info.cleared else ()):
        for column in names:
            name = info.clearable(column)
            if name is not None and name not in cols:
                cols, values = (*cols, name), (*values, "NULL")
    return cols, values


def _project(
    columns: tuple[str, ...], values: tuple[str, ...], info: TargetTable, stale: bool
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if not stale:
        return columns, values
    # built for an older major version: keep only what the table has now
    kept = [
        (info.columns[c.lower()], v)
        for c, v in zip(columns, values, strict=True)
        if c.lower() in info.columns
    ]
    if len(kept) != len(columns):
        log.warning(
            "table %s changed under a batch; columns %s no longer exist downstream",
            info.name,
            sorted(set(columns) - {c for c, _ in kept}),
        )
    return tuple(c for c, _ in kept), tuple(v for _, v in kept)


def _key(change: Change, info: TargetTable) -> tuple[str, ...]:
    """The key's values in the row before (NULL where it has no such column)."""
    columns = change.before_columns or change.columns
    return _picker(columns, info.key, len(change.before))(change.before)


def _after_key(change: Change, info: TargetTable) -> tuple[str, ...]:
    return _picker(change.columns, info.key, len(change.values))(change.values)


@lru_cache(maxsize=4096)
def _picker(columns: tuple[str, ...], key: tuple[str, ...], values: int) -> Callable[[tuple], tuple]:
    """What takes a key's values from rows of these columns: one per table version's columns
    and key (the worker's `columns` tuple is shared by its rows), where a map of every row's
    columns was made for each change, the daemon's most costly step on sysbench's batches."""
    if values != len(columns):
        raise ValueError(f"{values} values for the {len(columns)} columns {', '.join(columns)}")
    at = {c.lower(): i for i, c in enumerate(columns)}
    where = tuple(at.get(k.lower(), -1) for k in key)
    if -1 in where:
        return lambda row: tuple("NULL" if i < 0 else row[i] for i in where)
    if len(where) == 1:
        (only,) = where
        return lambda row: (row[only],)
    return itemgetter(*where)


def _where_key(change: Change, info: TargetTable) -> str:
    return keys_in(info.key, [_key(change, info)])


def _match(change: Change, info: TargetTable, stale: bool) -> str:
    cols, values = _project(change.before_columns or change.columns, change.before, info, stale)
    return " AND ".join(f"`{k}` <=> {v}" for k, v in zip(cols, values, strict=True))
