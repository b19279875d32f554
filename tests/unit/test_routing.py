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


# -- regular expressions and what extract columns capture (DM's extract-*) ---------------------
def parsed_routes(routes: list[dict]) -> tuple[Route, ...]:
    from replicator.config import parse_config

    base = {
        "task": "t",
        "sources": [{"id": "s1", "host": "h", "port": 1, "user": "u", "password": "", "server_id": 9}],
        "target": {"host": "h", "port": 2, "user": "u", "password": "", "flavor": "mariadb"},
    }
    return parse_config({**base, "routes": routes}).routes


def test_a_route_by_regular_expressions_matches_whole_names():
    (route,) = parsed_routes([{"schema_regex": r"shop_\d{2}", "table_regex": r"orders_(\d+)", "target": "shop.orders"}])
    assert route.matches("shop_07", "orders_001") and route.matches_schema("shop_07")
    assert not route.matches("shop_007", "orders_001")  # whole names only
    assert not route.matches("shop_07", "orders_x") and not route.matches("xshop_07", "orders_1")
    assert Router([route]).watches_schema("shop_07") and not Router([route]).watches_schema("shop_x")


@pytest.mark.parametrize(("extract", "values"), [
    ({"schema": {"column": "shard_no", "regex": r"shop_(\d+)", "type": "INT UNSIGNED"}}, ("07",)),
    ({"table": {"column": "part", "regex": r"orders_\d+"}}, ("orders_001",)),  # no group: the whole match
    ({"table": {"column": "part", "regex": r"x_(\d+)"}}, (None,)),  # no match: NULL (check says so)
    ({"source": "_src", "table": "_tbl"}, ("s1", "orders_001")),  # whole names, as before
])
def test_extract_columns_take_what_a_pattern_captures(extract, values):
    (route,) = parsed_routes([{"schema": "shop_*", "table": "orders_*", "target": "shop.orders", "extract": extract}])
    assert route.extract_values({"source": "s1", "schema": "shop_07", "table": "orders_001"}) == values


@pytest.mark.parametrize(("route", "message"), [
    ({"schema": "a", "schema_regex": "a", "table": "t"}, "routes[0]: give schema (a glob) or schema_regex"),
    ({"schema": "a"}, "routes[0]: missing required field 'table' (or table_regex"),
    ({"schema_regex": "a(", "table": "t"}, "routes[0].schema_regex: not a regular expression"),
    ({"schema": "a", "table": "t", "extract": {"schema": {"column": "n", "type": "INTEGRAL"}}},
     "routes[0].extract.schema.type: not a column type: 'INTEGRAL'"),
    ({"schema": "a", "table": "t", "extract": {"schema": {"regex": "x"}}},
     "routes[0].extract.schema: missing required field 'column'"),
    ({"schema": "a", "table": "t", "extract": {"schema": {"column": "n", "regexp": "x"}}},
     "routes[0].extract.schema: unknown field 'regexp' (did you mean 'regex'?)"),
])
def test_a_bad_route_says_which_field_and_why(route, message):
    from replicator.config import ConfigError

    with pytest.raises(ConfigError) as caught:
        parsed_routes([{"target": "shop.orders", **route}])
    assert message in str(caught.value)


def test_routes_into_one_target_fill_the_same_extract_columns():
    from replicator.config import ConfigError

    with pytest.raises(ConfigError, match=r"routes\[1\].extract: the extract columns differ"):
        parsed_routes([
            {"schema": "a", "table": "t", "target": "shop.orders", "extract": {"source": "_s"}},
            {"schema": "b", "table": "t", "target": "shop.orders", "extract": {"source": "_src"}},
        ])
