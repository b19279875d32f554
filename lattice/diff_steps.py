"""The diff's statements as `DownstreamStep`s: each ALTER (or DML statement) with the
downstream table right after it, built by applying each statement's one change to the
model (`lattice.edits`), never by reading its own SQL back."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lattice.diff_plan import Statement
from lattice.flavor import Flavor
from lattice.model import Table


@dataclass(frozen=True)
class DownstreamStep:
    """One downstream statement and the downstream table right after it ran (as the
    flavor holds it, see `materialize`); a statement that moves rows leaves the table
    as it was. None: no table (a statement run while there is none)."""

    sql: str
    after: Table | None


def steps(statements: Iterable[Statement], table: Table, name: str, flavor: Flavor) -> list[DownstreamStep]:
    """The statements, in order, from `table` (the old table as the flavor holds it),
    as the ALTERs of the table `name` (quoted) they run in."""
    # the statements run in phase order, each changing the table the one before left;
    # one that would leave an AUTO_INCREMENT column leading no key (which the server
    # refuses, 1075) runs in one ALTER with those after it up to the one that keys it:
    # a column added with its key, a key dropped with the attribute (issue 43)
    result = []
    group: list[Statement] = []
    start = table
    for statement in statements:
        if statement.edit is None and group:
            result.append(DownstreamStep(_sql(group, start, table, name, flavor), table))
            group = []
        if not group:
            start = table
        group.append(statement)
        table = statement.edit(table) if statement.edit is not None else table
        if statement.edit is None or not _auto_increment_unkeyed(table):
            result += _group(group, start, table, name, flavor)
            group = []
    if group:
        result += _group(group, start, table, name, flavor)
    return result


def _group(
    group: list[Statement], start: Table, end: Table, name: str, flavor: Flavor
) -> list[DownstreamStep]:
    first, then = _apart(group)
    if not then:
        return [DownstreamStep(_sql(group, start, end, name, flavor), end)]
    middle = start
    for statement in first:
        middle = statement.edit(middle)
    return [
        DownstreamStep(_sql(first, start, middle, name, flavor), middle),
        DownstreamStep(_sql(then, middle, end, name, flavor), end),
    ]


def _apart(group: list[Statement]) -> tuple[list[Statement], list[Statement]]:
    """A group's statements as two ALTERs: a column added in an ALTER that also sets its
    default gets that default in its existing rows, not the one it is added with (a NULL
    a rename's copy reads: live stories L40); the default is set in the ALTER after."""
    added = {s.adds for s in group if s.adds is not None}
    later = [s for s in group if s.defaults is not None and s.defaults in added]
    return [s for s in group if s not in later], later


def _auto_increment_unkeyed(table: Table) -> bool:
    leading = {ix.parts[0].column.lower() for ix in table.indexes if ix.parts}
    return any(c.auto_increment and c.key not in leading for c in table.columns)


# A generated column is computed for every row downstream (a stored one when made, any
# one when a statement copies the table), also rows of shards that never had it, whose
# values there only the retained rule vouches for (old SET text in a VARCHAR that now
# also holds a shard's SMALLINT: `c % 83` of 'x,y' is no number). Upstream no shard
# computed it for them, so the statement computes them as MariaDB does outside strict
# mode (a warning, not a refusal: F88, F113). A shard's own rows may need it
# too: a VIRTUAL column is computed on read upstream, never checked, and a shard may add
# one over values its type cannot take (LEFT(c1, 3) into latin1 over CJK text:
# F125). So a MODIFY/CHANGE that converts a column's values runs so as well on such a
# table, without strict mode's check of the conversion: the joined type holds every row
# downstream (lattice/join.py, replicator/schema/retained.py), so there is nothing for it
# to refuse where the join is right (`Rules.lenient_prefix`).


def _computed_through(before: Table | None, after: Table | None) -> bool:
    """A generated column of `before` is still there `after`: a copy computes it."""
    if before is None or after is None:
        return False
    return any(c.generated is not None and after.column(c.name) is not None for c in before.columns)


def _sql(statements: Sequence[Statement], before: Table, after: Table, name: str, flavor: Flavor) -> str:
    """The statements as one: an ALTER of their specifications, or a DML statement."""
    if statements[0].edit is None:
        assert len(statements) == 1
        return statements[0].spec
    sql = f"ALTER TABLE {name} " + ", ".join(s.spec for s in statements)
    computes = any(s.computes for s in statements)
    lenient = flavor.rules.lenient_prefix
    if lenient is not None and (computes or _computed_through(before, after)):
        sql = lenient + sql
    return sql
