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
from collections.abc import Callable, Collection, Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any

from lattice import (
    Column,
    ColumnTypes,
    Conflict,
    DownstreamStep,
    Flavor,
    IncrementalJoin,
    Table,
    TableOptions,
    create,
    diff,
    keeps_rows,
    key,
    materialize,
    qualified_name,
    table_from_data,
    table_to_data,
)
from replicator.schema.coordinator_store import CoordinatorStore, InMemoryStore
from replicator.schema.extract import ExtractColumns
from replicator.schema.fills import Fills
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
from replicator.schema.rename_rules import RenameRules
from replicator.schema.renames import RenameLedger, RenameRecord, moving_rows
from replicator.schema.retained import Retained
from replicator.schema.row_fixes import RowsFix, filled_while_paused, passed_while_paused
from replicator.schema.rows_plan import DecisionRows, RowsPlan, with_fixes
from replicator.schema.schema_change import ChangeKind, SchemaChange
from replicator.schema.target import TargetInputs, as_pinned, held_by_paused, target_of, unique_on
from replicator.shard_id import ShardId

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
        captured: Iterable[str] = (),
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
        self.extract = ExtractColumns.configured(extract_columns, extract_types, captured)
        self.shards: dict[ShardId, ShardState] = {}
        self._blocked: set[ShardId] = set()  # shards whose block is set (see _set_block)
        # shards whose record of written columns grew since the last decision (`_forget_written`),
        # and the columns downstream then
        self._unsettled: set[ShardId] = set()
        self._there: frozenset[str] = frozenset()
        # the same record of the shards that left, whose rows stay downstream (F154): only
        # those of two columns or more, as `_onto_both` asks for pairs
        self.departed: set[frozenset[str]] = set()
        # for each shard that left, the column sets its rows downstream are unique on: its own
        # unique keys then and the downstream table's (see `_unsure_keys`)
        self.departed_keys: list[frozenset[frozenset[str]]] = []
        self.join = IncrementalJoin(self.flavor, name=target.split(".")[-1])
        self.target: Table | None = None  # what the downstream table should be
        self.propagated: Table | None = None  # what it is: the last table DDL was emitted for
        self.fills = Fills()  # what rows hold in a column their shard lacks (replicator/schema/fills.py)
        self.version = Version()
        self.propagation = True
        self.ledger = RenameLedger()  # the renames in progress (replicator/schema/renames.py)
        self._now = DecisionRows()  # what the decision under way gathers for the shards' rows
        self._moves: list[tuple[str, str | None]] = []  # column moves (key, after key or None=first)
        self.comments: dict[str, str | None] = {}  # column comments last set by a DDL (pass-through)
        self.options: TableOptions | None = None  # table options last set by a DDL (pass-through)
        self.known_columns: set[str] = set()
        # what rows already downstream need of a column beyond the join (replicator/schema/retained.py)
        self._types = ColumnTypes(self.flavor)
        self.retained = Retained(self._types)
        # columns kept downstream for good, whether or not a shard has them (DM's `drop column`
        # event filter, see `pin`): by key, as downstream had them when pinned
        self.pinned: dict[str, Column] = {}
        self.history: list[dict[str, Any]] = []
        self._restore()

    # -- public API ---------------------------------------------------------------------
    @property
    def renames(self) -> list[RenameRecord]:
        """The pending renames, in the order they began."""
        return self.ledger.pending

    @property
    def extract_columns(self) -> dict[str, str]:
        return dict(self.extract.names)

    @property
    def blocked(self) -> dict[ShardId, Block]:
        return {s: self.shards[s].block for s in sorted(self._blocked)}

    def _set_block(self, shard: ShardId, block: Block | None) -> None:
        """Every change of a shard's block goes through here: the blocked shards are
        kept apart, as a decision asks for them among a thousand shards."""
        self.shards[shard].block = block
        if block is None:
            self._blocked.discard(shard)
        else:
            self._blocked.add(shard)

    def add_shard(self, shard: ShardId, table: Table, *, position: str | None = None) -> Decision:
        """A shard joins the group (the group's first tables, or CREATE TABLE upstream)."""
        if shard in self.shards:
            raise CoordinatorError(f"shard {shard} is already in the group")
        state = ShardState(None, table)
        self.shards[shard] = state
        return self._evaluate(shard, f"(shard {shard} joins)", position=position)

    def remove_shard(self, shard: ShardId, ddl: str = "") -> Decision:
        self._state(shard)
        state = self.shards.pop(shard)
        self._blocked.discard(shard)
        if len(state.wrote) > 1:
            self.departed.add(state.wrote)
        if state.accepted is not None:
            self.departed_keys.append(unique_on(self.extract, state.accepted, self.propagated))
        for record in self.renames:
            # a table created again under its name is a shard of its own: its columns are
            # the group's by name, a rename's old name too (seed 461770)
            record.shards.discard(shard)
            record.departed.discard(shard)
        if state.accepted is not None:
            self.join.remove(state.accepted)
            self.retained.keep(state.accepted.columns)
            self.retained.left(str(shard))
            # what the shard passed through and no shard holds now gives way to the join
            # (F14); a paused shard's table holds what it passed through meanwhile
            paused = self._paused_tables()
            self.options = self.join.held_options(self.options, paused) if self.options else None
            self.comments = self.join.held_comments(self.comments, paused)
        self.store.put_shard(shard, None)
        unblocked = tuple(self._after_change(exclude=None))
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
            reason = f"{change.problem}; set the shard's schema with set-schema, or skip the DDL"
            return self._block_unsupported(shard, ddl, reason, position)
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
        if state.current is None and kind is ChangeKind.ALTER:
            return self._block_unsupported(
                shard,
                ddl,
                "the shard's schema is unknown after an unsupported DDL; set it with set-schema",
                position,
            )
        state.current = change.after
        self._note_cosmetics(change)
        renames = [(r.old, r.new) for r in change.renames]
        gone: set[str] = set()
        if change.before is not None:
            kept = change.after.column_map.keys() | {key(old) for old, _ in renames}
            gone = change.before.column_map.keys() - kept
        if gone and state.accepted is not None:
            # the shard's rows downstream keep the values of a column it drops, though it
            # may add the column back, narrower, before it resumes: paused already (seed
            # 110545) or by this very DDL (seed 602968); as they were written, under its
            # accepted schema (seeds 120203, 120272), by the name they have there: the new
            # name of a rename it made while paused is its old name downstream (seed 442336)
            back = {key(new): key(old) for old, new in state.block.renames} if state.block is not None else {}
            accepted = set()
            for name in gone:
                seen = {name}
                while name in back and back[name] not in seen:
                    name = back[name]
                    seen.add(name)
                accepted.add(name)
            self.retained.keep(c for c in state.accepted.columns if c.key in accepted)
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

    def _rows(self) -> RowsPlan:
        """The fixes the shards' rows get, over the group as it stands (replicator/schema/rows_plan.py)."""
        return RowsPlan(
            self.target_name,
            self.flavor,
            self.extract,
            self.shards,
            self.ledger,
            self.fills,
            self.propagated,
            self.propagation,
        )

    def set_schema(self, shard: ShardId, table: Table) -> Decision:
        """Seed 002 "Task management": force a shard's schema (intrusive resolution)."""
        if shard not in self.shards:
            return self.add_shard(shard, table)
        state = self.shards[shard]
        was_blocked = state.block is not None
        state.current = table
        if state.block is not None and state.block.kind == BlockKind.UNSUPPORTED:
            self._set_block(shard, None)
        return self._evaluate(shard, f"(set-schema {shard})", was_blocked=was_blocked)

    def skip_ddl(self, shard: ShardId) -> Decision:
        """The blocked DDL is skipped (binlog skip): the shard keeps its accepted schema."""
        state = self._state(shard)
        if state.block is None:
            raise CoordinatorError(f"shard {shard} is not blocked")
        state.current = state.accepted
        self._set_block(shard, None)
        self.store.put_shard(shard, state.to_data())
        return self._commit(
            shard,
            f"(skip {shard})",
            Result.RESOLVED,
            f"skipped the blocked DDL of {shard}",
            unblocked=(shard,),
        )

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
        self.propagation = False
        return self._commit(None, "(disable-ddl-propagation)", Result.APPLIED, "DDL propagation disabled")

    def enable_ddl_propagation(self) -> Decision:
        self.propagation = True
        waiting = tuple(s for s, b in self.blocked.items() if b.kind == BlockKind.WAITING)
        for shard in waiting:
            self._set_block(shard, None)
            self.store.put_shard(shard, self.shards[shard].to_data())
        return self._commit(
            None,
            "(enable-ddl-propagation)",
            Result.RESOLVED if waiting else Result.APPLIED,
            "DDL propagation enabled",
            unblocked=waiting,
        )

    def cleared_columns(self) -> dict[ShardId, list[str]]:
        """The columns each shard's writes set NULL while renames are pending
        (`RenameLedger.cleared`)."""
        return self.ledger.cleared({s: st.accepted for s, st in self.shards.items()}, self.propagated)

    def view(self) -> GroupView:
        """The group as this decision leaves it, for the other threads (`GroupView`)."""
        shards = {s: ShardView(st.accepted, st.current, st.block) for s, st in self.shards.items()}
        return GroupView.of(
            self.target_name,
            self.version,
            self.target,
            shards,
            self.cleared_columns(),
            self.column_states(),
            self.extract_columns,
            self.propagation,
        )

    def column_states(self) -> dict[str, str]:
        """Seed 002 "Adding and dropping columns": exists on all / partial / dropped, or
        pinned: no shard has it, but it stays downstream (`pin`)."""
        states = {}
        members = sum(1 for s in self.shards.values() if s.accepted is not None)
        for k in sorted(self.known_columns):
            present = self.join.presence(k)
            if present == 0:
                states[k] = "pinned" if k in self.pinned else "dropped"
            else:
                states[k] = "exists" if present == members else "partial"
        return states

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
            if column.key in self.pinned or downstream is None or downstream.generated is not None:
                continue
            self.pinned[column.key] = as_pinned(downstream)
            pinned.append(column.key)
        if pinned:
            self._unrename_paused(set(pinned))
        return pinned

    def _unrename_paused(self, keys: set[str]) -> None:
        """A paused shard's renames of a column pinned now are drops, as in `_evaluate`."""
        for shard in sorted(self._blocked):
            state = self.shards[shard]
            block = state.block
            gone = tuple(old for old, _ in block.renames if key(old) in keys)
            if not gone:
                continue
            renames = tuple(r for r in block.renames if key(r[0]) not in keys)
            self._set_block(shard, replace(block, renames=renames, dropped=(*block.dropped, *gone)))
            self.store.put_shard(shard, state.to_data())

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
        state = self.shards[shard]
        if was_blocked is None:
            was_blocked = state.block is not None and state.block.kind != BlockKind.WAITING
        # renames and drops of a DDL that is still blocked take effect with this one
        if state.block is not None and state.block.kind == BlockKind.CONFLICT:
            renames = [*state.block.renames, *renames]
            dropped = [*state.block.dropped, *dropped]
        # a rename whose new name the shard dropped since is a drop of the old one: its
        # values went with it (a paused chain a to b to c, then c dropped: seed 311566)
        moving = moving_rows(state.accepted, renames)
        # a rename of a pinned column moves no values downstream: they stay under its name
        # (`pin`), and the new name is a column the shard adds, the old one it drops
        renames = [r for r in moving if has_column(state.current, r[1]) and key(r[0]) not in self.pinned]
        # (and the old name's values are gone: the shard departs a pending rename of it,
        # whatever column of that name it adds again, seed 423488)
        dropped = [*dropped, *(old for old, new in moving if (old, new) not in renames)]
        problem = self._rules().check(shard, renames, state.current) or self._try_accept(shard, renames)
        if problem is not None:
            # the DDL may complete what paused shards wait for (seed 002's non-intrusive
            # resolution): try it together with every shard paused by a conflict
            together = self._accept_together(shard, renames)
            if together is not None:
                problem = None
        else:
            together = []
        if problem is not None:
            return self._block(shard, ddl, BlockKind.CONFLICT, problem, position, renames, dropped)
        self._record_accepted(shard, renames, dropped)
        unblocked = [shard] if was_blocked and state.block is None else []
        unblocked += [s for s in together if s != shard]
        unblocked += self._after_change(exclude=shard)
        # while propagation is off, a shard whose schema changed waits as long as the
        # downstream table lags the join: its rows may need what is not there yet
        waiting = not self.propagation and (
            self._target_changes() or _differs(self._compute_target(), self.propagated)
        )
        if waiting:
            self._set_block(shard, Block(BlockKind.WAITING, "DDL propagation is disabled", ddl, position))
        self.store.put_shard(shard, state.to_data())
        result = Result.RESOLVED if unblocked else Result.APPLIED
        message = "schema accepted" + (f"; resumed {_names(unblocked)}" if unblocked else "")
        if waiting:
            message += "; the shard waits until DDL propagation is enabled"
        return self._commit(shard, ddl, result, message, unblocked=tuple(unblocked), hint=state.accepted)

    def _after_change(self, exclude: ShardId | None) -> list[ShardId]:
        """Finish renames no shard holds the old name of any more, then resume the
        blocked shards whose schema now joins (which may finish more renames)."""
        self._settle_renames()
        resumed = self._retry_blocked(exclude)
        if resumed:
            self._settle_renames()
        return resumed

    def _rules(self) -> RenameRules:
        """The pending renames' rules over the group as it stands (replicator/schema/rename_rules.py)."""
        return RenameRules(
            self.shards,
            self.ledger,
            self.join,
            self.retained,
            self._types,
            self.pinned.keys(),
            self.departed,
            self._blocked,
            self.propagated,
            self.target,
        )

    def _settle_renames(self) -> None:
        """A rename finishes when no shard has the old name any more; it is cancelled
        when no shard has the new name any more (the renamed shards dropped it) while
        some still have the old one: the values it moved go back to the old name."""
        for record in list(self.renames):
            if not self._rules().holds_old(record):
                self.ledger.finish(record)
                others = self._others_moved(record)
                if record.started and others:
                    # the old name is the one the procedure re-added, nullable for its own
                    # sake: what its NULLs mean is the shards' to say (one done in one step
                    # moved what it moves when recorded)
                    self._retain_moved(record.old, record.new, nulls=False)
                elif record.started:
                    # every value it moved is a row of a shard that made the rename, which
                    # MariaDB checked against its new definition: nothing to keep for them
                    # (a rename there and back, then a narrowing, held the width: issue 43)
                    self._move_written(record.old, record.new)
                self.retained.settle(key(record.new), vouched=not others)
                self._keep_nulls_of_departed(record)
            elif self.join.presence(key(record.new)) == 0 and not self._rules().awaited(record):
                self.ledger.cancel(record)
                # the copy back leaves NULL where the renamed shards' rows had cleared the old name
                self._retain_moved(record.new, record.old, nulls=record.nulls)
                if record.started:
                    # and their rows hold values of their own in the old name again: a shard
                    # that dropped the new name and adds the old one later gives them its
                    # default there (live stories seed 20108)
                    self._move_written(record.new, record.old)
                # and the new name, if a shard has it still (added it, paused), keeps the NULL
                # the others' rows were written with while the rename was pending (seed 220711)
                moved = self.propagated.column(record.new) if self.propagated is not None else None
                if moved is not None and moved.generated is None:
                    self.retained.keep_null(moved)
                self._keep_nulls_of_renamers(record)

    def _keep_nulls_of_departed(self, record: RenameRecord) -> None:
        """A shard that dropped the old name while the rename was pending writes neither
        name (`cleared_columns`): its rows since got NULL in both, and the last shard's copy
        (WHERE old IS NOT NULL) leaves them NULL in the new one, which stays nullable for
        them till they vouch for the column (live stories seed 22013: MODIFY ... NOT NULL
        refused, 1265). A shard that left holds them for good."""
        self._keep_nulls(record.new, record.departed, without=(record.new,))

    def _keep_nulls_of_renamers(self, record: RenameRecord) -> None:
        """A shard that made a cancelled rename and dropped the new name, or dropped the old
        name while the rename was pending (`departed`), writes neither name: its rows since
        got NULL in the old one (cleared) and none in the new, and the copy back (WHERE old
        IS NULL AND new IS NOT NULL) leaves them NULL, so the old name stays nullable for
        them till they vouch for it (live stories seeds 25026, 26270: MODIFY ... NOT NULL
        refused, 1265). The shard whose DDL drops it now has written no row without it."""
        writers = (record.shards | record.departed) - {self._now.shard}
        self._keep_nulls(record.old, writers, without=(record.old, record.new))

    def _keep_nulls(self, name: str, shards: Collection[ShardId], without: tuple[str, ...]) -> None:
        """The downstream column `name` keeps NULL for the rows of those of `shards` that
        have none of the columns `without` (and for good for one that left)."""
        column = self.propagated.column(name) if self.propagated is not None else None
        if column is None or column.generated is not None or not shards:
            return
        if any(s not in self.shards for s in shards):
            self.retained.keep_null(column)  # (a shard that left: None, no present shard's)
        lacking = [
            str(s)
            for s in sorted(shards)
            if s in self.shards and not any(has_column(self.shards[s].accepted, n) for n in without)
        ]
        if lacking:
            self.retained.keep_null(column, lacking)

    def _others_moved(self, record: RenameRecord) -> bool:
        """A finished rename moved values of rows no shard that made it vouches for: of a
        shard that dropped the old name instead, or left, or that only the old name's
        record in `retained` keeps."""
        old = key(record.old)
        return bool(record.departed) or self.retained.strangers or old in self.retained.orphaned

    def _propose(self, shards: list[ShardId], renames: dict[ShardId, list[tuple[str, str]]]) -> str | None:
        """Put these shards' current schemas into the join in place of their accepted
        ones. If the join then has a conflict, put the accepted ones back and say why;
        else the current schemas become the accepted ones."""
        states = [self.shards[s] for s in shards]
        if any(st.current is None for st in states):
            return "the shard's schema is unknown"
        for st in states:
            _swap(self.join, st.accepted, st.current)
        try:
            self.join.table()
        except Conflict as exc:
            for st in states:
                _swap(self.join, st.current, st.accepted)
            return _describe(exc)
        whole = self._renamed_at_once(shards, renames)
        for shard, st in zip(shards, states, strict=True):
            if st.accepted is not None:
                # a column renamed away is let go of while its values stay under the old name
                # downstream (the rename pending); one renamed at once is not: the shard
                # vouches for its values under the new name (seed 360206)
                now = st.current.column_map.keys() | whole.get(shard, set())
                gone = [c for k, c in st.accepted.column_map.items() if k not in now]
                # (the old name of a rename the shard makes: its values are the rename's to
                # move, which may end with every shard vouching for them: `Retained.settle`)
                away = {key(old) for old, _ in renames.get(shard, [])}
                self.retained.keep(c for c in gone if c.key not in away)
                self.retained.keep((c for c in gone if c.key in away), pending=True)
            if st.block is not None and st.accepted is not None and shard != self._now.shard:
                # resumed by another shard's decision: a column it added while paused is new
                # to its rows downstream as it would have been at its own (live stories seed
                # 20108: the values a cancelled rename copied back stayed in it)
                added = SchemaChange(shard, ChangeKind.ALTER, "", before=st.accepted, after=st.current)
                self._now.resumed += [(shard, fix) for fix in self._rows().existing(shard, added)]
                # (and its rows are held as its accepted table has them: live stories seed 24581)
                if (tables := self._rows().tables_of(shard, added)) is not None:
                    self._now.tables[shard] = tables
            # (before `accept`, which counts them written)
            vouched = [c.key for c in _added(st) if self._rows().hold_own(shard, st, c)]
            joins = st.accepted is None
            st.accept()
            if joins and st.accepted is not None:
                # a shard joining without a column only fillers are held for: its rows get them
                # too (the downstream table may not change, so `_note_fillers` would not see it)
                for k in [k for k in self.retained.lacking if k not in st.accepted.column_map]:
                    self.retained.also_lacking(k, [str(shard)])
            for k in vouched:
                self.retained.vouch(k, str(shard))
            self._unsettled.add(shard)
            self._set_block(shard, None)
        return None

    def _renamed_at_once(
        self, proposed: list[ShardId], renames: dict[ShardId, list[tuple[str, str]]]
    ) -> dict[ShardId, set[str]]:
        """The old names (keys) each shard renames in a rename that is done at once: none
        pending for it, and no shard has the old name (the `proposed` ones as they are now)."""
        out: dict[ShardId, set[str]] = {}
        for shard, pairs in renames.items():
            for old, _new in pairs:
                k = key(old)
                pending = any(key(r.old) == k for r in self.renames)
                tables = (st.current if s in proposed else st.accepted for s, st in self.shards.items())
                if not pending and not any(has_column(t, old) for t in tables):
                    out.setdefault(shard, set()).add(k)
        return out

    def _try_accept(self, shard: ShardId, renames: list[tuple[str, str]]) -> str | None:
        return self._propose([shard], {shard: renames})

    def _accept_together(self, shard: ShardId, own: list[tuple[str, str]]) -> list[ShardId] | None:
        """Accept `shard` with all shards paused by a conflict at once, if their
        current schemas join. Returns the paused shards that resume, or None. Their renames
        are made together: each re-adding the old name waits for none of the others (two
        shards' `CHANGE b new_b INT, ADD b CHAR(1)`, which paused the first: issue 43)."""
        candidates = [
            s
            for s, st in ((s, self.shards[s]) for s in sorted(self._blocked))
            if s != shard and st.block.kind == BlockKind.CONFLICT and st.current is not None
        ]
        # (one that cannot resume is in no batch: those whose checks passed for its sake are
        # checked again without it, till none fails; live stories seed 23014: a shard with
        # both names of a rename is held while those re-adding the old name waited for it)
        paused = candidates
        while True:
            batch = {shard: own, **{s: self.shards[s].block.renames for s in paused}}
            rules = self._rules()
            kept = [s for s in paused if rules.check(s, [*batch[s]], self.shards[s].current, batch) is None]
            if kept == paused:
                break
            paused = kept
        if not paused or self._rules().check(shard, own, self.shards[shard].current, batch) is not None:
            return None
        renames = {s: list(self.shards[s].block.renames) for s in paused}
        dropped = {s: list(self.shards[s].block.dropped) for s in paused}
        if self._renamed_into_one({shard: own, **renames}):
            return None
        if self._propose([shard, *paused], {shard: own, **renames}) is not None:
            return None
        for s in paused:
            self._record_accepted(s, renames[s], dropped[s])
            self.store.put_shard(s, self.shards[s].to_data())
        return paused

    def _renamed_into_one(self, renames: dict[ShardId, list[tuple[str, str]]]) -> bool:
        """Two shards rename different columns to one name: taken one by one, the second
        would be renaming into a column a shard has already (`_check_renames`); taken
        together, the copy would move one of them only and lose the other's values
        (seed 784496)."""
        into: dict[str, str] = {}
        for shard, pairs in renames.items():
            for old, new in moving_rows(self.shards[shard].accepted, pairs):
                if into.setdefault(key(new), key(old)) != key(old):
                    return True
        return False

    def _retry_blocked(self, exclude: ShardId | None) -> list[ShardId]:
        """After any change, a blocked shard whose schema now joins resumes."""
        resumed = []
        progress = True
        while progress:
            progress = False
            paused = sorted(
                s for s in self._blocked if s != exclude and self.shards[s].block.kind == BlockKind.CONFLICT
            )
            for shard in paused:
                state = self.shards[shard]
                renames, dropped = list(state.block.renames), list(state.block.dropped)
                problem = self._rules().check(shard, renames, state.current)
                if problem is not None:
                    if problem != state.block.reason:
                        # what keeps it paused now, as show-ddl-state tells it
                        self._set_block(shard, replace(state.block, reason=problem))
                        self.store.put_shard(shard, state.to_data())
                    continue
                if self._try_accept(shard, renames) is None:
                    self._record_accepted(shard, renames, dropped)
                    self.store.put_shard(shard, state.to_data())
                    resumed.append(shard)
                    progress = True
        return resumed

    def _target_changes(self) -> bool:
        return _differs(self._compute_target(), self.target)

    def _block(
        self,
        shard: ShardId,
        ddl: str,
        kind: BlockKind,
        reason: str,
        position: str | None,
        renames: Iterable[tuple[str, str]] = (),
        dropped: Iterable[str] = (),
    ) -> Decision:
        state = self.shards[shard]
        filled, passed = (self._now.filled, self._now.passed) if shard == self._now.shard else ((), ())
        block = Block(kind, reason, ddl, position, tuple(renames), tuple(dropped), filled, passed)
        self._set_block(shard, block)
        # a paused shard that drops the new name of a rename it made no longer awaits it:
        # the rename may be cancelled now, its values copied back (seed 120426); one that
        # makes it finishes it, which resumes a shard that waited for that (it had the old
        # name again, `_readds_renamed`: seed 1309320)
        unblocked = tuple(self._after_change(exclude=shard))
        self.store.put_shard(shard, state.to_data())
        result = Result.CONFLICT if kind == BlockKind.CONFLICT else Result.UNSUPPORTED
        message = f"{shard} paused: {reason}" + (f"; resumed {_names(unblocked)}" if unblocked else "")
        return self._commit(shard, ddl, result, message, unblocked=unblocked)

    def _block_unsupported(self, shard: ShardId, ddl: str, reason: str, position: str | None) -> Decision:
        state = self.shards.get(shard)
        if state is None:
            state = self.shards[shard] = ShardState(None, None)
        state.current = None
        return self._block(shard, ddl, BlockKind.UNSUPPORTED, reason, position)

    def _truncate(self, shard: ShardId, ddl: str, position: str | None) -> Decision:
        where = self.extract.origin(shard)
        if where is None:
            return self._block_unsupported(
                shard,
                ddl,
                "TRUNCATE of one shard cannot be applied to the merged table without extract "
                "columns for source, schema and table (skip it, or delete that shard's rows by hand)",
                position,
            )
        statement = f"DELETE FROM {qualified_name(self.target_name)} WHERE {where}"
        table = materialize(self.propagated, self.flavor) if self.propagated is not None else None
        step = DownstreamStep(statement, table)  # rows only: the table stays as it is
        return self._decision(shard, ddl, Result.APPLIED, "rows of this shard deleted downstream", (step,))

    # -- renames (seed 002 "Renaming columns") ------------------------------------------------

    def _record_accepted(self, shard: ShardId, renames: list[tuple[str, str]], dropped: list[str]) -> None:
        """What an accepted shard's DDLs did to the pending renames. A shard that drops
        the old name of one it has not made holds none of the values it moves any more,
        whatever column of that name it adds; then its own renames."""
        gone = set(dropped)
        accepted = self.shards[shard].accepted
        for record in self.renames:
            if shard in record.shards:
                continue
            if key(record.old) in gone:
                record.departed.add(shard)
            if (
                shard in record.departed
                and has_column(accepted, record.old)
                and self._rules().holds_old(record, besides=shard)  # (a walk of every shard: last)
            ):
                # but a column of that name it adds while another shard still has the old
                # one is that shard's downstream column, which its rows write too: the
                # rename moves their values as well (seed 580579)
                record.departed.discard(shard)
        self._record_renames(shard, renames)

    def _record_renames(self, shard: ShardId, renames: list[tuple[str, str]]) -> None:
        for old, new in renames:
            record = next((r for r in self.renames if (key(r.old), key(r.new)) == (key(old), key(new))), None)
            if record is not None:
                record.shards.add(shard)
                continue
            # the NULLs of a pending (or just finished) rename's new name are the rows its
            # last copy fills, unless NULL is a value of it (seed 201127: a chain a→b→c)
            before = self.ledger.of_new_name(old)
            nulls = before[0].nulls if before else True
            record = RenameRecord(old, new, {shard})
            self.ledger.begin(record)
            if self._rules().holds_old(record):
                self._retain_moved(record.old, record.new, nulls=nulls, held=False, pending=True)
            else:
                # done in one step: every value it moves is in a row of a shard that has the
                # new name and vouches for it; what the old name kept for rows no shard
                # vouches for moves as kept (seed 360206), its NULLs too (seed 371415); a
                # column of the old name that stays is a new one, holding none of them
                # (seed 432890)
                self.retained.move(key(record.old), record.new)
                self.retained.forget(key(record.old))
                self._move_written(record.old, record.new)

    def _retain_moved(
        self, source: str, target: str, *, nulls: bool = True, held: bool = True, pending: bool = False
    ) -> None:
        """Seed 002's rename moves a column's values into another (the old into the new
        at the first shard by CHANGE COLUMN and at the last by copying; the new back into
        the old when cancelled): the target keeps a type that holds them, as a dropped
        column does (replicator/schema/retained.py), and the type the source keeps for rows no
        shard vouches for (a rename that finishes in the decision that starts the next
        one moved values in: seed 270258). `nulls`: and their NULLs; `held`: and the
        NULLs the source keeps for them; `pending`: a rename starting, which may end with
        every shard vouching for them (`Retained.settle`)."""
        self._move_written(source, target)
        downstream = self.propagated  # the values that move are the downstream table's
        column = downstream.column(source) if downstream is not None else None
        if column is None:
            return
        if not nulls:
            column = replace(column, nullable=False)
        self.retained.move(column.key, target, nulls=held)
        self.retained.keep([replace(column, name=target)], pending=pending)

    def _move_written(self, source: str, target: str) -> None:
        """The values a rename moves go with it: rows that held them in `source` hold them
        in `target`, and in `source` only the values their shard writes there still (a
        column of that name re-added downstream holds none of the moved ones)."""
        s, t = key(source), key(target)
        for shard, state in self.shards.items():
            if s in state.wrote:
                still = {s} if has_column(state.accepted, source) else set()
                state.wrote = (state.wrote - {s}) | still | {t}
                self._unsettled.add(shard)
                self.store.put_shard(shard, state.to_data())
        self.departed = {(written - {s}) | {t} if s in written else written for written in self.departed}
        self.departed_keys = [
            frozenset((on - {s}) | {t} if s in on else on for on in unique) for unique in self.departed_keys
        ]

    # -- the downstream table -------------------------------------------------------------
    def _note_cosmetics(self, change: SchemaChange) -> None:
        """Seed 002 "Idempotent DDLs": comments, column moves and table options pass through."""
        self.comments.update(change.comments)
        self._moves.extend((m.column, m.after) for m in change.moves)
        spec = change.options
        if spec is not None:
            base = self.options or (self.target.options if self.target else TableOptions())
            self.options = TableOptions(
                engine=spec.engine or base.engine,
                charset=spec.charset or base.charset,
                collation=spec.collation or (base.collation if not spec.charset else None),
                comment=(spec.comment or None) if spec.comment is not None else base.comment,
            )

    def _compute_target(self, hint: Table | None = None) -> Table | None:
        """The downstream table (replicator/schema/target.py); `retained` forgets the
        columns the table holds no more, the pending renames note their nulls."""
        if not any(s.accepted is not None for s in self.shards.values()):
            return None
        inputs = TargetInputs(
            self.join.table(),
            self.join.name,
            self.flavor,
            self.extract,
            target=self.target,
            propagated=self.propagated,
            paused=self._paused_tables(),
            paused_by_conflict=self._paused_tables(conflict_only=True),
            pinned=self.pinned,
            comments=self.comments,
            renames=self.renames,
            moves=self._moves,
            departed_keys=self.departed_keys,
            options=self.options,
        )
        held = [c.key for c in held_by_paused(inputs)]
        self.retained.forget_all_but([*inputs.joined.column_map, *held, *self.pinned])
        target = target_of(inputs, self.retained, self.join.agreed_options, hint)
        renamed_to = {key(r.new): r for r in self.renames}
        for k, nulls in target.nulls.items():
            renamed_to[k].nulls = nulls
        return target.table

    def _paused_tables(self, *, conflict_only: bool = False) -> list[Table]:
        """The current tables of the blocked shards (of those paused by a conflict)."""
        return [
            state.current
            for state in (self.shards[s] for s in sorted(self._blocked))
            if state.current is not None and (not conflict_only or state.block.kind == BlockKind.CONFLICT)
        ]

    def _note_fillers(self, held: Table) -> None:
        """Rows of shards lacking a partial column get its downstream default: a NULL or a
        value no shard's schema vouches for (see replicator/schema/retained.py).
        The names of a pending rename are left out: their NULLs are what shards without
        them clear (Daemon._clear_renamed), and go when the rename ends."""
        renaming = {key(n) for r in self.renames for n in (r.old, r.new)}
        for column in self.target.columns if self.target is not None else ():
            if not column.partial or column.generated is not None or column.key in renaming:
                continue
            downstream = held.column_map[column.key]
            lacking = self._lacking(column.key)
            if downstream.nullable and (downstream.default is None or downstream.default.is_null):
                self.retained.keep_null(downstream, lacking)
            elif downstream.default is not None and not downstream.default.is_expression:
                self.retained.keep_filler(downstream, lacking)

    def _lacking(self, k: str) -> list[str]:
        """The shards whose rows downstream get a column's filler: those it is not in."""
        shards = self.shards.items()
        return [str(s) for s, st in shards if st.accepted is not None and st.accepted.column(k) is None]

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
        old_target = self.target
        new_target = self._compute_target(hint)
        if new_target is not None and old_target is not None and new_target.same_rendering(old_target):
            new_target = old_target  # the same object: saved and compared at no cost
        downstream: tuple[DownstreamStep, ...] = ()
        before = materialize(self.propagated, self.flavor) if self.propagated is not None else None
        through: list[tuple[ShardId, RowsFix]] = []
        moved: set[str] = set()  # the columns the renames' steps emitted now copy into or out of
        if new_target is not None:
            steps = self.ledger.steps(old_target)
            self.known_columns |= set(new_target.column_map)
            if old_target is not None and (_differs(new_target, old_target) or steps):
                self.version = self.version.next(compatible=keeps_rows(old_target, new_target, self.flavor))
            self.target = new_target
            self._moves = []
            if self.propagation:
                steps = self.ledger.held + steps
                self.ledger.held = []
                moved = {key(n) for step in steps for n in (step.old, step.new)}
                changed = self.propagated is None or _differs(self.propagated, new_target)
                if self.propagated is None:
                    downstream = (create(new_target, flavor=self.flavor, target=self.target_name),)
                elif changed or steps:
                    downstream = tuple(
                        diff(
                            self.propagated,
                            new_target,
                            flavor=self.flavor,
                            target=self.target_name,
                            renames=steps,
                        )
                    )
                self.propagated = new_target
                if changed:  # (a partial column may change nothing the server holds)
                    held = materialize(new_target, self.flavor)
                    self._note_fillers(held)
                    through = (
                        self._rows().rendered_through(before, held, self._now.tables, moved)
                        if before is not None
                        else []
                    )
                    self.fills.follow(before, held, copied=self.ledger.keys(steps))
            else:
                self.ledger.held.extend(steps)
        if new_target is not None:
            self._forget_written(new_target)
        state = self.shards.get(shard) if shard is not None else None
        own = self.propagation and state is not None and state.block is None  # its rows go on
        fixes = self._now.take(own, through)
        fixes = fixes if self.propagation else []
        if fixes or (own and self._now.renamed):
            table = materialize(self.propagated, self.flavor)
            downstream = with_fixes(downstream, fixes, before, table, self.flavor, moved)
            if own:
                pending = {key(n) for r in self.renames if r.started for n in (r.old, r.new)}
                downstream = (*downstream, *self._now.take_cleared(pending, table))
        return self._decision(shard, ddl, result, message, downstream, unblocked, before)

    def _columns_there(self, target: Table | None) -> frozenset[str]:
        """The keys of the columns downstream: the target's and what was emitted."""
        tables = [t for t in (target, self.propagated) if t is not None]
        return frozenset(k for t in tables for k in t.column_map)

    def _forget_written(self, target: Table) -> None:
        """A column gone downstream takes its values with it: a column of that name the
        table gets again holds none of them. (Every shard's record is within the columns
        downstream after a decision: only the records that grew and, when columns went,
        every one are looked at, as a decision asks among a thousand shards.)"""
        there = self._columns_there(target)
        went = self._there - there
        shards = list(self.shards) if went else self._unsettled
        if went:
            self.departed = {kept for written in self.departed if len(kept := written & there) > 1}
            # (a column of that name added again holds none of their values: no key sure on it)
            self.departed_keys = [
                frozenset(on for on in unique if on <= there) for unique in self.departed_keys
            ]
        for shard in shards:
            state = self.shards.get(shard)
            if state is not None and not state.wrote <= there:
                state.wrote &= there
                self.store.put_shard(shard, state.to_data())
        self._unsettled = set()
        self._there = there

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
            joined=self.target if self.target is not None else Table(self.join.name, ()),
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
        self.history.append(entry)
        self.store.add_history(entry)
        self.store.put_meta(self._meta())
        return decision

    # -- state ----------------------------------------------------------------------------
    def _state(self, shard: ShardId) -> ShardState:
        state = self.shards.get(shard)
        if state is None:
            raise CoordinatorError(f"unknown shard {shard}; known: {_names(sorted(self.shards)) or 'none'}")
        return state

    def _meta(self) -> dict[str, Any]:
        return {
            "target": table_to_data(self.target) if self.target else None,
            "propagated": table_to_data(self.propagated) if self.propagated else None,
            "fills": self.fills.to_data(),
            "version": str(self.version),
            "propagation": self.propagation,
            **self.ledger.to_data(),
            "comments": self.comments,
            "options": asdict(self.options) if self.options else None,
            "known_columns": sorted(self.known_columns),
            "retained": table_to_data(self.retained.to_table()),
            "retained_origins": self.retained.origins_to_data(),
            "pinned": table_to_data(Table("pinned", tuple(self.pinned.values()))),
            "departed": sorted(sorted(written) for written in self.departed),
            "departed_keys": [sorted(sorted(on) for on in unique) for unique in self.departed_keys],
        }

    def _restore(self) -> None:
        stored = self.store.load()
        if stored is None:
            return
        for shard, data in stored.shards.items():
            state = ShardState.from_data(data)
            self.shards[shard] = state
            if state.block is not None:
                self._blocked.add(shard)
            if state.accepted is not None:
                self.join.add(state.accepted)
        self._unsettled = set(self.shards)
        meta = stored.meta
        self.target = table_from_data(meta["target"]) if meta.get("target") else None
        self.propagated = table_from_data(meta["propagated"]) if meta.get("propagated") else None
        self.extract = self.extract.led_in(self.propagated)
        self.fills = Fills.from_data(meta.get("fills"))
        # (the columns downstream at the last decision: one gone by the next prunes the records)
        self._there = self._columns_there(self.target)
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


def _names(shards: Iterable[ShardId]) -> str:
    return ", ".join(map(str, shards))


def _describe(exc: Conflict) -> str:
    path = exc.path
    if len(path) > 1 and path[0] == "columns":
        return f"column {path[1]}: {exc.reason}"
    return exc.reason


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


def _differs(a: Table | None, b: Table | None) -> bool:
    """Differ in schema or in column order (which a downstream table also has)."""
    if a is None or b is None:
        return a is not b
    return not (a == b and a.columns == b.columns)
