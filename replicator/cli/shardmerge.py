"""The `shardmerge` command. Each subcommand lives in its own module with a
`register(subparsers)` function; only the module of the command being run is
imported, so one subcommand's heavy imports (Spark, the binlog reader) or a broken
module never slow down or break the others."""

from __future__ import annotations

import argparse
import importlib
import os
import select
import signal
import sys

from replicator.errors import CliError, server_error
from replicator.usage import EXIT_CODES_HELP, VersionAction

# name -> (module defining `register(subparsers)`, or "module:function", one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "sandbox": ("replicator.cli.sandbox_cli", "start, stop or inspect local MariaDB servers"),
    "join": (
        "replicator.cli.join_cli",
        "print the join of CREATE TABLE statements, or the conflict",
    ),
    "plan": ("replicator.schema.plan", "replay a schema scenario offline and show the downstream DDL"),
    "demo": ("replicator.cli.demo", "run the demo on a local sandbox"),
    "check": ("replicator.cli.check_cli", "preflight checks of a task config"),
    "check-task": ("replicator.cli.check_cli:register_check_task", "DM's check-task: the same as check"),
    "import-dm": (
        "replicator.cli.import_dm_cli",
        "convert a TiDB DM task file (and its source files) into a task config",
    ),
    "run": ("replicator.cli.run_cli:register_run", "run the replication daemon of a task"),
    "start-task": ("replicator.cli.run_cli:register_start_task", "DM's start-task: the same as run"),
    "status": (
        "replicator.cli.run_cli:register_status",
        "the state a task's daemon has saved downstream",
    ),
    "backfill": ("replicator.cli.backfill_cli", "copy all shards' rows into the downstream tables"),
    "verify": ("replicator.cli.verify_cli", "compare the shards with the downstream tables (Spark)"),
    "resync": ("replicator.cli.resync_cli", "copy one shard's rows again while the others stream"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shardmerge",
        description="Merge sharded MySQL/MariaDB tables into one downstream table.",
        epilog="example:\n  shardmerge check --config task.yaml && shardmerge run --config task.yaml\n\n"
        + EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=VersionAction, prog="shardmerge")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        if name == command:
            module, _, function = module_name.partition(":")
            getattr(importlib.import_module(module), function or "register")(subparsers)
        else:
            subparsers.add_parser(name, help=help_text, add_help=False)
    return parser


def _command_of(argv: list[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(_command_of(argv))
    args = parser.parse_args(argv)
    try:
        code = int(args.handler(args) or 0)
        sys.stdout.flush()  # a reader gone shows here, not in the interpreter's exit
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        if not _stdout_closed():
            raise  # another pipe or socket: not the reader having had enough
        return _quiet_after_closed_stdout()
    except CliError as exc:
        print(f"shardmerge {args.command}: {exc}", file=sys.stderr)
        return int(exc.code)
    except Exception as exc:
        # a server that cannot be reached or refuses: one line, unless asked for the detail
        error = server_error(exc)
        if error is None or getattr(args, "log_level", None) == "DEBUG":
            raise
        print(f"shardmerge {args.command}: {error}", file=sys.stderr)
        return int(error.code)


def _stdout_closed() -> bool:
    """Whether nobody reads stdout any more (`shardmerge plan X | head -1`)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows), or no stdout file
        return False


def _quiet_after_closed_stdout() -> int:
    """As a command killed by SIGPIPE: no traceback, the status a shell gives it (141).
    Output still buffered goes to /dev/null, or the interpreter's last flush would
    report the closed pipe again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
