"""verify looks again at the rows it found differing (`_recheck`) while the stream writes them.

On real servers: a shard's table upstream and the merged table downstream, and a `wait_past`
that plays the stream (it writes upstream and applies downstream what it wrote, as the daemon
would, between verify's reads). Rows changed by hand are reported; a row the stream changes
between verify's reads is not reported as differing: it is looked at again, and a row changed
in every look is left unsettled (neither differing nor fixed).
"""

from __future__ import annotations

from types import SimpleNamespace

from replicator.shard_id import ShardId
from replicator.spark.verify import RECHECK_ROUNDS, TableDiff, _recheck, _Side, _Slice

SHARD = ShardId("s1", "db", "orders_1")
HASH = "CRC32(CONCAT_WS('|', id, amount))"


def _side(instance, db: str, table: str) -> _Side:
    kwargs = {"host": instance.host, "port": instance.port, "user": instance.user,
              "password": instance.password, "database": db}
    return _Side(kwargs, f"`{db}`.`{table}`", "1=1", "", ("`id`",), HASH, "`id`", (("`id`", None),))


class Stream:
    """Each call: the hot row changes upstream and the change before it is applied downstream
    (the stream a step behind); on the first call the lagging row's change arrives, and the
    row written once upstream is written and applied."""

    def __init__(self, up, down, db: str) -> None:
        self.up, self.down, self.db, self.calls = up, down, db, 0

    def __call__(self) -> None:
        self.calls += 1
        self.down.execute("UPDATE merged SET amount = amount + 1 WHERE id = 6", self.db)
        self.up.execute("UPDATE orders SET amount = amount + 1 WHERE id = 6", self.db)
        if self.calls == 1:
            self.down.execute("UPDATE merged SET amount = 50 WHERE id = 5", self.db)
            self.up.execute("UPDATE orders SET amount = 70 WHERE id = 7", self.db)
            self.down.execute("UPDATE merged SET amount = 70 WHERE id = 7", self.db)


def test_a_recheck_reports_rows_changed_by_hand_and_not_those_the_stream_writes_meanwhile(sandbox, scratch_db):
    up, down = sandbox.upstreams[0], sandbox.downstream
    rows = ", ".join(f"({n}, {n})" for n in range(1, 11))
    for server, table in ((up, "orders"), (down, "merged")):
        server.execute([f"CREATE TABLE {table} (id INT PRIMARY KEY, amount INT)",
                        f"INSERT INTO {table} VALUES {rows}"], scratch_db)
    # by hand downstream: 2 changed, 3 deleted, 11 added; the stream behind on 5 and 6
    down.execute(["UPDATE merged SET amount = -1 WHERE id = 2", "DELETE FROM merged WHERE id = 3",
                  "INSERT INTO merged VALUES (11, 11)"], scratch_db)
    up.execute(["UPDATE orders SET amount = 50 WHERE id = 5", "UPDATE orders SET amount = 7 WHERE id = 6"],
               scratch_db)
    piece = _Slice("orders_1", (_side(up, scratch_db, "orders"),), _side(down, scratch_db, "merged"),
                   (SimpleNamespace(id=SHARD),), None)
    # what the first, chunked look found: every row but 1, 8, 9, 10
    seen = TableDiff("shop.orders", different=[(SHARD, (str(n),)) for n in (2, 5, 6, 7)],
                     missing=[(SHARD, ("3",))], extra=[(None, ("11",))])
    diff, stream = TableDiff("shop.orders"), Stream(up, down, scratch_db)

    _recheck(piece, seen, diff, stream)

    assert (diff.different, diff.missing, diff.extra) == ([(SHARD, ("2",))], [(SHARD, ("3",))], [(None, ("11",))])
    assert diff.unsettled == [(SHARD, ("6",))]
    assert stream.calls == RECHECK_ROUNDS  # (row 7 settled in the second look, row 6 never)
    assert not diff.equal


def test_a_recheck_with_nothing_moving_looks_once(sandbox, scratch_db):
    up, down = sandbox.upstreams[0], sandbox.downstream
    for server, table in ((up, "orders"), (down, "merged")):
        server.execute([f"CREATE TABLE {table} (id INT PRIMARY KEY, amount INT)",
                        f"INSERT INTO {table} VALUES (1, 1), (2, 2)"], scratch_db)
    down.execute("UPDATE merged SET amount = 5 WHERE id = 2", scratch_db)
    piece = _Slice("orders_1", (_side(up, scratch_db, "orders"),), _side(down, scratch_db, "merged"),
                   (SimpleNamespace(id=SHARD),), None)
    seen = TableDiff("shop.orders", different=[(SHARD, ("1",)), (SHARD, ("2",))])
    diff, calls = TableDiff("shop.orders"), []

    _recheck(piece, seen, diff, lambda: calls.append(1))

    assert (diff.different, diff.unsettled, len(calls)) == ([(SHARD, ("2",))], [], 1)
