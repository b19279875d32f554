"""Comments and docstrings of the code cite the findings behind a rule by their id in
`tests/fuzz/findings/INDEX.md` (issue 44): F<n> for a fuzzer finding ("(F87)"), L<n> for a
live story ("L07: ..."), never by the random seed that found it, which tells a reader
nothing. This keeps it so: no random seed (four digits or more) is cited in `replicator/`,
`lattice/` or the fuzz oracle, every finding id cited there is a row of the index, and every
live story's "guarded by" names a scenario or a test that exists. The seed documents 000 to
004 ("seed 002") are no random seeds. Files are read only (`ast`, `tokenize`): nothing of
the project is imported and no server is needed."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INDEX = REPO / "tests/fuzz/findings/INDEX.md"
SCENARIOS = REPO / "tests/scenarios"
CODE = ("replicator", "lattice")
ALSO = ("tests/fuzz/oracle.py",)

# "seed 352046", "seeds 511061, 700844", "live stories seed\n        # 24356" (wrapped)
RANDOM_SEED = re.compile(r"\bseeds?\b(?:[\s#(:,]|and\b)*(\d{4,})", re.IGNORECASE)
# an id as the code cites one: "(F87)", "(F88, F113)", "F61;", "L10: ...", "L28,\n L31", "F66's"
CITED = re.compile(r"(?:(?<=[(\s])|^)([FL]\d{2,3}[a-z]?)(?=[),:;.]|'s\b|\s|$)")
# a linter's codes after "noqa" in a comment (F401) are no findings
NOQA = re.compile(r"\b(?i:noqa)\b:?[\sA-Z0-9,]*")
# an index row's id cell: "F07a/b", "F10a–e", "F19, F19b–e", "L07"
ID_PART = re.compile(r"([FL]\d{2,3})([a-z]?)((?:/[a-z])*)(?:[–-]([a-z]))?")
TEST_REF = re.compile(r"^(tests/[\w/]+\.py)::(\w+)$")


def code_files() -> list[Path]:
    files = [p for d in CODE for p in sorted((REPO / d).rglob("*.py"))]
    return files + [REPO / f for f in ALSO]


def _relative(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


@cache
def prose(path: Path) -> tuple[tuple[int, str], ...]:
    """The file's comments and docstrings, each with the line it starts on."""
    text = path.read_text(encoding="utf-8")
    out = [
        (tok.start[0], NOQA.sub("", tok.string))
        for tok in tokenize.generate_tokens(io.StringIO(text).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                out.append((first.lineno, first.value.value))
    return tuple(sorted(out))


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().removeprefix("|").removesuffix("|").split("|")]


@cache
def index_rows() -> dict[str, list[str]]:
    """The rows of INDEX.md's tables (fuzz findings and live stories), by each id a row covers."""
    rows: dict[str, list[str]] = {}
    for line in INDEX.read_text(encoding="utf-8").splitlines():
        if not re.match(r"\|\s*[FL]\d", line):
            continue
        cells = _cells(line)
        for part in re.split(r",\s*", cells[0]):
            m = ID_PART.fullmatch(part)
            assert m, f"INDEX.md: an id cell this test cannot read: {cells[0]!r}"
            base, letter, more, last = m.groups()
            letters = [letter, *more.split("/")[1:]]
            if last:
                letters += [chr(c) for c in range(ord(letter) + 1, ord(last) + 1)]
            for x in letters:
                rows[base + x] = cells
    return rows


def cited_ids() -> list[tuple[str, int, str]]:
    """(file, line, id) of every finding id the code cites."""
    out = []
    for path in code_files():
        for line, text in prose(path):
            for number, part in enumerate(text.splitlines()):
                part = part.strip().lstrip("#").strip()
                out += [(_relative(path), line + number, m.group(1)) for m in CITED.finditer(part)]
    return out


def defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_no_random_seed_is_cited_in_the_code():
    found = []
    for path in code_files():
        text = path.read_text(encoding="utf-8")
        for m in RANDOM_SEED.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{_relative(path)}:{line}: {m.group(0)!r}")
    hint = "cite the finding's id in tests/fuzz/findings/INDEX.md, not its seed:\n"
    assert not found, hint + "\n".join(found)


def test_the_seed_pattern_finds_random_seeds_only():
    def hits(text: str) -> list[str]:
        return [m.group(1) for m in RANDOM_SEED.finditer(text)]

    assert hits("(seed 352046)") == ["352046"]
    assert hits("seeds 511061, 700844") == ["511061"]
    assert hits("(live stories seed\n        # 24356)") == ["24356"]
    assert hits("(seeds\n    120203, 120272)") == ["120203"]
    assert hits("the seed 002 rename procedure; seeds 000, 001; hash seed 0") == []


def test_every_finding_id_the_code_cites_is_a_row_of_the_index():
    cited = cited_ids()
    # the code cites a hundred and more findings: an empty list means the pattern broke
    assert len(cited) > 100, cited
    assert {i[0] for _, _, i in cited} == {"F", "L"}
    missing = [f"{f}:{line}: {i}" for f, line, i in cited if i not in index_rows()]
    assert not missing, "ids cited that INDEX.md has no row for:\n" + "\n".join(missing)


def test_the_id_pattern_takes_citations_only():
    def ids(text: str) -> list[str]:
        return [m.group(1) for m in CITED.finditer(NOQA.sub("", text))]

    cited = ["F87", "F88", "F113", "F61", "L10", "L28"]
    assert ids("moves (F87), as (F88, F113) do; F61; L10: rows; (L28,") == cited
    assert ids("as F135's rule; F07a, F10e)") == ["F135", "F07a", "F10e"]
    assert ids("import x  # noqa: F401 (forked)") == []
    assert ids("x = 0xF10A; col F10e_1, tF87, 'F87'") == []


def test_the_index_ids_cover_lettered_ranges():
    rows = index_rows()
    covered = "F07a F07b F08c F10a F10c F10e F19 F19d F20f F161 L01 L33"
    for expected in covered.split():
        assert expected in rows, expected
    assert "F10f" not in rows and "F07c" not in rows


def test_every_live_story_is_guarded_by_what_exists():
    lives = {i: cells for i, cells in index_rows().items() if i.startswith("L")}
    assert lives, "INDEX.md has no live stories table"
    problems = []
    for ident, cells in sorted(lives.items()):
        assert len(cells) == 4 and re.fullmatch(r"\d+", cells[1]), f"{ident}: {cells}"
        for ref in re.findall(r"`([^`]+)`", cells[3]):
            test = TEST_REF.match(ref)
            if ref.endswith(".yaml"):
                if not (SCENARIOS / ref).is_file() and not (REPO / ref).is_file():
                    problems.append(f"{ident}: no scenario {ref}")
            elif test:
                path = REPO / test.group(1)
                if not path.is_file() or test.group(2) not in defined(path):
                    problems.append(f"{ident}: no test {ref}")
    assert not problems, "\n".join(problems)
