"""Tables as JSON-ready data and back. A joined table carries what SQL cannot say
(which columns are partial), so the coordinator persists tables this way."""

from __future__ import annotations

from typing import Any

from lattice.model import (
    Check,
    Column,
    ColumnType,
    Default,
    Family,
    Generated,
    Index,
    IndexKind,
    IndexPart,
    Table,
    TableOptions,
)

# Serialized tables by identity: a coordinator saves the same immutable tables (a
# shard's accepted and current schema, the target) after every decision. The table
# is kept with its data so its id is not reused while cached.
_SAVED: dict[int, tuple[Table, dict[str, Any]]] = {}
_SAVED_MAX = 8192


def table_to_data(table: Table) -> dict[str, Any]:
    """A JSON-ready form of the table (shared: callers must not change it)."""
    saved = _SAVED.get(id(table))
    if saved is not None and saved[0] is table:
        return saved[1]
    if len(_SAVED) >= _SAVED_MAX:
        _SAVED.clear()
    data = _table_data(table)
    _SAVED[id(table)] = (table, data)
    return data


def _table_data(table: Table) -> dict[str, Any]:
    return {
        "name": table.name,
        "columns": [_column(c) for c in table.columns],
        "indexes": [
            {
                "name": ix.name,
                "kind": ix.kind.value,
                "parts": [[p.column, p.length, p.descending] for p in ix.parts],
                **({"comment": ix.comment} if ix.comment else {}),
                **({"hashed": True} if ix.hashed else {}),
                **({"generated": True} if ix.generated else {}),
            }
            for ix in table.indexes
        ],
        "checks": [
            {
                "name": ch.name,
                "expression": ch.expression,
                "enforced": ch.enforced,
                "columns": sorted(ch.columns),
                **({"column": ch.column} if ch.column else {}),
            }
            for ch in table.checks
        ],
        "options": _drop_none(vars(table.options)),
        **({"foreign_keys": list(table.foreign_keys)} if table.foreign_keys else {}),
    }


def table_from_data(data: dict[str, Any]) -> Table:
    return Table(
        data["name"],
        tuple(_column_from(c) for c in data["columns"]),
        tuple(
            Index(
                ix["name"],
                IndexKind(ix["kind"]),
                tuple(IndexPart(p[0], p[1], p[2]) for p in ix["parts"]),
                ix.get("comment"),
                ix.get("hashed", False),
                ix.get("generated", False),
            )
            for ix in data["indexes"]
        ),
        tuple(
            Check(ch["name"], ch["expression"], ch["enforced"], frozenset(ch["columns"]), ch.get("column"))
            for ch in data["checks"]
        ),
        TableOptions(**data.get("options", {})),
        tuple(data.get("foreign_keys", ())),
    )


def _empty(value: Any) -> bool:
    # identity, not equality: 0 is a real value (fsp 0) although 0 == False
    return value is None or value is False or (isinstance(value, (tuple, str)) and not value)


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if not _empty(v)}


_SAVED_COLUMNS: dict[int, tuple[Column, dict[str, Any]]] = {}


def _column(c: Column) -> dict[str, Any]:
    """As `table_to_data`, by identity: a changed table shares most column objects."""
    saved = _SAVED_COLUMNS.get(id(c))
    if saved is not None and saved[0] is c:
        return saved[1]
    if len(_SAVED_COLUMNS) >= _SAVED_MAX * 16:
        _SAVED_COLUMNS.clear()
    data = _column_data(c)
    _SAVED_COLUMNS[id(c)] = (c, data)
    return data


def _column_data(c: Column) -> dict[str, Any]:
    t = _drop_none(vars(c.type))
    t["family"] = c.type.family.value
    if c.type.members:
        t["members"] = list(c.type.members)
    out: dict[str, Any] = {"name": c.name, "type": t, "nullable": c.nullable}
    if c.default is not None:
        out["default"] = [c.default.sql, c.default.is_expression]
    if c.generated is not None:
        out["generated"] = [c.generated.expression, c.generated.stored]
    for attr in ("on_update", "auto_increment", "comment", "partial"):
        value = getattr(c, attr)
        if not _empty(value):
            out[attr] = value
    return out


def _column_from(data: dict[str, Any]) -> Column:
    t = dict(data["type"])
    t["family"] = Family(t["family"])
    t["members"] = tuple(t.get("members", ()))
    default = data.get("default")
    generated = data.get("generated")
    return Column(
        name=data["name"],
        type=ColumnType(**t),
        nullable=data["nullable"],
        default=Default(default[0], default[1]) if default else None,
        on_update=data.get("on_update"),
        auto_increment=data.get("auto_increment", False),
        generated=Generated(generated[0], generated[1]) if generated else None,
        comment=data.get("comment"),
        partial=data.get("partial", False),
    )
