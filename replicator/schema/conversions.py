"""A shard's rows downstream converted as its ALTER converted them upstream.

An ALTER converts a table's rows in place, and no row event carries the new values. Where
the downstream column changes as the shard's did, the downstream ALTER converts them alike;
where it does not (other shards keep the old type, or a string holds both), the shard's
rows keep their old values downstream: an ENUM made a SMALLINT reads 'x' there where it
reads 1 upstream, and a later change of the column to SMALLINT downstream refuses them
(live stories seed 20196). With extract columns the shard's rows are converted through a
scratch table holding the column in both types: an UPDATE from one to the other converts
them as the ALTER did (MariaDB copies a field into another the same way in both), and they
are written back by the downstream primary key. A crash in the middle: the journal runs the
interrupted statement again (`on_scratch`) and goes on."""

from __future__ import annotations

import hashlib
from dataclasses import replace

from lattice import Column, ColumnType, Flavor, Index, IndexKind, Table, key, qualified_name, render_table
from lattice import quote_identifier as q

OLD, NEW = "__shardmerge_old", "__shardmerge_new"
SCRATCH = "__shardmerge_convert_"


def on_scratch(statement: str) -> bool:
    """A conversion's CREATE or DROP of its scratch table, which may run again after a
    crash (IF NOT EXISTS, IF EXISTS): the journal's recovery runs it again rather than
    asking the target, which it leaves as it is, whether it ran. (Its INSERT and UPDATEs
    commit with the journal's progress.)"""
    head = statement.lstrip()[:120]
    return SCRATCH in head and head.upper().startswith(("CREATE", "DROP"))


def converted_rows(
    target: str,
    downstream: Table,
    column: str,
    old: ColumnType,
    new: ColumnType,
    where: str,
    flavor: Flavor,
    *,
    source: str | None = None,
) -> tuple[str, ...]:
    """The statements converting the column of the rows `where` selects from `old` to
    `new` (or the value `source`, SQL, they got as one of `old`), through a scratch table
    beside the target; none where the downstream table has no primary key to write them
    back by."""
    primary = downstream.index("PRIMARY")
    there = downstream.column(column)
    if primary is None or there is None:
        return ()
    keys = [downstream.column(p.column) for p in primary.parts]
    if any(k is None for k in keys) or key(column) in {k.key for k in keys}:
        return ()
    schema, table = target.split(".", 1)  # (the scratch is beside it: the coordinator knows no other schema)
    digest = hashlib.sha1(target.encode()).hexdigest()[:16]
    name = f"{schema}.{SCRATCH}{digest}"
    scratch = qualified_name(name)
    bare = [replace(k, default=None, on_update=None, auto_increment=False, comment=None) for k in keys]
    shape = Table(
        table,
        (*bare, Column(OLD, old), Column(NEW, new)),
        (Index("PRIMARY", IndexKind.PRIMARY, tuple(replace(p, length=None) for p in primary.parts)),),
    )
    names = ", ".join(q(k.name) for k in keys)
    on = " AND ".join(f"t.{q(k.name)} = s.{q(k.name)}" for k in keys)
    return (
        f"DROP TABLE IF EXISTS {scratch}",
        render_table(shape, flavor, name=name).replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1),
        f"INSERT INTO {scratch} ({names}, {q(OLD)}) SELECT {names}, {source or q(there.name)} "
        f"FROM {qualified_name(target)} WHERE {where}",
        f"UPDATE {scratch} SET {q(NEW)} = {q(OLD)}",
        f"UPDATE {qualified_name(target)} t JOIN {scratch} s ON {on} SET t.{q(there.name)} = s.{q(NEW)}",
        f"DROP TABLE IF EXISTS {scratch}",
    )
