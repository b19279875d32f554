"""What a shard group's coordinator knows between two decisions (`GroupState`): every
shard's state, the join of their accepted schemas, the downstream table as computed and
as last emitted, what the rows downstream hold beyond the join, the pending renames.

A decision changes it on the group's executor thread; the shards it touched and the rest
go to the store at the decision's end (`GroupState.save`), in the transaction of the DDL
journal. Other threads read a `GroupView`, never this."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from lattice import (
    Column,
    ColumnTypes,
    Flavor,
    IncrementalJoin,
    Table,
    TableOptions,
    key,
    materialize,
    table_from_data,
    table_to_data,
)
from replicator.identity_memo import IdentityMemo
from replicator.schema.fills import Fills
from replicator.schema.group import Block, BlockKind, ShardState, Version
from replicator.schema.rename_rules import RenameRules
from replicator.schema.renames import RenameLedger, RenameRecord
from replicator.schema.retained import Retained
from replicator.schema.way_out import of_block
from replicator.shard_id import ShardId
from replicator.state.coordinator_store import CoordinatorStore, StoredState


@dataclass(eq=False)
class GroupState:
    flavor: Flavor
    name: str  # the downstream table's name (the join's)
    qualified: str = ""  # and with its schema: what a way out names (`schema.table`)
    shards: dict[ShardId, ShardState] = field(default_factory=dict)
    blocked: set[ShardId] = field(default_factory=set)  # the shards whose block is set (`set_block`)
    touched: set[ShardId] = field(default_factory=set)  # shards changed since the last save
    # shards whose record of written columns grew since the last decision (`forget_written`),
    # and the columns downstream then
    unsettled: set[ShardId] = field(default_factory=set)
    there: frozenset[str] = frozenset()
    # the same record of the shards that left, whose rows stay downstream (F154): only
    # those of two columns or more, as `_onto_both` asks for pairs
    departed: set[frozenset[str]] = field(default_factory=set)
    # for each shard that left, the column sets its rows downstream are unique on: its own
    # unique keys then and the downstream table's (see `_unsure_keys`)
    departed_keys: list[frozenset[frozenset[str]]] = field(default_factory=list)
    target: Table | None = None  # what the downstream table should be
    propagated: Table | None = None  # what it is: the last table DDL was emitted for
    fills: Fills = field(default_factory=Fills)  # what rows hold in a column their shard lacks (fills.py)
    version: Version = field(default_factory=Version)
    propagation: bool = True
    ledger: RenameLedger = field(default_factory=RenameLedger)  # the renames in progress (renames.py)
    moves: list[tuple[str, str | None]] = field(default_factory=list)  # column moves (key, after key or None)
    comments: dict[str, str | None] = field(default_factory=dict)  # column comments last set (pass-through)
    options: TableOptions | None = None  # table options last set by a DDL (pass-through)
    known_columns: set[str] = field(default_factory=set)
    # columns kept downstream for good, whether or not a shard has them (DM's `drop column`
    # event filter, `Coordinator.pin`): by key, as downstream had them when pinned
    pinned: dict[str, Column] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.join = IncrementalJoin(self.flavor, name=self.name)  # the accepted schemas
        self.types = ColumnTypes(self.flavor)
        # what rows already downstream need of a column beyond the join (retained.py)
        self.retained = Retained(self.types)
        # the target and the propagated table as the server holds them, and as saved: asked
        # for on every decision, though most leave them as they were (materializing or
        # writing out a table of a hundred columns was a fifth of a decision)
        self.materialized: IdentityMemo[Table] = IdentityMemo(lambda t: materialize(t, self.flavor), size=4)
        self._data_of: IdentityMemo[dict[str, Any]] = IdentityMemo(table_to_data, size=8)

    def fork(self) -> GroupState:
        """An independent copy, for a decision to work on (issue 72: decide on a value,
        install it once its writes committed; the state a failed commit leaves is the one
        before). The shards' states, tables and blocks are values and shared; every
        container a decision changes is copied, the join slot by slot as it changes one."""
        other = copy.copy(self)  # (the caches of table renderings: of values, shared)
        other.shards = dict(self.shards)
        other.blocked, other.touched = set(self.blocked), set(self.touched)
        other.unsettled = set(self.unsettled)
        other.departed, other.departed_keys = set(self.departed), list(self.departed_keys)
        other.fills, other.ledger = self.fills.copy(), self.ledger.copy()
        other.moves, other.comments = list(self.moves), dict(self.comments)
        other.known_columns, other.pinned = set(self.known_columns), dict(self.pinned)
        other.history = list(self.history)
        other.join, other.retained = self.join.copy(), self.retained.copy()
        return other

    def update(self, shard: ShardId, **changes: Any) -> ShardState:
        """The shard's state with `changes` (fields of `ShardState`), in place of the old."""
        state = self.shards[shard] = replace(self.shards[shard], **changes)
        return state

    def accept(self, shard: ShardId) -> ShardState:
        """The shard's current schema is its accepted one now."""
        state = self.shards[shard] = self.shards[shard].with_current_accepted()
        return state

    @property
    def renames(self) -> list[RenameRecord]:
        """The pending renames, in the order they began."""
        return self.ledger.pending

    def rules(self) -> RenameRules:
        """The pending renames' rules over the group as it stands (rename_rules.py)."""
        return RenameRules(
            self.shards,
            self.ledger,
            self.join,
            self.retained,
            self.types,
            self.pinned.keys(),
            self.departed,
            self.blocked,
            self.propagated,
            self.target,
        )

    def set_block(self, shard: ShardId, block: Block | None) -> None:
        """Every change of a shard's block goes through here: the blocked shards are
        kept apart, as a decision asks for them among a thousand shards."""
        was = self.shards[shard].block
        # a TRUNCATE hold outlasts the blocks that come after it: its rows are still to delete
        held = was if was is not None and was.kind == BlockKind.TRUNCATE else was.truncate if was else None
        if block is not None:
            reason = of_block(block.kind, shard, block.reason, self.qualified or self.name)
            block = replace(block, reason=reason)
            if block.kind != BlockKind.TRUNCATE and held is not None:
                block = replace(block, truncate=held)
        elif was is not None and was.kind != BlockKind.TRUNCATE:
            block = was.under or held  # (the conflict it stood on holds the shard again)
        self.update(shard, block=block)
        self.touched.add(shard)
        if block is None:
            self.blocked.discard(shard)
        else:
            self.blocked.add(shard)

    def cleared(self) -> dict[ShardId, list[str]]:
        """The columns each shard's writes set NULL while renames are pending
        (`RenameLedger.cleared`)."""
        return self.ledger.cleared({s: st.accepted for s, st in self.shards.items()}, self.propagated)

    def column_states(self, extract: frozenset[str] = frozenset()) -> dict[str, str]:
        """docs/design.md "Adding and dropping columns": exists on all / partial / dropped, or
        pinned: no shard has it, but it stays downstream (`Coordinator.pin`), or extract:
        no shard has it, shardmerge adds it downstream (one of `extract`, the keys of the
        group's extract columns: never one a shard dropped)."""
        states = {}
        members = sum(1 for s in self.shards.values() if s.accepted is not None)
        for k in sorted(self.known_columns):
            present = self.join.presence(k)
            if present == 0:
                states[k] = "extract" if k in extract else "pinned" if k in self.pinned else "dropped"
            else:
                states[k] = "exists" if present == members else "partial"
        # a rename under way: which shards made it (the two names are partial meanwhile)
        for r in self.renames:
            made = f"{len(r.shards)} of {members} shards made it: {', '.join(map(str, sorted(r.shards)))}"
            for k, state in ((key(r.old), f"renaming to {r.new}"), (key(r.new), f"renamed from {r.old}")):
                if states.get(k) == "partial":
                    states[k] = f"partial: {state}, {made}"
        return states

    def blocks(self) -> dict[ShardId, Block]:
        return {s: self.shards[s].block for s in sorted(self.blocked)}

    def paused_tables(self, *, conflict_only: bool = False) -> list[Table]:
        """The current tables of the blocked shards (of those paused by a conflict)."""
        return [
            state.current
            for state in (self.shards[s] for s in sorted(self.blocked))
            if state.current is not None and (not conflict_only or state.block.kind == BlockKind.CONFLICT)
        ]

    def lacking(self, k: str) -> list[str]:
        """The shards whose rows downstream get a column's filler: those it is not in."""
        shards = self.shards.items()
        return [str(s) for s, st in shards if st.accepted is not None and st.accepted.column(k) is None]

    def columns_there(self, target: Table | None) -> frozenset[str]:
        """The keys of the columns downstream: the target's and what was emitted."""
        tables = [t for t in (target, self.propagated) if t is not None]
        return frozenset(k for t in tables for k in t.column_map)

    def forget_written(self, target: Table) -> None:
        """A column gone downstream takes its values with it: a column of that name the
        table gets again holds none of them. (Every shard's record is within the columns
        downstream after a decision: only the records that grew and, when columns went,
        every one are looked at, as a decision asks among a thousand shards.)"""
        there = self.columns_there(target)
        went = self.there - there
        shards = list(self.shards) if went else self.unsettled
        if went:
            self.departed = {kept for written in self.departed if len(kept := written & there) > 1}
            # (a column of that name added again holds none of their values: no key sure on it)
            self.departed_keys = [
                frozenset(on for on in unique if on <= there) for unique in self.departed_keys
            ]
        for shard in shards:
            state = self.shards.get(shard)
            if state is not None and not state.wrote <= there:
                self.update(shard, wrote=state.wrote & there)
                self.touched.add(shard)
        self.unsettled = set()
        self.there = there

    # -- persistence ------------------------------------------------------------------------
    def save(self, store: CoordinatorStore, entry: dict[str, Any]) -> None:
        """The shards touched since the last save (None: one that left), the decision's
        history entry and the rest."""
        for shard in sorted(self.touched):
            state = self.shards.get(shard)
            store.put_shard(shard, state.to_data() if state is not None else None)
        self.touched = set()
        self.history.append(entry)
        store.add_history(entry)
        store.put_meta(self._meta())

    def _meta(self) -> dict[str, Any]:
        return {
            "target": self._data_of(self.target) if self.target else None,
            "propagated": self._data_of(self.propagated) if self.propagated else None,
            "fills": self.fills.to_data(),
            "version": str(self.version),
            "propagation": self.propagation,
            **self.ledger.to_data(),
            "comments": self.comments,
            "options": asdict(self.options) if self.options else None,
            "known_columns": sorted(self.known_columns),
            "retained": self._data_of(self.retained.to_table()),
            "retained_origins": self.retained.origins_to_data(),
            "pinned": table_to_data(Table("pinned", tuple(self.pinned.values()))),
            "departed": sorted(sorted(written) for written in self.departed),
            "departed_keys": [sorted(sorted(on) for on in unique) for unique in self.departed_keys],
        }

    def restore(self, stored: StoredState) -> None:
        for shard, data in stored.shards.items():
            state = ShardState.from_data(data)
            self.shards[shard] = state
            if state.block is not None:
                self.blocked.add(shard)
            if state.accepted is not None:
                self.join.add(state.accepted)
        self.unsettled = set(self.shards)
        meta = stored.meta
        self.target = table_from_data(meta["target"]) if meta.get("target") else None
        self.propagated = table_from_data(meta["propagated"]) if meta.get("propagated") else None
        self.fills = Fills.from_data(meta.get("fills"))
        # (the columns downstream at the last decision: one gone by the next prunes the records)
        self.there = self.columns_there(self.target)
        self.version = Version.parse(meta.get("version", "1.0"))
        self.propagation = meta.get("propagation", True)
        self.ledger.restore(meta)
        self.comments = dict(meta.get("comments", {}))
        self.options = TableOptions(**meta["options"]) if meta.get("options") else None
        self.known_columns = set(meta.get("known_columns", []))
        if meta.get("retained"):
            self.retained.restore(table_from_data(meta["retained"]), meta.get("retained_origins"))
        if meta.get("pinned"):
            self.pinned = {c.key: c for c in table_from_data(meta["pinned"]).columns}
        self.departed = {frozenset(written) for written in meta.get("departed", [])}
        self.departed_keys = [
            frozenset(frozenset(on) for on in unique) for unique in meta.get("departed_keys", [])
        ]
        self.history = list(stored.history)
