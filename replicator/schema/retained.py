"""What the rows already downstream need of a column, beyond what the shards' schemas say.

The join is the least table that takes every row the shards can write *now*. Rows
written before stay downstream, and some of them no shard's current schema
vouches for: a shard that left (its rows stay, docs/design.md "Creating and dropping tables"), a column a
shard dropped or renamed away (its values stay in its rows, or
move into the new name), and the fillers rows got from the downstream default while
their shard lacked a partial column (NULL, docs/design.md "Adding a column").
A shard narrowing its own column is safe (MariaDB checked its rows upstream); those
rows are not, so the downstream column keeps a type and a nullability that hold
them while it exists. The cost, said in docs/design.md "Rows no shard vouches for": such a column may
stay wider
or nullable downstream after every shard has narrowed it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, replace

from lattice import (
    DAYS,
    NULL_DEFAULT,
    Column,
    ColumnType,
    ColumnTypes,
    Conflict,
    Default,
    Family,
    Table,
    holding,
    holds_number,
    key,
    least_type,
    recast_default,
)


@dataclass(frozen=True)
class Held:
    """The widest type a column's rows downstream hold, and whether any may be NULL;
    `filler`: the last default (SQL) rows of shards lacking the column got; `typed`:
    False while the rows hold only NULLs there (`type` is then the column's when they
    got them, and holds nothing); `numbers`: while the rows hold only fillers of INTEGER
    and DECIMAL columns (and NULLs), those numbers, which a type of either sign may hold
    (an integer's least type has one: the 1 of an INT fits the MEDIUMINT UNSIGNED every
    shard makes it later, as F180's DECIMAL did), or a string column's '', which every
    string type holds, of any character set (F183)."""

    type: ColumnType
    nullable: bool
    filler: str | None = None
    typed: bool = True
    numbers: tuple[str, ...] = ()


_NULLS_ONLY = "nulls only"  # the journal's mark of a Held that is not `typed`
_NUMBERS = "numbers "  # and of the numbers one holds, space-separated after it
_EMPTY = "''"  # the empty string, a filler every string type holds (CHAR(0) of any character set)


def _countable(column: Column) -> bool:
    """Whether the filler the column's default gives is one `Held.numbers` lists: a number
    of an INTEGER or DECIMAL column, or a string column's '' (F183: a shard that left got
    utf8mb4's '' while the others lacked the column, and every shard has it latin1 since)."""
    default = column.default
    if default is None or default.is_expression or default.is_null:
        return False
    return column.type.family in _NUMERIC or (column.type.family == Family.STRING and default.sql == _EMPTY)


def _fits(ctype: ColumnType, filler: str) -> bool:
    return ctype.family == Family.STRING if filler == _EMPTY else holds_number(ctype, filler)
_NUMERIC = (Family.INTEGER, Family.DECIMAL)


class Retained:
    """What the rows need, per column key (`held`), and whose rows they are. A column only
    fillers are held for lists the shards whose rows got them (`lacking`); once each of
    them has added the column with the value its rows hold there (or the DDL set them to
    the shard's own, with extract columns), they are the shards' rows like any other, which
    MariaDB checks when the shard changes the column, and nothing is held for them any more
    (`vouch`: issue 43, three shards' INT NOT NULL given a NULL filler while partial,
    then each made MEDIUMINT NOT NULL). Values no present shard can vouch for are
    `orphaned`: of a shard that left (`strangers`: all its rows get fillers too), or a
    column a shard dropped or renamed away. Values a pending rename moved are `pending`
    till it ends: once every shard that holds them has made it (MariaDB checked them
    against its new definition), `settle` lets them go."""

    def __init__(self, types: ColumnTypes) -> None:
        self._types = types
        self.held: dict[str, Held] = {}
        self.lacking: dict[str, set[str]] = {}
        self.orphaned: set[str] = set()
        self.pending: set[str] = set()
        self.strangers = False
        self._table: tuple[dict[str, Held], Table] | None = None
        # `lacking` as saved, kept sorted between saves: a group of a thousand shards lists
        # about as many under a column most lack, saved after every decision, and its shards
        # vouch one by one (sorting the list each time was a fifth of a decision)
        self._sorted: dict[str, list[str]] = {}

    def copy(self) -> Retained:
        """An independent record (a decision works on a copy of its group's state)."""
        other = Retained(self._types)
        other.held, other.orphaned, other.pending = dict(self.held), set(self.orphaned), set(self.pending)
        other.lacking = {k: set(shards) for k, shards in self.lacking.items()}
        other.strangers, other._table = self.strangers, self._table
        other._sorted = {k: list(listed) for k, listed in self._sorted.items()}
        return other

    def keep(self, columns: Iterable[Column], *, pending: bool = False) -> None:
        """Rows hold values of these definitions (generated columns hold none of their own);
        `pending`: values a rename moved, till it ends (`settle`)."""
        for column in columns:
            if column.generated is not None:
                continue
            self._widen(column.key, column.type, column.nullable)
            (self.pending if pending else self.orphaned).add(column.key)

    def settle(self, k: str, *, vouched: bool) -> None:
        """The rename that moved values into column `k` ended; `vouched`: every row they
        are in is a shard's that made it."""
        if k not in self.pending:
            return
        self.pending.discard(k)
        if not vouched:
            self.orphaned.add(k)
        elif k not in self.orphaned and k not in self.lacking:
            self.held.pop(k, None)

    def _filled(self, k: str, lacking: Iterable[str] | None) -> None:
        if lacking is None or self.strangers:
            self.orphaned.add(k)
        else:
            self.lacking.setdefault(k, set()).update(lacking)
            self._sorted.pop(k, None)

    def also_lacking(self, k: str, shards: Iterable[str]) -> None:
        """These shards' rows get the fillers of column `k` too (they joined since)."""
        if k in self.lacking:
            self.lacking[k].update(shards)
            self._sorted.pop(k, None)

    def vouch(self, k: str, shard: str) -> None:
        """`shard` has column `k` now, and its rows hold there what it gave them."""
        waiting = self.lacking.get(k)
        if waiting is None:
            return
        if shard in waiting:
            waiting.discard(shard)
            listed = self._sorted.get(k)
            if listed is not None:
                del listed[bisect.bisect_left(listed, shard)]
        if not waiting and k not in self.orphaned:
            self.forget(k)

    def left(self, shard: str) -> None:
        """A shard left the group; its rows stay downstream, vouched for by none."""
        self.strangers = True
        self.orphaned.update(k for k, shards in self.lacking.items() if shard in shards)

    def keep_null(self, column: Column, lacking: Iterable[str] | None = None) -> None:
        """Rows may hold NULL in this column (its downstream default filled them). A NULL
        needs no width: what the column held before stays its type (a TEXT of a shard
        that left is not the MEDIUMTEXT the column had for a while, F115), nor
        the type of the shard's rows beside them (a TIMESTAMP(3) the one shard having it
        makes DATE, where NULLs of shards lacking it kept it DATETIME(3), F148).
        `lacking`: the shards whose rows they are (None: no present shard's)."""
        self._filled(column.key, lacking)
        before = self.held.get(column.key)
        if before is not None:
            self.held[column.key] = replace(before, nullable=True)
            return
        self.held[column.key] = Held(column.type, True, typed=False)

    def keep_filler(self, column: Column, lacking: Iterable[str] | None = None) -> None:
        """Rows of shards lacking the column got its default, a value of its own ('y' of
        an ENUM), which a narrower type may lack (F75): held in the least type of
        the one it was filled under that holds the value (`least_type`): the 0 an INT
        column gave them fits the MEDIUMINT every shard narrows it to later (issue 43).
        The column widened since holds the same value: no wider type needed (a
        TINYTEXT's '' under a TEXT, F99)."""
        if column.default is None:
            return
        self._filled(column.key, lacking)
        before = self.held.get(column.key)
        if before is not None and before.filler == column.default.sql:
            return
        sql = column.default.sql
        if before is not None and before.typed and _countable(column) and _fits(before.type, sql):
            # what the rows hold already holds it as it is (a number in range, a string's ''):
            # no wider type (F186: a TEXT's '' held as a TINYTEXT beside VARCHAR(5) values
            # kept the column a TINYTEXT once every shard had it VARCHAR(15))
            numbers = tuple(dict.fromkeys((*before.numbers, sql))) if before.numbers else ()
            self.held[column.key] = replace(before, filler=sql, numbers=numbers)
            return
        # (a value, no NULL: the column's nullability is the shards')
        self._widen(column.key, least_type(column.default, column.type), False)
        numbers: tuple[str, ...] = ()
        if _countable(column):
            if before is None or not before.typed:
                numbers = (column.default.sql,)
            elif before.numbers:
                numbers = tuple(dict.fromkeys((*before.numbers, column.default.sql)))
        self.held[column.key] = replace(self.held[column.key], filler=column.default.sql, numbers=numbers)

    def _widen(self, k: str, type_: ColumnType, nullable: bool) -> None:
        before = self.held.get(k)
        if before is None or not before.typed:
            # NULLs held before need no width (nor have a filler): the first values set the type
            self.held[k] = Held(type_, nullable or (before is not None and before.nullable))
            return
        if before.numbers and all(_fits(type_, n) for n in before.numbers):
            # the rows held only fillers, each of which these values' type holds as it is: it
            # is the type, not its join with the fillers' least types (F186, the other order)
            self.held[k] = Held(type_, before.nullable or nullable, before.filler)
            return
        try:
            widest = self._types.join(before.type, type_)
        except Conflict:
            # a type holding both (a finishing rename's copy brings a paused shard's JSON
            # into DECIMAL rows, F86); else the first stays: values moved here may
            # have been checked by the shard that changed the column since, upstream
            # (F68), and `hold` meets the shards' type
            widest = holding(before.type, type_, self._types.flavor) or before.type
        self.held[k] = Held(widest, before.nullable or nullable, before.filler)

    def move(self, old: str, new: str, *, nulls: bool = True) -> None:
        """The values of column `old` (a key) move into `new` (a rename's copy);
        `nulls`: and whether it may hold NULL."""
        held = self.held.get(old)
        if held is None:
            return
        if held.typed:
            self._widen(key(new), held.type, held.nullable and nulls)
            # whose values they are goes with them (rows of shards lacking the old name
            # may lack the new one: no longer theirs to vouch for)
            pending = old in self.pending and old not in self.orphaned and old not in self.lacking
            (self.pending if pending else self.orphaned).add(key(new))
        elif nulls:
            self.keep_null(Column(new, held.type))

    def forget(self, k: str) -> None:
        """Column `k` (a key) holds none of the rows' values any more (they moved away)."""
        self.held.pop(k, None)
        self.lacking.pop(k, None)
        self._sorted.pop(k, None)
        self.orphaned.discard(k)
        self.pending.discard(k)

    def forget_all_but(self, keys: Iterable[str]) -> None:
        """A column no shard has is dropped downstream, and its rows' values with it."""
        present = set(keys)
        self.held = {k: h for k, h in self.held.items() if k in present}
        self.lacking = {k: shards for k, shards in self.lacking.items() if k in present}
        self._sorted = {k: listed for k, listed in self._sorted.items() if k in present}
        self.orphaned &= present
        self.pending &= present

    def hold(self, column: Column, downstream: Table | None = None) -> Column:
        """`column` as the join has it, widened to hold the rows already downstream.
        Where the shards now have a type the old values cannot join (another collation,
        another family), a type taking both the old values and the shards' (`holding`):
        the server cannot convert old values the shards' type lacks (an emoji into
        latin1, a JSON object into an INT), and refuses such a change (F60). Where
        there is none, the shards' type wins: the conflict is theirs to resolve, not the
        old rows'."""
        held = self.held.get(column.key)
        if held is None or column.generated is not None:
            return column
        if not held.typed or (held.numbers and all(_fits(column.type, n) for n in held.numbers)):
            held = replace(held, type=column.type)  # NULLs fit any type; these fillers fit this one
        both = holding(column.type, held.type, self._types.flavor)
        needed = both is not None and both != column.type and downstream is not None
        apart = needed and self._join(column.type, held.type) is None
        now = downstream.column(column.name) if apart else None
        # (a day or time of the shards' rows needs no finer fraction than the DATETIME
        # holding the old values has: their shard dropped it upstream, narrowing them into
        # its type, as converting them here does: a TIMESTAMP(6) made DATE while a shard
        # that left had a TIMESTAMP is a DATETIME, F157)
        if (
            now is not None
            and now.generated is None
            and self._join(column.type, both) != both
            and not {column.type.family, both.family, now.type.family} <= DAYS
        ):
            # every row there is converted into a type of another family, not into the
            # shards': the shards' own rows too, as the column holds them `downstream` now
            # (SET text that a shard's new TINYINT takes as a number upstream is text here,
            # F91). Within a family the shards' rows convert as they did upstream,
            # where MariaDB checked them (a BIGINT made MEDIUMINT again, F98), so
            # also into a type only widening theirs (a VARCHAR(1) held as VARCHAR(8) for
            # old MEDIUMINT text, in the utf8mb3 the shards now have: F143).
            both = holding(both, now.type, self._types.flavor) or both
        if both is not None and both != column.type:
            column = replace(
                column, type=both, default=recast_default(column.default, both, self._types.flavor)
            )
        if held.nullable and not column.nullable:
            # a partial column keeps its filler for the rows of shards lacking it
            default = column.default if column.default is not None or column.partial else NULL_DEFAULT
            column = replace(column, nullable=True, default=default)
        return column

    def _join(self, a: ColumnType, b: ColumnType) -> ColumnType | None:
        try:
            return self._types.join(a, b)
        except Conflict:
            return None

    def to_table(self) -> Table:
        # the same object while nothing changed: the coordinator saves it after every decision
        if self._table is None or self._table[0] != self.held:
            # the filler rides in the default: the journal saves this table as it is
            held = sorted(self.held.items())
            columns = tuple(Column(k, h.type, h.nullable, _default(h), comment=_mark(h)) for k, h in held)
            self._table = (dict(self.held), Table("retained", columns))
        return self._table[1]

    def restore(self, table: Table, origins: dict | None = None) -> None:
        """`origins`: `origins_to_data`'s; None (a state saved before them): no shard
        vouches for anything held."""
        self.held = {c.name: _restored(c) for c in table.columns}
        self._sorted = {}
        if origins is None:
            self.lacking, self.orphaned, self.pending, self.strangers = {}, set(self.held), set(), True
            return
        self.lacking = {k: set(shards) for k, shards in origins["lacking"].items()}
        self.orphaned = set(origins["orphaned"])
        self.pending = set(origins.get("pending", ()))
        self.strangers = origins["strangers"]

    def _listed(self, k: str) -> list[str]:
        listed = self._sorted.get(k)
        if listed is None:
            listed = self._sorted[k] = sorted(self.lacking[k])
        return listed

    def origins_to_data(self) -> dict:
        return {
            # (copies: a store may keep what it is given, and the lists change in place)
            "lacking": {k: list(self._listed(k)) for k in sorted(self.lacking)},
            "orphaned": sorted(self.orphaned),
            "pending": sorted(self.pending),
            "strangers": self.strangers,
        }


def _mark(held: Held) -> str | None:
    if not held.typed:
        return _NULLS_ONLY
    return _NUMBERS + " ".join(held.numbers) if held.numbers else None


def _restored(column: Column) -> Held:
    filler = column.default and column.default.sql
    if column.comment == _NULLS_ONLY:
        return Held(column.type, column.nullable, filler, typed=False)
    numbers = ()
    if column.comment and column.comment.startswith(_NUMBERS):
        numbers = tuple(column.comment[len(_NUMBERS) :].split())
    return Held(column.type, column.nullable, filler, numbers=numbers)


def _default(held: Held) -> Default | None:
    return None if held.filler is None else Default(held.filler)
