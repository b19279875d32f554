"""Applying parsed DDL to a Table with the server's own semantics and errors.

The statements we apply already succeeded upstream, so where MySQL and MariaDB
differ we follow the more permissive one: e.g. dropping a column of a multi-column
index shrinks the index (MySQL) where MariaDB refuses, and CONVERT TO CHARACTER SET
widens a VARCHAR that no longer fits into a TEXT type (MySQL). Unnamed indexes and
checks get the name the upstream server would give them.
"""

from __future__ import annotations

import re
from dataclasses import replace

from lattice.charsets import default_collation, mbmaxlen
from lattice.ddl import (
    AddCheck,
    AddColumn,
    AddIndex,
    AlterCheck,
    Change,
    ConvertCharset,
    CreateTable,
    DropCheck,
    DropColumn,
    DropConstraint,
    DropDefault,
    DropIndex,
    DropPrimaryKey,
    Ignored,
    ModifyColumn,
    Position,
    RenameColumn,
    RenameIndex,
    RenameTo,
    SetDefault,
    SetOptions,
)
from lattice.definitions import CheckSpec, ColumnSpec, IndexSpec, column_checks, settle_column
from lattice.literals import DefaultError, canonical_default
from lattice.model import (
    NULL_DEFAULT,
    PRIMARY,
    TEXT_CAPACITY,
    Check,
    Column,
    Index,
    IndexKind,
    IndexPart,
    Table,
    TableOptions,
    key,
)
from lattice.sqltext import canonical_expression, rename_in_expression


class SchemaError(ValueError):
    """The statement cannot apply to the table as we know it, with MySQL's code."""

    def __init__(self, code: int, message: str, change: Change | None = None):
        self.code = code
        self.message = message
        self.change = change
        where = f" (in `{change.text}`)" if change is not None and change.text else ""
        super().__init__(f"ERROR {code}: {message}{where}")


class _Draft:
    """A mutable table while a statement applies; frozen into a Table at the end."""

    def __init__(self, table: Table, upstream: str):
        self.name = table.name
        self.columns: list[Column] = list(table.columns)
        self.indexes: list[Index] = list(table.indexes)
        self.checks: list[Check] = list(table.checks)
        self.options = table.options
        self.upstream = upstream

    # lookups: names are case-insensitive
    def col_pos(self, name: str) -> int | None:
        return _position_of(self.columns, name)

    def require_col(self, name: str, change: Change | None) -> int:
        i = self.col_pos(name)
        if i is None:
            raise SchemaError(1054, f"Unknown column '{name}' in '{self.name}'", change)
        return i

    def index_pos(self, name: str) -> int | None:
        return _position_of(self.indexes, name)

    def check_pos(self, name: str) -> int | None:
        return _position_of(self.checks, name)

    def freeze(self) -> Table:
        return Table(self.name, tuple(self.columns), tuple(self.indexes), tuple(self.checks), self.options)


def _position_of(items: list, name: str) -> int | None:
    k = key(name)
    return next((i for i, item in enumerate(items) if item.key == k), None)


def build_table(statement: CreateTable, *, upstream: str = "mariadb") -> Table:
    """The table a CREATE TABLE statement creates."""
    options = statement.options
    charset, collation = options.charset, options.collation
    if charset and not collation:
        collation = default_collation(charset, upstream)
    table_options = TableOptions(
        engine=options.engine, charset=charset, collation=collation, comment=options.comment
    )
    draft = _Draft(Table(statement.name.name, (), (), (), table_options), upstream)
    for spec in statement.columns:
        _add_column(draft, spec, None, None)
    for item in statement.constraints:
        if isinstance(item, IndexSpec):
            _add_index(draft, item, None)
        else:
            _add_check(draft, item, None)
    return _validated(draft, None)


def apply_changes(
    table: Table, changes: tuple[Change, ...] | list[Change], *, upstream: str = "mariadb"
) -> Table:
    """The table after an ALTER TABLE's changes, applied in order as the server does."""
    draft = _Draft(table, upstream)
    last: Change | None = None
    for change in changes:
        last = change
        _apply_one(draft, change)
    return _validated(draft, last)


def _apply_one(draft: _Draft, change: Change) -> None:
    match change:
        case AddColumn(spec=spec, position=position, if_not_exists=if_not_exists):
            if if_not_exists and draft.col_pos(spec.column.name) is not None:
                return
            _add_column(draft, spec, position, change)
        case DropColumn(name=name, if_exists=if_exists):
            if draft.col_pos(name) is None and if_exists:
                return
            _drop_column(draft, name, change)
        case ModifyColumn(old_name=old, spec=spec, position=position, if_exists=if_exists):
            if draft.col_pos(old) is None and if_exists:
                return
            _modify_column(draft, old, spec, position, change)
        case RenameColumn(old_name=old, new_name=new):
            i = draft.require_col(old, change)
            if key(old) != key(new) and draft.col_pos(new) is not None:
                raise SchemaError(1060, f"Duplicate column name '{new}'", change)
            draft.columns[i] = replace(draft.columns[i], name=new)
            _rename_references(draft, old, new)
        case SetDefault(column=name, value=value):
            i = draft.require_col(name, change)
            column = draft.columns[i]
            try:
                default = canonical_default(value, column.type)
            except DefaultError as exc:
                raise SchemaError(1067, f"Invalid default value for '{name}' ({exc})", change) from exc
            if default.is_null and not column.nullable:
                raise SchemaError(1067, f"Invalid default value for '{name}'", change)
            draft.columns[i] = replace(column, default=default)
        case DropDefault(column=name):
            i = draft.require_col(name, change)
            column = draft.columns[i]
            draft.columns[i] = replace(column, default=NULL_DEFAULT if column.nullable else None)
        case AddIndex(spec=spec, if_not_exists=if_not_exists):
            if if_not_exists and spec.name and draft.index_pos(spec.name) is not None:
                return
            _add_index(draft, spec, change)
        case DropIndex(name=name, if_exists=if_exists):
            i = draft.index_pos(name)
            if i is None:
                if if_exists:
                    return
                raise SchemaError(1091, f"Can't DROP INDEX `{name}`; check that it exists", change)
            del draft.indexes[i]
        case DropPrimaryKey():
            i = draft.index_pos(PRIMARY)
            if i is None:
                raise SchemaError(1091, "Can't DROP INDEX `PRIMARY`; check that it exists", change)
            del draft.indexes[i]
        case RenameIndex(old_name=old, new_name=new):
            i = draft.index_pos(old)
            if i is None:
                raise SchemaError(1176, f"Key '{old}' doesn't exist in table '{draft.name}'", change)
            if key(old) != key(new) and draft.index_pos(new) is not None:
                raise SchemaError(1061, f"Duplicate key name '{new}'", change)
            draft.indexes[i] = replace(draft.indexes[i], name=new)
        case AddCheck(spec=spec):
            _add_check(draft, spec, change)
        case DropCheck(name=name, if_exists=if_exists):
            i = draft.check_pos(name)
            if i is None:
                if if_exists:
                    return
                raise SchemaError(3821, f"Check constraint '{name}' is not found in the table", change)
            del draft.checks[i]
        case DropConstraint(name=name, if_exists=if_exists):
            i = draft.check_pos(name)
            if i is not None:
                del draft.checks[i]
                return
            j = draft.index_pos(name)
            if j is not None and draft.indexes[j].kind in (IndexKind.UNIQUE, IndexKind.PRIMARY):
                del draft.indexes[j]
                return
            if not if_exists:
                raise SchemaError(1091, f"Can't DROP CONSTRAINT `{name}`; check that it exists", change)
        case AlterCheck(name=name, enforced=enforced):
            i = draft.check_pos(name)
            if i is None:
                raise SchemaError(3821, f"Check constraint '{name}' is not found in the table", change)
            draft.checks[i] = replace(draft.checks[i], enforced=enforced)
        case SetOptions(options=spec):
            options = draft.options
            charset = spec.charset or options.charset
            collation = spec.collation
            if collation is None:
                collation = (
                    default_collation(spec.charset, draft.upstream)
                    if spec.charset and spec.charset != options.charset
                    else options.collation
                )
            draft.options = TableOptions(
                engine=spec.engine or options.engine,
                charset=charset,
                collation=collation,
                comment=spec.comment if spec.comment is not None else options.comment,
            )
        case ConvertCharset(charset=charset, collation=collation):
            _convert_charset(draft, charset, collation or default_collation(charset, draft.upstream), change)
        case RenameTo(new_name=new_name):
            draft.name = new_name.name
        case Ignored():
            pass
        case _:
            raise SchemaError(0, f"cannot apply {type(change).__name__}", change)


# -- columns ---------------------------------------------------------------------------
def _settle(draft: _Draft, spec: ColumnSpec, change: Change | None) -> Column:
    try:
        return settle_column(spec, draft.options.charset, draft.options.collation, draft.upstream)
    except ValueError as exc:
        raise SchemaError(1067, str(exc), change) from exc


def _insert_at(draft: _Draft, column: Column, position: Position | None, change: Change | None) -> None:
    if position is None:
        draft.columns.append(column)
    elif position.first:
        draft.columns.insert(0, column)
    else:
        assert position.after is not None
        i = draft.require_col(position.after, change)
        draft.columns.insert(i + 1, column)


def _add_column(draft: _Draft, spec: ColumnSpec, position: Position | None, change: Change | None) -> None:
    column = _settle(draft, spec, change)
    if draft.col_pos(column.name) is not None:
        raise SchemaError(1060, f"Duplicate column name '{column.name}'", change)
    _insert_at(draft, column, position, change)
    _inline_constraints(draft, spec, column, change)


def _inline_constraints(draft: _Draft, spec: ColumnSpec, column: Column, change: Change | None) -> None:
    part = (IndexPart(column.name),)
    if spec.primary_key:
        _add_index(draft, IndexSpec(PRIMARY, IndexKind.PRIMARY, part), change)
    if spec.unique:
        _add_index(draft, IndexSpec(None, IndexKind.UNIQUE, part), change)
    for inline in column_checks(spec):
        # MariaDB names a column-level check after its column; MySQL numbers it.
        name = inline.name or (column.name if draft.upstream == "mariadb" else None)
        _add_check(draft, CheckSpec(name, inline.expression, inline.enforced), change)


def _drop_column(draft: _Draft, name: str, change: Change) -> None:
    i = draft.col_pos(name)
    if i is None:
        raise SchemaError(1091, f"Can't DROP COLUMN `{name}`; check that it exists", change)
    k = key(name)
    for column in draft.columns:
        if (
            column.generated
            and k in canonical_expression(column.generated.expression).columns
            and column.key != k
        ):
            raise SchemaError(1054, f"Unknown column '{name}' in 'GENERATED ALWAYS AS'", change)
    del draft.columns[i]
    indexes = []
    for index in draft.indexes:
        parts = tuple(p for p in index.parts if key(p.column) != k)
        if parts:
            indexes.append(replace(index, parts=parts) if parts != index.parts else index)
    draft.indexes = indexes
    checks = []
    for check in draft.checks:
        if k in check.columns:
            if check.columns - {k}:
                raise SchemaError(1054, f"Unknown column '{name}' in 'CHECK'", change)
            continue  # a check on the dropped column alone goes with it
        checks.append(check)
    draft.checks = checks


def _modify_column(
    draft: _Draft, old: str, spec: ColumnSpec, position: Position | None, change: Change
) -> None:
    i = draft.require_col(old, change)
    column = _settle(draft, spec, change)
    if key(column.name) != key(old) and draft.col_pos(column.name) is not None:
        raise SchemaError(1060, f"Duplicate column name '{column.name}'", change)
    if position is None:
        draft.columns[i] = column
    else:
        del draft.columns[i]
        _insert_at(draft, column, position, change)
    if key(column.name) != key(old) or column.name != old:
        _rename_references(draft, old, column.name)
    if any(
        draft.indexes[j].kind == IndexKind.PRIMARY and key(column.name) in draft.indexes[j].columns
        for j in range(len(draft.indexes))
    ):
        _force_not_null(draft, column.name)
    _inline_constraints(draft, spec, column, change)


def _rename_references(draft: _Draft, old: str, new: str) -> None:
    k = key(old)
    draft.indexes = [
        replace(ix, parts=tuple(replace(p, column=new) if key(p.column) == k else p for p in ix.parts))
        if k in ix.columns
        else ix
        for ix in draft.indexes
    ]
    draft.checks = [_renamed_check(ch, old, new) if k in ch.columns else ch for ch in draft.checks]
    for j, column in enumerate(draft.columns):
        if column.generated and k in canonical_expression(column.generated.expression).columns:
            expression = rename_in_expression(column.generated.expression, old, new)
            draft.columns[j] = replace(column, generated=replace(column.generated, expression=expression))


def _renamed_check(check: Check, old: str, new: str) -> Check:
    expression = canonical_expression(rename_in_expression(check.expression, old, new))
    return replace(check, expression=expression.sql, columns=expression.columns)


def _force_not_null(draft: _Draft, name: str) -> None:
    """Key parts of a PRIMARY KEY are NOT NULL; the server makes them so silently."""
    i = draft.col_pos(name)
    if i is None:
        return
    column = draft.columns[i]
    if column.nullable:
        default = None if column.default is None or column.default.is_null else column.default
        draft.columns[i] = replace(column, nullable=False, default=default)


def _convert_charset(draft: _Draft, charset: str, collation: str, change: Change) -> None:
    new_mb = mbmaxlen(charset)
    columns = []
    for column in draft.columns:
        ctype = column.type
        if ctype.is_character:
            old_mb = mbmaxlen(ctype.charset)
            name, length = ctype.name, ctype.length
            if name in TEXT_CAPACITY:
                # keep room for as many characters as before
                needed = TEXT_CAPACITY[name] // old_mb * new_mb
                name = _smallest_text(needed)
            elif name == "varchar" and length is not None and length * new_mb > 65535:
                name, length = _smallest_text(length * new_mb), None
            ctype = replace(ctype, name=name, length=length, charset=charset, collation=collation)
            column = replace(column, type=ctype)
        columns.append(column)
    draft.columns = columns
    draft.options = replace(draft.options, charset=charset, collation=collation)


def _smallest_text(needed: int) -> str:
    for name, cap in TEXT_CAPACITY.items():
        if needed <= cap:
            return name
    return "longtext"


# -- indexes and checks ------------------------------------------------------------------
def _add_index(draft: _Draft, spec: IndexSpec, change: Change | None) -> None:
    kind = spec.kind
    name = spec.name
    if kind == IndexKind.PRIMARY or (name is not None and key(name) == key(PRIMARY)):
        if draft.index_pos(PRIMARY) is not None:
            raise SchemaError(1068, "Multiple primary key defined", change)
        name, kind = PRIMARY, IndexKind.PRIMARY
    parts = []
    for part in spec.parts:
        if part.column.startswith("("):
            parts.append(part)
            continue
        i = draft.col_pos(part.column)
        if i is None:
            raise SchemaError(1072, f"Key column '{part.column}' doesn't exist in table", change)
        parts.append(replace(part, column=draft.columns[i].name))
    if name is None:
        name = _index_name(draft, parts)
    elif draft.index_pos(name) is not None:
        raise SchemaError(1061, f"Duplicate key name '{name}'", change)
    draft.indexes.append(Index(name, kind, tuple(parts)))
    if kind == IndexKind.PRIMARY:
        for part in parts:
            _force_not_null(draft, part.column)


def _index_name(draft: _Draft, parts: list[IndexPart]) -> str:
    base = "functional_index" if parts[0].column.startswith("(") else parts[0].column
    if draft.index_pos(base) is None and key(base) != key(PRIMARY):
        return base
    n = 2
    while draft.index_pos(f"{base}_{n}") is not None:
        n += 1
    return f"{base}_{n}"


def _add_check(draft: _Draft, spec: CheckSpec, change: Change | None) -> None:
    expression = canonical_expression(spec.expression)
    for column in expression.columns:
        if draft.col_pos(column) is None:
            raise SchemaError(1054, f"Unknown column '{column}' in 'CHECK'", change)
    name = spec.name or _check_name(draft)
    if draft.check_pos(name) is not None:
        raise SchemaError(3822, f"Duplicate check constraint name '{name}'", change)
    draft.checks.append(Check(name, expression.sql, spec.enforced, expression.columns))


def _check_name(draft: _Draft) -> str:
    if draft.upstream == "mariadb":
        n = 1
        while draft.check_pos(f"CONSTRAINT_{n}") is not None:
            n += 1
        return f"CONSTRAINT_{n}"
    pattern = re.compile(re.escape(draft.name.lower()) + r"_chk_(\d+)$")
    numbers = [int(m.group(1)) for ch in draft.checks if (m := pattern.match(ch.name.lower()))]
    return f"{draft.name}_chk_{max(numbers, default=0) + 1}"


_ONE_AUTO_COLUMN = (
    "Incorrect table definition; there can be only one auto column and it must be defined as a key"
)


# -- whole-table rules ---------------------------------------------------------------------
def _validated(draft: _Draft, change: Change | None) -> Table:
    if not draft.columns:
        raise SchemaError(
            1090, "You can't delete all columns with ALTER TABLE; use DROP TABLE instead", change
        )
    auto = [c for c in draft.columns if c.auto_increment]
    if auto:
        leading = {ix.parts[0].column.lower() for ix in draft.indexes if ix.parts}
        if len(auto) > 1 or auto[0].key not in leading:
            raise SchemaError(1075, _ONE_AUTO_COLUMN, change)
    names = {c.key for c in draft.columns}
    for column in draft.columns:
        if column.generated:
            missing = canonical_expression(column.generated.expression).columns - names
            if missing:
                raise SchemaError(
                    1054, f"Unknown column '{sorted(missing)[0]}' in 'GENERATED ALWAYS AS'", change
                )
    return draft.freeze()
