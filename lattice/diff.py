"""From one downstream table to the next: the ordered statements that take the
downstream table from `old` to `new` (both joined tables), for a flavor.

Seed 002 "Constraints and indices": a table with fewer constraints is more
compatible, so statements that remove constraints run first and those that add
them run last; in between, columns are added and relaxed before any is removed:

  1. drop checks and indexes that go or change; drop generated columns that go
     (seed 002 "Generated columns": dropped first), and JSON ones on MariaDB (their
     CHECK runs on every row when a later statement copies the table)
  2. renames finishing (seed 002 "Renaming columns", last shard): copy the old
     column's values into the new one, drop the old column. Before starts, so a
     rename that finishes and one that starts from its new name compose.
     Renames cancelled (every renamed shard dropped the new name while others
     still have the old one): copy the values the rename moved back into the old
     column; the new one is dropped in 5
  3. renames starting (first shard): rename, re-add the old name nullable (with
     no value in the existing rows: their value moved to the new name; its
     default is set apart, after the column exists)
  4. add columns; relax columns (wider type, NULL, a default); pass-through
     changes (comments, positions, table options)
  5. drop normal columns that go
  6. tighten columns (NOT NULL, drop a filler default, narrower type); turn
     normal columns into generated ones; add generated columns (added last)
  7. add indexes and checks
  8. index a rename's old column re-added in 3 (lattice/old_name_index.py), so the
     last shard's copy in 2 reads only the rows holding a value there; it changes
     no column, and the rows flow while it builds

A column change that both relaxes and tightens (a wider type but NOT NULL) is
split: step 4 takes the column to the join of its old and new definitions, step
6 to the new one. Every statement changes one thing (but an AUTO_INCREMENT column
and the key it leads, which the server takes only together), so a journal can tell
which have run (see replicator's DDL journal): each comes as a `DownstreamStep` with the
downstream table right after it, which diff builds as it goes (starting from the old
table as the flavor holds it, each statement applies its one change to the model,
see `lattice.edits`), never by reading its own SQL back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

from lattice import edits
from lattice.algebra import Conflict
from lattice.edits import UNPLACED, Place
from lattice.flavor import Flavor
from lattice.join import ColumnLattice, holding
from lattice.keys import is_primary
from lattice.model import NULL_DEFAULT, Column, ColumnType, Default, Family, Index, Table, key
from lattice.old_name_index import add_old_name_index, drop_old_name_index
from lattice.render import (
    materialize,
    materialize_column,
    qualified_name,
    render_check,
    render_column,
    render_column_default,
    render_index,
    render_table,
)
from lattice.sqltext import quote_identifier, quote_string
from lattice.typetext import charset_name, collation_name


@dataclass(frozen=True)
class RenameStep:
    """A column rename of seed 002's procedure, at its first or its last shard."""

    old: str
    new: str
    # "start" (first shard renamed), "finish" (last shard renamed), "whole" (both at
    # once) or "cancel" (no shard has the new name any more, some still the old one)
    stage: str


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


# one statement's change to the table model (None: the statement changes rows only)
Edit = Callable[[Table], Table] | None


@dataclass(frozen=True)
class _Statement:
    """An ALTER's specification (`edit` its change to the model; `computes`: it computes
    a stored generated column for every row), or a DML statement (no `edit`). Any ALTER
    may copy the table and compute its generated columns (VIRTUAL ones too) for every
    row, which strict mode must not refuse either (F113, F125): it runs
    lenient where it does (`Rules.lenient_prefix`)."""

    spec: str
    edit: Edit = None
    computes: bool = False
    adds: str | None = None  # the key of the column it adds
    defaults: str | None = None  # the key of the column whose default it sets or drops


def _apart(group: list[_Statement]) -> tuple[list[_Statement], list[_Statement]]:
    """A group's statements as two ALTERs: a column added in an ALTER that also sets its
    default gets that default in its existing rows, not the one it is added with (a NULL
    a rename's copy reads: live stories L40); the default is set in the ALTER after."""
    added = {s.adds for s in group if s.adds is not None}
    later = [s for s in group if s.defaults is not None and s.defaults in added]
    return [s for s in group if s not in later], later


def _auto_increment_unkeyed(table: Table) -> bool:
    leading = {ix.parts[0].column.lower() for ix in table.indexes if ix.parts}
    return any(c.auto_increment and c.key not in leading for c in table.columns)


def _computed_through(before: Table | None, after: Table | None) -> bool:
    """A generated column of `before` is still there `after`: a copy computes it."""
    if before is None or after is None:
        return False
    return any(c.generated is not None and after.column(c.name) is not None for c in before.columns)


def _stored(column: Column) -> bool:
    return column.generated is not None and column.generated.stored


@dataclass(frozen=True)
class DownstreamStep:
    """One downstream statement and the downstream table right after it ran (as the
    flavor holds it, see `materialize`); a statement that moves rows leaves the table
    as it was. None: no table (a statement run while there is none)."""

    sql: str
    after: Table | None


def diff(
    old: Table,
    new: Table,
    *,
    flavor: Flavor | str = Flavor.MARIADB,
    target: str | None = None,
    renames: Sequence[RenameStep] = (),
) -> list[DownstreamStep]:
    return _Diff(old, new, Flavor.parse(flavor), target or new.name, renames).steps()


def create(new: Table, *, flavor: Flavor | str = Flavor.MARIADB, target: str | None = None) -> DownstreamStep:
    """The CREATE TABLE that starts the downstream table, when there is none yet."""
    return DownstreamStep(render_table(new, flavor, name=target), materialize(new, flavor))


TEMPORARY_SUFFIX = "__shardmerge_tmp"
# where a string column becomes BIGINT UNSIGNED, the type its values go by: the server
# converts strings into it and it into BIGINT UNSIGNED exactly (`_clips_unsigned`, L47)
EXACT_UNSIGNED_BIGINT = ColumnType(Family.DECIMAL, "decimal", precision=20, scale=0)


class _Diff:
    def __init__(self, old: Table, new: Table, flavor: Flavor, target: str, renames: Sequence[RenameStep]):
        self.old, self.new, self.flavor = old, new, flavor
        self.table = qualified_name(target)
        # a rename whose new name no shard has any more moves nothing: its old column
        # goes (or stays) as any other column (F22)
        # unless a rename starting from that new name takes it on (the two compose, F43)
        onward = {key(r.old): r for r in renames if r.stage in ("start", "whole") and new.column(r.new)}
        # But an old name the new table has is a column a shard added afresh (`_columns`):
        # what the old column holds is the rename's (NULLs it left, the last holders'
        # values), which goes with the new name (F166)
        renames = [
            r
            for r in renames
            if r.stage == "cancel"
            or new.column(r.new) is not None
            or (r.stage == "finish" and (key(r.new) in onward or new.column(r.old) is not None))
        ]
        self.onward = onward
        # "whole": a group of one shard renames in one step (first and last shard at once)
        self.starting = {r.new.lower(): r for r in renames if r.stage in ("start", "whole")}
        self.finishing = {r.old.lower(): r for r in renames if r.stage == "finish"}
        self.cancelling = [r for r in renames if r.stage == "cancel"]
        # columns the starting renames take care of, old names and new
        self.renaming = set(self.starting) | {r.old.lower() for r in self.starting.values()}
        self.column_lattice = ColumnLattice(flavor)
        self.phases: list[list[_Statement]] = [[] for _ in range(9)]
        # the column order downstream as statements run, for ADD ... AFTER and moves
        self.order = [c.key for c in old.columns]
        # generated columns added last (phase 6): phase 4's moves must not name them
        self.late: set[str] = set()
        # columns a rename's copy widened in phase 2 (see _widen_first)
        self.widened: dict[str, Column] = {}
        # old names (keys) phase 3 CHANGEs to their new ones: the indexes go with them
        self.changed_names = {r.old.lower() for r in self.starting.values() if self._changes_name(r)}
        # columns dropped and added again: the server drops their indexes with them
        self.rebuilt = {
            c.key
            for c in old.columns
            if (after := new.column_map.get(c.key)) is not None and self._rebuilds(c, after)
        }

    def alter(
        self,
        phase: int,
        spec: str,
        edit: Edit,
        computes: bool = False,
        adds: str | None = None,
        defaults: str | None = None,
    ) -> None:
        """`computes`: the statement computes a stored generated column for every row.
        Any other statement may copy the table and compute its generated columns
        (VIRTUAL ones too) for every row, which strict mode must not refuse either
        (F113, F125)."""
        self.phases[phase].append(_Statement(spec, edit, computes, adds, defaults))

    def dml(self, phase: int, statement: str) -> None:
        self.phases[phase].append(_Statement(statement))

    def _sql(self, statements: Sequence[_Statement], before: Table, after: Table) -> str:
        """The statements as one: an ALTER of their specifications, or a DML statement."""
        if statements[0].edit is None:
            assert len(statements) == 1
            return statements[0].spec
        sql = f"ALTER TABLE {self.table} " + ", ".join(s.spec for s in statements)
        computes = any(s.computes for s in statements)
        lenient = self.flavor.rules.lenient_prefix
        if lenient is not None and (computes or _computed_through(before, after)):
            sql = lenient + sql
        return sql

    def steps(self) -> list[DownstreamStep]:
        self._constraints_removed()
        self._renames_finished()
        self._renames_cancelled()
        self._renames_started()
        self._columns()
        self._options()
        self._constraints_added()
        # the statements run in phase order, each changing the table the one before left;
        # one that would leave an AUTO_INCREMENT column leading no key (which the server
        # refuses, 1075) runs in one ALTER with those after it up to the one that keys it:
        # a column added with its key, a key dropped with the attribute (issue 43)
        table = materialize(self.old, self.flavor)
        steps = []
        group: list[_Statement] = []
        start = table
        for statement in (s for phase in self.phases for s in phase):
            if statement.edit is None and group:
                steps.append(DownstreamStep(self._sql(group, start, table), table))
                group = []
            if not group:
                start = table
            group.append(statement)
            table = statement.edit(table) if statement.edit is not None else table
            if statement.edit is None or not _auto_increment_unkeyed(table):
                steps += self._group(group, start, table)
                group = []
        if group:
            steps += self._group(group, start, table)
        return steps

    def _group(self, group: list[_Statement], start: Table, end: Table) -> list[DownstreamStep]:
        first, then = _apart(group)
        if not then:
            return [DownstreamStep(self._sql(group, start, end), end)]
        middle = start
        for statement in first:
            middle = statement.edit(middle)
        return [
            DownstreamStep(self._sql(first, start, middle), middle),
            DownstreamStep(self._sql(then, middle, end), end),
        ]

    # -- pieces ------------------------------------------------------------------
    def col(self, column: Column) -> str:
        return render_column(materialize_column(column, self.flavor), self.flavor)

    def add_column(self, phase: int, column: Column, place: Place = UNPLACED) -> None:
        held = materialize_column(column, self.flavor)
        self.alter(
            phase,
            f"ADD COLUMN {render_column(held, self.flavor)}{place.sql}",
            partial(edits.add_column, column=held, place=place),
            _stored(held),
            adds=held.key,
        )

    def drop(self, phase: int, name: str) -> None:
        self.alter(phase, f"DROP COLUMN {quote_identifier(name)}", partial(edits.drop_column, name=name))

    def change_column(self, phase: int, name: str, column: Column, place: Place = UNPLACED) -> None:
        """MODIFY COLUMN, or CHANGE COLUMN when `column` has another name than `name`."""
        held = materialize_column(column, self.flavor)
        if held.name == name:
            spec = f"MODIFY COLUMN {render_column(held, self.flavor)}"
        else:
            spec = f"CHANGE COLUMN {quote_identifier(name)} {render_column(held, self.flavor)}"
        edit = partial(edits.change_column, name=name, column=held, place=place)
        self.alter(phase, spec + place.sql, edit, _stored(held))

    def _constraints_removed(self) -> None:
        new_checks = self.new.check_map
        for check in self.old.checks:
            if new_checks.get(check.key) != check:
                keyword = "CONSTRAINT" if self.flavor.rules.drops_check_as_constraint else "CHECK"
                self.alter(
                    1,
                    f"DROP {keyword} {quote_identifier(check.name)}",
                    partial(edits.drop_check, name=check.name),
                )
        for index in self.old.indexes:
            if self._index_goes(index) and not self._renamed_index(index) and not self._key_replaced(index):
                self.alter(1, _drop_index(index), partial(edits.drop_index, name=index.name))
        for column in self.old.columns:
            if self._goes_first(column):
                self._drop_column(1, column)

    def _goes_first(self, column: Column) -> bool:
        """A column that goes in phase 1: generated (seed 002), or a JSON one on MariaDB,
        whose CHECK (json_valid) every later statement that copies the table runs on every
        row, and an ADD COLUMN ... JSON NOT NULL gave the rows an invalid '' (F48)."""
        if self._new_column(column) is not None:
            return False
        if column.generated is not None:
            return True
        if not self.flavor.rules.blank_json_on_add or column.type.family != Family.JSON:
            return False
        cancelled = {key(n) for r in self.cancelling for n in (r.old, r.new)}
        return column.key not in (self.finishing.keys() | self.renaming | cancelled)

    def _index_goes(self, index: Index) -> bool:
        """The old index is not in the new table as it is, or a column of it is rebuilt
        (dropping it explicitly first: the server would cut a column out of an index
        of several, and the model with it)."""
        if any(c in self.rebuilt for c in index.columns):
            return True
        new = self.new.index_map.get(index.key)
        if new == index and any(c in self.changed_names for c in index.columns):
            # the same key on the same names, but phase 3's CHANGE takes it with a renamed
            # column to the new name, and the old name comes back (F160)
            return True
        return new != index and not _comment_only(index, new)

    def _key_replaced(self, index: Index) -> bool:
        """A primary key that changes its columns (a shard widened it: `lattice.keys`),
        on columns that stay as they are named: dropped and added in one ALTER in phase 7,
        so the table is never without a key between statements (a journal stopped there
        would leave every UPDATE and DELETE matching rows by all columns)."""
        new = self.new.primary_key
        return (
            is_primary(index)
            and new is not None
            and new != index
            and not _comment_only(index, new)
            and all(c in self.new.column_map for c in index.columns)
            and not any(c in self.rebuilt or c in self.changed_names for c in index.columns)
        )

    def _rebuilds(self, before: Column, after: Column) -> bool:
        """`_generated_change` drops the column and adds it again."""
        if before.generated is not None and after.generated is not None:
            return self.col(before) != self.col(after)
        if before.generated is not None:
            return not before.generated.stored
        if after.generated is not None:
            return not after.generated.stored or not self.flavor.rules.generates_in_place
        return False

    def _renamed_index(self, index: Index) -> Index | None:
        """An index that reappears under another name with the same key: RENAME it."""
        if index.key in self.new.index_map:
            return None
        for candidate in self.new.indexes:
            if (candidate.kind, candidate.parts) == (
                index.kind,
                index.parts,
            ) and candidate.key not in self.old.index_map:
                return candidate
        return None

    def _changes_name(self, rename: RenameStep) -> bool:
        """Does `_renames_started` rename the column by CHANGE (not by a copy into a
        column of the new name that is there already)?"""
        old_column, taken = self.old.column(rename.old), self.old.column(rename.new)
        if old_column is None or self.new.column(rename.new) is None:
            return False
        return taken is None or taken.key == old_column.key

    def _renames_started(self) -> None:
        for rename in self.starting.values():
            old_column = self.old.column(rename.old)
            new_column = self.new.column(rename.new)
            again = self.new.column(rename.old)
            if old_column is None or new_column is None:
                continue
            taken = self.old.column(rename.new)
            if taken is not None and taken.key in self.order and taken.key != old_column.key:
                # a column of that name no shard has any more (it went in this change, as the
                # paused renaming shard resumed, F49), whose rows' values stay (a shard
                # that left with it, F63): the renamed values are copied into it where
                # it has none, NULL or the default it filled the rows of other shards with (a
                # row of a shard that had both keeps its own, F70), and it takes the
                # new definition
                self._widen_first(new_column)
                old_name, new_name = quote_identifier(old_column.name), quote_identifier(taken.name)
                filler = materialize_column(taken, self.flavor).default
                empty = f"{new_name} IS NULL"
                filled_literal = filler is not None and not filler.is_null and not filler.is_expression
                if filled_literal:
                    # (the filler: a NOT NULL column without a default fills the type's own, F108)
                    filled = render_column_default(replace(taken, default=filler), self.flavor)
                    empty = f"({empty} OR {new_name} = {filled})"
                # a NULL of the renamed values moves too where the column holds only its
                # filler: that row's value is NULL, not the default of a column its shard
                # never had (F128)
                moves_null = filled_literal and new_column.nullable
                where = empty if moves_null else f"{empty} AND {old_name} IS NOT NULL"
                if filler is not None and filler.is_expression:
                    # one filled by CURRENT_TIMESTAMP is no value to tell: the renaming shards'
                    # rows have one, so every value moves (F121), a NULL too where the new
                    # definition takes it (F153); a row's own, of a shard that no longer
                    # has the column, is one no shard vouches for
                    where = "" if new_column.nullable else f"{old_name} IS NOT NULL"
                rows = f" WHERE {where}" if where else ""
                if again is not None and rename.stage == "start":
                    # the old name stays for the shards not renamed yet: a value that did not
                    # move (its row has its own) stays in it while it is there (F119);
                    # one that moved leaves NULL, as the old name re-added would hold
                    cleared = replace(old_column, nullable=True)
                    if not old_column.nullable:
                        self.change_column(3, old_column.name, cleared)
                    copy = f"{new_name} = {old_name}, {old_name} = NULL"
                    self.dml(3, f"UPDATE {self.table} SET {copy}{rows}")
                    self._change(self._old_column(new_column), new_column)
                    self._change(cleared, again)
                    self._index_old_name(again)
                    continue
                self.dml(3, f"UPDATE {self.table} SET {new_name} = {old_name}{rows}")
                self._drop_column(3, old_column)
                self._change(self._old_column(new_column), new_column)
            else:
                # (as phase 2 left it: a finishing copy into it widened it already, F165)
                self._relax_first(self._old_column(old_column), replace(new_column, name=old_column.name))
                self.change_column(3, old_column.name, new_column)
                self.order[self.order.index(old_column.key)] = new_column.key
            if again is not None and rename.stage == "start":
                # the old name comes back, nullable, to take rows from shards not yet renamed;
                # the existing rows get NULL there, not its default: the rename's last copy
                # (WHERE old IS NOT NULL) must not overwrite the values they moved with
                empty = replace(again, default=NULL_DEFAULT)
                self.add_column(3, empty, self._position(again))
                default = materialize_column(again, self.flavor).default
                if default is not None and not default.is_null:
                    self._set_default(3, again)
                self._placed(again)
                self._index_old_name(again)
            elif again is not None:
                # a rename done in one step whose old name stays (a paused shard has it,
                # F69): a column of its own again, the rows there get its default
                self.add_column(3, again, self._position(again))
                self._placed(again)

    def _columns(self) -> None:
        for column in self.new.columns:
            if column.key in self.renaming:
                continue
            # a finishing rename's old name a shard added again: a new column (phase 2 drops the old)
            before = None if column.key in self.finishing else self._old_column(column)
            if before is None:
                late = column.generated is not None
                if not late and self._blank_json(column):
                    # MariaDB gives the rows there '' without a check, and every later copy of
                    # the table checks json_valid on them and is refused (4025, F54):
                    # they get JSON null instead, and the column its own definition after
                    filled = replace(column, default=Default(quote_string("null")))
                    self.add_column(4, filled, self._position(column))
                    self._set_default(6, column)
                else:
                    self.add_column(6 if late else 4, column, self._position(column, late))
                self._placed(column)
                if late:
                    self.late.add(column.key)
                continue
            self._change(before, column)
        for column in self.old.columns:
            if (
                not self._goes_first(column)
                and self._new_column(column) is None
                and column.key not in (self.finishing.keys() | self.renaming)
            ):
                self._drop_column(5, column)
        self._reorder()

    def _blank_json(self, column: Column) -> bool:
        """A JSON NOT NULL column without a default, added to MariaDB rows."""
        held = materialize_column(column, self.flavor)
        return (
            self.flavor.rules.blank_json_on_add
            and held.type.family == Family.JSON
            and not held.nullable
            and held.default is None
        )

    def _change(self, before: Column, after: Column) -> None:
        if before.generated is not None or after.generated is not None:
            self._generated_change(before, after)
            return
        old_sql, new_sql = self.col(before), self.col(after)
        if old_sql == new_sql:
            return
        try:
            middle = self.column_lattice.join(before, after)
            middle_sql = self.col(middle)
        except Conflict:
            middle, middle_sql = after, new_sql  # e.g. a new default: no order, one step
        if middle_sql != old_sql:
            self._modify(4, before, middle)
        if new_sql != middle_sql:
            self._modify(6, middle, after)

    def _modify(self, phase: int, before: Column, after: Column) -> None:
        b, a = materialize_column(before, self.flavor), materialize_column(after, self.flavor)
        if replace(b, default=a.default) == a:
            self._set_default(phase, after)
            return
        if self._clips_unsigned(b, a):
            exact = replace(after, type=EXACT_UNSIGNED_BIGINT, auto_increment=False)
            self.change_column(phase, before.name, exact)
        self.change_column(phase, before.name, after)

    def _clips_unsigned(self, before: Column, after: Column) -> bool:
        """A string column's values made BIGINT UNSIGNED by the server's ALTER lose those
        above 2**63 - 1 (`Rules.clips_unsigned_from_strings`)."""
        return (
            self.flavor.rules.clips_unsigned_from_strings
            and before.type.family in (Family.STRING, Family.BINARY)
            and after.type.name == "bigint"
            and after.type.unsigned
        )

    def _set_default(self, phase: int, column: Column) -> None:
        """ALTER COLUMN SET/DROP DEFAULT: the column differs from `column` in its default only."""
        held = materialize_column(column, self.flavor)
        name = quote_identifier(held.name)
        if held.default is None or held.default.is_null:
            spec = f"ALTER COLUMN {name} DROP DEFAULT"
        else:
            spec = f"ALTER COLUMN {name} SET DEFAULT {render_column_default(held, self.flavor)}"
        self.alter(phase, spec, partial(edits.change_column, name=held.name, column=held), defaults=held.key)

    def _generated_change(self, before: Column, after: Column) -> None:
        if before.generated is not None and after.generated is not None:
            if self.col(before) != self.col(after):
                self._drop_column(1, before)
                self.add_column(6, after, self._position(after, late=True))
            return
        if before.generated is not None:
            # generated → normal (seed 002 "Stored generated columns", first shard)
            if before.generated.stored:
                self.change_column(4, after.name, after)
            else:
                # no server converts a VIRTUAL column in place: copy its values through a new column
                temp = replace(after, name=after.name + TEMPORARY_SUFFIX)
                self.add_column(4, temp)
                copy = f"SET {quote_identifier(temp.name)} = {quote_identifier(before.name)}"
                self.dml(4, f"UPDATE {self.table} {copy}")
                self.drop(4, before.name)
                self.change_column(4, temp.name, after, self._position(after))
            return
        # normal → generated (last shard)
        assert after.generated is not None
        if after.generated.stored and self.flavor.rules.generates_in_place:
            self.change_column(6, after.name, after)
        else:
            # TiDB cannot make a normal column generated; no server turns one VIRTUAL
            self.drop(6, before.name)
            self.add_column(6, after, self._position(after, late=True))

    def _renames_finished(self) -> None:
        for rename in self.finishing.values():
            gone = self.old.column(rename.old)
            kept = self.new.column(rename.new)
            if kept is None and key(rename.new) in self.onward:
                # as it is to be, under the name it has until phase 3 renames it on
                kept = replace(self.new.column(self.onward[key(rename.new)].new), name=rename.new)
            if gone is None:
                continue
            if kept is None:
                self._unindex_old_name(gone)
                self._drop_column(2, gone)
                continue
            self._widen_first(kept)
            old_name, new_name = quote_identifier(gone.name), quote_identifier(kept.name)
            self.dml(2, f"UPDATE {self.table} SET {new_name} = {old_name} WHERE {old_name} IS NOT NULL")
            self._unindex_old_name(gone)
            self.drop(2, gone.name)
            self.order.remove(gone.key)

    def _relax_first(self, before: Column, after: Column) -> None:
        """A rename that also relaxes its column (seed 002 makes the new name nullable):
        the relaxing first, under the old name, then the rename alone. The server renames
        at once, where NOT NULL to NULL rebuilds the table; that rebuild keeps every
        column the rows name, so the other shards' rows go on meanwhile (the executor's
        `_flows`), and the rename that does not holds them for no time."""
        if self.col(before) == self.col(after):
            return
        try:
            middle = self.column_lattice.join(before, after)
        except Conflict:
            return
        if self.col(middle) == self.col(after):
            self._modify(3, before, after)

    def _widen_first(self, column: Column) -> None:
        """Before a copy into `column`: widen it towards the join now (the values copied
        were written under the other name, which shards may have widened); phase 4 takes
        it on from there."""
        before = self._old_column(column)
        if before is None or before.generated is not None or column.generated is not None:
            return
        try:
            middle = self.column_lattice.join(before, column)
        except Conflict:
            # another family or collation: a type taking both the values there and those
            # copied in (BIGINT rows and a JSON copied in, F60), as the join is to be
            both = holding(before.type, column.type, self.flavor)
            if both is None:
                return
            nullable = before.nullable or column.nullable
            middle = replace(column, type=both, nullable=nullable)
        if self.col(middle) != self.col(before):
            self._modify(2, before, middle)
            self.widened[column.key] = middle

    def _renames_cancelled(self) -> None:
        for rename in self.cancelling:
            moved = self.old.column(rename.new)
            back = self.new.column(rename.old)
            onward = next((r for r in self.starting.values() if key(r.old) == key(rename.old)), None)
            if back is None and onward is not None and self.old.column(rename.old) is not None:
                # the old name is renamed on in phase 3 (a paused shard resumed with another
                # rename of it): its values go back first, and on with it (F73), into the
                # column as it is to be, under the name it has till then: wide enough for
                # them (a VARCHAR(143) the renamers widened the new name to, F169)
                back = replace(self.new.column(onward.new), name=self.old.column(rename.old).name)
            if moved is None or back is None or self.old.column(rename.old) is None:
                continue
            self._widen_first(back)
            old_name, new_name = quote_identifier(back.name), quote_identifier(moved.name)
            self.dml(
                2,
                f"UPDATE {self.table} SET {old_name} = {new_name} "
                f"WHERE {old_name} IS NULL AND {new_name} IS NOT NULL",
            )
            self._unindex_old_name(back)
            if moved.key in self.starting:
                # the same rename starts again (a paused shard resumes with it): its
                # CHANGE COLUMN makes the new name afresh
                self.drop(2, moved.name)
                self.order.remove(moved.key)

    def _index_old_name(self, column: Column) -> None:
        statement = add_old_name_index(self.table, materialize_column(column, self.flavor), self.flavor)
        if statement is not None:
            self.phases[8].append(_Statement(statement))

    def _unindex_old_name(self, column: Column) -> None:
        statement = drop_old_name_index(self.table, column.name, self.flavor)
        if statement is not None:
            self.phases[2].append(_Statement(statement))

    def _drop_column(self, phase: int, column: Column) -> None:
        self.drop(phase, column.name)
        if column.key in self.order:
            self.order.remove(column.key)

    def _reorder(self) -> None:
        """Pass column moves through (seed 002 "Idempotent DDLs": reordering)."""
        wanted = [c.key for c in self.new.columns if c.key in self.order and c.key not in self.late]
        current = [k for k in self.order if k in set(wanted)]
        for i, k in enumerate(wanted):
            if current[i] == k:
                continue
            column = self.new.column_map[k]
            place = Place(first=True) if i == 0 else Place(after=self.new.column_map[wanted[i - 1]].name)
            before = self._old_column(column)
            if column.generated is not None and before is not None and before.generated is None:
                column = before  # moved as it is: phase 6 makes it generated (no MODIFY can)
            self.change_column(4, column.name, column, place)
            current.remove(k)
            current.insert(i, k)
        rest = [k for k in self.order if k not in set(wanted)]
        self.order = current + rest

    def _options(self) -> None:
        old, new = self.old.options, self.new.options
        if new.engine and new.engine != old.engine:
            self.alter(4, f"ENGINE={new.engine}", partial(edits.set_options, engine=new.engine))
        if new.charset and (new.charset, new.collation) != (old.charset, old.collation):
            spec = f"DEFAULT CHARSET={charset_name(new.charset, self.flavor)}"
            if new.collation:
                spec += f" COLLATE={collation_name(new.collation, self.flavor)}"
            # no COLLATE: the character set's default, the server's choice (None)
            self.alter(4, spec, partial(edits.set_options, charset=new.charset, collation=new.collation))
        if new.comment != old.comment:
            # an empty comment is no comment
            edit = partial(edits.set_options, comment=new.comment or None)
            self.alter(4, "COMMENT=" + quote_string(new.comment or ""), edit)

    def _constraints_added(self) -> None:
        old_checks, old_indexes = self.old.check_map, self.old.index_map
        for index in self.old.indexes:
            renamed = self._renamed_index(index) if self.new.index_map.get(index.key) != index else None
            if renamed is not None:
                self.alter(
                    7,
                    f"RENAME INDEX {quote_identifier(index.name)} TO {quote_identifier(renamed.name)}",
                    partial(edits.rename_index, name=index.name, new_name=renamed.name),
                )
        renamed_to = {r.key for ix in self.old.indexes if (r := self._renamed_index(ix)) is not None}
        for index in self.new.indexes:
            was = old_indexes.get(index.key)
            if was is not None and (
                (_comment_only(was, index) and not self._index_goes(was)) or self._key_replaced(was)
            ):
                # dropped and added in one statement, which MariaDB makes instant
                edit = partial(edits.replace_index, index=index)
                self.alter(7, f"{_drop_index(was)}, ADD {render_index(index)}", edit)
                continue
            rebuilt = was == index and self._index_goes(index)
            if (was != index or rebuilt) and index.key not in renamed_to:
                self.alter(7, "ADD " + render_index(index), partial(edits.add_index, index=index))
        for check in self.new.checks:
            if old_checks.get(check.key) != check and not (
                not self.flavor.rules.keeps_unenforced_checks and not check.enforced
            ):
                edit = partial(edits.add_check, check=check)
                self.alter(7, "ADD " + render_check(check, self.flavor), edit)

    # -- helpers -------------------------------------------------------------------
    def _old_column(self, column: Column) -> Column | None:
        """The column as the statements before phase 4 leave it."""
        return self.widened.get(column.key) or self.old.column_map.get(column.key)

    def _new_column(self, column: Column) -> Column | None:
        return self.new.column_map.get(column.key)

    def _position(self, column: Column, late: bool = False) -> Place:
        """Where to add `column`; an early (phase 4) one never goes after a late one."""
        keys = [c.key for c in self.new.columns]
        i = keys.index(column.key)
        for prev in reversed(keys[:i]):
            if prev in self.order and (late or prev not in self.late):
                return Place(after=self.new.column_map[prev].name)
        return Place(first=bool(self.order))

    def _placed(self, column: Column) -> None:
        keys = [c.key for c in self.new.columns]
        i = keys.index(column.key)
        for prev in reversed(keys[:i]):
            if prev in self.order:
                self.order.insert(self.order.index(prev) + 1, column.key)
                return
        self.order.insert(0, column.key)


def _comment_only(old: Index, new: Index | None) -> bool:
    """Two definitions of an index that differ in their comment alone."""
    return new is not None and new.comment != old.comment and replace(new, comment=old.comment) == old


def _drop_index(index: Index) -> str:
    if index.name.upper() == "PRIMARY":
        return "DROP PRIMARY KEY"
    return f"DROP INDEX {quote_identifier(index.name)}"
