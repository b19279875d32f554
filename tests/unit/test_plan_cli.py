"""`shardmerge plan` on the operator's path, the command run as a process (issue 46):
a step on a shard the scenario does not have is refused, every error names the file
and the step, steps count from 0 as `steps[N]` does, a group left blocked exits 4 as
`join` does on a conflict, and a reader that closes the pipe early gets no traceback."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from replicator.cli.shardmerge import main as shardmerge

REPO = Path(__file__).parents[2]
SCENARIOS = REPO / "tests" / "scenarios"

HEAD = "target: shop.t\nshards:\n  s1.db.t1: CREATE TABLE t1 (id INT PRIMARY KEY, a INT)\n"
STEP = "  - shard: {shard}\n    ddl: {ddl}\n"


def plan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli.shardmerge", "plan", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def scenario(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "story.yaml"
    path.write_text(text)
    return path


def steps(*pairs: tuple[str, str]) -> str:
    """A scenario of shard s1.db.t1 whose steps are `(shard, ddl)`; s1.db.t1 adds b first."""
    lines = [
        STEP.format(shard=s, ddl=d) for s, d in [("s1.db.t1", "ALTER TABLE t1 ADD COLUMN b INT"), *pairs]
    ]
    return HEAD + "steps:\n" + "".join(lines)


def assert_refused(done: subprocess.CompletedProcess, path: Path, *parts: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()  # one line, prefixed as every command's errors are
    assert line.startswith(f"shardmerge plan: {path}")
    for part in parts:
        assert part in line


# -- a step on a shard the scenario does not have --------------------------------------------------

NOT_A_SHARD = "steps[1]: the scenario has no shard s1.db.t9 (its shards: s1.db.t1)"


@pytest.mark.parametrize(
    ("story", "message"),
    [
        # once `ignored: the statement does not change the shard's table`, exit 0
        (steps(("s1.db.t9", "DROP TABLE t9")), NOT_A_SHARD),
        (steps(("s1.db.t9", "RENAME TABLE t9 TO t8")), NOT_A_SHARD),
        # once the unknown shard paused as "not tracked", a shard the scenario never had
        (steps(("s1.db.t9", "ALTER TABLE t9 ADD COLUMN c INT")), NOT_A_SHARD),
        (
            steps(("s9.db.t1", "ALTER TABLE t1 ADD COLUMN c INT")),
            "steps[1]: the scenario has no shard s9.db.t1",
        ),
        # the shard named is a typo even when the statement names a table the scenario has
        (steps(("s1.db.t9", "ALTER TABLE t1 ADD COLUMN c INT")), NOT_A_SHARD),
        (HEAD + "steps:\n  - skip: s1.db.t9\n", "steps[0]: unknown shard s1.db.t9; known: s1.db.t1"),
    ],
    ids=["drop", "rename-away", "alter", "other-source", "alter-named-elsewhere", "skip"],
)
def test_a_step_on_a_shard_the_scenario_does_not_have_is_refused(tmp_path, story, message):
    path = scenario(tmp_path, story)
    assert_refused(plan(str(path)), path, message)


@pytest.mark.parametrize(
    "story",
    [
        steps(
            ("s2.db.t2", "CREATE TABLE t2 (id INT PRIMARY KEY, a INT)"),
            ("s2.db.t2", "ALTER TABLE t2 ADD b INT"),
        ),
        steps(
            ("s1.db.t1", "CREATE TABLE t5 (id INT PRIMARY KEY, a INT, b INT)"),
            ("s1.db.t9", "RENAME TABLE t5 TO t9"),
        ),
        HEAD + "steps:\n  - set_schema: s1.db.t9\n    create: CREATE TABLE t9 (id INT PRIMARY KEY, a INT)\n",
        # a shard joined by another shard's statement, which leaves and comes back
        steps(
            ("s1.db.t1", "CREATE TABLE t2 (id INT PRIMARY KEY, a INT, b INT)"),
            ("s1.db.t2", "DROP TABLE t2"),
            ("s1.db.t2", "CREATE TABLE t2 (id INT PRIMARY KEY, a INT)"),
        ),
    ],
    ids=["create", "rename-into", "set-schema", "leaves-and-comes-back"],
)
def test_a_step_may_bring_in_a_new_shard(tmp_path, story):
    done = plan(str(scenario(tmp_path, story)))
    assert (done.returncode, done.stderr) == (0, "")


# -- errors name the file and the step -----------------------------------------------------------


@pytest.mark.parametrize(
    ("story", "parts"),
    [
        ("target: t\nshards: {a.b.c: [\n", [", line 3, column 1: not YAML: while parsing a flow node"]),
        ("target: t\n  x: : y\n", [", line 2, column 4: not YAML: mapping values are not allowed here"]),
        (
            "target: t\nshards:\n  a.b.c: create table c (a intt)\n",
            [": shards.a.b.c: not a CREATE TABLE we can read", "unknown data type INTT"],
        ),
        (
            steps() + "  - set_schema: s1.db.t1\n    create: CREATE TABLE t1 (id INT, b INTT)\n",
            [": steps[1].create: not a CREATE TABLE we can read", "unknown data type INTT"],
        ),
        (steps() + "  - shard: s1.db.t1\n", [": steps[1]: expected one of"]),
    ],
    ids=["yaml-unclosed", "yaml-mapping", "initial-create", "set-schema-create", "step-fields"],
)
def test_errors_name_the_file_and_the_step(tmp_path, story, parts):
    path = scenario(tmp_path, story)
    assert_refused(plan(str(path)), path, *parts)


def test_steps_count_from_zero_as_the_errors_do(tmp_path):
    story = steps(("s1.db.t1", "ALTER TABLE t1 ADD COLUMN c INT"))
    done = plan(str(scenario(tmp_path, story)))
    numbered = [line.split(":")[0] for line in done.stdout.splitlines() if line.startswith("#")]
    assert numbered == ["#0 s1.db.t1", "#1 s1.db.t1"]
    assert "ADD COLUMN c INT" in next(line for line in done.stdout.splitlines() if line.startswith("#1 "))
    # the same step, when it is a mistake, is steps[1]
    path = scenario(tmp_path, steps(("s1.db.t9", "ALTER TABLE t1 ADD COLUMN c INT")))
    assert_refused(plan(str(path)), path, "steps[1]:")


# -- exit status: 4 when shards are blocked after the last step -------------------------------------


@pytest.mark.parametrize(
    ("story", "status", "blocked"),
    [
        ("rename_column.yaml", 0, {}),
        ("conflict_nonintrusive.yaml", 0, {}),  # blocked on the way, resumed by the end
        ("tidb_flavor.yaml", 4, {"s1.db.t1": "conflict since step 4: column s: cannot join varchar(255)"}),
        (
            "bad_ddl.yaml",
            4,
            {"s2.db.t2": "unsupported since step 5: the DDL does not apply to the tracked schema"},
        ),
    ],
)
def test_plan_exits_4_when_shards_are_blocked_after_the_last_step(story, status, blocked):
    text, as_json = plan(str(SCENARIOS / story)), plan(str(SCENARIOS / story), "--json")
    assert (text.returncode, as_json.returncode) == (status, status)
    assert text.stderr == as_json.stderr == ""
    report = json.loads(as_json.stdout)
    assert report["blocked"].keys() == blocked.keys()
    assert all(report["blocked"][shard].startswith(why) for shard, why in blocked.items())
    # the text ends with a line for each, the reason of the status
    lines = text.stdout.splitlines()
    ends = lines[len(lines) - len(blocked) :]
    assert ends == [f"blocked after the last step: {s}, {why}" for s, why in report["blocked"].items()]
    assert "blocked after" not in "\n".join(lines[: len(lines) - len(blocked)])


# -- a reader that closes the pipe -------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "tests/scenarios/issue_example.yaml"],
        ["plan", "tests/scenarios/issue_example.yaml", "--json"],
        ["plan", "tests/scenarios/tidb_flavor.yaml", "--json"],  # exit 4 had it not been cut short
        ["join", "-"],  # every command: the handling is the CLI's
    ],
)
def test_a_closed_pipe_ends_the_command_quietly(args):
    """As `shardmerge plan X --json | head -1`, once head has exited: no BrokenPipeError
    traceback, the status of a command killed by SIGPIPE (128 + 13)."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first write: no race
    try:
        done = subprocess.run(
            [sys.executable, "-m", "replicator.cli.shardmerge", *args],
            cwd=REPO,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            input="CREATE TABLE a (x INT); CREATE TABLE b (x BIGINT)" if args[-1] == "-" else None,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


def follow(lines: list) -> list[dict]:
    """`plan --follow` fed `lines` (dicts as JSON, strings as they are): its answers."""
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    done = subprocess.run(
        [sys.executable, "-m", "replicator.cli.shardmerge", "plan", "--follow"],
        cwd=REPO, input=text, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


# the scenarios whose steps name only shards of `shards:` or ones they create: played a line at a
# time, a later step's shard is unknown until it comes (as to the daemon)
FOLLOWED = [p for p in sorted(SCENARIOS.glob("*.yaml")) if "RENAME TABLE" not in p.read_text()]


def test_follow_answers_each_step_as_the_whole_scenario_reports_it():
    """Every scenario of tests/scenarios, its steps a line each (all in one process, one
    after another): each answer is the `--json` report's step and the state after it is
    the report's at its end."""
    lines, expected = [], []
    for path in FOLLOWED:
        data = yaml.safe_load(path.read_text())
        header = {k: v for k, v in data.items() if k not in ("steps", "expect_final", "description")}
        report = _reported(path)
        lines += [header, *[{k: v for k, v in s.items() if k != "expect"} for s in data.get("steps") or []]]
        expected += [(path.name, "start", report["initial"], report["initial_downstream"])]
        expected += [(path.name, s["index"], s) for s in report["steps"]]
        expected.append((path.name, "state", report["state"]))
    answers = follow(lines)
    got = []
    for path, answer in zip(FOLLOWED, _per_scenario(answers, lines), strict=True):
        first, *rest = answer
        got += [(path.name, "start", first["initial"], first["initial_downstream"])]
        got += [(path.name, a["step"]["index"], a["step"]) for a in rest]
        got.append((path.name, "state", (rest[-1] if rest else first)["state"]))
    assert len(FOLLOWED) > 60
    assert got == expected


def _reported(path: Path) -> dict:
    """`plan --json` of the file, run in this process (the process is `follow`'s to test)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        shardmerge(["plan", str(path), "--json"])
    return json.loads(out.getvalue())


def _per_scenario(answers: list[dict], lines: list[dict]) -> list[list[dict]]:
    out: list[list[dict]] = []
    for line, answer in zip(lines, answers, strict=True):
        if "target" in line:
            out.append([])
        out[-1].append(answer)
    return out


def test_follow_answers_a_bad_line_with_an_error_and_goes_on_with_the_next_scenario():
    header = {"target": "shop.t", "shards": {"s1.db.t1": "CREATE TABLE t1 (id INT PRIMARY KEY, a INT)"}}
    answers = follow([
        {"shard": "s1.db.t1", "ddl": "ALTER TABLE t1 ADD b INT"},
        header,
        "not json",
        {"shard": "s1.db.t1", "ddl": "ALTER TABLE t1 ADD b INT"},
        header,
        {"shard": "s9.db.t9", "ddl": "ALTER TABLE t9 ADD b INT"},
        header,
        {"shard": "s1.db.t1", "ddl": "ALTER TABLE t1 ADD b INT"},
    ])
    assert [sorted(a) for a in answers] == [
        ["error"], ["initial", "initial_downstream", "paused", "state"], ["error"], ["error"],
        ["initial", "initial_downstream", "paused", "state"], ["error"],
        ["initial", "initial_downstream", "paused", "state"], ["state", "step"],
    ]
    assert "stdin line 1: a step with no scenario" in answers[0]["error"]
    assert "stdin line 3: not JSON" in answers[2]["error"]
    assert "stdin line 6: steps[0]: the scenario has no shard s9.db.t9" in answers[5]["error"]
    assert answers[-1]["step"]["downstream"] == ["ALTER TABLE `shop`.`t` ADD COLUMN `b` int NULL DEFAULT NULL AFTER `a`"]
    assert answers[-1]["state"]["shards"]["s1.db.t1"]["paused"] is None


def test_plan_names_its_file_unless_it_follows_stdin(tmp_path):
    assert "name a scenario file" in plan().stderr
    assert "--follow reads the scenario on stdin" in plan(str(scenario(tmp_path, HEAD)), "--follow").stderr
