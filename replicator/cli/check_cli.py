"""`shardmerge check --config X`: preflight checks of a task config against its servers."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from replicator.cli.check import Problem, run_checks
from replicator.config import ConfigError, load_config
from replicator.errors import CliError, ExitCode
from replicator.usage import command, dm_alias_config

DESCRIPTION = (
    "Validate a task config, then check its sources and target: reachable, binlog settings (ROW, "
    "FULL row image and metadata), server ids, privileges, and keys of the routed tables. One line "
    "per problem with its fix; exit status 2 when any is an error (3 when a server cannot be reached)."
)


def register(subparsers: Any, dm: bool = False) -> None:
    """`check`; with `dm`, DM's spelling `check-task`, the task config given as dmctl takes
    the task file (or --config)."""
    parser = command(
        subparsers,
        "check-task" if dm else "check",
        help="DM's check-task: the same as `shardmerge check`" if dm else "preflight checks of a task config",
        example="shardmerge check-task task.yaml" if dm else "shardmerge check --config task.yaml --json",
        description=DESCRIPTION + (" The same as `shardmerge check`, in DM's spelling." if dm else ""),
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of lines")
    if dm:
        dm_alias_config(parser, run, type=Path)
        return
    parser.add_argument("--config", required=True, type=Path, metavar="FILE", help="the task config (YAML)")
    parser.set_defaults(handler=run)


def register_check_task(subparsers: Any) -> None:
    register(subparsers, dm=True)


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        # The message already names the file and the field: one line, no traceback.
        raise CliError(str(exc)) from exc
    problems = run_checks(config)
    errors = sum(1 for p in problems if p.level == "error")
    if args.json:
        print(
            json.dumps(
                {
                    "task": config.task,
                    "errors": errors,
                    "warnings": len(problems) - errors,
                    "problems": [p.to_dict() for p in problems],
                },
                indent=2,
            )
        )
    else:
        print(render(problems))
    if not errors:
        return ExitCode.OK
    unreachable = any(p.level == "error" and p.message.startswith("cannot connect") for p in problems)
    return ExitCode.CONNECTION if unreachable else ExitCode.CONFIG


def render(problems: list[Problem]) -> str:
    if not problems:
        return "no problems found"
    errors = sum(1 for p in problems if p.level == "error")
    warnings = len(problems) - errors
    summary = f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"
    return "\n".join([*(str(p) for p in problems), summary])
