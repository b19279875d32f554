"""`shardctl`: the operator's console for a running `shardmerge run` daemon, over
its HTTP admin API. Commands after DM's dmctl; tables for people, `--json` for scripts.

The daemon is found with --addr, or from the task config (--config: admin.host and
admin.port; nothing else of it is read, so no server password is needed), else
http://127.0.0.1:8080. A token, when the API requires one, comes from the environment
variable named by --token-env, else by the config's admin.token_env if it is set, else
SHARDCTL_TOKEN: never on the command line, where other users could read it.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

from replicator.cli.ctl_views import (
    show_binlog_list,
    show_ddl_state,
    show_decision,
    show_history,
    show_locks,
    show_status,
    table,
)
from replicator.config import AdminConfig, ConfigError, load_admin
from replicator.errors import ExitCode
from replicator.shard_id import ShardId, split_table_key
from replicator.usage import EXIT_CODES_HELP, VersionAction, command

DEFAULT_ADDR = "http://127.0.0.1:8080"
DEFAULT_TOKEN_ENV = "SHARDCTL_TOKEN"
SOURCE_HELP = "the source id (sources[].id in the task config)"
TARGET_HELP = "the shard group (downstream schema.table); needed when the task has several"


class CtlError(Exception):
    def __init__(self, message: str, code: ExitCode = ExitCode.CONFIG):
        super().__init__(message)
        self.code = code


# what an HTTP status of the admin API says, as an exit code
_HTTP_CODES = {401: ExitCode.CONNECTION, 403: ExitCode.CONNECTION, 503: ExitCode.CONNECTION}


STARTING_AGAIN = 15.0  # seconds a request waits for a member starting again


class _StartingAgain(Exception):
    def __init__(self, error: CtlError, after: float):
        super().__init__(str(error))
        self.error, self.after = error, after


class Client:
    def __init__(self, addr: str, token: str | None, timeout: float = 150.0):
        self.addr = addr.rstrip("/")
        self.token = token
        self.timeout = timeout

    def get(self, path: str) -> Any:
        return self._request("GET", path, None)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self._request("POST", path, body)

    def _request(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        """The daemon's answer; asked again while it says it starts again (a member does at
        each DDL decision: 503 with Retry-After), for up to STARTING_AGAIN seconds."""
        deadline = time.monotonic() + STARTING_AGAIN
        while True:
            try:
                return self._request_once(method, path, body)
            except _StartingAgain as exc:
                if time.monotonic() + exc.after > deadline:
                    raise exc.error from None
                time.sleep(exc.after)

    def _request_once(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.addr + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            after = exc.headers.get("Retry-After") if exc.code == 503 else None
            try:
                message = json.loads(exc.read()).get("error", exc.reason)
            except ValueError:
                message = exc.reason
            code = _HTTP_CODES.get(exc.code, ExitCode.INTERNAL if exc.code >= 500 else ExitCode.CONFIG)
            error = CtlError(f"{message} (HTTP {exc.code})", code)
            if after is not None and after.isdigit():
                raise _StartingAgain(error, float(after)) from exc
            raise error from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CtlError(
                f"no shardmerge daemon answers at {self.addr} ({reason}); is `shardmerge run` running, "
                "with the admin API on that address (admin.host/admin.port in the task config)?",
                ExitCode.CONNECTION,
            ) from exc
        if path == "/metrics":
            return payload.decode()
        return json.loads(payload)

    def alive(self) -> bool:
        """Whether the daemon's process still serves (/healthz, which needs no token)."""
        try:
            with urllib.request.urlopen(self.addr + "/healthz", timeout=5):
                return True
        except urllib.error.HTTPError:
            return True
        except (urllib.error.URLError, OSError):
            return False

    def ready(self) -> dict[str, Any]:
        """/readyz's answer, 200 or 503 alike (a probe needs no token)."""
        try:
            with urllib.request.urlopen(self.addr + "/readyz", timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 503:
                return json.loads(exc.read())
            raise CtlError(f"{exc.reason} (HTTP {exc.code})", ExitCode.INTERNAL) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise CtlError(
                f"no shardmerge daemon answers at {self.addr} ({getattr(exc, 'reason', exc)})",
                ExitCode.CONNECTION,
            ) from exc


# -- commands ------------------------------------------------------------------------------------
def _shard(args: argparse.Namespace) -> str:
    """--source and --table: the shard id the API takes."""
    if not args.source or not args.table:
        raise CtlError("name the shard with --source and --table")
    try:
        return str(ShardId(args.source, *_table(args.table)))
    except ValueError as exc:
        raise CtlError(str(exc)) from None


def _table(text: str) -> tuple[str, str]:
    if text.count(".") != 1:
        raise CtlError(f"--table {text!r}: expected schema.table")
    return split_table_key(text)


def _held(args: argparse.Namespace) -> dict[str, Any]:
    """The flags naming a held DDL, each optional (the daemon finds the one they fit, or
    lists those they could mean): --source and --table name a shard, either alone all the
    shards it fits; --target a shard group; --pos the DDL's binlog position."""
    if args.source and args.table:
        body: dict[str, Any] = {"shard": _shard(args)}
    elif args.table:
        _table(args.table)
        body = {"table": args.table}
    else:
        body = {"source": args.source} if args.source else {}
    if args.target:
        body["target"] = args.target
    if getattr(args, "pos", None):
        body["position"] = args.pos
    return body


def _named(entry: dict[str, Any], args: argparse.Namespace) -> bool:
    """Whether a held DDL or an operation is of the shard, source, table or group the flags
    name (binlog list, shard-ddl-lock)."""
    shard = ShardId.parse(entry["shard"]) if entry.get("shard") else None
    if args.target and entry["target"] != args.target:
        return False
    if args.source and (shard is None or shard.source != args.source):
        return False
    return not args.table or (shard is not None and shard.table_key == args.table)


def _group(client: Client, target: str | None) -> str:
    if target:
        return target
    groups = client.get("/api/v1/groups")
    if len(groups) != 1:
        raise CtlError(f"name the shard group with --target: {', '.join(groups)}")
    return groups[0]


def _validation(args: argparse.Namespace, client: Client) -> tuple[Any, str]:
    if args.action == "status":
        data = client.get("/api/v1/validation")
        rows = [
            [t, c["pending"], c["validated"], c["failed"], c["unchecked"]] for t, c in data["targets"].items()
        ]
        head = f"continuous validation ({data['mode']}): {data['open_errors']} open errors"
        return data, head + "\n\n" + table(rows, ["target", "pending", "validated", "failed", "unchecked"])
    if args.action == "clear-errors":
        data = client.post("/api/v1/validation/clear", {"seq": args.seq} if args.seq is not None else {})
        return data, f"{data['cleared']} errors cleared"
    data = client.get("/api/v1/validation/errors")
    rows = [
        [e["seq"], e["target"], e["shard"], f"{e['file']}:{e['txn_pos']}", e["key"], e["problem"]]
        for e in data
    ]
    return data, table(rows, ["seq", "target", "shard", "position", "row", "problem"])


def _members(args: argparse.Namespace, client: Client) -> tuple[Any, str]:
    if args.action == "move":
        if not args.source or not args.to:
            raise CtlError("members move needs --source and --to (the live member that reads it from now on)")
        data = client.post("/api/v1/members/move", {"source": args.source, "to": args.to})
        return data, (f"{args.source}: moved to member {args.to}; it reads it once the source's batches in "
                      "flight on its member before have committed (within a second or two)")
    if args.action == "remove":
        if not args.member:
            raise CtlError("members remove needs --member")
        data = client.post("/api/v1/members/remove", {"member": args.member})
        return data, f"member {args.member}: removed"
    data = client.get("/api/v1/members")
    rows = [
        [name, m["host"], "yes" if m["live"] else "no", "yes" if m["coordinates"] else "",
         ", ".join(m["sources"]), m["epoch"]]
        for name, m in data["members"].items()
    ]
    text = table(rows, ["member", "host", "live", "coordinates", "reads", "epoch"])
    if data["moved"]:
        moved = ", ".join(f"{s} to {m}" for s, m in sorted(data["moved"].items()))
        text += f"\nmoved by the operator: {moved}"
    return data, text


def run(args: argparse.Namespace, client: Client) -> tuple[Any, str]:
    command = args.command
    if command == "members":
        return _members(args, client)
    if command == "query-status":
        data = client.get("/api/v1/status")
        return data, show_status(data)
    if command == "show-ddl-state":
        data = client.get(f"/api/v1/groups/{quote(_group(client, args.target), safe='')}/ddl")
        return data, show_ddl_state(data)
    if command == "schema-history":
        data = client.get(f"/api/v1/groups/{quote(_group(client, args.target), safe='')}/history")
        return data, show_history(data)
    if command in ("pause-task", "resume-task") and args.table:
        if command == "pause-task":
            data = client.post("/api/v1/pause", {"shard": _shard(args)})
            return data, f"{data['shard']}: paused at {data['paused_at']}; the other shards stream on"
        data = client.post("/api/v1/resume", {"shard": _shard(args)})
        return data, f"{data['shard']}: resumed, reading its rows again from {data['resumed_from']}"
    if command in ("pause-task", "resume-task"):
        body = {"source": args.source} if args.source else {}
        data = client.post("/api/v1/pause" if command == "pause-task" else "/api/v1/resume", body)
        lines = [f"{s}: {state}" for s, state in data["sources"].items()]
        lines += [f"{s}: resumed (its refused row is tried again)" for s in data.get("resumed_shards", [])]
        lines += [f"{s}: still paused: {p['reason']}" for s, p in data.get("paused_shards", {}).items()]
        return data, "\n".join(lines)
    if command == "handle-error":
        body = {"shard": _shard(args), "action": args.action, "sql": args.sql or []}
        data = client.post("/api/v1/shards/handle-error", body)
        done = {
            "skip": "left out (in the dead-letter table)",
            "replace": "written as given",
            "retry": "to be tried again",
        }[args.action]
        return data, f"{data['shard']}: the row {data['row']} {done}; resumed from {data['resumed_from']}"
    if command == "binlog-schema":
        if args.action == "list":
            data = client.get("/api/v1/binlog-schema")
            out = []
            for shard, s in data.items():
                blocked = f" (blocked: {s['blocked']})" if s["blocked"] else ""
                out += [f"-- {shard} -> {s['target']}{blocked}", s["create_table"] or "(unknown)", ""]
            return data, "\n".join(out).rstrip()
        body: dict[str, Any] = {"shard": _shard(args)}
        chosen = [name for name in ("from_source", "from_target", "file") if getattr(args, name)]
        if len(chosen) != 1:
            raise CtlError("binlog-schema update takes one of --from-source, --from-target, --file")
        if args.file:
            try:
                body.update(**{"from": "file", "create_table": Path(args.file).read_text()})
            except OSError as exc:
                raise CtlError(f"--file {args.file}: {exc.strerror or exc}") from exc
        else:
            body["from"] = "source" if args.from_source else "target"
        data = client.post("/api/v1/binlog-schema", body)
        return data, show_decision(data)
    if command == "dead-letters":
        data = client.get("/api/v1/dead-letters")
        rows = [
            [e["seq"], e["shard"], f"{e['file']}:{e['txn_pos']}", e["key"], e["state"], e["error"]]
            for e in data
        ]
        return data, table(rows, ["seq", "shard", "position", "row", "state", "error"])
    if command == "validation":
        return _validation(args, client)
    if command == "binlog":
        return _binlog(args, client)
    if command == "shard-ddl-lock":
        return _lock(args, client)
    if command == "stop-task":
        return _stop(args, client)
    if command == "resync":
        body = {"source": args.source} if args.table is None else {"shard": _shard(args)}
        data = client.post("/api/v1/resync", body)
        return data, (
            f"resync {data['started']}: started by the daemon (pid {data['pid']}), its output in the "
            "daemon's log; query-status shows its state"
        )
    if command == "resume-shard":
        data = client.post("/api/v1/shards/resume", {"shard": _shard(args)})
        return data, f"{data['shard']}: resumed, reading its rows again from {data['resumed_from']}"
    if command == "set-schema":
        try:
            create = Path(args.file).read_text()
        except OSError as exc:
            raise CtlError(f"--file {args.file}: {exc.strerror or exc}") from exc
        data = client.post("/api/v1/set-schema", {"shard": _shard(args), "create_table": create})
        return data, show_decision(data)
    if command in ("disable-ddl-propagation", "enable-ddl-propagation"):
        body = {"enabled": command.startswith("enable")}
        if args.target:
            body["target"] = args.target
        data = client.post("/api/v1/ddl-propagation", body)
        return data, show_decision(data)
    if command == "journal":
        target = _group(client, args.target)
        body = {"seq": args.seq, "action": args.action}
        data = client.post(f"/api/v1/groups/{quote(target, safe='')}/journal", body)
        return data, show_decision(data)
    if command == "metrics":
        text = client.get("/metrics")
        return text, text.rstrip()
    if command == "health":
        data = client.ready()
        if data.get("role") == "standby":  # (healthy: it takes over when the lease expires)
            return data, f"standby: {', '.join(data['not_ready'])}"
        if not data["ready"]:
            waiting = ", ".join(data["not_ready"])
            raise CtlError(f"not ready: {waiting} (query-status says why)", ExitCode.WAITING)
        return data, "ready"
    raise CtlError(f"unknown command {command}")


REVERT = (
    "nothing to revert: an operation here acts at once on a DDL already held, none is set ahead "
    "for a binlog position not reached yet (DM's can be, and revert withdraws those); `shardctl "
    "binlog list` shows what was done. To undo one: `shardctl set-schema` says what a shard's "
    "table is, `shardctl resync` copies its rows again"
)


def _binlog(args: argparse.Namespace, client: Client) -> tuple[Any, str]:
    if args.action == "revert":
        raise CtlError(REVERT)
    if args.action == "list":
        data = client.get("/api/v1/binlog")
        data["blocked"] = [d for d in data["blocked"] if _named(d, args)]
        data["operations"] = [op for op in data["operations"] if _named(op, args)]
        return data, show_binlog_list(data)
    body = _held(args)
    if args.sql:
        body["sql"] = args.sql
    data = client.post(f"/api/v1/binlog/{args.action}", body)
    return data, f"{show_decision(data)}\n  then: {data['then']}"


def _lock(args: argparse.Namespace, client: Client) -> tuple[Any, str]:
    if args.action is None:
        data = client.get("/api/v1/shard-ddl-locks")
        data["locks"] = [lock for lock in data["locks"] if any(_named(d, args) for d in lock["blocked"])]
        return data, show_locks(data)
    body = {**_held(args), "action": args.unlock_action}
    data = client.post("/api/v1/shard-ddl-locks/unlock", body)
    return data, f"{show_decision(data)}\n  then: {data['then']}"


def _stop(args: argparse.Namespace, client: Client) -> tuple[Any, str]:
    data = client.post("/api/v1/stop", {})
    task = data["task"]
    if args.wait <= 0:
        return data, f"task {task}: stopping (not waited for)"
    deadline = time.monotonic() + args.wait
    while client.alive() or _running_here(data):
        if time.monotonic() > deadline:
            raise CtlError(
                f"task {task}: asked to stop, still stopping after {args.wait:.0f} s (a downstream DDL "
                "under way finishes first; its log says what it does)",
                ExitCode.WAITING,
            )
        time.sleep(0.3)
    return data, (
        f"task {task}: the daemon has stopped, as on SIGTERM (what it had read applied, its checkpoints "
        "written); `shardmerge start-task CONFIG` goes on from them"
    )


def _running_here(stopping: dict[str, Any]) -> bool:
    """The daemon's process, on this machine, has not ended: its API stops answering a moment
    before (the lease is released last). Elsewhere the API is all there is to watch."""
    pid = stopping.get("pid")
    if stopping.get("host") != socket.gethostname() or not isinstance(pid, int):
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # (ended, not yet reaped by whoever started it)


def global_flags(*, after_command: bool) -> argparse.ArgumentParser:
    """The flags naming the daemon and the output, taken before the command and after it.
    After it, a flag not given must leave the value given before: no default there."""
    flags = argparse.ArgumentParser(add_help=False)
    unset: dict[str, Any] = {"default": argparse.SUPPRESS} if after_command else {}
    flags.add_argument(
        "--addr",
        help=f"the daemon's admin API, host:port or http://host:port (default: from --config, else "
        f"{DEFAULT_ADDR})",
        **unset,
    )
    flags.add_argument(
        "--config",
        help="the task config, to find the admin API's address (its admin section only)",
        **unset,
    )
    flags.add_argument(
        "--token-env",
        help="environment variable with the bearer token (default: the config's admin.token_env "
        f"if set, else {DEFAULT_TOKEN_ENV})",
        **unset,
    )
    flags.add_argument("--json", action="store_true", help="print the API's JSON", **unset)
    return flags


BINLOG_HELP = """DM's binlog command on a DDL a shard is held at. Which DDL: the one --source,
--table, --target and --pos name, each optional where one held DDL fits; where several do,
the answer lists them with the flags naming each (exit 2). A DDL is held by its shard group
(conflict: no join with the other shards; unsupported: not followed; waiting: DDL propagation
off), or the downstream refused the statements the group made of it (a journal entry):

  skip     group: the shard keeps its schema from before the DDL, its rows since are discarded;
           downstream: the entry's statements are left out (marked done)
  replace  group: the given DDL (one, as the shard would run it) is taken for it, the shard's
           rows since are read again under it; downstream: the given SQL runs instead
  inject   downstream: the given SQL runs, then the entry's statements (DM: statements run
           before the failed DDL); for a DDL its group holds nothing runs downstream, so it
           does not apply
  list     the DDLs held now with their positions, and the operations done
  revert   nothing to withdraw: an operation acts at once on a DDL already held, none is set
           ahead for a position not reached yet (as DM's can be)

A waiting DDL goes on with enable-ddl-propagation. Each operation is kept in the meta schema
(binlog list shows them); the shards resume from where they paused."""

LOCK_HELP = """DM's shard-ddl-lock. Here a lock is a shard group with shards held at a DDL (binlog
list names why each is held); the other shards of the group go on, and no shard is the
owner that runs the DDL for the others (the merge is optimistic). unlock lets one held
shard go on as DM's optimistic unlock does by default (-a skip): its DDL is skipped, the
shard keeps its schema from before it and its rows since are discarded (binlog skip); the
flags are optional where one shard is held. exec (run the conflicting DDL) is not offered:
no downstream table holds the shard's rows and the others' together; binlog replace takes a
DDL that joins. A DDL the downstream refused is not a lock: binlog inject, replace or skip
settle it."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shardctl",
        description=__doc__.split("\n\n")[0],
        epilog="example:\n  SHARDCTL_TOKEN=... shardctl --addr http://10.0.0.5:8080 query-status\n\n"
        + EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[global_flags(after_command=False)],
    )
    parser.add_argument("--version", action=VersionAction, prog="shardctl")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    after = global_flags(after_command=True)

    def add(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return command(sub, name, parents=[after], **kwargs)

    add(
        "query-status",
        help="task (rows changed downstream since the daemon started), sources (position, lag, state), "
        "shard groups, paused shards, events filters ignored",
        example="shardctl --config task.yaml query-status --json",
    )
    for name in ("show-ddl-state", "show-ddl-locks"):
        p = add(
            name,
            help="a shard group's joined schema, shard differences, column states, blocked shards",
            example=f"shardctl {name} --target shop.orders",
        )
        p.add_argument("--target", help=TARGET_HELP)
    for name, verb in (("pause-task", "pause"), ("resume-task", "resume")):
        p = add(
            name,
            help=f"{verb} reading all sources, or one, or one shard (--source and --table)",
            example=f"shardctl {name}\nshardctl {name} --source s1 --table shop_01.orders_001",
        )
        p.add_argument("--source", help=f"{SOURCE_HELP}; without it, all sources")
        p.add_argument("--table", help="one shard's schema.table upstream (with --source): only that shard")
    binlog = add(
        "binlog",
        help="DM's binlog: skip, replace or inject SQL before a held DDL (the flags optional where "
        "one DDL is held), list the held DDLs and what was done; revert has nothing to withdraw",
        description=BINLOG_HELP,
        example="shardctl binlog list\n"
        "shardctl binlog skip\n"
        "shardctl binlog skip --source s1 --table shop_01.orders_001 --pos mysql-bin.000042:1234\n"
        "shardctl binlog replace --source s1 --table shop_01.orders_001 "
        "--sql 'ALTER TABLE orders_001 MODIFY b DOUBLE NULL'\n"
        "shardctl binlog inject --sql 'DELETE FROM shop.orders WHERE a IS NULL'",
    )
    binlog.add_argument(
        "action",
        choices=["skip", "replace", "inject", "revert", "list"],
        help="skip the held DDL, replace it (--sql), inject SQL before it, revert (nothing to), "
        "or list the held DDLs and what was done",
    )
    binlog.add_argument(
        "--source", help=f"{SOURCE_HELP}; with --table it names the shard (optional where one DDL is held)"
    )
    binlog.add_argument("--table", help="the shard's schema.table upstream")
    binlog.add_argument("--target", help="the shard group (downstream schema.table): only its DDLs")
    binlog.add_argument(
        "--pos", help="the held DDL's binlog position, file:pos (binlog list shows it); optional"
    )
    binlog.add_argument(
        "--sql",
        action="append",
        help="replace, inject: a statement (repeatable); for a DDL its group holds, one DDL in the "
        "shard's terms; for one the downstream refused, SQL in the downstream's terms",
    )
    handle = add(
        "handle-error",
        help="the row the downstream refused: skip it (dead-letter table), replace it, or retry it",
        example="shardctl handle-error skip --source s1 --table shop_01.orders_001\n"
        "shardctl handle-error replace --source s1 --table shop_01.orders_001 "
        "--sql \"INSERT INTO shop.orders (id, note) VALUES (7, 'fixed')\"\n"
        "shardctl handle-error retry --source s1 --table shop_01.orders_001",
    )
    handle.add_argument(
        "action",
        choices=["skip", "replace", "retry"],
        help="skip the row (into the dead-letter table), replace it by --sql, or retry it",
    )
    handle.add_argument("--source", required=True, help=SOURCE_HELP)
    handle.add_argument("--table", required=True, help="the shard's schema.table upstream")
    handle.add_argument("--sql", action="append", help="replace: a statement to run instead (repeatable)")
    schemas = add(
        "binlog-schema",
        help="list the shards' tracked schemas, or set one from its source, the target or a file",
        example="shardctl binlog-schema list\n"
        "shardctl binlog-schema update --source s1 --table shop_01.orders_001 --from-source",
    )
    schemas.add_argument(
        "action",
        choices=["list", "update"],
        help="list every shard's tracked schema, or update one (--source, --table and where from)",
    )
    schemas.add_argument("--source", help=f"update: {SOURCE_HELP}")
    schemas.add_argument("--table", help="the shard's schema.table upstream")
    schemas.add_argument("--from-source", action="store_true", help="the table as its source has it now")
    schemas.add_argument("--from-target", action="store_true", help="the downstream table")
    schemas.add_argument("--file", help="a CREATE TABLE file")
    add(
        "dead-letters",
        help="rows the downstream refused, and what became of them",
        example="shardctl dead-letters --json",
    )
    validation = add(
        "validation",
        help="continuous validation: counts per target (status), the rows found differing (show-errors), "
        "clear them (clear-errors, all or --seq)",
        example="shardctl validation status\nshardctl validation show-errors --json",
    )
    validation.add_argument(
        "action",
        choices=["status", "show-errors", "clear-errors"],
        help="counts per target, the rows found differing, or clear those found",
    )
    validation.add_argument("--seq", type=int, help="clear-errors: only this error")
    resync = add(
        "resync",
        help="copy a shard's rows again (or every shard of a source: --source alone) while the others "
        "stream: the daemon runs `shardmerge resync`",
        example="shardctl resync --source s1 --table shop_01.orders_001\nshardctl resync --source s1",
    )
    resync.add_argument("--source", required=True, help=SOURCE_HELP)
    resync.add_argument("--table", help="the shard's schema.table upstream (none: every shard of the source)")
    resume = add(
        "resume-shard",
        help="a shard paused by a row the downstream refused: read its rows again",
        example="shardctl resume-shard --source s1 --table shop_01.orders_001",
    )
    resume.add_argument("--source", required=True, help=SOURCE_HELP)
    resume.add_argument("--table", required=True, help="the shard's schema.table upstream")
    schema = add(
        "set-schema",
        help="force a shard's schema from a CREATE TABLE file",
        example="shardctl set-schema --source s1 --table shop_01.orders_001 --file orders.sql",
    )
    schema.add_argument("--source", required=True, help=SOURCE_HELP)
    schema.add_argument("--table", required=True, help="the shard's schema.table upstream")
    schema.add_argument("--file", required=True, help="a file with the shard's CREATE TABLE")
    for name in ("disable-ddl-propagation", "enable-ddl-propagation"):
        p = add(
            name,
            help=f"{name.split('-')[0]} sending the shards' DDL to the downstream table",
            example=f"shardctl {name} --target shop.orders",
        )
        p.add_argument("--target", help=TARGET_HELP)
    history = add(
        "schema-history",
        help="the joined schema's versions and what made them",
        example="shardctl schema-history --target shop.orders",
    )
    history.add_argument("--target", help=TARGET_HELP)
    journal = add(
        "journal",
        help="a downstream DDL the downstream refused: run it again (retry) or mark it done (skip)",
        example="shardctl journal retry --target shop.orders --seq 7",
    )
    journal.add_argument(
        "action",
        choices=["retry", "skip"],
        help="retry: run the entry's statements again; skip: mark them done without running them",
    )
    journal.add_argument("--seq", type=int, required=True, help="the journal entry (see show-ddl-state)")
    journal.add_argument("--target", help=TARGET_HELP)
    lock = add(
        "shard-ddl-lock",
        help="DM's shard DDL locks: each shard group with shards held at a DDL, and the shards "
        "going on; unlock lets one held shard go on by skipping its DDL",
        description=LOCK_HELP,
        example="shardctl shard-ddl-lock\n"
        "shardctl shard-ddl-lock unlock\n"
        "shardctl shard-ddl-lock unlock --source s1 --table shop_01.orders_001",
    )
    lock.add_argument("action", nargs="?", choices=["unlock"], help="unlock (none: show the locks)")
    lock.add_argument("--target", help="the shard group (downstream schema.table), DM's lock")
    lock.add_argument("--source", help=f"{SOURCE_HELP}; with --table it names the shard to unlock")
    lock.add_argument("--table", help="the shard's schema.table upstream")
    lock.add_argument(
        "--action",
        dest="unlock_action",
        default="skip",
        choices=["skip", "exec"],
        help="DM's unlock -a: skip (the default) drops the held DDL on that shard; exec is not "
        "offered (it says why)",
    )
    stop = add(
        "stop-task",
        help="stop the daemon cleanly, as SIGTERM does, and wait till it has; its checkpoints are "
        "kept and `shardmerge start-task` goes on from them",
        description="Stop the daemon cleanly, as SIGTERM does: what it has read is applied, its "
        "checkpoints and watermarks written, the stop recorded as clean; then wait until it has exited. "
        "Unlike DM's stop-task the task is not removed from anywhere (there is no cluster to remove it "
        "from): `shardmerge start-task CONFIG` (or run) goes on from the checkpoints. A daemon under a "
        "supervisor that restarts it (systemd Restart=always, a container's restart policy) is started "
        "again by it: stop it there instead. `pause-task` stops reading and keeps the daemon.",
        example="shardctl --config task.yaml stop-task",
    )
    stop.add_argument(
        "--wait",
        type=float,
        default=120.0,
        help="seconds to wait for the daemon to exit (default: 120; 0: ask and return); exit 4 when it "
        "has not by then",
    )
    members = add(
        "members",
        help="the task's members (shardmerge run --member): the sources each reads, which coordinates; "
        "move a source to a member, or forget a member gone",
        example="shardctl members\nshardctl members move --source s2 --to b\n"
        "shardctl members remove --member c",
    )
    members.add_argument(
        "action", nargs="?", choices=["move", "remove"], help="move, remove (none: list them)"
    )
    members.add_argument("--source", help=f"{SOURCE_HELP} to move")
    members.add_argument("--to", help="the live member that reads it from now on")
    members.add_argument(
        "--member", help="the member to forget (stopped first: its sources go to the others)"
    )
    add("metrics", help="the Prometheus metrics", example="shardctl metrics | grep lag")
    add(
        "health",
        help="ready (every source and the target connected), or what is not (exit 4)",
        example="shardctl --config /etc/shardmerge/task.yaml health",
    )
    return parser


def _daemon(args: argparse.Namespace) -> tuple[str, str | None]:
    """The admin API's URL and its token: as the flags say, else as the task config's admin
    section does, else the defaults (those of a config without one)."""
    admin = _admin(args.config) if args.config else AdminConfig()
    addr = _url(args.addr) if args.addr else _admin_url(admin)
    # the daemon's variable where it is set (on its host), else the operator's own
    names = [args.token_env] if args.token_env else [admin.token_env, DEFAULT_TOKEN_ENV]
    return addr, next((os.environ[n] for n in names if n and os.environ.get(n)), None)


def _admin(path: str) -> AdminConfig:
    try:
        return load_admin(path)
    except ConfigError as exc:
        raise CtlError(str(exc)) from exc


def _admin_url(admin: AdminConfig) -> str:
    if not admin.port:
        raise CtlError(
            "the task config's admin.port is 0: its daemon serves no admin API; set admin.port and "
            "restart it, or give --addr"
        )
    # a daemon listening on every address is reached on this host's loopback
    host = "127.0.0.1" if admin.host in ("0.0.0.0", "::") else admin.host
    return f"http://{f'[{host}]' if ':' in host else host}:{admin.port}"


def _url(addr: str) -> str:
    """--addr as typed: host:port alone means plain HTTP, as the daemon serves it."""
    return addr if "://" in addr else f"http://{addr}"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        client = Client(*_daemon(args))
        if args.command == "show-ddl-locks":
            args.command = "show-ddl-state"
        data, text = run(args, client)
    except CtlError as exc:
        print(f"shardctl {args.command}: {exc}", file=sys.stderr)
        return int(exc.code)
    print(json.dumps(data, indent=2, default=str) if args.json else text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
