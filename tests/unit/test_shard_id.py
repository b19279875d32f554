"""ShardId: the text form source.schema.table both ways, what it refuses and how it
says so, and the interning the hot path relies on."""

from __future__ import annotations

import copy
import json
import logging
import pickle
import threading

import pytest

from replicator.shard_id import ShardId


@pytest.mark.parametrize(("text", "source", "schema", "table"), [
    ("s1.shop_01.orders_001", "s1", "shop_01", "orders_001"),
    ("east-2.Shop.Orders", "east-2", "Shop", "Orders"),  # any character but a dot, case kept
    ("s1.shop$1.orders 2", "s1", "shop$1", "orders 2"),
    ("s1.магазин.заказы", "s1", "магазин", "заказы"),
])
def test_parse_and_str_round_trip(text: str, source: str, schema: str, table: str) -> None:
    shard = ShardId.parse(text)
    assert (shard.source, shard.schema, shard.table) == (source, schema, table)
    assert str(shard) == text and f"{shard}" == text
    assert shard is ShardId(source, schema, table)
    assert shard.table_key == f"{schema}.{table}"


@pytest.mark.parametrize(("text", "message"), [
    ("nodots", r"shard id 'nodots' is not source\.schema\.table"),
    ("s1.orders", r"shard id 's1\.orders' is not source\.schema\.table"),
    ("", r"shard id '' is not source\.schema\.table"),
    ("s1..t", r"shard id 's1\.\.t' is not source\.schema\.table"),
    (".db.t", r"shard id '\.db\.t' is not source\.schema\.table"),
    ("s1.db.", r"shard id 's1\.db\.' is not source\.schema\.table"),
    ("s1.db.t.", r"shard id 's1\.db\.t\.' is not source\.schema\.table"),
    ("s1.a.b.c", r"shard id 's1\.a\.b\.c' is ambiguous: expected source\.schema\.table with two dots; write"),
    (None, r"expected a shard id source\.schema\.table, got None"),
    (["s1", "db", "t"], r"expected a shard id source\.schema\.table, got \['s1', 'db', 't'\]"),
])
def test_parse_refuses_what_is_not_one_shard_id(text, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ShardId.parse(text)


@pytest.mark.parametrize(("parts", "message"), [
    (("", "db", "t"), "expected a non-empty source name, got ''"),
    (("s1", "", "t"), "expected a non-empty schema name, got ''"),
    (("s1", "db", None), "expected a non-empty table name, got None"),
    (("s.1", "db", "t"), r"the source id 's\.1' contains a dot"),
])
def test_the_parts_are_checked(parts: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ShardId(*parts)


@pytest.mark.parametrize(("parts", "text"), [
    (("s1", "db", "t.old"), "s1.db.`t.old`"),  # MySQL allows a dot in a quoted name
    (("s1", "db", "x..d"), "s1.db.`x..d`"),  # (MariaDB's test suite has this one)
    (("s1", "a.b", "t"), "s1.`a.b`.t"),
    (("s1", "a.b", "c.d"), "s1.`a.b`.`c.d`"),
    (("s1", "db", "`q`.x"), "s1.db.```q``.x`"),
    (("s1", "db", "`q`"), "s1.db.```q```"),
    (("s1", "db", "t`"), "s1.db.t`"),  # a backquote elsewhere needs none
])
def test_a_name_holding_a_dot_is_written_in_backquotes_and_read_back(parts: tuple, text: str) -> None:
    shard = ShardId(*parts)
    assert str(shard) == text
    assert ShardId.parse(text) is shard


@pytest.mark.parametrize("text", ["s1.db.`t", "s1.`db.t", "s1.`db`t.x", "s1.db.`t`.x", "s1.``.t", "s1.db"])
def test_backquotes_that_do_not_close_a_name_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="shard id"):
        ShardId.parse(text)


def test_equal_ids_are_one_object_however_made() -> None:
    shard = ShardId("s1", "db", "t")
    made = [
        ShardId.parse("s1.db.t"),
        ShardId("s1", "db", "".join(["t"])),
        pickle.loads(pickle.dumps(shard)),
        copy.copy(shard),
        copy.deepcopy({"k": shard})["k"],
    ]
    assert all(m is shard for m in made)
    assert shard == ShardId("s1", "db", "t") and hash(shard) == hash(ShardId.parse("s1.db.t"))
    assert shard != ShardId("s1", "db", "u") and shard != "s1.db.t" and shard != ("s1", "db", "t")


def test_pickling_a_batch_sends_the_id_once() -> None:
    shard = ShardId("s1", "shop_01", "orders_001")
    one = len(pickle.dumps([shard]))
    many = len(pickle.dumps([shard] * 1000))
    assert many < one + 1000 * 4  # a memo reference per row, not the id again


def test_made_in_many_threads_at_once_still_one_object() -> None:
    found: list[ShardId] = []
    barrier = threading.Barrier(8)

    def make() -> None:
        barrier.wait()
        found.append(ShardId("s9", "threads", "t"))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(s) for s in found}) == 1


def test_immutable() -> None:
    shard = ShardId("s1", "db", "t")
    with pytest.raises(AttributeError, match="immutable"):
        shard.table = "u"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del shard.source


def test_ids_sort_by_their_text() -> None:
    texts = ["s1.shop.t", "s1.shop$a.t", "s10.a.b", "s1.shop-x.t", "s2.a.a"]
    assert [str(s) for s in sorted(ShardId.parse(t) for t in texts)] == sorted(texts)


def test_outputs_show_the_text() -> None:
    shard = ShardId("s1", "db", "t")
    assert repr(shard) == "ShardId('s1', 'db', 't')"
    assert f"{shard:>10}|" == "   s1.db.t|"
    assert json.dumps({"shard": shard}, default=str) == '{"shard": "s1.db.t"}'
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "shard %s paused", (shard,), None)
    assert record.getMessage() == "shard s1.db.t paused"
