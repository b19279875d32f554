"""The diff's column statements (lattice/diff.py): columns added, dropped and changed,
a change relaxed first and tightened after, generated columns made, unmade and
rebuilt, and the widening or relaxing a rename's copy needs first."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from lattice import edits
from lattice.algebra import Conflict
from lattice.diff_plan import Plan
from lattice.join import holding
from lattice.model import Column, ColumnType, Default, Family, key
from lattice.render import materialize_column, render_column_default
from lattice.sqltext import quote_identifier, quote_string

TEMPORARY_SUFFIX = "__shardmerge_tmp"
# where a string column becomes BIGINT UNSIGNED, the type its values go by: the server
# converts strings into it and it into BIGINT UNSIGNED exactly (`_clips_unsigned`, L47)
EXACT_UNSIGNED_BIGINT = ColumnType(Family.DECIMAL, "decimal", precision=20, scale=0)


def columns_dropped_first(plan: Plan) -> None:
    """Phase 1's columns (`goes_first`)."""
    for column in plan.old.columns:
        if goes_first(plan, column):
            plan.drop_column(1, column)


def goes_first(plan: Plan, column: Column) -> bool:
    """A column that goes in phase 1: generated (docs/design.md "Generated columns"), or a JSON one on
    MariaDB,
    whose CHECK (json_valid) every later statement that copies the table runs on every
    row, and an ADD COLUMN ... JSON NOT NULL gave the rows an invalid '' (F48)."""
    if plan.new_column(column) is not None:
        return False
    if column.generated is not None:
        return True
    if not plan.flavor.rules.blank_json_on_add or column.type.family != Family.JSON:
        return False
    renames = plan.renames
    cancelled = {key(n) for r in renames.cancelling for n in (r.old, r.new)}
    return column.key not in (renames.finishing.keys() | renames.renaming | cancelled)


def plan_columns(plan: Plan) -> None:
    """Columns added (phases 4 and 6), changed (`change`) and dropped (phase 5), but those
    the renames take care of."""
    renames = plan.renames
    for column in plan.new.columns:
        if column.key in renames.renaming:
            continue
        # a finishing rename's old name a shard added again: a new column (phase 2 drops the old)
        before = None if column.key in renames.finishing else plan.old_column(column)
        if before is None:
            late = column.generated is not None
            if not late and _blank_json(plan, column):
                # MariaDB gives the rows there '' without a check, and every later copy of
                # the table checks json_valid on them and is refused (4025, F54):
                # they get JSON null instead, and the column its own definition after
                filled = replace(column, default=Default(quote_string("null")))
                plan.add_column(4, filled, plan.position(column))
                set_default(plan, 6, column)
            else:
                plan.add_column(6 if late else 4, column, plan.position(column, late))
            plan.placed(column)
            if late:
                plan.late.add(column.key)
            continue
        change(plan, before, column)
    for column in plan.old.columns:
        if (
            not goes_first(plan, column)
            and plan.new_column(column) is None
            and column.key not in (renames.finishing.keys() | renames.renaming)
        ):
            plan.drop_column(5, column)


def _blank_json(plan: Plan, column: Column) -> bool:
    """A JSON NOT NULL column without a default, added to MariaDB rows."""
    held = materialize_column(column, plan.flavor)
    return (
        plan.flavor.rules.blank_json_on_add
        and held.type.family == Family.JSON
        and not held.nullable
        and held.default is None
    )


def change(plan: Plan, before: Column, after: Column) -> None:
    if before.generated is not None or after.generated is not None:
        _generated_change(plan, before, after)
        return
    old_sql, new_sql = plan.col(before), plan.col(after)
    if old_sql == new_sql:
        return
    try:
        middle = plan.column_lattice.join(before, after)
        middle_sql = plan.col(middle)
    except Conflict:
        middle, middle_sql = after, new_sql  # e.g. a new default: no order, one step
    if middle_sql != old_sql:
        modify(plan, 4, before, middle)
    if new_sql != middle_sql:
        modify(plan, 6, middle, after)


def modify(plan: Plan, phase: int, before: Column, after: Column) -> None:
    b, a = materialize_column(before, plan.flavor), materialize_column(after, plan.flavor)
    if replace(b, default=a.default) == a:
        set_default(plan, phase, after)
        return
    if _clips_unsigned(plan, b, a):
        exact = replace(after, type=EXACT_UNSIGNED_BIGINT, auto_increment=False)
        plan.change_column(phase, before.name, exact)
    plan.change_column(phase, before.name, after)


def _clips_unsigned(plan: Plan, before: Column, after: Column) -> bool:
    """A string column's values made BIGINT UNSIGNED by the server's ALTER lose those
    above 2**63 - 1 (`Rules.clips_unsigned_from_strings`)."""
    return (
        plan.flavor.rules.clips_unsigned_from_strings
        and before.type.family in (Family.STRING, Family.BINARY)
        and after.type.name == "bigint"
        and after.type.unsigned
    )


def set_default(plan: Plan, phase: int, column: Column) -> None:
    """ALTER COLUMN SET/DROP DEFAULT: the column differs from `column` in its default only."""
    held = materialize_column(column, plan.flavor)
    name = quote_identifier(held.name)
    if held.default is None or held.default.is_null:
        spec = f"ALTER COLUMN {name} DROP DEFAULT"
    else:
        spec = f"ALTER COLUMN {name} SET DEFAULT {render_column_default(held, plan.flavor)}"
    plan.alter(phase, spec, partial(edits.change_column, name=held.name, column=held), defaults=held.key)


def _generated_change(plan: Plan, before: Column, after: Column) -> None:
    if before.generated is not None and after.generated is not None:
        if plan.col(before) != plan.col(after):
            plan.drop_column(1, before)
            plan.add_column(6, after, plan.position(after, late=True))
        return
    if before.generated is not None:
        # generated → normal (docs/design.md "Stored generated columns", first shard)
        if before.generated.stored:
            plan.change_column(4, after.name, after)
        else:
            # no server converts a VIRTUAL column in place: copy its values through a new column
            temp = replace(after, name=after.name + TEMPORARY_SUFFIX)
            plan.add_column(4, temp)
            copy = f"SET {quote_identifier(temp.name)} = {quote_identifier(before.name)}"
            plan.dml(4, f"UPDATE {plan.table} {copy}")
            plan.drop(4, before.name)
            plan.change_column(4, temp.name, after, plan.position(after))
        return
    # normal → generated (last shard)
    assert after.generated is not None
    if after.generated.stored and plan.flavor.rules.generates_in_place:
        plan.change_column(6, after.name, after)
    else:
        # TiDB cannot make a normal column generated; no server turns one VIRTUAL
        plan.drop(6, before.name)
        plan.add_column(6, after, plan.position(after, late=True))


def rebuilds(plan: Plan, before: Column, after: Column) -> bool:
    """`_generated_change` drops the column and adds it again."""
    if before.generated is not None and after.generated is not None:
        return plan.col(before) != plan.col(after)
    if before.generated is not None:
        return not before.generated.stored
    if after.generated is not None:
        return not after.generated.stored or not plan.flavor.rules.generates_in_place
    return False


def relax_first(plan: Plan, before: Column, after: Column) -> None:
    """A rename that also relaxes its column (docs/design.md "Renaming columns" makes the new name nullable):
    the relaxing first, under the old name, then the rename alone. The server renames
    at once, where NOT NULL to NULL rebuilds the table; that rebuild keeps every
    column the rows name, so the other shards' rows go on meanwhile (the executor's
    `journal_flows`), and the rename that does not holds them for no time."""
    if plan.col(before) == plan.col(after):
        return
    try:
        middle = plan.column_lattice.join(before, after)
    except Conflict:
        return
    if plan.col(middle) == plan.col(after):
        modify(plan, 3, before, after)


def widen_first(plan: Plan, column: Column) -> None:
    """Before a copy into `column`: widen it towards the join now (the values copied
    were written under the other name, which shards may have widened); phase 4 takes
    it on from there."""
    before = plan.old_column(column)
    if before is None or before.generated is not None or column.generated is not None:
        return
    try:
        middle = plan.column_lattice.join(before, column)
    except Conflict:
        # another family or collation: a type taking both the values there and those
        # copied in (BIGINT rows and a JSON copied in, F60), as the join is to be
        both = holding(before.type, column.type, plan.flavor)
        if both is None:
            return
        nullable = before.nullable or column.nullable
        middle = replace(column, type=both, nullable=nullable)
    if plan.col(middle) != plan.col(before):
        modify(plan, 2, before, middle)
        plan.widened[column.key] = middle
