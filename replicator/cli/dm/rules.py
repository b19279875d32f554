"""Which rules each DM source uses: a mysql-instance names its route-rules, filter-rules,
block-allow-list and unit configs; ours apply to every source, so a rule only some sources
use is imported for all of them, with a note."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from replicator.cli.dm.fields import Field
from replicator.cli.dm.notes import NoteKind, Notes

# A section of named rules (routes, filters, ...): name -> the rule, with its own field path.
Rules = dict[str, Field]


def rules_of(*sections: Field) -> Rules:
    """The rules of these sections, the later's winning a name given twice."""
    return {name: rule for section in sections for name, rule in section.entries()}


@dataclass(frozen=True)
class Uses:
    """The rules of one kind the instances name: rule name -> the source ids naming it, in
    the order they are first named."""

    by_rule: dict[str, tuple[str, ...]]
    sources: tuple[str, ...]  # every source of the task

    def scope_notes(self, rules: Rules, what: str, names: Iterable[str]) -> Notes:
        """Notes on the rules `names` (those imported) that only some sources use."""
        notes = []
        for name in names:
            users = self.by_rule[name]
            if len(users) < len(self.sources):
                others = ", ".join(s for s in self.sources if s not in users)
                notes.append(
                    rules[name].note(
                        NoteKind.NOT_MAPPED,
                        f"used by {', '.join(users)} only; shardmerge's {what} apply to every source, so "
                        f"it covers the tables of {others} too",
                    )
                )
        return tuple(notes)

    def unused_notes(self, rules: Rules) -> Notes:
        return tuple(
            rule.note(NoteKind.NOT_NEEDED, "no mysql-instance names it: DM does not apply it either")
            for name, rule in rules.items()
            if name not in self.by_rule
        )


def rule_uses(instances: Sequence[tuple[str, Field]], rules: Rules, section: str, *keys: str) -> Uses:
    """The rules named by each instance's `keys` (a list of names or one name; the first key
    given wins), each checked to be in `rules` (DM refuses a task naming a rule it lacks)."""
    by_rule: dict[str, list[str]] = {}
    for source_id, instance in instances:
        field = next((instance.child(k) for k in keys if instance.child(k).given), None)
        if field is None:
            continue
        named = field.items() if isinstance(field.value, list) else [field]
        for item in named:
            name = item.text(required=True)
            if name not in rules:
                raise item.error(f"no rule {name!r} in {section}; DM refuses such a task too")
            users = by_rule.setdefault(name, [])
            if source_id not in users:
                users.append(source_id)
    return Uses({k: tuple(v) for k, v in by_rule.items()}, tuple(s for s, _ in instances))


def import_rules(
    rules: Rules, uses: Uses, what: str, convert: Callable[[Field], tuple[dict[str, Any] | None, Notes]]
) -> tuple[list[dict[str, Any]], Notes]:
    """The rules the instances name, each as `convert` makes it ours (None: nothing of it
    could be), for every source; `what` they are called in the notes."""
    notes = list(uses.unused_notes(rules))
    out, imported = [], []
    for name in uses.by_rule:
        found, found_notes = convert(rules[name])
        notes += found_notes
        if found is not None:
            out.append(found)
            imported.append(name)
    notes += uses.scope_notes(rules, what, imported)
    return out, tuple(notes)
