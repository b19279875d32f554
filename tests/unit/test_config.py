"""Task config: every validation rule names the file and the field; a valid config becomes the
expected frozen dataclasses; passwords come from the environment and never show in a repr."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path
from typing import Any

import pytest

from replicator.config import (
    DEFAULT_META_SCHEMA,
    AdminConfig,
    ConfigError,
    EventFilter,
    Filters,
    Options,
    Route,
    SourceConfig,
    StartPosition,
    TargetConfig,
    TaskConfig,
    ValidatorConfig,
    load_admin,
    load_config,
    parse_config,
)

ENV = {"S2_PASS": "secret-two", "TARGET_PASS": "secret-target"}
MYSQL_GTID = "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5"


def base() -> dict[str, Any]:
    return copy.deepcopy({
        "task": "shop-orders",
        "sources": [
            {"id": "s1", "host": "10.0.0.1", "port": 3306, "user": "repl", "password": "secret-one", "server_id": 9001},
            {"id": "s2", "host": "10.0.0.2", "user": "repl", "password_env": "S2_PASS", "server_id": 9002},
        ],
        "target": {"host": "10.0.0.3", "user": "root", "password_env": "TARGET_PASS", "flavor": "mariadb"},
        "routes": [{"schema": "shop_*", "table": "orders_*", "target": "shop.orders"}],
    })


def parse(data: Any) -> TaskConfig:
    return parse_config(data, environ=ENV)


def src(i: int, **fields: Any):
    return lambda c: c["sources"][i].update(fields)


def drop(*path: Any):
    def mutate(c: dict[str, Any]) -> None:
        node = c
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return mutate


def setitem(value: Any, *path: Any):
    def mutate(c: dict[str, Any]) -> None:
        node = c
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return mutate


def route(i: int = 0, **fields: Any):
    return lambda c: c["routes"][i].update(fields)


def second_route(c: dict[str, Any]) -> None:
    c["routes"].append({"schema": "shop_*", "table": "customers", "target": "shop.customers"})


def both(*mutations):
    def mutate(c: dict[str, Any]) -> None:
        for m in mutations:
            m(c)
    return mutate


# (mutation of the valid base config, the message it must produce after "config: ")
INVALID = [
    # top level
    (lambda c: c.clear(), "missing required field 'task'"),
    (drop("task"), "missing required field 'task'"),
    (setitem("shop orders", "task"), "task: expected 1 to 64 letters, digits, '-' and '_', got 'shop orders'"),
    (setitem(42, "task"), "task: expected 1 to 64 letters, digits, '-' and '_', got 42"),
    (setitem({}, "option"), "unknown field 'option' (did you mean 'options'?)"),
    (drop("sources"), "missing required field 'sources'"),
    (drop("target"), "missing required field 'target'"),
    (drop("routes"), "missing required field 'routes'"),
    # sources
    (setitem([], "sources"), "sources: expected at least one source"),
    (setitem("s1", "sources"), "sources: expected a list of sources, got 's1'"),
    (setitem(None, "sources"), "sources: expected a list of sources, got nothing"),
    (setitem("s1", "sources", 0), "sources[0]: expected a source with id, host, user and server_id, got 's1'"),
    (src(1, port="abc"), "sources[1].port: expected an integer from 1 to 65535, got 'abc'"),
    (src(1, port=0), "sources[1].port: expected an integer from 1 to 65535, got 0"),
    (src(1, port=65536), "sources[1].port: expected an integer from 1 to 65535, got 65536"),
    (src(1, port=True), "sources[1].port: expected an integer from 1 to 65535, got True"),
    (src(1, passwrd="x"), "sources[1]: unknown field 'passwrd' (did you mean 'password'?)"),
    (src(0, colour="x"), "sources[0]: unknown field 'colour' (expected one of id, host, port, user, password, password_env, server_id, start, flavor, tls)"),
    (drop("sources", 0, "id"), "sources[0]: missing required field 'id'"),
    (drop("sources", 0, "host"), "sources[0]: missing required field 'host'"),
    (drop("sources", 0, "user"), "sources[0]: missing required field 'user'"),
    (drop("sources", 0, "server_id"), "sources[0]: missing required field 'server_id'"),
    (src(0, id="s.1"), "sources[0].id: expected 1 to 64 letters, digits, '-' and '_', got 's.1'"),
    (src(1, id="s1"), "sources[1].id: duplicate source id 's1', also sources[0]"),
    (src(1, server_id=9001), "sources[1].server_id: server_id 9001 is taken by sources[0]"),
    # (the id a daemon holding an even lease epoch streams sources[0] with: issue 70)
    (src(1, server_id=9001 + 2**31), f"sources[1].server_id: server_id {9001 + 2**31} is taken by sources[0]"),
    (src(0, server_id=2**31), f"sources[0].server_id: server_id {2**31} cannot be used"),
    (src(0, server_id=0), "sources[0].server_id: expected an integer from 1 to 4294967295, got 0"),
    (src(0, server_id=4294967296), "sources[0].server_id: expected an integer from 1 to 4294967295, got 4294967296"),
    (src(0, server_id="9001"), "sources[0].server_id: expected an integer from 1 to 4294967295, got '9001'"),
    (src(0, host=""), "sources[0].host: expected a non-empty string, got ''"),
    (src(0, user=None), "sources[0].user: expected a non-empty string, got None"),
    (src(0, password_env="S1_PASS"), "sources[0]: give either password or password_env, not both"),
    (both(drop("sources", 0, "password"), src(0, password_env="S1_PASS")), "sources[0].password_env: environment variable S1_PASS is not set"),
    (both(drop("sources", 0, "password"), src(0, password_env="S1-PASS")), "sources[0].password_env: expected the name of an environment variable, got 'S1-PASS'"),
    (src(0, flavor="tidb"), "sources[0].flavor: expected one of mysql, mariadb, got 'tidb'"),
    # sources[].start
    (src(0, start={"gtid": "0-1-2", "file": "mysql-bin.000001", "pos": 4}), "sources[0].start: give either gtid or file and pos, not both"),
    (src(0, start={"gtid": "0-1-2", "pos": 4}), "sources[0].start: give either gtid or file and pos, not both"),
    (src(0, start={"pos": 120}), "sources[0].start: pos needs file"),
    (src(0, start={}), "sources[0].start: expected file and pos, or gtid"),
    (src(0, start="mysql-bin.000001"), "sources[0].start: expected file and pos, or gtid, got 'mysql-bin.000001'"),
    (src(0, start={"file": "mysql-bin.000001", "pos": 3}), "sources[0].start.pos: expected an integer from 4 to 18446744073709551615, got 3"),
    (src(0, start={"file": "/var/lib/mysql/mysql-bin.000001"}), "sources[0].start.file: expected a binlog file name such as mysql-bin.000003, got '/var/lib/mysql/mysql-bin.000001'"),
    (src(0, start={"gtid": "latest"}), "sources[0].start.gtid: expected a MariaDB GTID position (0-101-1234) or a MySQL GTID set (3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5), got 'latest'"),
    (src(0, start={"gtid": MYSQL_GTID}, flavor="mariadb"), "sources[0].start.gtid: expected a MariaDB GTID position like 0-101-1234"),
    (src(0, start={"gtid": "0-101-1234"}, flavor="mysql"), "sources[0].start.gtid: expected a MySQL GTID set like"),
    (src(0, start={"offset": 4}), "sources[0].start: unknown field 'offset' (expected one of file, pos, gtid)"),
    # target
    (setitem("db1", "target"), "target: expected a mapping with host, user and flavor, got 'db1'"),
    (setitem("postgres", "target", "flavor"), "target.flavor: expected one of mysql, mariadb, tidb, got 'postgres'"),
    (drop("target", "flavor"), "target: missing required field 'flavor'"),
    (drop("target", "host"), "target: missing required field 'host'"),
    (setitem("abc", "target", "port"), "target.port: expected an integer from 1 to 65535, got 'abc'"),
    (setitem("x", "target", "password"), "target: give either password or password_env, not both"),
    (setitem("mysql", "target", "meta_schema"), "target.meta_schema: mysql is a system schema"),
    (setitem("meta-data", "target", "meta_schema"), "target.meta_schema: expected 1 to 64 letters, digits, '_' and '$', got 'meta-data'"),
    (setitem("x", "target", "flavour"), "target: unknown field 'flavour' (did you mean 'flavor'?)"),
    # routes
    (setitem([], "routes"), "routes: expected at least one route"),
    (both(second_route, route(1, target="orders")), "routes[1].target: expected schema.table, got 'orders'"),
    (route(target="shop.orders.x"), "routes[0].target: expected schema.table, got 'shop.orders.x'"),
    (route(target=".orders"), "routes[0].target: expected schema.table, got '.orders'"),
    (route(target="shop.orders_*"), "routes[0].target: 'orders_*' contains '*'"),
    (route(target="shop.o`rders"), "routes[0].target: 'o`rders' contains '`'"),
    (route(target="shop." + "o" * 65), "routes[0].target: '" + "o" * 65 + "' is longer than 64 characters"),
    (route(target="mysql.orders"), "routes[0].target: mysql is a system schema"),
    (route(target=f"{DEFAULT_META_SCHEMA}.orders"), "routes[0].target: shardmerge_meta is the meta schema (target.meta_schema); route elsewhere"),
    (drop("routes", 0, "table"), "routes[0]: missing required field 'table'"),
    (route(schema=""), "routes[0].schema: expected a non-empty string, got ''"),
    (route(tables="x"), "routes[0]: unknown field 'tables' (did you mean 'table'?)"),
    (route(extract={"tabel": "_t"}), "routes[0].extract: unknown field 'tabel' (did you mean 'table'?)"),
    (route(extract={"host": "_h"}), "routes[0].extract: unknown field 'host' (expected one of source, schema, table)"),
    (route(extract={"source": "_s", "table": "_S"}), "routes[0].extract.table: column '_S' is already the source column"),
    (route(extract={"source": ""}), "routes[0].extract.source: expected a column name, got ''"),
    (route(extract=["source"]), "routes[0].extract: expected a mapping of source, schema and/or table to column names, got ['source']"),
    # filters
    (setitem({"allow": "shop_*.*"}, "filters"), "filters.allow: expected a list of globs on schema.table, got 'shop_*.*'"),
    (setitem({"block": ["shop_01"]}, "filters"), "filters.block[0]: expected a glob on schema.table such as 'shop_*.*', got 'shop_01'"),
    (setitem({"alow": []}, "filters"), "filters: unknown field 'alow' (did you mean 'allow'?)"),
    (setitem({"mode": "slow"}, "validator"), "validator.mode: expected one of off, fast, full, got 'slow'"),
    (setitem({"mode": "full", "delay": 3}, "validator"), "validator: unknown field 'delay' (did you mean 'error_delay'?)"),
    (setitem({"events": {"ignore": ["delete"]}}, "filters"), "filters.events: expected a list of event filters (tables, ignore, sql), got {'ignore': ['delete']}"),
    (setitem({"events": [{"ignore": ["deletes"]}]}, "filters"), "filters.events[0].ignore[0]: expected one of insert, update, delete, truncate table, drop table, add index, drop index, drop column, got 'deletes'"),
    (setitem({"events": [{"tables": ["shop_*.*"]}]}, "filters"), "filters.events[0]: ignores nothing: give ignore (event kinds) or sql (patterns of DDL text)"),
    (setitem({"events": [{"sql": ["^ALTER (TABLE"]}]}, "filters"), "filters.events[0].sql[0]: not a regular expression (missing ), unterminated subpattern at position 7): '^ALTER (TABLE'"),
    (setitem({"events": [{"ignore": ["delete"], "table": ["x.y"]}]}, "filters"), "filters.events[0]: unknown field 'table' (did you mean 'tables'?)"),
    # options
    (setitem({"batch_size": 0}, "options"), "options.batch_size: expected an integer from 1 to 100000, got 0"),
    (setitem({"batch_size": 100001}, "options"), "options.batch_size: expected an integer from 1 to 100000, got 100001"),
    (setitem({"workers": 65}, "options"), "options.workers: expected an integer from 1 to 64, got 65"),
    (setitem({"safe_mode": "yes"}, "options"), "options.safe_mode: expected true or false, got 'yes'"),
    (setitem({"safe_mode_window": -1}, "options"), "options.safe_mode_window: expected a number of seconds, 0 or more, got -1"),
    (setitem({"heartbeat": 0}, "options"), "options.heartbeat: expected a number of seconds, more than 0 and at most 4294967, got 0"),
    (setitem({"max_backoff": "30s"}, "options"), "options.max_backoff: expected a number of seconds, more than 0, got '30s'"),
    (setitem({"batchsize": 10}, "options"), "options: unknown field 'batchsize' (did you mean 'batch_size'?)"),
    (setitem({"spark_conf": {"driver.memory": "4g"}}, "options"),
     "options.spark_conf: 'driver.memory' is not a Spark setting (spark.*)"),
    (setitem({"spark_conf": ["spark.driver.memory=4g"]}, "options"),
     "options.spark_conf: expected a mapping of Spark settings to values, got ['spark.driver.memory=4g']"),
    (setitem({"backfill_rows_per_split": 0}, "options"),
     "options.backfill_rows_per_split: expected an integer from 1 to 100000000, got 0"),
]


@pytest.mark.parametrize(("mutate", "message"), INVALID, ids=[m for _, m in INVALID])
def test_each_rule_names_the_field(mutate, message: str) -> None:
    data = base()
    mutate(data)
    with pytest.raises(ConfigError) as info:
        parse(data)
    assert str(info.value).startswith(f"config: {message}")


@pytest.mark.parametrize(("data", "message"), [
    (None, "config: expected a mapping with task, sources, target and routes, got nothing"),
    (["task"], "config: expected a mapping with task, sources, target and routes, got ['task']"),
])
def test_the_top_level_must_be_a_mapping(data: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=r"^" + message.replace("[", r"\[").replace("]", r"\]") + "$"):
        parse(data)


def test_a_full_config_parses_into_the_dataclasses() -> None:
    data = base()
    data["sources"][0].update(start={"file": "mysql-bin.000003", "pos": 1234}, flavor="MariaDB")
    data["sources"][1].update(start={"gtid": "0-101-1234,1-102-7"}, port=3307)
    data["target"].update(meta_schema="sm_meta", port=4000, flavor="tidb")
    data["routes"][0]["extract"] = {"table": "_table", "source": "_source"}
    # Routes sending tables to two different targets are fine.
    second_route(data)
    data["filters"] = {"allow": ["shop_*.*"], "block": ["*.orders_tmp*"]}
    data["options"] = {"batch_size": 500, "workers": 8, "safe_mode": True, "safe_mode_window": 15,
                       "heartbeat": 0.5, "max_backoff": 10, "backfill_rows_per_split": 50_000,
                       "spark_conf": {"spark.driver.memory": "4g", "spark.sql.adaptive.enabled": False}}
    config = parse_config(data, "tasks.yaml", environ=ENV)
    assert config == TaskConfig(
        task="shop-orders",
        sources=(
            SourceConfig("s1", "10.0.0.1", 3306, "repl", "secret-one", 9001,
                         StartPosition(file="mysql-bin.000003", pos=1234), "mariadb"),
            SourceConfig("s2", "10.0.0.2", 3307, "repl", "secret-two", 9002,
                         StartPosition(gtid="0-101-1234,1-102-7"), None),
        ),
        target=TargetConfig("10.0.0.3", 4000, "root", "secret-target", "tidb", "sm_meta"),
        routes=(
            Route("shop_*", "orders_*", "shop", "orders", {"source": "_source", "table": "_table"}),
            Route("shop_*", "customers", "shop", "customers"),
        ),
        filters=Filters(allow=("shop_*.*",), block=("*.orders_tmp*",)),
        options=Options(batch_size=500, workers=8, safe_mode=True, safe_mode_window=15.0, heartbeat=0.5,
                        max_backoff=10.0, backfill_rows_per_split=50_000,
                        spark_conf=(("spark.driver.memory", "4g"), ("spark.sql.adaptive.enabled", "false"))),
        path=None,
    )
    assert config.routes[0].target == "shop.orders"
    assert config.routes[0].extract_columns == {"source": "_source", "table": "_table"}
    assert list(config.routes[0].extract) == ["source", "table"]  # fixed kind order, not the YAML's
    assert len({config, parse_config(data, "tasks.yaml", environ=ENV)}) == 1  # hashable, equal


def test_event_filters_parse_with_every_table_by_default() -> None:
    data = base()
    data["filters"] = {"events": [
        {"tables": ["shop_01.*"], "ignore": ["delete", "truncate table"]},
        {"sql": ["^ALTER TABLE .* ADD INDEX"], "ignore": []},
    ]}
    events = parse(data).filters.events
    assert events == (
        EventFilter(("shop_01.*",), frozenset({"delete", "truncate table"})),
        EventFilter(("*.*",), frozenset(), ("^ALTER TABLE .* ADD INDEX",)),
    )
    assert events[0].covers("shop_01", "orders_001") and not events[0].covers("shop_02", "orders_001")


def test_defaults() -> None:
    data = base()
    del data["sources"][0]["password"]
    config = parse(data)
    source = config.sources[0]
    assert (source.port, source.password, source.start, source.flavor) == (3306, "", None, None)
    assert config.target.meta_schema == DEFAULT_META_SCHEMA
    assert config.filters == Filters()
    assert config.options == Options(batch_size=1000, workers=4, safe_mode=False, safe_mode_window=0.0,
                                     heartbeat=5.0, max_backoff=30.0)
    assert config.routes[0].extract == {} and config.routes[0].extract_columns == {}
    assert config.source("s2") is config.sources[1]


@pytest.mark.parametrize(("start", "expected"), [
    ({"file": "mysql-bin.000003"}, StartPosition(file="mysql-bin.000003", pos=4)),
    ({"file": "mysql-bin.000003", "pos": 4}, StartPosition(file="mysql-bin.000003", pos=4)),
    ({"gtid": "0-101-1234"}, StartPosition(gtid="0-101-1234")),
    ({"gtid": MYSQL_GTID}, StartPosition(gtid=MYSQL_GTID)),
    ({"gtid": f"{MYSQL_GTID}:7-9,\n{MYSQL_GTID.lower()}"}, StartPosition(gtid=f"{MYSQL_GTID}:7-9,\n{MYSQL_GTID.lower()}")),
    ({"gtid": "3e11fa47-71ca-11e1-9e33-c80aa9429562:daily:1-5"}, StartPosition(gtid="3e11fa47-71ca-11e1-9e33-c80aa9429562:daily:1-5")),
])
def test_start_positions(start: dict[str, Any], expected: StartPosition) -> None:
    data = base()
    data["sources"][0]["start"] = start
    assert parse(data).sources[0].start == expected


@pytest.mark.parametrize("section", ["filters", "options"])
def test_an_empty_optional_section_means_the_defaults(section: str) -> None:
    data = base()
    data[section] = None  # `options:` with every line below commented out
    data["routes"][0]["extract"] = None
    data["sources"][0]["start"] = None
    config = parse(data)
    assert (config.filters, config.options) == (Filters(), Options())
    assert config.routes[0].extract == {} and config.sources[0].start is None


def test_password_env_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("S2_PASS", "from-the-env")
    monkeypatch.setenv("TARGET_PASS", "target-env")
    config = parse_config(base())
    assert config.sources[1].password == "from-the-env"
    assert config.target.password == "target-env"
    assert config.sources[1].connection_kwargs() == {
        "host": "10.0.0.2", "port": 3306, "user": "repl", "password": "from-the-env"}
    assert config.target.connection_kwargs() == {
        "host": "10.0.0.3", "port": 3306, "user": "root", "password": "target-env"}


def test_without_source_passwords_their_variables_are_checked_not_read() -> None:
    config = parse_config(base(), environ={"TARGET_PASS": "t"}, source_passwords=False)
    assert (config.sources[1].password, config.target.password) == ("", "t")
    data = base()
    data["sources"][1]["password_env"] = "S2-PASS"
    with pytest.raises(ConfigError, match=r"sources\[1\]\.password_env: expected the name of an environment"):
        parse_config(data, environ=ENV, source_passwords=False)
    with pytest.raises(ConfigError, match=r"target\.password_env: environment variable TARGET_PASS is not set"):
        parse_config(base(), environ={}, source_passwords=False)


def test_the_admin_section_alone_is_read_without_the_rest_or_the_token(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_text("task: not a valid name\nadmin:\n  host: 0.0.0.0\n  port: 9000\n  token_env: NOT_SET_HERE\n")
    admin = load_admin(path)
    assert (admin.host, admin.port, admin.token, admin.token_env) == ("0.0.0.0", 9000, None, "NOT_SET_HERE")
    path.write_text("task: t\n")
    assert load_admin(path) == AdminConfig()
    path.write_text("admin:\n  host: 0.0.0.0\n")
    with pytest.raises(ConfigError, match=r"admin\.token_env: the admin API listens on 0\.0\.0\.0, beyond localhost"):
        load_admin(path)


def test_passwords_never_show_in_repr_or_errors() -> None:
    config = parse(base())
    for text in (repr(config), str(config), repr(config.sources[0]), str(config.target)):
        assert "secret" not in text
    data = base()
    data["sources"][0]["password"] = 12345678  # YAML read an unquoted number
    with pytest.raises(ConfigError) as info:
        parse(data)
    assert str(info.value) == 'config: sources[0].password: expected a string; quote the password, e.g. password: "0123"'
    assert "12345678" not in str(info.value)


CONFIG_YAML = textwrap.dedent("""\
    task: shop-orders
    sources:
      - id: s1
        host: 127.0.0.1
        port: 3306
        user: root
        password: ""
        server_id: 9001
        start:
          file: mysql-bin.000003
          pos: 4
    target: {host: 127.0.0.1, user: root, flavor: mariadb}
    routes:
      - {schema: "shop_*", table: "orders_*", target: shop.orders}
""")


def test_load_config_reads_yaml_and_keeps_the_path(tmp_path) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text(CONFIG_YAML)
    config = load_config(path)
    assert config.path == str(path)
    assert config.sources[0].start == StartPosition(file="mysql-bin.000003", pos=4)
    assert config.sources[0].password == ""


@pytest.mark.parametrize(("text", "message"), [
    (CONFIG_YAML.replace("port: 3306", "port: abc"), "tasks.yaml: sources[0].port: expected an integer from 1 to 65535, got 'abc'"),
    (CONFIG_YAML.replace("    password", "    passwrd"), "tasks.yaml: sources[0]: unknown field 'passwrd' (did you mean 'password'?)"),
    (CONFIG_YAML.replace("user: root\n", "user: root\n    port: 3307\n", 1), "tasks.yaml: line 7, column 5: invalid YAML: duplicate key 'port'"),
    (CONFIG_YAML.replace("task: shop-orders", "task: [shop"), "tasks.yaml: line 2, column 8: invalid YAML: expected ',' or ']', but got ':'"),
    ("", "tasks.yaml: expected a mapping with task, sources, target and routes, got nothing"),
])
def test_load_config_names_the_file(tmp_path, monkeypatch, text: str, message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tasks.yaml").write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config("tasks.yaml")
    assert str(info.value) == message


def test_a_missing_file(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml: cannot read: No such file or directory"):
        load_config(tmp_path / "nope.yaml")


def test_merge_keys_may_override_without_being_duplicates(tmp_path) -> None:
    # A second source sharing the first one's settings through a YAML anchor.
    text = CONFIG_YAML.replace("  - id: s1", "  - &first\n    id: s1")
    text = text.replace("target:", "  - <<: *first\n    id: s2\n    server_id: 9002\ntarget:", 1)
    (tmp_path / "t.yaml").write_text(text)
    config = load_config(tmp_path / "t.yaml")
    assert [(s.id, s.server_id, s.port) for s in config.sources] == [("s1", 9001, 3306), ("s2", 9002, 3306)]


def test_the_example_config_is_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SHOP_EAST_PASS", "SHOP_WEST_PASS", "SHOP_TARGET_PASS"):
        monkeypatch.setenv(name, "pw")
    config = load_config(Path(__file__).resolve().parents[2] / "configs" / "example.yaml")
    assert [s.id for s in config.sources] == ["east", "west"]
    assert config.routes[0].target == "shop.orders"
    assert config.routes[0].extract_columns == {"source": "_source", "schema": "_schema", "table": "_table"}
    assert (config.filters.allow, config.filters.block) == (("shop_*.*",), ("*.orders_tmp*",))
    assert [f.ignore for f in config.filters.events] == [{"truncate table", "drop table"}, set()]
    assert [(f.tables, f.ignore_insert.text) for f in config.filters.rows] == [
        (("shop_*.orders_*",), "status = 'test'")
    ]
    assert config.validator == ValidatorConfig("off", 60.0)  # a bare `off` is YAML's false
    assert config.options == Options()
