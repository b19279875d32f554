"""`shardmerge import-dm`: the 40 real DM files of ../shared/dm_tasks (33 task files, 7 source
files) each import into a config our validation takes, or are refused naming the file and the
DM field, as the tables below say; DM's features map as docs/dm.md says; the
command's output and exit status. No server is contacted."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from replicator.cli.dm import Imported, NoteKind, convert, import_dm
from replicator.cli.dm.events import event_filter
from replicator.cli.dm.fields import Field
from replicator.cli.dm.patterns import NoGlob, regex_globs, whole_name_regex
from replicator.cli.dm.servers import PLACEHOLDER_HOST, SERVER_ID_BASE
from replicator.cli.dm.tables import ba_rule
from replicator.cli.dm.task import PLACEHOLDER_ROUTE
from replicator.cli.dm.units import dump_and_load, go_seconds
from replicator.cli.import_dm_cli import render_yaml
from replicator.config import ConfigError, TaskConfig, load_config

REPO = Path(__file__).resolve().parents[2]
DM = Path(os.environ.get("DM_TASKS", "/work/shared/dm_tasks"))
pytestmark = pytest.mark.skipif(not DM.is_dir(), reason=f"the DM files are not at {DM} (set DM_TASKS)")

OPTIMISTIC = "tiflow__dm__tests__shardddl1__conf__double-source-optimistic.yaml"
SHARD_MERGE = "docs-dm__release-1.0__en__usage-scenario-shard-merge__block1.yaml"
FULL = "docs__dm__task-configuration-file-full__block1.yaml"
SOURCE1 = "tiflow__dm__tests__shardddl1__conf__source1.yaml"
EXPRESSIONS = "tiflow__dm__tests__expression_filter__conf__dm-task2.yaml"

# Every task file: the DM fields noted "not mapped" (besides one placeholder source per
# instance without its source file, which every import here has), or the field a refusal names.
# A task routing no table into a named one imports with a placeholder route (`routes`).
TASKS: dict[str, list[str] | tuple[str, str]] = {
    "dm__tests__online_ddl__conf__dm-task.yaml": [
        "column-mappings.gho-instance-1", "column-mappings.gho-instance-2", "column-mappings.pt-instance-1",
        "column-mappings.pt-instance-2", "is-sharding"],
    "dm__tests__sharding__conf__dm-task__at-e512948.yaml": [
        "column-mappings.instance-1", "column-mappings.instance-2", "is-sharding"],
    "docs-cn__dm__quick-start-create-task__block2.yaml": ["shard-mode"],
    "docs-cn__dm__task-configuration-file-full__block1.yaml": [
        "block-allow-list", "expression-filter.even_c", "filters.filter-rule-1", "filters.filter-rule-2.action",
        "routes.route-rule-1", "shard-mode", "target-database.security", "target-database.session"],
    "docs-dm__release-1.0__en__task-configuration-file-full__block1.yaml": [
        "block-allow-list", "filters.filter-rule-1", "is-sharding", "routes.route-rule-1", "target-database.session"],
    SHARD_MERGE: ["block-allow-list.log-bak-ignored.ignore-tales", "routes.user-route-rule"],
    FULL: [
        "block-allow-list", "expression-filter.even_c", "filters.filter-rule-1", "filters.filter-rule-2.action",
        "routes.route-rule-1", "shard-mode", "target-database.security", "target-database.session"],
    # a documentation template: ${host}, ${binlog-name}, ${binlog-position} to fill in
    "docs__migrate-large-mysql-shards-to-tidb__block2.yaml": (
        "mysql-instances[0].meta.binlog-name", "'${binlog-name}' is a template placeholder: fill in the value"),
    "tiflow__dm__chaos__cases__conf__task-optimistic.yaml": ["routes"],
    "tiflow__dm__master__task_advanced.yaml": ["filters.user-filter-1", "filters.user-filter-2.action", "is-sharding"],
    "tiflow__dm__tests__all_mode__conf__dm-task-expression-filter.yaml": [
        "expression-filter.delete-30", "routes", "target-database.session"],
    "tiflow__dm__tests__async_checkpoint_flush__conf__dm-task.yaml": ["routes"],
    "tiflow__dm__tests__case_sensitive__conf__dm-task.yaml": ["target-database.session"],
    "tiflow__dm__tests__dm_syncer__conf__dm-task.yaml": ["routes.route-rule"],
    "tiflow__dm__tests__dmctl_basic__conf__get_task.yaml": ["filters.filter-02", "shard-mode", "target-database.session"],
    EXPRESSIONS: ["expression-filter.future_date.insert-value-expr", "routes"],
    "tiflow__dm__tests__extend_column__conf__dm-task.yaml": [
        "routes.extend-column-table-rules", "routes.extend-column-table-source-schema-rules.extract-source.source-regexp"],
    "tiflow__dm__tests__full_mode__conf__dm-task.yaml": ["routes"],
    "tiflow__dm__tests__import_into_mode__conf__dm-task.yaml": ["routes"],
    # DM's test harness fills in binlog-gtid-placeholder-1 with sed
    "tiflow__dm__tests__incremental_mode__conf__dm-task.yaml": (
        "mysql-instances[0].meta.binlog-gtid", "got 'binlog-gtid-placeholder-1'"),
    "tiflow__dm__tests__lightning_mode__conf__dm-task-dup.yaml": ["routes.dup", "target-database.session"],
    "tiflow__dm__tests__online_ddl__conf__dm-task.yaml": ["is-sharding"],
    "tiflow__dm__tests__safe_mode__conf__dm-task-safe-mode-duration.yaml": ["is-sharding"],
    "tiflow__dm__tests__safe_mode_foreign_key__conf__dm-task.yaml": ["routes", "target-database.session"],
    "tiflow__dm__tests__sequence_safe_mode__conf__dm-task.yaml": ["is-sharding"],
    "tiflow__dm__tests__sequence_sharding_optimistic__conf__dm-task.yaml": [],
    OPTIMISTIC: [],
    "tiflow__dm__tests__shardddl1__conf__double-source-pessimistic.yaml": ["shard-mode"],
    "tiflow__dm__tests__shardddl4_1__conf__double-source-strict-optimistic.yaml": ["strict-optimistic-shard-mode"],
    # pos-holder, name-holder, gtid-holder: the harness's too
    "tiflow__dm__tests__shardddl_optimistic__conf__double-source-optimistic-incr.yaml": (
        "mysql-instances[0].meta.binlog-pos", "got 'pos-holder'"),
    "tiflow__dm__tests__sync_collation__conf__dm-task.yaml": ["routes"],
    "tiflow__dm__tests__validator_basic__conf__sharding-task.yaml": ["shard-mode"],
    "tiflow__dm__tests__validator_basic__conf__test-filter.yaml": ["routes"],
}

# Every source file, read as the source of OPTIMISTIC's first instance (each is
# mysql-replica-01): what our source takes of it, and the notes it gets.
SOURCES: dict[str, dict[str, Any]] = {
    "tiflow__dm__worker__source.yaml": {
        "source": {"host": "127.0.0.1", "port": 3306, "user": "root", "server_id": 101},
        "notes": {"relay-dir": NoteKind.NOT_NEEDED, "relay-binlog-gtid": NoteKind.NOT_NEEDED,
                  "from.max-allowed-packet": NoteKind.NOT_NEEDED, "from.password": NoteKind.OPERATOR}},
    "tiflow__dm__tests__tls__conf__source1.yaml": {
        "source": {"host": "127.0.0.1", "port": 3306, "user": "dm_tls_test", "tls": {"mode": "required"}},
        "notes": {"from.security": NoteKind.NOT_MAPPED, "enable-relay": NoteKind.NOT_NEEDED}},
    "tiflow__dm__tests__dmctl_basic__conf__source1.yaml": {
        "source": {"host": "127.0.0.1", "port": 3306, "user": "root", "server_id": 111111111},
        "events": [{"tables": ["dmctl.t_1"], "sql": ["alter table .* add column aaa int"]},
                   {"tables": ["dmctl.t_2"], "sql": ["alter table .* add column aaa int"]}],
        "notes": {"filters": NoteKind.NOT_MAPPED}},
    "tiflow__dm__tests__dmctl_basic__conf__get_source1.yaml": {
        "source": {"host": "127.0.0.1", "port": 3306, "user": "root", "server_id": 111111111, "flavor": "mysql"},
        "events": [{"tables": ["dmctl.t_1"], "sql": ["alter table .* add column aaa int"]},
                   {"tables": ["dmctl.t_2"], "sql": ["alter table .* add column aaa int"]}],
        "notes": {"from.password": NoteKind.OPERATOR, "purge": NoteKind.NOT_NEEDED, "checker": NoteKind.NOT_NEEDED,
                  "relay-dir": NoteKind.NOT_NEEDED, "filters": NoteKind.NOT_MAPPED}},
    SOURCE1: {
        "source": {"host": "127.0.0.1", "port": 3306, "user": "root"},
        "notes": {"checker": NoteKind.NOT_NEEDED}},
    "tiflow__dm__tests__mariadb_source__conf__source1.yaml": {
        "source": {"host": "127.0.0.1", "port": 3308, "user": "root", "flavor": "mariadb"},
        "notes": {"enable-relay": NoteKind.NOT_NEEDED, "checker": NoteKind.NOT_NEEDED}},
    "docs-dm__master__en__source-configuration-file__block1.yaml": {
        "source": {"host": "127.0.0.1", "port": 3306, "user": "root", "tls": {"mode": "required"}},
        "notes": {"relay-dir": NoteKind.NOT_NEEDED, "from.security": NoteKind.NOT_MAPPED}},
}


def dm(name: str) -> str:
    return str(DM / name)


def password_env(config: dict[str, Any]) -> dict[str, str]:
    servers = [*config["sources"], config["target"]]
    return {s["password_env"]: "secret" for s in servers if "password_env" in s}


def loads_as_config(imported: Imported, tmp_path: Path) -> TaskConfig:
    """The YAML written (header comments and all) is a task config our validation takes."""
    out = tmp_path / "task.yaml"
    out.write_text(render_yaml(imported, out))
    config = load_config(out, environ=password_env(imported.config))
    assert config.task == imported.config["task"]
    assert [s.id for s in config.sources] == [s["id"] for s in imported.config["sources"]]
    return config


def fields(imported: Imported, kind: NoteKind) -> dict[str, str]:
    return {n.field: n.message for n in imported.notes if n.kind is kind}


def dm_data(name: str) -> Any:
    return yaml.safe_load((DM / name).read_text())


def task_of(data: Any, where: str = "task.yaml") -> Field:
    return Field(where, "", data)


# -- every file ---------------------------------------------------------------------------------


def test_the_files_are_33_tasks_and_7_sources():
    kinds = {}
    for path in sorted(DM.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        kinds[path.name] = "task" if "mysql-instances" in data else "source" if "source-id" in data else "?"
    assert sorted(n for n, k in kinds.items() if k == "task") == sorted(TASKS)
    assert sorted(n for n, k in kinds.items() if k == "source") == sorted(SOURCES)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_file_imports_or_is_refused_naming_the_field(name, tmp_path):
    expected = TASKS[name]
    if isinstance(expected, tuple):
        field, problem = expected
        with pytest.raises(ConfigError) as caught:
            import_dm(dm(name))
        assert str(caught.value).startswith(f"{dm(name)}: {field}: ")
        assert problem in str(caught.value)
        return
    imported = import_dm(dm(name))
    placeholders = {f for f in fields(imported, NoteKind.NOT_MAPPED) if f.endswith(".source-id")}
    instances = dm_data(name)["mysql-instances"]
    assert placeholders == {f"mysql-instances[{i}].source-id" for i in range(len(instances))}
    assert all(s["host"] == PLACEHOLDER_HOST for s in imported.config["sources"])
    assert sorted(set(fields(imported, NoteKind.NOT_MAPPED)) - placeholders) == expected
    assert (imported.config["routes"] == [PLACEHOLDER_ROUTE]) == ("routes" in expected)
    loads_as_config(imported, tmp_path)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_source_file_gives_its_source(name, tmp_path):
    expected = SOURCES[name]
    imported = import_dm(dm(OPTIMISTIC), [dm(name)])
    source = imported.config["sources"][0]
    assert source["id"] == "mysql-replica-01"
    assert {k: source[k] for k in expected["source"]} == expected["source"]
    assert source.get("password_env") == "SHARDMERGE_MYSQL_REPLICA_01_PASSWORD"
    if "server_id" not in expected["source"]:
        assert source["server_id"] == SERVER_ID_BASE + 1
    if "flavor" not in expected["source"]:
        assert "flavor" not in source  # none or '': detected from the server, as DM does
    notes = {n.field: n.kind for n in imported.notes if n.file == dm(name)}
    assert {f: notes.get(f) for f in expected["notes"]} == expected["notes"]
    assert imported.config.get("filters", {}).get("events", []) == expected.get("events", [])
    # the other instance has no source file of its own (every one here is mysql-replica-01)
    assert imported.config["sources"][1]["host"] == PLACEHOLDER_HOST
    loads_as_config(imported, tmp_path)


# -- what maps how ------------------------------------------------------------------------------


def test_the_shard_merge_example_of_dms_docs():
    imported = import_dm(dm(SHARD_MERGE))
    config = imported.config
    assert config["task"] == "shard_merge"
    assert config["task_mode"] == "all"
    assert [s["id"] for s in config["sources"]] == ["instance-1", "instance-2", "instance-3"]
    assert [s["server_id"] for s in config["sources"]] == [SERVER_ID_BASE + 1, SERVER_ID_BASE + 2, SERVER_ID_BASE + 3]
    assert config["target"] == {"host": "192.168.0.1", "port": 4000, "user": "root", "flavor": "tidb"}
    # the table route merges; the schema routes have no equivalent: one pairs with it, one not
    assert config["routes"] == [{"schema": "store_*", "table": "sale_*", "target": "store.sale"}]
    not_mapped, not_needed = fields(imported, NoteKind.NOT_MAPPED), fields(imported, NoteKind.NOT_NEEDED)
    assert "schema-level route (table names kept) has no equivalent" in not_mapped["routes.user-route-rule"]
    assert "beside the table route into store.sale" in not_needed["routes.store-route-rule"]
    # the doc's misspelt ignore-tales: read as nothing, said so
    assert "did you mean 'ignore-tables'?" in not_mapped["block-allow-list.log-bak-ignored.ignore-tales"]
    assert set(config["filters"]) == {"events"}  # the rule's one field is the misspelt one
    assert config["filters"]["events"] == [
        {"tables": ["user.*"], "ignore": ["truncate table", "drop table", "delete"]},
        {"tables": ["store_*.sale_*"], "ignore": ["truncate table", "drop table", "delete"]},
    ]
    assert "DROP DATABASE upstream never drops anything downstream" in not_needed["filters.store-filter-rule.events"]
    assert config["options"] == {"workers": 16, "batch_size": 100}
    assert "syncers.global.max-retry" in not_needed
    assert "ignore-checking-items" in not_needed and "mydumpers" in not_needed and "loaders" in not_needed


def test_the_full_task_file_of_dms_docs():
    imported = import_dm(dm(FULL))
    config = imported.config
    assert config["task"] == "test" and config["task_mode"] == "all"
    assert config["routes"] == [{"schema": "test_*", "table": "t_*", "target": "test.t"}]
    # bw-rule-1: do-tables (regexes as globs) decide, do-dbs covering their schemas; but the second
    # instance names no rule, so (our filters being every source's) everything is allowed, noted
    rule = Field(dm(FULL), "block-allow-list.bw-rule-1", dm_data(FULL)["block-allow-list"]["bw-rule-1"])
    assert ba_rule(rule)[0].allow == ("test*.t*", "user.information")
    assert "allow" not in config["filters"] and "block" not in config["filters"]
    assert "bw-rule-1 (mysql-replica-01); others none" in fields(imported, NoteKind.NOT_MAPPED)["block-allow-list"]
    assert config["filters"]["events"] == [{"tables": ["test_*.t_*"], "ignore": ["truncate table", "drop table"]}]
    assert config["online_ddl"] == "both"
    assert config["validator"] == {"mode": "full", "error_delay": 1800.0}
    assert config["options"] == {"workers": 16, "batch_size": 100, "safe_mode_window": 60.0}
    # the target's TLS files are not on this machine: encrypted still, noted
    assert config["target"]["tls"] == {"mode": "required"}
    assert config["target"]["password_env"] == "SHARDMERGE_TARGET_PASSWORD"
    assert "password" not in config["target"]
    # the task-mode is all: meta does not start the streams
    assert all("start" not in s for s in config["sources"])
    not_mapped = fields(imported, NoteKind.NOT_MAPPED)
    assert "not offered: the join takes every change that joins" in not_mapped["shard-mode"]
    assert "pauses only its shard" in not_mapped["shard-mode"]
    assert not_mapped["expression-filter.even_c"].startswith("used by mysql-replica-01 only")
    assert config["filters"]["rows"] == [{"tables": ["expr_filter.tbl"], "ignore_insert": "c % 2 = 0"}]
    assert "sql_mode, tidb_skip_utf8_check, tidb_constraint_check_in_place" in not_mapped["target-database.session"]
    assert "ignoring every other DDL is not offered" in not_mapped["filters.filter-rule-2.action"]
    assert "used by mysql-replica-01 only" in not_mapped["routes.route-rule-1"]
    not_needed = fields(imported, NoteKind.NOT_NEEDED)
    assert "task-mode incremental" in not_needed["mysql-instances[0].meta"]
    assert {"timezone", "clean-dump-file", "collation_compatible", "meta-schema"} <= set(not_needed)
    assert "block-allow-list.bw-rule-2" in not_needed  # no instance names it
    assert fields(imported, NoteKind.OPERATOR)["target-database.password"].startswith(
        "password_env SHARDMERGE_TARGET_PASSWORD")


def test_expression_filters_as_row_filters(tmp_path):
    """DM's expression-filter: each rule a row filter of its table, each kind of condition
    under our name; one we cannot evaluate on every row alike (NOW()) left out, said why."""
    imported = import_dm(dm(EXPRESSIONS))
    rows = imported.config["filters"]["rows"]
    assert rows == [
        {"tables": ["expr_filter.t2"], "ignore_insert": "c % 2 = 0"},
        {"tables": ["expr_filter.t2"], "ignore_update_old": "1 = 0", "ignore_update_new": "1 = 0"},
        {"tables": ["expr_filter.t4"], "ignore_insert": "a*a + b*b = c*c"},
        {"tables": ["expr_filter.t5"], "ignore_update_old": "c > 100"},
        {"tables": ["expr_filter.t5"], "ignore_update_new": "c > 100"},
        {"tables": ["expr_filter.t5"], "ignore_update_old": "c = 1", "ignore_update_new": "c = 2"},
        {"tables": ["expr_filter.t6"], "ignore_insert": "name != 'Müller…'"},
        {"tables": ["expr_filter.t7"], "ignore_update_new": "r = 'a'"},
    ]
    left_out = fields(imported, NoteKind.NOT_MAPPED)["expression-filter.future_date.insert-value-expr"]
    assert left_out.startswith("left out: NOW() is not deterministic")
    config = loads_as_config(imported, tmp_path)
    assert [f.ignore_insert.text for f in config.filters.rows if f.ignore_insert] == [
        "c % 2 = 0", "a*a + b*b = c*c", "name != 'Müller…'"]


def test_extract_columns_of_dm_routes():
    config = import_dm(dm("tiflow__dm__tests__extend_column__conf__dm-task.yaml")).config
    assert config["routes"] == [
        {"schema": "extend_column*", "table": "y*", "target": "extend_column.y",
         "extract": {"table": {"column": "c_table", "regex": ".*?y([0-9a-zA-Z]+).*"}}},
        # DM joins the source regexp's two groups; ours takes the whole source id (noted)
        {"schema": "extend_column*", "table": "t*", "target": "extend_column.t",
         "extract": {"table": {"column": "c_table", "regex": ".*?t(.*).*"}, "schema": "c_schema",
                     "source": "c_source"}},
    ]
    config = import_dm(dm("tiflow__dm__tests__sequence_safe_mode__conf__dm-task.yaml")).config
    assert config["routes"][0]["extract"] == {"table": "c_table", "source": "c_source"}  # (.*): the whole name


def test_online_ddl_and_index_filters():
    imported = import_dm(dm("dm__tests__online_ddl__conf__dm-task.yaml"))
    config = imported.config
    assert config["online_ddl"] == "both"
    assert [r["target"] for r in config["routes"]] == ["online_ddl.gho_t_target", "online_ddl.pt_t_target"]
    # ~^((pt)|(gho))_t[1-3]$ as globs
    assert config["filters"]["allow"] == ["online_ddl.pt_t[1-3]", "online_ddl.gho_t[1-3]"]
    assert config["filters"]["events"] == [{
        "ignore": ["add index", "drop index"],
        "sql": [r"ALTER\s.*TABLE[\s\S]*ADD\s+KEY\s+NAME", r"ALTER\s.*TABLE[\s\S]*DROP\s+KEY"],
    }]
    assert "is DM's pessimistic mode" in fields(imported, NoteKind.NOT_MAPPED)["is-sharding"]
    scheme = import_dm(dm("docs-dm__release-1.0__en__task-configuration-file-full__block1.yaml")).config
    assert scheme["online_ddl"] == "gh-ost"  # online-ddl-scheme, DM 1.0


def test_optimistic_mode_needs_nothing_and_pessimistic_is_not_offered():
    optimistic = import_dm(dm(OPTIMISTIC))
    assert fields(optimistic, NoteKind.MAPPED)["shard-mode"].startswith("nothing to set")
    pessimistic = import_dm(dm("tiflow__dm__tests__shardddl1__conf__double-source-pessimistic.yaml"))
    assert "shard-mode" in fields(pessimistic, NoteKind.NOT_MAPPED)
    assert optimistic.config == pessimistic.config  # the same task otherwise


def test_the_meta_of_an_incremental_task_starts_each_source(tmp_path):
    # as DM's test harness does: its placeholders filled in with sed
    gtid = "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5"
    text = (DM / "tiflow__dm__tests__shardddl_optimistic__conf__double-source-optimistic-incr.yaml").read_text()
    text = text.replace("pos-holder", "1234").replace("name-holder", "mysql-bin.000042").replace("gtid-holder", gtid)
    task = tmp_path / "incr.yaml"
    task.write_text(text)
    imported = import_dm(task)
    assert imported.config["task_mode"] == "incremental"
    assert [s.get("start") for s in imported.config["sources"]] == [
        {"file": "mysql-bin.000042", "pos": 1234}, {"gtid": gtid}]
    loads_as_config(imported, tmp_path)


@pytest.mark.parametrize(("source_files", "start", "noted"), [
    # no source file says enable-gtid: file and position, the GTID noted
    ([], {"file": "binlog.000001", "pos": 4}, "mysql-instances[0].meta.binlog-gtid"),
    # the worker's source file has enable-gtid: true
    (["tiflow__dm__worker__source.yaml"], {"gtid": "03fc0263-28c7-11e7-a653-6c0b84d59f30:1-7041423,"
                                           "05474d3c-28c7-11e7-8352-203db246dd3d:1-170"},
     "mysql-instances[0].meta.binlog-name"),
])
def test_meta_with_both_positions_starts_as_enable_gtid_says(source_files, start, noted):
    data = dm_data(FULL)
    data["task-mode"] = "incremental"
    files = [task_of(dm_data(f), f) for f in source_files]
    imported = convert(task_of(data), files)
    assert imported.config["sources"][0]["start"] == start
    assert noted in fields(imported, NoteKind.MAPPED)


def test_a_fully_mapped_task_has_no_unmapped_note(tmp_path):
    imported = import_dm(dm(OPTIMISTIC), [dm(SOURCE1), write_source2(tmp_path)])
    assert imported.not_mapped == ()
    sources = imported.config["sources"]
    assert [(s["id"], s["host"], s["port"]) for s in sources] == [
        ("mysql-replica-01", "127.0.0.1", 3306), ("mysql-replica-02", "127.0.0.1", 3307)]
    assert imported.config["filters"] == {"allow": ["shardddl1.*", "shardddl2.*"]}
    assert imported.config["routes"] == [{"schema": "shardddl*", "table": "tb*", "target": "shardddl.tb"}]


def test_passwords_kept_when_asked(tmp_path):
    imported = import_dm(dm(OPTIMISTIC), [dm(SOURCE1), write_source2(tmp_path)], keep_passwords=True)
    assert imported.config["target"]["password"] == "123456"
    assert all(s["password"] == "123456" for s in imported.config["sources"])
    assert "password_env" not in imported.config["target"]
    masked = import_dm(dm("tiflow__dm__tests__dmctl_basic__conf__get_task.yaml"), keep_passwords=True)
    assert masked.config["target"]["password_env"] == "SHARDMERGE_TARGET_PASSWORD"  # '******' is no password


def test_tls_files_that_can_be_read_are_verified(tmp_path):
    for name in ("ca.pem", "cert.pem", "key.pem"):
        (tmp_path / name).write_text("x")
    data = dm_data("tiflow__dm__tests__tls__conf__source1.yaml")
    data["from"]["security"] = {"ssl-ca": str(tmp_path / "ca.pem"), "ssl-cert": str(tmp_path / "cert.pem"),
                                "ssl-key": str(tmp_path / "key.pem")}
    imported = convert(task_of(dm_data(OPTIMISTIC)), [task_of(data, "source1.yaml")])
    assert imported.config["sources"][0]["tls"] == {
        "mode": "verify_ca", "ca": str(tmp_path / "ca.pem"), "cert": str(tmp_path / "cert.pem"),
        "key": str(tmp_path / "key.pem")}


def write_source2(tmp_path: Path) -> str:
    """A second source file, as DM's shardddl1 test has it (source2.yaml is not among the files)."""
    text = (DM / SOURCE1).read_text().replace("mysql-replica-01", "mysql-replica-02").replace("3306", "3307")
    path = tmp_path / "source2.yaml"
    path.write_text(text)
    return str(path)


# -- parts ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("rule", "allow", "block"), [
    ({"do-dbs": ["shop_*"]}, ["shop_*.*"], []),
    ({"do-dbs": ["shop"], "ignore-tables": [{"db-name": "shop", "tbl-name": "log"}]}, ["shop.*"], ["shop.log"]),
    ({"ignore-dbs": ["mysql", "tmp*"]}, [], ["mysql.*", "tmp*.*"]),
    # do-tables decide; DM reads neither ignore-tables nor (with do-dbs) ignore-dbs then
    ({"do-dbs": ["~^s[\\d]+"], "ignore-dbs": ["x"], "do-tables": [{"db-name": "~^s[\\d]+", "tbl-name": "~^t[\\d]+"}],
      "ignore-tables": [{"db-name": "s1", "tbl-name": "t1"}]}, ["s[0-9]*.t[0-9]*"], []),
    ({"ignore-dbs": ["x"], "do-tables": [{"db-name": "a", "tbl-name": "b"}]}, ["a.b"], ["x.*"]),
    # no glob for a counted repetition: allowed widely, not blocked (noted)
    ({"do-tables": [{"db-name": "a", "tbl-name": "~^t{2}"}]}, ["a.*"], []),
    ({"ignore-tables": [{"db-name": "a", "tbl-name": "~^t{2}"}]}, [], []),
])
def test_block_allow_list_rules(rule, allow, block):
    allowed, _ = ba_rule(Field("task.yaml", "block-allow-list.r", rule))
    assert (list(allowed.allow), list(allowed.block)) == (allow, block)


@pytest.mark.parametrize(("rule", "ours", "kinds"), [
    ({"schema-pattern": "s*", "table-pattern": "t?", "events": ["all dml", "create index"], "action": "Ignore"},
     {"tables": ["s*.t?"], "ignore": ["insert", "update", "delete", "add index"]}, []),
    ({"schema-pattern": "s", "events": ["drop database"], "action": "Ignore"}, None, [NoteKind.NOT_NEEDED]),
    ({"schema-pattern": "s", "events": ["rename table"], "action": "Ignore"}, None, [NoteKind.NOT_MAPPED]),
    ({"schema-pattern": "*", "events": ["all"], "action": "Do"}, None, [NoteKind.MAPPED]),
    ({"schema-pattern": "*", "events": ["insert"], "action": "Do"}, {"ignore": ["update", "delete"]},
     [NoteKind.NOT_MAPPED]),
    ({"schema-pattern": "*", "sql-pattern": ["^DROP\\s+PROCEDURE", "("], "action": "Ignore"},
     {"sql": ["^DROP\\s+PROCEDURE"]}, [NoteKind.NOT_MAPPED]),
    # DM 6's Error (the task stops on a match): noted, not refused (issue 71)
    ({"schema-pattern": "s", "events": ["truncate table"], "action": "Error"}, None, [NoteKind.NOT_MAPPED]),
])
def test_binlog_event_filters(rule, ours, kinds):
    found, notes = event_filter(Field("task.yaml", "filters.f", rule))
    assert found == ours
    assert [n.kind for n in notes] == kinds


@pytest.mark.parametrize(("regex", "globs"), [
    ("^test.*", ("test*",)),
    ("^t_[\\d]+", ("t_[0-9]*",)),
    ("^((pt)|(gho))_t[1-3]$", ("pt_t[1-3]", "gho_t[1-3]")),
    ("t.*", ("*t*",)),
    ("^dm_syncer_do_db_.", ("dm_syncer_do_db_?*",)),
    ("^a(b|c)?d$", ("ad", "abd", "acd")),
    ("^t[^0-9]x$", ("t[!0-9]x",)),
    ("^a\\.b\\*$", ("a.b[*]",)),
])
def test_regexes_as_globs(regex, globs):
    assert regex_globs(regex) == globs


@pytest.mark.parametrize("regex", ["^x{2}", "^a+b$", "(?=x)", "^a\\s", "^(a|b)+c$"])
def test_regexes_no_glob_expresses(regex):
    with pytest.raises(NoGlob):
        regex_globs(regex)


@pytest.mark.parametrize(("regex", "whole"), [
    ("t_(.*)", ".*?t_(.*).*"),
    ("^(.*)$", "(.*)"),
    ("^_(.+)_gho$", "_(.+)_gho"),
    ("a|b", ".*?(?:a|b).*"),
])
def test_searched_regexes_as_whole_name_ones(regex, whole):
    assert whole_name_regex(regex) == whole


@pytest.mark.parametrize(("text", "seconds"), [("60s", 60), ("30m0s", 1800), ("1m30s", 90), ("500ms", 0.5),
                                               ("0s", 0), ("1h", 3600)])
def test_go_durations(text, seconds):
    assert go_seconds(text) == seconds


@pytest.mark.parametrize("text", ["60", "1x", "", "s"])
def test_bad_go_durations(text):
    with pytest.raises(ValueError, match="expected a duration"):
        go_seconds(text)


@pytest.mark.parametrize(("data", "problem"), [
    ([1, 2], "task.yaml: not a DM task file: expected a mapping of DM task fields, got list"),
    ({"name": "x"}, "task.yaml: not a DM task file: no mysql-instances"),
    ({"source-id": "s", "from": {"host": "h"}}, "task.yaml: a DM source file (source-id, from), not a task file"),
    ({"name": "x", "task-mode": "dump", "mysql-instances": [{"source-id": "s"}]}, "task.yaml: task-mode: expected all, full or incremental"),
    ({"name": "x", "task-mode": "all", "mysql-instances": [{"source-id": "s", "route-rules": ["r"]}],
      "target-database": {"host": "h", "user": "u"}}, "task.yaml: mysql-instances[0].route-rules[0]: no rule 'r' in routes"),
    ({"name": "x", "task-mode": "all", "mysql-instances": [{"source-id": "s"}]}, "task.yaml: target-database: missing"),
])
def test_files_that_are_not_dm_tasks_are_refused(data, problem):
    with pytest.raises(ConfigError) as caught:
        convert(task_of(data))
    assert str(caught.value).startswith(problem)


def test_a_source_file_given_twice_or_a_task_as_source_is_refused():
    task = task_of(dm_data(OPTIMISTIC))
    with pytest.raises(ConfigError, match=re.escape("b.yaml: source-id: 'mysql-replica-01' is also the source-id of a.yaml")):
        convert(task, [task_of(dm_data(SOURCE1), "a.yaml"), task_of(dm_data(SOURCE1), "b.yaml")])
    with pytest.raises(ConfigError, match=re.escape("b.yaml: a DM task file, not a source file")):
        convert(task, [task_of(dm_data(OPTIMISTIC), "b.yaml")])


# -- the command ----------------------------------------------------------------------------------


def shardmerge(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli.shardmerge", "import-dm", *args],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )


def test_the_command_writes_the_config_and_exits_0_when_everything_mapped(tmp_path):
    out = tmp_path / "shardddl.yaml"
    done = shardmerge(dm(OPTIMISTIC), dm(SOURCE1), write_source2(tmp_path), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    text = out.read_text()
    assert text.startswith(f"# Imported by `shardmerge import-dm` from the DM task {dm(OPTIMISTIC)} with ")
    assert f"shardmerge check --config {out}" in text
    config = yaml.safe_load(text)
    assert load_config(out, environ=password_env(config)).routes[0].target == "shardddl.tb"
    assert "operator: target-database.password: password_env SHARDMERGE_TARGET_PASSWORD" in done.stderr
    assert done.stderr.rstrip().splitlines()[-1].startswith(f"imported {dm(OPTIMISTIC)}: ")


def test_the_command_exits_4_when_fields_could_not_be_mapped(tmp_path):
    name = "tiflow__dm__tests__shardddl1__conf__double-source-pessimistic.yaml"
    done = shardmerge(dm(name))
    assert done.returncode == 4, done.stderr
    config = yaml.safe_load(done.stdout)
    assert config["task"] == "test" and config["routes"][0]["target"] == "shardddl.tb"
    assert "not mapped: shard-mode: not offered" in done.stderr
    assert "# not mapped (3):" in done.stdout  # the shard mode and the two placeholder sources
    assert "#   shard-mode: not offered" in done.stdout


def test_the_command_as_json():
    done = shardmerge(dm(SHARD_MERGE), "--json")
    assert done.returncode == 4, done.stderr
    report = json.loads(done.stdout)
    assert report["config"] == import_dm(dm(SHARD_MERGE)).config
    assert report["not_mapped"] == len([n for n in report["notes"] if n["kind"] == "not mapped"]) == 5
    assert {"file", "field", "kind", "message"} == set(report["notes"][0])


@pytest.mark.parametrize(("make", "message"), [
    (lambda d: dm(SOURCE1), f"{dm(SOURCE1)}: a DM source file (source-id, from), not a task file"),
    (lambda d: write(d / "bad.yaml", "name: [\n"), "bad.yaml: line 2, column 1: invalid YAML"),
    (lambda d: str(d / "missing.yaml"), "missing.yaml: cannot read"),
    (lambda d: dm("docs__migrate-large-mysql-shards-to-tidb__block2.yaml"),
     "mysql-instances[0].meta.binlog-name: '${binlog-name}' is a template placeholder"),
])
def test_the_command_refuses_a_bad_file_in_one_line(tmp_path, make, message):
    done = shardmerge(make(tmp_path))
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("shardmerge import-dm: ") and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_command_refuses_a_task_given_as_a_source_file():
    done = shardmerge(dm(OPTIMISTIC), dm(OPTIMISTIC))
    assert done.returncode == 2 and "a DM task file, not a source file" in done.stderr
    assert "Traceback" not in done.stderr


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_the_command_has_its_help():
    done = subprocess.run([sys.executable, "-m", "replicator.cli.shardmerge", "import-dm", "--help"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert "example:" in done.stdout and "exit status: 0 done" in done.stdout and "--keep-passwords" in done.stdout


@pytest.mark.parametrize("args", ["--where 'id > 10'", "-t 4 -W 'a=1'", "--where='id>1' --threads 2"])
def test_a_dump_where_is_noted_not_mapped(args):
    """Issue 71: DM's dump `--where` selects rows of the full copy; ours copies every row:
    said, with the filter that does act on the backfill."""
    task = {
        "name": "t", "task-mode": "all", "target-database": {"host": "h", "port": 3306, "user": "u"},
        "mysql-instances": [{"source-id": "s", "block-allow-list": "b", "mydumper-config-name": "d"}],
        "block-allow-list": {"b": {"do-dbs": ["shop"]}},
        "mydumpers": {"d": {"threads": 4, "extra-args": args}},
    }
    notes = [n for n in dump_and_load(Field("task.yaml", "", task), [("s", Field("task.yaml", "mysql-instances[0]",
                                                                                   task["mysql-instances"][0]))])]
    where = [n for n in notes if n.field == "mydumpers.d.extra-args"]
    assert [n.kind for n in where] == [NoteKind.NOT_MAPPED] and "--where" in where[0].message


def test_a_dump_without_where_has_no_where_note():
    task = {"mydumpers": {"d": {"extra-args": "--threads 4 --no-locks"}}}
    assert not [n for n in dump_and_load(Field("task.yaml", "", task), []) if "extra-args" in n.field]
