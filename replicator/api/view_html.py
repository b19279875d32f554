"""The live view as HTML: pure functions from the values of `view_model.LivePage` to text.

Every name and message is escaped where it is written (`_t`, `_a`): table and column names,
shard ids, DDL and reasons can hold `<`, `&` and quotes. The chart's samples go into an
attribute as JSON, escaped as any attribute; the page's script reads them from there."""

from __future__ import annotations

import html
import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from replicator.api.view_assets import SCRIPT, STYLE
from replicator.api.view_model import GroupPage, LivePage
from replicator.schema.way_out import WAY_OUT
from replicator.shard_id import ShardId

CELL_TEXT = {"has": "✓", "lacks": "missing", "extract": "filled by shardmerge", "unknown": "?"}


def _t(value: Any) -> str:
    """Text in an element."""
    return html.escape("" if value is None else str(value), quote=False)


def _a(value: Any) -> str:
    """Text in a double-quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def _when(seconds: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds)) if seconds else "?"


def _table(headers: Iterable[str], rows: Iterable[str], cls: str = "") -> str:
    head = "".join(f"<th>{_t(h)}</th>" for h in headers)
    klass = f' class="{_a(cls)}"' if cls else ""
    return f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _row(*cells: str, cls: str = "") -> str:
    """A row of cells already rendered (`_td`)."""
    klass = f' class="{_a(cls)}"' if cls else ""
    return f"<tr{klass}>{''.join(cells)}</tr>"


def _td(value: Any, cls: str = "", title: str = "", code: bool = False) -> str:
    klass = f' class="{_a(cls)}"' if cls else ""
    hint = f' title="{_a(title)}"' if title else ""
    text = f"<code>{_t(value)}</code>" if code and value not in (None, "") else _t(value)
    return f"<td{klass}{hint}>{text}</td>"


def _document(title: str, body: str, script: bool) -> str:
    tail = f"<script>{SCRIPT}</script>" if script else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="icon" href="data:,"><title>{_t(title)}</title><style>{STYLE}</style></head>'
        f"<body>{body}{tail}</body></html>\n"
    )


# -- the page ---------------------------------------------------------------------------------
def page_html(page: LivePage, logout: bool = False) -> str:
    """The whole page: its live part (`live_html`) and the script that refreshes it.
    `logout`: the page was opened with the token, so it offers to forget it."""
    task = page.status.get("task", "?")
    leave = (
        '<form class="inline" method="post" action="logout"><button type="submit">forget the token'
        "</button></form>"
        if logout
        else ""
    )
    body = (
        f"<h1>shardmerge task <code>{_t(task)}</code></h1>"
        f'<p class="note">Refreshed every few seconds. {leave}<span id="refreshed"></span></p>'
        f'<main id="live">{live_html(page)}</main>'
    )
    return _document(f"shardmerge: {task}", body, script=True)


def live_html(page: LivePage) -> str:
    """The part the script swaps in at each refresh."""
    status = page.status
    parts = [_summary(status, page.now), _chart(page), _sources(status), _paused(status)]
    if not page.groups:
        parts.append('<h2>Shard groups</h2><p class="note">No shard group yet.</p>')
    parts += [_group(g, status) for g in page.groups]
    return "".join(parts)


def _summary(status: Mapping[str, Any], now: float) -> str:
    synced = (
        '<span class="good">synced</span>' if status.get("synced") else '<span class="bad">not synced</span>'
    )
    daemon = status.get("daemon")
    by = f", run by {_t(daemon['name'])} (lease epoch {_t(daemon['epoch'])})" if daemon else ""
    paused = len(status.get("paused") or {})
    return (
        f'<p class="summary">Stage {_t(status.get("stage", "sync"))}, {synced}; '
        f"{_t(status.get('applied', 0))} rows applied; {paused} shard{'s' * (paused != 1)} paused{by}. "
        f'<span class="note">As of {_when(now)}.</span></p>'
    )


def _chart(page: LivePage) -> str:
    samples = json.dumps([s.to_data() for s in page.samples], separators=(",", ":"))
    return (
        "<h2>Last hour</h2>"
        f'<div id="chart" data-every="{_a(f"{page.every:g}")}" data-samples="{_a(samples)}">'
        f'<p class="note">{len(page.samples)} samples (one every {page.every:g} s); the page\'s '
        "script draws them.</p></div>"
    )


def _sources(status: Mapping[str, Any]) -> str:
    rows = [
        _row(
            _td(name, code=True),
            _td(s.get("state")),
            _td(s.get("position"), code=True),
            _td(_lag(s.get("lag"))),
            _td(s.get("events_per_s", 0)),
            _td(_behind(s)),
            _td(s.get("error") or "", cls="bad" if s.get("error") else ""),
        )
        for name, s in sorted((status.get("sources") or {}).items())
    ]
    if not rows:
        return '<h2>Sources</h2><p class="note">No source.</p>'
    headers = ["source", "state", "position", "lag", "events/s", "behind its binlog's end", "error"]
    return "<h2>Sources</h2>" + _table(headers, rows)


def _lag(lag: Any) -> str:
    return "?" if lag is None else f"{lag:g} s"


def _behind(source: Mapping[str, Any]) -> str:
    size = source.get("behind_bytes")
    if size is None:
        return "?"
    txns = source.get("behind_transactions")
    return f"{size:,} bytes" + (f", {txns:,} transactions" if txns is not None else "")


def _way_out(reason: str) -> tuple[str, str]:
    """A pause's reason and its way out, as the daemon wrote them (`way_out.with_way_out`)."""
    why, _, way = reason.partition(WAY_OUT)
    return why, way


def _paused(status: Mapping[str, Any]) -> str:
    paused = sorted((status.get("paused") or {}).items())
    if not paused:
        return '<h2>Paused shards</h2><p class="note">None: every shard streams.</p>'
    rows = []
    for shard, p in paused:
        why, way = _way_out(p.get("reason", ""))
        parked = p.get("parked")
        rows.append(
            _row(
                _td(shard, code=True),
                _td(p.get("held_at") or p.get("position"), code=True),
                _td(f"{parked['rows']:,} rows, {parked['bytes']:,} bytes" if parked else "-"),
                _td(why),
                _td(way or "-", cls="way-out"),
                cls="shard-paused",
            )
        )
    headers = ["paused shard", "at", "parked", "why", "way out"]
    return "<h2>Paused shards</h2>" + _table(headers, rows, "paused")


# -- a shard group ---------------------------------------------------------------------------
def _group(group: GroupPage, status: Mapping[str, Any]) -> str:
    ddl = group.ddl
    target = ddl["target"]
    shards = ddl["shards"]
    blocked = len(ddl.get("blocked") or {})
    propagation = "on" if ddl["propagation"] else '<span class="bad">off</span>'
    head = (
        f'<h2>Shard group <code>{_t(target)}</code></h2><p>Version {_t(ddl["version"])}, '
        f"DDL propagation {propagation}; "
        f"{len(shards)} shard{'s' * (len(shards) != 1)}, {blocked} held at a DDL.</p>"
    )
    return (
        f'<section class="group" data-target="{_a(target)}">{head}{_matrix(ddl, status)}'
        f"{_blocked(ddl)}{_pending(ddl)}{_joined(ddl)}{_history(group)}</section>"
    )


def _matrix(ddl: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    matrix = ddl.get("matrix") or {"columns": [], "shards": {}}
    if not ddl["shards"]:
        return '<p class="note">No shard in this group yet.</p>'
    columns = matrix["columns"]
    head = ["<th>shard</th><th>state</th><th>position</th><th>lag</th>"]
    for c in columns:
        state = f'<span class="state">{_t(c["state"])}</span>' if c["state"] else ""
        head.append(f'<th><code>{_t(c["name"])}</code><span class="type">{_t(c["type"])}</span>{state}</th>')
    head.append("<th>only in the shard</th>")
    rows = []
    for shard, data in ddl["shards"].items():
        unknown = [{"state": "unknown", "detail": ""}] * len(columns)
        cells = matrix["shards"].get(shard, {"cells": unknown, "only_here": []})
        state, position, lag = _shard_state(shard, data, status)
        row = [
            f'<td><code>{_t(shard)}</code></td><td class="shard-state">{_t(state)}</td>'
            f"<td><code>{_t(position)}</code></td><td>{_t(lag)}</td>"
        ]
        for column, cell in zip(columns, cells["cells"], strict=True):
            text = CELL_TEXT.get(cell["state"], cell["detail"])
            detail = cell["detail"] if cell["detail"] != text else ""
            row.append(
                f'<td class="cell cell-{_a(cell["state"])}" data-column="{_a(column["name"])}" '
                f'data-state="{_a(cell["state"])}">{_t(text)}'
                + (f' <span class="note">{_t(detail)}</span>' if detail else "")
                + "</td>"
            )
        only = ", ".join(cells["only_here"])
        row.append(f"<td>{_t(only or '-')}</td>")
        kind = "blocked" if data.get("blocked") else "paused" if data.get("paused") else "streaming"
        rows.append(f'<tr class="shard-{kind}" data-shard="{_a(shard)}">{"".join(row)}</tr>')
    if not columns:
        note = '<p class="note">No joined schema yet: no shard\'s table is downstream.</p>'
    else:
        note = (
            '<p class="note">A cell: ✓ the shard has the column as joined; missing: it has none (the '
            "join holds it for the others); another type; another name (a rename under way); filled "
            "by shardmerge (the extract columns).</p>"
        )
    return (
        f'<table class="matrix"><thead><tr>{"".join(head)}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        + note
    )


def _shard_state(shard: str, data: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[str, str, str]:
    """A shard's state, where it is read and its lag: a paused one's where it waits, the others
    their source's (they stream with it)."""
    block = data.get("blocked")
    paused = (status.get("paused") or {}).get(shard)
    source = (status.get("sources") or {}).get(_source_of(shard), {})
    if block:
        state = f"held at a DDL ({block['kind']})"
    elif paused or data.get("paused"):
        state = "paused"
    else:
        state = "streaming"
    if paused:
        return state, paused.get("held_at") or paused.get("position") or "?", "paused"
    if data.get("paused"):
        return state, data["paused"].get("position") or "?", "paused"
    return state, source.get("position") or "?", _lag(source.get("lag"))


def _source_of(shard: str) -> str:
    try:
        return ShardId.parse(shard).source
    except ValueError:
        return ""


def _blocked(ddl: Mapping[str, Any]) -> str:
    blocked = sorted((ddl.get("blocked") or {}).items())
    if not blocked:
        return ""
    rows = []
    for shard, b in blocked:
        why, way = _way_out(b.get("reason", ""))
        rows.append(
            _row(
                _td(shard, code=True),
                _td(b.get("kind")),
                _td(b.get("position") or "?", code=True),
                _td(" ".join(str(b.get("ddl", "")).split()), code=True),
                _td(why),
                _td(way or "the paused shards above say it"),
            )
        )
    return "<h3>Held at a DDL</h3>" + _table(["shard", "kind", "at", "DDL", "why", "way out"], rows)


def _pending(ddl: Mapping[str, Any]) -> str:
    entries = ddl.get("pending_downstream_ddl") or []
    if not entries:
        return ""
    rows = [
        _row(
            _td(e["seq"]),
            _td(e.get("shard") or "-", code=True),
            _td(f"{e['next_index']} of {len(e['statements'])}"),
            _td("; ".join(" ".join(s.split()) for s in e["statements"]), code=True),
        )
        for e in entries
    ]
    return "<h3>Downstream DDL pending</h3>" + _table(["journal entry", "shard", "run", "statements"], rows)


def _joined(ddl: Mapping[str, Any]) -> str:
    target = ddl["target"]
    body = f"<pre>{_t(ddl['joined'])}</pre>" if ddl.get("joined") else '<p class="note">None yet.</p>'
    return (
        f'<details id="joined-{_a(target)}" open><summary>The joined table, version '
        f"{_t(ddl['version'])}</summary>{body}</details>"
    )


def _history(group: GroupPage) -> str:
    target = group.ddl["target"]
    if not group.history:
        none = '<p class="note">None yet.</p>'
        return f'<details id="history-{_a(target)}"><summary>History</summary>{none}</details>'
    rows = [
        _row(
            _td(e.get("version")),
            _td(e.get("result")),
            _td(e.get("shard") or "-", code=True),
            _td(_when(e.get("time"))),
            _td(" ".join(str(e.get("ddl") or "").split()), code=True),
            _td("; ".join(" ".join(s.split()) for s in e.get("downstream") or []) or "-", code=True),
            _td(e.get("message") or ""),
        )
        for e in group.history
    ]
    shown = len(group.history)
    more = (
        f'<p class="note">The newest {shown} of {group.versions}; `shardctl show-history` has them all.</p>'
        if group.versions > shown
        else ""
    )
    headers = ["version", "result", "shard", "when", "DDL", "downstream", "message"]
    return (
        f'<details id="history-{_a(target)}" open><summary>History</summary>'
        f"{_table(headers, rows, 'history')}{more}</details>"
    )


# -- the token ---------------------------------------------------------------------------------
def login_html(message: str = "") -> str:
    """The form that asks for the admin API's token (the page's only way to send it: posted,
    never in the address)."""
    said = f'<p class="bad">{_t(message)}</p>' if message else ""
    body = (
        "<h1>shardmerge</h1>"
        f"{said}<p>This daemon's admin API needs its token (the task config's <code>admin.token_env</code>)."
        "</p>"
        '<form method="post" action="login"><label>Token <input type="password" name="token" '
        'autocomplete="current-password" required autofocus></label> '
        '<button type="submit">open the live view</button></form>'
        '<p class="note">The browser keeps a session cookie for this page (12 hours), not the token.</p>'
    )
    return _document("shardmerge: token", body, script=False)


def error_html(message: str) -> str:
    body = f'<h1>shardmerge</h1><p class="bad">{_t(message)}</p><p><a href=".">try again</a></p>'
    return _document("shardmerge: error", body, script=False)
