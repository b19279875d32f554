"""`shardmerge run --config X`: the daemon of a task (stops cleanly on SIGTERM), and
`shardmerge status --config X`: what the daemon has written down, readable while
it runs or after it stopped."""

from __future__ import annotations

import argparse
import json

from replicator.config import ConfigError, load_config
from replicator.errors import CliError
from replicator.usage import command


def register_run(subparsers: argparse._SubParsersAction) -> None:
    parser = command(
        subparsers,
        "run",
        help="run the replication daemon of a task",
        example="shardmerge run --config task.yaml --log-format json",
    )
    parser.add_argument("--config", required=True, help="task config (YAML)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument(
        "--log-format", default="text", choices=["text", "json"], help="json: one object per line"
    )
    parser.set_defaults(handler=run)


def register_status(subparsers: argparse._SubParsersAction) -> None:
    parser = command(
        subparsers,
        "status",
        help="the state a task's daemon has saved downstream",
        example="shardmerge status --config task.yaml --json",
    )
    parser.add_argument("--config", required=True, help="task config (YAML)")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=status)


def _config(path: str):
    try:
        return load_config(path)
    except ConfigError as exc:
        raise CliError(str(exc)) from exc


def run(args: argparse.Namespace) -> int:
    from replicator.apply.applier import ApplierFailed
    from replicator.daemon import Daemon, DaemonError

    config = _config(args.config)
    from replicator.logs import configure

    configure(config.task, args.log_level, args.log_format)
    try:
        return Daemon(config, args.log_format).run()
    except DaemonError as exc:
        raise CliError(str(exc), exc.code) from exc
    except ApplierFailed:
        return 1  # logged with its traceback where it happened


def status(args: argparse.Namespace) -> int:
    from replicator.control.status import saved_status

    config = _config(args.config)
    report = saved_status(config)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    for source, s in report["sources"].items():
        print(f"source {source}: resumes at {s['position']}")
    for target, g in report["groups"].items():
        print(f"group {target}: version {g['version']}, {len(g['shards'])} shards")
        for shard, block in g["blocked"].items():
            print(f"  blocked {shard} ({block['kind']}) at {block['position']}: {block['reason']}")
            print(f"    DDL: {block['ddl']}")
    for shard, p in report["paused"].items():
        print(f"paused {shard} from {p['position']}: {p['reason']}")
    return 0
