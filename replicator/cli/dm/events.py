"""DM's binlog event filters (`filters` of a task, and of a source file) as our
`filters.events`: the events of matching tables that are ignored.

Ours only ignore (DM's action Ignore); DM's action Do, which lets through only the
events it lists, is imported where it lists every event (nothing to do) or for its
row events (the others become ignored ones); ignoring every DDL it does not list has no
equivalent here: a DDL that changes columns must reach the join."""

from __future__ import annotations

from typing import Any

from replicator.cli.dm.fields import Field
from replicator.cli.dm.notes import Note, NoteKind, Notes
from replicator.cli.dm.patterns import glob
from replicator.cli.dm.rules import Rules, Uses, import_rules
from replicator.config import check_regex

_FILTER_FIELDS = ("schema-pattern", "table-pattern", "events", "sql-pattern", "action")
ROW_EVENTS = ("insert", "update", "delete")
# DM's event names -> ours (config.EVENT_KINDS)
EVENTS = {
    "insert": ("insert",),
    "update": ("update",),
    "delete": ("delete",),
    "all dml": ROW_EVENTS,
    "truncate table": ("truncate table",),
    "drop table": ("drop table",),
    "create index": ("add index",),
    "drop index": ("drop index",),
    "drop column": ("drop column",),
}
# DM's events that need no filter here, and why
NEEDLESS = {
    "drop database": "a DROP DATABASE upstream never drops anything downstream here: its shards leave their "
    "groups and their rows stay downstream",
    "drop schema": "a DROP DATABASE upstream never drops anything downstream here: its shards leave their "
    "groups and their rows stay downstream",
    "create database": "shardmerge creates the target schema itself and runs no upstream CREATE DATABASE",
    "create schema": "shardmerge creates the target schema itself and runs no upstream CREATE DATABASE",
}


def event_filters(rules: Rules, uses: Uses) -> tuple[list[dict[str, Any]], Notes]:
    """The filters the instances name (filter-rules), for every source."""
    return import_rules(rules, uses, "event filters", event_filter)


def source_filters(source_file: Field, task_sources: int) -> tuple[list[dict[str, Any]], Notes]:
    """A source file's own filters (a list): DM applies them to that source's every task."""
    field = source_file.child("filters")
    out: list[dict[str, Any]] = []
    notes: list[Note] = []
    for item in field.items():
        found, found_notes = event_filter(item)
        notes += found_notes
        if found is not None:
            out.append(found)
    if out and task_sources > 1:
        notes.append(
            field.note(NoteKind.NOT_MAPPED, "a source's own filters: shardmerge's apply to every source")
        )
    return out, tuple(notes)


def event_filter(rule: Field) -> tuple[dict[str, Any] | None, Notes]:
    """One DM filter rule as ours (None: it ignores nothing we can ignore)."""
    notes: list[Note] = list(rule.unknown(_FILTER_FIELDS))
    schema = rule.child("schema-pattern").text() or "*"
    table = rule.child("table-pattern").text() or "*"
    events_field = rule.child("events")
    events = [e.lower() for e in events_field.texts()]
    action = (rule.child("action").text(required=True) or "").lower()
    if action == "error":
        # (DM 6+: the task stops with an error on a matching event, for the operator to act)
        notes.append(
            rule.child("action").note(
                NoteKind.NOT_MAPPED,
                "Error (DM stops the task on a matching event): shardmerge has no such action, so "
                "those events go through; ignore them (action Ignore) or pause the shard "
                "(`shardctl pause-task --source S --table T`) where they must not",
            )
        )
        return None, tuple(notes)
    if action not in ("ignore", "do"):
        raise rule.child("action").error(f"expected Ignore, Do or Error, got {rule.child('action').value!r}")
    if action == "do":
        ignore, sql = _do(rule, events, notes)
    else:
        ignore, sql = _ignore(events_field, events, notes), _patterns(rule.child("sql-pattern"), notes)
    if not ignore and not sql:
        return None, tuple(notes)
    out: dict[str, Any] = {}
    tables = f"{glob(schema)}.{glob(table)}"
    if tables != "*.*":
        out["tables"] = [tables]
    if ignore:
        out["ignore"] = ignore
    if sql:
        out["sql"] = sql
    return out, tuple(notes)


def _ignore(events_field: Field, events: list[str], notes: list[Note]) -> list[str]:
    kinds: list[str] = []
    for event in events:
        if event in EVENTS:
            kinds += EVENTS[event]
        elif event in NEEDLESS:
            notes.append(events_field.note(NoteKind.NOT_NEEDED, f"{event}: {NEEDLESS[event]}"))
        elif event == "all":
            kinds += ROW_EVENTS
            notes.append(
                events_field.note(NoteKind.NOT_MAPPED, _every_ddl("all: its row events are ignored"))
            )
        elif event == "all ddl":
            notes.append(events_field.note(NoteKind.NOT_MAPPED, _every_ddl("all ddl: left out")))
        else:
            notes.append(events_field.note(NoteKind.NOT_MAPPED, _unknown_event(event)))
    return list(dict.fromkeys(kinds))


def _do(rule: Field, events: list[str], notes: list[Note]) -> tuple[list[str], list[str]]:
    """Action Do: only the listed events pass. Ours can ignore the row events it does not
    list; not every other DDL."""
    if "all" in events:
        notes.append(rule.child("action").note(NoteKind.MAPPED, "Do with every event: nothing to ignore"))
        return [], []
    listed = {k for e in events for k in EVENTS.get(e, ()) if k in ROW_EVENTS}
    ignored = [k for k in ROW_EVENTS if k not in listed]
    if "all ddl" not in events:
        rows = (
            f"its other row events ({', '.join(ignored)}) are ignored"
            if ignored
            else "every row event passes"
        )
        done = f"Do ({', '.join(events) or 'no events'}) lets only these through: {rows}"
        notes.append(rule.child("action").note(NoteKind.NOT_MAPPED, _every_ddl(done)))
    if rule.child("sql-pattern").given:
        notes.append(
            rule.child("sql-pattern").note(
                NoteKind.NOT_MAPPED, "with action Do (only matching statements pass): not offered; left out"
            )
        )
    return ignored, []


def _patterns(field: Field, notes: list[Note]) -> list[str]:
    out = []
    for item in field.items():
        text = item.text(required=True)
        try:
            out.append(check_regex(text))
        except ValueError as exc:
            notes.append(item.note(NoteKind.NOT_MAPPED, f"{exc}; left out"))
    return out


def _every_ddl(done: str) -> str:
    return (
        f"{done}; ignoring every other DDL is not offered (a DDL that changes columns must reach the join): "
        "ignore chosen kinds (truncate table, drop table, add index, drop index, drop column) or sql patterns"
    )


def _unknown_event(event: str) -> str:
    ours = ", ".join(EVENTS)
    return f"{event!r} is not an event shardmerge can ignore (these are: {ours}); left out"
