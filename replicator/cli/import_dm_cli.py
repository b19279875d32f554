"""`shardmerge import-dm TASK.yaml [SOURCE.yaml ...]`: a TiDB DM task file (and its DM source
files) as a shardmerge task config, with a note for each DM field that does not map one to
one. Exit status 0 when every field mapped, 4 when some did not (the notes say which and why),
2 for a file that is not a DM task or holds a value that cannot be carried over."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from replicator.cli.dm import Imported, NoteKind, import_dm
from replicator.config import ConfigError
from replicator.errors import CliError, ExitCode
from replicator.usage import command

# Notes the operator must read before running, kept in the written file as comments.
_TO_REVIEW = (NoteKind.NOT_MAPPED, NoteKind.OPERATOR)


def register(subparsers: Any) -> None:
    parser = command(
        subparsers,
        "import-dm",
        help="convert a TiDB DM task file (and its source files) into a task config",
        example="shardmerge import-dm task.yaml source1.yaml source2.yaml -o shop.yaml\n"
        "shardmerge check --config shop.yaml",
        description="Convert a TiDB DM task file, and the DM source files that hold each source's host, "
        "port, user and password, into a shardmerge task config (YAML, to stdout or -o). Each DM field "
        "that does not map one to one is noted on stderr (mapped, not needed, operator, not mapped) and "
        "the notes to act on are kept as comments in the file. No server is contacted. Exit status 4 "
        "when some fields could not be mapped.",
    )
    parser.add_argument("task", type=Path, metavar="TASK.yaml", help="the DM task file")
    parser.add_argument(
        "sources", nargs="*", type=Path, metavar="SOURCE.yaml", help="DM source files of the task's sources"
    )
    parser.add_argument("-o", "--output", type=Path, metavar="OUT.yaml", help="write the config here")
    parser.add_argument(
        "--keep-passwords",
        action="store_true",
        help="write DM's passwords into the config (default: password_env, a variable to set)",
    )
    parser.add_argument("--json", action="store_true", help="print the config and the notes as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        imported = import_dm(args.task, args.sources, keep_passwords=args.keep_passwords)
    except ConfigError as exc:
        raise CliError(str(exc)) from exc  # names the file and the DM field
    text = render_yaml(imported, args.output)
    if args.output is not None:
        try:
            args.output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot write {args.output}: {exc.strerror or exc}") from exc
    if args.json:
        print(json.dumps(report(imported), indent=2))
    else:
        if args.output is None:
            sys.stdout.write(text)
        for note in imported.notes:
            print(note.line(imported.task_file), file=sys.stderr)
        print(summary(imported, args.output), file=sys.stderr)
    return ExitCode.WAITING if imported.not_mapped else ExitCode.OK


def report(imported: Imported) -> dict[str, Any]:
    return {
        "task_file": imported.task_file,
        "source_files": list(imported.source_files),
        "config": imported.config,
        "notes": [n.to_dict() for n in imported.notes],
        "not_mapped": len(imported.not_mapped),
    }


def summary(imported: Imported, output: Path | None) -> str:
    counts = {kind: sum(1 for n in imported.notes if n.kind is kind) for kind in NoteKind}
    told = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
    then = (
        f"shardmerge check --config {output}"
        if output
        else "write it to a file (-o) and run shardmerge check"
    )
    return f"imported {imported.task_file}: {told or 'no notes'}; review the notes, then {then}"


def render_yaml(imported: Imported, output: Path | None) -> str:
    """The config as YAML under a header naming its DM files and the notes to act on."""
    sources = f" with {', '.join(imported.source_files)}" if imported.source_files else ""
    header = [
        f"# Imported by `shardmerge import-dm` from the DM task {imported.task_file}{sources}.",
        "# The notes to act on follow (import-dm printed every note); then run",
        f"#   shardmerge check --config {output or 'THIS_FILE'}",
    ]
    for kind in _TO_REVIEW:
        notes = [n for n in imported.notes if n.kind is kind]
        if notes:
            header.append(f"# {kind} ({len(notes)}):")
            header += [f"#   {n.line(imported.task_file).split(': ', 1)[1]}" for n in notes]
    body = yaml.safe_dump(imported.config, sort_keys=False, allow_unicode=True, width=100)
    return "\n".join(header) + "\n\n" + body
