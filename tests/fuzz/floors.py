"""What the rows a story wrote downstream were written under: P5's allowance.

The coordinator keeps a downstream column wider (or nullable) than every shard's
when rows already downstream may need it (replicator/schema/retained.py). The oracle does
not take its word for it: it records, from the rows it writes itself, the widest
definition each shard's values of a column were written under (by lineage, so a
rename carries them to the new name) and where rows got NULL from a downstream
default (a shard lacking the column, or rows already there when the column was
added). Once every shard has the same table, a downstream column may lie between
the shards' column and that column widened by what was written by shards that no
longer vouch for it (they left, or dropped or renamed the column away: a shard
still holding it narrowed its own rows upstream, which MariaDB checked), and
nowhere else.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from lattice import ColumnTypes, Conflict, Family, Table, TableOptions, holding, least_type, recast_default
from lattice.charsets import collation_suffix
from lattice.model import Column, ColumnType

# MariaDB's JSON is a LONGTEXT in this character set and collation
_JSON_TEXT_SET = ("utf8mb4", "utf8mb4_bin")


@dataclass(frozen=True)
class Written:
    """Values of a column written under these definitions: all of them widened over
    time (`type`, `nullable`), and the last ones (`last`, `last_nullable`): a shard's
    own rows follow its narrowing upstream, which MariaDB checked, so when it lets go
    of the column they fit its last definition (seed 453984); the widened one, which
    the lattice may not put above that (MEDIUMINT, BIGINT UNSIGNED, SMALLINT UNSIGNED
    widen to a DECIMAL(20,0)), also holds them."""

    type: ColumnType
    nullable: bool
    last: ColumnType | None = None
    last_nullable: bool = False

    def __post_init__(self) -> None:
        if self.last is None:
            object.__setattr__(self, "last", self.type)
            object.__setattr__(self, "last_nullable", self.nullable)

    @property
    def as_last(self) -> Written:
        return Written(self.last, self.last_nullable)


class Floors:
    def __init__(self) -> None:
        self._types = ColumnTypes("mariadb")
        self.by_lineage: dict[tuple[str, int], Written] = {}  # (shard, lineage)
        # written by a shard that since dropped, renamed away or left with the lineage: no
        # longer vouched for, even if the shard has the lineage again later (a column
        # added again starts from its default upstream, its old values stay downstream)
        self.orphaned: dict[int, Written] = {}
        self.by_name: dict[str, Written] = {}  # values from a downstream default
        # NULLs from one, or set by a pending rename: they need the column nullable, of any
        # type (replicator/schema/retained.py holds them as NULLs only, F164)
        self.nulls: set[str] = set()
        self._fillers: dict[str, str] = {}  # the last value rows got from one
        self._table_sets: set[tuple[str | None, str | None]] = set()  # the downstream table's, over time

    def _widen(
        self, floors: dict, k, type_: ColumnType, nullable: bool, own: bool = False, last: Written | None = None
    ) -> None:
        """`own`: a shard's definitions of its own column, whose rows follow it where no
        type holds both (MariaDB converts them upstream and downstream alike: a DATE
        made TIMESTAMP(6), seed 371926), and whose last one they fit. `last`: the last
        definitions of values let go of, widened with those there already."""
        before = floors.get(k)
        last = last or Written(type_, nullable)
        if before is not None:
            type_, nullable = self._joined(before.type, before.nullable, type_, nullable, own)
            if not own:
                last = Written(*self._joined(before.last, before.last_nullable, last.type, last.nullable, own))
        floors[k] = Written(type_, nullable, last.type, last.nullable)

    def _joined(
        self, a: ColumnType, a_null: bool, b: ColumnType, b_null: bool, own: bool
    ) -> tuple[ColumnType, bool]:
        try:
            type_ = self._types.join(a, b)
        except Conflict:
            # as replicator/schema/retained.py keeps: a type holding both, else the first
            type_ = holding(a, b, "mariadb") or (b if own else a)
        return type_, a_null or b_null

    def wrote(self, shard: str, table: Table, lineages: dict[str, int], downstream: Table) -> None:
        """A row of `shard` went downstream: its columns under the shard's definitions,
        the downstream columns it lacks under their defaults."""
        self.held(shard, table, lineages)
        for column in downstream.columns:
            if column.generated is None and table.column(column.name) is None:
                self._filled(column)

    def held(self, shard: str, table: Table, lineages: dict[str, int]) -> None:
        """The coordinator's documented rule, not the rows: the shard's accepted table
        says what its rows may hold (replicator/schema/retained.py keeps a column a shard lets go
        of as the shard had it, rows or not: a NULL it allowed, seed 51115)."""
        for column in table.columns:
            if column.generated is None and column.key in lineages:
                key_ = (shard, lineages[column.key])
                self._widen(self.by_lineage, key_, column.type, column.nullable, own=True)

    def orphan(self, lineage: int, column: Column) -> None:
        """Values of the lineage written under this definition that no shard vouches for."""
        self._widen(self.orphaned, lineage, column.type, column.nullable)

    def let_go(self, shard: str, kept: Iterable[int] = ()) -> None:
        """The shard no longer has its lineages but `kept` (an ALTER), or none (it left)."""
        still = set(kept)
        for (owner, lineage), written in list(self.by_lineage.items()):
            if owner == shard and lineage not in still:
                del self.by_lineage[(owner, lineage)]
                self._widen(self.orphaned, lineage, written.type, written.nullable, last=written.as_last)

    def renamed(self, old: str, new: str) -> None:
        """A downstream CHANGE COLUMN moved the values of column `old` (a key) into `new`,
        those rows got from a default too: a rename the shard vouches for (done at once)
        vouches not for them (seed 2301544); and the NULLs rows got there (F174: set NULL in
        the name a shard lacked while the rename was pending)."""
        self._fillers.pop(old, None)
        if old in self.nulls:
            self.nulls.discard(old)
            self.nulls.add(new)
        written = self.by_name.pop(old, None)
        if written is not None:
            self._widen(self.by_name, new, written.type, written.nullable, last=written.as_last)

    def lacking(self, downstream: Table, tables: Iterable[Table]) -> None:
        """The coordinator's documented rule, not the rows: while a shard lacks a column
        whose downstream default is NULL, its rows may hold NULL there (whether or not
        the story wrote one)."""
        tables = list(tables)
        for column in downstream.columns:
            lacked = any(t.column(column.name) is None for t in tables)
            if column.generated is None and lacked:
                self._filled(column)

    def cleared(self, downstream: Table, names: Iterable[str]) -> None:
        """The coordinator's documented rule, not the rows: while a rename is pending, a
        shard's rows set NULL in the name of the two it lacks (README "While a rename is
        pending"), whatever that column's default (seed 110480)."""
        for name in names:
            column = downstream.column(name)
            if column is not None and column.generated is None:
                self.nulls.add(column.key)

    def appeared(self, before: Table | None, after: Table) -> None:
        """Columns new downstream give the rows already there their default."""
        if before is None:
            return
        for column in after.columns:
            if column.generated is None and before.column(column.name) is None:
                self._filled(column)

    def table_had(self, options: TableOptions) -> None:
        """The downstream table's character set now: a string the coordinator makes to hold
        values of types having none (old DATETIMEs and the shards' BIGINT) is made in the
        table's then, which a later change of the table's does not convert (seed 1303436)."""
        self._table_sets.add((options.charset, options.collation))

    def filled_with_values(self) -> set[str]:
        """The columns (keys) rows got a default other than NULL in: a value that repeats."""
        return {k for k, sql in self._fillers.items() if sql != "NULL"}

    def _filled(self, column: Column) -> None:
        """Rows got the column's default: NULL, or a value, which needs of its type only
        what the value needs (`least_type`: an INT's 0 fits a MEDIUMINT, issue 43), and
        may need all of it ('y' of an ENUM, which a narrower one may lack: seed 230058)."""
        if _null_default(column):
            self.nulls.add(column.key)
        elif column.default is not None and not column.default.is_expression:
            if self._fillers.get(column.key) == column.default.sql:
                return  # the same value: held in the type it was filled under (seed 400709)
            self._fillers[column.key] = column.default.sql
            self._widen(self.by_name, column.key, least_type(column.default, column.type), False)

    def allows(
        self,
        shards: Column,
        downstream: Column,
        names_of: Callable[[int], set[str]],
        present: dict[str, dict[str, int]],
        options: TableOptions,
    ) -> bool:
        """`downstream` is `shards` widened at most to what rows were written under.
        `names_of`: a lineage's names now, or every name it had once no shard has it:
        its rows stay downstream in that column, which a shard may have added again as a
        lineage of its own (seed 763717). `present`: each present shard's columns by
        lineage; `options`: the downstream
        table's, whose character set a string taking both values without one of its own
        has (seed 360259: old DATEs and a shard's BIGINT in a VARCHAR)."""
        floors = [
            w
            for (shard, lineage), w in self.by_lineage.items()
            if downstream.key in names_of(lineage) and lineage not in present.get(shard, {}).values()
        ]
        floors += [w for lineage, w in self.orphaned.items() if downstream.key in names_of(lineage)]
        if downstream.key in self.by_name:
            floors.append(self.by_name[downstream.key])
        if downstream.key in self.nulls:
            floors.append(Written(shards.type, True))
        # the values as written, or each shard's as its last definition has them
        return any(
            self._allowed(shards, downstream, chosen, names_of, options)
            for chosen in (floors, [w.as_last for w in floors])
        )

    def _allowed(
        self,
        shards: Column,
        downstream: Column,
        floors: list[Written],
        names_of: Callable[[int], set[str]],
        options: TableOptions,
    ) -> bool:
        widest, nullable = shards.type, shards.nullable
        for floor in floors:
            # where the rows' type cannot join the shards', one taking both values where there
            # is one, else the shards' wins; their NULLs stay (replicator/schema/retained.py `hold`:
            # emoji rows and latin1 shards, seed 81252; CHAR(1) under VARCHAR(6), seed 51115)
            widest = holding(widest, floor.type, "mariadb") or widest
            nullable = nullable or floor.nullable
        ceilings = [widest]
        if widest != shards.type and not self._between(shards.type, shards.type, widest):
            # a type taking both: every row is converted into it, the present shards' too,
            # as they were written (replicator/schema/retained.py `hold`, seed 361243); the
            # oracle knows them only widened over time, which may name another character
            # set than the column had (seed 380081): either ceiling will do
            taking = widest
            for (_shard, lineage), w in self.by_lineage.items():
                if downstream.key in names_of(lineage):
                    taking = holding(taking, w.type, "mariadb") or taking
            ceilings.append(taking)
        made_in = sorted({(options.charset, options.collation), *self._table_sets}, key=str)
        ceilings = [
            replace(c, charset=charset, collation=collation)
            for c in ceilings
            for charset, collation in (
                made_in if c.is_character and c.charset is None and c != shards.type else [(c.charset, c.collation)]
            )
        ]
        # a string holding what no shard's type holds may be made again in the table's
        # character set, if that takes every value it had (a finishing rename's copy into
        # a new name after the shards changed the table's: seed 400211), or in its
        # collation only (a MODIFY of it after a shard set the table's back: seed 582691);
        # or in the shards' own, which the coordinator's `holding` puts first where the
        # oracle only knows the rows' types widened over time (old latin1 ENUM rows and
        # the shards' utf8mb4 SET in a utf8mb4 VARCHAR, seed 1103593)
        sets = {(options.charset, options.collation)}
        if shards.type.charset is not None:
            sets.add((shards.type.charset, shards.type.collation))
        elif shards.type.family == Family.JSON:
            # a document's text: where the coordinator's `holding` puts a JSON first, the
            # string taking both is in utf8mb4_bin (a shard's old text rows copied into a
            # rename's JSON new name, seed 112806)
            sets.add(_JSON_TEXT_SET)
        ceilings += [
            again
            for c in ceilings
            if c.is_character and c != shards.type
            for charset, collation in sorted(sets, key=str)
            if (c.charset, c.collation) != (charset, collation)
            for again in [replace(c, charset=charset, collation=collation)]
            # values, not order: the other collation may sort them otherwise
            if self._between(c, c, _sorting_as(again, c)) or holding(again, c, "mariadb") == again
        ]
        if downstream.nullable and not nullable:
            return False
        if not any(self._between(shards.type, downstream.type, c) for c in ceilings):
            return False
        # nothing else may differ (a retained NOT NULL column keeps its default or a NULL
        # one; CURRENT_TIMESTAMP takes the column's precision)
        default = downstream.default
        if downstream.type != shards.type and default == recast_default(shards.default, downstream.type, "mariadb"):
            default = shards.default  # `7` of a BIGINT is `'7'` of the VARCHAR holding both
        return _now_free(replace(downstream, type=shards.type, nullable=shards.nullable, default=default)) == _now_free(
            replace(shards, default=default if downstream.nullable != shards.nullable else shards.default)
        )

    def _between(self, low: ColumnType, mid: ColumnType, high: ColumnType) -> bool:
        if mid == high:
            return True
        try:
            return self._types.join(low, mid) == mid and self._types.join(mid, high) == high
        except Conflict:
            return False


def _sorting_as(type_: ColumnType, other: ColumnType) -> ColumnType:
    """`type_` in its character set's collation that sorts as `other`'s does."""
    if type_.charset is None or other.collation is None:
        return type_
    return replace(type_, collation=f"{type_.charset}{collation_suffix(other.collation)}")


def _now_free(column: Column) -> Column:
    def free(sql: str | None) -> str | None:
        return re.sub(r"current_timestamp\(\d*\)", "current_timestamp()", sql) if sql else sql

    default = column.default and replace(column.default, sql=free(column.default.sql))
    return replace(column, default=default, on_update=free(column.on_update))


def _null_default(column: Column) -> bool:
    return column.nullable and (column.default is None or column.default.is_null)
