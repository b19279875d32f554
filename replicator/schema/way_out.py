"""The way out of every pause (issue 46): each reason a shard pauses for ends with
`; way out: ` and the exact commands (or the change upstream or in the task) that let it go
on, written here only, so every pause an operator reads says what to do, in the same words
wherever it shows (`shardctl query-status`, `show-ddl-state`, `binlog list`, the log)."""

from __future__ import annotations

from lattice import LOSES_KEY
from replicator.schema.group import BlockKind
from replicator.shard_id import ShardId

WAY_OUT = "; way out: "


# an unfollowed DDL's reason, once the shard ran more DDLs while it held it (`Block.stacked`)
LATER = "; the shard ran "


def with_later(reason: str, later: list[str]) -> str:
    """The reason of a block of a DDL we could not follow (without its way out), saying the
    shard's DDLs read since (`later`, in order) wait for its way out."""
    base = reason.split(WAY_OUT, 1)[0].split(LATER, 1)[0]
    n, last = len(later), " ".join(later[-1].split())
    last = last if len(last) <= 100 else last[:100] + "..."
    return (
        f"{base}{LATER}{n} more DDL{'' if n == 1 else 's'} after it ({'the last: ' if n > 1 else ''}{last}): "
        f"{'it waits' if n == 1 else 'they wait'} for this one's way out, then {'is' if n == 1 else 'are'} "
        f"decided on the table it gives"
    )


def flags(shard: ShardId) -> str:
    """The `shardctl` flags naming one shard."""
    return f"--source {shard.source} --table {shard.table_key}"


def with_way_out(reason: str, way: str) -> str:
    """`reason` ending with its way out (a reason that has one keeps it)."""
    return reason if WAY_OUT in reason else f"{reason}{WAY_OUT}{way}"


def of_block(kind: BlockKind, shard: ShardId, reason: str, target: str = "TARGET") -> str:
    """A shard group's block of a shard (`BlockKind`), with its way out (`target`: the
    group's downstream table, which a command may name)."""
    if kind is BlockKind.WAITING:
        return with_way_out(reason, _waiting(target))
    return with_way_out(reason, _BLOCKS[kind](shard, reason))


def _conflict(shard: ShardId, reason: str) -> str:
    skip = f"`shardctl binlog skip {flags(shard)}`"
    if LOSES_KEY in reason:
        return (
            f"give the other shards the same key (or make its columns NOT NULL in every shard), "
            f"and {shard} resumes by itself; or restore the key on {shard} with an ALTER upstream; "
            f"or {skip} drops the DDL (the merged table keeps its key)"
        )
    return (
        f"change {shard}'s table upstream, or the other shards', so they join (each DDL is "
        f"tried again and {shard} resumes by itself); or {skip} drops the DDL (the shard keeps its "
        f"schema from before it); or `shardctl set-schema {flags(shard)} --file F` says what its "
        f"table is"
    )


def _unsupported(shard: ShardId, reason: str) -> str:
    # (with DDLs after it, its table from here is the one it had here, which they are taken on)
    table = (
        "was here (F: its SHOW CREATE TABLE as it was right here, not now: the DDLs it ran since "
        "are taken on it"
        if LATER in reason
        else "is now (F: its SHOW CREATE TABLE"
    )
    return (
        f"`shardctl set-schema {flags(shard)} --file F` says what the shard's table {table}; the rows "
        f"it wrote since the pause are read again with it, none lost); or "
        f"`shardctl binlog skip {flags(shard)}` drops the DDL (its rows since the pause are read again "
        f"with the table it keeps, and a row that does not fit it pauses it again); "
        f"or `shardctl binlog replace {flags(shard)} --sql 'ALTER TABLE ...'` takes another DDL for it"
    )


def _truncate(shard: ShardId, reason: str) -> str:
    return (
        f"delete {shard}'s rows from the merged table by hand, then `shardctl binlog skip "
        f"{flags(shard)}` (the shard goes on after its TRUNCATE); or configure extract columns "
        f"for source, schema and table on the route (then `shardmerge backfill --truncate`), "
        f"which lets a TRUNCATE delete one shard's rows"
    )


def _waiting(target: str) -> str:
    # (it printed `--target TARGET`, a placeholder: run as printed, it named no group)
    return f"`shardctl enable-ddl-propagation --target {target}` runs the DDL and the shard resumes"


_BLOCKS = {
    BlockKind.CONFLICT: _conflict,
    BlockKind.UNSUPPORTED: _unsupported,
    BlockKind.TRUNCATE: _truncate,
}


def refused_row(shard: ShardId) -> str:
    """A row the downstream refused."""
    return (
        f"fix the downstream table (or the row upstream), then `shardctl handle-error {flags(shard)} retry` "
        f"reads the shard's rows again from here (`skip`: leave the row out, into the dead-letter "
        f"table; `replace --sql ...`: write it your way)"
    )


def refused_entry(target: str, seq: int) -> str:
    """A journal entry of downstream DDL the downstream refused."""
    return (
        f"fix the downstream and run `shardctl journal retry --target {target} --seq {seq}`, or "
        f"`shardctl journal skip --target {target} --seq {seq}` if done by hand"
    )


def outside(shard: ShardId) -> str:
    """Rows of a shard its group does not have."""
    return (
        f"create the table again under its name upstream (its rows then go on), or "
        f"`shardctl set-schema {flags(shard)} --file F` puts the shard back"
    )


def unreplayed(shard: ShardId) -> str:
    """Rows a shard wrote while paused that could not be replayed."""
    return (
        f"`shardctl resume-shard {flags(shard)}` reads them again; `shardctl binlog skip {flags(shard)}` "
        f"discards them (then `shardctl resync {flags(shard)}` copies its rows again)"
    )


def unreadable_rows(shard: ShardId) -> str:
    """Rows of a running shard its worker could not read, where no decision can be asked."""
    return (
        f"`shardctl resume-shard {flags(shard)}` reads them again from here; if they still cannot "
        f"be read, `shardctl set-schema {flags(shard)} --file F` (F: its SHOW CREATE TABLE) says what "
        f"its table is"
    )


def resync_failed(shard: ShardId) -> str:
    """A resync whose command ended before its copy was done: the shard stays paused for it
    (its rows downstream may be part copied), and the same command asks again."""
    return (
        f"`shardctl resync {flags(shard)}` (or `shardmerge resync --config F --shard {shard}`) copies "
        f"its rows again; it stays paused till then, its rows downstream maybe part copied"
    )


def operator_paused(shard: ShardId) -> str:
    """A shard the operator paused (`pause-task --table`)."""
    return (
        f"`shardctl resume-task {flags(shard)}` (or `shardctl resume-shard {flags(shard)}`) resumes it, "
        f"its rows since read again"
    )
