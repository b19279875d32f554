"""The product as the oracle sees it: `shardmerge plan`, fed the story as it is played.

The oracle never calls the coordinator. It gives `shardmerge plan --follow` the story
(the shards' first tables, then each step MariaDB took, one JSON line each) and reads
what it answers (docs/reference/commands.md, `plan`): the step's decision (result, downstream statements,
version) and the state after it (each shard's table as tracked and as accepted, why it
is paused, the pending renames, the columns rows set NULL while they are pending, the
downstream table as the DDL left it).

The command runs as a process of its own, one per fuzzer process, and takes story after
story. A test that changes the product to see the oracle notice (monkeypatch) sets
`IN_PROCESS`: the story is then written as a scenario file and `shardmerge plan --json`
run on it in this process after every step (a story replayed each time: fine for a few).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

IN_PROCESS = False
OK, WAITING = 0, 4  # `plan`'s exit statuses: no shard blocked after the last step, or some
_ROOT = Path(__file__).resolve().parents[2]


class ProductRefused(Exception):
    """`shardmerge plan` refused the story (exit status 2: it says it cannot play it)."""


@dataclass(frozen=True)
class Version:
    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> Version:
        major, minor = text.split(".")
        return cls(int(major), int(minor))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True)
class Pause:
    kind: str  # conflict | unsupported | waiting | truncate
    reason: str
    dropped: tuple[str, ...]  # the columns its paused DDLs dropped
    renames: tuple[tuple[str, str], ...]  # (old, new) of its paused DDLs


@dataclass(frozen=True)
class Shard:
    table: str | None  # CREATE TABLE as tracked (None: unknown, after a DDL it cannot follow)
    accepted: str | None  # CREATE TABLE of the schema its rows go downstream with
    paused: Pause | None


@dataclass(frozen=True)
class Rename:
    old: str
    new: str
    shards: frozenset[str]  # the shards that renamed
    started: bool  # the downstream statements of its first shard ran


@dataclass(frozen=True)
class State:
    version: Version
    propagated: str | None  # CREATE TABLE of the downstream table as the DDL left it
    shards: dict[str, Shard]
    renames: tuple[Rename, ...]
    cleared: dict[str, tuple[str, ...]]  # shard -> columns its rows set NULL

    @property
    def blocked(self) -> dict[str, Pause]:
        return {s: st.paused for s, st in self.shards.items() if st.paused is not None}


@dataclass(frozen=True)
class Reply:
    """The last step's decision."""

    result: str
    message: str
    downstream: tuple[str, ...]
    version: Version


EMPTY = State(Version(1, 0), None, {}, (), {})


class Product:
    def __init__(self, target: str, flavor: str = "mariadb"):
        self.header = {"flavor": flavor, "target": target}
        self.shards: dict[str, str] = {}
        self.steps: list[dict[str, Any]] = []
        self.state = EMPTY

    def start(self, shards: dict[str, str]) -> tuple[str, ...]:
        """The story's first tables: the downstream statements that make the table."""
        self.shards = dict(shards)
        scenario = {**self.header, "shards": self.shards}
        report = self._replayed() if IN_PROCESS else _follower().ask(scenario)
        self.state = _state(report["state"])
        return tuple(report["initial_downstream"])

    def play(self, step: dict[str, Any]) -> Reply:
        self.steps.append(dict(step))
        if IN_PROCESS:
            report = self._replayed()
            last = report["steps"][-1]
        else:
            report = _follower().ask(step)
            last = report["step"]
        self.state = _state(report["state"])
        return Reply(
            last["result"], last["message"], tuple(last["downstream"]), Version.parse(last["version"])
        )

    def _replayed(self) -> dict[str, Any]:
        """`shardmerge plan --json` on the story so far, in this process."""
        from replicator.cli.shardmerge import main as shardmerge  # (only where a test patches it)

        with tempfile.TemporaryDirectory(prefix="fz-plan-") as where:
            path = Path(where) / "story.yaml"
            scenario = {**self.header, "shards": self.shards, "steps": self.steps}
            path.write_text(yaml.safe_dump(scenario, sort_keys=False, allow_unicode=True))
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = shardmerge(["plan", str(path), "--json"])
        if code not in (OK, WAITING):
            raise ProductRefused(err.getvalue().strip() or f"shardmerge plan exited {code}")
        return json.loads(out.getvalue())


class _Follower:
    """`shardmerge plan --follow` as a process: a line out, a line back."""

    def __init__(self) -> None:
        # open as long as the process runs: what it says when it fails is read from here
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        env = dict(
            os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")]))
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "replicator.cli.shardmerge", "plan", "--follow"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=env,
            cwd=_ROOT,
        )
        self.pid = os.getpid()

    def alive(self) -> bool:
        return self.pid == os.getpid() and self.process.poll() is None

    def ask(self, line: dict[str, Any]) -> dict[str, Any]:
        try:
            self.process.stdin.write(json.dumps(line) + "\n")
            self.process.stdin.flush()
            answer = self.process.stdout.readline()
        except BrokenPipeError:
            answer = ""
        if not answer:
            self.process.wait(timeout=10)
            self._stderr.seek(0)
            raise ProductRefused(
                f"shardmerge plan --follow ended ({self.process.returncode}): {self._stderr.read()[-3000:]}"
            )
        reply = json.loads(answer)
        if "error" in reply:
            raise ProductRefused(reply["error"])
        return reply


_FOLLOWER: _Follower | None = None


def _follower() -> _Follower:
    """This process's `plan --follow` (a new one after it ended, or in a forked child)."""
    global _FOLLOWER
    if _FOLLOWER is None or not _FOLLOWER.alive():
        _FOLLOWER = _Follower()
    return _FOLLOWER


def _state(data: dict[str, Any]) -> State:
    def pause(p: dict[str, Any] | None) -> Pause | None:
        if p is None:
            return None
        return Pause(p["kind"], p["reason"], tuple(p["dropped"]), tuple(tuple(r) for r in p["renames"]))

    return State(
        Version.parse(data["version"]),
        data["propagated"],
        {s: Shard(st["table"], st["accepted"], pause(st["paused"])) for s, st in data["shards"].items()},
        tuple(Rename(r["old"], r["new"], frozenset(r["shards"]), r["started"]) for r in data["renames"]),
        {s: tuple(names) for s, names in data["cleared"].items()},
    )
