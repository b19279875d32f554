"""From one downstream table to the next: the ordered statements that take the
downstream table from `old` to `new` (both joined tables), for a flavor.

docs/design.md "Constraints and indices": a table with fewer constraints is more
compatible, so statements that remove constraints run first and those that add
them run last; in between, columns are added and relaxed before any is removed:

  1. drop checks and indexes that go or change; drop generated columns that go
     (docs/design.md "Generated columns": dropped first), and JSON ones on MariaDB (their
     CHECK runs on every row when a later statement copies the table)
  2. renames finishing (docs/design.md "Renaming columns", last shard): copy the old
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

The steps are planned by kind, each in its module, into one `Plan` (lattice/diff_plan.py:
the two tables, the flavor, the renames, the statements by phase and the column order as
they run): indexes and checks in diff_keys.py, renames in diff_renames.py, columns in
diff_columns.py, column moves and table options in diff_layout.py; diff_steps.py groups
the statements into `DownstreamStep`s.
"""

from __future__ import annotations

from collections.abc import Sequence

from lattice import diff_columns, diff_layout, diff_renames
from lattice.diff_keys import KeyChanges
from lattice.diff_plan import Plan, RenameStep
from lattice.diff_steps import DownstreamStep, steps
from lattice.flavor import Flavor
from lattice.model import Table
from lattice.render import materialize, render_table


def diff(
    old: Table,
    new: Table,
    *,
    flavor: Flavor | str = Flavor.MARIADB,
    target: str | None = None,
    renames: Sequence[RenameStep] = (),
) -> list[DownstreamStep]:
    plan = Plan(old, new, Flavor.parse(flavor), target or new.name, renames)
    keys = KeyChanges(plan)
    # each planner appends to its phases; the order they run in is the order of the
    # statements within a phase
    keys.constraints_removed()
    diff_columns.columns_dropped_first(plan)
    diff_renames.renames_finished(plan)
    diff_renames.renames_cancelled(plan)
    diff_renames.renames_started(plan)
    diff_columns.plan_columns(plan)
    diff_layout.reorder(plan)
    diff_layout.options(plan)
    keys.constraints_added()
    return steps(plan.statements(), materialize(old, plan.flavor), plan.table, plan.flavor)


def create(new: Table, *, flavor: Flavor | str = Flavor.MARIADB, target: str | None = None) -> DownstreamStep:
    """The CREATE TABLE that starts the downstream table, when there is none yet."""
    return DownstreamStep(render_table(new, flavor, name=target), materialize(new, flavor))
