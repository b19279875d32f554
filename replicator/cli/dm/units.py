"""DM's processing units: syncers (binlog replication) as our `options`, validators as our
`validator`; mydumpers and loaders (the full copy) are our Spark backfill's work, noted.

DM sets a unit per source (a named config, an inline one, or a `*-thread` shorthand); ours
are the task's, so where sources differ the largest value (the strongest validation) is taken."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from replicator.cli.dm.fields import Field
from replicator.cli.dm.notes import Note, NoteKind, Notes
from replicator.cli.dm.rules import Rules, Uses
from replicator.config import MAX_BATCH_SIZE, MAX_WORKERS

_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|µs|ns)")
_SYNCER_MAPPED = ("worker-count", "batch", "safe-mode", "safe-mode-duration")
_SYNCER_NOTES = {
    "compact": "shardmerge folds each key's changes in a batch into what they leave (apply/net.py)",
    "multiple-rows": "shardmerge picks the statements a batch is written with itself",
    "checkpoint-flush-interval": "shardmerge checkpoints its positions downstream itself: no interval to set",
}
_SYNCER_INTERNAL = "DM syncer's own tuning: shardmerge has no such setting"
VALIDATOR_MODES = {"none": "off", "fast": "fast", "full": "full"}
_VALIDATOR_ORDER = ("none", "fast", "full")
_BACKFILL = (
    "task_mode all and full copy the shards with shardmerge's Spark backfill (also `shardmerge backfill`), "
    "tuned by options.spark_master, spark_conf and backfill_rows_per_split"
)
UNIT_NOTES = {
    "mydumpers": f"DM's dump: {_BACKFILL}; DM's dump settings do not carry over",
    "loaders": f"DM's load: {_BACKFILL}, over JDBC, with no dump files; rows of one key in several shards: "
    "`shardmerge backfill --merge`",
}
# the same, said short for each instance key that sets one of the units
_INSTANCE_UNIT_NOTES = {
    "mydumpers": "a setting of DM's dump, which is shardmerge's Spark backfill here",
    "loaders": "a setting of DM's load, which is shardmerge's Spark backfill here",
}
INSTANCE_UNIT_KEYS = {
    "mydumper-config-name": "mydumpers",
    "mydumper": "mydumpers",
    "mydumper-thread": "mydumpers",
    "loader-config-name": "loaders",
    "loader": "loaders",
    "loader-thread": "loaders",
}


def go_seconds(text: str) -> float:
    """A Go duration ("60s", "1m30s", "30m0s", "500ms") in seconds."""
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"expected a duration such as 60s, 1m30s or 500ms, got {text!r}")
    return sum(float(number) * _GO_UNITS[unit] for number, unit in parts)


def _unit(instance: Field, rules: Rules, name_key: str, inline_key: str) -> Field | None:
    """The unit config an instance uses: its inline one, or the named one."""
    inline = instance.child(inline_key)
    if inline.given:
        return inline
    name = instance.child(name_key).text()
    if name is None:
        return None
    if name not in rules:
        raise instance.child(name_key).error(f"no {inline_key} config {name!r}; DM refuses such a task too")
    return rules[name]


# -- syncers -------------------------------------------------------------------------------------


def options(instances: Sequence[tuple[str, Field]], syncers: Rules) -> tuple[dict[str, Any], Notes]:
    """options.workers, batch_size, safe_mode and safe_mode_window of the sources' syncers."""
    units = [
        (instance, _unit(instance, syncers, "syncer-config-name", "syncer")) for _, instance in instances
    ]
    notes: list[Note] = []
    seen: set[str] = set()
    workers: list[tuple[Field, int]] = []
    batches: list[tuple[Field, int]] = []
    safe: list[tuple[Field, bool]] = []
    windows: list[tuple[Field, float]] = []
    for instance, unit in units:
        thread = instance.child("syncer-thread")
        if thread.given and thread.value != 0:  # 0: unset, as dmctl get-config prints it
            _count(thread, workers, notes)
        elif unit is not None:
            _count(unit.child("worker-count"), workers, notes)
        if unit is None:
            continue
        _count(unit.child("batch"), batches, notes)
        if unit.child("safe-mode").given:
            safe.append((unit.child("safe-mode"), bool(unit.child("safe-mode").flag())))
        _duration(unit.child("safe-mode-duration"), windows, notes)
        if unit.path not in seen:
            seen.add(unit.path)
            notes += _syncer_notes(unit)
    out: dict[str, Any] = {}
    for key, values, high in (("workers", workers, MAX_WORKERS), ("batch_size", batches, MAX_BATCH_SIZE)):
        if values:
            out[key], found = _largest(values, key, high)
            notes += found
    if any(value for _, value in safe):
        out["safe_mode"] = True
        if not all(value for _, value in safe) or len(safe) < len(units):
            notes.append(
                safe[0][0].note(NoteKind.MAPPED, "true for some sources: options.safe_mode is the task's")
            )
    if windows:
        out["safe_mode_window"], found = _largest(windows, "safe_mode_window", None)
        notes += found
    return out, tuple(notes)


def _count(field: Field, into: list[tuple[Field, int]], notes: list[Note]) -> None:
    if not field.given:
        return
    value = field.value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        notes.append(field.note(NoteKind.NOT_MAPPED, f"expected a positive integer, got {value!r}; left out"))
        return
    into.append((field, value))


def _duration(field: Field, into: list[tuple[Field, float]], notes: list[Note]) -> None:
    if not field.given:
        return
    try:
        into.append((field, go_seconds(str(field.value))))
    except ValueError as exc:
        notes.append(field.note(NoteKind.NOT_MAPPED, f"{exc}; left out"))


def _largest(values: list[tuple[Field, Any]], ours: str, high: int | None) -> tuple[Any, Notes]:
    """The largest of the sources' values (capped to ours), noted where they differ or it is capped."""
    field, value = max(values, key=lambda pair: pair[1])
    notes = []
    if len({v for _, v in values}) > 1:
        notes.append(
            field.note(NoteKind.MAPPED, f"the largest of the sources' values: options.{ours} is the task's")
        )
    if high is not None and value > high:
        notes.append(field.note(NoteKind.MAPPED, f"{value} is more than options.{ours} takes: {high}"))
        value = high
    return value, tuple(notes)


def _syncer_notes(unit: Field) -> Notes:
    notes = []
    for key, child in unit.entries():
        if key in _SYNCER_MAPPED or not child.given or child.value is False:
            continue
        notes.append(child.note(NoteKind.NOT_NEEDED, _SYNCER_NOTES.get(key, _SYNCER_INTERNAL)))
    return tuple(notes)


# -- validators ----------------------------------------------------------------------------------


def validator(validators: Rules, uses: Uses) -> tuple[dict[str, Any] | None, Notes]:
    """Our validator: the strongest mode of the configs the sources name, for every source."""
    notes: list[Note] = list(uses.unused_notes(validators))
    if not uses.by_rule:
        return None, tuple(notes)
    modes: dict[str, str] = {}
    for name in uses.by_rule:
        rule = validators[name]
        mode = (rule.child("mode").text() or "none").lower()
        if mode not in VALIDATOR_MODES:
            raise rule.child("mode").error(f"expected none, fast or full, got {mode!r}")
        modes[name] = mode
        notes += _validator_notes(rule)
    name = max(modes, key=lambda n: _VALIDATOR_ORDER.index(modes[n]))
    if modes[name] == "none":
        return None, tuple(notes)
    used_by = {s for users in uses.by_rule.values() for s in users}
    if len(set(modes.values())) > 1 or len(used_by) < len(uses.sources):
        notes.append(
            validators[name].note(
                NoteKind.MAPPED,
                f"the strongest the sources use: shardmerge validates every source's rows {modes[name]}",
            )
        )
    out: dict[str, Any] = {"mode": VALIDATOR_MODES[modes[name]]}
    delay = validators[name].child("row-error-delay")
    if delay.given:
        found: list[tuple[Field, float]] = []
        _duration(delay, found, notes)
        if found:
            out["error_delay"] = found[0][1]
    return out, tuple(notes)


def _validator_notes(rule: Field) -> Notes:
    return tuple(
        child.note(NoteKind.NOT_NEEDED, "tuning of DM's validator: shardmerge's has no such setting")
        for key, child in rule.entries()
        if key not in ("mode", "row-error-delay") and child.given
    )


# -- mydumpers and loaders -----------------------------------------------------------------------


# mydumper's row condition (`--where`, `-W`) in a dump's extra-args
_DUMP_WHERE = re.compile(r"(?:^|\s)(?:--where|-W)(?:[=\s]|$)")
DUMP_WHERE = (
    "--where selects the rows DM's dump copies; shardmerge's backfill has no such condition: it "
    "copies every row of the routed tables (a condition in filters.rows, as ignore_insert, acts "
    "on the backfill and the stream alike)"
)


def dump_and_load(task: Field, instances: Sequence[tuple[str, Field]]) -> Notes:
    notes = [
        task.child(section).note(NoteKind.NOT_NEEDED, why)
        for section, why in UNIT_NOTES.items()
        if task.child(section).given
    ]
    dumps = [config for _, config in task.child("mydumpers").entries()]
    dumps += [i.child("mydumper") for _, i in instances]
    for dump in dumps:
        args = dump.child("extra-args")
        if args.given and _DUMP_WHERE.search(str(args.value)):
            notes.append(args.note(NoteKind.NOT_MAPPED, DUMP_WHERE))
    for key, section in INSTANCE_UNIT_KEYS.items():
        if any(i.child(key).given and i.child(key).value != 0 for _, i in instances):  # 0: unset
            field = Field(task.where, f"mysql-instances[*].{key}")
            notes.append(field.note(NoteKind.NOT_NEEDED, _INSTANCE_UNIT_NOTES[section]))
    return tuple(notes)
