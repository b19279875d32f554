"""The one rule for "everything below this point is applied": a source's watermark.

A change or DDL of a source is *settled* when nothing more needs doing for it:

- a row change, when it is committed downstream together with its (shard, partition)
  checkpoint, or when it needs no write (its table is not routed, or it is at or
  below the checkpoints of every partition it goes to: applied before);
- a shard's DDL, when the coordinator's decision, the schema history and `ddl_done`
  for it are committed together (its downstream statements are in the journal of
  that same transaction, which finishes them at the next start if a crash stops them).

The watermark of a source is the smallest id it has read and not settled: the least
of the worker's read position and of what every *holder* still holds of that source.
Everything strictly below it is settled, so it is where reading restarts after any
stop, and what is written to the meta schema. The holders, each reporting the
smallest id it holds (`Holder`):

- the applier: changes in its buffers and in batches sent to a partition, until the
  batch's transaction commits (`Applier.oldest`);
- the DDL gate: a shard's DDL from the moment the daemon hands it to its group's
  executor until the daemon has taken the result, and the shard's changes (and later
  DDLs) waiting behind it (`DDLGate.oldest`);
- pauses: a paused shard holds its first unapplied change (`Pauses.oldest`) until it
  resumes; its rows are read again from there.

After a restart the same rule reads back: a change at or below all its partitions'
checkpoints is skipped (`Applier.already_applied`), and of a key move that is a delete in
one partition and an insert in another only the half above its partition's checkpoint is
applied again (`Applier.submit`); a DDL at or below the shard's `ddl_done` is not
handled again (the tracker follows it), and the worker starts at the watermark with the
schemas the history gives for that position.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from replicator.state.positions import ChangeId

Holder = Callable[[str], ChangeId | None]  # source -> the smallest id it holds of it


def watermark(source: str, read: ChangeId, holders: Iterable[Holder]) -> ChangeId:
    """The smallest id of `source` not settled: `read` is where its worker reads
    (the start of the next transaction), the holders say what they still hold."""
    low = read
    for holder in holders:
        held = holder(source)
        if held is not None and held < low:
            low = held
    return low
