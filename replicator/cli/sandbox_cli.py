"""`shardmerge sandbox up|down|status`: local MariaDB servers for demos and tests."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from replicator.errors import CliError, ExitCode
from replicator.sandbox import STATE_FILE, Sandbox, SandboxError
from replicator.usage import command

DEFAULT_DIR = Path(".sandbox")
DEFAULT_UPSTREAMS = 2


def register(subparsers: Any) -> None:
    parser = command(
        subparsers,
        "sandbox",
        help="start, stop or inspect local MariaDB servers for demos and tests",
        example="shardmerge sandbox up --dir .sandbox --upstreams 2\nshardmerge sandbox down --dir .sandbox",
        description="Local MariaDB servers: N upstreams with ROW binlogs and one downstream, "
        "each on a free 127.0.0.1 port, root with an empty password.",
    )
    actions = parser.add_subparsers(dest="sandbox_action", metavar="ACTION", required=True)

    up = actions.add_parser("up", help="start the servers (reuses running ones)")
    _add_dir_option(up)
    up.add_argument(
        "--upstreams",
        type=_positive_int,
        default=None,
        metavar="N",
        help=f"number of upstream servers (default {DEFAULT_UPSTREAMS}, or as many as the "
        "existing sandbox in --dir has)",
    )
    up.set_defaults(handler=cmd_up)

    down = actions.add_parser("down", help="stop the servers and delete their data")
    _add_dir_option(down)
    down.set_defaults(handler=cmd_down)

    status = actions.add_parser("status", help="show the servers; exits 4 if any is not running")
    _add_dir_option(status)
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    status.set_defaults(handler=cmd_status)


def cmd_up(args: argparse.Namespace) -> int:
    upstreams = args.upstreams
    if upstreams is None:
        upstreams = _existing_upstreams(args.dir) or DEFAULT_UPSTREAMS
    sandbox = Sandbox(args.dir, upstreams=upstreams)
    try:
        instances = sandbox.up()
    except SandboxError as exc:
        raise CliError(str(exc)) from exc
    for inst in instances:
        print(f"{inst.name:<6} {inst.address:<16} {inst.role:<10} server_id={inst.server_id}")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    try:
        Sandbox(args.dir).down()
    except SandboxError as exc:
        raise CliError(str(exc)) from exc
    print(f"sandbox in {args.dir} is down")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    if not (args.dir / STATE_FILE).exists():
        raise CliError(f"no sandbox in {args.dir} (start one with `shardmerge sandbox up`)")
    try:
        sandbox = Sandbox.attach(args.dir)
        statuses = sandbox.status()
    except SandboxError as exc:
        raise CliError(str(exc)) from exc
    if args.json:
        print(json.dumps({"root": str(sandbox.root), "instances": [s.to_dict() for s in statuses]}, indent=2))
    else:
        rows = [["NAME", "ROLE", "ADDRESS", "SERVER_ID", "PID", "RUNNING", "VERSION"]]
        for s in statuses:
            rows.append(
                [
                    s.name,
                    s.role,
                    f"{s.host}:{s.port}",
                    str(s.server_id),
                    str(s.pid or "-"),
                    "yes" if s.running else "no",
                    s.version or "-",
                ]
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return ExitCode.OK if all(s.running for s in statuses) else ExitCode.WAITING


def _add_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_DIR,
        help=f"where the servers' data and {STATE_FILE} live (default: ./{DEFAULT_DIR})",
    )


def _existing_upstreams(root: Path) -> int | None:
    try:
        return len(Sandbox.attach(root).upstreams)
    except SandboxError:
        return None


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
