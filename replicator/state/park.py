"""What a paused shard's source sent of it while it was paused, kept in the meta schema
(issue 45, docs/operations/long-pauses.md): its row changes and DDLs in the order they were read,
so the source's watermark moves on past them and its upstream may purge its binlogs.
They are written in batches in the watermark's transaction (`ParkStore.sql_batch`), read
back in order when the shard resumes (`ParkStore.batches`), and dropped once applied. The
store keeps what it is given (each item's `id`, a ChangeId, names the batch's first and last
change); which messages they are is the daemon's (replicator/daemon/parking.py).

A batch is the messages pickled and compressed, with a format version: a daemon of
another version does not read another's batches (they are drained before an upgrade,
or the shard resumes by reading its binlog again where it is still there)."""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from lattice import quote_string
from replicator.shard_id import ShardId
from replicator.state.db import MetaDb
from replicator.state.positions import ChangeId

FORMAT = 1
PARK_SQL = """CREATE TABLE IF NOT EXISTS {m}.park (
    task VARCHAR(64) NOT NULL, shard VARCHAR(255) NOT NULL, seq BIGINT NOT NULL,
    first_seq BIGINT NOT NULL, first_pos BIGINT NOT NULL, first_idx BIGINT NOT NULL,
    last_seq BIGINT NOT NULL, last_pos BIGINT NOT NULL, last_idx BIGINT NOT NULL,
    format INT NOT NULL, rows_count INT NOT NULL, bytes INT NOT NULL, data LONGBLOB NOT NULL,
    PRIMARY KEY (task, shard, seq)) ENGINE=InnoDB"""

class ParkError(Exception):
    """Parked batches this daemon cannot read (written by another version)."""


@dataclass(frozen=True)
class ParkSize:
    rows: int = 0  # row changes (a row event counts its rows)
    bytes: int = 0  # as stored, compressed
    batches: int = 0

    def __add__(self, other: ParkSize) -> ParkSize:
        return ParkSize(self.rows + other.rows, self.bytes + other.bytes, self.batches + other.batches)


class ParkStore:
    """The park table of one task."""

    def __init__(self, db: MetaDb):
        self.db = db
        self.q, self.t = db.q, db.t

    def sql_batch(self, shard: ShardId, seq: int, items: Sequence[Any], rows: int) -> tuple[str, ParkSize]:
        """The INSERT of one batch of the shard's parked messages (`rows` row changes), in
        their order, and its size."""
        first, last = items[0].id, items[-1].id
        data = zlib.compress(pickle.dumps(list(items), protocol=pickle.HIGHEST_PROTOCOL), 1)
        size = ParkSize(rows, len(data), 1)
        sql = (
            f"INSERT INTO {self.q}.park (task, shard, seq, first_seq, first_pos, first_idx, last_seq, "
            f"last_pos, last_idx, format, rows_count, bytes, data) VALUES ({self.t},"
            f"{quote_string(str(shard))},{seq},{first[0]},{first[1]},{first[2]},{last[0]},{last[1]},"
            f"{last[2]},{FORMAT},{size.rows},{size.bytes},X'{data.hex()}')"
        )
        return sql, size

    def sql_drop(self, shard: ShardId) -> str:
        return f"DELETE FROM {self.q}.park WHERE task={self.t} AND shard={quote_string(str(shard))}"

    def load_sizes(self) -> dict[ShardId, tuple[ParkSize, int, ChangeId]]:
        """Per shard with parked batches: their size, the next batch's seq and the last
        id parked."""
        rows = self.db.rows(
            f"SELECT p.shard, SUM(p.rows_count), SUM(p.bytes), COUNT(*), MAX(p.seq), l.last_seq, l.last_pos, "
            f"l.last_idx FROM {self.q}.park p JOIN {self.q}.park l ON l.task = p.task AND l.shard = p.shard "
            f"AND l.seq = (SELECT MAX(seq) FROM {self.q}.park m WHERE m.task = p.task AND m.shard = p.shard) "
            f"WHERE p.task={self.t} GROUP BY p.shard, l.last_seq, l.last_pos, l.last_idx"
        )
        return {
            ShardId.parse(shard): (
                ParkSize(int(n_rows), int(n_bytes), int(n_batches)),
                int(top) + 1,
                (int(a), int(b), int(c)),
            )
            for shard, n_rows, n_bytes, n_batches, top, a, b, c in rows
        }

    def batches(self, cursor, shard: ShardId) -> Iterator[list[Any]]:
        """The shard's parked messages, batch by batch in their order (one batch in memory
        at a time: a long pause may have parked more than fits)."""
        cursor.execute(
            f"SELECT seq FROM {self.q}.park WHERE task={self.t} AND shard=%s ORDER BY seq", (str(shard),)
        )
        for (seq,) in list(cursor.fetchall()):
            cursor.execute(
                f"SELECT format, data FROM {self.q}.park WHERE task={self.t} AND shard=%s AND seq=%s",
                (str(shard), seq),
            )
            version, data = cursor.fetchone()
            if int(version) != FORMAT:
                raise ParkError(
                    f"shard {shard}: its parked changes were written by another version of shardmerge "
                    f"(format {version}, this one reads {FORMAT}); run that version till the shard has "
                    "resumed and its parked changes are applied, then upgrade"
                )
            yield pickle.loads(zlib.decompress(bytes(data)))

