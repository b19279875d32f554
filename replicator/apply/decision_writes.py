"""A group's decision of a DDL job and what is saved with it (docs/design.md "The DDL journal"):
the coordinator's state, the DDL handled and its schema history, the shards it resumes, the
tables it pins, and the journal entry of its downstream statements with the table each
should leave. `DecisionCommit` (decision_commit.py) runs `decide` on a copy of the
coordinator's state and commits the writes in one transaction before anything acts on it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lattice import Flavor, render_table, table_to_data
from replicator.apply import schema_history
from replicator.apply.ddl_job import DDLJob
from replicator.apply.meta import Meta
from replicator.config import EventFilter
from replicator.schema.coordinator import Coordinator, Decision
from replicator.schema.decision import Gave
from replicator.schema.event_filter import kept_columns, taken
from replicator.schema.group import Block, BlockKind
from replicator.shard_id import ShardId
from replicator.shard_id import table_key as shard_key
from replicator.source.messages import Pin
from replicator.source.source_state import PIN
from replicator.state.coordinator_store import MetaStore
from replicator.state.pauses import RESUMING, Pause
from replicator.state.positions import Position


@dataclass(frozen=True)
class Decided:
    """A job's decision, the journal entry of its statements (None: it has none), the event
    filter kind that changed its DDL (event_filter.taken), and the tables it pinned."""

    decision: Decision
    seq: int | None
    filtered: str | None
    pins: Mapping[ShardId, Pin]


class DecisionWrites:
    def __init__(
        self,
        coordinator: Coordinator,
        store: MetaStore,
        meta: Meta,
        target: str,
        events: tuple[EventFilter, ...],
        flavors: Mapping[str, Flavor],
    ):
        """`events` (filters.events): DDLs the coordinator takes as they filter them;
        `flavors`: each source's server's, in which its tables' CREATE TABLE are kept."""
        self.coordinator = coordinator
        self.store = store
        self.meta = meta
        self.target = target
        self.events = events
        self.flavors = flavors

    def decide(self, job: DDLJob) -> tuple[Decided, list[str]]:
        """The job's decision, on the coordinator's state, and the writes that save it: the
        coordinator's state, the DDL done, the shards resuming, the pins, the journal entry
        of its statements (its number: None without statements)."""
        change = job.change
        filtered = None
        unknown = {s: b for s, b in self.coordinator.blocked.items() if b.kind == BlockKind.UNSUPPORTED}
        # a shard paused by the daemon alone (rows its worker could not read, or could not
        # replay) whose table the operator states: its rows are read again with that table
        stated = job.shard if job.states_table and job.shard not in self.coordinator.blocked else None
        # (read before the coordinator decides; a decision resuming one of them saves its
        # table at its pause, `_pins`)
        pauses = self.meta.pauses.load() if unknown or stated else {}
        if job.action is not None:
            decision = job.action(self.coordinator)
        else:
            state = self.coordinator.shards.get(job.shard)
            shard_change, filtered = taken(self.events, change.change, state and state.current)
            # `drop column`: what the shard drops stays downstream (saved with this decision)
            self.coordinator.pin(kept_columns(self.events, shard_change))
            decision = self.coordinator.apply(shard_change, position=change.position)
        statements = list(decision.downstream)
        writes = self.store.flush_sql()
        if change is not None:
            writes += schema_history.decision_rows(self.meta, change)
            writes.append(self.meta.ddl_done.sql(job.shard, change.id))
        # a shard this decision unblocks (a DDL's, or an operator's: a skip drops the DDL, not
        # its rows) is resuming, in the same transaction: a crash before the daemon resumes it
        # must not leave it paused with nothing blocking it; its pause is kept till the rows it
        # wrote meanwhile are merged (Daemon._reopen_window)
        for shard in decision.unblocked:  # (its old reason's ways out apply no more)
            writes += [self.meta.pauses.sql_replay(shard, RESUMING, ()), self.meta.pauses.sql_resuming(shard)]
        pins = self._pins(unknown, pauses, stated, {g.shard: g for g in decision.gave})
        for shard, pin in pins.items():
            writes += schema_history.pin_rows(self.meta, shard, pin)
            writes.append(self.meta.ddl_done.sql(shard, pin.decided))
            if change is None:  # (an operator's: resuming too, read again from its pause after a crash)
                stored = self.meta.pauses
                writes += [stored.sql_replay(shard, RESUMING, ()), stored.sql_resuming(shard)]
        seq = None
        if statements:
            seq = self.meta.journal.next_seq(self.target)
            # the downstream table after each statement, for recovery to tell whether it ran
            tables = [table_to_data(s.after) if s.after is not None else None for s in decision.steps]
            # (the shard's DDL it comes of, by which `shardctl binlog` names it; none: an operator's)
            position = change.position if change is not None else None
            ddl = change.change.statement if change is not None and change.change is not None else None
            writes.append(
                self.meta.journal.sql_entry(
                    self.target, seq, job.shard, str(decision.version), statements, tables, position, ddl
                )
            )
        return Decided(decision, seq, filtered, pins), writes

    def _pins(
        self,
        unknown: Mapping[ShardId, Block],
        pauses: Mapping[ShardId, Pause],
        stated: ShardId | None,
        gave: Mapping[ShardId, Gave],
    ) -> dict[ShardId, Pin]:
        """The table the decision gives each shard whose schema was not known and is now (a
        DDL its tracker could not follow, rows its worker could not read: `set-schema`'s
        table, the DDL `binlog replace` takes, or the one from before for a skip), from where
        the shard paused on: its worker reads its rows again from there with that table, and
        its DDLs since are decided again as read (they were not followed while its schema
        was unknown). `stated`: a shard the daemon alone paused, whose table the operator
        said (live stories: a replace, then its rows read again with the table from before
        the DDL, paused it for good). `gave`: the table a way out gave a shard before the
        decision took the DDLs it ran after the one we could not follow on it: that table, from
        that DDL on, the decided ones not decided again when read (`Pin.done`), whatever
        block they leave it in (one we cannot follow either: its own way out pins its table)."""
        # (one the decision leaves blocked otherwise, say in conflict, is known all the same: it
        # reads its rows with that table once it resumes)
        blocked, kind = self.coordinator.blocked, BlockKind.UNSUPPORTED
        known = [s for s in unknown if s in gave or s not in blocked or blocked[s].kind != kind]
        if stated is not None and stated in pauses and stated not in blocked:
            known.append(stated)
        out = {}
        for shard in known:
            state = self.coordinator.shards.get(shard)
            pause, block = pauses.get(shard), unknown.get(shard)
            table = gave[shard].table if shard in gave else state.current if state is not None else None
            if state is None or table is None:
                continue
            # from where its table was not known: its pause, or the DDL it could not follow
            # when it ran that while paused already (by a conflict: live stories), its rows
            # before that read as they were
            ats = [pause.first] if pause is not None else []
            if block is not None and block.position:
                ats.append(Position.parse(block.position).change(0))
            if not ats:
                continue
            at = max(ats)
            flavor = self.flavors.get(shard.source, Flavor.MARIADB)
            create = render_table(table.renamed(shard.table), flavor)
            through = gave[shard].through if shard in gave else None
            done = Position.parse(through).change(0) if through else None
            out[shard] = Pin((at[0], at[1], PIN), shard_key(shard.schema, shard.table), create, done)
        return out
