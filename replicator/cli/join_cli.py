"""`shardmerge join`: the joined CREATE TABLE of two or more shard tables, or the
conflict that prevents it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lattice import (
    DDLSyntaxError,
    Flavor,
    JoinConflict,
    Table,
    join_all,
    parse_table,
    render_table,
    split_statements,
)
from replicator.errors import CliError, ExitCode
from replicator.usage import command


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = command(
        subparsers,
        "join",
        help="print the join of CREATE TABLE statements, or the conflict",
        example="shardmerge join shard1.sql shard2.sql --flavor mysql",
        description="Read CREATE TABLE statements (one or more per file, separated by ';'; '-' reads "
        "stdin) and print the table that accepts every row of all of them, as the downstream "
        "flavor would create it. Exit status 4 and the conflict when no such table exists.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="files with CREATE TABLE statements, or -")
    parser.add_argument(
        "--flavor",
        default="mariadb",
        choices=[f.value for f in Flavor],
        help="the server the joined table is written for (default: %(default)s)",
    )
    parser.add_argument("--name", help="table name for the output (default: the first table's)")
    parser.set_defaults(handler=run)


def read_tables(files: list[str]) -> list[Table]:
    tables = []
    for name in files:
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text()
        except OSError as exc:
            raise CliError(f"cannot read {name}: {exc.strerror}") from exc
        for number, statement in enumerate(split_statements(text), start=1):
            try:
                tables.append(parse_table(statement))
            except (DDLSyntaxError, ValueError) as exc:
                raise CliError(f"{name}, statement {number}: {exc}") from exc
    return tables


def run(args: argparse.Namespace) -> int:
    tables = read_tables(args.files)
    if len(tables) < 2:
        raise CliError(f"need at least two CREATE TABLE statements, got {len(tables)}")
    result = join_all(tables, args.flavor)
    if isinstance(result, JoinConflict):
        print(f"conflict: {result}")
        return ExitCode.WAITING
    print(render_table(result, args.flavor, name=args.name) + ";")
    return 0
