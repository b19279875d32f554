"""Which fixes of `row_fixes.py` the rows of a decision's shards get (what no row event
carries: values an ALTER gave or converted in place, names a pending rename clears), over
the group as the decision finds it (`RowsPlan`, read only; the coordinator builds one for
each question and puts the fixes in the decision's downstream steps)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace

from lattice import (
    Column,
    Default,
    DownstreamStep,
    Family,
    Flavor,
    IndexKind,
    Table,
    converts_through,
    key,
)
from replicator.schema.extract import ExtractColumns
from replicator.schema.fills import Fills
from replicator.schema.group import ShardState
from replicator.schema.renames import RenameLedger
from replicator.schema.row_fixes import RowsFix, ShardRows, filler_of, followed
from replicator.shard_id import ShardId
from replicator.source.schema_change import SchemaChange


@dataclass
class DecisionRows:
    """What the decision under way gathers for the shards' rows before it knows its DDL."""

    shard: ShardId | None = None  # the shard whose change it decides
    existing: list[RowsFix] = field(default_factory=list)  # its rows' fixes (`RowsPlan.existing`)
    resumed: list[tuple[ShardId, RowsFix]] = field(default_factory=list)  # of those it resumes
    # its table and each resumed shard's as their rows downstream have it, and after
    tables: dict[ShardId, tuple[Table, Table]] = field(default_factory=dict)
    # (column, statement): the names of pending renames its rows clear (`RowsPlan.renamed_cleared`)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    filled: tuple[Column, ...] = ()  # its Block.filled should it pause
    passed: tuple[Column, ...] = ()  # and its Block.passed

    def take(self, own: bool, through: list[tuple[ShardId, RowsFix]]) -> list[RowsFix]:
        """The fixes of a decision's end (`own`: the shard's rows go on, not paused): those
        of the shards it resumes, the shard's own, and those of values rendered through a
        wider type (`RowsPlan.rendered_through`), which replace a conversion of the same
        column (from the type the rows have, after the DDL). Each is taken once."""
        fixes = [*(((self.shard, u) for u in self.existing) if own else ()), *self.resumed]
        if own:
            self.existing = []
        self.resumed, self.tables = [], {}
        redone = {(s, fix.column) for s, fix in through}
        return [u for s, u in fixes if (s, u.column) not in redone] + [fix for _, fix in through]

    def take_cleared(self, pending: set[str], table: Table) -> list[DownstreamStep]:
        """The shard's rows' names of pending renames (`pending`, keys) set NULL, where
        the decision leaves the rename pending and the column nullable."""
        kept = [
            sql
            for k, sql in self.renamed
            if k in pending and (column := table.column(k)) is not None and column.nullable
        ]
        self.renamed = []
        return [DownstreamStep(sql, table) for sql in kept]


def with_fixes(
    downstream: tuple[DownstreamStep, ...],
    fixes: list[RowsFix],
    before: Table | None,
    after: Table,
    flavor: Flavor,
    moved: Collection[str] = (),
    started: Mapping[str, str] | None = None,
) -> tuple[DownstreamStep, ...]:
    """The decision's DDL with the fixes of the rows (statements on rows only: the table
    stays as it is), less those the downstream column does itself. One goes before the
    DDL where the DDL changes the column's type and the column takes the value already:
    the new type may be what the rows hold only once set, the values the shard vouched
    for (L10: '' fillers, then SMALLINT); the rest after, and always
    one of a column a rename's copy in the DDL writes (`moved`: a cancel copied a shard's
    moved values back over its NULLs, L23), read where that copy left them (L38), or where
    the CHANGE of a rename it starts moved them (`started`, L56)."""
    fixes = [u for u in fixes if before is None or (u.needed(before, after) and _there(u, before, moved))]
    first = [
        u
        for u in fixes
        if before is not None and u.column not in moved and u.goes_before(before, after, flavor)
    ]
    return (
        *(DownstreamStep(sql, before) for u in first for sql in u.statements),
        *downstream,
        *(
            DownstreamStep(sql, after)
            for u in fixes
            if u not in first
            for sql in u.after_start(started or {}).after_cancel(after).statements
        ),
    )


def _there(fix: RowsFix, before: Table, moved: Collection[str]) -> bool:
    """Whether the fix's column holds the rows' values to set once the DDL ran: one the
    table lacks before is the new name of a rename whose values the shard's rows do not
    take, set only where the DDL's rename steps move values into it (L57); elsewhere the
    DDL adds it, and the rows get their value."""
    return before.column(fix.column) is not None or fix.column in moved or fix.adds


@dataclass(frozen=True)
class RowsPlan:
    target: str  # schema.table
    flavor: Flavor
    extract: ExtractColumns
    shards: Mapping[ShardId, ShardState]
    ledger: RenameLedger
    fills: Fills  # what rows of shards lacking a column hold there
    propagated: Table | None  # the downstream table as last emitted
    propagation: bool  # DDL goes downstream

    def existing(self, shard: ShardId, change: SchemaChange) -> list[RowsFix]:
        """What the shard's rows downstream need of its change that no row event carries
        (replicator/schema/row_fixes.py): the value MariaDB gave them in a column it adds
        that the downstream table has already, their values converted by a MODIFY, in the
        DDL's journal entry."""
        rows = self.rows_of(shard)
        if rows is None or change.before is None:
            return []
        renamed = {key(r.new) for r in change.renames}
        before = change.before
        state = self.shards[shard]
        if state.block is not None and state.accepted is not None:
            # paused: its rows downstream are those of its accepted table; a column it added
            # meanwhile is new to them too (a new column of a renamed name, not the values
            # a cancelled rename copies back into it: L01, L02)
            before = state.accepted
            renamed |= {key(new) for _, new in state.block.renames}
        # (paused, a column keeps the value its rows got when it was added, converted as
        # its type changed since: L12), under the name the change gives it
        remembered = followed(state.block.filled, change) if state.block else {}
        # (a column it added while paused and renamed since is new to its rows under its new
        # name: they hold the value it got, not the rename's, L57)
        renamed_added = renamed & remembered.keys()

        def holds(k: str, value: Default) -> bool:
            return k not in state.wrote and self.fills.holds(k, value)

        # (and the types its columns went through while paused: L16)
        passed = state.block.passed if state.block else ()
        added = rows.added(before, change, renamed - renamed_added, remembered, holds, passed, renamed_added)
        # (the downstream column as its rows are held in it: a string keeps a number's text)
        held = {c.key: c.type for c in self.propagated.columns} if self.propagated is not None else {}
        return added + rows.converted(before, change, renamed, passed, held)

    def tables_of(self, shard: ShardId, change: SchemaChange) -> tuple[Table, Table] | None:
        """The shard's table as its rows downstream have it (its accepted one, paused) and
        after the change, but for the columns of its renames (a name may hold other values
        in one than in the other); None for a table made anew."""
        state = self.shards[shard]
        before = state.accepted if state.block is not None else change.before
        if before is None or change.after is None or change.recreated:
            return None
        names = {key(n) for r in change.renames for n in (r.old, r.new)}
        names |= {key(n) for pair in (state.block.renames if state.block is not None else ()) for n in pair}
        return _without(before, names), _without(change.after, names)

    def rendered_through(
        self,
        before: Table,
        after: Table,
        tables: Mapping[ShardId, tuple[Table, Table]],
        moved: Collection[str] = (),
    ) -> list[tuple[ShardId, RowsFix]]:
        """Where the downstream column changes type: the rows of each shard whose own type
        reads otherwise than the old downstream type (a DECIMAL(13,3) in a DECIMAL(14,4),
        made a VARCHAR: '1.5000', upstream '1.500'; L14), converted
        from their own type after the DDL (row_fixes.py). Not the names of the renames the
        DDL starts or ends (`moved`, keys: their values go from one name to the other); the old
        name of one pending is a column of the shards that have it (L17: those a DROP
        TABLE resumed kept their TIMESTAMP's '.000000')."""
        changed = [
            (column, was)
            for column in after.columns
            if (was := before.column_map.get(column.key)) is not None
            and was.type != column.type
            and column.generated is None
            and was.generated is None
            and column.key not in moved
        ]
        out: list[tuple[ShardId, RowsFix]] = []
        for shard, state in self.shards.items() if changed else ():
            rows = self.rows_of(shard)
            if rows is None:
                return []
            these = tables.get(shard) if state.block is None else None
            if these is None:
                table = state.accepted if state.block is not None else state.current
                if table is None:
                    continue
                these = (table, table)
            for column, was in changed:
                held, upstream = (t.column_map.get(column.key) for t in these)
                if held is None or upstream is None or held.generated or upstream.generated:
                    continue
                if converts_through(held.type, was.type, column.type):
                    fixes = rows.convert(column.key, (held.type, upstream.type), after_ddl=True)
                    out += [(shard, fix) for fix in fixes]
        return out

    def renamed_cleared(self, shard: ShardId, change: SchemaChange) -> list[tuple[str, str]]:
        """The old name of a pending rename added again by a shard without the new one: the
        new name holds for its rows what the rename's CHANGE moved out of its old column
        (kept downstream after it dropped it), no value of theirs now; the rename's copy would
        leave it, a cancel's bring it back (L04). So too a shard that made
        the rename (while paused, too), has the old name again and drops the new one
        (L18): its values there are gone upstream. With extract columns its rows' new name
        is set NULL, where the decision leaves the rename pending (a cancel in the decision
        copies its values back, and sets its rows to their own value after); and the old
        name, for one that adds the new name as a column of its own."""
        rows = self.rows_of(shard)
        if rows is None or change.before is None or change.after is None:
            return []
        # (paused, by the table its rows downstream have: one that added the old name again
        # while paused and drops the new one to resume, L25)
        state = self.shards[shard]
        before = state.accepted if state.block is not None and state.accepted is not None else change.before
        added = {c.key for c in change.after.columns} - before.column_map.keys()
        # (a column it dropped and added again while paused is new to its rows too)
        added |= {c.key for c in state.block.filled} if state.block is not None else set()
        paused_renames = {(key(o), key(n)) for o, n in (state.block.renames if state.block else ())}
        # (a rename it made while paused whose new name it dropped is a drop of the old name)
        paused_drops = {key(d) for d in (state.block.dropped if state.block else ())}
        renaming = {(key(r.old), key(r.new)) for r in change.renames}
        out = []
        for record in self.ledger.pending:
            new = self.propagated.column(record.new)
            lacks_new = change.after.column(record.new) is None
            pair = (key(record.old), key(record.new))
            made = shard in record.shards or pair in paused_renames or pair[0] in paused_drops
            again = key(record.old) in added or (made and change.after.column(record.old) is not None)
            if record.started and again and lacks_new and new is not None:
                out.append((new.key, rows.cleared(new)))
            # one that adds the new name as a column of its own, without the old one (it made
            # the rename and dropped the new name, L20; or dropped the old name while
            # the rename was pending, L30): its rows' values in the old name are gone
            # upstream, and the rename's copy would write them over its own (not a rename it
            # makes now, or made while paused: its values are the copy's, L37)
            old = self.propagated.column(record.old)
            anew = key(record.new) in added and change.after.column(record.old) is None
            if record.started and anew and pair not in renaming | paused_renames and old is not None:
                out.append((old.key, rows.cleared(old)))
        return out

    def hold_own(self, shard: ShardId, state: ShardState, column: Column) -> bool:
        """The shard's rows downstream hold in a column it adds what it gives them
        upstream: the filler they got is that value, or its DDL's journal entry sets them
        (`_existing_row_values`), or it had no rows: MariaDB gives the rows of a table a
        NOT NULL geometry column is added to an empty value, which no SPATIAL key takes
        (1416), so a shard adding one with such a key had none."""
        if added_with_spatial_key(state.current, column):
            return True
        value = filler_of(column)
        if value is None or value.is_expression or column.generated is not None:
            return False
        if self.extract.origin(shard) is not None and self.propagation:
            return True
        return column.key not in state.wrote and self.fills.holds(column.key, value)

    def rows_of(self, shard: ShardId) -> ShardRows | None:
        """A shard's rows downstream, to be told apart (`ExtractColumns.origin`) in a table there."""
        where = self.extract.origin(shard)
        if where is None or self.propagated is None:
            return None
        moved, made = self._moved(shard), self._made(shard)
        return ShardRows(self.target, self.propagated, where, self.flavor, moved, made)

    def _moved(self, shard: ShardId) -> dict[str, str]:
        """The pending renames whose CHANGE moved the shard's values out of a column it still
        writes, without the new name: old name (key) -> new name."""
        state = self.shards[shard]
        table = state.accepted if state.block is not None else state.current
        out = {}
        for record in self.ledger.pending if table is not None and self.propagated is not None else ():
            mine = table.column(record.old) is not None and table.column(record.new) is None
            there = None not in (self.propagated.column(record.old), self.propagated.column(record.new))
            if record.started and mine and there and shard not in record.shards | record.departed:
                out[key(record.old)] = record.new
        return out

    def _made(self, shard: ShardId) -> dict[str, str]:
        """The pending renames the shard made itself, both names downstream: new name (key)
        -> old name (`ShardRows.made`)."""
        state = self.shards[shard]
        table = state.accepted if state.block is not None else state.current
        out = {}
        for record in self.ledger.pending if table is not None and self.propagated is not None else ():
            there = None not in (self.propagated.column(record.old), self.propagated.column(record.new))
            if record.started and there and shard in record.shards and table.column(record.new) is not None:
                out[key(record.new)] = record.old
        return out


def added_with_spatial_key(table: Table | None, column: Column) -> bool:
    """Is `column`, just added to `table`, a NOT NULL geometry without a default that a
    SPATIAL key of the table holds?"""
    if column.type.family != Family.SPATIAL or column.nullable or column.default is not None or table is None:
        return False
    return any(ix.kind == IndexKind.SPATIAL and ix.columns == (column.key,) for ix in table.indexes)


def _without(table: Table, names: set[str]) -> Table:
    """The table's columns but those named (keys): what `rendered_through` reads of it."""
    if not names:
        return table
    return replace(table, columns=tuple(c for c in table.columns if c.key not in names))
