"""The DDLs a task's shards are held at: DM's "failed DDL" of `binlog skip|replace|inject`
and the shards of its `shard-ddl-lock`, as our optimistic merge has them.

A shard's DDL is held in one of two places. Its shard group's coordinator blocks it
(`BlockKind`): its schema has no join with the others' (conflict), it cannot be followed
(unsupported), or DDL propagation is off (waiting). Or the coordinator took it, and the
downstream refused the statements it made (a journal entry, `refused`); the entries made
after that one in the group wait behind it (`behind`). Each names its shard, its binlog
position, the DDL and why; `choose` finds the one an operator's flags (`--source`,
`--table`, `--target`, `--pos`) name, all of them optional where one DDL fits."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from replicator.api.admin import AdminError
from replicator.api.daemon_api import Daemon
from replicator.shard_id import ShardId


class Held(StrEnum):
    CONFLICT = "conflict"  # no join with the other shards' schemas
    UNSUPPORTED = "unsupported"  # a DDL the coordinator cannot follow
    WAITING = "waiting"  # DDL propagation is off for its group
    TRUNCATE = "truncate"  # a TRUNCATE whose shard's rows downstream cannot be told apart
    REFUSED = "refused"  # the downstream refused the statements it made (journal entry)
    BEHIND = "behind"  # its statements wait behind an entry the downstream refused


@dataclass(frozen=True)
class BlockedDDL:
    target: str
    shard: ShardId | None  # None: a journal entry of no shard's DDL (enable-ddl-propagation's)
    kind: Held
    position: str | None  # the DDL's binlog position (None: not known)
    ddl: str
    reason: str
    seq: int | None = None  # the journal entry (refused, behind)
    statements: tuple[str, ...] = ()  # the entry's downstream statements
    first: int | None = None  # behind: the refused entry it waits for

    def flags(self, with_position: bool = False) -> str:
        """The `shardctl` flags that name it."""
        if self.shard is not None:
            named = f"--source {self.shard.source} --table {self.shard.table_key}"
        else:
            named = f"--target {self.target}"
        return named + (f" --pos {self.position}" if with_position and self.position else "")

    def held_by(self) -> str:
        if self.kind is Held.REFUSED:
            return f"refused downstream (journal entry {self.seq})"
        if self.kind is Held.BEHIND:
            return f"behind journal entry {self.first}"
        if self.kind is Held.WAITING:
            return "waiting (DDL propagation off)"
        return str(self.kind)

    def describe(self) -> str:
        ddl = " ".join(self.ddl.split())
        return f"{self.held_by()} at {self.position or '?'}: {ddl[:80]}{'...' if len(ddl) > 80 else ''}"

    def way_out(self) -> str:
        """The commands that let it go on. A journal entry is named with its `--pos`: its
        shard may be held by its group too (a DDL after it), which the shard's flags alone
        name (`choose`; live stories 240011)."""
        flags = self.flags()
        if self.kind in (Held.CONFLICT, Held.UNSUPPORTED):
            return (
                f"`shardctl binlog skip {flags}` drops it (the shard keeps its schema from before it), "
                f"`shardctl binlog replace {flags} --sql 'ALTER TABLE ...'` takes another DDL for it, "
                f"`shardctl set-schema {flags} --file F` says what the shard's table is"
            )
        flags = self.flags(with_position=True)
        if self.kind is Held.REFUSED:
            return (
                f"fix the downstream and `shardctl journal retry --target {self.target} --seq {self.seq}`, "
                f"or `shardctl binlog inject {flags} --sql '...'` runs your SQL downstream first, "
                f"`shardctl binlog replace {flags} --sql '...'` runs it instead, "
                f"`shardctl binlog skip {flags}` leaves the statements out"
            )
        if self.kind is Held.BEHIND:
            return f"settle journal entry {self.first} of {self.target} first (`shardctl binlog list`)"
        return f"`shardctl enable-ddl-propagation --target {self.target}` runs it"

    def to_data(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "shard": str(self.shard) if self.shard is not None else None,
            "kind": str(self.kind),
            "position": self.position,
            "ddl": self.ddl,
            "reason": self.reason,
            "seq": self.seq,
            "statements": list(self.statements),
            "first": self.first,
            "flags": self.flags(),
            "way_out": self.way_out(),
        }


def blocked_ddls(daemon: Daemon) -> list[BlockedDDL]:
    """Every DDL held now, group by group: the coordinator's blocks, then the journal
    entries the downstream refused and those behind them."""
    out: list[BlockedDDL] = []
    for target, view in sorted(daemon.views().items()):
        for shard, block in view.blocked.items():
            out.append(BlockedDDL(target, shard, Held(block.kind), block.position, block.ddl, block.reason))
        held = dict(daemon.executors[target].held)  # (a copy: its executor's thread changes it)
        if not held:
            continue
        entries = {e["seq"]: e for e in daemon.meta.journal.pending(target)}
        first = min(held)
        for seq, error in sorted(held.items()):
            entry = entries.get(seq)
            if entry is None:
                continue
            statements = tuple(entry["statements"])
            kind, reason = (
                (Held.REFUSED, error) if error else (Held.BEHIND, f"waits for journal entry {first}")
            )
            ddl = entry["ddl"] or "; ".join(statements)
            out.append(
                BlockedDDL(
                    target, entry["shard"], kind, entry["position"], ddl, reason, seq, statements, first
                )
            )
    return out


@dataclass(frozen=True)
class Wanted:
    """What an operator's flags name (each optional): `table` is `schema.table`."""

    shard: ShardId | None = None
    source: str | None = None
    table: str | None = None
    target: str | None = None
    position: str | None = None

    def named(self, ddl: BlockedDDL) -> bool:
        shard = ddl.shard
        if self.target is not None and ddl.target != self.target:
            return False
        if self.shard is not None and shard != self.shard:
            return False
        if self.source is not None and (shard is None or shard.source != self.source):
            return False
        return self.table is None or (shard is not None and shard.table_key == self.table)

    def flags(self) -> str:
        given = (("--source", self.source), ("--table", self.table), ("--target", self.target))
        return " ".join(f"{flag} {value}" for flag, value in given if value is not None)


def choose(found: Iterable[BlockedDDL], wanted: Wanted, verb: str, can: Collection[Held]) -> BlockedDDL:
    """The one held DDL `verb` can act on among those `wanted` names; else an AdminError
    (409) that says why and lists what there is, with the flags naming each."""
    found = list(found)
    named = [d for d in found if wanted.named(d)]
    where = f" for {wanted.flags()}" if wanted.flags() else ""
    if not named:
        if wanted.shard is not None:
            raise AdminError(409, f"shard {wanted.shard} is not blocked: there is no DDL to {verb}")
        if found:
            raise AdminError(409, f"no DDL is blocked{where}; blocked: {_listing(found)}")
        raise AdminError(409, f"no DDL is blocked in the task: there is nothing to {verb}")
    at = [d for d in named if wanted.position is None or d.position == wanted.position]
    if not at:
        positions = ", ".join(sorted({d.position or "?" for d in named}))
        if wanted.shard is not None:
            raise AdminError(409, f"shard {wanted.shard} is blocked at {positions}, not at {wanted.position}")
        raise AdminError(409, f"no DDL{where} is blocked at {wanted.position}; blocked: {_listing(named)}")
    able = [d for d in at if d.kind in can]
    if wanted.position is None and len(able) > 1:
        # a shard held by its group and by a journal entry the downstream refused (a DDL of it
        # decided before; live stories 240011): its flags alone name the group's block, as its
        # pause prints them (the block's position moves with each DDL the shard runs, so the
        # pause cannot print one); the entry is named with `--pos`, as `binlog list` prints it
        blocks = [d for d in able if d.kind not in (Held.REFUSED, Held.BEHIND)]
        if len(blocks) == 1 and blocks[0].shard is not None and all(d.shard == blocks[0].shard for d in able):
            able = blocks
    if len(able) == 1:
        return able[0]
    if not able:
        ddl = at[0]
        raise AdminError(409, f"{verb} does not apply to {_who(ddl)}: {cannot(ddl, verb)}; {ddl.way_out()}")
    raise AdminError(
        409,
        f"{len(able)} blocked DDLs{where} can be taken by {verb}; name one with its flags: {_listing(able)}",
    )


def cannot(ddl: BlockedDDL, verb: str) -> str:
    """Why `verb` does not apply to a held DDL of this kind."""
    if ddl.kind in (Held.CONFLICT, Held.UNSUPPORTED):
        return (
            f"its DDL is held by the shard group ({ddl.kind}: {ddl.reason}), not refused downstream: "
            "nothing of it runs downstream, so there is nothing to run SQL before"
        )
    if ddl.kind is Held.REFUSED:
        return (
            f"no shard group holds its DDL (no lock): the downstream refused the statements it made "
            f"({ddl.reason})"
        )
    if ddl.kind is Held.BEHIND:
        return f"its statements wait behind journal entry {ddl.first}, which the downstream refused"
    return "it waits for DDL propagation, which is off"


def _who(ddl: BlockedDDL) -> str:
    return f"the DDL of {ddl.shard}" if ddl.shard is not None else f"journal entry {ddl.seq} of {ddl.target}"


def _listing(ddls: list[BlockedDDL]) -> str:
    """Each with the flags naming it (`--pos` too where two have the same others)."""
    plain = [d.flags() for d in ddls]
    shown = []
    for d in ddls:
        same = plain.count(d.flags()) > 1
        shown.append(f"`{d.flags(with_position=same)}` ({d.describe()})")
    return "; ".join(shown)
