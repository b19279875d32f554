"""The optimistic coordinator of one shard group (docs/design.md "The join").

It knows every shard's schema and keeps the downstream table at their join. A
shard's DDL changes that shard's schema; the coordinator re-joins, turns the
difference between the old and the new downstream table into DDL (`lattice.diff`),
and says which shards must pause. It does no I/O: the caller runs the DDL it
returns, and its state goes to a `CoordinatorStore`.

Each shard has an *accepted* schema (its rows already downstream fit it; it is in
the join) and a *current* one (its latest upstream schema). They differ only while
the shard is blocked:
- conflict (docs/design.md "Conflicts"): the current schema has no join with the
  others. The shard's rows pause; its later DDLs and other shards' DDLs are still
  evaluated, and when any of them makes the join valid again the shard resumes
  from where it paused (both the non-intrusive and the intrusive resolution);
- unsupported: a DDL we cannot read; the shard waits for `set_schema` or a skip;
- waiting: propagation is disabled and the shard's DDL changed the downstream
  table; it resumes when propagation is enabled and the DDL has run.

Every change of the downstream table gets a version major.minor (docs/design.md "Versions"):
minor when the old table is below the new one in the lattice (every row valid
before is valid after), major otherwise.

`Coordinator` is the group's facade: it holds the group's state in place and its settings,
and each request is a function of them in a module of its own (issue 72): a shard's own
changes in `shard_changes.py`, a change put into the join in `evaluate.py`, a shard paused
in `blocking.py`, the operator's requests in `operator_actions.py`, the end every decision
shares (the downstream steps, the rows' fixes, the history entry) in `commit.py`, and the
`Decision`, the settings (`GroupContext`) in `decision.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from lattice import Column, Flavor, Table
from replicator.schema import blocking, operator_actions, shard_changes
from replicator.schema.decision import CoordinatorError, Decision, GroupContext
from replicator.schema.extract import ExtractColumns
from replicator.schema.group import Block, GroupView, RenameView, ShardState, ShardView, Version
from replicator.schema.group_state import GroupState
from replicator.schema.renames import RenameRecord
from replicator.shard_id import ShardId
from replicator.source.schema_change import SchemaChange
from replicator.state.coordinator_store import CoordinatorStore, InMemoryStore

__all__ = ["Block", "Coordinator", "CoordinatorError", "Decision"]

T = TypeVar("T")


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
        columns), which lets a TRUNCATE of one shard delete only that shard's rows.
        The group's state is loaded as the store holds it."""
        self.target_name = target
        self.clock = clock  # stamps the history's entries: the caller's time, not the decision's
        self.flavor = Flavor.parse(flavor)
        self.store = store or InMemoryStore()
        self.upstream = upstream
        self.group = GroupState(  # (group_state.py)
            self.flavor, self.target_name.split(".")[-1], qualified=self.target_name
        )
        self.extract = ExtractColumns.configured(extract_columns, extract_types, captured)
        stored = self.store.load()
        if stored is not None:
            self.group.restore(stored)
            self.extract = self.extract.led_in(self.group.propagated)

    def _context(self) -> GroupContext:
        """The group's settings, as a decision takes them (its state is `group`)."""
        return GroupContext(
            self.target_name, self.flavor, self.extract, self.upstream, self.clock, self.store
        )

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

    def reload(self) -> int:
        """The group's state read again as the store holds it (issue 75: a member that does
        not coordinate takes the coordinator's decisions so, while it runs); how many
        decisions it holds."""
        stored = self.store.load()
        if stored is None:
            return 0
        group = GroupState(self.flavor, self.target_name.split(".")[-1], qualified=self.target_name)
        group.restore(stored)
        self.group = group
        return len(stored.history)

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
        return shard_changes.add_shard(self._context(), self.group, shard, table, position)

    def remove_shard(self, shard: ShardId, ddl: str = "") -> Decision:
        return shard_changes.remove_shard(self._context(), self.group, shard, ddl)

    def apply(self, change: SchemaChange, *, position: str | None = None) -> Decision:
        """One shard's schema change, in binlog order, as the tracker read it."""
        return shard_changes.apply_change(self._context(), self.group, change, position)

    def set_schema(self, shard: ShardId, table: Table) -> Decision:
        """docs/design.md "Operator commands": force a shard's schema (intrusive resolution)."""
        return operator_actions.set_schema(self._context(), self.group, shard, table)

    def replace_ddl(self, shard: ShardId, statement: str, position: str | None) -> Decision:
        """The blocked DDL replaced by `statement` (binlog replace; `operator_actions.replace_ddl`)."""
        return operator_actions.replace_ddl(self._context(), self.group, shard, statement, position)

    def skip_ddl(self, shard: ShardId) -> Decision:
        """The blocked DDL is skipped (binlog skip): the shard keeps its accepted schema."""
        return operator_actions.skip_ddl(self._context(), self.group, shard)

    def pause_shard(
        self, shard: ShardId, reason: str, *, ddl: str = "", position: str | None = None
    ) -> Decision:
        """Pause a shard whose rows cannot be read (its schema is unknown to the worker):
        like an unsupported DDL, it waits for set-schema or a skip."""
        return blocking.pause_shard(self._context(), self.group, shard, reason, ddl, position)

    def disable_ddl_propagation(self) -> Decision:
        return operator_actions.disable_ddl_propagation(self._context(), self.group)

    def enable_ddl_propagation(self) -> Decision:
        return operator_actions.enable_ddl_propagation(self._context(), self.group)

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
            tuple(RenameView(r.old, r.new, tuple(sorted(r.shards))) for r in self.group.renames),
        )

    def column_states(self) -> dict[str, str]:
        """Each column's state in the group (`GroupState.column_states`)."""
        return self.group.column_states(self.extract.keys)

    def pin(self, columns: Iterable[Column]) -> list[str]:
        """DM's `drop column` event filter: columns a shard drops stay downstream for good
        (`operator_actions.pin`). Called before the shard's change (`apply`), whose decision
        saves it. Returns the keys pinned now."""
        return operator_actions.pin(self.group, columns)
