"""DM's ways out of a held DDL, on the admin API (`shardctl binlog skip|replace|inject|list`,
`shard-ddl-lock` and its `unlock`; docs/dm.md). Which DDL: the one the request's
`shard` (or `source`, `table`, `target`) and `position` name, each optional where one held
DDL fits (replicator/api/blocked.py). What each does depends on where the DDL is held:

- by its shard group (conflict, unsupported): `skip` drops the DDL, not data (DM's meaning,
  issue 71): the shard keeps its schema from before it, and its rows written since its pause
  go downstream as they were written, as far as the downstream table takes them (a row it
  refuses pauses the shard at that row, named); `replace` takes the given DDL (one, in the shard's
  own terms) for it, and the rows since the pause are read again under the schema that
  makes; `unlock` is DM's optimistic unlock, whose default action is this skip;
  `inject` does not apply (nothing of the DDL runs downstream);
- by the downstream, which refused the statements the group made of it (a journal entry):
  `skip` marks the entry done without them, `replace` runs the given statements (in the
  downstream's terms) instead, `inject` runs them and then the entry's own, as DM runs
  injected statements before the failed DDL; the entries behind it run then, and the shards
  resume from where they paused.

An operation acts at once on a DDL already held; none is set ahead for a position not reached
yet (DM's can be, and `binlog revert` withdraws those): there is nothing to revert. What was
done is kept in the meta schema's binlog_operation table (replicator/state/operation_log.py).
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Any

from replicator.api.admin import AdminError, Route
from replicator.api.blocked import BlockedDDL, Held, Wanted, blocked_ddls, choose
from replicator.api.daemon_api import Daemon, decided, decision_data, shard_target
from replicator.apply.ddl_job import DDLJob
from replicator.schema import way_out
from replicator.schema.coordinator import Coordinator, Decision
from replicator.schema.group import Result
from replicator.shard_id import ShardId
from replicator.state.operation_log import Operation, OperationLog

# the held DDLs each operation acts on
VERBS: dict[str, tuple[Held, ...]] = {
    "skip": (Held.CONFLICT, Held.UNSUPPORTED, Held.TRUNCATE, Held.REFUSED),
    "replace": (Held.CONFLICT, Held.UNSUPPORTED, Held.REFUSED),
    "inject": (Held.REFUSED,),
    "unlock": (Held.CONFLICT, Held.UNSUPPORTED),
}
COMMANDS = {
    "skip": "binlog skip",
    "replace": "binlog replace",
    "inject": "binlog inject",
    "unlock": "shard-ddl-lock unlock",
}
LISTED = 50  # operations `binlog list` shows, the latest


def routes(daemon: Daemon) -> dict[tuple[str, str], Route]:
    call = daemon.calls.call
    out: dict[tuple[str, str], Route] = {
        ("GET", "/api/v1/binlog"): lambda body, p: call(lambda: listing(daemon)),
        ("GET", "/api/v1/shard-ddl-locks"): lambda body, p: call(lambda: locks(daemon)),
        ("POST", "/api/v1/shard-ddl-locks/unlock"): lambda body, p: operate(daemon, body, "unlock"),
    }
    for verb in ("skip", "replace", "inject"):
        out[("POST", f"/api/v1/binlog/{verb}")] = lambda body, p, verb=verb: operate(daemon, body, verb)
    return out


# -- views ------------------------------------------------------------------------------------------
def listing(daemon: Daemon) -> dict[str, Any]:
    """binlog list: the DDLs held now, and the operations done on held DDLs, the latest last."""
    log = OperationLog(daemon.meta.q, daemon.meta.t)
    done = log.parse(daemon.meta.rows(log.sql_load(LISTED)))
    return {
        "blocked": [d.to_data() for d in blocked_ddls(daemon)],
        "operations": [op.to_data() for op in done],
        "set_ahead": [],  # (none: an operation acts at once on a DDL held)
    }


def locks(daemon: Daemon) -> dict[str, Any]:
    """shard-ddl-lock: DM's lock is a shard group with shards held at a DDL; in our
    optimistic merge no shard is its owner (none runs a DDL for the others): each held shard
    is settled on its own, the others go on."""
    task = daemon.config.task
    found = blocked_ddls(daemon)
    out = []
    for target, view in sorted(daemon.views().items()):
        mine = [d for d in found if d.target == target]
        if not mine:
            continue
        held = {d.shard for d in mine}
        schema, table = target.split(".", 1)
        out.append(
            {
                "ID": f"{task}-`{schema}`.`{table}`",
                "task": task,
                "mode": "optimistic",
                "target": target,
                "version": str(view.version),
                "owner": None,
                "blocked": [d.to_data() for d in mine],
                "synced": sorted(str(s) for s in view.shards if s not in held),
            }
        )
    return {"task": task, "locks": out}


# -- operations -------------------------------------------------------------------------------------
def operate(daemon: Daemon, body: dict[str, Any], verb: str) -> dict[str, Any]:
    """Find the held DDL (on the daemon's main thread), have its group's executor act on it,
    wait for the decision (here, in the HTTP thread), and keep what was done."""
    given = _statements(body, verb)
    if verb == "unlock" and body.get("action", "skip") != "skip":
        raise AdminError(
            400,
            f"unlock action {body.get('action')!r}: only skip is offered. DM's exec runs the conflicting "
            "DDL downstream, which here has no table that holds this shard's rows and the others' "
            "together; `shardctl binlog replace --sql 'ALTER ...'` takes a DDL that joins instead",
        )
    if verb == "skip":
        discarded = daemon.calls.call(lambda: _skip_paused(daemon, _wanted(daemon, body)))
        if discarded is not None:
            return discarded
    chosen: list[BlockedDDL] = []
    ran: list[str] = []  # "given": the statements given ran (on the executor's thread)

    def submit() -> Future:
        ddl = choose(blocked_ddls(daemon), _wanted(daemon, body), COMMANDS[verb], VERBS[verb])
        chosen.append(ddl)
        return _submit(daemon, ddl, verb, given, ran)

    try:
        decision = decided(daemon, submit, COMMANDS[verb])
    except AdminError as exc:
        if not (given and chosen and chosen[0].kind is Held.REFUSED):
            raise
        seq = chosen[0].seq
        if ran:
            raise AdminError(
                exc.status, f"the given SQL ran downstream; then journal entry {seq}: {exc}"
            ) from exc
        raise AdminError(
            exc.status,
            f"the downstream refused the given SQL: {exc} (the statements before the refused one ran, "
            f"each committed as it ran); journal entry {seq} is as it was",
        ) from exc
    ddl = chosen[0]
    log = OperationLog(daemon.meta.q, daemon.meta.t)
    command = COMMANDS[verb]
    done = Operation(
        ddl.target,
        ddl.shard,
        ddl.position,
        command,
        str(ddl.kind),
        ddl.ddl,
        given,
        decision.message,
        time.time(),
    )
    daemon.meta.execute([log.sql_record(done)])
    return {**decision_data(decision), "held": ddl.to_data(), "then": _then(ddl, verb)}


def _skip_paused(daemon: Daemon, wanted: Wanted) -> dict[str, Any] | None:
    """`binlog skip` of a shard the daemon alone paused, no DDL held (the rows it wrote while
    paused could not be replayed, or its worker could not read them): those rows are
    discarded, as a skip discards a held DDL's, and the shard resumes after them (on the main
    thread; None: not such a shard, the held DDLs are looked at)."""
    shard = wanted.shard
    flow = daemon.flows.get(shard) if shard is not None and wanted.position is None else None
    if flow is None or flow.pause is None:
        return None
    if any(shard in view.blocked for view in daemon.views().values()) or any(
        d.shard == shard for d in blocked_ddls(daemon)
    ):
        return None
    since = flow.pause.position
    size = daemon.parking.size(shard)
    parked = size.rows if size is not None else None
    flow.discard_on_resume = True
    daemon.resume_shard(shard)
    dropped = f" ({parked} parked rows, and those its source had not parked)" if parked else ""
    message = (
        f"{shard} resumes; its rows written since {since} are discarded{dropped}: "
        f"`shardctl resync {way_out.flags(shard)}` copies its rows again"
    )
    target, view = next(((t, v) for t, v in daemon.views().items() if shard in v.shards), ("", None))
    done = Operation(target, shard, str(since), COMMANDS["skip"], "paused", None, (), message, time.time())
    daemon.meta.execute([OperationLog(daemon.meta.q, daemon.meta.t).sql_record(done)])
    version = str(view.version) if view is not None else ""
    return {
        "result": "resolved",
        "shard": str(shard),
        "message": message,
        "downstream": [],
        "version": version,
        "blocked": [],
        "unblocked": [str(shard)],
        "then": "its rows after the skip go on; a row that does not fit its table pauses it again",
    }


def _wanted(daemon: Daemon, body: dict[str, Any]) -> Wanted:
    shard = None
    if body.get("shard") is not None:
        try:
            shard = ShardId.parse(body["shard"])
        except ValueError as exc:
            raise AdminError(400, str(exc)) from None
        shard_target(daemon, shard)  # (a shard the task does not have: says so, naming those it has)
    texts = {name: body.get(name) for name in ("source", "table", "target", "position")}
    for name, value in texts.items():
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise AdminError(400, f"{name}: expected a string, got {value!r}")
    return Wanted(shard, **texts)


def _statements(body: dict[str, Any], verb: str) -> tuple[str, ...]:
    sql = body.get("sql")
    statements = [sql] if isinstance(sql, str) else list(sql or [])
    if not all(isinstance(s, str) and s.strip() for s in statements):
        raise AdminError(400, "sql: expected SQL statements (strings)")
    if verb in ("replace", "inject") and not statements:
        raise AdminError(400, f"binlog {verb} needs the SQL to run (--sql)")
    if verb in ("skip", "unlock") and statements:
        raise AdminError(400, f"{COMMANDS[verb]} takes no SQL (binlog replace or inject do)")
    return tuple(statements)


def _submit(daemon: Daemon, ddl: BlockedDDL, verb: str, given: tuple[str, ...], ran: list[str]) -> Future:
    if ddl.kind is Held.REFUSED:
        # replace: the given statements instead of the entry's; inject: before them
        action = "retry" if verb == "inject" else "skip"
        return finish_journal(daemon, ddl.target, ddl.seq, action, given, ran)
    shard, position = ddl.shard, ddl.position
    if verb in ("skip", "unlock"):
        job = DDLJob(shard, None, lambda c: c.skip_ddl(shard))
        return daemon.submit_operation(ddl.target, job)
    if len(given) != 1:
        raise AdminError(
            400, f"binlog replace of a DDL its shard group holds takes one DDL (--sql once), got {len(given)}"
        )

    def replace(c: Coordinator) -> Decision:
        return c.replace_ddl(shard, given[0], position)

    return daemon.submit_operation(ddl.target, DDLJob(shard, None, replace, states_table=True))


def finish_journal(
    daemon: Daemon,
    target: str,
    seq: int,
    action: str,
    given: tuple[str, ...] = (),
    ran: list[str] | None = None,
) -> Future:
    """A journal entry the downstream refused, settled: `given` statements run downstream
    first (then "given" is put in `ran`), then the rest of the entry runs (`retry`) or it is
    marked done (`skip`); the entries behind it run then, and the shards of them all resume."""
    pending = {e["seq"]: e for e in daemon.meta.journal.pending(target)}
    if seq not in pending:
        raise AdminError(
            404, f"{target} has no pending journal entry {seq}; pending: {sorted(pending) or 'none'}"
        )
    shard = pending[seq]["shard"]
    executor = daemon.executors[target]

    def finish(c: Coordinator) -> Decision:
        if given:
            executor.run_given(given)
            if ran is not None:
                ran.append("given")
        behind = executor.finish_entry(seq, skip=action == "skip")
        done = "marked done" if action == "skip" else "ran"
        first = "the given SQL ran downstream, then " if given else ""
        after = (
            f"; the entries that waited for it ran: {', '.join(map(str, behind))} resume" if behind else ""
        )
        return Decision(
            Result.RESOLVED,
            shard,
            f"(journal {action} {seq})",
            f"{first}journal entry {seq} of {target} {done}{after}",
            (),
            c.target,
            c.version,
            tuple(c.blocked),
            unblocked=tuple(s for s in dict.fromkeys(behind) if s is not None and s != shard),
        )

    return daemon.submit_operation(target, DDLJob(shard, None, finish))


def _then(ddl: BlockedDDL, verb: str) -> str:
    """What becomes of the shard's rows, in a line."""
    at = ddl.position or "its pause"
    if ddl.kind is Held.REFUSED:
        done = {
            "skip": f"journal entry {ddl.seq}'s statements were left out (the downstream table lacks what "
            "they would have done)",
            "replace": f"the given statements ran downstream instead of journal entry {ddl.seq}'s",
            "inject": f"the given statements ran downstream, then journal entry {ddl.seq}'s",
        }[verb]
        return f"{done}; the shard reads its rows again from where it paused"
    if verb in ("skip", "unlock"):
        return (
            f"the shard keeps its schema from before {at}; its rows written since go downstream as "
            "written, as far as the merged table takes them (a row it refuses pauses the shard there)"
        )
    return f"the shard's rows since {at} are read again, under the schema the given DDL made"
