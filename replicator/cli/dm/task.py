"""A DM task file (with its DM source files) as our task config: a plain dict in the format
of configs/example.yaml, and a note for each DM field that needs a word (how it maps, why it
does not, what the operator must do). The config is checked by our own validation before it is
returned: what `import_dm` gives, `load_config` takes. No server is contacted.

A DM file that cannot be imported (not a task file, a template placeholder or an invalid value
where a value is needed, such as a start position) raises ConfigError naming the file and the
DM field. What is merely missing (a source file, a route into a named table) gets a placeholder
that cannot reach or route anything, and a note."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replicator.cli.dm.events import event_filters, source_filters
from replicator.cli.dm.expressions import expression_filters
from replicator.cli.dm.fields import Field, safe_name
from replicator.cli.dm.notes import Note, NoteKind, Notes
from replicator.cli.dm.rules import rule_uses, rules_of
from replicator.cli.dm.servers import source_files, sources, target
from replicator.cli.dm.tables import ba_rules, block_allow, online_ddl, routes
from replicator.cli.dm.units import dump_and_load, options, validator
from replicator.config import TASK_MODES, ConfigError, parse_config, read_yaml

# Where the task routes no table into a named one: our config needs a route; this one matches no
# table, so `shardmerge check` says so and the daemon refuses to start until it is replaced.
PLACEHOLDER_ROUTE = {"schema": "CHANGE_ME", "table": "CHANGE_ME", "target": "CHANGE_ME.CHANGE_ME"}
_JOIN = 'the downstream table is the join of the shards\' schemas (docs/design.md "The join")'
_HEARTBEAT = (
    "shardmerge writes no heartbeat table upstream; each source's binlog heartbeat is options.heartbeat"
)
# Task fields with nothing to set here, noted when set (not false, empty or null): kind, why.
_TOP_NOTES: dict[str, tuple[NoteKind, str]] = {
    "enable-heartbeat": (NoteKind.NOT_NEEDED, _HEARTBEAT),
    "heartbeat-update-interval": (NoteKind.NOT_NEEDED, _HEARTBEAT),
    "heartbeat-report-interval": (NoteKind.NOT_NEEDED, _HEARTBEAT),
    "timezone": (
        NoteKind.NOT_NEEDED,
        "shardmerge writes TIMESTAMPs in UTC (time_zone +00:00), as the binlog has them",
    ),
    "clean-dump-file": (NoteKind.NOT_NEEDED, "the Spark backfill writes no dump files"),
    "collation_compatible": (
        NoteKind.NOT_NEEDED,
        "the downstream table is created from the shards' CREATE TABLE as the join has it, collations "
        "included",
    ),
    "ignore-checking-items": (
        NoteKind.NOT_NEEDED,
        "`shardmerge check` skips nothing: fix its errors; its warnings (such as AUTO_INCREMENT keys that "
        "would collide across shards) may stay",
    ),
    "remove-meta": (
        NoteKind.NOT_NEEDED,
        "to start a task from scratch, delete its rows (task = its name) from the meta schema's tables while "
        "its daemon is stopped, or give it another name",
    ),
    "ansi-quotes": (
        NoteKind.NOT_MAPPED,
        "not offered: shardmerge has no ANSI_QUOTES setting for the DDL it parses",
    ),
    "experimental": (NoteKind.NOT_NEEDED, "DM's experimental features: none to carry over"),
    "strict-optimistic-shard-mode": (
        NoteKind.NOT_MAPPED,
        "not offered: shardmerge takes every change that joins, and a change that conflicts pauses its shard",
    ),
}
_HANDLED = (
    "name",
    "task-mode",
    "shard-mode",
    "is-sharding",
    "case-sensitive",
    "meta-schema",
    "target-database",
    "mysql-instances",
    "routes",
    "filters",
    "block-allow-list",
    "black-white-list",
    "online-ddl",
    "online-ddl-scheme",
    "shadow-table-rules",
    "trash-table-rules",
    "expression-filter",
    "column-mappings",
    "mydumpers",
    "loaders",
    "syncers",
    "validators",
)
_INSTANCE_FIELDS = (
    "source-id",
    "meta",
    "route-rules",
    "filter-rules",
    "block-allow-list",
    "black-white-list",
    "expression-filters",
    "column-mapping-rules",
    "mydumper-config-name",
    "mydumper",
    "mydumper-thread",
    "loader-config-name",
    "loader",
    "loader-thread",
    "syncer-config-name",
    "syncer",
    "syncer-thread",
    "validator-config-name",
)
# Sections of rules we do not offer: the instances' key naming them, and why.
_UNOFFERED = {
    "column-mappings": (
        "column-mapping-rules",
        "deprecated in DM and not offered: keep the shards' keys apart with extract columns "
        "(routes[].extract)",
    ),
}


@dataclass(frozen=True)
class Imported:
    config: dict[str, Any]  # our task config, as its YAML would load
    notes: Notes
    task_file: str
    source_files: tuple[str, ...]

    @property
    def not_mapped(self) -> Notes:
        return tuple(n for n in self.notes if n.kind is NoteKind.NOT_MAPPED)


def import_dm(
    task_path: str | Path, source_paths: Sequence[str | Path] = (), *, keep_passwords: bool = False
) -> Imported:
    """Read a DM task file and its DM source files and convert them (`convert`)."""
    files = [Field(str(p), "", read_yaml(p)) for p in source_paths]
    return convert(Field(str(task_path), "", read_yaml(task_path)), files, keep_passwords=keep_passwords)


def convert(task: Field, files: Sequence[Field] = (), *, keep_passwords: bool = False) -> Imported:
    """A parsed DM task (`task.value`) and its parsed source files as our config and notes."""
    _check_task_file(task)
    notes: list[Note] = []
    name, found = safe_name(task.child("name"), "task name")
    notes += found
    task_mode = _task_mode(task.child("task-mode"))
    by_source_id = source_files(files)
    sources_out, instances, found = sources(
        task.child("mysql-instances"), by_source_id, task_mode, keep_passwords=keep_passwords
    )
    notes += found
    target_out, found = target(task.child("target-database"), keep_passwords=keep_passwords)
    notes += found
    routes_out, found = _routes(task, instances)
    notes += found
    filters_out, found = _filters(task, instances, [by_source_id.get(_dm_id(i)) for _, i in instances])
    notes += found
    online, found = online_ddl(task)
    notes += found
    validators = rules_of(task.child("validators"))
    validator_out, found = validator(
        validators, rule_uses(instances, validators, "validators", "validator-config-name")
    )
    notes += found
    options_out, found = options(instances, rules_of(task.child("syncers")))
    notes += found
    notes += dump_and_load(task, instances)
    notes += _task_notes(task, instances)
    # in the order of configs/example.yaml; sections DM leaves empty are left out
    config: dict[str, Any] = {
        "task": name,
        "task_mode": task_mode,
        "sources": sources_out,
        "target": target_out,
        "routes": routes_out,
        "filters": filters_out,
        "online_ddl": online,
        "validator": validator_out,
        "options": options_out,
    }
    config = {k: v for k, v in config.items() if v}
    _validate(config, task.where)
    return Imported(config, tuple(notes), task.where, tuple(f.where for f in files))


def _check_task_file(task: Field) -> None:
    if not isinstance(task.value, dict):
        raise task.error(
            f"not a DM task file: expected a mapping of DM task fields, got {type(task.value).__name__}"
        )
    if task.child("source-id").given and task.child("from").given:
        raise task.error("a DM source file (source-id, from), not a task file: give the task file first")
    if not task.child("mysql-instances").given:
        raise task.error("not a DM task file: no mysql-instances (a DM task lists its sources there)")


def _task_mode(field: Field) -> str:
    mode = (field.text(required=True) or "").lower()
    if mode not in TASK_MODES:
        raise field.error(
            f"expected all, full or incremental, got {field.value!r} (dump and load&sync are not offered)"
        )
    return mode


def _dm_id(instance: Field) -> str:
    return instance.child("source-id").text() or ""


def _routes(task: Field, instances: Sequence[tuple[str, Field]]) -> tuple[list[dict[str, Any]], Notes]:
    rules = rules_of(task.child("routes"))
    out, notes = routes(rules, rule_uses(instances, rules, "routes", "route-rules"))
    if not out:
        none = task.child("routes").note(
            NoteKind.NOT_MAPPED,
            "no route into a named table (target-schema and target-table): a DM task without one copies "
            "tables one to one, which shardmerge does not do (it merges the shard tables of each route "
            f"into one table); the route written, into {PLACEHOLDER_ROUTE['target']}, matches no table (the "
            "daemon refuses to start on it): replace it with yours",
        )
        return [dict(PLACEHOLDER_ROUTE)], (*notes, none)
    only_routed = task.child("routes").note(
        NoteKind.MAPPED,
        "only tables a route names are replicated; DM also copies every other table its block-allow-list "
        "lets through, under its own name",
    )
    return out, (*notes, only_routed)


def _filters(
    task: Field, instances: Sequence[tuple[str, Field]], files: Sequence[Field | None]
) -> tuple[dict[str, Any], Notes]:
    rules, notes = ba_rules(task)
    uses = rule_uses(instances, rules, "block-allow-list", "block-allow-list", "black-white-list")
    out, found = block_allow(rules, uses, task.child("block-allow-list"))
    notes += found
    event_rules = rules_of(task.child("filters"))
    events, found = event_filters(event_rules, rule_uses(instances, event_rules, "filters", "filter-rules"))
    notes += found
    for file in (f for f in files if f is not None):  # one per source: source ids are distinct
        more, found = source_filters(file, len(instances))
        events += more
        notes += found
    if events:
        out["events"] = events
    expression_rules = rules_of(task.child("expression-filter"))
    rows, found = expression_filters(
        expression_rules, rule_uses(instances, expression_rules, "expression-filter", "expression-filters")
    )
    notes += found
    if rows:
        out["rows"] = rows
    return out, notes


def _task_notes(task: Field, instances: Sequence[tuple[str, Field]]) -> Notes:
    notes: list[Note] = [*task.unknown((*_HANDLED, *_TOP_NOTES)), *_shard_mode(task)]
    for key, (kind, why) in _TOP_NOTES.items():
        field = task.child(key)
        if field.given and field.value is not False:
            notes.append(field.note(kind, why))
    notes += _case_sensitive(task.child("case-sensitive"))
    if task.child("meta-schema").given:
        notes.append(
            task.child("meta-schema").note(
                NoteKind.NOT_NEEDED,
                "DM's checkpoints there mean nothing to shardmerge, which keeps its own state in "
                "target.meta_schema (default shardmerge_meta, so the two never mix); set it to use another "
                "schema",
            )
        )
    for section, (key, why) in _UNOFFERED.items():
        rules = rules_of(task.child(section))
        uses = rule_uses(instances, rules, section, key)
        notes += [rules[name].note(NoteKind.NOT_MAPPED, why) for name in uses.by_rule]
        notes += uses.unused_notes(rules)
    for _, instance in instances:
        notes += instance.unknown(_INSTANCE_FIELDS)
    return tuple(notes)


def _shard_mode(task: Field) -> Notes:
    field, sharding = task.child("shard-mode"), task.child("is-sharding")
    mode = (field.text() or "").lower()
    pessimistic = (
        "not offered: the join takes every change that joins, and a change that conflicts pauses only its "
        "shard (DM's pessimistic mode holds every shard's DDL until all have run it)"
    )
    if mode == "optimistic":
        return (field.note(NoteKind.MAPPED, f"nothing to set: {_JOIN}, always"),)
    if mode == "pessimistic":
        return (field.note(NoteKind.NOT_MAPPED, pessimistic),)
    if mode:
        raise field.error(f"expected optimistic, pessimistic or empty, got {field.value!r}")
    if sharding.flag():
        return (
            sharding.note(
                NoteKind.NOT_MAPPED, f"true with no shard-mode is DM's pessimistic mode: {pessimistic}"
            ),
        )
    if sharding.value is False or "shard-mode" in task.mapping():
        where = field if "shard-mode" in task.mapping() else sharding
        return (where.note(NoteKind.MAPPED, f"no shard DDL coordination in DM; here {_JOIN}, always"),)
    return ()


def _case_sensitive(field: Field) -> Notes:
    if field.value is True:
        return (field.note(NoteKind.MAPPED, "as ours: names are matched case-sensitively"),)
    if field.value is False:
        why = (
            "shardmerge matches names case-sensitively (as table names on Linux servers), where DM ignored "
            "case: the patterns are kept as written; check them against the upstream names' case"
        )
        return (field.note(NoteKind.MAPPED, why),)
    return ()


def _validate(config: dict[str, Any], where: str) -> None:
    """Our own validation, offline: the password variables named are taken as set."""
    servers = [*config["sources"], config["target"]]
    environ = {s["password_env"]: "" for s in servers if "password_env" in s}
    try:
        parse_config(config, f"{where} (imported)", environ=environ)
    except ConfigError as exc:
        raise ConfigError(
            f"{where}: the imported config does not pass validation (a bug of import-dm): {exc}"
        ) from exc
