"""Router: filters first, then the first matching route; system and meta schemas never routed."""

from __future__ import annotations

import pytest

from replicator.config import Filters, Route, parse_config
from replicator.source.routing import Router

ORDERS = Route("shop_*", "orders_*", "shop", "orders", {"source": "_source"})
MISC = Route("shop_*", "*", "shop", "misc")
CASED = Route("Shop_*", "orders_*", "legacy", "orders")
ARCHIVE = Route("archive", "orders_?", "shop", "orders")  # a second route into shop.orders

FILTERED = Router(
    [ORDERS, MISC, CASED, ARCHIVE],
    Filters(allow=("shop_*.*", "Shop_*.*", "archive.*", "mysql.*"), block=("*.orders_tmp*", "shop_99.*")),
)

CATCH_ALL = Router([Route("*", "*", "all", "tables")], meta_schema="sm_meta")


@pytest.mark.parametrize(("schema", "table", "expected"), [
    ("shop_01", "orders_001", ORDERS),  # first matching route wins...
    ("shop_01", "customers", MISC),  # ...the next one takes what the first leaves
    ("Shop_01", "orders_1", CASED),  # globs are case-sensitive, like names on Linux
    ("SHOP_01", "orders_1", None),  # allowed by no glob, matched by no route
    ("shop_01", "Orders_1", MISC),
    ("shop_01", "orders_tmp1", None),  # blocked although allowed and routed
    ("shop_99", "orders_1", None),  # blocked by its schema
    ("archive", "orders_1", ARCHIVE),
    ("archive", "orders_12", None),  # ? is exactly one character
    ("other", "orders_1", None),  # not on the allow list
    ("mysql", "user", None),  # allowed, but a system schema
])
def test_route_with_filters(schema: str, table: str, expected: Route | None) -> None:
    assert FILTERED.route(schema, table) == expected


@pytest.mark.parametrize(("schema", "table", "routed"), [
    ("app", "t", True),  # no allow list: everything not blocked
    ("mysql", "user", False),
    ("information_schema", "TABLES", False),
    ("INFORMATION_SCHEMA", "TABLES", False),  # case-insensitive on every server
    ("performance_schema", "threads", False),
    ("sys", "version", False),
    ("sm_meta", "checkpoint", False),  # the configured meta schema
    ("shardmerge_meta", "checkpoint", True),  # only the configured one is reserved
    ("mysql_app", "t", True),
])
def test_system_and_meta_schemas_are_never_routed(schema: str, table: str, routed: bool) -> None:
    assert (CATCH_ALL.route(schema, table) is not None) is routed


@pytest.mark.parametrize(("router", "schema", "watched"), [
    (FILTERED, "shop_01", True),
    (FILTERED, "Shop_7", True),
    (FILTERED, "archive", True),
    (FILTERED, "shop", False),  # "shop_*" needs the underscore
    (FILTERED, "other", False),
    (CATCH_ALL, "anything", True),
    (CATCH_ALL, "mysql", False),
    (CATCH_ALL, "sm_meta", False),
])
def test_watches_schema(router: Router, schema: str, watched: bool) -> None:
    assert router.watches_schema(schema) is watched


@pytest.mark.parametrize(("routes", "targets"), [
    ([ORDERS, MISC, CASED, ARCHIVE], ["shop.orders", "shop.misc", "legacy.orders"]),
    ([ARCHIVE, ORDERS], ["shop.orders"]),
    ([CASED], ["legacy.orders"]),
])
def test_targets_are_distinct_in_route_order(routes: list[Route], targets: list[str]) -> None:
    assert Router(routes).targets() == targets


def test_from_config_uses_routes_filters_and_meta_schema() -> None:
    config = parse_config({
        "task": "t",
        "sources": [{"id": "s1", "host": "h", "user": "u", "server_id": 1}],
        "target": {"host": "h", "user": "u", "flavor": "mysql", "meta_schema": "meta"},
        "routes": [{"schema": "*", "table": "*", "target": "all.t"}],
        "filters": {"block": ["*.tmp_*"]},
    })
    router = Router.from_config(config)
    assert router.route("meta", "x") is None
    assert router.route("app", "tmp_1") is None
    assert router.route("app", "orders") == config.routes[0]


def test_routes_are_hashable_keys() -> None:
    counts = {ORDERS: 1, Route("shop_*", "orders_*", "shop", "orders", [("source", "_source")]): 2}
    assert counts == {ORDERS: 2}
