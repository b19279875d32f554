"""Turning model objects into SQL for a downstream flavor.

`materialize` settles what the lattice leaves open in a joined table (filler
defaults of partial columns) and what a flavor cannot express (MariaDB has no NOT
ENFORCED checks; TiDB allows no TEXT default), so the table a flavor will really
hold can be compared with what the server reports. MySQL 8 takes a TEXT default
only written as an expression, `DEFAULT ('')`, and reports it as the literal: that
is rendering (`render_default`), not the table.
"""

from __future__ import annotations

from dataclasses import replace

from lattice.fillers import filler_default
from lattice.flavor import Flavor
from lattice.literals import NOW_FAMILIES, is_now, now_sql
from lattice.model import (
    NULL_DEFAULT,
    Check,
    Column,
    ColumnType,
    Default,
    Family,
    Index,
    IndexKind,
    Table,
)
from lattice.sqltext import quote_identifier, quote_string
from lattice.typetext import charset_name, collation_name, render_type

_NO_LITERAL_DEFAULT = (Family.JSON, Family.SPATIAL)


def _blob_like(ctype: ColumnType) -> bool:
    return ctype.is_text_kind or ctype.family in _NO_LITERAL_DEFAULT


def materialize_column(column: Column, flavor: Flavor | str) -> Column:
    flavor = Flavor.parse(flavor)
    default = column.default
    nullable = column.nullable
    if column.generated is None:
        if column.partial and default is None:
            default = filler_default(column.type)
            if default is None:
                nullable, default = True, NULL_DEFAULT
        blob = default is not None and not default.is_null and _blob_like(column.type)
        if blob and flavor.rules.blob_default == "none":
            # TiDB accepts no default on BLOB/TEXT/JSON. A partial column falls back
            # to nullable, which accepts every row the default would have filled.
            if column.partial or nullable:
                nullable, default = True, NULL_DEFAULT
            else:
                default = None
    on_update = column.on_update
    fsp = column.type.fsp
    if fsp and column.type.family in (Family.DATETIME, Family.TIMESTAMP):
        # CURRENT_TIMESTAMP written without a precision takes the column's: a join may
        # have widened the column under a shard's `DEFAULT current_timestamp()`
        if default is not None and default.sql == now_sql(0):
            default = Default(now_sql(fsp), is_expression=True)
        if on_update == now_sql(0):
            on_update = now_sql(fsp)
    return replace(column, default=default, nullable=nullable, on_update=on_update, partial=False)


def materialize(table: Table, flavor: Flavor | str) -> Table:
    flavor = Flavor.parse(flavor)
    columns = tuple(materialize_column(c, flavor) for c in table.columns)
    checks = table.checks
    if not flavor.rules.keeps_unenforced_checks:
        checks = tuple(c for c in checks if c.enforced)
    return replace(table, columns=columns, checks=checks)


# -- pieces ------------------------------------------------------------------------------
def render_default(default: Default) -> str:
    if default.is_expression and not default.sql.startswith("current_timestamp"):
        return f"({default.sql})"
    return default.sql


def render_column_default(column: Column, flavor: Flavor | str = Flavor.MARIADB) -> str:
    """The column's default as written after DEFAULT: MySQL 8 takes a BLOB/TEXT/JSON
    default only as an expression."""
    default = column.default
    assert default is not None
    blob = not default.is_null and _blob_like(column.type)
    if blob and Flavor.parse(flavor).rules.blob_default == "expression":
        default = Default(default.sql, is_expression=True)
    if is_now(default) and column.type.family not in NOW_FAMILIES:
        # (MySQL 8 takes it there only as an expression; MariaDB either way)
        return f"({default.sql})"
    return render_default(default)


def render_column(column: Column, flavor: Flavor | str = Flavor.MARIADB) -> str:
    """The column definition as written in CREATE TABLE or ADD/MODIFY COLUMN."""
    flavor = Flavor.parse(flavor)
    parts = [quote_identifier(column.name), render_type(column.type, flavor)]
    if column.generated is not None:
        kind = "STORED" if column.generated.stored else "VIRTUAL"
        parts.append(f"GENERATED ALWAYS AS ({column.generated.expression}) {kind}")
    if column.generated is None:
        parts.append("NULL" if column.nullable else "NOT NULL")
    elif not column.nullable and flavor.rules.not_null_on_generated:
        parts.append("NOT NULL")
    if column.default is not None and column.generated is None:
        parts.append("DEFAULT " + render_column_default(column, flavor))
    if column.on_update:
        parts.append("ON UPDATE " + column.on_update)
    if column.auto_increment:
        parts.append("AUTO_INCREMENT")
    if column.comment:
        parts.append("COMMENT " + quote_string(column.comment))
    return " ".join(parts)


def render_index_parts(index: Index) -> str:
    parts = []
    for part in index.parts:
        text = part.column if part.column.startswith("(") else quote_identifier(part.column)
        if part.length is not None:
            text += f"({part.length})"
        if part.descending:
            text += " DESC"
        parts.append(text)
    return "(" + ",".join(parts) + ")"


_INDEX_KEYWORD = {
    IndexKind.UNIQUE: "UNIQUE KEY",
    IndexKind.PLAIN: "KEY",
    IndexKind.FULLTEXT: "FULLTEXT KEY",
    IndexKind.SPATIAL: "SPATIAL KEY",
}


def render_index(index: Index) -> str:
    """An index as written inside CREATE TABLE or after ALTER TABLE ... ADD."""
    comment = f" COMMENT {quote_string(index.comment)}" if index.comment else ""
    if index.kind == IndexKind.PRIMARY:
        return "PRIMARY KEY " + render_index_parts(index) + comment
    return f"{_INDEX_KEYWORD[index.kind]} {quote_identifier(index.name)} {render_index_parts(index)}{comment}"


def render_check(check: Check, flavor: Flavor | str = Flavor.MARIADB) -> str:
    flavor = Flavor.parse(flavor)
    text = f"CONSTRAINT {quote_identifier(check.name)} CHECK ({check.expression})"
    if not check.enforced and flavor.rules.keeps_unenforced_checks:
        text += " NOT ENFORCED"
    return text


def render_table_options(table: Table, flavor: Flavor) -> str:
    options = table.options
    parts = []
    if options.engine:
        parts.append(f"ENGINE={options.engine}")
    if options.charset:
        parts.append(f"DEFAULT CHARSET={charset_name(options.charset, flavor)}")
    if options.collation:
        parts.append(f"COLLATE={collation_name(options.collation, flavor)}")
    if options.comment:
        parts.append("COMMENT=" + quote_string(options.comment))
    return " ".join(parts)


def qualified_name(name: str) -> str:
    """`db.tbl` or `tbl` as quoted SQL."""
    return ".".join(quote_identifier(p) for p in name.split(".", 1))


def render_table(table: Table, flavor: Flavor | str = Flavor.MARIADB, *, name: str | None = None) -> str:
    """The CREATE TABLE statement of the table as `flavor` will hold it (see
    `materialize`), named `name` (`db.tbl` or `tbl`) or else the table's own name."""
    flavor = Flavor.parse(flavor)
    table = materialize(table, flavor)
    lines = [render_column(c, flavor) for c in table.columns]
    ordered = sorted(table.indexes, key=lambda ix: ix.kind != IndexKind.PRIMARY)
    lines += [render_index(ix) for ix in ordered]
    lines += [render_check(ch, flavor) for ch in table.checks]
    body = ",\n  ".join(lines)
    options = render_table_options(table, flavor)
    return f"CREATE TABLE {qualified_name(name or table.name)} (\n  {body}\n)" + (
        f" {options}" if options else ""
    )
