"""The daemon's own tables in the downstream (`shardmerge_meta` by default): everything it
must know after a crash, written in the same transactions as the data it describes. `Meta`
is the meta schema of one task: its connection (replicator/state/db.py) and a store per
concern, each over its own tables:

- `checkpoints`, `watermarks` (state/progress.py): how far each source's changes are applied;
- `history`, `ddl_done` (state/history.py): the tables' CREATE TABLE after each DDL, and each
  shard's last DDL handled;
- `groups` (state/coordinator_store.py): each shard group's coordinator state;
- `journal` (state/journal.py): downstream DDL written down before it runs (docs/design.md "The DDL journal");
- `pauses` (state/pauses.py): paused shards, and the replays of their paused time;
- `dead_letters`, `validation_errors` (state/dead_letters.py): rows refused downstream, and
  rows continuous validation found differing;
- `task_state` (state/task_state.py): how the last run ended;
- `backfill` (state/backfill.py): the Spark backfill, finished, running or interrupted;
- `table_versions` (state/table_versions.py): each downstream table's version, the fence of
  the batches of a task's daemons on many machines; `members` (state/members.py): those
  daemons, and which of them reads each source; `schema_queue` (state/schema_queue.py): the
  schema changes they send the coordinator, and its answers;
- resyncs (state/resync_store.py) and the operators' operations on held DDLs
  (state/operation_log.py), read and written by their own modules.

The apply stage's own tables are made here too: the lease (state/lease.py) and paused
shards' parks (apply/park.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pymysql

from replicator.state.backfill import BACKFILL_SQL, BackfillStore
from replicator.state.coordinator_store import COORDINATOR_SQL, GroupStates
from replicator.state.db import MetaDb
from replicator.state.dead_letters import (
    DEAD_LETTER_ADDED,
    DEAD_LETTER_SQL,
    DeadLetterStore,
    ValidationErrorStore,
)
from replicator.state.history import HISTORY_ADDED, HISTORY_SQL, DdlDoneStore, HistoryStore
from replicator.state.journal import JOURNAL_ADDED, JOURNAL_SQL, JournalStore
from replicator.state.lease import LEASE_SQL, LeaseView
from replicator.state.members import MEMBER_ADDED, MEMBER_SQL, Members
from replicator.state.operation_log import OPERATION_SQL
from replicator.state.park import PARK_SQL, ParkStore
from replicator.state.pauses import PAUSE_ADDED, PAUSE_SQL, PauseStore
from replicator.state.progress import PROGRESS_ADDED, PROGRESS_SQL, CheckpointStore, WatermarkStore
from replicator.state.resync_store import RESYNC_SQL
from replicator.state.saved_positions import SavedPositionStore
from replicator.state.schema_queue import SCHEMA_QUEUE_SQL, SchemaQueue
from replicator.state.table_versions import TABLE_VERSION_ADDED, TABLE_VERSION_SQL, TableVersions
from replicator.state.task_state import TASK_STATE_ADDED, TASK_STATE_SQL, TaskStateStore

SCHEMA_SQL = [
    *PROGRESS_SQL,
    *HISTORY_SQL,
    *JOURNAL_SQL,
    *DEAD_LETTER_SQL,
    *COORDINATOR_SQL,
    *TASK_STATE_SQL,
    *BACKFILL_SQL,
    *LEASE_SQL,
    *PAUSE_SQL,
    *TABLE_VERSION_SQL,
    *MEMBER_SQL,
    *SCHEMA_QUEUE_SQL,
    PARK_SQL,
    RESYNC_SQL,
    OPERATION_SQL,
]


# columns added since a table was first made: (table, column, definition)
ADDED_COLUMNS = (
    *TASK_STATE_ADDED,
    # the GTIDs naming each saved position on any server (issue 45: failover)
    *PAUSE_ADDED,
    *PROGRESS_ADDED,
    *HISTORY_ADDED,
    *DEAD_LETTER_ADDED,
    *JOURNAL_ADDED,
    *MEMBER_ADDED,
    *TABLE_VERSION_ADDED,
    # when the server a registered connection is on started (issue 70: a takeover kills the
    # old holder's connections, not the ids a restarted server gave other sessions)
    ("lease_connection", "booted", "BIGINT NULL"),
)


class Meta(MetaDb):
    """The meta schema of one task: its stores (their `sql_*` methods return statements to
    run inside a caller's transaction, `execute`)."""

    def __init__(self, connect: Callable[[], pymysql.connections.Connection], schema: str, task: str):
        super().__init__(connect, schema, task)
        self.pauses = PauseStore(self)
        self.checkpoints = CheckpointStore(self)
        self.watermarks = WatermarkStore(self)
        self.history = HistoryStore(self)
        self.ddl_done = DdlDoneStore(self)
        self.journal = JournalStore(self)
        self.dead_letters = DeadLetterStore(self)
        self.validation_errors = ValidationErrorStore(self)
        self.groups = GroupStates(self)
        self.task_state = TaskStateStore(self)
        self.backfill = BackfillStore(self)
        self.park = ParkStore(self)
        self.lease = LeaseView(self)
        self.saved_positions = SavedPositionStore(self)
        self.table_versions = TableVersions(self)
        self.members = Members(self)
        self.schema_queue = SchemaQueue(self)

    def ensure(self) -> None:
        """The meta schema's tables, those missing made (every one on a first start), and
        the columns later versions added (one query when all is there: a restart)."""
        self.make_tables(SCHEMA_SQL, ADDED_COLUMNS)
