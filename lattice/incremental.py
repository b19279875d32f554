"""The join of many shard tables, kept incrementally.

A shard group can hold a thousand shards of a hundred columns, and one DDL changes
one shard. Each column, index and check name keeps a count of the distinct
definitions the shards hold; a change re-joins only the names it touched, folding
the few distinct definitions (plus ABSENT where some shard lacks the name). Join
being commutative, associative and idempotent is what makes folding distinct
values equal to joining every shard (tests compare with `join_all`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from typing import Any

from lattice.algebra import ABSENT, Conflict, Lattice
from lattice.flavor import Flavor
from lattice.join import TableLattice, settle, table_lattice
from lattice.model import Table, TableOptions


class _Slot:
    """The definitions one name has across shards."""

    __slots__ = ("counts", "joined", "present")

    def __init__(self) -> None:
        self.counts: Counter = Counter()
        self.present = 0  # shards holding the name
        self.joined: Any = None  # cached join, or a Conflict

    def copy(self) -> _Slot:
        slot = _Slot()
        slot.counts, slot.present, slot.joined = Counter(self.counts), self.present, self.joined
        return slot

    def fold(self, lattice: Lattice, shards: int) -> Any:
        values = list(self.counts)
        if self.present < shards:
            values.append(ABSENT)
        result = values[0]
        try:
            for value in values[1:]:
                result = lattice.join(result, value)
        except Conflict as exc:
            return exc
        return result


class IncrementalJoin:
    def __init__(self, flavor: Flavor | str = Flavor.MARIADB, name: str = "joined"):
        self.lattice: TableLattice = table_lattice(flavor)
        self.name = name
        self.shards = 0
        self.columns: dict[str, _Slot] = {}
        self.indexes: dict[str, _Slot] = {}
        self.checks: dict[str, _Slot] = {}
        self.options: Counter[TableOptions] = Counter()
        self._dirty: set[tuple[str, str]] = set()
        self._all_dirty = True
        self._table: Table | Conflict | None = None  # the last join, until a shard changes
        # the last join that succeeded, while every name joins as it did then: most DDLs
        # of a large group leave the join as it was (a column some shards have already)
        self._last: Table | None = None
        # the slots this join may change in place: after `copy` both joins share every
        # slot, and each copies one before it first changes it
        self._own: set[tuple[str, str]] | None = None  # None: every slot is its own

    def copy(self) -> IncrementalJoin:
        """An independent join of the same shards, in time proportional to the names
        (a decision works on a copy of its group's state: the slots are shared till one
        of the two changes one)."""
        other = IncrementalJoin.__new__(IncrementalJoin)
        other.lattice, other.name, other.shards = self.lattice, self.name, self.shards
        other.columns, other.indexes, other.checks = dict(self.columns), dict(self.indexes), dict(self.checks)
        other.options = Counter(self.options)
        other._dirty, other._all_dirty = set(self._dirty), self._all_dirty
        other._table, other._last = self._table, self._last  # (immutable: a Table or a Conflict)
        self._own, other._own = set(), set()
        return other

    def _slot(self, kind: str, k: str, create: bool = False) -> _Slot | None:
        """Slot `k` of `kind` to change: this join's own (copied first if shared)."""
        slots: dict[str, _Slot] = getattr(self, kind)
        slot = slots.get(k)
        if slot is None:
            if not create:
                return None
            slot = slots[k] = _Slot()
        elif self._own is not None and (kind, k) not in self._own:
            slot = slots[k] = slot.copy()
        if self._own is not None:
            self._own.add((kind, k))
        return slot

    # -- membership ------------------------------------------------------------------
    def add(self, table: Table) -> None:
        self._table = None
        self.shards += 1
        self._all_dirty = True  # every name another shard lacked may now be partial
        self._count(table, +1)

    def remove(self, table: Table) -> None:
        self._table = None
        self.shards -= 1
        self._all_dirty = True
        self._count(table, -1)

    def replace(self, old: Table, new: Table) -> None:
        """One shard's schema changes: only the names that differ are re-joined."""
        if old is new or (
            (old.name, old.columns, old.indexes, old.checks, old.options)
            == (new.name, new.columns, new.indexes, new.checks, new.options)
        ):
            return
        self._table = None
        for kind, before, after in (
            ("columns", old.column_map, new.column_map),
            ("indexes", old.index_map, new.index_map),
            ("checks", old.check_map, new.check_map),
        ):
            # in the tables' order, not a set's: a new slot's place is the joined column order
            for k in [*before, *(k for k in after if k not in before)]:
                b, a = before.get(k), after.get(k)
                if b is a or b == a:  # (a dataclass's == compares every field, even of itself)
                    continue
                if b is not None:
                    self._uncount(kind, k, b)
                if a is not None:
                    self._add_to(kind, k, a)
                self._dirty.add((kind, k))
        if old.options != new.options:
            self.options[old.options] -= 1
            if not self.options[old.options]:
                del self.options[old.options]
            self.options[new.options] += 1

    def _count(self, table: Table, sign: int) -> None:
        for kind, items in (
            ("columns", table.column_map),
            ("indexes", table.index_map),
            ("checks", table.check_map),
        ):
            for k, value in items.items():
                if sign > 0:
                    self._add_to(kind, k, value)
                else:
                    self._uncount(kind, k, value)
        self.options[table.options] += sign
        if not self.options[table.options]:
            del self.options[table.options]

    def _add_to(self, kind: str, k: str, value: Any) -> None:
        slot = self._slot(kind, k, create=True)
        slot.counts[value] += 1
        slot.present += 1

    def _uncount(self, kind: str, k: str, value: Any) -> None:
        slot = self._slot(kind, k)
        slot.counts[value] -= 1
        if not slot.counts[value]:
            del slot.counts[value]
        slot.present -= 1
        if not slot.present:
            del getattr(self, kind)[k]

    # -- the join ----------------------------------------------------------------------
    def _refresh(self) -> bool:
        """Re-join the names changed since; whether any joins otherwise now (or went)."""
        lattices = {
            "columns": self.lattice.column,
            "indexes": self.lattice.indexes.inner,
            "checks": self.lattice.checks.inner,
        }
        changed = self._all_dirty  # (a shard came or went: every name may be partial now)
        if self._all_dirty:
            targets = [(kind, k) for kind in lattices for k in getattr(self, kind)]
        else:
            targets = [(kind, k) for kind, k in self._dirty if k in getattr(self, kind)]
            changed = len(targets) < len(self._dirty)  # a name no shard has any more
        for kind, k in targets:
            slot = self._slot(kind, k)
            before = slot.joined
            slot.joined = slot.fold(lattices[kind], self.shards)
            # (a new name's slot starts at None; a Conflict equals only itself)
            changed = changed or not (before is slot.joined or before == slot.joined)
        self._dirty.clear()
        self._all_dirty = False
        return changed

    def table(self) -> Table:
        """The joined table; raises Conflict (with the column in its path) if none."""
        if self.shards == 0:
            raise ValueError("no shard tables to join")
        if self._table is None:
            try:
                self._table = self._join()
            except Conflict as exc:
                self._table = exc
        if isinstance(self._table, Conflict):
            raise self._table
        return self._table

    def _join(self) -> Table:
        last, self._last = self._last, None
        changed = self._refresh()
        options = self._joined_options()
        if not changed and last is not None and options == last.options:
            self._last = last
            return last
        columns = []
        for k, slot in self.columns.items():
            if isinstance(slot.joined, Conflict):
                raise slot.joined.at("columns", k)
            if slot.joined is not ABSENT:
                columns.append(slot.joined)
        indexes = tuple(s.joined for s in self.indexes.values() if s.joined is not ABSENT)
        checks = tuple(s.joined for s in self.checks.values() if s.joined is not ABSENT)
        table = Table(self.name, tuple(columns), indexes, checks, options)
        self._last = settle(table, self.lattice.flavor)
        return self._last

    def _joined_options(self) -> TableOptions:
        options_list = list(self.options)
        options = options_list[0]
        for other in options_list[1:]:
            options = self.lattice.options.join(options, other)
        return options

    # -- what DDLs passed through (docs/design.md "Statements that pass through") -------------------------
    # The coordinator passes a DDL's table options and column comments through to the
    # downstream table, though other shards differ. Once no shard holds one any more
    # (the shards that set it left), it gives way to the join, as if never set.
    def held_options(self, passed: TableOptions, also: Sequence[Table] = ()) -> TableOptions | None:
        """The table options to pass through still: `passed` where some shard holds
        each option (in the join, or in `also`: tables of shards not in it now, such
        as paused ones'), else the shards' join (None when no shard is left)."""
        if not self.options:
            return None
        options = [*self.options, *(t.options for t in also)]
        held = {
            f.name: getattr(passed, f.name)
            for f in fields(TableOptions)
            if any(getattr(o, f.name) == getattr(passed, f.name) for o in options)
        }
        return replace(self._joined_options(), **held)

    def agreed_options(self, passed: TableOptions, also: Sequence[Table] = ()) -> TableOptions:
        """`passed`, but where every shard (in the join, or in `also`) has one value of
        an option, that value: a pass-through gives way once the shards agree, as when
        the shard that set another one left (F122). A character set and its
        collation go together."""
        options = [*self.options, *(t.options for t in also)]
        agreed: dict[str, object] = {}
        for group in (("engine",), ("charset", "collation"), ("comment",)):
            values = {tuple(getattr(o, name) for name in group) for o in options}
            if len(values) == 1:
                agreed.update(zip(group, values.pop(), strict=True))
        return replace(passed, **agreed)

    def held_comments(
        self, passed: Mapping[str, str | None], also: Sequence[Table] = ()
    ) -> dict[str, str | None]:
        """The column comments of `passed` (by column key) that some shard still holds."""
        return {
            k: comment
            for k, comment in passed.items()
            if k in self.columns
            and (
                any(c.comment == comment for c in self.columns[k].counts)
                or any((c := t.column_map.get(k)) is not None and c.comment == comment for t in also)
            )
        }

    def presence(self, column_key: str) -> int:
        """How many shards hold a column of this name (normal or generated)."""
        slot = self.columns.get(column_key)
        return slot.present if slot else 0
