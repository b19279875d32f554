"""The optimistic coordinator of one shard group (seed 002, "Design").

It knows every shard's schema and keeps the downstream table at their join. A
shard's DDL changes that shard's schema; the coordinator re-joins, turns the
difference between the old and the new downstream table into DDL (`lattice.diff`),
and says which shards must pause. It does no I/O: the caller runs the DDL it
returns, and its state goes to a `CoordinatorStore`.

Each shard has an *accepted* schema (its rows already downstream fit it; it is in
the join) and a *current* one (its latest upstream schema). They differ only while
the shard is blocked:
- conflict (seed 002 "Error handling"): the current schema has no join with the
  others. The shard's rows pause; its later DDLs and other shards' DDLs are still
  evaluated, and when any of them makes the join valid again the shard resumes
  from where it paused (both the non-intrusive and the intrusive resolution);
- unsupported: a DDL we cannot read; the shard waits for `set_schema` or a skip;
- waiting: propagation is disabled and the shard's DDL changed the downstream
  table; it resumes when propagation is enabled and the DDL has run.

Every change of the downstream table gets a version major.minor (seeds 000, 001):
minor when the old table is below the new one in the lattice (every row valid
before is valid after), major otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

from lattice import (
    Column,
    DownstreamStep,
    Flavor,
    Table,
    key,
)
from replicator.schema.acceptance import Acceptance
from replicator.schema.extract import ExtractColumns
from replicator.schema.group import (
    Block,
    BlockKind,
    GroupView,
    Result,
    ShardState,
    ShardView,
    Version,
    has_column,
)
from replicator.schema.group_state import GroupState
from replicator.schema.rename_book import keep_dropped, record_accepted, unrename_paused
from replicator.schema.renames import RenameRecord, split_renames
from replicator.schema.row_fixes import RowsFix, filled_while_paused, passed_while_paused
from replicator.schema.rows_plan import DecisionRows, RowsPlan, with_fixes
from replicator.schema.shard_rows import Unkeyed, truncate_statement
from replicator.schema.target import as_pinned, unique_on
from replicator.schema.target_book import advance, compute_target, differs, note_cosmetics
from replicator.shard_id import ShardId
from replicator.source.schema_change import ChangeKind, SchemaChange
from replicator.source.tracker import change_of
from replicator.state.coordinator_store import CoordinatorStore, InMemoryStore

T = TypeVar("T")

# where a row came from: source ids and MySQL names are at most 64 characters


@dataclass(frozen=True)
class Decision:
    result: Result
    shard: ShardId | None
    ddl: str
    message: str
    steps: tuple[DownstreamStep, ...]  # the downstream statements, each with the table after it
    joined: Table
    version: Version
    blocked: tuple[ShardId, ...]
    unblocked: tuple[ShardId, ...] = ()
    before: Table | None = None  # the downstream table before the steps, as the flavor holds it

    @property
    def downstream(self) -> tuple[str, ...]:
        """The downstream statements to run, in order."""
        return tuple(step.sql for step in self.steps)


class CoordinatorError(ValueError):
    """A request the coordinator cannot take (unknown shard, bad CREATE TABLE)."""


class Coordinator:
    def __init__(
        self,
        target: str,
        flavor: Flavor | str = Flavor.MARIADB,
        store: CoordinatorStore | None = None,
        *,
        upstream: str = "mariadb",
        extract_columns: dict[str, str] | None = None,
        extract_types: dict[str, str] | None = None,
        captured: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        """`target` is the downstream `schema.table`; `extract_columns` maps "source",
        "schema" and "table" to the target columns filled with them (DM's extract
        columns), which lets a TRUNCATE of one shard delete only that shard's rows."""
        self.target_name = target
        self.clock = clock  # stamps the history's entries: the caller's time, not the decision's
        self.flavor = Flavor.parse(flavor)
        self.store = store or InMemoryStore()
        self.upstream = upstream
        self._configured = ExtractColumns.configured(extract_columns, extract_types, captured)
        self._load()

    def _load(self) -> None:
        """The group's state as the store holds it (at the start)."""
        self.group = GroupState(  # (group_state.py)
            self.flavor, self.target_name.split(".")[-1], qualified=self.target_name
        )
        self._now = DecisionRows()  # what the decision under way gathers for the shards' rows
        self.extract = self._configured
        stored = self.store.load()
        if stored is not None:
            self.group.restore(stored)
            self.extract = self.extract.led_in(self.group.propagated)

    def decide(self, step: Callable[[], T]) -> tuple[GroupState, T]:
        """`step` (a decision, and what its caller reads of the coordinator after it) on a
        copy of the group's state: the state it leaves and its outcome. The state in place
        is not changed; `install` puts the new one there once the decision's writes
        committed (replicator/apply/decision_commit.py), and a decision whose writes did not
        commit leaves the state as it was."""
        installed = self.group
        self.group = installed.fork()
        try:
            return self.group, step()
        finally:
            self.group = installed

    def install(self, state: GroupState) -> None:
        self.group = state

    # -- public API ---------------------------------------------------------------------
    @property
    def shards(self) -> dict[ShardId, ShardState]:
        return self.group.shards

    @property
    def target(self) -> Table | None:
        """What the downstream table should be."""
        return self.group.target

    @property
    def propagated(self) -> Table | None:
        """What the downstream table is: the last table DDL was emitted for."""
        return self.group.propagated

    @property
    def version(self) -> Version:
        return self.group.version

    @property
    def renames(self) -> list[RenameRecord]:
        """The pending renames, in the order they began."""
        return self.group.renames

    @property
    def blocked(self) -> dict[ShardId, Block]:
        return self.group.blocks()

    def add_shard(self, shard: ShardId, table: Table, *, position: str | None = None) -> Decision:
        """A shard joins the group (the group's first tables, or CREATE TABLE upstream)."""
        if shard in self.shards:
            raise CoordinatorError(f"shard {shard} is already in the group")
        self.shards[shard] = ShardState(None, table)
        return self._evaluate(shard, f"(shard {shard} joins)", position=position)

    def remove_shard(self, shard: ShardId, ddl: str = "") -> Decision:
        group = self.group
        self._state(shard)
        state = group.shards.pop(shard)
        group.blocked.discard(shard)
        group.touched.add(shard)
        if len(state.wrote) > 1:
            group.departed.add(state.wrote)
        if state.accepted is not None:
            group.departed_keys.append(unique_on(self.extract, state.accepted, group.propagated))
        for record in group.renames:
            # a table created again under its name is a shard of its own: its columns are
            # the group's by name, a rename's old name too (F107)
            record.shards.discard(shard)
            record.departed.discard(shard)
        if state.accepted is not None:
            group.join.remove(state.accepted)
            group.retained.keep(state.accepted.columns)
            group.retained.left(str(shard))
            # what the shard passed through and no shard holds now gives way to the join
            # (F14); a paused shard's table holds what it passed through meanwhile
            paused = group.paused_tables()
            group.options = group.join.held_options(group.options, paused) if group.options else None
            group.comments = group.join.held_comments(group.comments, paused)
        unblocked = self._resumed(self._acceptance().after_change(exclude=None))
        return self._commit(
            shard,
            ddl or f"(shard {shard} leaves)",
            Result.RESOLVED if unblocked else Result.APPLIED,
            f"shard {shard} left the group",
            unblocked=unblocked,
        )

    def apply(self, change: SchemaChange, *, position: str | None = None) -> Decision:
        """One shard's schema change, in binlog order, as the tracker read it."""
        shard, ddl, kind = change.shard, change.statement, change.kind
        if kind is ChangeKind.NONE:
            return self._decision(
                shard, ddl, Result.IGNORED, "the statement does not change the shard's table"
            )
        if kind is ChangeKind.UNREADABLE:
            return self.pause_shard(shard, change.problem or "its rows cannot be read", position=position)
        if kind is ChangeKind.UNSUPPORTED:
            return self._block_unsupported(
                shard, ddl, change.problem or "a DDL that cannot be followed", position
            )
        if kind is ChangeKind.TRUNCATE:
            return self._truncate(shard, ddl, position)
        if kind is ChangeKind.DROP:
            if shard in self.shards:
                return self.remove_shard(shard, ddl)
            return self._decision(shard, ddl, Result.IGNORED, "the table was not in the group")
        assert change.after is not None
        state = self.shards.get(shard)
        if state is None:
            return self.add_shard(shard, change.after, position=position)
        # a shard whose DDL was skipped (binlog skip) keeps its table from before it here,
        # while its worker follows its table upstream: its next DDL is taken on the table
        # kept, so its rows downstream convert from what they were written as (its rows of the
        # skipped DDL's type went in as the server converted them: issue 71)
        skipped = state.block is None and _columns_differ(state.current, change.before)
        ours = state.block is not None and state.block.ours and state.current is not None
        if (ours or skipped) and kind is ChangeKind.ALTER:
            change = change_of(shard, state.current, ddl, self.upstream)
            if change.kind is not ChangeKind.ALTER or change.after is None:
                why = change.problem or "a DDL that cannot be followed"
                return self._block_unsupported(shard, ddl, why, position)
        held = state.block is not None and state.block.kind == BlockKind.UNSUPPORTED
        unknown = state.current is None or held  # (held: the table of the conflict under it, not this DDL's)
        if unknown and kind is ChangeKind.ALTER:
            reason = "the shard's schema is unknown after an unsupported DDL"
            return self._block_unsupported(shard, ddl, reason, position)
        state = self.group.update(shard, current=change.after)
        note_cosmetics(self.group, change)
        renames = [(r.old, r.new) for r in change.renames]
        gone: set[str] = set()
        if change.before is not None:
            kept = change.after.column_map.keys() | {key(old) for old, _ in renames}
            gone = change.before.column_map.keys() - kept
        keep_dropped(self.group, state, gone)
        rows = self._rows()
        tables = rows.tables_of(shard, change)
        self._now = DecisionRows(
            shard,
            existing=rows.existing(shard, change),
            tables={shard: tables} if tables is not None else {},
            renamed=rows.renamed_cleared(shard, change),
            filled=filled_while_paused(state.block, change),
            passed=passed_while_paused(state.block, change),
        )
        try:
            return self._evaluate(shard, ddl, position=position, renames=renames, dropped=sorted(gone))
        finally:
            self._now = DecisionRows()

    def set_schema(self, shard: ShardId, table: Table) -> Decision:
        """Seed 002 "Task management": force a shard's schema (intrusive resolution)."""
        if shard not in self.shards:
            return self.add_shard(shard, table)
        state = self.shards[shard]
        was_blocked = state.block is not None
        # (where its block stood: a conflict its table meets now is reported there, where the
        # shard waits, as any block is)
        position = state.block.position if state.block is not None else None
        state = self.group.update(shard, current=table)
        unknown = state.block is not None and state.block.kind == BlockKind.UNSUPPORTED
        if unknown:
            self.group.set_block(shard, None)  # (the conflict under it, if any, holds it again)
        decision = self._evaluate(shard, f"(set-schema {shard})", position=position, was_blocked=was_blocked)
        if unknown:
            self._held_on_ours(shard)
        return decision

    def replace_ddl(self, shard: ShardId, statement: str, position: str | None) -> Decision:
        """The blocked DDL replaced by `statement` (binlog replace). Read first: a statement it
        cannot take leaves the blocked DDL as it was; on the table of the conflict a DDL we
        cannot follow came on, which holds the shard still."""
        state = self._state(shard)
        base = state.current if state.block is not None and state.block.under is not None else state.accepted
        change = change_of(shard, base, statement, self.upstream)
        unknown = state.block is not None and state.block.kind == BlockKind.UNSUPPORTED
        self.skip_ddl(shard)
        decision = self.apply(change, position=position)
        if unknown:
            self._held_on_ours(shard)
        return decision

    def _held_on_ours(self, shard: ShardId) -> None:
        """A shard whose DDL we could not follow, the operator gave its table (set-schema,
        binlog replace), and a conflict holds: its worker has that table only once it reads
        again from its pause, so its DDLs read meanwhile are taken on ours (live stories
        112059: a later DDL, taken on the table its worker had from before the replace,
        cleared the conflict the replace made)."""
        block = self.shards[shard].block if shard in self.shards else None
        if block is not None and block.kind == BlockKind.CONFLICT and not block.ours:
            self.group.set_block(shard, replace(block, ours=True))

    def skip_ddl(self, shard: ShardId) -> Decision:
        """The blocked DDL is skipped (binlog skip): the shard keeps its accepted schema."""
        state = self._state(shard)
        if state.block is None:
            raise CoordinatorError(f"shard {shard} is not blocked")
        under = state.block.under
        if under is None:
            self.group.update(shard, current=state.accepted)
        self.group.set_block(shard, None)
        message = f"skipped the blocked DDL of {shard}"
        if under is not None:  # (its table the conflict's: no rows are discarded, they wait with it)
            self.group.set_block(shard, replace(under, ours=True))
            message += f"; it is held by its conflict again: {under.reason}"
            return self._commit(shard, f"(skip {shard})", Result.CONFLICT, message)
        return self._commit(shard, f"(skip {shard})", Result.RESOLVED, message, unblocked=(shard,))

    def pause_shard(
        self, shard: ShardId, reason: str, *, ddl: str = "", position: str | None = None
    ) -> Decision:
        """Pause a shard whose rows cannot be read (its schema is unknown to the worker):
        like an unsupported DDL, it waits for set-schema or a skip."""
        state = self.shards.get(shard)
        if state is not None and state.block is not None:
            return self._decision(
                shard, ddl, Result.UNSUPPORTED, f"{shard} is already paused: {state.block.reason}"
            )
        return self._block_unsupported(shard, ddl or f"(rows of {shard})", reason, position)

    def disable_ddl_propagation(self) -> Decision:
        self.group.propagation = False
        return self._commit(None, "(disable-ddl-propagation)", Result.APPLIED, "DDL propagation disabled")

    def enable_ddl_propagation(self) -> Decision:
        self.group.propagation = True
        waiting = tuple(s for s, b in self.blocked.items() if b.kind == BlockKind.WAITING)
        for shard in waiting:
            self.group.set_block(shard, None)
        result = Result.RESOLVED if waiting else Result.APPLIED
        return self._commit(
            None, "(enable-ddl-propagation)", result, "DDL propagation enabled", unblocked=waiting
        )

    def view(self) -> GroupView:
        """The group as this decision leaves it, for the other threads (`GroupView`)."""
        shards = {s: ShardView(st.accepted, st.current, st.block) for s, st in self.shards.items()}
        return GroupView.of(
            self.target_name,
            self.version,
            self.target,
            shards,
            self.group.cleared(),
            self.column_states(),
            dict(self.extract.names),
            self.group.propagation,
        )

    def column_states(self) -> dict[str, str]:
        """Each column's state in the group (`GroupState.column_states`)."""
        return self.group.column_states(self.extract.keys)

    def pin(self, columns: Iterable[Column]) -> list[str]:
        """DM's `drop column` event filter (replicator/schema/event_filter.py): columns a
        shard drops stay downstream for good, with the values their rows hold, also once
        no shard has them; the rows written after leave them NULL, so they are nullable
        then. A shard that adds one back has it in the join as usual. Only a column the
        downstream table has and that holds values of its own (not generated) is pinned.
        Called before the shard's change (`apply`), whose decision saves it. Returns the
        keys pinned now."""
        pinned = []
        for column in columns:
            downstream = self.target.column(column.name) if self.target is not None else None
            if column.key in self.group.pinned or downstream is None or downstream.generated is not None:
                continue
            self.group.pinned[column.key] = as_pinned(downstream)
            pinned.append(column.key)
        if pinned:
            unrename_paused(self.group, set(pinned))
        return pinned

    # -- evaluation ---------------------------------------------------------------------
    def _evaluate(
        self,
        shard: ShardId,
        ddl: str,
        *,
        position: str | None = None,
        renames: list[tuple[str, str]] = (),
        dropped: list[str] = (),
        was_blocked: bool | None = None,
    ) -> Decision:
        group, state = self.group, self.shards[shard]
        # a shard held at its TRUNCATE has its later DDLs followed, and stays held (its rows
        # downstream are still to be deleted by hand: issue 46)
        truncate = state.block if state.block is not None and state.block.kind == BlockKind.TRUNCATE else None
        if was_blocked is None:
            was_blocked = state.block is not None and state.block.kind not in (
                BlockKind.WAITING,
                BlockKind.TRUNCATE,
            )
        # renames and drops of a DDL that is still blocked take effect with this one
        if state.block is not None and state.block.kind == BlockKind.CONFLICT:
            renames = [*state.block.renames, *renames]
            dropped = [*state.block.dropped, *dropped]
        # a rename whose new name the shard dropped since is a drop of the old one: its
        # values went with it (a paused chain a to b to c, then c dropped: F83)
        moving, unmoved = split_renames(state.accepted, renames)
        if state.block is not None and state.block.kind == BlockKind.CONFLICT:
            unmoved = [*state.block.unmoved, *unmoved]
        # a rename of a pinned column moves no values downstream: they stay under its name
        # (`pin`), and the new name is a column the shard adds, the old one it drops
        renames = [r for r in moving if has_column(state.current, r[1]) and key(r[0]) not in group.pinned]
        # (and the old name's values are gone: the shard departs a pending rename of it,
        # whatever column of that name it adds again, F102)
        dropped = [*dropped, *(old for old, new in moving if (old, new) not in renames)]
        acceptance = self._acceptance()
        problem = group.rules().check(shard, renames, state.current) or acceptance.accept(shard, renames)
        together: list[ShardId] | None = []
        if problem is not None:
            # the DDL may complete what paused shards wait for (seed 002's non-intrusive
            # resolution): try it together with every shard paused by a conflict
            together = acceptance.accept_together(shard, renames)
            if together is None:
                return self._block(
                    shard, ddl, BlockKind.CONFLICT, problem, position, renames, dropped, unmoved
                )
        record_accepted(group, shard, renames, dropped)
        if truncate is not None and self.shards[shard].block is None:
            group.set_block(shard, truncate)
        state = self.shards[shard]  # (accepted now: a value, replaced by each change)
        unblocked = [shard] if was_blocked and state.block is None else []
        unblocked += [s for s in together if s != shard]
        unblocked += acceptance.after_change(exclude=shard)
        unblocked = self._resumed(unblocked)
        # while propagation is off, a shard whose schema changed waits as long as the
        # downstream table lags the join: its rows may need what is not there yet
        target = compute_target(group, self.extract) if not group.propagation else None
        waiting = not group.propagation and (
            differs(target, group.target) or differs(target, group.propagated)
        )
        if waiting:
            group.set_block(shard, Block(BlockKind.WAITING, "DDL propagation is disabled", ddl, position))
        result = Result.RESOLVED if unblocked else Result.APPLIED
        message = "schema accepted" + (f"; resumed {_names(unblocked)}" if unblocked else "")
        if waiting:
            message += "; the shard waits until DDL propagation is enabled"
        return self._commit(shard, ddl, result, message, unblocked=tuple(unblocked), hint=state.accepted)

    def _acceptance(self) -> Acceptance:
        return Acceptance(self.group, self._now, self._rows)

    def _rows(self) -> RowsPlan:
        """The fixes the shards' rows get, over the group as it stands (replicator/schema/rows_plan.py)."""
        group = self.group
        return RowsPlan(
            self.target_name,
            self.flavor,
            self.extract,
            group.shards,
            group.ledger,
            group.fills,
            group.propagated,
            group.propagation,
        )

    def _block(
        self,
        shard: ShardId,
        ddl: str,
        kind: BlockKind,
        reason: str,
        position: str | None,
        renames: Iterable[tuple[str, str]] = (),
        dropped: Iterable[str] = (),
        unmoved: Iterable[tuple[str, str]] = (),
        under: Block | None = None,
    ) -> Decision:
        filled, passed = (self._now.filled, self._now.passed) if shard == self._now.shard else ((), ())
        renamed, gone = tuple(renames), tuple(dropped)
        was = self.shards[shard].block if shard in self.shards else None
        block = Block(
            kind,
            reason,
            ddl,
            position,
            renamed,
            gone,
            filled,
            passed,
            unmoved=tuple(unmoved),
            under=under,
            ours=kind == BlockKind.CONFLICT and was is not None and was.ours,
        )
        self.group.set_block(shard, block)
        # a paused shard that drops the new name of a rename it made no longer awaits it:
        # the rename may be cancelled now, its values copied back (F67); one that
        # makes it finishes it, which resumes a shard that waited for that (it had the old
        # name again, `RenameRules`: F150)
        unblocked = self._resumed(self._acceptance().after_change(exclude=shard))
        result = Result.CONFLICT if kind == BlockKind.CONFLICT else Result.UNSUPPORTED
        # (the reason as the block holds it: with its way out)
        reason = self.shards[shard].block.reason if shard in self.group.blocked else reason
        resumed = f" (resumed {_names(unblocked)})" if unblocked else ""
        message = f"{shard} paused{resumed}: {reason}"
        return self._commit(shard, ddl, result, message, unblocked=unblocked)

    def _block_unsupported(self, shard: ShardId, ddl: str, reason: str, position: str | None) -> Decision:
        state = self.shards.get(shard)
        if state is None:
            state = self.shards[shard] = ShardState(None, None)
        # held by a conflict already: that stays under this block, and so does the table it
        # left the shard (its rows up to this DDL are of it)
        block = state.block
        under = block if block is not None and block.kind == BlockKind.CONFLICT else block and block.under
        if under is None:
            self.group.update(shard, current=None)
        return self._block(shard, ddl, BlockKind.UNSUPPORTED, reason, position, under=under)

    def _truncate(self, shard: ShardId, ddl: str, position: str | None) -> Decision:
        """A shard's TRUNCATE changes no schema: where its rows downstream say their shard
        (extract columns an index leads with), they are deleted, in batches
        (`truncate_statement`) run in the shard's binlog order (the DDL path's barrier);
        elsewhere the shard pauses (`BlockKind.TRUNCATE`), its schema still known."""
        table = self.group.materialized(self.propagated) if self.propagated is not None else None
        statement = truncate_statement(self.extract, shard, self.target_name, table, others=self.shards)
        if isinstance(statement, Unkeyed):
            return self._block(shard, ddl, BlockKind.TRUNCATE, statement.reason, position)
        step = DownstreamStep(statement, table)  # rows only: the table stays as it is
        return self._decision(shard, ddl, Result.APPLIED, "rows of this shard deleted downstream", (step,))

    # -- the downstream table -------------------------------------------------------------
    def _resumed(self, shards: Iterable[ShardId]) -> tuple[ShardId, ...]:
        """The shards whose block cleared: not one that cleared to the TRUNCATE hold under
        it (`GroupState.set_block`), which stays held."""
        return tuple(s for s in shards if s not in self.shards or self.shards[s].block is None)

    def _commit(
        self,
        shard: ShardId | None,
        ddl: str,
        result: Result,
        message: str,
        *,
        unblocked: tuple[ShardId, ...] = (),
        hint: Table | None = None,
    ) -> Decision:
        group = self.group
        unblocked = self._resumed(unblocked)
        before = group.materialized(group.propagated) if group.propagated is not None else None
        emitted = advance(group, self.extract, self.target_name, hint)
        downstream = emitted.steps
        through: list[tuple[ShardId, RowsFix]] = []
        if emitted.held is not None and before is not None:
            through = self._rows().rendered_through(before, emitted.held, self._now.tables, emitted.moved)
        state = self.shards.get(shard) if shard is not None else None
        own = group.propagation and state is not None and state.block is None  # its rows go on
        fixes = self._now.take(own, through)
        fixes = fixes if group.propagation else []
        if fixes or (own and self._now.renamed):
            table = group.materialized(group.propagated)
            downstream = with_fixes(
                downstream, fixes, before, table, self.flavor, emitted.moved, emitted.started
            )
            if own:
                pending = {key(n) for r in group.renames if r.started for n in (r.old, r.new)}
                downstream = (*downstream, *self._now.take_cleared(pending, table))
        return self._decision(shard, ddl, result, message, downstream, unblocked, before)

    def _decision(
        self,
        shard: ShardId | None,
        ddl: str,
        result: Result,
        message: str,
        steps: Iterable[DownstreamStep] = (),
        unblocked: tuple[ShardId, ...] = (),
        before: Table | None = None,
    ) -> Decision:
        decision = Decision(
            result=result,
            shard=shard,
            ddl=ddl,
            message=message,
            steps=tuple(steps),
            joined=self.target if self.target is not None else Table(self.group.name, ()),
            version=self.version,
            blocked=tuple(self.blocked),
            unblocked=unblocked,
            before=before,
        )
        entry = {
            "version": str(self.version),
            "shard": str(shard) if shard is not None else None,
            "ddl": ddl,
            "result": result,
            "message": message,
            "downstream": list(decision.downstream),
            "time": self.clock(),
        }
        self.group.save(self.store, entry)
        return decision

    def _state(self, shard: ShardId) -> ShardState:
        state = self.shards.get(shard)
        if state is None:
            raise CoordinatorError(f"unknown shard {shard}; known: {_names(sorted(self.shards)) or 'none'}")
        return state


def _names(shards: Iterable[ShardId]) -> str:
    return ", ".join(map(str, shards))


def _columns_differ(kept: Table | None, before: Table | None) -> bool:
    """Whether the table a DDL came on has other columns (names or types) than the one the
    group keeps for the shard."""
    if kept is None or before is None:
        return False
    types = [{k: c.type for k, c in t.column_map.items()} for t in (kept, before)]
    return types[0] != types[1]
