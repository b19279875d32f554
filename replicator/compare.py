"""Row-for-row comparison of one shard with its rows in the merged table: the
shard's rows, projected onto the shard's own columns, against the downstream rows
that came from it (told apart by the extract columns). What the end-to-end tests
and the demo check; bulk verification of whole tables is a Spark job."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from lattice import ColumnType, Family, Table, quote_identifier, quote_string
from replicator.config import Extract, extracted
from replicator.shard_id import ShardId

Query = Callable[[str], Sequence[tuple]]


@dataclass(frozen=True)
class ShardComparison:
    shard: ShardId
    upstream_rows: int
    downstream_rows: int
    missing: tuple[tuple, ...]  # upstream rows not downstream (a few)
    extra: tuple[tuple, ...]  # downstream rows not upstream (a few)
    error: str | None = None  # the downstream could not be read that way (behind: a column missing)

    @property
    def equal(self) -> bool:
        return self.error is None and not self.missing and not self.extra

    def describe(self) -> str:
        if self.error is not None:
            return f"{self.shard}: {self.error}"
        if self.equal:
            return f"{self.shard}: {self.upstream_rows} rows, equal"
        return (
            f"{self.shard}: {self.upstream_rows} rows upstream, {self.downstream_rows} downstream; "
            f"missing {list(self.missing)} extra {list(self.extra)}"
        )


def origin_filter(extract: Mapping[str, str] | Iterable[Extract], shard: ShardId) -> str:
    """The WHERE condition selecting a shard's rows in the merged table ('1' without
    extract columns: then the target holds one shard only, or rows cannot be told apart)."""
    values = extracted(extract, shard.parts())
    parts = [
        f"{quote_identifier(column)}" + (f"={quote_string(value)}" if value is not None else " IS NULL")
        for column, value in values.items()
    ]
    return " AND ".join(parts) or "1"


def held_as_text(shard: Table, downstream: Table) -> frozenset[str]:
    """The shard's columns that the merged table holds as text though the shard's are
    not (`lattice.holding`: old INT values and a shard's new DATETIME meet in a VARCHAR,
    a DECIMAL's in another shard's JSON): the shard's values compare as the text MariaDB
    converts them to."""
    return frozenset(
        column.name
        for column in shard.columns
        if not holds_text(column.type)
        and (held := downstream.column(column.name)) is not None
        and holds_text(held.type)
    )


def held_as_double(shard: Table, downstream: Table) -> frozenset[str]:
    """The shard's FLOAT columns the merged table holds as DOUBLE (another shard's type):
    a FLOAT's 1.1 is 1.100000023841858 there, the same single-precision value, read back
    as a FLOAT to compare."""
    return frozenset(
        column.name
        for column in shard.columns
        if column.type.family == Family.FLOAT
        and column.type.name == "float"
        and (held := downstream.column(column.name)) is not None
        and held.type.family == Family.FLOAT
        and held.type.name == "double"
    )


def held_as_datetime(shard: Table, downstream: Table) -> frozenset[str]:
    """The shard's DATE columns the merged table holds as DATETIME (beside a TIMESTAMP of
    rows that stay, `lattice.holding`): a date is its midnight there, as `verify` compares
    it (docs/design.md "Rows no shard vouches for")."""
    return frozenset(
        column.name
        for column in shard.columns
        if column.type.family == Family.DATE
        and (held := downstream.column(column.name)) is not None
        and held.type.family == Family.DATETIME
    )


def temporal(shard: Table) -> frozenset[str]:
    """The shard's DATETIME and TIMESTAMP columns: a zero date reads as text, with the
    fraction of the column that holds it ('0000-00-00 00:00:00.000000' in a DATETIME(6)),
    and compares without it."""
    return frozenset(c.name for c in shard.columns if c.type.family in (Family.DATETIME, Family.TIMESTAMP))


def holds_text(t: ColumnType) -> bool:
    return t.is_character or t.family == Family.JSON  # (MariaDB's JSON is a LONGTEXT)


@dataclass(frozen=True)
class Sides:
    """Where a shard's rows are read: the shard's table and the merged one (qualified
    and quoted), with `where` selecting the shard's rows there (`origin_filter`)."""

    upstream: Query
    upstream_table: str
    downstream: Query
    downstream_table: str
    where: str
    errors: tuple[type[Exception], ...] = ()  # the downstream cannot be read that way (yet)
    as_text: Collection[str] = frozenset()  # columns read from the shard as text (`held_as_text`)
    as_float: Collection[str] = frozenset()  # columns read downstream as FLOAT (`held_as_double`)
    zero_dates: Collection[str] = frozenset()  # zero dates compared without a fraction (`temporal`)
    as_datetime: Collection[str] = frozenset()  # columns read from the shard as DATETIME (`held_as_datetime`)


def compare_shard(shard: ShardId, columns: Sequence[str], sides: Sides, sample: int = 3) -> ShardComparison:
    """Compare as multisets (a table without a key may hold equal rows). `columns`
    are the shard's (non-generated) columns."""
    try:
        up, down = _both_sides(columns, sides)
    except _Unreadable as exc:
        return ShardComparison(shard, exc.upstream_rows, 0, (), (), exc.message)
    missing = sorted(_multiset_difference(up, down), key=repr)[:sample]
    extra = sorted(_multiset_difference(down, up), key=repr)[:sample]
    return ShardComparison(shard, len(up), len(down), tuple(missing), tuple(extra))


def _multiset_difference(a: list[tuple], b: list[tuple]) -> list[tuple]:
    counts: dict[tuple, int] = {}
    for row in b:
        counts[row] = counts.get(row, 0) + 1
    out = []
    for row in a:
        if counts.get(row, 0):
            counts[row] -= 1
        else:
            out.append(row)
    return out


@dataclass(frozen=True)
class KeyedComparison:
    """A shard against its rows downstream, row by row on a key: rows lost (upstream
    only), extra (downstream only) and different (same key, other values)."""

    shard: ShardId
    upstream_rows: int
    downstream_rows: int
    lost: int
    extra: int
    different: int
    samples: tuple[str, ...] = ()  # a few of them, described
    error: str | None = None

    @property
    def equal(self) -> bool:
        return self.error is None and not (self.lost or self.extra or self.different)

    def describe(self) -> str:
        if self.error is not None:
            return f"{self.shard}: {self.error}"
        head = (
            f"{self.shard}: {self.upstream_rows} rows upstream, {self.downstream_rows} downstream; "
            f"lost {self.lost}, extra {self.extra}, different {self.different}"
        )
        return head + "".join(f"\n    {s}" for s in self.samples)


def compare_by_key(
    shard: ShardId, columns: Sequence[str], key: Sequence[str], sides: Sides, sample: int = 5
) -> KeyedComparison:
    """Like `compare_shard`, but counting by key; `key` names columns of `columns`."""
    try:
        up, down = _both_sides(columns, sides)
    except _Unreadable as exc:
        return KeyedComparison(shard, exc.upstream_rows, 0, 0, 0, 0, error=exc.message)
    at = [list(columns).index(k) for k in key]
    ups = {tuple(row[i] for i in at): row for row in up}
    downs = {tuple(row[i] for i in at): row for row in down}
    lost = [k for k in ups if k not in downs]
    extra = [k for k in downs if k not in ups]
    different = [k for k in ups if k in downs and ups[k] != downs[k]]
    samples = (
        [f"lost {ups[k]}" for k in sorted(lost)[:sample]]
        + [f"extra {downs[k]}" for k in sorted(extra)[:sample]]
        + [f"different {ups[k]} downstream {downs[k]}" for k in sorted(different)[:sample]]
    )
    duplicates = (len(up) - len(ups)) + (len(down) - len(downs))  # a key twice: count it as extra
    return KeyedComparison(
        shard, len(up), len(down), len(lost), len(extra) + duplicates, len(different), tuple(samples)
    )


class _Unreadable(Exception):
    def __init__(self, upstream_rows: int, message: str):
        super().__init__(message)
        self.upstream_rows, self.message = upstream_rows, message


def _both_sides(columns: Sequence[str], sides: Sides) -> tuple[list[tuple], list[tuple]]:
    """The shard's rows and its rows downstream, on the same columns."""
    names = ", ".join(
        f"CAST({name} AS FLOAT)" if c in sides.as_float else name
        for c, name in ((c, quote_identifier(c)) for c in columns)
    )
    read = ", ".join(_upstream_value(c, sides) for c in columns)
    up = [tuple(row) for row in sides.upstream(f"SELECT {read} FROM {sides.upstream_table}")]
    try:
        down = [
            tuple(row)
            for row in sides.downstream(f"SELECT {names} FROM {sides.downstream_table} WHERE {sides.where}")
        ]
    except sides.errors as exc:
        raise _Unreadable(len(up), f"{type(exc).__name__}: {exc}") from exc
    at = [i for i, c in enumerate(columns) if c in sides.zero_dates or c in sides.as_datetime]
    if at:
        up, down = _zero_dates(up, at), _zero_dates(down, at)
    return up, down


def _upstream_value(column: str, sides: Sides) -> str:
    name = quote_identifier(column)
    if column in sides.as_text:
        return f"CAST({name} AS CHAR)"
    if column in sides.as_datetime:
        return f"CAST({name} AS DATETIME)"
    return name


def _zero_dates(rows: list[tuple], at: list[int]) -> list[tuple]:
    def plain(value: object) -> object:
        if isinstance(value, str) and value.startswith("0000-00-00") and "." in value:
            head, fraction = value.split(".", 1)
            return head if not fraction.strip("0") else value
        return value

    return [tuple(plain(v) if i in at else v for i, v in enumerate(row)) for row in rows]
