"""The diff's rename statements (lattice/diff.py, docs/design.md "Renaming columns"): renames
finishing and cancelled (phase 2), renames starting (phase 3), and the index a pending
rename's old column gets (lattice/old_name_index.py), dropped before its last copy."""

from __future__ import annotations

from dataclasses import replace

from lattice.diff_columns import change, relax_first, set_default, widen_first
from lattice.diff_plan import Plan, RenameStep
from lattice.model import NULL_DEFAULT, Column, key
from lattice.old_name_index import add_old_name_index, drop_old_name_index
from lattice.render import materialize_column, render_column_default
from lattice.sqltext import quote_identifier


def renames_finished(plan: Plan) -> None:
    for rename in plan.renames.finishing.values():
        gone = plan.old.column(rename.old)
        kept = plan.new.column(rename.new)
        if kept is None and key(rename.new) in plan.renames.onward:
            # as it is to be, under the name it has until phase 3 renames it on
            kept = replace(plan.new.column(plan.renames.onward[key(rename.new)].new), name=rename.new)
        if gone is None:
            continue
        if kept is None:
            _unindex_old_name(plan, gone)
            plan.drop_column(2, gone)
            continue
        widen_first(plan, kept)
        old_name, new_name = quote_identifier(gone.name), quote_identifier(kept.name)
        plan.dml(2, f"UPDATE {plan.table} SET {new_name} = {old_name} WHERE {old_name} IS NOT NULL")
        _unindex_old_name(plan, gone)
        plan.drop(2, gone.name)
        plan.order.remove(gone.key)


def renames_cancelled(plan: Plan) -> None:
    for rename in plan.renames.cancelling:
        moved = plan.old.column(rename.new)
        back = plan.new.column(rename.old)
        onward = next((r for r in plan.renames.starting.values() if key(r.old) == key(rename.old)), None)
        if back is None and onward is not None and plan.old.column(rename.old) is not None:
            # the old name is renamed on in phase 3 (a paused shard resumed with another
            # rename of it): its values go back first, and on with it (F73), into the
            # column as it is to be, under the name it has till then: wide enough for
            # them (a VARCHAR(143) the renamers widened the new name to, F169)
            back = replace(plan.new.column(onward.new), name=plan.old.column(rename.old).name)
        if moved is None or back is None or plan.old.column(rename.old) is None:
            continue
        widen_first(plan, back)
        old_name, new_name = quote_identifier(back.name), quote_identifier(moved.name)
        plan.dml(
            2,
            f"UPDATE {plan.table} SET {old_name} = {new_name} "
            f"WHERE {old_name} IS NULL AND {new_name} IS NOT NULL",
        )
        _unindex_old_name(plan, back)
        if moved.key in plan.renames.starting:
            # the same rename starts again (a paused shard resumes with it): its
            # CHANGE COLUMN makes the new name afresh
            plan.drop(2, moved.name)
            plan.order.remove(moved.key)


def changes_name(plan: Plan, rename: RenameStep) -> bool:
    """Does `renames_started` rename the column by CHANGE (not by a copy into a
    column of the new name that is there already)?"""
    old_column, taken = plan.old.column(rename.old), plan.old.column(rename.new)
    if old_column is None or plan.new.column(rename.new) is None:
        return False
    return taken is None or taken.key == old_column.key


def renames_started(plan: Plan) -> None:
    for rename in plan.renames.starting.values():
        old_column = plan.old.column(rename.old)
        new_column = plan.new.column(rename.new)
        again = plan.new.column(rename.old)
        if old_column is None or new_column is None:
            continue
        taken = plan.old.column(rename.new)
        if taken is not None and taken.key in plan.order and taken.key != old_column.key:
            if _copied_into_taken(plan, rename, old_column, new_column, taken, again):
                continue
        else:
            # (as phase 2 left it: a finishing copy into it widened it already, F165)
            relax_first(plan, plan.old_column(old_column), replace(new_column, name=old_column.name))
            plan.change_column(3, old_column.name, new_column)
            plan.order[plan.order.index(old_column.key)] = new_column.key
        if again is not None and rename.stage == "start":
            # the old name comes back, nullable, to take rows from shards not yet renamed;
            # the existing rows get NULL there, not its default: the rename's last copy
            # (WHERE old IS NOT NULL) must not overwrite the values they moved with
            empty = replace(again, default=NULL_DEFAULT)
            plan.add_column(3, empty, plan.position(again))
            default = materialize_column(again, plan.flavor).default
            if default is not None and not default.is_null:
                set_default(plan, 3, again)
            plan.placed(again)
            _index_old_name(plan, again)
        elif again is not None:
            # a rename done in one step whose old name stays (a paused shard has it,
            # F69): a column of its own again, the rows there get its default
            plan.add_column(3, again, plan.position(again))
            plan.placed(again)


def _copied_into_taken(
    plan: Plan,
    rename: RenameStep,
    old_column: Column,
    new_column: Column,
    taken: Column,
    again: Column | None,
) -> bool:
    """A rename starting onto a column of its new name that is there already. True when
    the old name stays for the shards not renamed yet and is done with here too."""
    # a column of that name no shard has any more (it went in this change, as the
    # paused renaming shard resumed, F49), whose rows' values stay (a shard
    # that left with it, F63): the renamed values are copied into it where
    # it has none, NULL or the default it filled the rows of other shards with (a
    # row of a shard that had both keeps its own, F70), and it takes the
    # new definition
    widen_first(plan, new_column)
    old_name, new_name = quote_identifier(old_column.name), quote_identifier(taken.name)
    filler = materialize_column(taken, plan.flavor).default
    empty = f"{new_name} IS NULL"
    filled_literal = filler is not None and not filler.is_null and not filler.is_expression
    if filled_literal:
        # (the filler: a NOT NULL column without a default fills the type's own, F108)
        filled = render_column_default(replace(taken, default=filler), plan.flavor)
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
            plan.change_column(3, old_column.name, cleared)
        copy = f"{new_name} = {old_name}, {old_name} = NULL"
        plan.dml(3, f"UPDATE {plan.table} SET {copy}{rows}")
        change(plan, plan.old_column(new_column), new_column)
        change(plan, cleared, again)
        _index_old_name(plan, again)
        return True
    plan.dml(3, f"UPDATE {plan.table} SET {new_name} = {old_name}{rows}")
    plan.drop_column(3, old_column)
    change(plan, plan.old_column(new_column), new_column)
    return False


def _index_old_name(plan: Plan, column: Column) -> None:
    statement = add_old_name_index(plan.table, materialize_column(column, plan.flavor), plan.flavor)
    if statement is not None:
        plan.dml(8, statement)


def _unindex_old_name(plan: Plan, column: Column) -> None:
    statement = drop_old_name_index(plan.table, column.name, plan.flavor)
    if statement is not None:
        plan.dml(2, statement)
