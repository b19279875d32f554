"""The sandbox's servers as `<root>/sandbox.json` records them: their names, ports and server
ids, their pids, and the lock every change of them is made under."""

from __future__ import annotations

import contextlib
import fcntl
import json
import subprocess
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from replicator.sandbox.instance import Instance, SandboxError
from replicator.sandbox.pids import is_server_for, pid_alive
from replicator.sandbox.ports import free_ports

STATE_FILE = "sandbox.json"
LOCK_FILE = ".sandbox.lock"
DOWNSTREAM_NAME = "down"
DOWNSTREAM_SERVER_ID = 1
UPSTREAM_SERVER_ID_BASE = 100


class SandboxState:
    """The servers under `root`: how to reach each, its pid (None when stopped), and the
    processes this object spawned. `load` and `write` are its state file."""

    def __init__(self, root: Path, server_options: tuple[str, ...]) -> None:
        self.root = root
        self.server_options = server_options
        self.instances: dict[str, Instance] = {}
        self.pids: dict[str, int | None] = {}
        # Servers this object spawned: polling them reaps them, so they never linger as zombies.
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def state_file(self) -> Path:
        return self.root / STATE_FILE

    def require_instances(self) -> None:
        if not self.instances:
            raise SandboxError(f"sandbox {self.root} is not up")

    def instance(self, name: str) -> Instance:
        self.require_instances()
        try:
            return self.instances[name]
        except KeyError:
            known = ", ".join(self.instances)
            raise SandboxError(f"no instance {name!r} in sandbox {self.root} (have {known})") from None

    def forget(self) -> None:
        self.instances.clear()
        self.pids.clear()
        self.procs.clear()

    def plan(self, upstream_count: int) -> None:
        names = [f"up{i}" for i in range(1, upstream_count + 1)] + [DOWNSTREAM_NAME]
        ports = free_ports(len(names))
        for i, (name, port) in enumerate(zip(names, ports, strict=True), start=1):
            upstream = name != DOWNSTREAM_NAME
            self.instances[name] = Instance(
                name=name,
                role="upstream" if upstream else "downstream",
                port=port,
                server_id=UPSTREAM_SERVER_ID_BASE + i if upstream else DOWNSTREAM_SERVER_ID,
                datadir=self.root / name,
            )
            self.pids[name] = None

    def replace(self, inst: Instance, *, port: int) -> Instance:
        new = Instance(**{**asdict(inst), "port": port})
        self.instances[inst.name] = new
        return new

    def alive(self, name: str, pid: int, proc: subprocess.Popen[bytes] | None = None) -> bool:
        proc = proc or self.procs.get(name)
        if proc is not None and proc.pid == pid:
            return proc.poll() is None
        # Not our child: check the pid still belongs to this server, not a recycled pid.
        inst = self.instances.get(name)
        return pid_alive(pid) and (inst is None or is_server_for(pid, inst.datadir))

    def datadirs(self) -> list[Path]:
        dirs = {inst.datadir for inst in self.instances.values()}
        # Datadirs from a run whose state file is gone are recognised by their InnoDB files.
        dirs |= {p for p in self.root.iterdir() if p.is_dir() and (p / "ibdata1").exists()}
        return sorted(dirs)

    def load(self) -> None:
        state = read_state(self.state_file)
        if state is None:
            return
        instances: dict[str, Instance] = {}
        pids: dict[str, int | None] = {}
        for item in state["instances"]:
            item = dict(item)
            pids[item["name"]] = item.pop("pid", None)
            item["datadir"] = Path(item["datadir"])
            instances[item["name"]] = Instance(**item)
        self.instances, self.pids = instances, pids

    def write(self) -> None:
        state = {
            "root": str(self.root),
            "server_options": list(self.server_options),
            "instances": [
                {**asdict(inst), "datadir": str(inst.datadir), "pid": self.pids.get(inst.name)}
                for inst in self.instances.values()
            ],
        }
        tmp = self.state_file.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.state_file)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        # Serialises up/down/start/stop between processes, e.g. a test run and `sandbox down`.
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / LOCK_FILE, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


def read_state(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise SandboxError(f"unreadable sandbox state {path}: {exc}") from exc
