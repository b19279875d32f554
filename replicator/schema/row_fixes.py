"""What a shard's rows downstream need that no row event carries.

An ALTER changes a table's rows in place: a column it adds gets its default (or the type's
implicit value) in every row, and a MODIFY converts every value. The binlog carries none of
it. Downstream the shard's rows hold what the downstream column gave them, which may be
another value: the column was there already with another default (another shard has it),
or it changes otherwise (another shard keeps the old type; a string holds both). With
extract columns the shard's rows can be told apart, and the DDL's journal entry sets them
(`RowsFix`): to the value they got, or converted as the server converted them upstream,
through a scratch table beside the target holding the column in both types, where an
UPDATE from one to the other converts them as the ALTER did (MariaDB copies a field into
another alike in both) before they are written back by the downstream primary key (L06,
L10, L12). Without extract columns they cannot be told apart
(docs/design.md "The join").

A crash in the middle of a conversion: the scratch table's CREATE and DROP may run again
(`on_scratch`), its INSERT and UPDATEs commit with the journal's progress."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from itertools import pairwise

from lattice import (
    NULL_DEFAULT,
    Column,
    ColumnType,
    Default,
    Family,
    Flavor,
    Index,
    IndexKind,
    Table,
    converts_through,
    converts_values,
    filler_default,
    holding,
    key,
    materialize,
    qualified_name,
    recast_default,
    render_default,
    render_table,
    takes_literal,
)
from lattice import quote_identifier as q
from replicator.schema.group import Block, BlockKind
from replicator.source.schema_change import SchemaChange

OLD, NEW, STEP = "__shardmerge_old", "__shardmerge_new", "__shardmerge_step"
SCRATCH = "__shardmerge_convert_"


@dataclass(frozen=True)
class RowsFix:
    """Statements setting one shard's rows downstream in one column to what they hold
    upstream: a value they got, or their values converted from one type to another."""

    column: str  # key
    statements: tuple[str, ...]
    value: Default | None = None
    # the types the values went through, from the one they have downstream (two or more)
    converted: tuple[ColumnType, ...] | None = None
    after_ddl: bool = False  # its values read from the column as the DDL makes it
    # (old name, new name) of the pending rename whose new name it reads values in where
    # the old one is NULL (`ShardRows.moved`)
    reads_moved: tuple[str, str] | None = None
    reads: str | None = None  # the column (name) it reads the values in, where it reads one
    # the old name of a pending rename the shard made itself, whose values it moves into
    # the column converted (`ShardRows.made`)
    clears: str | None = None
    # the decision's DDL adds the column downstream: set once it ran (a column the shard
    # added while paused, its rows given another default than the one it has now: L69)
    adds: bool = False

    def needed(self, before: Table, after: Table) -> bool:
        """Not where the downstream column goes from one type to the other itself, unless
        it moves values held under an old name, which that column's own MODIFY does not
        reach (live stories 611052: a shard's DATETIME(6) values kept their fraction there,
        and the rename's last copy brought them into the narrowed new name), or reads values
        another shard's rename moved under its new name, which that MODIFY does not reach
        either (L73: a cancel's copy back brought them into the old name unconverted)."""
        if self.clears is not None or self.reads_moved is not None:
            return True
        column, then = before.column(self.column), after.column(self.column)
        return not (self.converted and column and then and (column.type, then.type) == self.converted)

    def goes_before(self, before: Table, after: Table, flavor: Flavor) -> bool:
        """Whether it runs before DDL that makes the table `after`: where the DDL changes
        the column's type and the column takes the rows' values already (the new type may
        be what the rows hold only once set: '' fillers, then SMALLINT, L10)."""
        column, then = before.column(self.column), after.column(self.column)
        if self.after_ddl or column is None or then is None or column.type == then.type:
            return False
        if self.converted is not None:
            return holding(self.converted[-1], column.type, flavor) == column.type
        if self.value is None or self.value.is_null:
            return column.nullable
        # (the old type must give it the text the new one would: a BIGINT's 0 written into
        # a TIMESTAMP is '0000-00-00 00:00:00', which a string made of it keeps, L77; where
        # the new type takes it, it is set after)
        there = recast_default(self.value, column.type, flavor)
        straight = recast_default(self.value, then.type, flavor)
        if there is None or not takes_literal(column.type, there):
            return False  # (L78: 'd' set in a DATETIME(6), refused: after the DDL making it a string)
        return straight is None or recast_default(there, then.type, flavor) == straight

    def after_start(self, started: Mapping[str, str]) -> RowsFix:
        """As read once the decision's DDL started the rename of its column (`started`: old
        name key -> new name): the start's CHANGE moved every row's value into the new name
        and added the old one again, empty; the values are read there, as those of a
        rename pending before are (`ShardRows.moved`), and written into the old name, which
        the rename's copy takes (a shard resumed by the start, converted by its own MODIFY
        while paused: L56)."""
        new = started.get(self.column)
        if new is None or self.reads is None or self.reads_moved is not None:
            return self
        was, both = f", {q(self.reads)} FROM ", f", {_coalesced(self.reads, new)} FROM "
        statements = tuple(
            sql.replace(was, both, 1) if sql.startswith("INSERT INTO") else sql for sql in self.statements
        )
        return replace(self, statements=statements, reads_moved=(self.reads, new))

    def after_cancel(self, table: Table) -> RowsFix:
        """As read once the decision's DDL made `table`: where it cancelled the rename whose
        new name the fix reads moved values in, its copy back put them in the old name,
        which alone holds them now (L38: the new name is dropped by then)."""
        if self.reads_moved is None or table.column(self.reads_moved[1]) is not None:
            return self
        old, both = q(self.reads_moved[0]), _coalesced(*self.reads_moved)
        return replace(
            self, statements=tuple(sql.replace(both, old) for sql in self.statements), reads_moved=None
        )


@dataclass(frozen=True)
class ShardRows:
    """One shard's rows downstream: the table they are in (the coordinator's, as last
    emitted) and the WHERE clause of its extract columns that picks them."""

    target: str  # schema.table
    table: Table
    where: str
    flavor: Flavor
    # old name (key) -> new name of the pending renames whose CHANGE moved the rows' values
    # out of a column they still have (`RowsPlan.rows_of`): a value is in the new name where
    # the old one is NULL, as the rename's copies take it
    moved: Mapping[str, str] = field(default_factory=dict)
    # new name (key) -> old name of the pending renames the shard made itself (`RowsPlan._made`):
    # its rows written between the rename's start and its own rename hold their values in
    # the old name, which the rename's last copy moves into the new one
    made: Mapping[str, str] = field(default_factory=dict)

    def set(self, column: Column, value: Default) -> RowsFix:
        sql = (
            f"UPDATE {qualified_name(self.target)} SET {q(column.name)} = {render_default(value)} "
            f"WHERE {self.where}"
        )
        return RowsFix(column.key, (sql,), value=value)

    def convert(
        self,
        column: str,
        types: tuple[ColumnType, ...],
        value: Default | None = None,
        after_ddl: bool = False,
    ) -> list[RowsFix]:
        """The rows' values in the column (or `value`, which they got as one of the first
        type) converted through `types` in turn (a paused shard's MODIFYs, each converting
        what the one before gave: a DATETIME made a DATE and then a DATETIME(6) is at
        midnight, L16); none where the table has no primary key to write
        them back by. `after_ddl`: read from the column as the decision's DDL makes it,
        which holds them as text, where the first type reads them back (a string's '1.5000'
        a DECIMAL(13,3)'s 1.500), and written back into it."""
        downstream = materialize(self.table, self.flavor)
        primary, there = downstream.index("PRIMARY"), downstream.column(column)
        if primary is None or there is None:
            return []
        keys = [downstream.column(p.column) for p in primary.parts]
        if any(k is None for k in keys) or key(column) in {k.key for k in keys}:
            return []
        schema, table = self.target.split(".", 1)  # (the coordinator knows no other schema)
        name = f"{schema}.{SCRATCH}{hashlib.sha1(self.target.encode()).hexdigest()[:16]}"
        scratch = qualified_name(name)
        bare = [replace(k, default=None, on_update=None, auto_increment=False, comment=None) for k in keys]
        steps = [OLD, *(f"{STEP}{i}" for i in range(1, len(types) - 1)), NEW]
        shape = Table(
            table,
            (*bare, *(Column(name, t) for name, t in zip(steps, types, strict=True))),
            (Index("PRIMARY", IndexKind.PRIMARY, tuple(replace(p, length=None) for p in primary.parts)),),
        )
        names = ", ".join(q(k.name) for k in keys)
        on = " AND ".join(f"t.{q(k.name)} = s.{q(k.name)}" for k in keys)
        source = render_default(value) if value is not None else self._value(there.name)
        held = self.made.get(key(column)) if value is None else None
        old = downstream.column(held) if held is not None else None
        if old is not None:
            source = _coalesced(there.name, old.name)
        created, target = render_table(shape, self.flavor, name=name), qualified_name(self.target)
        # The shard's ALTER converted its values without strict mode's refusals (a DATETIME(3)
        # cut to a VARCHAR(20), L48): the conversion's UPDATEs take the same liberty.
        lenient = self.flavor.rules.lenient_prefix or ""
        sql = (
            f"DROP TABLE IF EXISTS {scratch}",
            created.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1),
            f"INSERT INTO {scratch} ({names}, {q(OLD)}) SELECT {names}, {source} "
            f"FROM {target} WHERE {self.where}",
            *(
                f"{lenient}UPDATE {scratch} SET {q(b)} = {_as(q(a), was, to)}"
                for (a, was), (b, to) in pairwise(zip(steps, types, strict=True))
            ),
            # (its values the old name held, converted into the new one: cleared there in the
            # same pass, as its rows since its rename clear it, or the rename's last copy would
            # bring them back unconverted: live stories 120025, 130021)
            f"{lenient}UPDATE {target} t JOIN {scratch} s ON {on} SET t.{q(there.name)} = "
            f"{_as(f's.{q(NEW)}', types[-1], there.type)}"
            + (f", t.{q(old.name)} = NULL" if old is not None else ""),
            f"DROP TABLE IF EXISTS {scratch}",
        )
        new = self.moved.get(key(column)) if value is None else None
        moved = (there.name, new) if new is not None else None
        reads = there.name if value is None else None
        fix = RowsFix(
            key(column), sql, converted=types, after_ddl=after_ddl, reads_moved=moved, reads=reads,
            clears=old.name if old is not None else None,
        )
        return [fix]

    def added(
        self,
        before: Table,
        change: SchemaChange,
        renamed: set[str],
        remembered: dict[str, Column],
        holds: Callable[[str, Default], bool],
        passed: tuple[Column, ...] = (),
        renamed_added: Collection[str] = (),
    ) -> list[RowsFix]:
        """The columns the change adds to the shard's table (`before`: as its rows
        downstream have it) that the downstream table has already: its rows set to the
        value the server gave them, or, for a column it added while paused and converted
        since (`remembered`: as added; `passed`: `Block.passed`), that value converted.
        `holds(key, value)`: its rows hold that value already (an UPDATE would write them
        for nothing). `renamed_added`: the new names of its renames of columns it added
        while paused, which a rename's CHANGE in the decision's DDL may bring downstream
        with other values (`with_fixes` keeps their fixes only there)."""
        out: list[RowsFix] = []
        # (one it added while paused is new to its rows though their table had it: it dropped
        # it and added it again meanwhile, L21)
        for column in added_columns(before, change, renamed, anew=remembered.keys()):
            k = column.key
            added = remembered.get(k)
            if self.table.column(k) is None and k not in renamed_added:
                # added downstream by this DDL: every existing row gets its default, but the
                # rows of a shard that added it while paused got the default it had then (L69)
                value = added.default if added is not None else None
                if value is not None and not value.is_expression and value != filler_of(column):
                    out.append(replace(self.set(column, value), adds=True))
                continue
            value = added.default if added is not None else filler_of(column)
            if value is None:
                continue
            types = through(added.type, passed, column) if added is not None else ()
            if self._converts(types):
                out += self.convert(k, types, value)
            elif self._as_text(k, types[0] if types else column.type) and not value.is_null:
                # (L64: a DECIMAL(7,3)'s DEFAULT 1 is 1.000 in its rows, which a JSON or a
                # string downstream holds as '1.000', where the literal written there is '1')
                first = types[0] if types else column.type
                out += self.convert(k, types if len(types) > 1 else (first, first), value)
            elif not holds(k, value):
                out.append(self.set(column, value))
        return out

    def converted(
        self,
        before: Table,
        change: SchemaChange,
        renamed: set[str],
        passed: tuple[Column, ...] = (),
        held: Mapping[str, ColumnType] | None = None,
    ) -> list[RowsFix]:
        """The shard's columns whose type the change converts another way than the
        column's text (or, paused, the types it went through since: `Block.passed`), or
        whose values keep their number but not their text where the downstream column
        (`held`: the downstream table's types, by key) keeps them as text: its rows
        converted (where the downstream column does not do the same, `RowsFix.needed`
        says at the decision's end)."""
        out: list[RowsFix] = []
        for column in change.after.columns:
            k, old = column.key, before.column(column.name)
            if old is None or k in renamed or k in change.recreated or column.generated or old.generated:
                continue
            types = through(old.type, passed, column)
            if self._converts(types, (held or {}).get(k)):
                out += self.convert(k, types)
        return out

    def _converts(self, types: tuple[ColumnType, ...], held: ColumnType | None = None) -> bool:
        return any(
            converts_values(a, b, self.flavor) or (held is not None and converts_through(a, b, held))
            for a, b in pairwise(types)
        )

    def _as_text(self, column: str, ctype: ColumnType) -> bool:
        """Whether the downstream column holds as text the values of a column of `ctype`
        whose text may not be a literal's: a value it gets as a literal has the literal's
        text there, not the one `ctype` gives it (an integer's is the same, but zero-filled)."""
        there = self.table.column(column)
        textual = (Family.STRING, Family.BINARY, Family.JSON)
        if there is None or there.type.family not in textual or ctype.family in textual:
            return False
        return ctype.family != Family.INTEGER or ctype.zerofill

    def _value(self, column: str) -> str:
        """A row's value of the column, wherever the rows hold it (L17:
        a shard's TIMESTAMPs moved by another shard's rename, converted when it made its
        own column a string, kept their '.000000' through the copy back)."""
        new = self.moved.get(key(column))
        return q(column) if new is None else _coalesced(column, new)

    def cleared(self, column: Column) -> str:
        return f"UPDATE {qualified_name(self.target)} SET {q(column.name)} = NULL WHERE {self.where}"


def _coalesced(old: str, new: str) -> str:
    return f"COALESCE({q(old)}, {q(new)})"


def _as(value: str, was: ColumnType, to: ColumnType) -> str:
    """A value of type `was` written into a column of type `to` as an ALTER converts it:
    a FLOAT written into a string is its double's text (1.100000023841858), where the
    ALTER writes the FLOAT's own (1.1), as CAST ... AS CHAR does."""
    if was.family == Family.FLOAT and was.name == "float" and to.family in (Family.STRING, Family.BINARY):
        return f"CAST({value} AS CHAR)"
    return value


def on_scratch(statement: str) -> bool:
    """A conversion's CREATE or DROP of its scratch table, which may run again after a
    crash (IF NOT EXISTS, IF EXISTS): the journal's recovery runs it again rather than
    asking the target, which it leaves as it is, whether it ran."""
    head = statement.lstrip()[:120]
    return SCRATCH in head and head.upper().startswith(("CREATE", "DROP"))


def filler_of(column: Column) -> Default | None:
    """The value MariaDB gives a table's rows in a column added to it."""
    return column.default or (NULL_DEFAULT if column.nullable else filler_default(column.type))


def added_columns(
    before: Table, change: SchemaChange, renamed: set[str], anew: Iterable[str] = ()
) -> list[Column]:
    """The columns of the change's table that `before` lacks (or the change made anew, or
    `anew` names), but for the new names of renames (their rows keep their values) and
    generated ones."""
    kept = (before.column_map.keys() - set(change.recreated) - set(anew)) | renamed
    return [c for c in change.after.columns if c.key not in kept and c.generated is None]


def through(first: ColumnType, passed: tuple[Column, ...], column: Column) -> tuple[ColumnType, ...]:
    """The types a column's values went through, from `first` to the column's, by way of
    those `passed` holds for it (each only where it changed)."""
    types = [first]
    for t in [*(c.type for c in passed if c.key == column.key), column.type]:
        if t != types[-1]:
            types.append(t)
    return tuple(types)


def passed_while_paused(block: Block | None, change: SchemaChange) -> tuple[Column, ...]:
    """What `Block.passed` is after the change should the shard be (or stay) paused: each
    type its columns took while paused, in order, under the name they have now (a MODIFY
    converts what the one before it gave: a DATETIME made a DATE, then a DATETIME(6), is
    at midnight; L16), less the columns it dropped."""
    if change.before is None or change.after is None:
        return ()
    paused = block is not None and block.kind is BlockKind.CONFLICT
    passed = list(block.passed) if paused else []
    for rename in change.renames:
        passed = [replace(c, name=rename.new) if c.key == key(rename.old) else c for c in passed]
    there = change.after.column_map.keys() - set(change.recreated)
    passed = [c for c in passed if c.key in there]
    renamed = {key(r.new): key(r.old) for r in change.renames}
    for column in change.after.columns:
        old = change.before.column_map.get(renamed.get(column.key, column.key))
        # (the tracker keeps a column it did not change as the same object: no types to compare)
        if old is None or old is column:
            continue
        if column.key in there and column.generated is None and old.type != column.type:
            passed.append(column)
    return tuple(passed)


def followed(columns: Iterable[Column], change: SchemaChange) -> dict[str, Column]:
    """The columns (`Block.filled`) by key, under the names the change's renames give them."""
    out = {c.key: c for c in columns}
    for rename in change.renames:
        if key(rename.old) in out:
            out[key(rename.new)] = replace(out.pop(key(rename.old)), name=rename.new)
    return out


def filled_while_paused(block: Block | None, change: SchemaChange) -> tuple[Column, ...]:
    """What `Block.filled` is after the change should the shard be (or stay) paused: the
    columns it added while paused, as added (their default the value its rows got),
    followed through its renames, less those it dropped, and the columns the change adds."""
    if change.before is None or change.after is None:
        return ()
    paused = block is not None and block.kind is BlockKind.CONFLICT
    filled = followed(block.filled if paused else (), change)
    filled = {k: c for k, c in filled.items() if k in change.after.column_map}
    for column in added_columns(change.before, change, {key(r.new) for r in change.renames}):
        value = filler_of(column)
        if value is not None and not value.is_expression:
            filled[column.key] = replace(column, default=value, nullable=True)
        else:
            filled.pop(column.key, None)
    return tuple(filled.values())
