"""The design page's "Rules index" (docs/design.md) names, for each rule of the design, the section
that states it, the code that implements it and a story that shows it. This keeps those names
true: every `section` links to a heading of the page, every `where` is a function or class (or a
class's method) defined in that file, every `shown by` is a scenario that exists or a test defined
in its file. Read with `ast`, so nothing of the project is imported and no server is needed."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "design.md"
HEADING = "## Rules index {#rules-index}"
COLUMNS = ("section", "rule", "where", "shown by")
MIN_ROWS = 25
SCENARIOS = "tests/scenarios/"
# a test file sits in the folder of its kind (docs/contributing.md "Layout")
TEST_FILE = re.compile(r"^tests/(unit|server|daemon|spark)/test_\w+\.py$")
# a link to a section of the page: [Title](#id)
SECTION_LINK = re.compile(r"^\[[^\]]+\]\(#(?P<id>[a-z0-9-]+)\)$")
# a heading of the page with its explicit id: ## Title {#id}
HEADING_ID = re.compile(r"^#{2,4} .*\{#(?P<id>[a-z0-9-]+)\}$", re.MULTILINE)
# a cell ends at a pipe a backslash does not escape
CELL_BORDER = re.compile(r"(?<!\\)\|")


@dataclass(frozen=True)
class Row:
    line: int  # in docs/design.md, for the failure message
    section: str
    rule: str
    where: str
    shown_by: str

    def __str__(self) -> str:
        return f"docs/design.md:{self.line} ({self.section}: {self.rule[:60]})"


def _cells(line: str) -> list[str]:
    inner = line.strip().removeprefix("|").removesuffix("|")
    return [cell.strip() for cell in CELL_BORDER.split(inner)]


def _unquoted(cell: str) -> str:
    # the page writes code references as `code`
    return cell.strip().strip("`").strip()


@cache
def index_rows() -> tuple[Row, ...]:
    """The rows of the table under the heading, which ends at the next heading."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    assert HEADING in lines, f"docs/design.md has no {HEADING!r} section"
    start = lines.index(HEADING) + 1
    table: list[tuple[int, str]] = []
    for number, line in enumerate(lines[start:], start=start + 1):
        if line.startswith("#"):
            break
        if line.lstrip().startswith("|"):
            table.append((number, line))
    assert len(table) >= 2, f"{HEADING} has no table"
    (_, header), (_, separator), *body = table
    assert tuple(_cells(header)) == COLUMNS, f"{HEADING}: the columns are {_cells(header)}, not {COLUMNS}"
    assert set(separator.replace("|", "").strip()) <= set("-: "), f"{HEADING}: no separator under the header"
    rows = []
    for number, line in body:
        cells = _cells(line)
        assert len(cells) == len(COLUMNS), f"docs/design.md:{number}: {len(cells)} cells, not {len(COLUMNS)}"
        section, rule, where, shown_by = cells
        rows.append(Row(number, section, rule, _unquoted(where), _unquoted(shown_by)))
    return tuple(rows)


@cache
def _module(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _defined(body: list[ast.stmt], name: str) -> ast.stmt | None:
    """The function or class `name` defined directly in `body` (a module's or a class's)."""
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return next((node for node in body if isinstance(node, kinds) and node.name == name), None)


def _where_problem(where: str) -> str | None:
    """What is missing of a `path.py:Name` or `path.py:Class.method` reference, or None."""
    path, colon, name = where.partition(":")
    if not colon or not path.endswith(".py") or not name:
        return f"`where` {where!r} is not written as path/to/module.py:Name or :Class.method"
    file = REPO / path
    if not file.is_file():
        return f"`where` names {path}, which does not exist"
    outer, dot, inner = name.partition(".")
    node = _defined(_module(file).body, outer)
    if node is None:
        return f"`where`: {path} defines no top-level function or class {outer}"
    if dot and not (isinstance(node, ast.ClassDef) and _defined(node.body, inner)):
        return f"`where`: {outer} in {path} is no class with a method {inner}"
    return None


def _shown_by_problem(shown_by: str) -> str | None:
    """What is missing of a scenario file or a `tests/KIND/test_x.py::test_name` reference, or None."""
    path, colons, test = shown_by.partition("::")
    if colons:
        file = REPO / path
        if not TEST_FILE.match(path) or not test:
            return (f"`shown by` {shown_by!r} is not written as tests/KIND/test_x.py::test_name "
                    "(KIND: unit, server, daemon or spark)")
        if not file.is_file():
            return f"`shown by` names {path}, which does not exist"
        # a test pytest collects from a module: a top-level function
        if not isinstance(_defined(_module(file).body, test), ast.FunctionDef | ast.AsyncFunctionDef):
            return f"`shown by`: {path} defines no test function {test}"
        return None
    if not path.startswith(SCENARIOS) or not path.endswith(".yaml"):
        return f"`shown by` {shown_by!r} is neither a scenario under {SCENARIOS} nor a test"
    if not (REPO / path).is_file():
        return f"`shown by` names the scenario {path}, which does not exist"
    return None


def _report(problems: list[str]) -> str:
    return f"{len(problems)} row(s) of docs/design.md's Rules index are wrong:\n" + "\n".join(problems)


def test_the_index_has_a_row_for_each_rule() -> None:
    rows = index_rows()
    assert len(rows) >= MIN_ROWS, f"{HEADING} has {len(rows)} rows; the design's rules need {MIN_ROWS} at least"


def test_every_row_links_to_a_section_of_the_page() -> None:
    ids = set(HEADING_ID.findall(PAGE.read_text(encoding="utf-8")))
    problems = []
    for row in index_rows():
        link = SECTION_LINK.match(row.section)
        if link is None:
            problems.append(f"{row}: `section` {row.section!r} is not written as [Title](#id)")
        elif link["id"] not in ids:
            problems.append(f"{row}: `section` links to #{link['id']}, which no heading of the page has")
    assert not problems, _report(problems)


def test_every_row_names_code_that_is_there() -> None:
    problems = [f"{row}: {problem}" for row in index_rows() if (problem := _where_problem(row.where))]
    assert not problems, _report(problems)


def test_every_row_names_a_story_that_is_there() -> None:
    problems = [f"{row}: {problem}" for row in index_rows() if (problem := _shown_by_problem(row.shown_by))]
    assert not problems, _report(problems)


def test_every_row_says_its_rule() -> None:
    problems = [f"{row}: the `rule` cell is empty" for row in index_rows() if not row.rule]
    assert not problems, _report(problems)
