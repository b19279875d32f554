"""DM's expression filters (`expression-filter` of a task, named by each instance's
`expression-filters`) as our `filters.rows`: a row of the named table is ignored where
the condition of its kind is TRUE, as in DM. A condition we cannot evaluate the same way
on every row (NOW(), a function we do not offer) is left out, noted with the reason."""

from __future__ import annotations

import re
from typing import Any

from replicator.cli.dm.fields import Field
from replicator.cli.dm.notes import Note, NoteKind, Notes
from replicator.cli.dm.rules import Rules, Uses, import_rules
from replicator.row_condition import ConditionError, parse_condition

# DM's keys -> ours (config.ROW_FILTER_CONDITIONS)
CONDITIONS = {
    "insert-value-expr": "ignore_insert",
    "update-old-value-expr": "ignore_update_old",
    "update-new-value-expr": "ignore_update_new",
    "delete-value-expr": "ignore_delete",
}
_FIELDS = ("schema", "table", *CONDITIONS)


def expression_filters(rules: Rules, uses: Uses) -> tuple[list[dict[str, Any]], Notes]:
    """The expression filters the instances name, for every source."""
    return import_rules(rules, uses, "row filters", expression_filter)


def expression_filter(rule: Field) -> tuple[dict[str, Any] | None, Notes]:
    """One rule as our row filter (None: none of its conditions could be taken)."""
    notes: list[Note] = list(rule.unknown(_FIELDS))
    # (DM takes the names as they are: no wildcard; a glob character in one is matched as itself)
    schema, table = (_literal_glob(rule.child(k).text(required=True) or "") for k in ("schema", "table"))
    out: dict[str, Any] = {"tables": [f"{schema}.{table}"]}
    for dm_key, ours in CONDITIONS.items():
        field = rule.child(dm_key)
        text = field.text()
        if not text:
            continue
        try:
            parse_condition(text)
        except ConditionError as exc:
            notes.append(field.note(NoteKind.NOT_MAPPED, f"left out: {exc}"))
            continue
        out[ours] = text
    if len(out) == 1:
        return None, tuple(notes)
    notes.append(rule.note(NoteKind.MAPPED, BACKFILL_TOO))
    return out, tuple(notes)


# DM's expression filters act on the binlog only (its dump copies every row)
BACKFILL_TOO = (
    "filters.rows act on the backfill too: a row its insert condition ignores is not copied "
    "(DM's dump copies it)"
)


def _literal_glob(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)
