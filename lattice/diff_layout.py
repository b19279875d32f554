"""The diff's pass-through statements (lattice/diff.py, phase 4; docs/design.md "Statements that pass
through"): column moves and table options, as the shards' DDL set them."""

from __future__ import annotations

from functools import partial

from lattice import edits
from lattice.diff_plan import Plan
from lattice.edits import Place
from lattice.sqltext import quote_string
from lattice.typetext import charset_name, collation_name


def reorder(plan: Plan) -> None:
    """Pass column moves through (docs/design.md "Statements that pass through": reordering)."""
    wanted = [c.key for c in plan.new.columns if c.key in plan.order and c.key not in plan.late]
    current = [k for k in plan.order if k in set(wanted)]
    for i, k in enumerate(wanted):
        if current[i] == k:
            continue
        column = plan.new.column_map[k]
        place = Place(first=True) if i == 0 else Place(after=plan.new.column_map[wanted[i - 1]].name)
        before = plan.old_column(column)
        if column.generated is not None and before is not None and before.generated is None:
            column = before  # moved as it is: phase 6 makes it generated (no MODIFY can)
        plan.change_column(4, column.name, column, place)
        current.remove(k)
        current.insert(i, k)
    rest = [k for k in plan.order if k not in set(wanted)]
    plan.order = current + rest


def options(plan: Plan) -> None:
    old, new = plan.old.options, plan.new.options
    if new.engine and new.engine != old.engine:
        plan.alter(4, f"ENGINE={new.engine}", partial(edits.set_options, engine=new.engine))
    if new.charset and (new.charset, new.collation) != (old.charset, old.collation):
        spec = f"DEFAULT CHARSET={charset_name(new.charset, plan.flavor)}"
        if new.collation:
            spec += f" COLLATE={collation_name(new.collation, plan.flavor)}"
        # no COLLATE: the character set's default, the server's choice (None)
        plan.alter(4, spec, partial(edits.set_options, charset=new.charset, collation=new.collation))
    if new.comment != old.comment:
        # an empty comment is no comment
        edit = partial(edits.set_options, comment=new.comment or None)
        plan.alter(4, "COMMENT=" + quote_string(new.comment or ""), edit)
