"""Every `shardmerge` and `shardctl` command's --help, as an operator runs it (a process of its
own): every option and positional argument says what it is for, and no help text sends the
reader to a source file or to the design documents by a path outside the repository (they are
cited by section of docs/design.md). The commands are found by walking the parsers; what is
checked is what --help prints."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from replicator.cli import shardctl
from replicator.cli import shardmerge as cli
from tests.replication import REPO

MODULES = {"shardmerge": "replicator.cli.shardmerge", "shardctl": "replicator.cli.shardctl"}
# a .py file, the design documents' folder, or a path climbing out of the repository
FORBIDDEN = re.compile(r"\b[\w/]+\.py\b|seeds/|shared/|\.\./|/work/")
ENV = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "100"}


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*path, name))


def command_paths() -> list[tuple[str, ...]]:
    """("shardmerge",), ("shardmerge", "sandbox", "up"), ("shardctl", "binlog"), ...: every
    command and subcommand. `shardmerge` builds only the named command's parser in full."""
    paths = [("shardmerge",)]
    for name in cli.COMMANDS:
        paths += [p for p in _walk(cli.build_parser(name), ("shardmerge",)) if p[1:2] == (name,)]
    return paths + list(_walk(shardctl.build_parser(), ("shardctl",)))


def help_text(path: tuple[str, ...]) -> str:
    result = subprocess.run(
        [sys.executable, "-m", MODULES[path[0]], *path[1:], "--help"],
        capture_output=True, text=True, env=ENV, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0 and not result.stderr, (path, result.stderr)
    return result.stdout


def entries_without_help(text: str) -> list[str]:
    """The arguments --help lists with no text beside or under them. argparse writes an
    argument at an indent of 2 (a subcommand of a COMMAND list at 4), its help after two
    spaces or on the lines under it, indented further; an argument holding subcommands
    (COMMAND) is followed by them instead."""
    lines = text.splitlines()
    missing = []
    in_arguments = False
    for i, line in enumerate(lines):
        if re.fullmatch(r"\S.*:", line):  # a section's heading: "options:", "example:"
            in_arguments = line in ("options:", "positional arguments:") or line.endswith(" arguments:")
            continue
        indent = len(line) - len(line.lstrip(" "))
        if not in_arguments or indent not in (2, 4) or not line.strip():
            continue
        if "  " in line.strip():  # the help follows on the same line
            continue
        following = lines[i + 1] if i + 1 < len(lines) else ""
        under = len(following) - len(following.lstrip(" "))
        if following.strip() and (under > 4 or (indent == 2 and under == 4)):
            continue
        missing.append(line.strip())
    return missing


PATHS = command_paths()


@pytest.fixture(scope="module")
def helps() -> dict[tuple[str, ...], str]:
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(PATHS, pool.map(help_text, PATHS), strict=True))


def test_the_walk_finds_every_command_and_subcommand():
    names = {" ".join(p) for p in PATHS}
    assert {f"shardmerge {c}" for c in cli.COMMANDS} <= names
    assert {
        "shardmerge sandbox up",
        "shardctl binlog",
        "shardctl query-status",
        "shardctl stop-task",
    } <= names


@pytest.mark.parametrize("path", PATHS, ids=" ".join)
def test_every_argument_has_a_help_text(helps, path):
    assert entries_without_help(helps[path]) == [], helps[path]


def listed(text: str, name: str) -> bool:
    """Whether a command's --help lists subcommand `name` with its help (argparse leaves one
    without help out of the list)."""
    return re.search(rf"^    {re.escape(name)}( {{2,}}|\n {{5,}})\S", text, re.MULTILINE) is not None


@pytest.mark.parametrize("path", [p for p in PATHS if len(p) > 1], ids=" ".join)
def test_every_subcommand_is_listed_with_its_help_by_the_command_above(helps, path):
    assert listed(helps[path[:-1]], path[-1]), helps[path[:-1]]


@pytest.mark.parametrize("path", PATHS, ids=" ".join)
def test_no_help_text_cites_a_source_file_or_a_path_outside_the_repository(helps, path):
    assert FORBIDDEN.findall(helps[path]) == [], helps[path]


def test_the_help_parser_finds_an_argument_without_help():
    """The check above can fail: an argument with no help is found, at either indent."""
    parser = argparse.ArgumentParser(prog="x")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--loud", action="store_true", help="say more")
    parser.add_argument("action", choices=["a", "b"])
    sub = parser.add_subparsers(metavar="COMMAND")
    sub.add_parser("go", help="go on")
    text = parser.format_help()
    assert entries_without_help(text) == ["{a,b}", "--quiet"]
    assert listed(text, "go") and not listed(text, "stay")
    assert FORBIDDEN.findall("see replicator/api/admin.py or ../shared/seeds/002.txt")
