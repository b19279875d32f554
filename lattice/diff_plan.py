"""What the diff's planners share (lattice/diff.py): the two tables, the flavor, the
renames the change carries, and the statements planned so far by phase, with the
column order downstream as they run, which placing an added or moved column reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial

from lattice import edits
from lattice.edits import UNPLACED, Place
from lattice.flavor import Flavor
from lattice.join import ColumnLattice
from lattice.model import Column, Table, key
from lattice.render import materialize_column, qualified_name, render_column
from lattice.sqltext import quote_identifier


@dataclass(frozen=True)
class RenameStep:
    """A column rename of the procedure (docs/design.md "Renaming columns"), at its first or its last
    shard."""

    old: str
    new: str
    # "start" (first shard renamed), "finish" (last shard renamed), "whole" (both at
    # once) or "cancel" (no shard has the new name any more, some still the old one)
    stage: str


@dataclass(frozen=True)
class Renames:
    """The renames a change carries, by stage (names as keys)."""

    # starting renames whose new name the new table has, by old name: a finishing
    # rename into that name goes on with them
    onward: dict[str, RenameStep]
    # by new name; "whole": a group of one shard renames in one step (first and last shard at once)
    starting: dict[str, RenameStep]
    finishing: dict[str, RenameStep]  # by old name
    cancelling: tuple[RenameStep, ...]
    # columns the starting renames take care of, old names and new
    renaming: frozenset[str]

    @classmethod
    def of(cls, renames: Sequence[RenameStep], new: Table) -> Renames:
        # a rename whose new name no shard has any more moves nothing: its old column
        # goes (or stays) as any other column (F22)
        # unless a rename starting from that new name takes it on (the two compose, F43)
        onward = {key(r.old): r for r in renames if r.stage in ("start", "whole") and new.column(r.new)}
        # But an old name the new table has is a column a shard added afresh (`plan_columns`):
        # what the old column holds is the rename's (NULLs it left, the last holders'
        # values), which goes with the new name (F166)
        renames = [
            r
            for r in renames
            if r.stage == "cancel"
            or new.column(r.new) is not None
            or (r.stage == "finish" and (key(r.new) in onward or new.column(r.old) is not None))
        ]
        starting = {r.new.lower(): r for r in renames if r.stage in ("start", "whole")}
        return cls(
            onward=onward,
            starting=starting,
            finishing={r.old.lower(): r for r in renames if r.stage == "finish"},
            cancelling=tuple(r for r in renames if r.stage == "cancel"),
            renaming=frozenset(starting) | {r.old.lower() for r in starting.values()},
        )


# one statement's change to the table model (None: the statement changes rows only)
Edit = Callable[[Table], Table] | None


@dataclass(frozen=True)
class Statement:
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


def _stored(column: Column) -> bool:
    return column.generated is not None and column.generated.stored


class Plan:
    """The statements planned from `old` to `new`, by phase (see lattice/diff.py), and
    the statements that place a column."""

    def __init__(self, old: Table, new: Table, flavor: Flavor, target: str, renames: Sequence[RenameStep]):
        self.old, self.new, self.flavor = old, new, flavor
        self.table = qualified_name(target)
        self.renames = Renames.of(renames, new)
        self.column_lattice = ColumnLattice(flavor)
        self.phases: list[list[Statement]] = [[] for _ in range(9)]
        # the column order downstream as statements run, for ADD ... AFTER and moves
        self.order = [c.key for c in old.columns]
        # generated columns added last (phase 6): phase 4's moves must not name them
        self.late: set[str] = set()
        # columns a rename's copy widened in phase 2 (see `diff_columns.widen_first`)
        self.widened: dict[str, Column] = {}

    def statements(self) -> Iterator[Statement]:
        """Every statement planned, in the order they run."""
        return (s for phase in self.phases for s in phase)

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
        self.phases[phase].append(Statement(spec, edit, computes, adds, defaults))

    def dml(self, phase: int, statement: str) -> None:
        self.phases[phase].append(Statement(statement))

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

    def drop_column(self, phase: int, column: Column) -> None:
        self.drop(phase, column.name)
        if column.key in self.order:
            self.order.remove(column.key)

    def change_column(self, phase: int, name: str, column: Column, place: Place = UNPLACED) -> None:
        """MODIFY COLUMN, or CHANGE COLUMN when `column` has another name than `name`."""
        held = materialize_column(column, self.flavor)
        if held.name == name:
            spec = f"MODIFY COLUMN {render_column(held, self.flavor)}"
        else:
            spec = f"CHANGE COLUMN {quote_identifier(name)} {render_column(held, self.flavor)}"
        edit = partial(edits.change_column, name=name, column=held, place=place)
        self.alter(phase, spec + place.sql, edit, _stored(held))

    # -- helpers -------------------------------------------------------------------
    def old_column(self, column: Column) -> Column | None:
        """The column as the statements before phase 4 leave it."""
        return self.widened.get(column.key) or self.old.column_map.get(column.key)

    def new_column(self, column: Column) -> Column | None:
        return self.new.column_map.get(column.key)

    def position(self, column: Column, late: bool = False) -> Place:
        """Where to add `column`; an early (phase 4) one never goes after a late one."""
        keys = [c.key for c in self.new.columns]
        i = keys.index(column.key)
        for prev in reversed(keys[:i]):
            if prev in self.order and (late or prev not in self.late):
                return Place(after=self.new.column_map[prev].name)
        return Place(first=bool(self.order))

    def placed(self, column: Column) -> None:
        keys = [c.key for c in self.new.columns]
        i = keys.index(column.key)
        for prev in reversed(keys[:i]):
            if prev in self.order:
                self.order.insert(self.order.index(prev) + 1, column.key)
                return
        self.order.insert(0, column.key)
