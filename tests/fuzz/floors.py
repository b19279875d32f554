"""What the rows a story wrote downstream were written under: P5's allowance.

The product keeps a downstream column wider (or nullable) than every shard's when rows
already downstream may need it (docs/design.md "Rows no shard vouches for"). The oracle does
not take its word for it, and has no type lattice of its own: it records, from the rows
it writes itself and the product's documented rules, every definition each shard's
values of a column were written under (by lineage, so a rename carries them to the new
name), the values rows got from a downstream default, and where rows got NULL. Once
every shard has the same table, a downstream column other than the shards' is allowed
when MariaDB says (`Holds`, rows stored in both and read back) that

- it holds the shards' values and every value so written by shards that no longer vouch
  for it (they left, or dropped or renamed the column away: a shard still holding it
  narrowed its own rows upstream, which MariaDB checked),
- the shards' column does not hold them all (there is a reason to be wider), and
- no type the story gave those values (the shards', or one they were written under)
  holds them all and is narrower than it (the product keeps nothing wider than needs).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from fractions import Fraction

import pymysql

from tests.fuzz.model import TEXT_CAPACITY, Column, Default, Family, Table, Type, family_of
from tests.fuzz.rows import read_alike, same_value, sample_values
from tests.fuzz.sql import quote_identifier, run


@dataclass(frozen=True)
class Value:
    """A default's value as rows got it: its SQL, in the type it was given in."""

    sql: str
    type: Type


Item = Type | Value  # what values were written as: any of a type's, or one


@dataclass(frozen=True)
class Written:
    """Values of a column written under these definitions: all of them over time
    (`items`, `nullable`), and the last ones (`last`, `last_nullable`): a shard's own rows
    follow its narrowing upstream, which MariaDB checked, so when it lets go of the
    column they fit its last definition (seed 453984)."""

    items: frozenset[Item]
    nullable: bool
    last: frozenset[Item] | None = None
    last_nullable: bool = False

    def __post_init__(self) -> None:
        if self.last is None:
            object.__setattr__(self, "last", self.items)
            object.__setattr__(self, "last_nullable", self.nullable)

    @property
    def as_last(self) -> Written:
        return Written(self.last, self.last_nullable)


class Floors:
    def __init__(self) -> None:
        self.by_lineage: dict[tuple[str, int], Written] = {}  # (shard, lineage)
        # written by a shard that since dropped, renamed away or left with the lineage: no
        # longer vouched for, even if the shard has the lineage again later (a column
        # added again starts from its default upstream, its old values stay downstream)
        self.orphaned: dict[int, Written] = {}
        self.by_name: dict[str, Written] = {}  # values from a downstream default
        # NULLs from one, or set by a pending rename: they need the column nullable, of any
        # type (docs/design.md "While a rename is pending", F164)
        self.nulls: set[str] = set()
        self._fillers: dict[str, str] = {}  # the last value rows got from one
        # per pending rename (old, new) and the lineage of its new name: every definition
        # its old name had downstream meanwhile, which the copy that ends it moves (F68),
        # orphaned then; and the one it had when the rename started, whose values the first
        # CHANGE moved into the new name, all a cancel brings back of it (F56, F185)
        self._awaiting: dict[tuple[tuple[str, str], int], Written] = {}
        self._at_start: dict[tuple[tuple[str, str], int], Written] = {}

    def _widen(
        self,
        floors: dict,
        k,
        items: Iterable[Item],
        nullable: bool,
        own: bool = False,
        last: Written | None = None,
    ) -> None:
        """`own`: a shard's definitions of its own column, whose last one its rows fit.
        `last`: the last definitions of values let go of, with those there already."""
        before = floors.get(k)
        items = frozenset(items)
        last = last or Written(items, nullable)
        if before is not None:
            items, nullable = items | before.items, nullable or before.nullable
            if not own:
                last = Written(last.items | before.last, last.nullable or before.last_nullable)
        floors[k] = Written(items, nullable, last.items, last.nullable)

    def wrote(self, shard: str, table: Table, lineages: dict[str, int], downstream: Table) -> None:
        """A row of `shard` went downstream: its columns under the shard's definitions,
        the downstream columns it lacks under their defaults."""
        self.held(shard, table, lineages)
        for column in downstream.columns:
            if column.generated is None and table.column(column.name) is None:
                self._filled(column)

    def held(self, shard: str, table: Table, lineages: dict[str, int]) -> None:
        """The product's documented rule, not the rows: the shard's accepted table says
        what its rows may hold (docs/design.md "Rows no shard vouches for": a column a shard lets
        go of is kept as the shard had it, rows or not: a NULL it allowed, seed 51115)."""
        for column in table.columns:
            if column.generated is None and column.key in lineages:
                key_ = (shard, lineages[column.key])
                self._widen(self.by_lineage, key_, [column.type], column.nullable, own=True)

    def orphan(self, lineage: int, column: Column) -> None:
        """Values of the lineage written under this definition that no shard vouches for."""
        self._widen(self.orphaned, lineage, [column.type], column.nullable)

    def while_pending(self, rename: tuple[str, str], lineage: int, column: Column) -> None:
        """The old name of a pending rename (keys) has this definition downstream."""
        self._widen(self._awaiting, (rename, lineage), [column.type], column.nullable)
        self._at_start.setdefault((rename, lineage), Written(frozenset([column.type]), column.nullable))

    def rename_ended(self, rename: tuple[str, str], *, cancelled: bool) -> None:
        """The rename ended: finished, the copy moved the old name's values into the new
        name as they were, vouched for by none; cancelled, the values written to the old
        name since it started stayed there, where their shards' own changes reached them
        (a shard that never renamed narrowed them in place), and what comes back from the
        new name is what the first CHANGE moved there, as the old name had it then, and
        the renaming shards' own values (their lineage's floors)."""
        for (pair, lineage), written in list(self._awaiting.items()):
            if pair == rename:
                del self._awaiting[(pair, lineage)]
                first = self._at_start.pop((pair, lineage))
                written = first if cancelled else written
                self._widen(self.orphaned, lineage, written.items, written.nullable, last=written.as_last)

    def let_go(self, shard: str, kept: Iterable[int] = ()) -> None:
        """The shard no longer has its lineages but `kept` (an ALTER), or none (it left)."""
        still = set(kept)
        for (owner, lineage), written in list(self.by_lineage.items()):
            if owner == shard and lineage not in still:
                del self.by_lineage[(owner, lineage)]
                self._widen(self.orphaned, lineage, written.items, written.nullable, last=written.as_last)

    def renamed(self, old: str, new: str) -> None:
        """A downstream CHANGE COLUMN moved the values of column `old` (a key) into `new`,
        those rows got from a default too (seed 2301544), and the NULLs rows got there
        (F174: set NULL in the name a shard lacked while the rename was pending)."""
        self._fillers.pop(old, None)
        if old in self.nulls:
            self.nulls.discard(old)
            self.nulls.add(new)
        written = self.by_name.pop(old, None)
        if written is not None:
            self._widen(self.by_name, new, written.items, written.nullable, last=written.as_last)

    def lacking(self, downstream: Table, tables: Iterable[Table]) -> None:
        """The documented rule, not the rows: while a shard lacks a column whose downstream
        default is NULL, its rows may hold NULL there (whether or not the story wrote one)."""
        tables = list(tables)
        for column in downstream.columns:
            lacked = any(t.column(column.name) is None for t in tables)
            if column.generated is None and lacked:
                self._filled(column)

    def cleared(self, downstream: Table, names: Iterable[str]) -> None:
        """The documented rule, not the rows: while a rename is pending, a shard's rows set
        NULL in the name of the two it lacks (docs/design.md "While a rename is pending"), whatever
        that column's default (seed 110480)."""
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

    def filled_with_values(self) -> set[str]:
        """The columns (keys) rows got a default other than NULL in: a value that repeats."""
        return {k for k, sql in self._fillers.items() if sql.upper() != "NULL"}

    def _filled(self, column: Column) -> None:
        """Rows got the column's default: NULL, or a value, which needs of its type only
        what the value needs (an INT's 0 fits a MEDIUMINT, issue 43)."""
        default = column.default
        if column.nullable and (default is None or default.is_null):
            self.nulls.add(column.key)
        elif default is not None and not default.is_expression:
            if self._fillers.get(column.key) == default.sql:
                return  # the same value: held in the type it was filled under (seed 400709)
            self._fillers[column.key] = default.sql
            self._widen(self.by_name, column.key, [Value(default.sql, column.type)], False)

    def allows(
        self,
        shards: Column,
        downstream: Column,
        names_of: Callable[[int], set[str]],
        present: dict[str, dict[str, int]],
        holds: Holds,
    ) -> bool:
        """`downstream` is `shards` widened at most to what rows were written under.
        `names_of`: a lineage's names now, or every name it had once no shard has it:
        its rows stay downstream in that column, which a shard may have added again as a
        lineage of its own (seed 763717). `present`: each present shard's columns by
        lineage."""
        floors = [
            w
            for (shard, lineage), w in self.by_lineage.items()
            if downstream.key in names_of(lineage) and lineage not in present.get(shard, {}).values()
        ]
        floors += [w for lineage, w in self.orphaned.items() if downstream.key in names_of(lineage)]
        if downstream.key in self.by_name:
            floors.append(self.by_name[downstream.key])
        if downstream.key in self.nulls:
            floors.append(Written(frozenset(), True))
        # the values as written, or each shard's as its last definition has them
        return any(
            _allowed(shards, downstream, chosen, holds) for chosen in (floors, [w.as_last for w in floors])
        )


def _allowed(shards: Column, downstream: Column, floors: list[Written], holds: Holds) -> bool:
    nullable = shards.nullable or any(w.nullable for w in floors)
    if downstream.nullable and not nullable:
        return False
    if downstream.type != shards.type:
        items = {i for w in floors for i in w.items if i != shards.type}
        if not items or not holds(downstream.type, shards.type):
            return False
        if not all(holds(downstream.type, i) for i in items):
            return False
        if all(holds(shards.type, i) for i in items):
            return False  # the shards' type holds every value: no reason to be wider
        # (of its character set and collation: which one a string holding other values is
        # made in is the product's documented choice, docs/design.md "Rows no shard vouches for")
        made = (downstream.type.charset, downstream.type.collation)
        story = {
            t
            for t in (shards.type, *(i for i in items if isinstance(i, Type)))
            if (t.charset, t.collation) == made
        }
        story.discard(downstream.type)
        if any(
            holds(t, shards.type)
            and all(holds(t, i) for i in items)
            and holds(downstream.type, t)
            and not holds(t, downstream.type)
            for t in story
        ):
            return False  # a narrower type of the story holds them all
    # nothing else may differ (a retained NOT NULL column keeps its default or a NULL one;
    # CURRENT_TIMESTAMP takes the column's precision)
    default = downstream.default
    if downstream.type != shards.type and _same_value(default, shards.default):
        default = shards.default  # `7` of a BIGINT is `'7'` of the VARCHAR holding both
    return _now_free(
        replace(downstream, type=shards.type, nullable=shards.nullable, default=default)
    ) == _now_free(
        replace(shards, default=default if downstream.nullable != shards.nullable else shards.default)
    )


def _same_value(a: Default | None, b: Default | None) -> bool:
    """The two defaults give rows one value: `7` and `'7'`, `'2020-01-02'` and the DATETIME
    `'2020-01-02 00:00:00'` (a DATE in a DATETIME is its midnight)."""
    if a is None or b is None:
        return a is b
    x, y = _unquoted(a.sql), _unquoted(b.sql)
    if x == y:
        return True
    try:
        return dt.datetime.fromisoformat(x) == dt.datetime.fromisoformat(y)
    except ValueError:
        return same_value(x, y)


def _unquoted(sql: str) -> str:
    if len(sql) > 1 and sql.startswith("'") and sql.endswith("'"):
        return sql[1:-1].replace("''", "'")
    return sql


def _now_free(column: Column) -> Column:
    def free(sql: str | None) -> str | None:
        return re.sub(r"current_timestamp\(\d*\)", "current_timestamp()", sql) if sql else sql

    default = column.default and replace(column.default, sql=free(column.default.sql))
    return replace(column, default=default, on_update=free(column.on_update))


class Holds:
    """Whether a column of one type takes every value of another (its sample values:
    the extremes and a typical one), or a default's value, reading them back equal: asked
    of the downstream server, in a temporary table, each question once."""

    def __init__(self, conn, db: str):
        self.conn, self.db = conn, db
        self._known: dict[tuple[Type, Item], bool] = {}
        self._bytes: dict[tuple[str | None, str | None], list[tuple[int, int]]] = {}

    def __call__(self, wide: Type, item: Item) -> bool:
        if wide == item:
            return True
        answer = self._known.get((wide, item))
        if answer is None:
            answer = self._known[(wide, item)] = self._ask(wide, item)
        return answer

    def _ask(self, wide: Type, item: Item) -> bool:
        narrow = item.type if isinstance(item, Value) else item
        if isinstance(item, Type) and not self._long_enough(wide, narrow):
            return False
        probe = f"{quote_identifier(self.db)}.fz_holds"
        run(self.conn, f"DROP TEMPORARY TABLE IF EXISTS {probe}")
        try:
            run(
                self.conn,
                f"CREATE TEMPORARY TABLE {probe} (n INT PRIMARY KEY, a {narrow.sql()} NULL, b {wide.sql()} NULL)",
            )
        except pymysql.err.MySQLError:
            return False
        try:
            # a value as a row of the narrow type stores it, written into the wide one as the
            # applier copies a row: read back alike, or the wide type does not hold it
            if isinstance(item, Value):
                tries: list[tuple[str, list | None]] = [(item.sql, None)]
            else:
                tries = [("%s", [v]) for v in sample_values(narrow)]
            for n, (value_sql, args) in enumerate(tries):
                try:
                    run(self.conn, f"INSERT INTO {probe} (n, a) VALUES ({n}, {value_sql})", args)
                except pymysql.err.MySQLError:
                    continue  # not a value of the narrow type (a sample beyond it)
                ((stored,),) = run(self.conn, f"SELECT a FROM {probe} WHERE n = {n}")
                try:
                    run(self.conn, f"UPDATE {probe} SET b = %s WHERE n = {n}", [stored])
                except pymysql.err.MySQLError:
                    return False
                ((got,),) = run(self.conn, f"SELECT b FROM {probe} WHERE n = {n}")
                if not read_alike(stored, got, narrow, wide):
                    return False
            return True
        finally:
            run(self.conn, f"DROP TEMPORARY TABLE IF EXISTS {probe}")

    def _long_enough(self, wide: Type, narrow: Type) -> bool:
        """A string type's longest values are too long to write here (a latin1 MEDIUMTEXT
        holds 16M characters), so their length is the manual's ("String Data Types"): a
        CHAR or VARCHAR holds its length in characters, a TEXT its capacity in bytes. In
        the wide type's character set a character takes the bytes MariaDB says (a latin1
        '€', one byte, is three of utf8mb4, seed 1139): a narrow CHAR's or VARCHAR's
        longest value is its length in the widest of them, a TEXT's its capacity in the
        one growing most. A JSON column is the LONGTEXT it is made as: a document may be as
        long (F182: a shard's documents that left are no TEXT's, whatever the samples)."""
        if not (_textual(wide) and _textual(narrow)):
            return True
        wide, narrow = (replace(t, name="longtext") if t.json else t for t in (wide, narrow))
        sizes = self._sizes(narrow.charset, wide.charset)  # (bytes in narrow, bytes in wide)
        if narrow.name in ("char", "varchar"):
            chars = narrow.length or 0
            if wide.name in ("char", "varchar"):
                return chars <= (wide.length or 0)
            return chars * max(w for _, w in sizes) <= TEXT_CAPACITY[wide.name]
        if wide.name in ("char", "varchar"):
            return False  # a TEXT holds more characters than a CHAR or VARCHAR can have
        return TEXT_CAPACITY[narrow.name] * max(Fraction(w, n) for n, w in sizes) <= TEXT_CAPACITY[wide.name]

    def _sizes(self, narrow: str | None, wide: str | None) -> list[tuple[int, int]]:
        """The bytes each candidate character of `narrow` takes there and in `wide`."""
        key = (narrow, wide)
        if key not in self._bytes:
            rows = run(
                self.conn,
                "SELECT LENGTH(CONVERT(c USING {n})), LENGTH(CONVERT(CONVERT(c USING {n}) USING {w})) "
                "FROM (SELECT %s AS c UNION ALL SELECT %s UNION ALL SELECT %s UNION ALL SELECT %s "
                "UNION ALL SELECT %s) cs WHERE CONVERT(CONVERT(c USING {n}) USING utf8mb4) = c".format(
                    n=narrow or "utf8mb4", w=wide or "utf8mb4"
                ),
                list(_CANDIDATES),
            )
            self._bytes[key] = [(int(n), int(w)) for n, w in rows] or [(1, 1)]
        return self._bytes[key]


def _textual(t: Type) -> bool:
    return family_of(t) == Family.STRING or t.json


# characters of one to four bytes in utf8mb4: one of them is the widest of each story charset
_CANDIDATES = ("x", "é", "€", "中", "😀")

