"""Applying parsed DDL to a Table with the server's own semantics and errors.

The statements we apply already succeeded upstream, so where MySQL and MariaDB
differ we follow the more permissive one: e.g. dropping a column of a multi-column
index shrinks the index (MySQL) where MariaDB refuses, and CONVERT TO CHARACTER SET
widens a VARCHAR that no longer fits into a TEXT type (MySQL). Unnamed indexes and
checks get the name the upstream server would give them.

An ALTER TABLE is not a sequence of little ALTERs: the server builds the new table
from the old one in one go. Its column specs name the columns as they were before
the statement (so `CHANGE a b ..., CHANGE b a ...` swaps two columns), FIRST/AFTER and
new keys name the columns as they are after it, and the existing keys, checks and
generated columns follow all renames and drops at once. `apply_changes` keeps that
order; where the server would refuse a spec that only makes sense read sequentially
(MODIFY of a column added earlier in the statement), we accept it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from lattice.charsets import default_collation, mbmaxlen
from lattice.ddl import (
    AddCheck,
    AddColumn,
    AddForeignKey,
    AddIndex,
    AlterCheck,
    Change,
    ConvertCharset,
    CreateTable,
    DropCheck,
    DropColumn,
    DropConstraint,
    DropDefault,
    DropForeignKey,
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
    parse_strict,
)
from lattice.definitions import (
    DATABASE_CHARSET,
    CheckSpec,
    ColumnSpec,
    ForeignKeySpec,
    IndexSpec,
    OptionsSpec,
    as_binary_type,
    column_checks,
    settle_column,
)
from lattice.flavor import Flavor
from lattice.limits import max_key_bytes, settled_prefixes, takes_prefix
from lattice.literals import DefaultError, canonical_default
from lattice.model import (
    NULL_DEFAULT,
    PRIMARY,
    TEXT_CAPACITY,
    Check,
    Column,
    Family,
    Index,
    IndexKind,
    IndexPart,
    Table,
    TableOptions,
    foreign_key_number,
    key,
    numbered_foreign_key,
    renamed_foreign_key,
)
from lattice.sqltext import DDLSyntaxError, canonical_expression, rename_columns_in_expression


class SchemaError(ValueError):
    """The statement cannot apply to the table as we know it, with MySQL's code."""

    def __init__(self, code: int, message: str, change: Change | None = None):
        self.code = code
        self.message = message
        self.change = change
        where = f" (in `{change.text}`)" if change is not None and change.text else ""
        super().__init__(f"ERROR {code}: {message}{where}")


@dataclass(eq=False)
class _Slot:
    """A column while a statement applies."""

    column: Column
    origin: str | None  # its (lower-cased) name before the statement; None: added by it
    # The statement gave its whole definition, so its expressions already name the
    # columns of the new table and CONVERT TO treats it as new.
    restated: bool = False
    change: Change | None = None  # the last change that named it, for messages


@dataclass(frozen=True)
class _Addition:
    """A key or check a statement adds, in the order the server names them."""

    offset: int
    item: IndexSpec | CheckSpec
    change: Change | None = None
    if_not_exists: bool = False
    # An index the server makes for a foreign key: dropped when another key of the
    # statement or table starts with the same columns.
    for_foreign_key: bool = False


class _Draft:
    """A mutable table while a statement applies; frozen into a Table at the end."""

    def __init__(self, table: Table, upstream: Flavor | str):
        self.name = table.name
        self.slots: list[_Slot] = [_Slot(c, c.key) for c in table.columns]
        self.indexes: list[Index] = list(table.indexes)
        self.checks: list[Check] = list(table.checks)
        self.options = table.options
        self.upstream = Flavor.parse(upstream)
        self.rules = self.upstream.rules  # (of the server the statement ran on)
        self.dropped: set[str] = set()  # names (before the statement) of dropped columns
        self.new_generated: set[str] = set()  # keys of the foreign keys' indexes it adds
        self.foreign_keys: list[str] = list(table.foreign_keys)

    @property
    def columns(self) -> list[Column]:
        return [slot.column for slot in self.slots]

    # lookups: names are case-insensitive
    def col_pos(self, name: str) -> int | None:
        """The column called `name` now."""
        k = key(name)
        return next((i for i, slot in enumerate(self.slots) if slot.column.key == k), None)

    def spec_pos(self, name: str) -> int | None:
        """The column an ALTER spec names: the server reads the name in the table before
        the statement; MariaDB also finds a column added earlier in it, so fall back to
        the names as they are now."""
        k = key(name)
        i = next((i for i, slot in enumerate(self.slots) if slot.origin == k), None)
        return i if i is not None else self.col_pos(name)

    def require_spec_col(self, name: str, change: Change | None) -> int:
        i = self.spec_pos(name)
        if i is None:
            raise SchemaError(1054, f"Unknown column '{name}' in '{self.name}'", change)
        return i

    def index_pos(self, name: str) -> int | None:
        return _position_of(self.indexes, name)

    def check_pos(self, name: str) -> int | None:
        return _position_of(self.checks, name)

    def freeze(self) -> Table:
        checks = self._checks_in_order()
        return Table(
            self.name,
            tuple(self.columns),
            tuple(self.indexes),
            checks,
            self.options,
            tuple(self.foreign_keys),
        )

    def _checks_in_order(self) -> tuple[Check, ...]:
        """A column's own checks in the order of the columns (SHOW CREATE TABLE writes them
        in their definitions), then the table's."""
        position = {c.key: i for i, c in enumerate(self.columns)}
        owned = sorted((c for c in self.checks if c.column in position), key=lambda c: position[c.column])
        return (*owned, *(c for c in self.checks if c.column not in position))


def _position_of(items: list, name: str) -> int | None:
    k = key(name)
    return next((i for i, item in enumerate(items) if item.key == k), None)


def build_table(
    statement: CreateTable,
    *,
    upstream: Flavor | str = Flavor.MARIADB,
    schema_charset: tuple[str, str | None] | None = None,
    shown: bool = False,
) -> Table:
    """The table a CREATE TABLE statement creates. `schema_charset`: its database's
    default character set and collation, which a table that names none takes. `shown`:
    the text is the server's SHOW CREATE TABLE, which writes every index the table has,
    so a foreign key makes none (it may have lost its own to a DROP INDEX made with
    foreign_key_checks off)."""
    options = statement.options
    charset, collation = options.charset, options.collation
    if charset == DATABASE_CHARSET:
        charset = None  # what a table naming none has
    if charset is None and schema_charset is not None:
        charset, collation = schema_charset[0], options.collation or schema_charset[1]
    if charset and not collation:
        collation = default_collation(charset, upstream)
    table_options = TableOptions(
        engine=options.engine, charset=charset, collation=collation, comment=options.comment or None
    )
    draft = _Draft(Table(statement.name.name, (), (), (), table_options), upstream)
    additions: list[_Addition] = []
    for spec in statement.columns:
        column = _settle(draft, spec, None)
        if draft.col_pos(column.name) is not None:
            raise SchemaError(1060, f"Duplicate column name '{column.name}'")
        draft.slots.append(_Slot(column, None, restated=True))
        additions.extend(_inline_additions(draft, spec, column, None))
    for item in statement.constraints:
        additions.append(_Addition(item.offset, item))
    # CREATE TABLE names a foreign key after its CONSTRAINT symbol (ALTER TABLE does not)
    # and numbers the unnamed ones, inline REFERENCES too, in written order from 1
    written = [(spec.offset, None) for spec in statement.columns if _makes_foreign_key(draft, spec)]
    written += [(fk.offset, fk.name or fk.index_name) for fk in statement.foreign_keys]
    unnamed = 0
    for _, name in sorted(written, key=lambda w: w[0]) if _keeps_foreign_keys(draft) else ():
        if name is None:
            unnamed += 1
            name = numbered_foreign_key(draft.name, unnamed)
        draft.foreign_keys.append(name)
    if not shown:
        additions += [_foreign_key_addition(fk, None) for fk in statement.foreign_keys]
    # The server names unnamed keys and checks in the order the definitions are written,
    # whether they sit in a column definition or on their own.
    additions.sort(key=lambda a: a.offset)
    _add_keys_and_checks(draft, additions)
    return _validated(draft, None)


def parse_table(sql: str, *, upstream: Flavor | str = Flavor.MARIADB, shown: bool = False) -> Table:
    """CREATE TABLE text to a Table, hand-written or (`shown`, see `build_table`) the
    server's SHOW CREATE TABLE output."""
    statement = parse_strict(sql)
    if not isinstance(statement, CreateTable) or statement.like is not None:
        raise DDLSyntaxError("expected CREATE TABLE with column definitions", sql, 0)
    return build_table(statement, upstream=upstream, shown=shown)


# Which phase of an ALTER TABLE each kind of change belongs to (see the module doc).
_COLUMN_CHANGES = (AddColumn, DropColumn, ModifyColumn, RenameColumn, SetDefault, DropDefault)
_KEY_DROPS = (DropIndex, DropPrimaryKey, DropCheck, DropConstraint, DropForeignKey)
_ADDITIONS = (AddIndex, AddCheck, AddForeignKey)


def apply_changes(
    table: Table,
    changes: tuple[Change, ...] | list[Change],
    *,
    upstream: Flavor | str = Flavor.MARIADB,
    schema_charset: tuple[str, str | None] | None = None,
) -> Table:
    """The table after one ALTER TABLE's changes, in the server's order: table options
    (a column defined without a character set takes the new default), the column
    specs, FIRST/AFTER, CONVERT TO, drops and renames of existing keys and checks, the
    existing keys, checks and generated columns following renamed and dropped columns,
    then new keys and checks, which name columns of the new table. `schema_charset`:
    the table's database's character set and collation, what CHARACTER SET DEFAULT
    names."""
    changes = [_with_database_charset(c, schema_charset) for c in changes]
    draft = _Draft(table, upstream)
    # MariaDB derives how each key is kept again at every ALTER: a USING HASH written
    # for a key a B-tree holds is forgotten (`lattice.hash_keys`)
    draft.indexes = [replace(i, hashed=False) if i.hashed else i for i in draft.indexes]
    for change in changes:
        if isinstance(change, SetOptions):
            _set_options(draft, change.options)
    additions: list[_Addition] = []
    moves: list[tuple[_Slot, Position, Change]] = []
    for change in changes:
        if isinstance(change, _COLUMN_CHANGES):
            _apply_column_change(draft, change, additions, moves)
    _place(draft, moves)
    _require_unique_names(draft)
    # a column defined anew (MODIFY, CHANGE) has the checks its new definition has
    restated = {slot.origin for slot in draft.slots if slot.restated and slot.origin is not None}
    draft.checks = [c for c in draft.checks if c.column is None or c.column not in restated]
    for change in changes:
        if isinstance(change, ConvertCharset):
            collation = change.collation or default_collation(change.charset, upstream)
            _convert_charset(draft, change.charset, collation)
            # a CHARACTER SET of the table in the same statement is its default, before or
            # after the CONVERT TO (MariaDB); the columns stay converted
            for option in changes:
                if isinstance(option, SetOptions) and option.options.charset is not None:
                    _set_options(draft, replace(option.options, engine=None, comment=None))
    for change in changes:
        if isinstance(change, _KEY_DROPS):
            _apply_key_drop(draft, change)
    _rename_indexes(draft, [c for c in changes if isinstance(c, RenameIndex)])
    _carry_over(draft)
    for change in changes:
        if isinstance(change, AddIndex | AddCheck):
            additions.append(_Addition(0, change.spec, change, if_not_exists=change.if_not_exists))
        elif isinstance(change, AddForeignKey) and _added_foreign_key(draft, change):
            additions.append(_foreign_key_addition(change.spec, change))
    # Inline keys of column specs and ADD KEY specs interleave in written order.
    order = {id(change): i for i, change in enumerate(changes)}
    additions.sort(key=lambda a: order.get(id(a.change), -1))
    _add_keys_and_checks(draft, additions)
    for change in changes:
        if isinstance(change, AlterCheck):
            i = draft.check_pos(change.name)
            if i is None:
                raise SchemaError(3821, f"Check constraint '{change.name}' is not found in the table", change)
            draft.checks[i] = replace(draft.checks[i], enforced=change.enforced)
        elif isinstance(change, RenameTo):
            old, draft.name = draft.name, change.new_name.name
            draft.foreign_keys = [renamed_foreign_key(f, old, draft.name) for f in draft.foreign_keys]
        elif not isinstance(
            change,
            (*_COLUMN_CHANGES, *_KEY_DROPS, RenameIndex, *_ADDITIONS, SetOptions, ConvertCharset, Ignored),
        ):
            raise SchemaError(0, f"cannot apply {type(change).__name__}", change)
    return _validated(draft, changes[-1] if changes else None)


# -- columns ---------------------------------------------------------------------------
def _settle(draft: _Draft, spec: ColumnSpec, change: Change | None) -> Column:
    try:
        return settle_column(spec, draft.options.charset, draft.options.collation, draft.upstream)
    except ValueError as exc:
        raise SchemaError(1067, str(exc), change) from exc


def _apply_column_change(
    draft: _Draft,
    change: Change,
    additions: list[_Addition],
    moves: list[tuple[_Slot, Position, Change]],
) -> None:
    match change:
        case AddColumn(spec=spec, position=position, if_not_exists=if_not_exists):
            if if_not_exists and draft.col_pos(spec.column.name) is not None:
                return
            column = _settle(draft, spec, change)
            slot = _Slot(column, None, restated=True, change=change)
            draft.slots.append(slot)
            if position is not None:
                moves.append((slot, position, change))
            additions.extend(_inline_additions(draft, spec, column, change))
        case DropColumn(name=name, if_exists=if_exists):
            i = draft.spec_pos(name)
            if i is None:
                if if_exists:
                    return
                raise SchemaError(1091, f"Can't DROP COLUMN `{name}`; check that it exists", change)
            slot = draft.slots.pop(i)
            if slot.origin is not None:
                draft.dropped.add(slot.origin)
        case ModifyColumn(old_name=old, spec=spec, position=position, if_exists=if_exists):
            if if_exists and draft.spec_pos(old) is None:
                return
            i = draft.require_spec_col(old, change)
            column = _settle(draft, spec, change)
            slot = draft.slots[i]
            slot.column, slot.restated, slot.change = column, True, change
            if position is not None:
                moves.append((slot, position, change))
            additions.extend(_inline_additions(draft, spec, column, change))
        case RenameColumn(old_name=old, new_name=new, if_exists=if_exists):
            if if_exists and draft.spec_pos(old) is None:
                return
            slot = draft.slots[draft.require_spec_col(old, change)]
            slot.column, slot.change = replace(slot.column, name=new), change
        case SetDefault(column=name, value=value, if_exists=if_exists):
            if if_exists and draft.spec_pos(name) is None:
                return
            slot = draft.slots[draft.require_spec_col(name, change)]
            column = slot.column
            try:
                default = canonical_default(value, column.type, draft.rules.now_default_any_type)
            except DefaultError as exc:
                raise SchemaError(1067, f"Invalid default value for '{name}' ({exc})", change) from exc
            if default.is_null and not column.nullable:
                raise SchemaError(1067, f"Invalid default value for '{name}'", change)
            slot.column = replace(column, default=default)
        case DropDefault(column=name, if_exists=if_exists):
            if if_exists and draft.spec_pos(name) is None:
                return
            slot = draft.slots[draft.require_spec_col(name, change)]
            column = slot.column
            slot.column = replace(column, default=NULL_DEFAULT if column.nullable else None)


def _place(draft: _Draft, moves: list[tuple[_Slot, Position, Change]]) -> None:
    """FIRST / AFTER, in written order, once every column has its new name: AFTER names
    a column of the new table."""
    for slot, position, change in moves:
        i = next((i for i, s in enumerate(draft.slots) if s is slot), None)
        if i is None:  # dropped again later in the statement
            continue
        del draft.slots[i]
        if position.first:
            draft.slots.insert(0, slot)
            continue
        assert position.after is not None
        j = draft.col_pos(position.after)
        if j is None:
            raise SchemaError(1054, f"Unknown column '{position.after}' in '{draft.name}'", change)
        draft.slots.insert(j + 1, slot)


def _require_unique_names(draft: _Draft) -> None:
    seen: dict[str, _Slot] = {}
    for slot in draft.slots:
        earlier = seen.setdefault(slot.column.key, slot)
        if earlier is not slot:
            change = slot.change or earlier.change
            raise SchemaError(1060, f"Duplicate column name '{slot.column.name}'", change)


def _inline_additions(
    draft: _Draft, spec: ColumnSpec, column: Column, change: Change | None
) -> list[_Addition]:
    part = (IndexPart(column.name),)
    additions: list[_Addition] = []
    if spec.primary_key:
        additions.append(_Addition(spec.offset, IndexSpec(PRIMARY, IndexKind.PRIMARY, part), change))
    if spec.unique:
        additions.append(_Addition(spec.offset, IndexSpec(None, IndexKind.UNIQUE, part), change))
    for inline in column_checks(spec):
        by_column = draft.rules.names_checks_by_column
        name = inline.name or (column.name if by_column else None)
        check = CheckSpec(name, inline.expression, inline.enforced, column=column.name if by_column else None)
        additions.append(_Addition(spec.offset, check, change))
    if _makes_foreign_key(draft, spec):
        index = IndexSpec(None, IndexKind.PLAIN, part)
        additions.append(_Addition(spec.offset, index, change, for_foreign_key=True))
        if change is not None:  # (CREATE TABLE names its foreign keys together)
            _name_foreign_key(draft, None)
    return additions


def _makes_foreign_key(draft: _Draft, spec: ColumnSpec) -> bool:
    return bool(spec.references) and draft.rules.inline_references


def _added_foreign_key(draft: _Draft, change: AddForeignKey) -> bool:
    """Add the foreign key's name to the table's; False where IF NOT EXISTS finds it.
    IF NOT EXISTS looks for `FOREIGN KEY name`, else the CONSTRAINT symbol. The key
    is named after its CONSTRAINT symbol, else `FOREIGN KEY name`, else numbered past
    the table's highest number (InnoDB). (An ALTER the server runs in place, which it
    can only with foreign_key_checks off, names it after `FOREIGN KEY name` first: a
    name nothing replicated depends on, and the statement's text does not tell.)"""
    guarded = change.spec.index_name or change.spec.name
    if (
        guarded is not None
        and change.if_not_exists
        and any(key(f) == key(guarded) for f in draft.foreign_keys)
    ):
        return False
    _name_foreign_key(draft, change.spec.name or change.spec.index_name)
    return True


def _keeps_foreign_keys(draft: _Draft) -> bool:
    # Of MariaDB's engines only InnoDB (the default) keeps them; the others make the index.
    return (draft.options.engine or "innodb").lower() == "innodb"


def _name_foreign_key(draft: _Draft, name: str | None) -> None:
    if not _keeps_foreign_keys(draft):
        return
    if name is None:
        numbers = (foreign_key_number(f, draft.name) or 0 for f in draft.foreign_keys)
        name = numbered_foreign_key(draft.name, max(numbers, default=0) + 1)
    draft.foreign_keys.append(name)


def _foreign_key_addition(fk: ForeignKeySpec, change: Change | None) -> _Addition:
    # MariaDB names the index after the constraint, else after `FOREIGN KEY name`.
    index = IndexSpec(fk.name or fk.index_name, IndexKind.PLAIN, fk.parts, fk.offset)
    return _Addition(fk.offset, index, change, for_foreign_key=True)


def _with_database_charset(change: Change, schema_charset: tuple[str, str | None] | None) -> Change:
    """`change` with CHARACTER SET DEFAULT made the database's character set."""
    if isinstance(change, SetOptions) and change.options.charset == DATABASE_CHARSET:
        charset, collation = _database_charset(change, change.options.collation, schema_charset)
        return replace(change, options=replace(change.options, charset=charset, collation=collation))
    if isinstance(change, ConvertCharset) and change.charset == DATABASE_CHARSET:
        charset, collation = _database_charset(change, change.collation, schema_charset)
        return replace(change, charset=charset, collation=collation)
    return change


def _database_charset(
    change: Change, collation: str | None, schema_charset: tuple[str, str | None] | None
) -> tuple[str, str | None]:
    if schema_charset is None:
        raise SchemaError(
            0, "CHARACTER SET DEFAULT names the database's character set, which is not known", change
        )
    # the character set's default collation, not the database's (MariaDB 10.11)
    return schema_charset[0], collation


def _set_options(draft: _Draft, spec: OptionsSpec) -> None:
    options = draft.options
    charset, collation = options.charset, options.collation
    if spec.charset:
        # A character set without a collation takes its default collation, even when
        # it is the table's character set already.
        charset = spec.charset
        collation = spec.collation or default_collation(spec.charset, draft.upstream)
    draft.options = TableOptions(
        engine=spec.engine or options.engine,
        charset=charset,
        collation=collation,
        # COMMENT='' clears the comment: the server shows none
        comment=(spec.comment or None) if spec.comment is not None else options.comment,
    )


def _convert_charset(draft: _Draft, charset: str, collation: str) -> None:
    new_mb = mbmaxlen(charset)
    for slot in draft.slots:
        ctype = slot.column.type
        if not ctype.is_character:
            continue
        name, length = ctype.name, ctype.length
        if name in TEXT_CAPACITY and not slot.restated:
            # An existing TEXT column keeps room for as many characters as before; one
            # defined in this statement is taken as written (MariaDB).
            needed = TEXT_CAPACITY[name] // mbmaxlen(ctype.charset) * new_mb
            name = _smallest_text(needed)
        elif name == "varchar" and length is not None and length * new_mb > 65535:
            name, length = _smallest_text(length * new_mb), None
        ctype = replace(ctype, name=name, length=length, charset=charset, collation=collation)
        if charset == "binary" and ctype.family == Family.STRING:
            ctype = as_binary_type(ctype)  # VARCHAR becomes VARBINARY, TEXT becomes BLOB
        slot.column = replace(slot.column, type=ctype)
    draft.options = replace(draft.options, charset=charset, collation=collation)


def _smallest_text(needed: int) -> str:
    for name, cap in TEXT_CAPACITY.items():
        if needed <= cap:
            return name
    return "longtext"


def _carry_over(draft: _Draft) -> None:
    """The table's existing keys, checks, generated columns and expression defaults follow
    the statement's column renames and drops, all at once."""
    renames = {slot.origin: slot.column.name for slot in draft.slots if slot.origin is not None}
    added = {slot.column.key: slot.column.name for slot in draft.slots if slot.origin is None}
    indexes = []
    for index in draft.indexes:
        parts = []
        for part in index.parts:
            k = key(part.column)
            if part.column.startswith("("):
                parts.append(part)
            elif k in renames:
                parts.append(replace(part, column=renames[k]))
            elif k in added:
                # MariaDB binds the part to a column added under the dropped one's name.
                parts.append(replace(part, column=added[k]))
            # else the column was dropped: the key loses the part (MySQL), or goes
            # with its last one
        if parts:
            indexes.append(replace(index, parts=tuple(parts)) if tuple(parts) != index.parts else index)
    draft.indexes = indexes
    checks = []
    for check in draft.checks:
        if (check.columns and check.columns <= draft.dropped) or check.column in draft.dropped:
            continue  # a check on dropped columns only goes with them, a column's with it
        if check.columns & renames.keys():
            expression = canonical_expression(rename_columns_in_expression(check.expression, renames))
            check = replace(check, expression=expression.sql, columns=expression.columns)
        if check.column in renames:
            # SHOW CREATE TABLE writes it in the column's definition, unnamed: read back, it
            # has the column's name
            check = replace(check, name=renames[check.column], column=key(renames[check.column]))
        checks.append(check)
    draft.checks = checks
    for slot in draft.slots:
        if slot.restated:
            continue
        generated, default = slot.column.generated, slot.column.default
        if generated is not None:
            expression = rename_columns_in_expression(generated.expression, renames)
            if expression != generated.expression:
                slot.column = replace(slot.column, generated=replace(generated, expression=expression))
        elif (
            default is not None
            and default.is_expression
            and canonical_expression(default.sql).columns & renames.keys()
        ):
            # a DEFAULT naming another column follows its rename too (DEFAULT (a + b))
            expression = rename_columns_in_expression(default.sql, renames)
            slot.column = replace(slot.column, default=replace(default, sql=expression))


# -- indexes and checks ------------------------------------------------------------------
def _rename_indexes(draft: _Draft, renames: list[RenameIndex]) -> None:
    """RENAME INDEX, after the drops: each names a key as it was before the statement,
    all at once (`RENAME INDEX a TO b, RENAME INDEX b TO a` swaps them)."""
    names = [ix.name for ix in draft.indexes]
    for change in renames:
        i = draft.index_pos(change.old_name)
        if i is None:
            if change.if_exists:
                continue
            raise SchemaError(1176, f"Key '{change.old_name}' doesn't exist in table '{draft.name}'", change)
        names[i] = change.new_name
    seen: set[str] = set()
    for name in names:
        if key(name) in seen:
            raise SchemaError(1061, f"Duplicate key name '{name}'", renames[0] if renames else None)
        seen.add(key(name))
    draft.indexes = [
        ix if ix.name == name else replace(ix, name=name, generated=False)
        for ix, name in zip(draft.indexes, names, strict=True)
    ]


def _apply_key_drop(draft: _Draft, change: Change) -> None:
    match change:
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
        case DropCheck(name=name, if_exists=if_exists):
            i = draft.check_pos(name)
            if i is None:
                if if_exists:
                    return
                raise SchemaError(3821, f"Check constraint '{name}' is not found in the table", change)
            del draft.checks[i]
        case DropForeignKey(name=name):
            # (one we do not know of was there all the same: the statement ran upstream)
            draft.foreign_keys = [f for f in draft.foreign_keys if key(f) != key(name)]
        case DropConstraint(name=name):
            i = draft.check_pos(name)
            if i is not None:
                del draft.checks[i]
                return
            j = draft.index_pos(name)
            if j is not None and draft.indexes[j].kind in (IndexKind.UNIQUE, IndexKind.PRIMARY):
                del draft.indexes[j]
                return
            # else a foreign key's (one we do not know of too: the statement ran upstream)
            draft.foreign_keys = [f for f in draft.foreign_keys if key(f) != key(name)]


def _add_keys_and_checks(draft: _Draft, additions: list[_Addition]) -> None:
    """Add a statement's keys and checks. As the server does, first drop the indexes of
    foreign keys that another key makes redundant (the table's own generated ones too),
    then name the rest in order."""
    kept: list[tuple[_Addition, tuple[IndexPart, ...]]] = []
    for addition in additions:
        item = addition.item
        if isinstance(item, CheckSpec):
            if not (addition.if_not_exists and item.name and _check_named(draft, kept, item.name)):
                kept.append((addition, ()))
            continue
        if addition.if_not_exists and _index_named(draft, kept, _guarded_name(item)):
            continue
        parts = _resolve_parts(draft, item, addition.change)
        earlier: list[tuple[Index | None, tuple[IndexPart, ...], bool]] = [
            (ix, _compared_parts(draft, ix.parts), ix.generated) for ix in draft.indexes
        ]
        earlier += [(None, p, a.for_foreign_key) for a, p in kept if isinstance(a.item, IndexSpec)]
        redundant = False
        for index, other_parts, other_generated in earlier:
            if not _foreign_key_prefix(parts, addition.for_foreign_key, other_parts, other_generated):
                continue
            if not other_generated or (addition.for_foreign_key and len(parts) < len(other_parts)):
                redundant = True
            elif index is not None:
                draft.indexes.remove(index)
            else:
                kept = [(a, p) for a, p in kept if p is not other_parts]
            break
        if not redundant:
            kept.append((addition, parts))
    for addition, parts in kept:
        if isinstance(addition.item, CheckSpec):
            _add_check(draft, addition.item, addition.change)
        else:
            _add_index(draft, replace(addition.item, parts=parts), addition.change, addition.for_foreign_key)


def _compared_parts(draft: _Draft, parts: tuple[IndexPart, ...]) -> tuple[IndexPart, ...]:
    """An existing key's parts as the server compares them with a foreign key's: a
    prefix on a column that takes none (a POINT's 25 bytes) is the whole column."""
    out = []
    for part in parts:
        i = draft.col_pos(part.column) if part.length is not None else None
        if i is not None and not takes_prefix(draft.slots[i].column.type):
            part = replace(part, length=None)
        out.append(part)
    return tuple(out)


def _check_named(draft: _Draft, kept: list[tuple[_Addition, tuple[IndexPart, ...]]], name: str) -> bool:
    """Is there a check called `name`, or one about to be added by this statement?"""
    return draft.check_pos(name) is not None or any(
        isinstance(a.item, CheckSpec) and a.item.name is not None and key(a.item.name) == key(name)
        for a, _ in kept
    )


def _guarded_name(item: IndexSpec) -> str:
    """The name IF NOT EXISTS looks for: the key's own, else the one the server derives
    (PRIMARY, or its first column's: `ADD KEY IF NOT EXISTS (i)` is nothing where a key
    `i` is)."""
    if item.kind == IndexKind.PRIMARY:
        return PRIMARY
    return item.name or item.parts[0].column


def _index_named(draft: _Draft, kept: list[tuple[_Addition, tuple[IndexPart, ...]]], name: str) -> bool:
    """Is there an index called `name`, or one about to be added by this statement?"""
    if draft.index_pos(name) is not None:
        return True
    return any(
        isinstance(a.item, IndexSpec) and a.item.name is not None and key(a.item.name) == key(name)
        for a, _ in kept
    )


def _foreign_key_prefix(
    parts: tuple[IndexPart, ...], generated: bool, other: tuple[IndexPart, ...], other_generated: bool
) -> bool:
    """The server's foreign_key_prefix(), negated: is one of the two a foreign key's
    index whose columns the other key starts with?"""
    if not generated and not other_generated:
        return False
    if generated and other_generated:
        short, long = (parts, other) if len(parts) <= len(other) else (other, parts)
    elif generated:
        short, long = parts, other
    else:
        short, long = other, parts
    if len(short) > len(long):
        return False
    return all(
        key(a.column) == key(b.column) and a.length == b.length for a, b in zip(short, long, strict=False)
    )


def _resolve_parts(draft: _Draft, spec: IndexSpec, change: Change | None) -> tuple[IndexPart, ...]:
    parts = []
    for part in spec.parts:
        if part.column.startswith("("):
            parts.append(part)
            continue
        i = draft.col_pos(part.column)
        if i is None:
            raise SchemaError(1072, f"Key column '{part.column}' doesn't exist in table", change)
        parts.append(replace(part, column=draft.slots[i].column.name))
    return tuple(parts)


def _add_index(draft: _Draft, spec: IndexSpec, change: Change | None, generated: bool = False) -> None:
    kind = spec.kind
    name = spec.name
    if kind == IndexKind.PRIMARY or (name is not None and key(name) == key(PRIMARY)):
        if draft.index_pos(PRIMARY) is not None:
            raise SchemaError(1068, "Multiple primary key defined", change)
        name, kind = PRIMARY, IndexKind.PRIMARY
    parts = list(_resolve_parts(draft, spec, change))
    if kind == IndexKind.FULLTEXT:
        parts = [replace(p, length=None) for p in parts]  # the server indexes whole words
    elif kind == IndexKind.SPATIAL:
        parts = [replace(p, descending=False) for p in parts]  # an R-tree has no order
    if name is None:
        name = _index_name(draft, parts)
    elif draft.index_pos(name) is not None:
        raise SchemaError(1061, f"Duplicate key name '{name}'", change)
    hashed = spec.hashed and kind == IndexKind.UNIQUE  # (InnoDB keeps other keys as B-trees)
    draft.indexes.append(Index(name, kind, tuple(parts), spec.comment, hashed, generated))
    if generated:
        draft.new_generated.add(key(name))


def _without_repeated_generated(indexes: list[Index], new_generated: set[str]) -> list[Index]:
    """The indexes but for a foreign key's new one that, its prefixes settled, is the
    same as a key before it (a BLOB's cut to the longest key the engine holds)."""
    out: list[Index] = []
    for ix in indexes:
        if ix.key in new_generated and any(o.kind == ix.kind and o.parts == ix.parts for o in out):
            continue
        out.append(ix)
    return out


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
        raise SchemaError(
            draft.rules.duplicate_check_error, f"Duplicate check constraint name '{name}'", change
        )
    owner = key(spec.column) if spec.column else None
    draft.checks.append(Check(name, expression.sql, spec.enforced, expression.columns, owner))


def _check_name(draft: _Draft) -> str:
    if draft.rules.names_checks_by_column:
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
    if not draft.slots:
        raise SchemaError(
            1090, "You can't delete all columns with ALTER TABLE; use DROP TABLE instead", change
        )
    names = {slot.column.key for slot in draft.slots}
    for check in draft.checks:
        missing = check.columns - names
        if missing:
            raise SchemaError(1054, f"Unknown column '{sorted(missing)[0]}' in 'CHECK'", change)
    for slot in draft.slots:
        generated = slot.column.generated
        if generated:
            missing = canonical_expression(generated.expression).columns - names
            if missing:
                raise SchemaError(
                    1054, f"Unknown column '{sorted(missing)[0]}' in 'GENERATED ALWAYS AS'", change
                )
    primary = draft.index_pos(PRIMARY)
    if primary is not None:
        for part in draft.indexes[primary].parts:
            _force_not_null(draft, part.column)
    # MariaDB gives key parts the prefix lengths their columns allow (a plain key too
    # long for the server, or on a BLOB/TEXT column, keeps a prefix; a prefix the
    # column no longer takes goes)
    columns = {slot.column.key: slot.column for slot in draft.slots}
    key_bytes = max_key_bytes(draft.options.engine)
    draft.indexes = _without_repeated_generated(
        [settled_prefixes(ix, columns, key_bytes) for ix in draft.indexes], draft.new_generated
    )
    auto = [slot.column for slot in draft.slots if slot.column.auto_increment]
    if auto:
        leading = {ix.parts[0].column.lower() for ix in draft.indexes if ix.parts}
        if len(auto) > 1 or auto[0].key not in leading:
            raise SchemaError(1075, _ONE_AUTO_COLUMN, change)
    return draft.freeze()


def _force_not_null(draft: _Draft, name: str) -> None:
    """Key parts of a PRIMARY KEY are NOT NULL; the server makes them so silently."""
    i = draft.col_pos(name)
    if i is None:
        return
    column = draft.slots[i].column
    if column.nullable:
        default = None if column.default is None or column.default.is_null else column.default
        draft.slots[i].column = replace(column, nullable=False, default=default)
