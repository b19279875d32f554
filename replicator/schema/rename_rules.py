"""The questions a decision asks of the pending renames (docs/design.md "Renaming columns"):
may a shard's renames and its table be accepted now, does a shard still hold a rename's
old name, does a paused shard hold it or await it. Read-only, over the group's state as
the decision finds it (`RenameRules`); the coordinator decides with the answers and keeps
the records (`RenameLedger`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from lattice import Column, ColumnTypes, Conflict, IncrementalJoin, Table, key
from replicator.schema.group import BlockKind, ShardState, few, has_column
from replicator.schema.renames import RenameLedger, RenameRecord
from replicator.schema.retained import Retained
from replicator.shard_id import ShardId

# the shards accepted together, each with its renames (made together)
Batch = Mapping[ShardId, Collection[tuple[str, str]]]


@dataclass(frozen=True)
class RenameRules:
    shards: Mapping[ShardId, ShardState]
    ledger: RenameLedger
    join: IncrementalJoin  # the accepted schemas
    retained: Retained
    types: ColumnTypes
    pinned: Collection[str]  # keys of pinned columns
    departed: Collection[frozenset[str]]  # the columns each shard that left wrote
    blocked: Collection[ShardId]
    propagated: Table | None  # the downstream table as last emitted
    target: Table | None  # and as last computed

    def check(
        self,
        shard: ShardId,
        renames: list[tuple[str, str]],
        current: Table | None,
        batch: Batch | None = None,
    ) -> str | None:
        """`batch`: the shards accepted with this one, and their renames, made with its."""
        batch = batch or {}
        # the new name of a pending rename holds the old column's values till it finishes
        pending = [
            (r.old, r.new) for r in self.ledger.pending if current is not None and current.column(r.new)
        ]
        problem = self._readds_renamed(shard, renames, current, batch)
        problem = problem or self._has_both(shard, renames, current)
        if problem is not None:
            return problem
        for old, new in [*renames, *pending]:
            problem = self._values_fit(old, new, current, frozenset([*batch, shard]))
            if problem is not None:
                return problem
            ko, kn = key(old), key(new)
            for record in self.ledger.pending:
                if (key(record.old), key(record.new)) == (ko, kn):
                    break  # a remaining shard renames as the first did
                # docs/design.md "Renaming columns": a column both source and target of renames is refused
                if kn == key(record.old) or ko == key(record.new):
                    return (
                        f"rename of {old} to {new} chains with the pending rename of {record.old} to "
                        f"{record.new}: a column cannot be both the source and the target of renames"
                    )
                if ko == key(record.old):
                    return f"{old} is already being renamed to {record.new} on other shards, not to {new}"
            else:
                if self.join.presence(kn):
                    return self._taken(shard, old, new)
                problem = self._onto_both(shard, old, new)
                if problem is not None:
                    return problem
        return None

    def _taken(self, shard: ShardId, old: str, new: str) -> str:
        """Why a rename onto a name a shard has is refused: another shard's column, or the
        shard's own that it drops in the statement (whose values downstream the rename
        would have to tell from the ones it moves)."""
        others = [s for s, st in self.shards.items() if s != shard and has_column(st.accepted, new)]
        if others:
            return f"cannot rename {old} to {new}: a shard has a column {new} already ({others[0]})"
        return (
            f"cannot rename {old} to {new} in the statement that drops the column {new}: downstream "
            f"the dropped values would have to be told from the renamed ones"
        )

    def _onto_both(self, shard: ShardId, old: str, new: str) -> str | None:
        """A rename onto a column no shard has any more copies the old name's values only
        where the new one holds none of its own (`lattice.diff`), and a cancel copies back
        where the old name holds NULL. Where one shard's rows hold values of their own in
        both (it had both columns), a row with a NULL of its own in the old name is one the
        cancel cannot tell from a moved one, and would get its new name's value there
        (F152). The rename waits while such rows are downstream."""
        target = self.propagated or self.target
        if target is None or target.column(new) is None or target.column(old) is None:
            return None
        both = {key(old), key(new)}
        holders = sorted(str(s) for s, st in self.shards.items() if s != shard and both <= st.wrote)
        if any(both <= written for written in self.departed):
            holders.append("shards that left")
        if not holders:
            return None
        return (
            f"cannot rename {old} to {new}: downstream {new} holds values of {few(holders)}, whose rows "
            f"have a {old} of their own too; the rename's copy could not tell their values from those it "
            f"moves; it resumes once {new} or {old} is gone downstream; or drop {new} upstream (a drop "
            f"of {old}), or set-schema / skip the DDL"
        )

    def _readds_renamed(
        self,
        shard: ShardId,
        renames: list[tuple[str, str]],
        current: Table | None,
        batch: Batch,
    ) -> str | None:
        """A shard that renamed old to new and has a column named old again, while other
        shards still write old's values under that name: downstream the old name holds
        their rows (and, till the rename finishes, the values it moved), so the shard's
        new column would share it, and the rename's copy would write one meaning into
        the other. The shard waits until the others rename too, or it drops either; those
        of `batch` make their rename with it."""
        if current is None:
            return None
        made = [*renames, *((r.old, r.new) for r in self.ledger.pending if shard in r.shards)]
        for old, new in made:
            if current.column(old) is None or current.column(new) is None:
                continue
            # (a paused shard that has the old name holds the rename as well, `_holds_old`:
            # one paused since it joined has no rows yet, but its first ones write it, F138)
            others = sorted(
                str(s)
                for s, st in self.shards.items()
                if s != shard and self._writes_old(s, st, old, new, batch)
            )
            if others:
                return (
                    f"it has a column {old} again while its rename of {old} to {new} waits for "
                    f"{few(others)}, whose rows "
                    f"hold {old} downstream; it resumes when they rename {old} too or the shard drops "
                    f"{old} or {new} (or set-schema / skip the DDL)"
                )
        return None

    def _writes_old(self, s: ShardId, st: ShardState, old: str, new: str, batch: Batch) -> bool:
        """Whether the shard's rows write old's values under that name. One of `batch` does
        where it keeps the old name without renaming it (it resumes with it: L19,
        two shards paused on another column), not where it renames too."""
        if s not in batch:
            return has_column(st.accepted, old) or self.paused_holder(st, old)
        pair = (key(old), key(new))
        renames = {(key(o), key(n)) for o, n in batch[s]}
        renames |= {(key(r.old), key(r.new)) for r in self.ledger.pending if s in r.shards}
        return pair not in renames and has_column(st.current, old)

    def _has_both(self, shard: ShardId, renames: list[tuple[str, str]], current: Table | None) -> str | None:
        """A shard that has not made a pending rename and has both its names (it added a
        column of the new name while it has the old one, or joined with both): its own
        new column would be downstream's, which holds the values the rename moves, and
        the copy that finishes the rename would write the shard's old column over it
        (F134). The shard waits until it drops either, or the rename ends."""
        if current is None:
            return None
        made = {(key(old), key(new)) for old, new in renames}
        for record in self.ledger.pending:
            if shard in record.shards or (key(record.old), key(record.new)) in made:
                continue
            if has_column(current, record.old) and has_column(current, record.new):
                return (
                    f"it has both {record.old} and {record.new} while the rename of {record.old} to "
                    f"{record.new} by {few(sorted(map(str, record.shards)))} is pending: downstream "
                    f"{record.new} holds the values it moves, and the copy that finishes it would write "
                    f"the shard's {record.old} over its own {record.new}; it resumes when it drops "
                    f"{record.old} or {record.new} or the rename ends (or set-schema / skip the DDL)"
                )
        return None

    def _values_fit(
        self, old: str, new: str, current: Table | None, renaming: frozenset[ShardId] = frozenset()
    ) -> str | None:
        """docs/design.md "Renaming columns": the new column holds every value of the old one. A rename
        that also changes the type to one the old column's values downstream cannot join
        is a conflict of the renaming shard (it resumes once its new column can hold
        them, or with a skip), not a DDL the downstream table would refuse."""
        before = self._old_values(old)
        after = current.column(new) if current is not None else None
        if before is None or after is None or before.generated is not None or after.generated is not None:
            return None
        if key(old) not in self.retained.held and not self._holders(old, renaming):
            # the renaming shards' own rows are all the old column holds: the downstream CHANGE
            # converts them as MariaDB did upstream (a group of one, or every shard in one
            # decision: `CHANGE i c CHAR(10)`, issue 43)
            return None
        try:
            self.types.join(before.type, after.type)
        except Conflict as exc:
            return (
                f"rename of {old} to {new} changes its type to one the values of {old} downstream "
                f"cannot take ({exc}); change {new} upstream to a type that holds them, or skip the DDL"
            )
        return None

    def _holders(self, old: str, besides: frozenset[ShardId]) -> bool:
        """Some shard but `besides` has rows downstream under the name `old`."""
        if self.join.presence(key(old)) <= len(besides):
            return any(s not in besides and has_column(self.shards[s].accepted, old) for s in self.shards)
        return True

    def _old_values(self, old: str) -> Column | None:
        """The old name's column as the decision leaves it downstream: the join's, held
        for the rows there. A paused shard retried in the decision that changed it is
        checked against the change, not against the table before it (F124)."""
        joined = self.join.table().column(old) if self.join.shards else None
        if joined is not None:
            return self.retained.hold(joined, self.propagated)
        return self.propagated.column(old) if self.propagated is not None else None

    def holds_old(self, record: RenameRecord, besides: ShardId | None = None) -> bool:
        """Some shard has the old name as the column the rename moves: one that has not
        made the rename, nor dropped the old name since it began. One that made it and has
        the name again has a column of its own (it waited for the others, `_readds_renamed`),
        as has one that dropped it and added it again while no other shard had it
        (F87): the diff adds it afresh once the copy is done (F84); added while
        one had, it is that shard's column downstream (`rename_book.record_accepted`, F116).
        But one that made it, dropped the new name and has the old one again has given the
        rename up: its old name is the one the others still have, by name, as a shard that
        never renamed (F109), and so has one that has done so while paused
        (`_gave_up_paused`): the decision that resumes it cancels the rename, its values
        copied back, not one that finishes it first because another holder left meanwhile."""
        if key(record.old) in self.pinned:
            # the values it has not moved yet stay under the pinned name: it never finishes
            # (its copy would take them away, and the old name with them)
            return True
        return any(
            shard not in record.departed
            and shard != besides
            and (has_column(state.accepted, record.old) or self.paused_holder(state, record.old))
            and (
                shard not in record.shards
                or not has_column(state.accepted, record.new)
                or self.gave_up_paused(state, record)
            )
            for shard, state in self.shards.items()
        )

    @staticmethod
    def paused_holder(state: ShardState, old: str) -> bool:
        """A shard paused by a conflict that has the old name in its table now, having
        neither dropped it nor renamed it away while paused: had it not been paused,
        its ADD of the column would have been accepted as the group's column, and the
        rename would wait for it. It resumes holding the name, and its rows then bring
        values that the rename must move too (F106). A name it renamed a column
        to while paused holds that column's values, not the group's column of the name:
        its rename onto a column downstream would be refused (F155). So too a rename of
        a column its rows downstream lack (of a shard paused since it joined): the name
        it has again after is one it added afresh (F171)."""
        block = state.block
        if block is None or block.kind != BlockKind.CONFLICT or not has_column(state.current, old):
            return False
        k = key(old)
        moved = {key(name) for pair in (*block.renames, *block.unmoved) for name in pair}
        return k not in {key(d) for d in block.dropped} and k not in moved

    @classmethod
    def gave_up_paused(cls, state: ShardState, record: RenameRecord) -> bool:
        """A shard paused since it made the rename that has, while paused, dropped the
        new name and has the old one (F132). One that renamed the new name on
        instead still makes the rename: it ends when that shard's chain is accepted."""
        return (
            cls.paused_holder(state, record.old)
            and key(record.new) in {key(d) for d in state.block.dropped}
            and not has_column(state.current, record.new)
        )

    def awaited(self, record: RenameRecord) -> bool:
        """A shard paused by a conflict has made the same rename and still has the new
        name: it may resume with it in this decision, which then continues the rename
        rather than starting it anew. (One that dropped the new name since holds none of
        the values: the rename is cancelled, F62.)"""
        pair = (key(record.old), key(record.new))
        return any(
            (key(old), key(new)) == pair
            and self.shards[s].current is not None
            and self.shards[s].current.column(record.new) is not None
            for s in self.blocked
            if self.shards[s].block.kind == BlockKind.CONFLICT
            for old, new in self.shards[s].block.renames
        )
