"""The tutorial's first task, on the operator's path: its blocks (marked `<!-- first-task: NAME -->`)
are read from docs/tutorial.md and run as written on the sandbox: the server settings (checked
on the sandbox's upstreams), the shard tables, the GRANT
statements on a fresh `shardmerge` user, the task config (the servers' addresses put in), then
`shardmerge check`, `backfill`, `run`, `shardctl query-status`, `verify`, a conflict and its way
out (`binlog list`, `binlog skip`) and `stop-task`, each as a process. Every line the tutorial shows
a step printing must be printed (numbers, positions and times aside; columns may be padded
otherwise), so the tutorial and what the commands do cannot drift apart."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from replicator.sandbox import Instance, Sandbox
from tests.replication import REPO, free_port

pytestmark = pytest.mark.timeout(600)

PAGE = REPO / "docs" / "tutorial.md"
BLOCK = re.compile(r"^[ \t]*<!-- first-task: (?P<name>[\w-]+) -->\n(?P<fence>[ \t]*```)\w*\n(?P<body>.*?)\n(?P=fence)\n",
                   re.MULTILINE | re.DOTALL)  # fmt: skip
MODULES = {"shardmerge": "replicator.cli.shardmerge", "shardctl": "replicator.cli.shardctl"}
SCHEMAS = {"up1": ["shop_01"], "up2": ["shop_02"], "down": ["shop", "shardmerge_meta"]}
TARGET = "shop.orders"


def readme_blocks() -> dict[str, str]:
    text = PAGE.read_text()
    found = {m["name"]: textwrap.dedent(m["body"]) for m in BLOCK.finditer(text)}
    assert len(found) == text.count("<!-- first-task: "), "a first-task marker not followed by a code block"
    return found


BLOCKS = readme_blocks()


def words(text: str) -> str:
    """A regex of text printed as the tutorial shows it: the same words, any number where it
    has one (rows, seconds, positions, times, ports), any run of spaces between words and
    any length of a table's rule of dashes."""
    found = []
    for word in text.split():
        if set(word) == {"-"}:
            found.append("-+")
            continue
        found.append(re.sub(r"\d+", r"\\d+", re.escape(word)))
    return r"[ \t]+".join(found)


def line_pattern(line: str) -> re.Pattern[str]:
    """A whole printed line, as words() has it."""
    return re.compile(r"^\s*" + words(line) + r"[ \t]*$", re.MULTILINE)


def assert_prints(name: str, output: str) -> None:
    missing = [
        line for line in BLOCKS[name].splitlines() if line.strip() and not line_pattern(line).search(output)
    ]
    assert not missing, (
        f"the tutorial's {name}: not printed:\n" + "\n".join(missing) + f"\n--- printed ---\n{output}"
    )


def sql_targets(sandbox: Sandbox) -> dict[str, list[Instance]]:
    """What a `-- on ...` line of the tutorial names: the source by its id (the config's s1
    reads up1, s2 up2), each source, or the target."""
    up1, up2 = sandbox.upstreams
    return {"s1": [up1], "s2": [up2], "each": [up1, up2], "the": [sandbox.downstream]}


def run_sql(sandbox: Sandbox, name: str) -> None:
    """A tutorial SQL block, each part on the server its `-- on` line names."""
    targets = sql_targets(sandbox)
    parts = re.split(r"^-- on (\S+).*\n", BLOCKS[name], flags=re.MULTILINE)
    assert parts[0].strip() == "" and len(parts) > 1, f"the tutorial's {name}: no `-- on` line"
    for who, sql in zip(parts[1::2], parts[2::2], strict=True):
        for inst in targets[who]:
            inst.execute(sql)


class Operator:
    """Runs the the tutorial's commands as an operator would, in a folder holding task.yaml."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.daemon: subprocess.Popen | None = None
        self.log = workdir / "daemon.log"

    def argv(self, line: str) -> list[str]:
        program, *args = shlex.split(line)
        return [sys.executable, "-m", MODULES[program], *args]

    def command(self, name: str) -> list[str]:
        """The block's one command; its `export NAME=VALUE` lines go into the environment."""
        commands = []
        for line in BLOCKS[name].splitlines():
            if line.startswith("export "):
                self.env.update(item.split("=", 1) for item in shlex.split(line)[1:])
            elif line.strip():
                commands.append(line)
        assert len(commands) == 1, f"the tutorial's {name}: expected one command, got {commands}"
        return self.argv(commands[0])

    def run(self, argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(
            argv, capture_output=True, text=True, cwd=self.workdir, env=self.env, timeout=timeout
        )

    def step(self, name: str, code: int = 0) -> str:
        """Run the block `name`; it must exit with `code` and print the block `name-prints`."""
        result = self.run(self.command(name))
        assert result.returncode == code, (
            f"{name}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
        )
        assert "Traceback" not in result.stderr, result.stderr
        assert_prints(f"{name}-prints", result.stdout)
        return result.stdout

    def ctl(self, *args: str) -> str:
        result = self.run(self.argv("shardctl --config task.yaml") + list(args))
        assert result.returncode == 0, result.stderr
        return result.stdout

    def status(self) -> dict:
        return json.loads(self.ctl("query-status", "--json"))

    def start_daemon(self, name: str) -> None:
        self.daemon = subprocess.Popen(self.command(name), stdout=subprocess.DEVNULL, stderr=self.log.open("w"),
                                       cwd=self.workdir, env=self.env)  # fmt: skip

    def daemon_log(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def wait_for(self, predicate: Callable[[], bool], what: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            assert self.daemon is None or self.daemon.poll() is None, (
                f"the daemon exited:\n{self.daemon_log()}"
            )
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}\n--- daemon log ---\n{self.daemon_log()[-4000:]}")


def clean(sandbox: Sandbox) -> None:
    for inst in sandbox.instances:
        statements = [f"DROP DATABASE IF EXISTS `{s}`" for s in SCHEMAS[inst.name]]
        inst.execute([*statements, "DROP USER IF EXISTS 'shardmerge'@'%'"])


@pytest.fixture
def operator(sandbox: Sandbox, tmp_path: Path) -> Iterator[Operator]:
    sandbox.up()
    clean(sandbox)  # a fresh user, no shard or merged table of an earlier run
    op = Operator(tmp_path)
    yield op
    if op.daemon is not None and op.daemon.poll() is None:
        op.daemon.send_signal(signal.SIGTERM)
        try:
            op.daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            op.daemon.kill()
            op.daemon.wait()
    clean(sandbox)


def write_config(sandbox: Sandbox, op: Operator) -> None:
    """The the tutorial's config with the sandbox's addresses put in, as the tutorial says to."""
    config = yaml.safe_load(BLOCKS["config"])
    for source, inst in zip(config["sources"], sandbox.upstreams, strict=True):
        source.update(host=inst.host, port=inst.port)
    config["target"].update(host=sandbox.downstream.host, port=sandbox.downstream.port)
    assert config["admin"] == {"host": "127.0.0.1", "port": 8080}, config.get("admin")
    config["admin"]["port"] = free_port()  # (8080 may be taken here)
    (op.workdir / "task.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def totals(sandbox: Sandbox) -> tuple[list[tuple], list[tuple]]:
    """(count, sum of amounts) of every shard upstream, and of its rows downstream."""
    up, down = [], []
    for inst, schema, tables in ((sandbox.upstreams[0], "shop_01", ("orders_001", "orders_002")),
                                 (sandbox.upstreams[1], "shop_02", ("orders_003", "orders_004"))):  # fmt: skip
        for table in tables:
            up += inst.execute(f"SELECT COUNT(*), SUM(amount) FROM {schema}.{table}")
            down += sandbox.downstream.execute(
                f"SELECT COUNT(*), SUM(amount) FROM {TARGET} WHERE _schema = '{schema}' AND _table = '{table}'"
            )
    return up, down


def setting_holds(inst: Instance, name: str, value: str) -> str | None:
    """None when the server runs with the tutorial's `name = value` (my.cnf), else what it has.
    `log_bin` names the binlog's base name; `server_id` is the server's own, any but 0."""
    got = inst.execute(f"SELECT @@GLOBAL.{name}")[0][0]
    if name == "log_bin":
        base = inst.execute("SELECT @@GLOBAL.log_bin_basename")[0][0]
        ok = got == 1 and str(base).endswith(f"/{value}")
    elif name == "server_id":
        ok = int(got) != 0
    elif value.upper() in ("ON", "OFF"):
        ok = got == (value.upper() == "ON")
    else:
        ok = str(got).upper() == value.upper()
    return None if ok else f"{inst.name}: {name} is {got!r}, the tutorial says {value}"


def test_the_sandbox_runs_the_server_settings_the_tutorial_asks_for(sandbox):
    settings = [line.split("=", 1) for line in BLOCKS["my-cnf"].splitlines() if "=" in line]
    assert {name.strip() for name, _ in settings} >= {
        "log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "server_id", "log_slave_updates",
    }  # fmt: skip
    wrong = [
        problem
        for inst in sandbox.upstreams
        for name, value in settings
        if (problem := setting_holds(inst, name.strip(), value.strip()))
    ]
    assert not wrong, wrong
    ids = {inst.execute("SELECT @@GLOBAL.server_id")[0][0] for inst in sandbox.upstreams}
    assert len(ids) == len(sandbox.upstreams), "the upstreams' server ids are not their own"


def test_the_tutorials_first_task_from_grants_to_verify_and_the_first_things_to_look_at(sandbox, operator):
    op = operator
    run_sql(sandbox, "shards")
    run_sql(sandbox, "source-grants")
    run_sql(sandbox, "target-grants")
    write_config(sandbox, op)

    op.step("check")
    # the the tutorial's failing check: REPLICATION SLAVE left out on s1
    up1 = sandbox.upstreams[0]
    up1.execute("REVOKE REPLICATION SLAVE ON *.* FROM 'shardmerge'@'%'")
    failed = op.run(op.command("check"))
    assert failed.returncode == 2
    assert_prints("check-fails-prints", failed.stdout)
    up1.execute("GRANT REPLICATION SLAVE ON *.* TO 'shardmerge'@'%'")

    op.step("backfill")
    op.start_daemon("run")
    op.wait_for(lambda: all(line_pattern(line).search(op.daemon_log()) for line in BLOCKS["run-prints"].splitlines()),
                "the daemon's start as the tutorial shows it")  # fmt: skip
    # (as the tutorial says, a source is `connecting` until its stream's first event or heartbeat)
    op.wait_for(lambda: all(s["state"] == "running" and s["lag"] is not None for s in op.status()["sources"].values()),
                "the sources running, as the tutorial shows them")  # fmt: skip
    op.step("query-status")

    run_sql(sandbox, "writes")
    op.wait_for(lambda: (t := totals(sandbox))[0] == t[1], "the writes downstream")
    op.step("verify")

    # 1. query-status shows the shard a conflict holds, and why
    s1, s2 = re.split(r"^-- on s2.*\n", BLOCKS["conflict"], flags=re.MULTILINE)
    up1.execute(s1)
    op.wait_for(lambda: op.status()["groups"][TARGET]["version"] == "1.1", "the first ALTER taken")
    sandbox.upstreams[1].execute(s2)
    op.wait_for(
        lambda: op.status()["groups"][TARGET]["blocked"] and op.status().get("paused"), "the shard held"
    )
    # (the row written after its DDL is parked a moment after the shard pauses)
    op.wait_for(
        lambda: all(p.get("parked", {}).get("rows") for p in op.status()["paused"].values()), "its row parked"
    )
    assert_prints("conflict-prints", op.ctl("query-status"))
    # 2. its way out; show-ddl-state points to it
    state = op.ctl("show-ddl-state")
    assert (
        "  fix:    `shardctl binlog list` shows its ways out "
        "(binlog skip|replace --source s2 --table shop_02.orders_003, set-schema)" in state
    ), state
    op.step("binlog-list")
    # 3. the log's line and the metrics the tutorial names
    warning = re.search(r"e\.g\. `(WARNING [^`]+)`", PAGE.read_text())
    assert warning is not None and re.search(words(warning[1]), op.daemon_log()), op.daemon_log()
    metrics = op.ctl("metrics")
    assert f'shardmerge_blocked_shards{{target="{TARGET}"}} 1.0' in metrics
    assert 'shardmerge_source_connected{source="s1"} 1.0' in metrics
    op.step("binlog-skip")
    op.wait_for(lambda: not op.status()["groups"][TARGET]["blocked"], "the shard going on")

    stop = op.run(op.argv("shardctl --config task.yaml stop-task"))
    assert stop.returncode == 0, stop.stderr
    assert_prints("stop-task-prints", stop.stdout)
    assert op.daemon is not None and op.daemon.wait(timeout=60) == 0


def test_a_readme_line_is_matched_by_its_words_not_its_numbers():
    """The matching above can fail: other words, or a line cut short, do not match."""
    pattern = line_pattern("s1      running  mysql-bin.000001:48668  0.474    0         0")
    assert pattern.search("x\ns1  running  mysql-bin.000002:1234  12.5  7  0\n")
    assert not pattern.search("s1  stopped  mysql-bin.000002:1234  12.5  7  0")
    assert not pattern.search("s1  running  mysql-bin.000002:1234  12.5  7")
    assert line_pattern("------  -----").search("--  ---------")
