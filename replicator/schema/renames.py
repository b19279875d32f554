"""A shard group's column renames in progress: the rename procedure (docs/design.md "Renaming columns"),
its records.

A rename starts downstream when the first shard makes it (the old column CHANGEd to the new
name, the old name added back nullable) and ends when no shard holds the old name as the
column it moves (the last shard's copy, WHERE old IS NOT NULL), or is cancelled when no shard
has the new name any more (the copy back). The coordinator decides when (it knows the shards);
the ledger keeps the records, and turns those that started, ended or were cancelled since the
last decision into the downstream steps (`steps`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from lattice import RenameStep, Table, key
from replicator.shard_id import ShardId


@dataclass
class RenameRecord:
    """A column rename in progress: some shards renamed old to new, some not yet."""

    old: str
    new: str
    shards: set[ShardId] = field(default_factory=set)
    started: bool = False  # the first-shard statements have been emitted
    # the new name holds NULL as a value (it is nullable in the join), not only where
    # shards without it cleared it (downstream it takes NULL while the rename is pending)
    nulls: bool = False
    # shards that dropped the old name instead: a column of that name they have since is
    # their own, not the one the rename moves (F87)
    departed: set[ShardId] = field(default_factory=set)

    def copy(self) -> RenameRecord:
        return replace(self, shards=set(self.shards), departed=set(self.departed))

    def to_data(self) -> dict[str, Any]:
        return {
            "old": self.old,
            "new": self.new,
            "shards": list(map(str, sorted(self.shards))),
            "started": self.started,
            "nulls": self.nulls,
            "departed": list(map(str, sorted(self.departed))),
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> RenameRecord:
        return cls(
            data["old"],
            data["new"],
            {ShardId.parse(s) for s in data["shards"]},
            data.get("started", False),
            data.get("nulls", True),  # (saved before it was: as the downstream column then was)
            {ShardId.parse(s) for s in data.get("departed", [])},
        )


class RenameLedger:
    """The pending renames (`pending`, in the order they began), those that ended or were
    cancelled since the last decision, and the steps held back while DDL propagation is off."""

    def __init__(self) -> None:
        self.pending: list[RenameRecord] = []
        self.finished: list[RenameRecord] = []
        self.cancelled: list[RenameRecord] = []
        self.held: list[RenameStep] = []

    def __iter__(self) -> Iterator[RenameRecord]:
        return iter(self.pending)

    def copy(self) -> RenameLedger:
        """An independent ledger (its records copied, each once: one is in two lists while
        a decision moves it)."""
        copies: dict[int, RenameRecord] = {}

        def of(record: RenameRecord) -> RenameRecord:
            return copies.setdefault(id(record), record.copy())

        other = RenameLedger()
        other.pending = [of(r) for r in self.pending]
        other.finished = [of(r) for r in self.finished]
        other.cancelled = [of(r) for r in self.cancelled]
        other.held = list(self.held)  # (RenameSteps: frozen)
        return other

    def begin(self, record: RenameRecord) -> None:
        self.pending.append(record)

    def finish(self, record: RenameRecord) -> None:
        self.pending.remove(record)
        self.finished.append(record)

    def cancel(self, record: RenameRecord) -> None:
        self.pending.remove(record)
        self.cancelled.append(record)

    def of_new_name(self, name: str) -> list[RenameRecord]:
        """The records, pending or ended with this decision, renaming into `name`."""
        return [r for r in [*self.pending, *self.finished] if key(r.new) == key(name)]

    def steps(self, old_target: Table | None) -> list[RenameStep]:
        """The procedure (docs/design.md "Renaming columns"): which renames start (first shard), finish
        (last shard) or
        are cancelled with this change of the downstream table; the ended ones are let go."""
        steps = []
        for record in [*self.pending, *self.finished]:
            finished = record in self.finished
            if not record.started and old_target is not None and old_target.column(record.old) is not None:
                steps.append(RenameStep(record.old, record.new, "whole" if finished else "start"))
            elif finished and record.started:
                steps.append(RenameStep(record.old, record.new, "finish"))
            record.started = True
        steps += [RenameStep(r.old, r.new, "cancel") for r in self.cancelled if r.started]
        self.finished, self.cancelled = [], []
        return steps

    def keys(self, steps: Iterable[RenameStep]) -> set[str]:
        """The columns renames copy values into or out of: the steps emitted now and the
        renames pending (shards clear their names)."""
        records = [*self.pending, *self.finished, *self.cancelled]
        return {key(n) for r in [*steps, *records] for n in (r.old, r.new)}

    def cleared(
        self, accepted: Mapping[ShardId, Table | None], downstream: Table | None
    ) -> dict[ShardId, list[str]]:
        """The columns each shard's writes set NULL while renames are pending: of the old
        and the new name, the one the shard lacks while it has the other. The procedure (docs/design.md
        "Renaming columns") copies
        the old column into the new one when the last shard renames, WHERE old IS NOT NULL
        (and a cancelled rename the new into the old WHERE old IS NULL): a shard with the
        new name only (it renamed, or joined with it) clears the old one, so the copy
        cannot put back a value its later writes replaced, nor its filler; a shard with the
        old name only clears the new one where it can hold NULL, so neither copy takes the
        new name's default for a value. A shard with neither writes neither, and its rows
        get the fillers of a column it lacks (clearing both would leave NULL in a column
        made NOT NULL again, F51). `accepted`: each shard's schema downstream."""
        out: dict[ShardId, list[str]] = {}
        for record in self.pending:
            new = downstream.column(record.new) if downstream is not None else None
            clears_new = new is not None and new.nullable
            for shard, table in accepted.items():
                if table is None:
                    continue
                has_old = table.column(record.old) is not None
                has_new = table.column(record.new) is not None
                if has_new and not has_old:
                    out.setdefault(shard, []).append(record.old)
                if clears_new and has_old and not has_new:
                    out.setdefault(shard, []).append(record.new)
        return out

    def to_data(self) -> dict[str, Any]:
        held = [asdict(s) for s in self.held]
        return {"renames": [r.to_data() for r in self.pending], "pending_steps": held}

    def restore(self, data: Mapping[str, Any]) -> None:
        self.pending = [RenameRecord.from_data(r) for r in data.get("renames", [])]
        self.held = [RenameStep(**s) for s in data.get("pending_steps", [])]


def moving_rows(accepted: Table | None, renames: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The renames that move values already downstream: of a column the shard's rows
    downstream have (its accepted schema), or the new name of such a rename, composed into
    one from the first name to the last. A shard paused since it joined has no rows
    downstream: its renames are not the group's."""
    return split_renames(accepted, renames)[0]


def split_renames(
    accepted: Table | None, renames: list[tuple[str, str]]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """`moving_rows`, and the rest: renames of columns the shard's rows downstream lack
    (one it added while paused, every column of a shard paused since it joined). They
    move nothing there, but the name they take away is gone from the shard's table as
    the group knew it (F171)."""
    names = set(accepted.column_map) if accepted is not None else set()
    moving: list[tuple[str, str]] = []
    unmoved: list[tuple[str, str]] = []
    for old, new in renames:
        if key(old) not in names:
            unmoved.append((old, new))
            continue
        names.discard(key(old))
        names.add(key(new))
        # renames taken together compose: a to b then b to c is a to c (F58)
        earlier = next((i for i, (_, n) in enumerate(moving) if key(n) == key(old)), None)
        if earlier is None:
            moving.append((old, new))
        elif key(moving[earlier][0]) == key(new):
            del moving[earlier]  # back to its name: nothing moves
        else:
            moving[earlier] = (moving[earlier][0], new)
    return moving, unmoved
