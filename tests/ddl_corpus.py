"""A differential DDL corpus (issue 43, item 1): the table DDL of MariaDB's own test suite,
replayed table by table on a sandbox MariaDB and through our model side by side.

The statements are read at run time from Debian's `mariadb-test` package (installed by
`make setup`, the same 10.11 as our server); none is copied into this repository.

Extraction. The `.test` files are split into commands as mysqltest does: `;` ends a
statement until a `delimiter` command changes it, `#` lines are comments, `--` lines are
one-line mysqltest commands, and a first word mysqltest knows (`let`, `eval`, `source`, ...)
makes a mysqltest command, not SQL. `--error` / `error` before a statement says the server
refuses it. Kept: CREATE TABLE, ALTER TABLE, CREATE [UNIQUE|FULLTEXT|SPATIAL] INDEX, DROP
INDEX, RENAME TABLE and DROP TABLE. Left out: statements with mysqltest variables (`$`),
`eval`, TEMPORARY tables (and the plain table of that name while a temporary one hides it),
partitions, names of other schemas (qualified, or after a USE of another database), and
statements inside if/while blocks (we do not evaluate their conditions). A left-out
statement on a table ends that table's sequence, which would no longer be the test's.

Grouping. A sequence is one table's statements from its CREATE TABLE to its DROP TABLE,
following RENAMEs. A CREATE the test expects to fail is a sequence of its own when no such
table is there; a DROP of several tables ends their sequences without being replayed (the
others are not in the scratch database).

Replay. Each sequence runs in a fresh database of the sandbox (foreign_key_checks off:
the referenced tables are not there) and through Replay of tests/server/test_ddl_against_mariadb.py,
which compares the tables as that test does (SHOW CREATE TABLE read with parse_table).
A statement our parser cannot read is followed as the server wrote it to its binlog, which
is what a tracker reads (a CREATE TABLE ... SELECT is logged as the CREATE TABLE of the
columns it made); one the server wrote nothing for is not-logged (the tables must still be
equal). After every statement the outcome is one of CLASSES. Where the two sides accepted
different things (differ, refused-by-us-only, accepted-by-us-only, crash) our tables are
reset to the server's, so that each statement is judged on its own. A sequence stops at
the first statement the server refuses unless the test file expected it: the statements
the test ran before it (SET, INSERT, other tables) are not replayed, so what follows is
no longer the test's story.

The downstream side (tests/ddl_corpus_downstream.py, left out with --upstream-only): every
statement our model agrees on also goes through the coordinator, with one shard and with two
identical shards, and the downstream DDL we emit runs on the sandbox's downstream server;
the report counts its outcomes per setup and shows each kind of finding with an example.

    python -m tests.ddl_corpus [--limit N] [--sandbox DIR] [--all-refusals] [--upstream-only]
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import re
import tempfile
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pymysql

from lattice import (
    DDLSyntaxError,
    OtherStatement,
    SchemaError,
    Table,
    UnsupportedDDL,
    parse,
    quote_string,
    render_table,
)
from replicator.sandbox import Instance, Sandbox
from tests.ddl_corpus_downstream import CLASSES as DOWNSTREAM_CLASSES
from tests.ddl_corpus_downstream import SETUPS, Downstream, DownstreamRun
from tests.ddl_corpus_downstream import Verdict as DownstreamVerdict
from tests.server.test_ddl_against_mariadb import Replay

SUITE = Path("/usr/share/mysql/mysql-test")
SELECTION = (
    "main/alter_table*.test",
    "main/create*.test",
    "main/key*.test",
    "main/type_*.test",
    "suite/innodb/t/alter*.test",
    "suite/innodb/t/instant_alter*.test",
    "suite/innodb/t/innodb-alter*.test",
)

AGREE = "agree"
DIFFER = "differ"
REFUSED_BOTH = "refused-both"
REFUSED_BY_US = "refused-by-us-only"
ACCEPTED_BY_US = "accepted-by-us-only"
CRASH = "crash"
# a statement we cannot read that the server took and wrote nothing to its binlog for (a
# CREATE TABLE IF NOT EXISTS ... SELECT of a table there): a tracker never sees it, and the
# server's table must be ours still
NOT_LOGGED = "not-logged"
CLASSES = (AGREE, DIFFER, REFUSED_BOTH, REFUSED_BY_US, ACCEPTED_BY_US, CRASH, NOT_LOGGED)

# First words that make a mysqltest command rather than SQL (mysqltest's command list,
# the ones these suites use and a few more).
MYSQLTEST_COMMANDS = frozenset(
    {
        "append_file",
        "assert",
        "cat_file",
        "change_user",
        "character_set",
        "chmod",
        "connect",
        "connection",
        "copy_file",
        "copy_files_wildcard",
        "dec",
        "delimiter",
        "die",
        "diff_files",
        "dirty_close",
        "disable_abort_on_error",
        "disable_connect_log",
        "disable_info",
        "disable_metadata",
        "disable_ps_protocol",
        "disable_query_log",
        "disable_reconnect",
        "disable_result_log",
        "disable_session_track_info",
        "disable_warnings",
        "disconnect",
        "echo",
        "enable_abort_on_error",
        "enable_connect_log",
        "enable_info",
        "enable_metadata",
        "enable_ps_protocol",
        "enable_query_log",
        "enable_reconnect",
        "enable_result_log",
        "enable_session_track_info",
        "enable_warnings",
        "end",
        "end_timer",
        "error",
        "eval",
        "exec",
        "execw",
        "exit",
        "file_exists",
        "horizontal_results",
        "inc",
        "let",
        "list_files",
        "list_files_append_file",
        "list_files_write_file",
        "lowercase_result",
        "mkdir",
        "move_file",
        "perl",
        "ping",
        "query",
        "query_attributes",
        "query_horizontal",
        "query_vertical",
        "real_sleep",
        "reap",
        "remove_file",
        "remove_files_wildcard",
        "replace_column",
        "replace_numeric_round",
        "replace_regex",
        "replace_result",
        "reset_connection",
        "result_format",
        "rmdir",
        "save_master_pos",
        "send",
        "send_eval",
        "send_quit",
        "send_shutdown",
        "shutdown_server",
        "single_query",
        "skip",
        "sleep",
        "sorted_result",
        "partially_sorted_result",
        "source",
        "start_timer",
        "sync_slave_with_master",
        "sync_with_master",
        "system",
        "vertical_results",
        "wait_for_slave_to_stop",
        "write_file",
    }
)
# Commands followed by lines up to a terminator (EOF unless given), not by statements.
_BLOCK_COMMANDS = {"perl": 0, "write_file": 1, "append_file": 1}
_BLOCK_START = re.compile(r"(?:if|while)\s*\(", re.IGNORECASE)
_ELSE = re.compile(r"\s*else\b", re.IGNORECASE)


@dataclass(frozen=True)
class Command:
    """One SQL statement of a .test file (mysqltest commands are read, not yielded)."""

    line: int
    sql: str
    expect_error: bool  # an --error directive came before it
    conditional: bool = False  # inside an if/while block
    evaluated: bool = False  # run by eval (its text has variables)


class _Reader:
    """mysqltest's reading of a .test file, as far as the statements go."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self.delimiter = ";"
        self.depth = 0  # if/while blocks we are in
        self.expect_error = False

    def commands(self) -> Iterator[Command]:
        while self._skip_space():
            start = self.pos
            char = self.text[start]
            if char == "#":
                self._rest_of_line()
            elif self.text.startswith("--", start):
                self._mysqltest(self._rest_of_line()[2:])
            elif char == "}":
                self._close_block()
            elif _BLOCK_START.match(self.text, start):
                self._open_block()
            else:
                command = self._statement(start)
                if command is not None:
                    yield command

    def _statement(self, start: int) -> Command | None:
        word = _first_word(self.text[start : start + 40])
        if word in MYSQLTEST_COMMANDS and word not in ("eval", "send_eval"):
            self._mysqltest(self._until_delimiter(quotes=False))
            return None
        body = self._until_delimiter(quotes=True).strip()
        evaluated = word in ("eval", "send_eval")
        if evaluated:
            body = body.split(None, 1)[1] if " " in body or "\n" in body else ""
        expect_error, self.expect_error = self.expect_error, False
        if not body:
            return None
        line = self.text.count("\n", 0, start) + 1
        return Command(line, body, expect_error, self.depth > 0, evaluated)

    def _mysqltest(self, command: str) -> None:
        word = _first_word(command)
        argument = command.strip()[len(word) :].strip()
        if word == "error":
            # `--error 0,ER_X` allows success; any error code says the server may refuse
            self.expect_error = any(code.strip() not in ("", "0") for code in argument.split(","))
            return
        self.expect_error = False  # an --error applies to the next command only
        if word == "delimiter" and argument:
            self.delimiter = argument.split()[0]
        elif word in _BLOCK_COMMANDS:
            words = argument.split()
            at = _BLOCK_COMMANDS[word]
            self._skip_block(words[at] if len(words) > at else "EOF")

    def _skip_space(self) -> bool:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1
        return self.pos < len(self.text)

    def _rest_of_line(self) -> str:
        end = self.text.find("\n", self.pos)
        end = len(self.text) if end < 0 else end
        line, self.pos = self.text[self.pos : end], end
        return line

    def _until_delimiter(self, *, quotes: bool) -> str:
        """The text up to the delimiter, which it consumes; inside quotes it does not count
        for SQL (mysqltest reads quotes the same way)."""
        if not quotes:
            end = self.text.find(self.delimiter, self.pos)
            end = len(self.text) if end < 0 else end
            body, self.pos = self.text[self.pos : end], end + len(self.delimiter)
            return body
        pattern = _delimiter_pattern(self.delimiter)
        for match in pattern.finditer(self.text, self.pos):
            if match.group(0) == self.delimiter:
                body, self.pos = self.text[self.pos : match.start()], match.end()
                return body
        body, self.pos = self.text[self.pos :], len(self.text)
        return body

    def _skip_block(self, terminator: str) -> None:
        while self.pos < len(self.text):
            self.pos += 1  # past the newline
            if self._rest_of_line().strip() == terminator:
                return

    def _open_block(self) -> None:
        # `if (condition)` then `{`, maybe on the next line; the condition may hold ')'
        level = 0
        while self.pos < len(self.text):
            char = self.text[self.pos]
            self.pos += 1
            level += (char == "(") - (char == ")")
            if char == ")" and level == 0:
                break
        brace = self.text.find("{", self.pos)
        self.pos = len(self.text) if brace < 0 else brace + 1
        self.depth += 1

    def _close_block(self) -> None:
        self.pos += 1
        if _ELSE.match(self.text, self.pos):  # `} else {`: the depth stays
            brace = self.text.find("{", self.pos)
            self.pos = len(self.text) if brace < 0 else brace + 1
        else:
            self.depth = max(0, self.depth - 1)


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _delimiter_pattern(delimiter: str) -> re.Pattern[str]:
    if delimiter not in _PATTERNS:
        _PATTERNS[delimiter] = re.compile(
            r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`|" + re.escape(delimiter), re.DOTALL
        )
    return _PATTERNS[delimiter]


def _first_word(text: str) -> str:
    match = re.match(r"\s*([A-Za-z_]+)", text)
    return match.group(1).lower() if match else ""


def read_commands(text: str) -> list[Command]:
    return list(_Reader(text).commands())


# -- which statements, on which tables ---------------------------------------------

_IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_NAME = rf"{_IDENT}(?:\s*\.\s*{_IDENT})?"
_FLAGS = re.IGNORECASE | re.DOTALL
_CREATE_TABLE = re.compile(
    rf"create\s+(?P<replace>or\s+replace\s+)?(?P<temporary>temporary\s+)?table\s+"
    rf"(?P<if_not_exists>if\s+not\s+exists\s+)?(?P<name>{_NAME})",
    _FLAGS,
)
_ALTER_TABLE = re.compile(
    rf"alter\s+(?:online\s+)?(?:ignore\s+)?table\s+(?:if\s+exists\s+)?(?P<name>{_NAME})", _FLAGS
)
_CREATE_INDEX = re.compile(
    rf"create\s+(?:or\s+replace\s+)?(?:online\s+|offline\s+)?(?:unique\s+|fulltext\s+|spatial\s+)?"
    rf"index\s+(?:if\s+not\s+exists\s+)?{_IDENT}\s+(?:(?:using|type)\s+\w+\s+)?on\s+(?P<name>{_NAME})",
    _FLAGS,
)
_DROP_INDEX = re.compile(
    rf"drop\s+(?:online\s+|offline\s+)?index\s+(?:if\s+exists\s+)?{_IDENT}\s+on\s+(?P<name>{_NAME})", _FLAGS
)
_RENAME_TABLE = re.compile(r"rename\s+tables?\s+(?P<rest>.*)", _FLAGS)
_RENAME_PAIR = re.compile(rf"\s*(?P<old>{_NAME})\s+to\s+(?P<new>{_NAME})\s*(?:,|$)", _FLAGS)
_DROP_TABLE = re.compile(
    r"drop\s+(?P<temporary>temporary\s+)?tables?\s+(?:if\s+exists\s+)?(?P<rest>.*?)\s*(?:restrict|cascade)?\s*$",
    _FLAGS,
)
# ALTER TABLE ... RENAME [TO|AS] name, not RENAME COLUMN/INDEX/KEY
_ALTER_RENAME = re.compile(
    rf"\brename\s+(?:to\s+|as\s+)?(?!(?:column|index|key|constraint)\b)(?P<name>{_NAME})", _FLAGS
)
_USE = re.compile(rf"use\s+(?P<name>{_IDENT})\s*$", _FLAGS)
# (SHOW BINLOG EVENTS shows a statement run in a database after that database's USE)
# and the session's settings it logs with it (foreign_key_checks, set by `_Replayer`)
_LOGGED_IN = re.compile(r"(?:use `(?:[^`]|``)*`; )?(?:set \w+=\w+; )*")
_PARTITION = re.compile(r"\bpartition", re.IGNORECASE)


@dataclass(frozen=True)
class TableDDL:
    """A statement of the kinds we keep: what it does to which tables."""

    kind: str  # create, alter, index, rename, drop
    names: tuple[str, ...]  # raw names as written; RENAME: old, new, old, new, ...
    replaces: bool = False  # CREATE OR REPLACE / IF NOT EXISTS: a table there is no error
    temporary: bool = False
    renamed_to: str | None = None  # ALTER TABLE ... RENAME TO


def table_ddl(sql: str) -> TableDDL | None:
    """What a kept statement does, or None for other statements."""
    if match := _CREATE_TABLE.match(sql):
        replaces = bool(match["replace"] or match["if_not_exists"])
        return TableDDL("create", (match["name"],), replaces, bool(match["temporary"]))
    if match := _ALTER_TABLE.match(sql):
        rename = _ALTER_RENAME.search(sql, match.end())
        return TableDDL("alter", (match["name"],), renamed_to=rename["name"] if rename else None)
    if match := _CREATE_INDEX.match(sql) or _DROP_INDEX.match(sql):
        return TableDDL("index", (match["name"],))
    if match := _RENAME_TABLE.match(sql):
        names = [n for pair in _RENAME_PAIR.finditer(match["rest"]) for n in (pair["old"], pair["new"])]
        return TableDDL("rename", tuple(names))
    if match := _DROP_TABLE.match(sql):
        names = tuple(n.strip() for n in match["rest"].split(",") if n.strip())
        return TableDDL("drop", names, temporary=bool(match["temporary"]))
    return None


def unquote(name: str) -> str:
    name = name.strip()
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def is_qualified(name: str) -> bool:
    return re.fullmatch(rf"{_IDENT}\s*\.\s*{_IDENT}", name.strip()) is not None


def left_out(command: Command, ddl: TableDDL, database: str) -> str | None:
    """Why a kept kind of statement is not replayed, or None."""
    if command.evaluated:
        return "eval"
    if "$" in command.sql:
        return "mysqltest variable"
    if ddl.temporary:
        return "temporary table"
    if re.search("[\udc80-\udcff]", command.sql):  # bytes of another charset (surrogateescape)
        return "not UTF-8"
    if _PARTITION.search(command.sql):
        return "partitions"
    if database != "test" or any(is_qualified(n) for n in (*ddl.names, ddl.renamed_to or "")):
        return "other schema"
    if command.conditional:
        return "inside if/while"
    return None


# -- sequences ---------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    sql: str
    line: int
    expect_error: bool


@dataclass
class Sequence:
    path: str  # relative to SUITE
    table: str
    steps: list[Step] = field(default_factory=list)

    @property
    def source(self) -> str:
        return f"{self.path}:{self.steps[0].line}"


@dataclass
class Extraction:
    sequences: list[Sequence] = field(default_factory=list)
    files: int = 0
    left_out: Counter[str] = field(default_factory=Counter)

    @property
    def statements(self) -> int:
        return sum(len(s.steps) for s in self.sequences)


class _Grouper:
    """Follows one file's tables, opening and closing their sequences."""

    def __init__(self, path: str, extraction: Extraction):
        self.path = path
        self.extraction = extraction
        self.open: dict[str, Sequence] = {}
        self.hidden: set[str] = set()  # names a temporary table hides
        self.database = "test"  # mysqltest's

    def feed(self, command: Command) -> None:
        if use := _USE.match(command.sql):
            self.database = unquote(use["name"])
            return
        ddl = table_ddl(command.sql)
        if ddl is None:
            return
        names = [unquote(n) for n in ddl.names]
        reason = left_out(command, ddl, self.database)
        if ddl.temporary or reason is not None or self.hidden.intersection(names):
            self._leave_out(ddl, names, reason or "hidden by a temporary table")
            return
        step = Step(command.sql, command.line, command.expect_error)
        getattr(self, f"_{ddl.kind}")(ddl, names, step)

    def finish(self) -> None:
        for name in list(self.open):
            self._close(name)

    def _leave_out(self, ddl: TableDDL, names: list[str], reason: str) -> None:
        self.extraction.left_out[reason] += 1
        for name in names:
            self._close(name)
        if ddl.kind == "create" and ddl.temporary:
            self.hidden.update(names)
        elif ddl.kind == "drop":  # DROP [TEMPORARY] TABLE drops the temporary one first
            self.hidden.difference_update(names)

    def _close(self, name: str) -> None:
        sequence = self.open.pop(name, None)
        if sequence is not None:
            self.extraction.sequences.append(sequence)

    def _create(self, ddl: TableDDL, names: list[str], step: Step) -> None:
        name = names[0]
        if name in self.open and (ddl.replaces or step.expect_error):
            self.open[name].steps.append(step)
            return
        self._close(name)  # a table there that we did not see dropped: a new story
        self.open[name] = Sequence(self.path, name, [step])
        if step.expect_error:  # nothing follows a CREATE the server refuses
            self._close(name)

    def _alter(self, ddl: TableDDL, names: list[str], step: Step) -> None:
        sequence = self.open.get(names[0])
        if sequence is None:
            return
        sequence.steps.append(step)
        if ddl.renamed_to is not None and not step.expect_error:
            self._move(names[0], unquote(ddl.renamed_to))

    def _index(self, ddl: TableDDL, names: list[str], step: Step) -> None:
        if names[0] in self.open:
            self.open[names[0]].steps.append(step)

    def _rename(self, ddl: TableDDL, names: list[str], step: Step) -> None:
        # Follow the chain t1 -> t2, t2 -> t3: replayable when one open table is all it moves.
        current: str | None = None
        for old, new in zip(names[::2], names[1::2], strict=True):
            if old != current and (current is not None or old not in self.open):
                for name in names:
                    self._close(name)
                return
            current = new
        first = names[0] if names else ""
        if first not in self.open:
            return
        self.open[first].steps.append(step)
        if not step.expect_error and current is not None:
            self._move(first, current)

    def _drop(self, ddl: TableDDL, names: list[str], step: Step) -> None:
        if len(names) == 1 and names[0] in self.open:
            self.open[names[0]].steps.append(step)
            if not step.expect_error:
                self._close(names[0])
            return
        for name in names:
            self._close(name)

    def _move(self, old: str, new: str) -> None:
        self._close(new)
        self.open[new] = self.open.pop(old)


def extract_file(path: str, text: str, extraction: Extraction) -> None:
    grouper = _Grouper(path, extraction)
    for command in read_commands(text):
        grouper.feed(command)
    grouper.finish()


def selected_files(root: Path = SUITE, selection: Iterable[str] = SELECTION) -> list[Path]:
    return sorted({p for pattern in selection for p in root.glob(pattern)})


def extract(root: Path = SUITE, selection: Iterable[str] = SELECTION) -> Extraction:
    """The sequences of the selected files, sorted by their source."""
    extraction = Extraction()
    for path in selected_files(root, selection):
        extraction.files += 1
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        extract_file(str(path.relative_to(root)), text, extraction)
    extraction.sequences.sort(key=lambda s: (s.path, s.steps[0].line))
    return extraction


# -- replay ------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    sequence: Sequence
    step: Step
    outcome: str  # one of CLASSES
    detail: str = ""  # our refusal, the server's, the diff or the traceback
    same_code: bool | None = None  # refused-both: our code is the server's


@dataclass
class Run:
    verdicts: list[Verdict] = field(default_factory=list)
    stopped: Counter[str] = field(default_factory=Counter)  # server errors that stopped a sequence
    not_reached: int = 0  # statements after a stop
    seconds: float = 0.0
    downstream: DownstreamRun | None = None  # the coordinator and diff side, when it ran

    def counts(self) -> Counter[str]:
        return Counter(v.outcome for v in self.verdicts)


class _Replayer:
    """One sequence on the server and through our model."""

    def __init__(self, upstream: Instance, sequence: Sequence, database: str):
        self.sequence = sequence
        self.conn = upstream.connect(database, read_timeout=120)
        with self.conn.cursor() as cur:
            cur.execute("SET SESSION foreign_key_checks = 0")
            cur.execute(
                "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA"
                " WHERE SCHEMA_NAME = %s",
                (database,),
            )
            charset = cur.fetchone()
            cur.execute("SELECT @@default_storage_engine")
            engine = cur.fetchone()[0]
        self.replay = Replay(upstream, database, schema_charset=tuple(charset), default_engine=engine)

    def close(self) -> None:
        self.conn.close()

    def step(self, step: Step) -> tuple[Verdict | None, str | None]:
        """The verdict on one statement (None: the server cannot show its table), and why
        the sequence stops there (None: it goes on). Where we cannot read the statement, the
        one the server wrote to its binlog for it is followed, if another (`_as_logged`), and
        the verdict's step says which."""
        start = self._binlog_end()
        server_error = self._server(step.sql)
        refusal, crash, code = self._ours(step.sql)
        logged: Step | None = step
        if server_error is None and refusal is not None and refusal.startswith("unsupported"):
            logged = self._as_logged(step, start)
            if logged is not None and logged is not step:
                step = logged
                refusal, crash, code = self._ours(step.sql)
        if logged is None:
            try:
                verdict = self._compare(step)
            except pymysql.MySQLError as exc:
                return None, f"the server cannot show the table: {exc.args[0]}"
            if verdict.outcome == AGREE:
                verdict = replace(verdict, outcome=NOT_LOGGED)
        if logged is None:
            pass
        elif crash is not None:
            verdict = Verdict(self.sequence, step, CRASH, crash)
        elif server_error is not None and refusal is not None:
            detail = f"{refusal} | server: {server_error[0]} {server_error[1]}"
            verdict = Verdict(self.sequence, step, REFUSED_BOTH, detail, same_code=code == server_error[0])
        elif server_error is not None:
            verdict = Verdict(
                self.sequence, step, ACCEPTED_BY_US, f"server: {server_error[0]} {server_error[1]}"
            )
        elif refusal is not None:
            verdict = Verdict(self.sequence, step, REFUSED_BY_US, refusal)
        else:
            try:
                verdict = self._compare(step)
            except pymysql.MySQLError as exc:  # e.g. a MERGE table over tables not there
                return None, f"the server cannot show the table: {exc.args[0]}"
        if server_error is not None and not step.expect_error:
            return verdict, f"server error {server_error[0]}"
        if verdict.outcome not in (AGREE, REFUSED_BOTH, NOT_LOGGED):
            try:
                self.replay.tables = self.replay.server_tables()
            except Exception:  # whatever it is, our tables cannot follow the server's
                return verdict, "we cannot read the server's SHOW CREATE TABLE"
        return verdict, None

    def _binlog_end(self) -> tuple[str, int]:
        with self.conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, position = cur.fetchone()[:2]
        return file, int(position)

    def _as_logged(self, step: Step, start: tuple[str, int]) -> Step | None:
        """The step as the binlog holds it, which is what a tracker reads: the server logs a
        CREATE TABLE ... SELECT as the CREATE TABLE of the columns it made, its rows apart
        (row format). None where it logged nothing; the step itself where it logged several.
        (`_ours` has followed the step already, as a refusal: nothing to undo.)"""
        with self.conn.cursor() as cur:
            cur.execute(f"SHOW BINLOG EVENTS IN {quote_string(start[0])} FROM {start[1]}")
            queries = [
                _LOGGED_IN.sub("", info, count=1)
                for _, _, kind, _, _, info in cur.fetchall()
                if kind == "Query"
            ]
        logged = [sql for sql in queries if sql not in ("BEGIN", "COMMIT")]
        if not logged:
            return None
        if len(logged) != 1:
            return step
        return step if logged[0] == step.sql else replace(step, sql=logged[0])

    def _server(self, sql: str) -> tuple[int, str] | None:
        try:
            with self.conn.cursor() as cur:
                cur.execute(sql)
        except pymysql.MySQLError as exc:
            code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else -1
            return code, str(exc.args[1] if len(exc.args) > 1 else exc)
        return None

    def _ours(self, sql: str) -> tuple[str | None, str | None, int | None]:
        """(our refusal, our crash, our error code) for the statement."""
        try:
            statement = parse(sql)
            if isinstance(statement, UnsupportedDDL):
                return f"unsupported: {statement.reason}", None, None
            if isinstance(statement, OtherStatement):
                return f"not a table statement to us: {statement.kind}", None, None
            self.replay.follow(statement)
        except SchemaError as exc:
            return f"ERROR {exc.code}: {exc.message}", None, exc.code
        except DDLSyntaxError as exc:
            return f"syntax: {exc.reason}", None, None
        except Exception:  # anything else is what this corpus looks for
            return None, _short_traceback(), None
        return None, None, None

    def _compare(self, step: Step) -> Verdict:
        try:
            differing = self.replay.differing()
        except (SchemaError, DDLSyntaxError) as exc:
            return Verdict(
                self.sequence, step, REFUSED_BY_US, f"reading SHOW CREATE TABLE: {_first_line(exc)}"
            )
        except pymysql.MySQLError:
            raise  # the server's, not ours
        except Exception:
            return Verdict(self.sequence, step, CRASH, "reading SHOW CREATE TABLE: " + _short_traceback())
        if not differing:
            return Verdict(self.sequence, step, AGREE)
        return Verdict(self.sequence, step, DIFFER, "\n".join(_diff(*d) for d in differing))


def _diff(name: str, theirs: Table | None, ours: Table | None) -> str:
    """A unified diff of the two renderings, without context lines."""
    a = render_table(theirs, "mariadb").splitlines() if theirs is not None else []
    b = render_table(ours, "mariadb").splitlines() if ours is not None else []
    lines = difflib.unified_diff(a, b, "mariadb", "ours", n=0, lineterm="")
    return "\n".join(line for line in lines if not line.startswith("@@"))


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def _short_traceback() -> str:
    lines = traceback.format_exc().strip().splitlines()
    return "\n".join(lines[-5:])


def run_sequence(
    upstream: Instance, sequence: Sequence, run: Run, downstream: Downstream | None = None
) -> None:
    """`downstream`: also play what our tracker follows through the coordinator onto
    the downstream server (tests/ddl_corpus_downstream.py)."""
    database = f"corpus_{uuid.uuid4().hex[:12]}"
    upstream.execute(f"CREATE DATABASE `{database}`")
    replayer = None
    try:
        replayer = _Replayer(upstream, sequence, database)
        if downstream is not None:
            downstream.begin(database, _table_names(sequence), replayer.replay)
        for index, step in enumerate(sequence.steps):
            before = replayer.replay.tables
            verdict, stop = replayer.step(step)
            if verdict is not None:
                run.verdicts.append(verdict)
                if downstream is not None:
                    downstream.follow(
                        sequence, verdict.step, verdict.outcome, _step_names(verdict.step), before
                    )
            if stop is not None:
                run.stopped[stop] += 1
                run.not_reached += len(sequence.steps) - index - 1
                return
    finally:
        if replayer is not None:
            replayer.close()
        upstream.execute(f"DROP DATABASE IF EXISTS `{database}`")


def _step_names(step: Step) -> list[str]:
    """The tables a statement names, the one it changes first (a RENAME's old name)."""
    ddl = table_ddl(step.sql)
    if ddl is None:
        return []
    return [unquote(n) for n in (*ddl.names, *([ddl.renamed_to] if ddl.renamed_to else []))]


def _table_names(sequence: Sequence) -> list[str]:
    return [name for step in sequence.steps for name in _step_names(step)]


def run_all(upstream: Instance, sequences: Iterable[Sequence], downstream: Instance | None = None) -> Run:
    """`downstream`: the coordinator and diff side too, on that server."""
    run = Run(downstream=DownstreamRun() if downstream is not None else None)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        side = stack.enter_context(Downstream(downstream, run.downstream)) if downstream is not None else None
        for sequence in sequences:
            run_sequence(upstream, sequence, run, side)
    run.seconds = time.monotonic() - started
    return run


# -- the report ---------------------------------------------------------------------


def report(extraction: Extraction, run: Run, *, all_refusals: bool = False) -> str:
    out = [
        f"{extraction.files} files, {len(extraction.sequences)} sequences, {extraction.statements} statements"
        f" (left out: {_counts(extraction.left_out)})",
        f"replayed in {run.seconds:.1f} s: {len(run.verdicts)} statements judged, {run.not_reached} not reached",
    ]
    counts = run.counts()
    out += [f"  {name:<20} {counts.get(name, 0)}" for name in CLASSES]
    both = [v for v in run.verdicts if v.outcome == REFUSED_BOTH]
    out.append(
        f"refused-both with the server's error code: {sum(bool(v.same_code) for v in both)} of {len(both)}"
    )
    out.append(f"sequences stopped by the server: {_counts(run.stopped)}")
    for outcome in (DIFFER, CRASH):
        cases = [v for v in run.verdicts if v.outcome == outcome]
        out.append(f"\n== {outcome}: {len(cases)}")
        for v in cases:
            out.append(f"{v.sequence.path}:{v.step.line}: {_shorten(v.step.sql)}")
            out += ["    " + line for line in v.detail.splitlines()]
    out.append(f"\n== {ACCEPTED_BY_US}, by the server's error: {counts.get(ACCEPTED_BY_US, 0)}")
    out += _grouped(v for v in run.verdicts if v.outcome == ACCEPTED_BY_US)
    out.append("\n== refused-both with another error code than the server's, by our refusal")
    out += _grouped((v for v in both if not v.same_code), key=lambda v: v.detail.split(" | ")[0])
    out.append(f"\n== {REFUSED_BY_US} (unsupported), by reason: {counts.get(REFUSED_BY_US, 0)}")
    out += _grouped(
        (v for v in run.verdicts if v.outcome == REFUSED_BY_US), limit=None if all_refusals else 25
    )
    if run.downstream is not None:
        out += ["", *downstream_report(run.downstream)]
    return "\n".join(out)


def downstream_report(down: DownstreamRun) -> list[str]:
    """The coordinator and diff side: counts per setup, then each class but agree by
    reason, with the first case of each in full (the table before, the statement, what
    we emitted, what went wrong)."""
    judged = sum(down.counts(setup).total() for setup in SETUPS)
    out = [
        f"downstream side, {down.seconds:.1f} s of them: {judged} statement plays judged,"
        f" {down.not_judged} not (a setup that could not start again)",
        f"  {'':<20} " + " ".join(f"{setup:>10}" for setup in SETUPS),
    ]
    out += [
        f"  {name:<20} " + " ".join(f"{down.counts(setup).get(name, 0):>10}" for setup in SETUPS)
        for name in DOWNSTREAM_CLASSES
    ]
    out.append(f"setups started again from the server's tables: {_counts(down.resets)}")
    interim: Counter[str] = Counter()
    for reason, count in down.interim.items():
        interim[_reason(reason)] += count
    out.append(f"paused after the first of two shards, resumed by the second: {sum(interim.values())}")
    out += [f"  {count:5}  {reason}" for reason, count in interim.most_common(10)]
    for outcome in DOWNSTREAM_CLASSES[1:]:
        cases = [v for v in down.verdicts if v.outcome == outcome]
        out.append(f"\n== downstream {outcome}: {len(cases)}, by reason")
        groups: dict[str, list[DownstreamVerdict]] = {}
        for verdict in cases:
            groups.setdefault(_reason(verdict.reason), []).append(verdict)
        for reason, verdicts in sorted(groups.items(), key=lambda item: -len(item[1])):
            setups = Counter(v.setup for v in verdicts)
            out.append(f"  {len(verdicts):5}  {reason}  ({_counts(setups)})")
            out += ["         " + line for line in _example(verdicts[0])]
    out.append(
        f"\n== read_table reads the downstream table otherwise than SHOW CREATE TABLE: {len(down.inspect)}"
    )
    out += _grouped(down.inspect, key=lambda n: _reason(n.reason))
    out.append(f"\n== setups that could not start again from the server's tables: {len(down.broken)}")
    out += _grouped(down.broken, key=lambda n: _reason(n.reason))
    return out


def _example(verdict: DownstreamVerdict) -> list[str]:
    lines = [f"e.g. {verdict.sequence.path}:{verdict.step.line} ({verdict.setup})"]
    lines += [f"  {line}" for create in verdict.before for line in (create + ";").splitlines()]
    lines.append(f"  {_shorten(verdict.step.sql, 400)};")
    lines += [f"  -> {line}" for statement in verdict.emitted for line in (statement + ";").splitlines()]
    lines += [f"  !! {line}" for line in verdict.detail.splitlines()]
    return lines


def _grouped(
    verdicts: Iterable[Verdict], key: Callable[[Verdict], str] | None = None, limit: int | None = 15
) -> list[str]:
    """The most common details (or keys) with a count and one source each."""
    key = key or (lambda v: _reason(v.detail))
    groups: dict[str, list[Verdict]] = {}
    for verdict in verdicts:
        groups.setdefault(key(verdict), []).append(verdict)
    ranked = sorted(groups.items(), key=lambda item: -len(item[1]))[:limit]
    return [
        f"  {len(vs):5}  {reason}  (e.g. {vs[0].sequence.path}:{vs[0].step.line})" for reason, vs in ranked
    ]


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counter.most_common()) or "none"


def _shorten(sql: str, width: int = 160) -> str:
    flat = " ".join(sql.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def _reason(message: str) -> str:
    """A message without quoted names and numbers, so that alike ones group."""
    message = re.sub(r"'[^']*'|`[^`]*`", "'…'", message.split(" (in `")[0])
    return re.sub(r"(?<!ERROR )(?<!server: )\b\d+\b", "N", message)[:110]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.ddl_corpus", description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, help="replay only the first N sequences")
    parser.add_argument("--sandbox", type=Path, help="attach to this running sandbox instead of starting one")
    parser.add_argument("--all-refusals", action="store_true", help="list every refusal reason")
    parser.add_argument(
        "--upstream-only", action="store_true", help="leave out the coordinator and diff side (downstream)"
    )
    args = parser.parse_args()
    if not (SUITE / "main").is_dir():
        raise SystemExit(f"no MariaDB test suite in {SUITE}: `make setup` installs mariadb-test")
    extraction = extract()
    sequences = extraction.sequences[: args.limit] if args.limit else extraction.sequences
    own = args.sandbox is None
    sandbox = (
        Sandbox(Path(tempfile.mkdtemp(prefix="shardmerge-corpus-")) / "sandbox", upstreams=1, watchdog=True)
        if own
        else Sandbox.attach(args.sandbox)
    )
    if own:
        sandbox.up()
    try:
        run = run_all(sandbox.upstreams[0], sequences, None if args.upstream_only else sandbox.downstream)
    finally:
        if own:
            sandbox.down()
    print(report(extraction, run, all_refusals=args.all_refusals))


if __name__ == "__main__":
    main()
