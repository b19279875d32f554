"""Which tables go where: DM's routes, block-allow-lists and online-DDL settings as our
`routes`, `filters.allow/block` and `online_ddl` (for every source: see `rules`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from replicator.cli.dm.fields import Field
from replicator.cli.dm.notes import Note, NoteKind, Notes
from replicator.cli.dm.patterns import NoGlob, glob, globs, is_regex, literal, product, whole_name_regex
from replicator.cli.dm.rules import Rules, Uses, rules_of
from replicator.config import check_identifier, check_regex, check_target_name

_ROUTE_FIELDS = (
    "schema-pattern",
    "table-pattern",
    "target-schema",
    "target-table",
    "extract-table",
    "extract-schema",
    "extract-source",
)
# our extract part -> DM's field, and the regexp field in it
_EXTRACTS = {
    "table": ("extract-table", "table-regexp"),
    "schema": ("extract-schema", "schema-regexp"),
    "source": ("extract-source", "source-regexp"),
}
_BA_FIELDS = ("do-dbs", "ignore-dbs", "do-tables", "ignore-tables")
# whole_name_regex of regexes that capture the whole name
_WHOLE_NAME = {".*?(.*).*", ".*?(.+).*", "(.*)", "(.+)"}


# -- routes --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableRoute:
    rule: Field
    route: dict[str, Any]  # ours: schema, table, target, extract
    schema_pattern: str
    target_schema: str


@dataclass(frozen=True)
class SchemaRoute:
    """A route of whole schemas (no table-pattern or no target-table): DM keeps the table
    names; ours go to one named table, so it has no equivalent."""

    rule: Field
    schema_pattern: str
    target_schema: str | None


def routes(rules: Rules, uses: Uses) -> tuple[list[dict[str, Any]], Notes]:
    """The table routes of the rules the instances use, in the order they name them."""
    notes: list[Note] = list(uses.unused_notes(rules))
    table_routes: list[TableRoute] = []
    imported: list[str] = []  # their rule names
    schema_routes: list[SchemaRoute] = []
    for name in uses.by_rule:
        notes += rules[name].unknown(_ROUTE_FIELDS)
        found, found_notes = route(rules[name])
        notes += found_notes
        if isinstance(found, TableRoute):
            table_routes.append(found)
            imported.append(name)
        elif isinstance(found, SchemaRoute):
            schema_routes.append(found)
    notes += [_schema_route_note(s, table_routes) for s in schema_routes]
    notes += uses.scope_notes(rules, "routes", imported)
    routes_out, extract_notes = _same_extracts(table_routes)
    return routes_out, (*notes, *extract_notes)


def route(rule: Field) -> tuple[TableRoute | SchemaRoute | None, Notes]:
    schema = rule.child("schema-pattern").text(required=True)
    table = rule.child("table-pattern").text()
    target_schema = rule.child("target-schema").text()
    target_table = rule.child("target-table").text()
    if table is None or target_table is None:
        return SchemaRoute(rule, schema, target_schema), ()
    if target_schema is None:
        note = rule.note(
            NoteKind.NOT_MAPPED,
            "no target-schema (DM keeps each shard's schema name): shardmerge routes into one named "
            "schema.table; skipped: add target-schema to import it",
        )
        return None, (note,)
    rule.child("target-table").check(lambda _: check_target_name(f"{target_schema}.{target_table}"))
    out: dict[str, Any] = {
        "schema": glob(schema),
        "table": glob(table),
        "target": f"{target_schema}.{target_table}",
    }
    extract, notes = extracts(rule)
    if extract:
        out["extract"] = extract
    return TableRoute(rule, out, schema, target_schema), notes


def _schema_route_note(schema_route: SchemaRoute, table_routes: list[TableRoute]) -> Note:
    pairs = [
        t
        for t in table_routes
        if t.schema_pattern == schema_route.schema_pattern and t.target_schema == schema_route.target_schema
    ]
    if pairs:
        # DM's shard-merge examples pair each table route with this one, for the CREATE DATABASE
        # and the schema's other tables; shardmerge creates the target schema itself.
        return schema_route.rule.note(
            NoteKind.NOT_NEEDED,
            "a schema-level route beside the table route into "
            f"{pairs[0].route['target']}: shardmerge creates the target schema itself; the schemas' "
            "other tables are not replicated (add a route for each one you need)",
        )
    return schema_route.rule.note(
        NoteKind.NOT_MAPPED,
        "a schema-level route (table names kept) has no equivalent: a shardmerge route merges tables "
        "into one named table; skipped: add a route with table-pattern and target-table per table",
    )


def extracts(rule: Field) -> tuple[dict[str, Any], Notes]:
    """DM's extract-table/-schema/-source as our route's `extract`."""
    out: dict[str, Any] = {}
    notes: list[Note] = []
    for part, (key, regexp_key) in _EXTRACTS.items():
        field = rule.child(key)
        if not field.given:
            continue
        notes += field.unknown((regexp_key, "target-column"))
        column = field.child("target-column").check(check_identifier)
        spec, spec_notes = _extract_spec(field.child(regexp_key), column)
        out[part] = spec
        notes += spec_notes
    return out, tuple(notes)


def _extract_spec(regexp: Field, column: str) -> tuple[str | dict[str, str], Notes]:
    """The whole name (a column name) or {column, regex}: ours takes the regex's one group
    of the whole name; DM searches and joins every group."""
    text = regexp.text()
    if text is None:
        return column, ()
    try:
        compiled = re.compile(check_regex(text))
    except ValueError as exc:
        return column, (regexp.note(NoteKind.NOT_MAPPED, f"{exc}; the column takes the whole name instead"),)
    full = whole_name_regex(text)
    if compiled.groups != 1:
        message = (
            f"{compiled.groups} groups: DM joins what they capture, shardmerge takes one group; the column "
            "takes the whole name instead (give the regex one group to take a part)"
        )
        return column, (regexp.note(NoteKind.NOT_MAPPED, message),)
    if full in _WHOLE_NAME:
        return column, ()
    return {"column": column, "regex": full}, ()


def _same_extracts(table_routes: list[TableRoute]) -> tuple[list[dict[str, Any]], Notes]:
    """Every route into one target must fill the same columns (DM lets each rule differ):
    the first route's extract is kept for the others, noted."""
    first: dict[str, Any] = {}
    notes: list[Note] = []
    out = []
    for table_route in table_routes:
        route_out = dict(table_route.route)
        target = route_out["target"]
        kept = first.setdefault(target, route_out.get("extract"))
        if route_out.get("extract") != kept:
            notes.append(
                table_route.rule.note(
                    NoteKind.NOT_MAPPED,
                    f"its extract columns differ from another rule's into {target}: shardmerge fills the "
                    "same columns for every route into one table; the first rule's are used",
                )
            )
            route_out.pop("extract", None)
            if kept is not None:
                route_out["extract"] = kept
        out.append(route_out)
    return out, tuple(notes)


# -- block-allow-lists ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Allowed:
    """One block-allow-list rule as ours: `allow` empty lets every table through."""

    allow: tuple[str, ...]
    block: tuple[str, ...]


def ba_rules(task: Field) -> tuple[Rules, Notes]:
    """DM's rules under both names: `black-white-list` is the name before v2.0.0-beta.2, and
    a file may name a rule of one under the other (DM reads them as one set)."""
    old = task.child("black-white-list")
    notes = ()
    if old.given:
        notes = (old.note(NoteKind.MAPPED, "deprecated name of block-allow-list: read as block-allow-list"),)
    return rules_of(old, task.child("block-allow-list")), notes


def block_allow(rules: Rules, uses: Uses, section: Field) -> tuple[dict[str, list[str]], Notes]:
    """Our filters.allow/block of the block-allow-list rules the instances use."""
    notes: list[Note] = list(uses.unused_notes(rules))
    converted: dict[str, Allowed] = {}
    for name in uses.by_rule:
        converted[name], rule_notes = ba_rule(rules[name])
        notes += rule_notes
    if not converted:
        return {}, tuple(notes)
    used = list(converted.values())
    unruled = [s for s in uses.sources if not any(s in users for users in uses.by_rule.values())]
    if len(used) == 1 and not unruled:
        allowed = used[0]
    else:
        allowed = _combined(used, bool(unruled))
        what = "; ".join(f"{n} ({', '.join(u)})" for n, u in uses.by_rule.items())
        notes.append(
            section.note(
                NoteKind.NOT_MAPPED,
                f"sources use different rules: {what}{'; others none' if unruled else ''}. shardmerge's "
                "filters apply to every source: combined to allow what any rule allows and block what all "
                "block",
            )
        )
    out = {}
    if allowed.allow:
        out["allow"] = list(allowed.allow)
    if allowed.block:
        out["block"] = list(allowed.block)
    return out, tuple(notes)


def _combined(rules: list[Allowed], some_unruled: bool) -> Allowed:
    everything = some_unruled or any(not r.allow for r in rules)
    allow = () if everything else tuple(dict.fromkeys(g for r in rules for g in r.allow))
    common = set.intersection(*(set(r.block) for r in rules)) if not some_unruled else set()
    return Allowed(allow, tuple(g for g in rules[0].block if g in common))


def ba_rule(rule: Field) -> tuple[Allowed, Notes]:
    """As DM's filter decides: a schema must match do-dbs (when given; else match no
    ignore-dbs), then a table must match do-tables (when given; else match no ignore-tables)."""
    notes: list[Note] = list(rule.unknown(_BA_FIELDS))
    do_dbs, ignore_dbs = rule.child("do-dbs"), rule.child("ignore-dbs")
    do_tables, ignore_tables = rule.child("do-tables"), rule.child("ignore-tables")
    allow: list[str] = []
    block: list[str] = []
    if do_tables.given:
        for item in do_tables.items():
            allow += _table_globs(item, notes, wide=True)
        notes += _outside_do_dbs(do_tables, do_dbs)
        if ignore_tables.given:
            notes.append(_no_effect(ignore_tables, "do-tables"))
    else:
        block += [g for item in ignore_tables.items() for g in _table_globs(item, notes, wide=False)]
    if do_dbs.given:
        if not do_tables.given:
            allow += [f"{g}.*" for item in do_dbs.items() for g in _name_globs(item, notes, wide=True)]
        if ignore_dbs.given:
            notes.append(_no_effect(ignore_dbs, "do-dbs"))
    else:
        block += [f"{g}.*" for item in ignore_dbs.items() for g in _name_globs(item, notes, wide=False)]
    return Allowed(tuple(dict.fromkeys(allow)), tuple(dict.fromkeys(block))), tuple(notes)


def _no_effect(field: Field, given: str) -> Note:
    return field.note(NoteKind.MAPPED, f"DM does not read it where {given} is given; left out")


def _table_globs(item: Field, notes: list[Note], *, wide: bool) -> tuple[str, ...]:
    notes += item.unknown(("db-name", "tbl-name"))
    schemas = _name_globs(item.child("db-name"), notes, wide=wide)
    tables = _name_globs(item.child("tbl-name"), notes, wide=wide)
    return product(schemas, tables)


def _name_globs(field: Field, notes: list[Note], *, wide: bool) -> tuple[str, ...]:
    """A DM name pattern as globs; one no glob expresses is noted, and becomes `*` in an
    allow list (more tables than DM's: only routed ones are replicated anyway) or is left out
    of a block list."""
    pattern = field.text(required=True)
    try:
        return globs(pattern)
    except NoGlob as exc:
        instead = "allowed as *: wider than DM's" if wide else "not blocked"
        notes.append(field.note(NoteKind.NOT_MAPPED, f"the regex has no glob equivalent ({exc}): {instead}"))
        return ("*",) if wide else ()


def _outside_do_dbs(do_tables: Field, do_dbs: Field) -> Notes:
    """DM lets a do-tables entry through only when its schema also matches do-dbs; our allow
    list takes the entry alone, which is the same where do-dbs names its schema pattern too."""
    if not do_dbs.given:
        return ()
    dbs = do_dbs.texts()
    notes: list[Note] = []
    for item in do_tables.items():
        schema = item.child("db-name").text(required=True)
        if schema in dbs or (literal(schema) and any(_db_matches(d, schema) for d in dbs)):
            continue
        notes.append(
            item.note(
                NoteKind.NOT_MAPPED,
                f"DM also required its schema to match do-dbs ({', '.join(dbs)}); shardmerge's allow list "
                "takes this entry alone",
            )
        )
    return tuple(notes)


def _db_matches(pattern: str, name: str) -> bool:
    if is_regex(pattern):
        try:
            return re.search(pattern[1:], name) is not None
        except re.error:
            return False
    return fnmatchcase(name, glob(pattern))


# -- online DDL ----------------------------------------------------------------------------------

_SCHEMES = {"gh-ost": "gh-ost", "pt": "pt-osc"}


def online_ddl(task: Field) -> tuple[Any, Notes]:
    """DM's online-ddl (gh-ost and pt), online-ddl-scheme (one tool, before v2.0.5), and
    shadow-/trash-table-rules (the tools' table names) as our `online_ddl`."""
    enabled = task.child("online-ddl").flag()
    scheme = task.child("online-ddl-scheme")
    shadow, trash = task.child("shadow-table-rules"), task.child("trash-table-rules")
    notes: list[Note] = []
    if shadow.given or trash.given:
        rules = {"shadow": _rules(shadow, notes), "trash": _rules(trash, notes)}
        return {k: v for k, v in rules.items() if v}, tuple(notes)
    if enabled:
        if scheme.given:
            notes.append(scheme.note(NoteKind.MAPPED, "deprecated: online-ddl: true covers gh-ost and pt"))
        return "both", tuple(notes)
    if scheme.given:
        tool = _SCHEMES.get((scheme.text() or "").lower())
        if tool is None:
            return None, (scheme.note(NoteKind.NOT_MAPPED, "expected gh-ost or pt; left at both tools"),)
        return tool, ()
    if enabled is False:
        note = task.child("online-ddl").note(
            NoteKind.MAPPED,
            "online_ddl stays at its default, both: the tables gh-ost and pt-osc make beside a shard are "
            "never routed (set online_ddl: none to route them as any table)",
        )
        return None, (note,)
    return None, ()


def _rules(field: Field, notes: list[Note]) -> list[str]:
    out = []
    for item in field.items():
        text = item.text(required=True)
        try:
            out.append(whole_name_regex(check_regex(text)))
        except ValueError as exc:
            notes.append(item.note(NoteKind.NOT_MAPPED, f"{exc}; left out"))
    return out
