"""Which shards' current schemas a decision puts into the join (docs/design.md "Conflicts"): the shard
whose change it decides, alone or with every shard paused by a
conflict, and after it each paused shard whose schema joins now (the non-intrusive
resolution). `Acceptance` is one decision's: it changes the `GroupState`, and gathers in
`DecisionRows` what the rows of the shards it resumes need."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from lattice import Column, Conflict, IncrementalJoin, Table, key, loses_key
from replicator.schema.group import BlockKind, ShardState, has_column
from replicator.schema.group_state import GroupState
from replicator.schema.rename_book import record_accepted, settle_renames
from replicator.schema.renames import moving_rows
from replicator.schema.rows_plan import DecisionRows, RowsPlan
from replicator.schema.way_out import of_block
from replicator.shard_id import ShardId
from replicator.source.schema_change import ChangeKind, SchemaChange

Renames = dict[ShardId, list[tuple[str, str]]]


@dataclass(frozen=True)
class Acceptance:
    group: GroupState
    now: DecisionRows  # the decision under way
    rows: Callable[[], RowsPlan]  # the fixes of the shards' rows over the group as it stands

    def after_change(self, exclude: ShardId | None) -> list[ShardId]:
        """Finish renames no shard holds the old name of any more, then resume the
        blocked shards whose schema now joins (which may finish more renames)."""
        settle_renames(self.group, self.now.shard)
        resumed = self._retry_blocked(exclude)
        if resumed:
            settle_renames(self.group, self.now.shard)
        return resumed

    def accept(self, shard: ShardId, renames: list[tuple[str, str]]) -> str | None:
        """Put the shard's current schema into the join; None, or why it cannot."""
        return self._propose([shard], {shard: renames})

    def accept_together(self, shard: ShardId, own: list[tuple[str, str]]) -> list[ShardId] | None:
        """Accept `shard` with all shards paused by a conflict at once, if their
        current schemas join. Returns the paused shards that resume, or None. Their renames
        are made together: each re-adding the old name waits for none of the others (two
        shards' `CHANGE b new_b INT, ADD b CHAR(1)`, which paused the first: issue 43)."""
        shards = self.group.shards
        candidates = [
            s
            for s, st in ((s, shards[s]) for s in sorted(self.group.blocked))
            if s != shard and st.block.kind == BlockKind.CONFLICT and st.current is not None
        ]
        # (one that cannot resume is in no batch: those whose checks passed for its sake are
        # checked again without it, till none fails; L15: a shard with
        # both names of a rename is held while those re-adding the old name waited for it)
        paused = candidates
        while True:
            batch = {shard: own, **{s: shards[s].block.renames for s in paused}}
            rules = self.group.rules()
            kept = [s for s in paused if rules.check(s, [*batch[s]], shards[s].current, batch) is None]
            if kept == paused:
                break
            paused = kept
        if not paused or self.group.rules().check(shard, own, shards[shard].current, batch) is not None:
            return None
        renames = {s: list(shards[s].block.renames) for s in paused}
        dropped = {s: list(shards[s].block.dropped) for s in paused}
        if self._renamed_into_one({shard: own, **renames}):
            return None
        if self._propose([shard, *paused], {shard: own, **renames}) is not None:
            return None
        for s in paused:
            record_accepted(self.group, s, renames[s], dropped[s])
        return paused

    def _propose(self, shards: list[ShardId], renames: Renames) -> str | None:
        """Put these shards' current schemas into the join in place of their accepted
        ones. If the join then has a conflict, put the accepted ones back and say why;
        else the current schemas become the accepted ones."""
        group = self.group
        states = [group.shards[s] for s in shards]
        if any(st.current is None for st in states):
            return "the shard's schema is unknown"
        before = _joined(group.join)
        for st in states:
            _swap(group.join, st.accepted, st.current)
        try:
            # (one shard at a time names its key; several: the union tells)
            lost = loses_key(before, group.join.table(), states[0].current if len(states) == 1 else None)
            if lost is not None and self._keyless(shards):
                lost = None
        except Conflict as exc:
            lost = describe(exc)
        if lost is not None:
            for st in states:
                _swap(group.join, st.current, st.accepted)
            return lost
        whole = self._renamed_at_once(shards, renames)
        for shard, st in zip(shards, states, strict=True):
            if st.accepted is not None:
                # a column renamed away is let go of while its values stay under the old name
                # downstream (the rename pending); one renamed at once is not: the shard
                # vouches for its values under the new name (F89)
                now = st.current.column_map.keys() | whole.get(shard, set())
                gone = [c for k, c in st.accepted.column_map.items() if k not in now]
                # (the old name of a rename the shard makes: its values are the rename's to
                # move, which may end with every shard vouching for them: `Retained.settle`)
                away = {key(old) for old, _ in renames.get(shard, [])}
                group.retained.keep(c for c in gone if c.key not in away)
                group.retained.keep((c for c in gone if c.key in away), pending=True)
            if st.block is not None and st.accepted is not None and shard != self.now.shard:
                # resumed by another shard's decision: a column it added while paused is new
                # to its rows downstream as it would have been at its own (L06: the values
                # a cancelled rename copied back stayed in it)
                added = SchemaChange(shard, ChangeKind.ALTER, "", before=st.accepted, after=st.current)
                self.now.resumed += [(shard, fix) for fix in self.rows().existing(shard, added)]
                # (and its rows are held as its accepted table has them: L24)
                if (tables := self.rows().tables_of(shard, added)) is not None:
                    self.now.tables[shard] = tables
            # (before `accept`, which counts them written)
            vouched = [c.key for c in _added(st) if self.rows().hold_own(shard, st, c)]
            joins = st.accepted is None
            st = group.accept(shard)
            if joins and st.accepted is not None:
                # a shard joining without a column only fillers are held for: its rows get them
                # too (the downstream table may not change, so `note_fillers` would not see it)
                for k in [k for k in group.retained.lacking if k not in st.accepted.column_map]:
                    group.retained.also_lacking(k, [str(shard)])
            for k in vouched:
                group.retained.vouch(k, str(shard))
            group.unsettled.add(shard)
            group.set_block(shard, None)
        return None

    def _keyless(self, proposed: list[ShardId]) -> bool:
        """No shard has a primary key any more (the `proposed` ones as they are now): the
        merged table loses its key as every shard did, where one shard alone may not take it."""
        tables = (st.current if s in proposed else st.accepted for s, st in self.group.shards.items())
        return all(t is None or t.primary_key is None for t in tables)

    def _renamed_at_once(self, proposed: list[ShardId], renames: Renames) -> dict[ShardId, set[str]]:
        """The old names (keys) each shard renames in a rename that is done at once: none
        pending for it, and no shard has the old name (the `proposed` ones as they are now)."""
        out: dict[ShardId, set[str]] = {}
        for shard, pairs in renames.items():
            for old, _new in pairs:
                k = key(old)
                pending = any(key(r.old) == k for r in self.group.renames)
                tables = (st.current if s in proposed else st.accepted for s, st in self.group.shards.items())
                if not pending and not any(has_column(t, old) for t in tables):
                    out.setdefault(shard, set()).add(k)
        return out

    def _renamed_into_one(self, renames: Renames) -> bool:
        """Two shards rename different columns to one name: taken one by one, the second
        would be renaming into a column a shard has already (`RenameRules.check`); taken
        together, the copy would move one of them only and lose the other's values
        (F131)."""
        into: dict[str, str] = {}
        for shard, pairs in renames.items():
            for old, new in moving_rows(self.group.shards[shard].accepted, pairs):
                if into.setdefault(key(new), key(old)) != key(old):
                    return True
        return False

    def _retry_blocked(self, exclude: ShardId | None) -> list[ShardId]:
        """After any change, a blocked shard whose schema now joins resumes."""
        group = self.group
        resumed = []
        progress = True
        while progress:
            progress = False
            paused = sorted(
                s for s in group.blocked if s != exclude and group.shards[s].block.kind == BlockKind.CONFLICT
            )
            for shard in paused:
                state = group.shards[shard]
                renames, dropped = list(state.block.renames), list(state.block.dropped)
                problem = group.rules().check(shard, renames, state.current)
                if problem is not None:
                    if of_block(BlockKind.CONFLICT, shard, problem) != state.block.reason:
                        # what keeps it paused now, as show-ddl-state tells it
                        group.set_block(shard, replace(state.block, reason=problem))
                    continue
                if self.accept(shard, renames) is None:
                    record_accepted(group, shard, renames, dropped)
                    resumed.append(shard)
                    progress = True
        return resumed


def describe(exc: Conflict) -> str:
    path = exc.path
    if len(path) > 1 and path[0] == "columns":
        return f"column {path[1]}: {exc.reason}"
    return exc.reason


def _joined(join: IncrementalJoin) -> Table | None:
    """The join as it stands (None: no shard, or a conflict a decision is undoing)."""
    try:
        return join.table() if join.shards else None
    except Conflict:
        return None


def _swap(join: IncrementalJoin, out: Table | None, into: Table | None) -> None:
    """Replace one shard's schema in the join (None: the shard is not in it)."""
    if out is not None and into is not None:
        join.replace(out, into)
    elif into is not None:
        join.add(into)
    elif out is not None:
        join.remove(out)


def _added(state: ShardState) -> list[Column]:
    """The columns of a shard's current schema its accepted one lacks."""
    if state.accepted is None or state.current is None:
        return []
    return [c for c in state.current.columns if state.accepted.column(c.name) is None]
