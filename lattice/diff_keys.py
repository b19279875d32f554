"""The diff's index and check statements (lattice/diff.py, docs/design.md "Constraints and indices"):
those that go or change are dropped first (phase 1), those that come are
added last (phase 7), an index that keeps its key under another name is renamed."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from lattice import edits
from lattice.diff_columns import rebuilds
from lattice.diff_plan import Plan
from lattice.diff_renames import changes_name
from lattice.keys import is_primary
from lattice.model import Index
from lattice.render import render_check, render_index
from lattice.sqltext import quote_identifier


class KeyChanges:
    """The indexes and checks of `plan`'s old table that go and of its new one that come."""

    def __init__(self, plan: Plan):
        self.plan = plan
        old, new = plan.old, plan.new
        # old names (keys) phase 3 CHANGEs to their new ones: the indexes go with them
        self.changed_names = {r.old.lower() for r in plan.renames.starting.values() if changes_name(plan, r)}
        # columns dropped and added again: the server drops their indexes with them
        self.rebuilt = {
            c.key
            for c in old.columns
            if (after := new.column_map.get(c.key)) is not None and rebuilds(plan, c, after)
        }

    def constraints_removed(self) -> None:
        plan = self.plan
        new_checks = plan.new.check_map
        for check in plan.old.checks:
            if new_checks.get(check.key) != check:
                keyword = "CONSTRAINT" if plan.flavor.rules.drops_check_as_constraint else "CHECK"
                plan.alter(
                    1,
                    f"DROP {keyword} {quote_identifier(check.name)}",
                    partial(edits.drop_check, name=check.name),
                )
        for index in plan.old.indexes:
            if self._index_goes(index) and not self._renamed_index(index) and not self._key_replaced(index):
                plan.alter(1, _drop_index(index), partial(edits.drop_index, name=index.name))

    def constraints_added(self) -> None:
        plan = self.plan
        old_checks, old_indexes = plan.old.check_map, plan.old.index_map
        for index in plan.old.indexes:
            renamed = self._renamed_index(index) if plan.new.index_map.get(index.key) != index else None
            if renamed is not None:
                plan.alter(
                    7,
                    f"RENAME INDEX {quote_identifier(index.name)} TO {quote_identifier(renamed.name)}",
                    partial(edits.rename_index, name=index.name, new_name=renamed.name),
                )
        renamed_to = {r.key for ix in plan.old.indexes if (r := self._renamed_index(ix)) is not None}
        for index in plan.new.indexes:
            was = old_indexes.get(index.key)
            if was is not None and (
                (_comment_only(was, index) and not self._index_goes(was)) or self._key_replaced(was)
            ):
                # dropped and added in one statement, which MariaDB makes instant
                edit = partial(edits.replace_index, index=index)
                plan.alter(7, f"{_drop_index(was)}, ADD {render_index(index)}", edit)
                continue
            rebuilt = was == index and self._index_goes(index)
            if (was != index or rebuilt) and index.key not in renamed_to:
                plan.alter(7, "ADD " + render_index(index), partial(edits.add_index, index=index))
        for check in plan.new.checks:
            if old_checks.get(check.key) != check and not (
                not plan.flavor.rules.keeps_unenforced_checks and not check.enforced
            ):
                edit = partial(edits.add_check, check=check)
                plan.alter(7, "ADD " + render_check(check, plan.flavor), edit)

    def _index_goes(self, index: Index) -> bool:
        """The old index is not in the new table as it is, or a column of it is rebuilt
        (dropping it explicitly first: the server would cut a column out of an index
        of several, and the model with it)."""
        if any(c in self.rebuilt for c in index.columns):
            return True
        new = self.plan.new.index_map.get(index.key)
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
        new = self.plan.new.primary_key
        return (
            is_primary(index)
            and new is not None
            and new != index
            and not _comment_only(index, new)
            and all(c in self.plan.new.column_map for c in index.columns)
            and not any(c in self.rebuilt or c in self.changed_names for c in index.columns)
        )

    def _renamed_index(self, index: Index) -> Index | None:
        """An index that reappears under another name with the same key: RENAME it."""
        old, new = self.plan.old, self.plan.new
        if index.key in new.index_map:
            return None
        for candidate in new.indexes:
            if (candidate.kind, candidate.parts) == (
                index.kind,
                index.parts,
            ) and candidate.key not in old.index_map:
                return candidate
        return None


def _comment_only(old: Index, new: Index | None) -> bool:
    """Two definitions of an index that differ in their comment alone."""
    return new is not None and new.comment != old.comment and replace(new, comment=old.comment) == old


def _drop_index(index: Index) -> str:
    if index.name.upper() == "PRIMARY":
        return "DROP PRIMARY KEY"
    return f"DROP INDEX {quote_identifier(index.name)}"
