"""How the task's last run ended, as the meta schema holds it (`task_state`): whether it
stopped cleanly (if not, the next start runs in safe mode for a while), and how its changes
were spread over the applier's partitions (its checkpoints mean that)."""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from lattice import quote_string
from replicator.state.db import MetaDb

TASK_STATE_SQL = [
    """CREATE TABLE IF NOT EXISTS {m}.task_state (
        task VARCHAR(64) NOT NULL, clean_stop TINYINT NOT NULL, partitions INT NOT NULL,
        started_at DOUBLE NULL, stopped_at DOUBLE NULL, spread VARCHAR(16) NOT NULL DEFAULT 'key',
        source_order TEXT NULL, PRIMARY KEY (task)) ENGINE=InnoDB""",
]
# columns added since the table was first made: (table, column, definition)
TASK_STATE_ADDED = (
    ("task_state", "spread", "VARCHAR(16) NOT NULL DEFAULT 'key'"),
    ("task_state", "source_order", "TEXT NULL"),
)


@dataclass(frozen=True)
class Spread:
    """How changes go to the applier's partitions: by a hash of their key, or by source
    (row events applied as they are keep each source's binlog order), source i of
    `sources` to partition i modulo their count, so that N sources over N partitions take
    one each (a hash of the ids put two of four sources s1..s4 in one partition: it
    carried half the rows, and the run took as long as it did). A source not listed (or
    every source, in a spread saved before the list was: `sources` empty) goes by a hash
    of its id."""

    by_source: bool = False
    sources: tuple[str, ...] = ()

    @classmethod
    def of(cls, by_source: bool, source_ids: Iterable[str]) -> Spread:
        return cls(True, tuple(sorted(source_ids))) if by_source else cls()

    @property
    def label(self) -> str:
        return "source" if self.by_source else "key"

    def places(self, partitions: int) -> dict[str, int]:
        return {s: i % partitions for i, s in enumerate(self.sources)}

    @staticmethod
    def hashed(source: str, partitions: int) -> int:
        return zlib.crc32(source.encode()) % partitions


BY_KEY = Spread()


@dataclass(frozen=True)
class LastRun:
    """The task's last run as `task_state` holds it."""

    clean: bool  # it stopped cleanly
    partitions: int
    spread: Spread  # its checkpoints mean this spread


class TaskStateStore:
    """The task's `task_state` row."""

    def __init__(self, db: MetaDb):
        self.db = db

    def load(self) -> LastRun | None:
        """How the last run ended, and how its changes were spread over partitions."""
        db = self.db
        rows = db.rows(
            f"SELECT clean_stop, partitions, spread, source_order FROM {db.q}.task_state WHERE task={db.t}"
        )
        if not rows:
            return None
        clean, partitions, label, order = rows[0]
        sources = tuple(json.loads(order)) if order else ()
        return LastRun(bool(clean), int(partitions), Spread(str(label) == "source", sources))

    def mark_started(self, partitions: int, spread: Spread = BY_KEY) -> None:
        db = self.db
        order = quote_string(json.dumps(list(spread.sources))) if spread.sources else "NULL"
        now = time.time()
        db.execute(
            [
                f"INSERT INTO {db.q}.task_state "
                "(task, clean_stop, partitions, spread, source_order, started_at) "
                f"VALUES ({db.t}, 0, {partitions}, '{spread.label}', {order}, {now}) ON DUPLICATE KEY UPDATE "
                f"clean_stop=0, partitions={partitions}, spread='{spread.label}', source_order={order}, "
                f"started_at={now}"
            ]
        )

    def mark_stopped(self) -> None:
        db = self.db
        db.execute([f"UPDATE {db.q}.task_state SET clean_stop=1, stopped_at={time.time()} WHERE task={db.t}"])
