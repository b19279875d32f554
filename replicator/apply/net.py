"""A batch's net effect on each row: what its changes leave, as three statements a table.

An OLTP load (sysbench's write transactions: two updates, a delete and an insert, each of
one row) written change by change is one statement per row, whose parsing costs the server
more than the row itself. Within one transaction the order between different rows does not
matter where the table has one unique key only (no change can collide with another row's on
a second key): what counts is each row's last state. So a batch's changes fold per key into
one of: gone (a DELETE), made in the batch (an INSERT), deleted and made again (replaced: a
DELETE and an INSERT, so columns the change does not name take their defaults), or updated
(an upsert of its last image, as consecutive updates already are); and each kind goes in one
statement.
An INSERT of a row that is there already is refused as the change alone would be, and the
applier then takes the batch change by change (`Partition._isolate`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from replicator.source.messages import Change


@dataclass
class NetRow:
    """One key's changes in a batch, folded: its last image (None: gone), whether it was
    deleted before that, and whether it was made in the batch (first seen inserted)."""

    image: Change | None
    deleted: bool = False
    made: bool = False


@dataclass(frozen=True)
class Net:
    """A table's batch folded: keys to delete, rows to insert, rows to upsert, rows replaced
    (each in order)."""

    deletes: tuple[Change, ...]  # changes whose before image names the key
    inserts: tuple[Change, ...]
    upserts: tuple[Change, ...]
    # rows deleted, then made again: the delete (its before image names the key) and the
    # insert, whose image is the row's last
    replaced: tuple[tuple[Change, Change], ...] = ()


def fold(
    changes: list[Change],
    key_of: Callable[[Change], tuple[str, ...]],
    after_key_of: Callable[[Change], tuple[str, ...]],
) -> Net | None:
    """The net effect of one table's changes (inserts, updates keeping their key and
    deletes), or None where a key's changes name different columns (a shard between two
    versions: the run order decides then). `key_of(change)` is the key of its row before,
    `after_key_of(change)` after."""
    rows: dict[tuple[str, ...], NetRow] = {}
    gone: dict[tuple[str, ...], Change] = {}
    for change in changes:
        if change.op == "I":
            k = after_key_of(change)
            row = rows.get(k)
            if row is None:
                rows[k] = NetRow(change, made=True)
            elif row.image is None:  # deleted in the batch, made again
                row.image, row.made = change, True
            else:  # an insert over a row there: refused alone, and so here
                return None
        elif change.op == "D":
            k = key_of(change)
            row = rows.get(k)
            if row is None:
                rows[k] = NetRow(None, deleted=True)
                gone[k] = change
            else:
                if not row.made or row.deleted:
                    row.deleted = True
                    gone.setdefault(k, change)
                row.image, row.made = None, False
        else:
            k = key_of(change)
            row = rows.get(k)
            if row is None:
                rows[k] = NetRow(change)
            elif row.image is None or row.image.columns != change.columns:
                return None  # an update of a row deleted in the batch, or of another version
            else:
                row.image = change
    deletes: list[Change] = []
    inserts: list[Change] = []
    upserts: list[Change] = []
    replaced: list[tuple[Change, Change]] = []
    for k, row in rows.items():
        if row.image is None:
            if row.deleted:
                deletes.append(gone[k])
        elif not row.made:
            upserts.append(row.image)
        elif row.deleted:
            replaced.append((gone[k], row.image))
        else:
            inserts.append(row.image)
    return Net(tuple(deletes), tuple(inserts), tuple(upserts), tuple(replaced))
