"""Running a batched delete of one shard's rows (`replicator.schema.shard_rows`): the
statement again, each batch its own transaction, until it deletes fewer rows than its
LIMIT. A crash between batches leaves the journal entry unfinished and recovery runs the
statement again, which deletes what is left: deleting a shard's rows twice is once."""

from __future__ import annotations

import re
from collections.abc import Callable

_BATCHED = re.compile(r"^\s*DELETE\s.*\sLIMIT\s+(\d+)\s*$", re.IGNORECASE | re.DOTALL)


def batch_size(statement: str) -> int | None:
    """The LIMIT of a batched DELETE, None for any other statement."""
    match = _BATCHED.match(statement)
    return int(match.group(1)) if match else None


def run_batches(cur, statement: str, limit: int, last: Callable[[], None]) -> int:
    """Run `statement` until a batch deletes fewer than `limit` rows; `last` runs in the
    final batch's transaction (the journal's progress). Returns the rows deleted."""
    deleted = 0
    while True:
        cur.execute("START TRANSACTION")
        rows = cur.execute(statement)
        deleted += rows
        if rows < limit:
            last()
            cur.execute("COMMIT")
            return deleted
        cur.execute("COMMIT")
