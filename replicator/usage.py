"""What every command's --help ends with: an example, and the exit codes
(`replicator.errors.ExitCode`), for `shardmerge` and `shardctl` alike; and the version
their --version prints."""

from __future__ import annotations

import argparse
from typing import Any

EXIT_CODES_HELP = (
    "exit status: 0 done; 1 internal error (a bug, with its traceback); 2 bad config, argument\n"
    "or request; 3 a server or the daemon unreachable, or a login or privilege refused; 4 the\n"
    "task waits for an operator (a conflict, a paused shard, not ready)"
)


def command(subparsers: Any, name: str, *, help: str, example: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand whose --help shows `example` (lines of commands) and the exit codes."""
    examples = "\n".join(f"  {line}" for line in example.splitlines())
    return subparsers.add_parser(
        name,
        help=help,
        description=kwargs.pop("description", None) or help[:1].upper() + help[1:] + ".",
        epilog=f"example:\n{examples}\n\n{EXIT_CODES_HELP}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kwargs,
    )


class VersionAction(argparse.Action):
    """`--version`: the version looked up only when asked (importlib.metadata's import is a
    tenth of a daemon's start)."""

    def __init__(self, option_strings, dest, prog: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show the version and exit", **kwargs)
        self.prog = prog

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"{self.prog} {version()}")
        parser.exit()


def version() -> str:
    """The installed shardmerge's version, for `--version` of `shardmerge` and `shardctl`."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("shardmerge")
    except PackageNotFoundError:
        return "unknown"


def dm_alias_config(parser: argparse.ArgumentParser, handler: Any, **kwargs: Any) -> None:
    """A DM spelling of a command (`check-task CONFIG`, `start-task CONFIG`): the task config
    as its first argument, as dmctl takes the task file, or --config as our commands do;
    `handler` then runs with it in `args.config`. `kwargs`: for both arguments (type)."""
    from replicator.errors import CliError

    parser.add_argument(
        "task_config", nargs="?", metavar="CONFIG", help="the task config (YAML), or --config FILE", **kwargs
    )
    parser.add_argument("--config", metavar="FILE", help="the task config (YAML)", **kwargs)

    def run(args: argparse.Namespace) -> Any:
        given = [path for path in (args.task_config, args.config) if path]
        if len(given) != 1:
            raise CliError("give the task config once: CONFIG, or --config FILE")
        args.config = given[0]
        return handler(args)

    parser.set_defaults(handler=run)
