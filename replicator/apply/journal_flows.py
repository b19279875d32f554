"""Which statements of a journal entry let the applier's batches on the table go on while
they run (docs/design.md "Batches checked at commit": no batch built for the old table lands in one it
does not fit)."""

from __future__ import annotations

from collections.abc import Sequence, Set

from lattice import Flavor, Table, keeps_rows
from replicator.apply.statement_run import is_dml


def flows(
    named: Set[str],
    before: Table | None,
    tables: Sequence[Table | None],
    statements: Sequence[str],
    flavor: Flavor,
) -> list[bool]:
    """Which statements may run with the other shards' rows going on: an ALTER whose
    table before and after has every column the applier's batches name (`named`), and takes
    every row the table took before (`keeps_rows`: a relaxing, an index, not a rename,
    a fill, a new unique key or a narrowing, which hold the rows, docs/design.md "Batches checked at
    commit"), and not
    after a copy of the entry (an UPDATE): what the copy wrote must stand till the
    entry's end, and a row written after it would miss it (a cancelled rename copies
    the new name back into the old one, whose default is NULL till the entry's last
    statement gives it its own: a row of a shard lacking it written in between kept
    NULL, and that statement, NOT NULL, was refused; L35). `before`: the table before
    the first statement (None: unknown, that one holds them)."""
    out = []
    copied = False
    for statement, after in zip(statements, tables, strict=True):
        copied = copied or is_dml(statement)
        out.append(
            before is not None
            and after is not None
            and not copied
            and named <= before.column_map.keys()
            and named <= after.column_map.keys()
            and keeps_rows(before, after, flavor)
        )
        before = after
    return out
