"""A shard group's values: its downstream table's version, a shard's state and block, and
the view of the group that threads other than its coordinator's read.

The coordinator changes on its group's executor thread. Routing (the daemon's loop),
the admin API and the metrics run on others: they read a `GroupView`, a new value
made after each decision and never changed, so none of them iterates a dict the
executor resizes or sees half a decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from lattice import Column, Table, table_from_data, table_to_data
from replicator.shard_id import ShardId


@dataclass(frozen=True, order=True)
class Version:
    major: int = 1
    minor: int = 0

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @classmethod
    def parse(cls, text: str) -> Version:
        major, minor = text.split(".")
        return cls(int(major), int(minor))

    def next(self, compatible: bool) -> Version:
        return Version(self.major, self.minor + 1) if compatible else Version(self.major + 1, 0)


class BlockKind(StrEnum):
    """Why a shard's DDL waits (docs/design.md "Conflicts", "Operator commands")."""

    CONFLICT = "conflict"  # its schema has no join with the others' (it resumes when it has)
    UNSUPPORTED = "unsupported"  # a DDL we cannot follow (set-schema or a skip resumes it)
    WAITING = "waiting"  # DDL propagation is off and its DDL changes the downstream table
    # a TRUNCATE whose shard's rows downstream cannot be told from the others' (no extract
    # columns, or no index leads with them): its schema stays known, a skip resumes it
    TRUNCATE = "truncate"


class Result(StrEnum):
    """What a decision did."""

    APPLIED = "applied"  # the shard's schema is in the join (downstream DDL, if any, to run)
    CONFLICT = "conflict"  # the shard pauses (`BlockKind.CONFLICT`)
    RESOLVED = "resolved"  # applied, and blocked shards resume
    UNSUPPORTED = "unsupported"  # the shard pauses (`BlockKind.UNSUPPORTED`, or already paused)
    IGNORED = "ignored"  # the statement changes nothing of the group


@dataclass(frozen=True)
class Block:
    kind: BlockKind
    reason: str
    ddl: str
    position: str | None = None  # binlog position of the DDL, given by the worker
    renames: tuple[tuple[str, str], ...] = ()  # column renames of the blocked DDL, checked again on resume
    dropped: tuple[str, ...] = ()  # keys of the columns the blocked DDLs dropped (see _record_departures)
    # the columns the blocked DDLs added, as added, their default the value the shard's rows
    # got then: whatever default or type the column has by the time the shard resumes
    filled: tuple[Column, ...] = ()
    # each type the shard's columns took while paused, in order, by their name now (a column
    # once for each): its rows downstream are converted through them when it resumes
    passed: tuple[Column, ...] = ()
    # the TRUNCATE hold this block came on top of (a conflicting DDL after it): once this one
    # clears, the shard is held at its TRUNCATE again, its rows downstream still to delete
    truncate: Block | None = None
    # renames of the blocked DDLs that moved no rows downstream (`split_renames`): a
    # column of a name they took away that the shard has again is one of its own (F171)
    unmoved: tuple[tuple[str, str], ...] = ()
    # the conflict an UNSUPPORTED block came on top of (the shard, held by a conflict, ran a
    # DDL we cannot follow): skipping this one, or saying the shard's table, holds it by that
    # one again, with its renames and drops, its table the conflict's (live stories)
    under: Block | None = None
    # the shard's table is the one the coordinator gave it while blocked (set-schema, binlog
    # replace or skip of a DDL we could not follow): its worker reads with it only once it is
    # read again from its pause, so a DDL of it read meanwhile is taken on that table, not on
    # the one its worker had (live stories: a column the replace added was lost)
    ours: bool = False
    # an UNSUPPORTED block's: the shard's DDLs read while it held it (statement, position), in
    # order. Its table was unknown from this DDL on, so they wait for this one's way out and
    # are decided then, on the table it gives (`operator_actions.decide_stacked`); a later one
    # taking this one's place lost the table this one changed (two unfollowed in a row: its
    # way out took the later one on the table from before both)
    stacked: tuple[tuple[str, str | None], ...] = ()

    def to_data(self) -> dict[str, Any]:
        """A JSON-ready form (journal, admin API)."""
        data = asdict(replace(self, filled=(), passed=(), truncate=None, under=None))
        data["filled"] = _columns_to_data(self.filled)
        data["passed"] = _columns_to_data(self.passed)
        data["truncate"] = self.truncate.to_data() if self.truncate is not None else None
        data["under"] = self.under.to_data() if self.under is not None else None
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Block:
        return cls(
            **{
                **data,
                "kind": BlockKind(data["kind"]),
                "renames": tuple(tuple(r) for r in data.get("renames", ())),
                "unmoved": tuple(tuple(r) for r in data.get("unmoved", ())),
                "dropped": tuple(data.get("dropped", ())),
                "stacked": tuple((ddl, position) for ddl, position in data.get("stacked", ())),
                "filled": _columns_from_data(data.get("filled")),
                "passed": _columns_from_data(data.get("passed")),
                "truncate": Block.from_data(data["truncate"]) if data.get("truncate") else None,
                "under": Block.from_data(data["under"]) if data.get("under") else None,
            }
        )


def _columns_to_data(columns: tuple[Column, ...]) -> list:
    return table_to_data(Table("columns", columns))["columns"] if columns else []


def _columns_from_data(data: list | None) -> tuple[Column, ...]:
    columns = {"name": "columns", "columns": data or [], "indexes": [], "checks": []}
    return table_from_data(columns).columns if data else ()


@dataclass(frozen=True)
class ShardState:
    """A shard as its group knows it: a value, replaced by a decision, never changed (a
    decision works on a copy of the group's state, which shares the shards it leaves)."""

    accepted: Table | None  # None: no schema of this shard is downstream yet
    current: Table | None  # None: unknown (an unsupported DDL)
    block: Block | None = None
    # keys of the downstream columns the shard's rows may hold values of their own in:
    # every column of its accepted schemas while the column is downstream
    wrote: frozenset[str] = frozenset()

    def with_current_accepted(self) -> ShardState:
        """Its current schema accepted: the one downstream now, its columns written."""
        if self.current is None:
            return replace(self, accepted=None)
        return replace(self, accepted=self.current, wrote=self.wrote.union(self.current.column_map))

    def to_data(self) -> dict[str, Any]:
        return {
            "accepted": table_to_data(self.accepted) if self.accepted is not None else None,
            "current": table_to_data(self.current) if self.current is not None else None,
            "block": self.block.to_data() if self.block else None,
            "wrote": sorted(self.wrote),
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> ShardState:
        accepted = table_from_data(data["accepted"]) if data["accepted"] else None
        # (a journal from before `wrote`: the accepted schema's columns)
        wrote = data.get("wrote", accepted.column_map.keys() if accepted is not None else ())
        return cls(
            accepted,
            table_from_data(data["current"]) if data["current"] else None,
            Block.from_data(data["block"]) if data["block"] else None,
            frozenset(wrote),
        )


@dataclass(frozen=True)
class ShardView:
    accepted: Table | None  # its schema in the join (None: none downstream yet)
    current: Table | None  # its latest schema upstream (None: unknown)
    block: Block | None


@dataclass(frozen=True)
class RenameView:
    """A column rename under way, as a view shows it: the shards that made it so far."""

    old: str
    new: str
    made: tuple[ShardId, ...]


@dataclass(frozen=True)
class GroupView:
    """A shard group as its coordinator left it after a decision."""

    name: str  # the downstream table, `schema.table`
    version: Version
    target: Table | None  # what the downstream table is to be
    shards: Mapping[ShardId, ShardView]
    blocked: Mapping[ShardId, Block]
    cleared: Mapping[ShardId, tuple[str, ...]]  # see GroupState.cleared
    columns: Mapping[str, str]  # see GroupState.column_states
    extract_columns: Mapping[str, str]
    propagation: bool  # DDL propagation on
    renames: tuple[RenameView, ...] = ()  # the renames under way, in the order they began

    @classmethod
    def of(
        cls,
        name: str,
        version: Version,
        target: Table | None,
        shards: Mapping[ShardId, ShardView],
        cleared: Mapping[ShardId, list[str]],
        columns: Mapping[str, str],
        extract_columns: Mapping[str, str],
        propagation: bool,
        renames: tuple[RenameView, ...] = (),
    ) -> GroupView:
        """A view holding copies (read-only) of the mappings it is given."""
        blocked = {s: v.block for s, v in sorted(shards.items()) if v.block is not None}
        return cls(
            name,
            version,
            target,
            MappingProxyType(dict(shards)),
            MappingProxyType(blocked),
            MappingProxyType({s: tuple(c) for s, c in cleared.items()}),
            MappingProxyType(dict(columns)),
            MappingProxyType(dict(extract_columns)),
            propagation,
            renames,
        )


def has_column(table: Table | None, name: str) -> bool:
    return table is not None and table.column(name) is not None


def few(names: list[str]) -> str:
    """The first three, for a message about a group of any size."""
    return ", ".join(names[:3]) + (" and others" if len(names) > 3 else "")
