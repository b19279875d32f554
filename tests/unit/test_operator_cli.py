"""The operator's first commands, run as processes, without database servers: `shardctl`
reads only the admin section of a task config (an operator without the servers'
passwords can run it), takes its flags before or after the command and an address
without a scheme, prints its version; `shardmerge status` needs no source password; every
option says what it is for, and the help cites no spec or source file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from tests.replication import REPO, free_port

# no variable of the machine's may stand in for the ones these tests leave unset
ENV = {
    k: v for k, v in os.environ.items() if k not in ("SHARDCTL_TOKEN", "SM_OP_TOKEN", "SM_OP_PASSWORD")
} | {"PYTHONPATH": str(REPO)}
TOKEN = "op-token-4711"
STATUS = {"task": "t", "applied": 3, "sources": {}, "groups": {}}
# what the fake daemon answers, by path
ANSWERS = {
    "/api/v1/status": STATUS,
    "/api/v1/dead-letters": [],
    "/api/v1/validation/errors": [],
}


def shardctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli.shardctl", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env or ENV,
        timeout=60,
    )


def shardmerge(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli.shardmerge", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=ENV,
        timeout=60,
    )


def write_config(tmp_path: Path, *, admin: dict, target_port: int = 3306) -> Path:
    """A task whose source and target passwords are in variables this test never sets."""
    config = {
        "task": "t",
        "sources": [
            {
                "id": "shard_a",
                "host": "127.0.0.1",
                "port": 3306,
                "user": "u",
                "password_env": "SM_OP_PASSWORD",
                "server_id": 5,
            }
        ],
        "target": {
            "host": "127.0.0.1",
            "port": target_port,
            "user": "root",
            "password": "",
            "flavor": "mariadb",
        },
        "routes": [{"schema": "db", "table": "t", "target": "db.t"}],
        "admin": admin,
    }
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class FakeDaemon(BaseHTTPRequestHandler):
    """An admin API that answers only requests bearing TOKEN."""

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._answer(401, {"error": "a bearer token is required"})
        elif self.path in ANSWERS:
            self._answer(200, ANSWERS[self.path])
        else:
            self._answer(404, {"error": f"no {self.path}"})

    def _answer(self, status: int, body: object) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass  # (the test's output is the client's)


@pytest.fixture
def daemon() -> Iterator[int]:
    """The port of a fake daemon's admin API."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeDaemon)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


# -- shardctl: the admin section only ---------------------------------------------------------
def test_shardctl_reads_the_address_of_a_config_whose_passwords_it_does_not_have(tmp_path):
    port = free_port()
    path = write_config(tmp_path, admin={"port": port})
    result = shardctl("--config", str(path), "query-status")
    assert result.returncode == 3, result.stderr
    assert result.stderr.startswith(
        f"shardctl query-status: no shardmerge daemon answers at http://127.0.0.1:{port} ("
    )
    assert "SM_OP_PASSWORD" not in result.stderr and "password" not in result.stderr


def test_shardctl_takes_the_token_from_the_variable_the_config_names(tmp_path, daemon):
    path = write_config(tmp_path, admin={"port": daemon, "token_env": "SM_OP_TOKEN"})
    result = shardctl("--config", str(path), "query-status", "--json", env={**ENV, "SM_OP_TOKEN": TOKEN})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == STATUS
    # that variable not set (not the daemon's host): the operator's own
    mine = shardctl("--config", str(path), "query-status", env={**ENV, "SHARDCTL_TOKEN": TOKEN})
    assert mine.returncode == 0 and mine.stdout.startswith("task t: sync, not synced; 3 row changes applied"), mine.stderr
    refused = shardctl("--config", str(path), "query-status")  # neither: no token sent
    assert refused.returncode == 3 and "a bearer token is required (HTTP 401)" in refused.stderr


def test_shardctl_still_names_a_bad_admin_field(tmp_path):
    path = write_config(tmp_path, admin={"port": "eighty"})
    result = shardctl("--config", str(path), "query-status")
    assert result.returncode == 2
    assert (
        result.stderr
        == f"shardctl query-status: {path}: admin.port: expected an integer from 0 to 65535, got 'eighty'\n"
    )


# -- shardctl: version, flags, address --------------------------------------------------------
def test_shardctl_prints_the_version_shardmerge_prints():
    ctl, merge = shardctl("--version"), shardmerge("--version")
    assert ctl.returncode == 0 and merge.returncode == 0
    assert ctl.stdout.split()[0] == "shardctl" and ctl.stdout.split()[1:] == merge.stdout.split()[1:]
    # (looked up when asked, not at each start: replicator.usage.VersionAction)
    assert merge.stdout.split() == ["shardmerge", metadata.version("shardmerge")]


@pytest.mark.parametrize(
    ("command", "answer"),
    [
        (["query-status"], STATUS),
        (["dead-letters"], []),
        (["validation", "show-errors"], []),
    ],
)
@pytest.mark.parametrize("where", ["before", "after", "split"])
def test_shardctl_takes_its_flags_before_and_after_the_command(daemon, command, answer, where):
    flags = {"--addr": f"127.0.0.1:{daemon}", "--token-env": "SM_OP_TOKEN"}
    given = [x for pair in flags.items() for x in pair] + ["--json"]
    argv = {
        "before": [*given, *command],
        "after": [*command, *given],
        # a flag given before and none of its kind after: the one before holds
        "split": ["--json", "--addr", flags["--addr"], *command, "--token-env", "SM_OP_TOKEN"],
    }[where]
    result = shardctl(*argv, env={**ENV, "SM_OP_TOKEN": TOKEN})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == answer


def test_an_address_without_a_scheme_is_http():
    port = free_port()
    result = shardctl("--addr", f"127.0.0.1:{port}", "health")
    assert result.returncode == 3 and "unknown url type" not in result.stderr
    assert result.stderr.startswith(
        f"shardctl health: no shardmerge daemon answers at http://127.0.0.1:{port} ("
    )


# -- shardmerge status: the target only -------------------------------------------------------
def test_status_needs_no_source_password_and_names_the_target_it_cannot_reach(tmp_path):
    port = free_port()
    path = write_config(tmp_path, admin={"port": free_port()}, target_port=port)
    result = shardmerge("status", "--config", str(path))
    assert result.returncode == 3 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"shardmerge status: target: cannot connect to 127.0.0.1:{port}: ")
    assert "check target.host and port" in result.stderr and "SM_OP_PASSWORD" not in result.stderr
    # `run` reads the sources: their passwords it needs
    run = shardmerge("run", "--config", str(path))
    assert run.returncode == 2
    assert "sources[0].password_env: environment variable SM_OP_PASSWORD is not set" in run.stderr


# -- help texts -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tool", "argv", "text"),
    [
        (
            shardctl,
            ["binlog", "--help"],
            "--source SOURCE       the source id (sources[].id in the task config)",
        ),
        (shardctl, ["pause-task", "--help"], "without it, all sources"),
        (shardctl, ["query-status", "--help"], "--json                print the API's JSON"),
        (shardctl, ["--help"], "host:port or http://host:port"),
        (shardmerge, ["status", "--help"], "print the saved state as JSON"),
        (shardmerge, ["run", "--help"], "the least severe lines logged (default: INFO)"),
        (shardmerge, ["join", "--help"], "(default: mariadb)"),
    ],
)
def test_options_say_what_they_are_for(tool, argv, text):
    result = tool(*argv)
    # (argparse wraps lines and pads columns as the terminal's width says)
    assert result.returncode == 0 and " ".join(text.split()) in " ".join(result.stdout.split())


@pytest.mark.long
def test_shardctl_help_cites_no_spec_or_source_file():
    from replicator.cli.shardctl import build_parser

    (commands,) = [a for a in build_parser()._actions if a.dest == "command"]
    citation = re.compile(r"\bseed\b|\b00\d\b|\.\./shared|\w\.py\b")
    for argv in [[], *([name] for name in commands.choices)]:
        text = shardctl(*argv, "--help").stdout
        assert "exit status" in text, argv
        assert not citation.search(text), (argv, citation.search(text))
