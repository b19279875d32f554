"""A shard group as a matrix, for the live view and scripts: one row a shard, one column a
column of the joined (downstream) table, each cell what the shard holds of that column.

It compares each shard's table with the join its coordinator made and reads the renames
under way from the group's view (`GroupView.renames`): nothing of the join is worked out
again here. A cell is one of:
    has      the shard has the column, of the joined type
    type     the shard has it under another type (`detail`: which)
    renamed  the shard holds it under another name, a rename under way (`detail`: which)
    lacks    the shard has no such column (the join holds it for the others)
    extract  shardmerge fills it (source, schema or table): no shard has it
    unknown  the shard's schema is not known (a DDL that could not be followed)
"""

from __future__ import annotations

from typing import Any

from lattice import Column, Table, key, render_type
from replicator.schema.group import GroupView, RenameView
from replicator.shard_id import ShardId


def shard_matrix(view: GroupView) -> dict[str, Any]:
    """`columns`: the joined table's columns in order, each with its state in the group (as
    show-ddl-state says it); `shards`: each shard's cells in that order, and the columns it
    has that the join lacks (`only_here`: a blocked shard's table may)."""
    joined = view.target
    if joined is None:
        return {"columns": [], "shards": {}}
    extract = frozenset(key(n) for n in view.extract_columns.values())
    columns = [
        {"name": c.name, "type": render_type(c.type), "state": view.columns.get(c.key, "")}
        for c in joined.columns
    ]
    shards = {}
    for shard, state in sorted(view.shards.items()):
        table = state.current or state.accepted
        shards[str(shard)] = {
            "cells": [_cell(shard, table, c, extract, view.renames) for c in joined.columns],
            "only_here": [c.name for c in table.columns if joined.column(c.name) is None] if table else [],
        }
    return {"columns": columns, "shards": shards}


def _cell(
    shard: ShardId,
    table: Table | None,
    column: Column,
    extract: frozenset[str],
    renames: tuple[RenameView, ...],
) -> dict[str, str]:
    if column.key in extract:
        return {"state": "extract", "detail": "filled by shardmerge"}
    if table is None:
        return {"state": "unknown", "detail": "its schema is not known"}
    mine = table.column(column.name)
    if mine is not None:
        if mine.type != column.type:
            return {"state": "type", "detail": f"{render_type(mine.type)} here"}
        if mine.nullable != column.nullable:
            return {"state": "has", "detail": "NULL here" if mine.nullable else "NOT NULL here"}
        return {"state": "has", "detail": ""}
    for r in renames:
        # (a shard that made the rename holds the old name's values under the new name; one
        # that has not yet holds the new name's under the old)
        made = shard in r.made
        if made and key(r.old) == column.key and table.column(r.new) is not None:
            return {"state": "renamed", "detail": f"as {r.new} (renamed here)"}
        if not made and key(r.new) == column.key and table.column(r.old) is not None:
            return {"state": "renamed", "detail": f"as {r.old} (not renamed here yet)"}
    return {"state": "lacks", "detail": ""}
