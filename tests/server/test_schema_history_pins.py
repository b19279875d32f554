"""The schema history as the meta schema keeps it, where a decision pins a table where an
earlier one did (`schema_history.pin_rows`): the entry the worker wrote of the earlier pin
(its word of it, at the transaction's own id) takes the new table with it, as the daemon's
history does (`SourceState.pin`), so a restart past the pin reads the new one (L70)."""

from __future__ import annotations

from lattice import Flavor
from replicator.apply import schema_history
from replicator.apply.meta import Meta
from replicator.servers import connect_downstream
from replicator.shard_id import ShardId
from replicator.source.messages import Pin
from replicator.source.source_state import PIN, SourceState
from replicator.state.positions import Position

KEPT = "CREATE TABLE `t` (`id` int NOT NULL, PRIMARY KEY (`id`))"
GIVEN = "CREATE TABLE `t` (`id` int NOT NULL, `b` int DEFAULT NULL, PRIMARY KEY (`id`))"
LATER = "CREATE TABLE `t` (`id` int NOT NULL, `c` int DEFAULT NULL, PRIMARY KEY (`id`))"
SHARD = ShardId("s1", "db", "t")


def history_at(meta: Meta, position: Position) -> dict[str, str]:
    state = SourceState("s1", Flavor.MARIADB)
    state.history = meta.history.load("s1")
    return state.schemas_at(position)


def test_a_pin_again_takes_the_workers_word_of_the_earlier_one_and_no_ddl_of_its_own(sandbox, scratch_db):
    down = sandbox.downstream
    kwargs = {"host": down.host, "port": down.port, "user": down.user, "password": down.password}
    meta = Meta(lambda: connect_downstream(kwargs), f"{scratch_db}_meta", "task")
    meta.ensure()
    meta.execute([
        *schema_history.pin_rows(meta, SHARD, Pin((1, 100, PIN), "db.t", KEPT)),
        meta.history.sql("s1", (1, 100, 0), {"db.t": KEPT}),  # (the worker's word of that pin)
        *schema_history.pin_rows(meta, SHARD, Pin((1, 500, PIN), "db.t", KEPT)),
        meta.history.sql("s1", (1, 500, 0), {"db.t": LATER}),  # (a DDL of its own right there)
    ])
    meta.execute([
        *schema_history.pin_rows(meta, SHARD, Pin((1, 100, PIN), "db.t", GIVEN)),
        *schema_history.pin_rows(meta, SHARD, Pin((1, 500, PIN), "db.t", GIVEN)),
    ])
    assert history_at(meta, Position("mysql-bin.000001", 100)) == {"db.t": GIVEN}
    assert history_at(meta, Position("mysql-bin.000001", 400)) == {"db.t": GIVEN}
    assert history_at(meta, Position("mysql-bin.000001", 500)) == {"db.t": GIVEN}
    assert history_at(meta, Position("mysql-bin.000001", 900)) == {"db.t": LATER}
