"""What the admin API does to a running daemon (docs/design.md "Operator commands"): the
views of its state, pause and resume, and the operator's ways out of a blocked shard.

Every function here runs on the daemon's main thread (see admin.Calls), except the
waits for a group's DDL executor, which happen in the HTTP thread.

Resolving a blocked shard:
- set-schema: the operator says what the shard's table is; the coordinator re-joins.
  If that unblocks the shard, its rows since the pause are read again and applied
  (docs/design.md "Conflicts": continue from where it was first paused).
- binlog replace: the blocked DDL counts as the given DDL instead; the rows since the
  pause are read again and applied.
- binlog skip: the blocked DDL is dropped, not data (DM's meaning): the shard keeps the
  schema accepted before it, and the rows it wrote since the pause are read again with
  that table; one that does not fit it pauses the shard again at that row, named.
The binlog commands (and inject, list, shard-ddl-lock) are in binlog_ops.py; the journal's
retry and skip here share its way of settling an entry the downstream refused.
"""

from __future__ import annotations

import os
import socket
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

import pymysql

from lattice import Table, key, parse_table, render_table, render_type
from replicator.api import binlog_ops, members_ops
from replicator.api.admin import AdminError, Route
from replicator.api.blocked import blocked_ddls
from replicator.api.daemon_api import (
    Daemon,
    decided,
    decision_data,
    group_view,
    required,
    shard_of,
    shard_target,
)
from replicator.api.matrix import shard_matrix
from replicator.apply.ddl_job import DDLJob
from replicator.apply.inspect import read_table, table_exists
from replicator.apply.validator import Validator
from replicator.schema import way_out
from replicator.schema.group import GroupView
from replicator.schema.way_out import with_way_out
from replicator.servers import connect
from replicator.shard_id import ShardId
from replicator.state.pauses import Pause
from replicator.state.resync_store import PAUSED_FOR_RESYNC, ResyncState


def routes(daemon: Daemon) -> dict[tuple[str, str], Route]:
    call = daemon.calls.call
    return {
        ("GET", "/api/v1/status"): lambda body, p: daemon.calls.read(daemon.status),
        ("GET", "/api/v1/groups"): lambda body, p: call(lambda: sorted(daemon.views())),
        ("GET", "/api/v1/groups/*/ddl"): lambda body, p: call(lambda: ddl_state(daemon, p[0])),
        ("GET", "/api/v1/groups/*/history"): lambda body, p: call(lambda: history(daemon, p[0])),
        ("GET", "/api/v1/samples"): lambda body, p: daemon.calls.read(daemon.samples.to_data),
        ("POST", "/api/v1/pause"): lambda body, p: call(
            lambda: (
                pause_shard(daemon, shard_of(body))
                if "shard" in body
                else pause(daemon, body.get("source"), True)
            )
        ),
        ("POST", "/api/v1/resume"): lambda body, p: call(
            lambda: (
                resume_shard(daemon, shard_of(body))
                if "shard" in body
                else resume(daemon, body.get("source"))
            )
        ),
        ("POST", "/api/v1/shards/resume"): lambda body, p: call(lambda: resume_shard(daemon, shard_of(body))),
        ("POST", "/api/v1/shards/handle-error"): lambda body, p: call(
            lambda: handle_error(daemon, shard_of(body), body.get("action"), body.get("sql"))
        ),
        ("GET", "/api/v1/dead-letters"): lambda body, p: call(lambda: dead_letters(daemon)),
        ("GET", "/api/v1/validation"): lambda body, p: call(lambda: validation(daemon)),
        ("GET", "/api/v1/validation/errors"): lambda body, p: call(lambda: validation_errors(daemon)),
        ("POST", "/api/v1/validation/clear"): lambda body, p: call(
            lambda: clear_validation_errors(daemon, body.get("seq"))
        ),
        ("POST", "/api/v1/set-schema"): lambda body, p: _operate(daemon, body, "set-schema"),
        ("POST", "/api/v1/binlog-schema"): lambda body, p: _operate(daemon, body, "binlog-schema"),
        ("GET", "/api/v1/binlog-schema"): lambda body, p: call(lambda: binlog_schemas(daemon)),
        ("POST", "/api/v1/ddl-propagation"): lambda body, p: _operate(daemon, body, "propagation"),
        ("POST", "/api/v1/resync"): lambda body, p: call(lambda: start_resync(daemon, body)),
        ("POST", "/api/v1/groups/*/journal"): lambda body, p: _operate(
            daemon, {**body, "target": p[0]}, "journal"
        ),
        ("POST", "/api/v1/stop"): lambda body, p: call(lambda: stop(daemon)),
        **binlog_ops.routes(daemon),
        **members_ops.routes(daemon),
    }


# -- views --------------------------------------------------------------------------------------
def ddl_state(daemon: Daemon, target: str) -> dict[str, Any]:
    """The joined schema, each shard's differences from it, the column states, and
    the blocked shards with their DDL, reason and binlog position."""
    c = group_view(daemon, target)
    joined = c.target
    extract = frozenset(key(n) for n in c.extract_columns.values())
    shards = {}
    for shard, state in sorted(c.shards.items()):
        table = state.current or state.accepted
        shards[str(shard)] = {
            "differences": differences(table, joined, extract)
            if table is not None and joined is not None
            else [],
            "schema_unknown": state.current is None,
            "blocked": state.block.to_data() if state.block else None,
            "paused": _pause_data(daemon, shard),
        }
    return {
        "target": target,
        "version": str(c.version),
        "propagation": c.propagation,
        "joined": render_table(joined, daemon.flavor, name=target) if joined is not None else None,
        "columns": dict(c.columns),
        "matrix": shard_matrix(c),  # each shard's cell for each joined column (matrix.py)
        "extract_columns": dict(c.extract_columns),  # source, schema, table -> the column
        "shards": shards,
        "blocked": {str(s): b.to_data() for s, b in c.blocked.items()},
        "pending_downstream_ddl": daemon.meta.journal.pending(target),
    }


def _pause_data(daemon: Daemon, shard: ShardId) -> dict[str, str] | None:
    flow = daemon.flows.get(shard)
    pause = flow.pause if flow is not None else None
    return {"position": str(pause.position), "reason": pause.reason} if pause else None


def differences(shard: Table, joined: Table, extract: frozenset[str] = frozenset()) -> list[str]:
    """How a shard's table differs from the join, column by column (what makes the
    join wider than this shard, or what the shard has that the join lacks). The extract
    columns (keys in `extract`) are no difference: shardmerge adds them, no shard has them."""
    out = []
    for column in joined.columns:
        mine = shard.column(column.name)
        if mine is None and column.key in extract:
            continue
        if mine is None:
            out.append(f"{column.name}: missing here (partial in the join)")
            continue
        if mine.type != column.type:
            out.append(f"{column.name}: {render_type(mine.type)} here, {render_type(column.type)} joined")
        if mine.nullable != column.nullable:
            out.append(f"{column.name}: {'NULL' if mine.nullable else 'NOT NULL'} here")
    out += [f"{c.name}: only here" for c in shard.columns if joined.column(c.name) is None]
    return out


def history(daemon: Daemon, target: str) -> list[dict[str, Any]]:
    group_view(daemon, target)
    stored = daemon.meta.groups.load(target)
    return stored.history if stored is not None else []


def start_resync(daemon: Daemon, body: dict[str, Any]) -> dict[str, Any]:
    """`shardmerge resync` of a shard or of a source's shards, run by the daemon as a
    command of its own (Spark): the resync's state is in query-status."""
    shard, source = body.get("shard"), body.get("source")
    if (shard is None) == (source is None):
        raise AdminError(400, "expected {'shard': 'source.schema.table'} or {'source': name}")
    if source is not None and source not in daemon.sources:
        known = ", ".join(sorted(daemon.sources))
        raise AdminError(404, f"no source {source!r}; the task's sources: {known}")
    what = ["--source", source] if source is not None else ["--shard", str(shard_of(body))]
    try:
        pid = daemon.resyncs.start_job(daemon.config.path, what)
    except ValueError as exc:
        raise AdminError(409, str(exc)) from exc
    return {"started": " ".join(what), "pid": pid}


def pause(daemon: Daemon, source: str | None, paused: bool) -> dict[str, Any]:
    """Pause reading (a paused source's worker blocks once the pipe is full: nothing
    is lost, it is read later) or resume."""
    if source is not None and source not in daemon.sources:
        known = ", ".join(sorted(daemon.sources))
        raise AdminError(404, f"no source {source!r}; the task's sources: {known}")
    names = [source] if source is not None else sorted(daemon.sources)
    for name in names:
        daemon.set_source_paused(name, paused)
    return {"sources": {n: "paused" if paused else "running" for n in names}}


def pause_shard(daemon: Daemon, shard: ShardId) -> dict[str, Any]:
    """pause-task --table: the one shard stops where its source has read (its rows since wait,
    parked, and go downstream once it resumes); the others stream on. Saved: a restart keeps
    it paused."""
    if not any(shard in v.shards for v in daemon.views().values()):
        raise AdminError(404, f"no shard {shard} in the task's shard groups (query-status lists them)")
    flow = daemon.flows.get(shard)
    if flow is not None and flow.pause is not None:
        raise AdminError(409, f"shard {shard} is paused already: {flow.pause.reason}")
    if flow is not None and (flow.window is not None or flow.replay_to is not None):
        raise AdminError(409, f"shard {shard} is resuming (its rows of its last pause are merged): ask again")
    state = daemon.sources.get(shard.source)
    if state is None or state.position is None:
        raise AdminError(409, f"source {shard.source} has not started reading: ask again in a while")
    reason = with_way_out("paused by the operator (pause-task)", way_out.operator_paused(shard))
    return {"shard": str(shard), "paused_at": str(daemon.pause_shard(shard, reason))}


def resume(daemon: Daemon, source: str | None) -> dict[str, Any]:
    """resume-task: the sources are read again, a shard paused by a row the downstream
    refused reads its rows again (a retry: the row pauses it again if nothing was
    fixed), and every shard still paused is named with why (a blocked DDL, a journal
    entry, a table out of its group have their own ways out)."""
    data = pause(daemon, source, False)
    resumed = []
    for shard in sorted(daemon.flows.pauses()):
        if source is not None and shard.source != source:
            continue
        if daemon.meta.dead_letters.list(shard, "pending"):
            handle_error(daemon, shard, "retry")
            resumed.append(str(shard))
    still = {
        str(shard): {"position": str(p.position), "reason": p.reason}
        for shard, p in sorted(daemon.flows.pauses().items())
        if source is None or shard.source == source
    }
    return {**data, "resumed_shards": resumed, "paused_shards": still}


def handle_error(daemon: Daemon, shard: ShardId, action: Any, sql: Any = None) -> dict[str, Any]:
    """DM's handle-error, for the row the downstream refused and its paused shard:
    `skip` leaves it out (the dead-letter table keeps it), `replace` writes the given
    statements instead (in one transaction with the row's checkpoint), `retry` reads
    the shard's rows again from it (after a fix downstream). Then the shard resumes."""
    if action not in ("skip", "replace", "retry"):
        raise AdminError(400, f"action: expected skip, replace or retry, got {action!r}")
    statements = [sql] if isinstance(sql, str) else list(sql or [])
    if action == "replace" and not (statements and all(isinstance(s, str) and s.strip() for s in statements)):
        raise AdminError(400, "replace needs the SQL to write instead of the refused row (sql)")
    flow = daemon.flows.get(shard)
    if flow is None or flow.pause is None:
        raise AdminError(409, f"shard {shard} is not paused")
    pending = daemon.meta.dead_letters.list(shard, "pending")
    if not pending:
        raise AdminError(
            409, f"shard {shard} has no refused row waiting; {_paused_by(daemon, shard, flow.pause)}"
        )
    entry = pending[-1]
    cid = (int(entry["file_seq"]), int(entry["txn_pos"]), int(entry["idx"]))
    state = {"skip": "skipped", "replace": "replaced", "retry": "retried"}[action]
    writes = [*statements] if action == "replace" else []
    writes.append(daemon.meta.dead_letters.sql_handled(entry["seq"], state, "; ".join(statements) or None))
    # (earlier rows of it that waited beside it: handled, never applied, so not retried)
    writes += [daemon.meta.dead_letters.sql_handled(e["seq"], "retried") for e in pending[:-1]]
    if action != "retry":
        writes.append(daemon.meta.checkpoints.sql([(shard, int(entry["part"]), cid)]))
    try:
        daemon.meta.execute(writes)
    except pymysql.err.MySQLError as exc:
        raise AdminError(409, f"the downstream refused it: {exc.args[-1]}; nothing was changed") from exc
    if action != "retry":
        daemon.mark_applied(shard, int(entry["part"]), cid)
    position = flow.pause.position
    daemon.resume_shard(shard)
    return {
        "shard": str(shard),
        "action": action,
        "row": entry["key"],
        "seq": entry["seq"],
        "resumed_from": str(position),
    }


def _paused_by(daemon: Daemon, shard: ShardId, pause: Pause) -> str:
    """Why a shard not waiting on a refused row is paused, and the command that helps: one
    held at its DDL names the binlog command (handle-error is DM's old name for it)."""
    held = [d for d in blocked_ddls(daemon) if d.shard == shard]
    if not held:
        return f"it is paused because: {pause.reason}"
    ddl = held[0]
    return (
        f"it is paused at its DDL, {ddl.describe()} ({ddl.reason}); handle-error acts on a refused "
        f"row, the binlog commands on a DDL: {ddl.way_out()}"
    )


def stop(daemon: Daemon) -> dict[str, Any]:
    """stop-task: the daemon stops as on SIGTERM (its changes read are applied, the
    checkpoints and watermarks written, the stop recorded clean); it answers first."""
    daemon.stopping.set()
    # (where it runs: a client on the same machine waits for the process itself to end)
    return {"task": daemon.config.task, "stopping": True, "host": socket.gethostname(), "pid": os.getpid()}


def dead_letters(daemon: Daemon) -> list[dict[str, Any]]:
    return [{**e, "shard": str(e["shard"])} for e in daemon.meta.dead_letters.list()]


def _validator(daemon: Daemon) -> Validator:
    if daemon.validator is None:
        raise AdminError(
            409,
            "continuous validation is off: set validator: {mode: fast} (or full) in the "
            "task config and restart the task",
        )
    return daemon.validator


def validation(daemon: Daemon) -> dict[str, Any]:
    return {**_validator(daemon).status(), "open_errors": len(daemon.meta.validation_errors.list())}


def validation_errors(daemon: Daemon) -> list[dict[str, Any]]:
    """Open errors, also those of earlier runs (validation on or off now)."""
    return daemon.meta.validation_errors.list()


def clear_validation_errors(daemon: Daemon, seq: Any) -> dict[str, Any]:
    if seq is not None and not isinstance(seq, int):
        raise AdminError(400, f"seq: expected the number of an error (validation show-errors), got {seq!r}")
    return {"cleared": daemon.meta.validation_errors.clear(seq)}


def resume_shard(daemon: Daemon, shard: ShardId) -> dict[str, Any]:
    """A shard paused by a row the downstream refused reads its rows again from where
    it paused, once the operator has fixed the cause. Other pauses have their own way
    out, which this names instead of resuming rows that would not fit."""
    flow = daemon.flows.get(shard)
    for target, c in daemon.views().items():
        if shard in c.blocked:  # (said first: its way out, whether its flow is paused yet or not)
            raise AdminError(
                409,
                f"shard {shard} is blocked by its DDL ({c.blocked[shard].reason}); resolve that with "
                "set-schema, binlog skip or binlog replace, which resume it",
            )
        for entry in daemon.meta.journal.pending(target):
            if entry["shard"] == shard:
                raise AdminError(
                    409,
                    f"shard {shard} waits for downstream DDL journal entry {entry['seq']} of {target}; "
                    f"journal retry or journal skip --seq {entry['seq']} resumes it",
                )
    if flow is None or flow.pause is None:
        raise AdminError(409, f"shard {shard} is not paused")
    if flow.pause.reason == PAUSED_FOR_RESYNC:
        resync = daemon.resyncs.seen.get(shard)
        way = resync.message if resync is not None and resync.state == ResyncState.FAILED else "wait for it"
        raise AdminError(
            409, f"shard {shard} is paused for its resync (its rows downstream are copied again): {way}"
        )
    if not _in_a_group(daemon, shard):
        raise AdminError(409, f"the table of shard {shard} is not in its group; set-schema puts it back")
    position = flow.pause.position
    daemon.resume_shard(shard)
    return {"shard": str(shard), "resumed_from": str(position)}


def binlog_schemas(daemon: Daemon) -> dict[str, dict[str, Any]]:
    """binlog-schema list: each shard's schema as the coordinator tracks it (None after
    a DDL it could not follow), and whether its DDL is blocked."""
    out = {}
    for target, c in sorted(daemon.views().items()):
        for shard, state in sorted(c.shards.items()):
            table = state.current
            out[str(shard)] = {
                "target": target,
                "create_table": render_table(table, daemon.flavor) if table is not None else None,
                "blocked": state.block.kind if state.block else None,
            }
    return out


def _schema_from(daemon: Daemon, shard: ShardId, group: GroupView, body: dict[str, Any]) -> Table:
    """DM's binlog-schema update: the shard's table as its source has it now, as the
    downstream table has it (less the extract columns), or from a CREATE TABLE."""
    origin = body.get("from")
    if origin == "file":
        try:
            return schema_of(required(body, "create_table"), group.target)
        except AdminError:
            raise
        except Exception as exc:
            raise AdminError(400, f"binlog-schema {shard}: not a CREATE TABLE we can read: {exc}") from exc
    if origin == "source":
        source = next(s for s in daemon.config.sources if s.id == shard.source)
        try:
            with connect(source.connection_kwargs()) as conn:
                if not table_exists(conn, shard.schema, shard.table):
                    raise AdminError(409, f"source {shard.source} has no table {shard.table_key} now")
                return read_table(conn, shard.schema, shard.table)
        except pymysql.err.MySQLError as exc:
            raise AdminError(503, f"source {shard.source} cannot be read: {exc.args[-1]}") from exc
    if origin == "target":
        joined = group.target
        if joined is None:
            raise AdminError(409, f"{group.name} has no downstream table yet")
        extract = {c.lower() for c in group.extract_columns.values()}
        columns = tuple(c for c in joined.columns if c.key not in extract)
        indexes = []
        for ix in joined.indexes:
            parts = tuple(p for p in ix.parts if p.column.lower() not in extract)
            if parts:
                indexes.append(replace(ix, parts=parts))
        return replace(joined, name=shard.table, columns=columns, indexes=tuple(indexes))
    raise AdminError(400, f"from: expected source, target or file, got {origin!r}")


def schema_of(create: str, target: Table | None) -> Table:
    """A shard's table from an operator's CREATE TABLE. One written by hand often names
    no character set: it takes the target table's (as a database's default would), so
    its strings join the others' rather than stay of no known set."""
    table = parse_table(create)
    options = target.options if target is not None else None
    if table.options.charset is not None or options is None or options.charset is None:
        return table
    clause = f" DEFAULT CHARSET={options.charset}"
    if options.collation:
        clause += f" COLLATE={options.collation}"
    return parse_table(create.rstrip().rstrip(";") + clause)


# -- operations on a group --------------------------------------------------------------------------
def _operate(daemon: Daemon, body: dict[str, Any], kind: str) -> dict[str, Any]:
    outside: list[str] = []

    def submit() -> Future:  # (on the main thread, which owns the pauses)
        if kind == "set-schema" and _paused_outside(daemon, shard_of(body)):
            outside.append(str(shard_of(body)))
        return _submit(daemon, body, kind)

    data = decision_data(decided(daemon, submit, kind))
    # a shard paused outside its group resumes once the decision puts it back, unless it
    # blocks: said here, where the operator who ran set-schema looks (no block was lifted)
    data["rejoined"] = [s for s in outside if s not in data["blocked"]]
    return data


def _paused_outside(daemon: Daemon, shard: ShardId) -> bool:
    flow = daemon.flows.get(shard)
    paused = flow is not None and flow.pause is not None
    return paused and not _in_a_group(daemon, shard)


def _in_a_group(daemon: Daemon, shard: ShardId) -> bool:
    return any(shard in c.shards for c in daemon.views().values())


def _submit(daemon: Daemon, body: dict[str, Any], kind: str) -> Future:
    if kind == "propagation":
        enabled = body.get("enabled")
        if not isinstance(enabled, bool):
            raise AdminError(400, "missing 'enabled' (true or false)")
        target = body.get("target") or _only_group(daemon)
        group_view(daemon, target)
        action = (
            (lambda c: c.enable_ddl_propagation()) if enabled else (lambda c: c.disable_ddl_propagation())
        )
        return daemon.submit_operation(target, DDLJob(None, None, action))
    if kind == "journal":
        return _journal(daemon, body)
    shard = shard_of(body)
    target = shard_target(daemon, shard)
    group = daemon.views()[target]
    if kind == "binlog-schema":
        table = _schema_from(daemon, shard, group, body)
        return daemon.submit_operation(
            target, DDLJob(shard, None, lambda c: c.set_schema(shard, table), states_table=True)
        )
    if kind == "set-schema":
        create = required(body, "create_table")
        try:
            table = schema_of(create, group.target)
        except Exception as exc:
            raise AdminError(400, f"set-schema {shard}: not a CREATE TABLE we can read: {exc}") from exc
        return daemon.submit_operation(
            target, DDLJob(shard, None, lambda c: c.set_schema(shard, table), states_table=True)
        )
    raise AdminError(400, f"unknown operation {kind!r}")


def _journal(daemon: Daemon, body: dict[str, Any]) -> Future:
    """Retry or skip a pending downstream DDL (journal entry) that the downstream refused;
    then the shard it paused reads its rows again from where it paused, and so do those of
    the entries that waited for it, which run after it."""
    target = body["target"]
    group_view(daemon, target)
    seq, action = body.get("seq"), body.get("action")
    if not isinstance(seq, int) or action not in ("retry", "skip"):
        raise AdminError(400, "expected {'seq': N, 'action': 'retry' or 'skip'}")
    return binlog_ops.finish_journal(daemon, target, seq, action)


def _only_group(daemon: Daemon) -> str:
    if len(daemon.views()) != 1:
        raise AdminError(400, f"name the group ('target'): {', '.join(sorted(daemon.views()))}")
    return next(iter(daemon.views()))
