"""`shardmerge check --config X`: preflight checks of a task config against its servers."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from replicator.config import ConfigError, load_config
from replicator.control.check import Problem, run_checks
from replicator.errors import CliError, ExitCode
from replicator.usage import command


def register(subparsers: Any) -> None:
    parser = command(
        subparsers,
        "check",
        help="preflight checks of a task config",
        example="shardmerge check --config task.yaml --json",
        description="Validate a task config, then check its sources and target: reachable, binlog "
        "settings (ROW, FULL row image and metadata), server ids, privileges, and keys of the routed "
        "tables. One line per problem with its fix; exit status 2 when any is an error (3 when a "
        "server cannot be reached).",
    )
    parser.add_argument("--config", required=True, type=Path, metavar="FILE", help="the task config (YAML)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of lines")
    parser.set_defaults(handler=run)


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
