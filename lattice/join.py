"""The schema lattice (docs/design.md "The lattice of compatibility"): `join(a, b)` is the least
compatible table that
accepts every row either table accepts, with the same effect; `compare` orders two
tables by compatibility. Built from the pieces in `lattice.algebra`:

    table   = columns × indexes × checks × options      (Product of keyed maps)
    column  = ABSENT | generated | normal               (ColumnLattice)
    normal  = name × type × nullable × default × ...     (Product)

Rules that span fields run after the pieces (`_settle`): a partial column leaves
every index and check that reads it, AUTO_INCREMENT leaves a column no key leads,
an index the widened columns make too long is dropped, and a row too wide is a
conflict. Each rule only ever removes constraints or refuses, so the join stays
commutative, associative and idempotent (checked by the hypothesis tests).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from functools import cache

from lattice.algebra import (
    ABSENT,
    INCOMPARABLE,
    Boolean,
    Conflict,
    Droppable,
    KeyedMap,
    Lattice,
    Minimum,
    Optional,
    Ordering,
    Product,
    Singleton,
    combine,
)
from lattice.bounds import always_fits
from lattice.charsets import collation_suffix, mbmaxlen, python_codec, recoding
from lattice.flavor import Flavor
from lattice.keys import PrimaryKeys, holds_key, is_primary
from lattice.limits import MAX_ROW_BYTES, key_problem, row_bytes
from lattice.model import (
    DAYS,
    INTEGER_BITS,
    NULL_DEFAULT,
    TEXT_CAPACITY,
    Column,
    ColumnType,
    Default,
    Family,
    Index,
    IndexKind,
    Table,
    integer_range,
    key,
)
from lattice.render import materialize
from lattice.sqltext import canonical_expression, quote_string, unquote
from lattice.typejoin import ColumnTypes


@dataclass(frozen=True)
class JoinConflict:
    """Two schemas with no join: names the column (None for the whole table)."""

    column: str | None
    reason: str
    path: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = f"column {self.column}" if self.column else "table"
        return f"{where}: {self.reason}"


def _describe_defaults(a, b) -> str:
    return f"defaults {a.sql} and {b.sql} differ"


class ColumnLattice(Lattice):
    """One column name across shards.

    - docs/design.md "Adding and dropping columns": a normal column missing on one side
      (ABSENT) joins as present, marked partial (so it gets a default and stays out
      of every key).
    - docs/design.md "Generated columns": a generated column missing is more compatible,
      so generated ∨ ABSENT = ABSENT, and two different generated definitions meet
      at ABSENT.
    - docs/design.md "Stored generated columns": generated ∨ normal = normal, partial
      (rows from the generated side omit the column).
    """

    def __init__(self, flavor: Flavor | str):
        flavor = Flavor.parse(flavor)
        self.normal = Product(
            name=Minimum(),  # names compare case-insensitively; keep one spelling
            type=ColumnTypes(flavor),
            nullable=Boolean(top=True),  # docs/design.md "Nullability": NULL is more compatible
            default=Optional(Singleton(_describe_defaults)),  # docs/design.md "Defaultness"
            on_update=Droppable(top=None),  # rows carry every value, so dropping ON UPDATE loses nothing
            auto_increment=Boolean(top=False),  # kept only where every shard has it
            comment=Droppable(top=None),  # comments do not change accepted rows
            partial=Boolean(top=True),
        )

    @staticmethod
    def _is_normal(c) -> bool:
        return c is not ABSENT and c.generated is None

    def join(self, a, b):
        if a == b:
            return a
        a_normal, b_normal = self._is_normal(a), self._is_normal(b)
        if a_normal and b_normal:
            return self.normal.join(a, b)
        if a_normal or b_normal:
            return replace(a if a_normal else b, partial=True)
        return ABSENT  # generated ∨ ABSENT, or two different generated columns

    def compare(self, a, b) -> Ordering:
        if a == b:
            return 0
        a_normal, b_normal = self._is_normal(a), self._is_normal(b)
        if a_normal and b_normal:
            return self.normal.compare(a, b)
        if a_normal or b_normal:
            n = a if a_normal else b
            if not n.partial:
                return INCOMPARABLE
            return 1 if a_normal else -1
        if a is ABSENT or b is ABSENT:
            return 1 if a is ABSENT else -1
        return INCOMPARABLE


def _index_kinds(a: IndexKind, b: IndexKind) -> IndexKind:
    # A plain index accepts every row a unique one does, on the same key parts.
    if {a, b} == {IndexKind.UNIQUE, IndexKind.PLAIN}:
        return IndexKind.PLAIN
    raise Conflict(f"index kinds {a} and {b} differ")


class _IndexKind(Lattice):
    def join(self, a, b):
        return a if a == b else _index_kinds(a, b)


class _Indexes(Lattice):
    """One index name across shards: the primary key by its columns (`lattice.keys`), the
    others matched whole and dropped where shards differ."""

    def __init__(self) -> None:
        # (an index's comment changes no row: what the shards agree on, as a table's)
        self.other = Droppable(Product(name=Minimum(), kind=_IndexKind(), comment=Droppable(top=None)))
        self.primary = PrimaryKeys()

    def _of(self, a, b) -> Lattice:
        return self.primary if is_primary(a) or is_primary(b) else self.other

    def join(self, a, b):
        return self._of(a, b).join(a, b)

    def compare(self, a, b) -> Ordering:
        return self._of(a, b).compare(a, b)


class TableLattice(Lattice[Table]):
    def __init__(self, flavor: Flavor | str):
        self.flavor = flavor = Flavor.parse(flavor)
        self.column = ColumnLattice(flavor)
        self.columns = KeyedMap(self.column)
        # docs/design.md "Constraints and indices": fewer constraints are more compatible;
        # indexes and checks are matched by name and dropped where shards differ; the
        # primary key is on the columns of every shard's (lattice/keys.py).
        self.indexes = KeyedMap(_Indexes())
        self.checks = KeyedMap(Droppable(Product(name=Minimum(), enforced=Boolean(top=False))))
        # Table options do not change accepted rows: keep what all shards agree on.
        self.options = Product(
            engine=Droppable(top=None),
            charset=Droppable(top=None),
            collation=Droppable(top=None),
            comment=Droppable(top=None),
        )

    def join(self, a: Table, b: Table) -> Table:
        if a == b:
            return a
        try:
            columns = self.columns.join(a.column_map, b.column_map)
        except Conflict as exc:
            raise exc.at("columns") from None
        indexes = self.indexes.join(a.index_map, b.index_map)
        checks = self.checks.join(a.check_map, b.check_map)
        options = self.options.join(a.options, b.options) if a.options != b.options else a.options
        order = [c.key for c in a.columns] + [c.key for c in b.columns if c.key not in a.column_map]
        joined = Table(
            a.name,
            tuple(columns[k] for k in order if k in columns),
            _ordered(indexes, a.indexes, b.indexes),
            _ordered(checks, a.checks, b.checks),
            options,
        )
        return settle(joined, self.flavor)

    def compare(self, a: Table, b: Table) -> Ordering:
        if a == b:
            return 0
        parts = [
            self.columns.compare(a.column_map, b.column_map),
            self.indexes.compare(a.index_map, b.index_map),
            self.checks.compare(a.check_map, b.check_map),
            self.options.compare(a.options, b.options),
        ]
        return combine(parts)


def _ordered(joined: dict, first: tuple, second: tuple) -> tuple:
    keys = [x.key for x in first] + [x.key for x in second if x.key not in {y.key for y in first}]
    return tuple(joined[k] for k in keys if k in joined)


def settle(table: Table, flavor: Flavor = Flavor.MARIADB) -> Table:
    """The cross-field rules of a joined table (see the module docstring)."""
    columns = {c.key: c for c in table.columns}
    # Generated columns whose inputs left the table leave too (docs/design.md "Generated columns": missing
    # generated columns are more compatible).
    _drop_generated_reading(columns, lambda read: not read <= columns.keys())
    # "outside any key": an index or check that reads a partial or missing column goes.
    full = {k for k, c in columns.items() if not c.partial}
    indexes = [ix for ix in table.indexes if _index_columns(ix) <= full]
    # (a primary key also on NOT NULL columns only: the union of two shards' keys may
    # take a column another shard leaves nullable)
    indexes = [ix for ix in indexes if not is_primary(ix) or holds_key(ix, columns)]
    checks = [ch for ch in table.checks if ch.columns <= full]
    # An index the widened columns made invalid for the server goes as well (a shard's
    # own plain index becomes a prefix one on MariaDB, see
    # lattice.limits.settled_prefixes, and when every shard has that the join keeps it).
    indexes = [ix for ix in indexes if key_problem(ix, columns, flavor) is None]
    indexes = [_spelled_as_columns(ix, columns) for ix in indexes]
    kept = without_stray_auto_increment(
        tuple(columns[c.key] for c in table.columns if c.key in columns), tuple(indexes)
    )
    size = row_bytes(kept)
    if size > MAX_ROW_BYTES:
        raise Conflict(f"the joined row would take {size} bytes, more than the server's {MAX_ROW_BYTES}")
    if (kept, tuple(indexes), tuple(checks)) == (table.columns, table.indexes, table.checks):
        return table
    return replace(table, columns=kept, indexes=tuple(indexes), checks=tuple(checks))


def _spelled_as_columns(index: Index, columns: Mapping[str, Column]) -> Index:
    """The index with its parts spelled as the joined columns are: the server renames a
    key's part with its column, and the join of `c1` and `C1` keeps one spelling, which
    may be the other shard's (seen in the DDL corpus: a case-only CHANGE of a key column)."""
    parts = tuple(
        replace(p, column=columns[key(p.column)].name)
        if key(p.column) in columns and columns[key(p.column)].name != p.column
        else p
        for p in index.parts
    )
    return index if parts == index.parts else replace(index, parts=parts)


def without_stray_auto_increment(
    columns: tuple[Column, ...], indexes: tuple[Index, ...]
) -> tuple[Column, ...]:
    """The columns, AUTO_INCREMENT left only where a key leads with the column: the server
    requires it to lead one."""
    leading = {ix.parts[0].column.lower() for ix in indexes if ix.parts}
    return tuple(
        replace(c, auto_increment=False) if c.auto_increment and c.key not in leading else c for c in columns
    )


def _drop_generated_reading(columns: dict[str, Column], drops: Callable[[set[str]], bool]) -> None:
    """Drop from `columns` each generated column for whose inputs `drops` says so,
    repeating, as one may feed another."""
    changed = True
    while changed:
        changed = False
        for k, c in list(columns.items()):
            if c.generated is not None and drops(canonical_expression(c.generated.expression).columns):
                del columns[k]
                changed = True


def without_generated_reading(table: Table, inputs: set[str]) -> Table:
    """`table` without the generated columns that read any of `inputs` (lower-cased
    names), directly or through another one so dropped, nor the indexes and checks over
    them: as a generated column missing joins (docs/design.md "Generated columns")."""
    columns = {c.key: c for c in table.columns}
    _drop_generated_reading(columns, lambda read: bool(read & inputs) or not read <= columns.keys())
    if len(columns) == len(table.columns):
        return table
    indexes = tuple(ix for ix in table.indexes if _index_columns(ix) <= columns.keys())
    checks = tuple(ch for ch in table.checks if ch.columns <= columns.keys())
    return replace(table, columns=tuple(columns.values()), indexes=indexes, checks=checks)


def _index_columns(index: Index) -> set[str]:
    names: set[str] = set()
    for part in index.parts:
        if part.column.startswith("("):
            names |= canonical_expression(part.column).columns
        else:
            names.add(part.column.lower())
    return names


@cache
def table_lattice(flavor: Flavor | str = Flavor.MARIADB) -> TableLattice:
    return TableLattice(Flavor.parse(flavor))


def _conflict(exc: Conflict) -> JoinConflict:
    path = exc.path
    column = path[1] if len(path) > 1 and path[0] == "columns" else None
    return JoinConflict(column, exc.reason, path)


def join(a: Table, b: Table, flavor: Flavor | str = Flavor.MARIADB) -> Table | JoinConflict:
    try:
        return table_lattice(flavor).join(a, b)
    except Conflict as exc:
        return _conflict(exc)


def join_all(tables, flavor: Flavor | str = Flavor.MARIADB) -> Table | JoinConflict:
    """The join of one or more tables (the downstream schema of a shard group)."""
    lattice = table_lattice(flavor)
    tables = list(tables)
    if not tables:
        raise ValueError("join_all needs at least one table")
    result = tables[0]
    try:
        for t in tables[1:]:
            result = lattice.join(result, t)
    except Conflict as exc:
        return _conflict(exc)
    return result


def compare(a: Table, b: Table, flavor: Flavor | str = Flavor.MARIADB) -> Ordering:
    return table_lattice(flavor).compare(a, b)


# -- keeps_rows: when a version bump is minor -------------------------------------------------


def keeps_rows(old: Table, new: Table, flavor: Flavor | str = Flavor.MARIADB) -> bool:
    """Every row `old` accepts, `new` accepts and reads back as the same value (seeds
    000, 001: the version bump is minor exactly then; the fuzzer's P4, whose
    conversions are those of tests/fuzz/rows.py `same_value`). Both tables are taken
    as the flavor holds them (`materialize`: a partial column with its filler).

    Not the lattice order: a column one table lacks is partial in their join, so
    `compare` calls T(id) and T(id, x NULL) incomparable, yet every row of the first
    fits the second; and some type changes the lattice calls incomparable keep every
    value. Column by column:

    Defaults. docs/design.md "Defaultness": different defaults give different rows for
    `INSERT ... ()`. A row may leave out any column that has a default, so that default
    must keep its value: the column's own, or the one the server fills in without
    one, which on MariaDB is the first member of an ENUM NOT NULL (strict mode too).
    A DROP DEFAULT of such an ENUM whose default was that member changes no row; of
    any other NOT NULL column it refuses the rows that leave it out. A default where
    there was none breaks no row. That the applier's rows carry every column of their
    shard does not make defaults moot: they lack the columns their shard lacks (the
    partial ones), and a version speaks of every row the table takes.

    NULL where there was NOT NULL keeps rows, the reverse does not.

    Types. The lattice order (a widening), or, on MySQL and MariaDB (docs/design.md "The lattice of
    compatibility": TiDB
    changes no type across families), a conversion that reads every value back equal:
    - TIMESTAMP(p) to DATETIME(q), q >= p: downstream DDL and rows run at time zone
      +00:00 (replicator.servers.DOWNSTREAM_SESSION), so an instant keeps its text;
    - ENUM or SET to CHAR, VARCHAR or a TEXT type that holds every member, and a SET's
      longest value (every member, comma-separated), in its character set: CHAR(n)
      and VARCHAR(n) count characters, TEXT types bytes;
    - DECIMAL or an integer to a string type as long as the longest number's text, an
      integer to a DECIMAL with as many integer digits (and a sign where it had one),
      a DECIMAL without decimals to an integer type that holds its every value, and a
      number to JSON (its text is a JSON number);
    - DATE, YEAR, DATETIME and TIMESTAMP to a string type as long as their text
      ('2024-02-29 12:30:45.123' for a DATETIME(3)); not a TIME, which prints hours
      past 24;
    - a string type to one whose character set has every character of the old one
      (ascii into the others, latin1 and utf8mb3 into utf8mb4, latin1 into utf8mb3),
      with as many characters, or for a TEXT type as many bytes as the longest old
      value takes there (a latin1 TEXT needs a utf8mb4 MEDIUMTEXT: '€' takes 3 bytes);
      never into CHAR from another kind (CHAR drops trailing spaces);
    - an ENUM keeping every member, a SET every member in the same order (a SET reads
      back in member order), whatever their character sets;
    - an ENUM to a SET having every member (the server converts by text; one value is
      one member); in a key, not where '' is a member (it becomes the empty set);
    - JSON to a utf8mb4 LONGTEXT (a document reads back as its text).
    In a PRIMARY or UNIQUE key the values must also stay apart: a conversion keeps them
    apart into a binary collation, or from utf8mb3 to utf8mb4 with the same collation;
    any other collation may call two old values equal ('a' and 'ä' are one value in
    utf8mb4_general_ci, two in latin1_swedish_ci).

    Generated columns (docs/design.md "Generated columns"). Rows do not carry them but read
    them back, so their values count too. One that goes keeps rows. One that stays
    keeps them with the same definition and type (or a wider type when STORED: its
    values were checked on write), with every column it reads keeping every value an
    expression sees (a widening that changes no text: not more decimals, fractional
    seconds, signedness or another collation; more decimals do keep a number computed
    by exact arithmetic, `+ - * %` and ABS, into a number), and, when VIRTUAL, no new index on it
    unless every value its expression computes fits its type (`lattice.bounds`).
    One that turns normal breaks them (rows read back its default). A new one keeps
    them only when VIRTUAL and unindexed on MariaDB, which computes such a value on
    read and cuts it to fit, or when every value it computes fits; a STORED or indexed
    value is computed on write and refused when it does not fit.

    Keys and checks. A new unique key holds on the old rows only where an old one on
    the same parts, or on fewer whole columns, held; a new or changed check may refuse
    them, and so may one whose columns went through a conversion above rather than a
    widening. Plain, fulltext and spatial indexes, comments and table options accept
    every row."""
    flavor = Flavor.parse(flavor)
    old, new = materialize(old, flavor), materialize(new, flavor)
    return (
        all(_column_keeps_rows(column, old, new, flavor) for column in old.columns)
        and all(_new_column_takes_rows(c, new, flavor) for c in new.columns if old.column(c.name) is None)
        and _unique_keys_hold(old, new)
        and _checks_hold(old, new, flavor)
    )


def _column_keeps_rows(column: Column, old: Table, new: Table, flavor: Flavor) -> bool:
    after = new.column(column.name)
    if column.generated is not None:
        return _generated_keeps_rows(column, after, old, new, flavor)
    if after is None or after.generated is not None:
        return False  # a row's value would have nowhere to go
    if column.nullable and not after.nullable:
        return False
    if not _keeps_default(column, after, flavor):
        return False  # a row that leaves the column out reads back another value, or is refused
    return _keeps_values(column.type, after.type, flavor, apart=_in_unique_key(after, new))


def _new_column_takes_rows(column: Column, new: Table, flavor: Flavor) -> bool:
    if column.generated is not None:
        virtual = not column.generated.stored
        cut_on_read = flavor.rules.virtual_cut_on_read and virtual and not _indexed(column, new)
        return cut_on_read or always_fits(column.generated.expression, new, column.type, flavor)
    return column.auto_increment or _server_default(column, flavor) is not None


# -- defaults --------------------------------------------------------------------------------
def _keeps_default(column: Column, after: Column, flavor: Flavor) -> bool:
    before = _server_default(column, flavor)
    if before is None:
        return True  # rows leaving the column out were refused: there are none to break
    now = _server_default(after, flavor)
    return now is not None and _same_default(before, now)


def _server_default(column: Column, flavor: Flavor) -> Default | None:
    """The value a row that leaves the column out gets, None when it is refused."""
    if column.default is not None:
        return column.default
    if column.nullable:
        return NULL_DEFAULT
    if flavor.rules.enum_takes_first_member and column.type.family == Family.ENUM and column.type.members:
        return Default(quote_string(column.type.members[0]))
    return None


def _same_default(a: Default, b: Default) -> bool:
    if a == b:
        return True
    if a.is_expression or b.is_expression:
        return False
    va, vb = _default_value(a), _default_value(b)
    return va == vb or _same_number(va, vb)


def _default_value(default: Default) -> object:
    """A literal default as a value: None, the text of a string, or a number (bit and
    hex literals stay as written)."""
    sql = default.sql
    if default.is_null:
        return None
    if sql.startswith("'"):
        return unquote(sql)
    number = _number(sql)
    return sql if number is None else number


def _number(text: object) -> Decimal | None:
    try:
        return Decimal(str(text).strip())
    except (InvalidOperation, ValueError):
        return None


def _same_number(a: object, b: object) -> bool:
    # the fuzzer's documented conversion: a number into a string column reads back its text
    if not isinstance(a, Decimal) and not isinstance(b, Decimal):
        return False
    na, nb = _number(a), _number(b)
    return na is not None and na == nb


# -- types -----------------------------------------------------------------------------------
def holding(a: ColumnType, b: ColumnType, flavor: Flavor | str) -> ColumnType | None:
    """A type taking every value of both `a` and `b`, for values already written (not a
    join: the two may sort or compare otherwise): for two ENUMs or SETs, `b`'s members in
    `a`'s character set where it has them; else their join; else the one taking the
    other's values, `a` first; else, for two strings in character sets of which
    one has every character of the other, that one's set and collation at a length and
    TEXT size taking both ('😀' and a latin1 TINYTEXT: a utf8mb4 TEXT), a JSON document
    counting as a utf8mb4 LONGTEXT; for an integer and a DECIMAL, a DECIMAL with the
    digits of both; for other types of two families (numbers, times, members), a string
    long enough for the text of both, though not for two times; else None."""
    flavor = Flavor.parse(flavor)
    types = _column_types(flavor)
    # members first: their join would take the wider set even where `a`'s has every
    # character of `b`'s members, and so keep a set no shard has (F178)
    members = _members_in_set_of(a, b, types, flavor)
    if members is not None:
        return members
    try:
        return types.join(a, b)
    except Conflict:
        pass
    if _keeps_values(b, a, flavor, apart=False):
        return a
    if _keeps_values(a, b, flavor, apart=False):
        return b
    if not flavor.rules.converts_families:
        return None
    if {a.family, b.family} == {Family.INTEGER, Family.DECIMAL}:
        return _integer_and_decimal(a, b, flavor)
    if a.family == b.family == Family.INTEGER:
        return _signed_for_both(a, b, flavor)
    families = {a.family, b.family}
    if Family.TIMESTAMP in families and families <= DAYS:
        return _datetime_for_both(a, b, flavor)
    apart = len(families) == 2 or a.family in (Family.ENUM, Family.SET)
    times = families <= _TIMES  # a DATE converts to its midnight, as the shards' rows did
    if apart and not times and Family.JSON not in families:
        return _string_for_both(a, b, flavor)
    # a JSON document is text, and a string no document: they meet in a LONGTEXT
    sides = [_JSON_TEXT if t.family == Family.JSON else t for t in (a, b)]
    if any(t.family != Family.STRING for t in sides):
        return None
    for wide, other in (sides, sides[::-1]):
        if recoding(other.charset, wide.charset) is None:
            continue
        try:
            joined = types.join(wide, replace(other, charset=wide.charset, collation=wide.collation))
        except Conflict:
            continue
        larger = [n for n, size in TEXT_CAPACITY.items() if size > TEXT_CAPACITY.get(joined.name, 0)]
        for candidate in [joined, *(replace(joined, name=n, length=None) for n in larger)]:
            if _keeps_values(a, candidate, flavor, False) and _keeps_values(b, candidate, flavor, False):
                return candidate
    return None


# Within these families an ALTER to a narrower type keeps each value or, in strict mode,
# refuses the table (a longer string, a bigger number, a member the new type lacks); in the
# others it rounds (fractions of numbers and times), and across families it reads a value
# another way (an ENUM's index, a SET's bits, a time's digits).
_KEPT_OR_REFUSED = frozenset(
    {Family.INTEGER, Family.STRING, Family.BINARY, Family.ENUM, Family.SET, Family.BIT, Family.JSON}
)


def converts_values(before: ColumnType, after: ColumnType, flavor: Flavor | str) -> bool:
    """Whether an ALTER from `before` to `after` may give a value the server takes
    another text: a DECIMAL(5,2) made DECIMAL(5,1) rounds 1.25, an ENUM made a SMALLINT
    holds its members' indexes, a CHAR reads a VARCHAR's 'a  ' as 'a'."""
    flavor = Flavor.parse(flavor)
    if _drops_trailing_spaces(before, after):
        return True
    if _keeps_values(before, after, flavor, apart=False):
        return False
    if _cuts_trailing_spaces(before, after):
        return True
    return not (before.family == after.family and before.family in _KEPT_OR_REFUSED)


def _drops_trailing_spaces(before: ColumnType, after: ColumnType) -> bool:
    """A CHAR gives its values back without their trailing spaces: a VARCHAR's or a
    TEXT's made a CHAR lose theirs, which the join's VARCHAR downstream keeps
    (L32)."""
    return after.family == before.family == Family.STRING and after.name == "char" and before.name != "char"


def _cuts_trailing_spaces(before: ColumnType, after: ColumnType) -> bool:
    """A string made shorter loses the trailing spaces past its new length, where the
    server refuses any other character (a note, not an error, in strict mode): a
    VARCHAR(70)'s 'a' and 69 spaces is 'a' and 59 in a VARCHAR(60) (L44)."""
    if not (after.family == before.family == Family.STRING) or before.name == "char":
        return False
    return _fewest_characters(after) < _most_characters(before)


def _fewest_characters(t: ColumnType) -> int:
    if t.name in ("char", "varchar"):
        return t.length or 1
    return TEXT_CAPACITY[t.name] // mbmaxlen(t.charset)


def converts_through(value: ColumnType, held: ColumnType, to: ColumnType) -> bool:
    """Whether a value of `value`, held in a column of `held` and converted to `to`, may
    read otherwise than converted to `to` from `value` itself: a DECIMAL(13,3)'s 1.500 held
    in a DECIMAL(14,4) becomes '1.5000' in a VARCHAR, not '1.500' (L14);
    an ENUM's member made a number is its index in `held`'s list."""
    if value == held or held == to:
        return False
    if to.family in _TEXTS:
        return not _reads_alike(value, held)
    if value.family in (Family.ENUM, Family.SET) and to.family not in (Family.ENUM, Family.SET):
        return held.members[: len(value.members)] != value.members
    return False


# the families whose values a conversion to them takes as text
_TEXTS = frozenset({Family.STRING, Family.BINARY, Family.JSON})


def _reads_alike(value: ColumnType, held: ColumnType) -> bool:
    """A value of `value` reads the same text from a column of `held` (which holds it)."""
    if held.zerofill and not value.zerofill:
        return False
    if held.family in (*_TEXTS, Family.ENUM, Family.SET) or value == held:
        return True  # the row's text, as it was written
    if value.family == Family.INTEGER:
        return held.family == Family.INTEGER or (held.family == Family.DECIMAL and not held.scale)
    if value.family == Family.DECIMAL:
        return held.family == Family.DECIMAL and (held.scale or 0) == (value.scale or 0)
    if value.family in (Family.TIME, Family.DATETIME, Family.TIMESTAMP):
        stamps = {value.family, held.family} == {Family.DATETIME, Family.TIMESTAMP}
        return (value.family == held.family or stamps) and (held.fsp or 0) == (value.fsp or 0)
    if value.family == Family.BIT:
        return held.family == Family.BIT and -(-(value.length or 1) // 8) == -(-(held.length or 1) // 8)
    return value.family == held.family and value.family in (Family.DATE, Family.YEAR)


def _members_in_set_of(a: ColumnType, b: ColumnType, types: ColumnTypes, flavor: Flavor) -> ColumnType | None:
    """Two ENUMs (or SETs) that only their character sets keep from joining: `b`'s members
    in `a`'s set, joined with `a`'s, where `a`'s set has every character of them. So the
    shards' set stays when rows of a shard that left need one more member, not the set
    that shard had (F136)."""
    if a.family != b.family or a.family not in (Family.ENUM, Family.SET) or a.charset == b.charset:
        return None
    if any(_byte_length(m, a.charset) is None for m in b.members):
        return None
    try:
        both = types.join(a, replace(b, charset=a.charset, collation=a.collation))
    except Conflict:
        return None
    keeps = _keeps_values(a, both, flavor, apart=False) and _keeps_values(b, both, flavor, apart=False)
    return both if keeps else None


def _integer_and_decimal(a: ColumnType, b: ColumnType, flavor: Flavor) -> ColumnType | None:
    """A DECIMAL with the integer's digits and the DECIMAL's, and its decimals."""
    integer, decimal = (a, b) if a.family == Family.INTEGER else (b, a)
    scale = decimal.scale or 0
    digits = max(len(str(abs(v))) for v in integer_range(integer))
    precision = max(digits, (decimal.precision or 10) - scale) + scale
    unsigned = integer.unsigned and decimal.unsigned
    both = ColumnType(Family.DECIMAL, "decimal", precision=precision, scale=scale, unsigned=unsigned)
    keeps = _keeps_values(a, both, flavor, False) and _keeps_values(b, both, flavor, False)
    return both if precision <= 65 and keeps else None


def _signed_for_both(a: ColumnType, b: ColumnType, flavor: Flavor) -> ColumnType | None:
    """The least signed integer type holding both ranges (a signed one and an UNSIGNED
    one), or a DECIMAL(20) past BIGINT's."""
    low = min(integer_range(a)[0], integer_range(b)[0])
    high = max(integer_range(a)[1], integer_range(b)[1])
    for name in sorted(INTEGER_BITS, key=INTEGER_BITS.get):
        candidate = ColumnType(Family.INTEGER, name)
        if integer_range(candidate)[0] <= low and high <= integer_range(candidate)[1]:
            return candidate
    digits = max(len(str(abs(v))) for v in (low, high))
    both = ColumnType(Family.DECIMAL, "decimal", precision=digits, scale=0)
    return both if _keeps_values(a, both, flavor, False) and _keeps_values(b, both, flavor, False) else None


def _datetime_for_both(a: ColumnType, b: ColumnType, flavor: Flavor) -> ColumnType | None:
    """A TIMESTAMP and a DATE or DATETIME: a DATETIME with the finer fraction. The shards'
    type cannot win there, as it does for other times: a DATE or DATETIME outside 1970-2038
    fits no TIMESTAMP, and MariaDB refuses it in strict mode (F112). The
    downstream session runs in UTC, so a TIMESTAMP's instant becomes its UTC text, as
    the applier writes it."""
    both = ColumnType(Family.DATETIME, "datetime", fsp=max(a.fsp or 0, b.fsp or 0))
    # a DATE becomes its midnight there, as a shard's MODIFY makes it
    timed = [t for t in (a, b) if t.family != Family.DATE]
    return both if all(_keeps_values(t, both, flavor, False) for t in timed) else None


def _string_for_both(a: ColumnType, b: ColumnType, flavor: Flavor) -> ColumnType | None:
    """A string and a number, a time or members: the string type, as long as the other's
    longest text needs (a departed DECIMAL(4,0)'s 9999 and a VARCHAR(1): a VARCHAR(5)),
    a CHAR too: no number, time or member ends in a space, which is all a CHAR strips
    (a SET's 'x,y' and a CHAR(0)'s '': a CHAR(4), F176). Two of the others (SMALLINT
    values and a SET): a VARCHAR in the members' character set, digits and times being
    in every one."""
    text = next((t for t in (a, b) if t.family == Family.STRING), None) or _text_of(a, b)
    lengths = sorted({max(text.length or 1, n) for n in (1, 4, 8, 12, 21, 22, 26, 32, 67, 255)})
    short = text.name in ("char", "varchar")
    candidates = [replace(text, length=n) for n in lengths if short]
    candidates += [replace(text, name=n, length=None) for n in TEXT_CAPACITY]
    fits = (c for c in candidates if all(_keeps_values(t, c, flavor, False) for t in (a, b)))
    return next(fits, None)


def _text_of(a: ColumnType, b: ColumnType) -> ColumnType:
    members = next((t for t in (a, b) if t.family in (Family.ENUM, Family.SET)), None)
    charset, collation = (members.charset, members.collation) if members else (None, None)
    return ColumnType(Family.STRING, "varchar", length=1, charset=charset, collation=collation)


def _keeps_values(before: ColumnType, after: ColumnType, flavor: Flavor, apart: bool) -> bool:
    """Every value of `before` reads back equal from `after`; `apart`: and two values
    that were different stay different (the column is in a unique key)."""
    if before == after or _column_types(flavor).leq(before, after):
        return True
    if not flavor.rules.converts_families:
        return False
    conversion = _CONVERSIONS.get((before.family, after.family))
    return conversion is not None and conversion(before, after, apart)


@cache
def _column_types(flavor: Flavor) -> ColumnTypes:
    return ColumnTypes(flavor)


def _timestamp_to_datetime(before: ColumnType, after: ColumnType, apart: bool) -> bool:
    return (after.fsp or 0) >= (before.fsp or 0)


def _members_to_string(before: ColumnType, after: ColumnType, apart: bool) -> bool:
    if apart and not _binary_collation(after.collation):
        return False  # members ('x', 'X'; 'a', 'ä') may be one value in a _ci collation
    longest = before.members if before.family == Family.ENUM else (",".join(before.members),)
    return all(_text_fits(text, after) for text in longest)


def _number_to_string(before: ColumnType, after: ColumnType, apart: bool) -> bool:
    if before.zerofill:
        return False  # the zeros are padding on display only; not worth counting
    if before.family == Family.INTEGER:
        low, high = integer_range(before)
        longest = str(high if before.unsigned else low)
    else:
        precision, scale = before.precision or 10, before.scale or 0
        fraction = "." + "9" * scale if scale else ""
        longest = ("" if before.unsigned else "-") + "9" * max(precision - scale, 1) + fraction
    return _text_fits(longest, after)  # digits, sign and point differ in every collation


def _integer_to_decimal(before: ColumnType, after: ColumnType, apart: bool) -> bool:
    if before.zerofill or (after.unsigned and not before.unsigned):
        return False
    digits = max(len(str(abs(n))) for n in integer_range(before))
    return digits <= (after.precision or 10) - (after.scale or 0)


def _decimal_to_integer(before: ColumnType, after: ColumnType, apart: bool) -> bool:
    if before.scale or before.zerofill or (after.unsigned and not before.unsigned):
        return False
    return 10 ** (before.precision or 10) - 1 <= integer_range(after)[1]


def _number_to_json(before: ColumnType, after: ColumnType, apart: bool) -> bool:
    return not before.zerofill  # a number's text is a JSON number ('007' is not one)


# a temporal value's text as the server prints it in a string, before its fractional
# seconds ('.123' for a DATETIME(3))
_TEMPORAL_TEXT = {Family.DATE: 10, Family.YEAR: 4, Family.DATETIME: 19, Family.TIMESTAMP: 19}


def _temporal_to_string(before: ColumnType, after: ColumnType, apart: bool) -> bool:
    length = _TEMPORAL_TEXT[before.family] + (1 + before.fsp if before.fsp else 0)
    return _text_fits("0" * length, after)  # digits differ in every collation


def _string_to_string(before: ColumnType, after: ColumnType, apart: bool) -> bool:
    held = recoding(before.charset, after.charset)
    if held is None or (apart and not _sorts_apart(before, after)):
        return False
    if after.name == "char":
        return before.name == "char" and (before.length or 1) <= (after.length or 1)
    if after.name == "varchar":
        return _most_characters(before) <= (after.length or 1)
    if before.name in ("char", "varchar"):
        longest = (before.length or 1) * held.per_character
    else:
        longest = TEXT_CAPACITY[before.name] * held.ratio
    return longest <= TEXT_CAPACITY[after.name]


def _enum_to_enum(before: ColumnType, after: ColumnType, apart: bool) -> bool:
    return set(before.members) <= set(after.members)  # a key holds the member's number


def _enum_to_set(before: ColumnType, after: ColumnType, apart: bool) -> bool:
    # the server converts by text, so each member is itself again wherever it stands;
    # a member '' becomes the empty set, one value with the ENUM's error value ''
    return not (apart and "" in before.members) and _enum_to_enum(before, after, apart)


def _set_to_set(before: ColumnType, after: ColumnType, apart: bool) -> bool:
    if not set(before.members) <= set(after.members):
        return False
    positions = [after.members.index(m) for m in before.members]
    return positions == sorted(positions)


_TIMES = {Family.YEAR, Family.DATE, Family.TIME, Family.DATETIME, Family.TIMESTAMP}
_JSON_TEXT = ColumnType(Family.STRING, "longtext", charset="utf8mb4", collation="utf8mb4_bin")


def _json_to_string(before: ColumnType, after: ColumnType, apart: bool) -> bool:
    # a document reads back as its text, in utf8mb4, of any length
    return not apart and after.name == "longtext" and after.charset == "utf8mb4"


_CONVERSIONS: dict[tuple[Family, Family], Callable[[ColumnType, ColumnType, bool], bool]] = {
    (Family.JSON, Family.STRING): _json_to_string,
    (Family.TIMESTAMP, Family.DATETIME): _timestamp_to_datetime,
    (Family.ENUM, Family.STRING): _members_to_string,
    (Family.SET, Family.STRING): _members_to_string,
    (Family.DECIMAL, Family.STRING): _number_to_string,
    (Family.INTEGER, Family.STRING): _number_to_string,
    (Family.INTEGER, Family.DECIMAL): _integer_to_decimal,
    (Family.DECIMAL, Family.INTEGER): _decimal_to_integer,
    (Family.INTEGER, Family.JSON): _number_to_json,
    (Family.DECIMAL, Family.JSON): _number_to_json,
    **{(family, Family.STRING): _temporal_to_string for family in _TEMPORAL_TEXT},
    (Family.STRING, Family.STRING): _string_to_string,
    (Family.ENUM, Family.ENUM): _enum_to_enum,
    (Family.SET, Family.SET): _set_to_set,
    (Family.ENUM, Family.SET): _enum_to_set,
}


def _most_characters(t: ColumnType) -> int:
    if t.name in ("char", "varchar"):
        return t.length or 1
    return TEXT_CAPACITY[t.name]  # a character takes a byte at least


def _text_fits(text: str, t: ColumnType) -> bool:
    """The string type holds `text`: every character is in its set, and it is short enough."""
    size = _byte_length(text, t.charset)
    if size is None:
        return False
    if t.name in ("char", "varchar"):
        return len(text) <= (t.length or 1)
    return size <= TEXT_CAPACITY[t.name]


def _byte_length(text: str, charset: str | None) -> int | None:
    """Bytes `text` takes in the character set; None when the set lacks a character."""
    if charset == "utf8mb3" and any(ord(ch) > 0xFFFF for ch in text):
        return None
    codec = python_codec(charset)
    if codec is None:
        return len(text) * mbmaxlen(charset) if text.isascii() else None
    try:
        return len(text.encode(codec))
    except UnicodeEncodeError:
        return None


def _sorts_apart(before: ColumnType, after: ColumnType) -> bool:
    """Two strings different in the old collation are different in the new one."""
    a, b = before.collation or "", after.collation or ""
    if a == b:
        return True
    if _binary_collation(b):
        return "_nopad" in b or "_nopad" not in a  # PAD SPACE makes 'a' and 'a ' one value
    utf8 = {"utf8mb3", "utf8mb4"}
    return {before.charset, after.charset} <= utf8 and collation_suffix(a) == collation_suffix(b)


def _binary_collation(collation: str | None) -> bool:
    return collation is not None and (collation == "binary" or collation.endswith("_bin"))


# -- generated columns -----------------------------------------------------------------------
def _generated_keeps_rows(
    column: Column, after: Column | None, old: Table, new: Table, flavor: Flavor
) -> bool:
    if after is None:
        return True  # rows never carried it
    if after.generated != column.generated:
        return False  # computed otherwise, or a normal column the rows leave out
    if not _generated_type_kept(column, after, flavor):
        return False
    if (
        not after.generated.stored
        and _indexed(after, new)
        and not _indexed(column, old)
        and not always_fits(after.generated.expression, new, after.type, flavor)
    ):
        return False  # now computed on write, and refused where it was cut to fit
    expression = canonical_expression(after.generated.expression)
    # a number computed exactly from numbers into a number is the same whatever their scale
    by_value = expression.exact and after.type.family in (Family.INTEGER, Family.DECIMAL, Family.FLOAT)
    return all(
        _expression_sees_alike(old.column(c), new.column(c), flavor, by_value) for c in expression.columns
    )


def _generated_type_kept(column: Column, after: Column, flavor: Flavor) -> bool:
    if after.type == column.type:
        return True
    # a VIRTUAL value is cut to fit its type when read; a STORED one was refused unless it fit
    stored = after.generated is not None and after.generated.stored
    return stored and _column_types(flavor).leq(column.type, after.type)


def _expression_sees_alike(
    before: Column | None, after: Column | None, flavor: Flavor, by_value: bool = False
) -> bool:
    """An expression reading the column computes the same from the same values: its
    type is the same, or wider without another text (`CONCAT` prints a DECIMAL's every
    decimal, a DATETIME's fractional seconds), sign, character set or collation; more
    decimals too where the expression sees values only (`by_value`: `c % 97` into a
    BIGINT, F120)."""
    if before is None or after is None:
        return False
    a, b = before.type, after.type
    if a == b:
        return True
    if _sign_and_text(a) != _sign_and_text(b) or not _column_types(flavor).leq(a, b):
        return False
    if a.family == Family.DECIMAL:
        return a.scale == b.scale or by_value
    return a.family in (Family.INTEGER, Family.STRING, Family.BINARY, Family.ENUM, Family.SET)


def _sign_and_text(t: ColumnType) -> tuple:
    return t.unsigned, t.zerofill, t.charset, t.collation


# -- keys and checks -------------------------------------------------------------------------
def _unique_keys_hold(old: Table, new: Table) -> bool:
    unique = (IndexKind.PRIMARY, IndexKind.UNIQUE)
    old_unique = [ix for ix in old.indexes if ix.kind in unique]
    for index in (ix for ix in new.indexes if ix.kind in unique):
        # a new unique key holds on the old rows only when an old one on the same parts,
        # or on fewer whole columns, held
        columns = _key_columns(index)
        if not any(
            was.parts == index.parts
            or (columns is not None and (held := _key_columns(was)) is not None and held <= columns)
            for was in old_unique
        ):
            return False
    return True


def _checks_hold(old: Table, new: Table, flavor: Flavor) -> bool:
    """Every check of `new` was in `old`, over columns only widened since: a conversion
    (an ENUM now a VARCHAR, another collation) may change what the expression says."""
    old_checks = old.check_map
    return all(
        old_checks.get(k) == check and all(_widened(c, old, new, flavor) for c in check.columns)
        for k, check in new.check_map.items()
    )


def _widened(name: str, old: Table, new: Table, flavor: Flavor) -> bool:
    before, after = old.column(name), new.column(name)
    return before is not None and after is not None and _column_types(flavor).leq(before.type, after.type)


def _key_columns(index: Index) -> frozenset[str] | None:
    """The columns of a unique key, None when a part is a prefix or an expression
    (it holds over fewer rows than its columns say)."""
    if any(p.length is not None or p.column.startswith("(") for p in index.parts):
        return None
    return frozenset(p.column.lower() for p in index.parts)


def _indexed(column: Column, table: Table) -> bool:
    return any(column.key in _index_columns(ix) for ix in table.indexes)


def _in_unique_key(column: Column, table: Table) -> bool:
    unique = (IndexKind.PRIMARY, IndexKind.UNIQUE)
    return any(column.key in _index_columns(ix) for ix in table.indexes if ix.kind in unique)
