"""A row the downstream refuses (`RowRefusals`): into the dead-letter table with its
checkpoint, its shard going on (on_row_error: skip), or its shard paused from that row for
the operator (`on_error`: the daemon pauses it)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from replicator.apply.checkpoints import Checkpoints
from replicator.apply.drops import Drops
from replicator.apply.meta import Meta
from replicator.apply.refused import Refused
from replicator.apply.tally import Tally
from replicator.apply.target import TargetInfo
from replicator.shard_id import ShardId
from replicator.source.messages import Change
from replicator.state.positions import ChangeId

log = logging.getLogger("shardmerge.applier")


class RowRefusals:
    """Threads: the partitions' threads, each with the row its server refused on its own
    connection. It keeps nothing of its own: what it changes is `Drops`' (under their
    lock), `Checkpoints`' and `Tally`'s, and what it tells goes to `on_error`."""

    def __init__(
        self,
        meta: Meta,
        targets: Mapping[str, TargetInfo],
        checkpoints: Checkpoints,
        drops: Drops,
        tally: Tally,
        on_error: Callable[[Refused], None],
        skip_refused: bool,
        file_of: Callable[[ShardId, ChangeId], str],
    ):
        self.meta = meta
        self.targets = targets
        self.checkpoints = checkpoints
        self.drops = drops
        self.tally = tally
        self.on_error = on_error
        self.skip_refused = skip_refused
        # a change id's binlog file, for the dead-letter table (the daemon knows the names)
        self.file_of = file_of

    def refused(self, conn, change: Change, part: int, statement: str, error: Exception) -> None:
        """The server refused `change` alone (sent as `statement`)."""
        refused = Refused.of(change, self.targets[change.target].key, part, statement, error)
        if self.skip_refused:
            self._dead_letter(conn, refused)
            return
        self.drops.drop_from(change.shard, (change.id[0], change.id[1], 0), refused=True)
        self.on_error(refused)

    def _dead_letter(self, conn, refused: Refused) -> None:
        """on_row_error: skip. The refused row into the dead-letter table and its id into
        the checkpoint, in one transaction: skipped once, and never applied after."""
        file = self.file_of(refused.shard, refused.id)
        with conn.cursor() as cur:
            cur.execute("START TRANSACTION")
            if self.meta.fence is not None:
                self.meta.fence(cur)
            cur.execute(self.meta.dead_letters.sql_add(refused, file, "skipped"))
            cur.execute(self.meta.checkpoints.sql([(refused.shard, refused.part, refused.id)]))
            cur.execute("COMMIT")
        self.checkpoints.mark(refused.shard, refused.part, refused.id)
        self.tally.dead_letter(str(refused.shard), refused.target)
        log.warning(
            "%s; the row is in the dead-letter table (on_row_error: skip), its shard goes on",
            refused.message,
            extra={"shard": refused.shard, "source": refused.shard.source},
        )
