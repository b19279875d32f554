"""What `shardctl` prints for people: the admin API's answers as tables and lines
(`--json` prints the answers themselves)."""

from __future__ import annotations

import time
from typing import Any

from replicator.schema.way_out import WAY_OUT
from replicator.shard_id import ShardId


def table(rows: list[list[Any]], headers: list[str]) -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _member_line(name: str, m: dict[str, Any]) -> str:
    if not m["live"]:
        return f"{name} (gone)"
    lag = f", lag {m['lag']:.1f}s" if m.get("lag") is not None else ""
    role = "coordinates, " if m["coordinates"] else ""
    return f"{name} ({role}reads {', '.join(m['sources']) or 'nothing'}{lag})"


def show_status(data: dict[str, Any]) -> str:
    if data.get("role") == "standby":
        return standby_text(data)
    synced = "synced" if data.get("synced") else "not synced"
    out = [
        f"task {data['task']}: {data.get('stage', 'sync')}, {synced}; {data['applied']} row changes applied, "
        f"{data.get('downstream_reconnects', 0)} downstream reconnects"
    ]
    if data.get("applied_events"):
        events = data["applied_events"]
        out.append(f"row events applied as the binlog holds them: {events} (their rows counted above)")
    if data.get("daemon"):
        out.append(f"run by daemon {data['daemon']['name']} (lease epoch {data['daemon']['epoch']})")
    members = (data.get("members") or {}).get("members")
    if members:
        out.append("members: " + "; ".join(_member_line(n, m) for n, m in members.items()))
    rows = [
        [
            name,
            s.get("state"),
            s.get("position"),
            _behind(s),
            s.get("lag"),
            s.get("events_per_s", 0),
            s.get("received"),
            s.get("reconnects", 0),
            s.get("error") or "",
        ]
        for name, s in sorted(data["sources"].items())
    ]
    headers = ["source", "state", "position", "behind", "lag (s)", "events/s", "received", "reconnects"]
    headers.append("error")
    out += ["", table(rows, headers)]
    groups = [[t, g["version"], ", ".join(g["blocked"]) or "-"] for t, g in sorted(data["groups"].items())]
    out += ["", table(groups, ["shard group", "version", "blocked shards"])]
    running = [
        [t, r["how"], f"{r['seconds']:.0f}", " ".join(r["statement"].split())[:80]]
        for t, g in sorted(data["groups"].items())
        if (r := g.get("ddl_running"))
    ]
    if running:
        out += ["", table(running, ["downstream DDL running", "how", "for (s)", "statement"])]
    if data.get("retrying"):
        retrying = [[r["what"], r["text"]] for r in data["retrying"]]
        out += ["", table(retrying, ["waiting to try again", "state"])]
    if data.get("paused"):
        # (a shard held at a DDL: the DDL's position, as `binlog list` shows it and `--pos` takes
        # it; else where it is read again from)
        paused = [
            [s, p.get("held_at") or p["position"], _parked(p.get("parked")), p["reason"]]
            for s, p in sorted(data["paused"].items())
        ]
        out += ["", table(paused, ["paused shard", "at", "parked", "why"])]
    if data.get("validation"):
        v = data["validation"]
        counts = [[t, c["pending"], c["validated"], c["failed"]] for t, c in v["targets"].items()]
        out += ["", table(counts, [f"validated ({v['mode']})", "pending", "validated", "failed"])]
    for field_name, header in (
        ("filtered", "events ignored by filters.events"),
        ("filtered_rows", "rows dropped by filters.rows"),
    ):
        filtered = sorted((data.get(field_name) or {}).items())
        counts = [[s, ", ".join(f"{k} {n}" for k, n in sorted(c.items()))] for s, c in filtered]
        if counts:
            out += ["", table(counts, ["shard", header])]
    return "\n".join(out)


def _behind(source: dict[str, Any]) -> str:
    """How far the source is read from where its server's binlog ended when last asked:
    bytes, and transactions where GTIDs tell ("?": the server did not answer)."""
    size = source.get("behind_bytes")
    if size is None:
        return "?"
    txns = source.get("behind_transactions")
    return _bytes(size) + (f", {txns:,} txn" if txns is not None else "")


def _parked(size: dict[str, int] | None) -> str:
    """What a paused shard's park holds (docs/operations/long-pauses.md): its changes read meanwhile."""
    if not size:
        return "-"
    rows = size["rows"]
    return f"{rows:,} row{'' if rows == 1 else 's'}, {_bytes(size['bytes'])}"


def _bytes(n: int) -> str:
    if n < 1024:
        return f"{n:,} B"
    exponent = min(3, (n.bit_length() - 1) // 10)  # KiB, MiB or GiB
    return f"{n / 1024**exponent:.1f} {('KiB', 'MiB', 'GiB')[exponent - 1]}"


def show_ddl_state(data: dict[str, Any]) -> str:
    out = [
        f"shard group {data['target']}: version {data['version']}, DDL propagation "
        f"{'on' if data['propagation'] else 'OFF'}",
        "",
        data["joined"] or "(no joined schema yet)",
        "",
    ]
    extract = {k.lower(): part for part, k in data.get("extract_columns", {}).items()}
    columns = [[c, _column_state(s, extract.get(c))] for c, s in data["columns"].items()]
    out += [table(columns, ["column", "state"]), ""]
    shards = []
    for shard, s in data["shards"].items():
        block = s["blocked"]
        shards.append([shard, "; ".join(s["differences"]) or "= joined", block["kind"] if block else "-"])
    out += [table(shards, ["shard", "differences from the join", "blocked"])]
    for shard, block in data["blocked"].items():
        out += [
            "",
            f"blocked: {shard} ({block['kind']}) at {block.get('position') or '?'}",
            f"  DDL:    {' '.join(block['ddl'].split())}",
            f"  reason: {block['reason']}",
            f"  fix:    {_held_fix(shard, block['kind'], data['target'])}",
        ]
    for entry in data["pending_downstream_ddl"]:
        done = entry["next_index"]
        out += [
            "",
            f"downstream DDL pending: journal entry {entry['seq']} (shard {entry['shard'] or '-'}), "
            f"{done} of {len(entry['statements'])} statements run:",
        ]
        out += [f"  {'done ' if i < done else 'to do'} {s}" for i, s in enumerate(entry["statements"])]
        out.append(f"  fix:    shardctl journal retry|skip --target {data['target']} --seq {entry['seq']}")
    return "\n".join(out)


def _column_state(state: str, part: str | None) -> str:
    if state == "extract":  # (no shard has it: it is not one they dropped)
        return f"added by shardmerge (extract{f': {part}' if part else ''})"
    return state


def _held_fix(shard: str, kind: str, target: str) -> str:
    """The way out of a shard held at its DDL, as `shardctl binlog list` details it."""
    if kind == "waiting":
        return f"shardctl enable-ddl-propagation --target {target}"
    flags = f"--source {(sid := ShardId.parse(shard)).source} --table {sid.table_key}"
    return f"`shardctl binlog list` shows its ways out (binlog skip|replace {flags}, set-schema)"


def show_history(entries: list[dict[str, Any]]) -> str:
    """Each version of the joined schema, with the shard's DDL that made it and the
    statements it sent downstream."""
    out = []
    for e in entries:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e["time"])) if e.get("time") else "?"
        out.append(f"version {e.get('version')}  {e.get('result')}  {e.get('shard') or '-'}  {when} UTC")
        out.append(f"  DDL:        {' '.join(str(e.get('ddl', '')).split())}")
        out += [f"  downstream: {' '.join(s.split())}" for s in e.get("downstream") or []]
        if e.get("message"):
            out.append(f"  {e['message']}")
    return "\n".join(out) or "(no history yet)"


def show_decision(data: dict[str, Any]) -> str:
    out = [f"{data['result']}: {data['message']} (version {data['version']})"]
    out += [f"  downstream: {s}" for s in data["downstream"]]
    if data["unblocked"]:
        out.append(f"  unblocked: {', '.join(data['unblocked'])}")
    if data["blocked"]:
        out.append(f"  still blocked: {', '.join(data['blocked'])}")
    back = data.get("rejoined", [])
    out += [f"  {s}: back in its group, resumed (its rows since its pause read again)" for s in back]
    return "\n".join(out)


def _when(seconds: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) if seconds else "?"


def _one_line(text: str | None, width: int = 70) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def held_by(ddl: dict[str, Any]) -> str:
    kind = ddl["kind"]
    if kind == "refused":
        return f"refused downstream (journal entry {ddl['seq']})"
    if kind == "behind":
        return f"behind journal entry {ddl['first']}"
    if kind == "waiting":
        return "waiting (DDL propagation off)"
    return kind


def show_held(ddls: list[dict[str, Any]], indent: str = "") -> list[str]:
    """Each held DDL: its shard, what holds it, where, the DDL, why, and the way out."""
    out = []
    for d in ddls:
        out += [
            f"{indent}{d['shard'] or d['target']}: {held_by(d)} at {d['position'] or '?'}",
            f"{indent}  DDL:      {_one_line(d['ddl'], 200)}",
            # (its own way out is the next line's)
            f"{indent}  reason:   {_one_line(d['reason'].split(WAY_OUT)[0], 200)}",
            f"{indent}  way out:  {d['way_out']}",
        ]
    return out


def show_binlog_list(data: dict[str, Any]) -> str:
    """binlog list: the DDLs held now, then the operations done on held DDLs."""
    held = data["blocked"]
    out = [f"{len(held)} DDL{'s' * (len(held) != 1)} held" + (":" if held else "")]
    out += show_held(held, "  ")
    done = data["operations"]
    out += ["", "operations done (none is ever set ahead: each acts at once on a DDL held):"]
    rows = [
        [
            _when(op["done_at"]),
            op["command"],
            op["shard"] or op["target"],
            op["position"] or "?",
            op["blocked"],
            _one_line("; ".join(op["statements"]), 50) or "-",
        ]
        for op in done
    ]
    out.append(
        table(rows, ["when (UTC)", "command", "shard", "position", "held", "SQL given"]) if rows else "  none"
    )
    return "\n".join(out)


def show_locks(data: dict[str, Any]) -> str:
    """shard-ddl-lock: each shard group with shards held at a DDL."""
    if not data["locks"]:
        return "no shard DDL lock: no shard is held at a DDL"
    out = []
    for lock in data["locks"]:
        synced = lock["synced"]
        out += [
            f"lock {lock['ID']} ({lock['mode']}): shard group {lock['target']}, version {lock['version']}",
            "  owner: none (optimistic: no shard runs the DDL for the others; each held one is settled "
            "on its own while the others go on)",
            f"  held (DM's unsynced), {len(lock['blocked'])}:",
            *show_held(lock["blocked"], "    "),
            f"  going on (DM's synced), {len(synced)}: {', '.join(synced) or '-'}",
            "",
        ]
    return "\n".join(out).rstrip()


def standby_text(data: dict[str, Any]) -> str:
    """A standby daemon's answer: who runs the task, and that it takes over."""
    held = data.get("daemon")
    by = f"run by {held['name']} (lease epoch {held['epoch']})" if held else "its holder not known yet"
    return f"standby: task {data['task']} is {by}; this daemon takes over when that lease expires"
