"""How the task's last run ended, as the meta schema holds it (`task_state`): whether it
stopped cleanly (if not, the next start runs in safe mode for a while), and how its changes
were spread over the applier's partitions (its checkpoints mean that)."""

from __future__ import annotations

import time

from replicator.state.db import MetaDb

TASK_STATE_SQL = [
    """CREATE TABLE IF NOT EXISTS {m}.task_state (
        task VARCHAR(64) NOT NULL, clean_stop TINYINT NOT NULL, partitions INT NOT NULL,
        started_at DOUBLE NULL, stopped_at DOUBLE NULL, spread VARCHAR(16) NOT NULL DEFAULT 'key',
        PRIMARY KEY (task)) ENGINE=InnoDB""",
]
# columns added since the table was first made: (table, column, definition)
TASK_STATE_ADDED = (("task_state", "spread", "VARCHAR(16) NOT NULL DEFAULT 'key'"),)


class TaskStateStore:
    """The task's `task_state` row."""

    def __init__(self, db: MetaDb):
        self.db = db

    def load(self) -> tuple[bool, int, str] | None:
        """Whether the last run stopped cleanly, and how its changes were spread over
        partitions: how many, and "key" or "source" (the checkpoints mean that)."""
        db = self.db
        rows = db.rows(f"SELECT clean_stop, partitions, spread FROM {db.q}.task_state WHERE task={db.t}")
        return (bool(rows[0][0]), int(rows[0][1]), str(rows[0][2])) if rows else None

    def mark_started(self, partitions: int, spread: str = "key") -> None:
        db = self.db
        db.execute(
            [
                f"INSERT INTO {db.q}.task_state (task, clean_stop, partitions, spread, started_at) "
                f"VALUES ({db.t}, 0, {partitions}, '{spread}', {time.time()}) ON DUPLICATE KEY UPDATE "
                f"clean_stop=0, partitions={partitions}, spread='{spread}', started_at={time.time()}"
            ]
        )

    def mark_stopped(self) -> None:
        db = self.db
        db.execute([f"UPDATE {db.q}.task_state SET clean_stop=1, stopped_at={time.time()} WHERE task={db.t}"])
