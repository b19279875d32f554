"""`Sandbox`, what demos, tests and benches use: its servers brought up (reusing the running
ones), stopped and deleted, one stopped, started or restarted, and their status."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from replicator.sandbox import process
from replicator.sandbox.commands import find_binary
from replicator.sandbox.instance import Instance, InstanceStatus, SandboxError, running_version
from replicator.sandbox.pids import pid_alive, servers_under, terminate
from replicator.sandbox.ports import free_ports, port_is_free
from replicator.sandbox.process import START_TIMEOUT, STOP_TIMEOUT
from replicator.sandbox.state import DOWNSTREAM_NAME, LOCK_FILE, STATE_FILE, SandboxState, read_state
from replicator.sandbox.watchdog import start_watchdog


class Sandbox:
    """`upstreams` MariaDB upstreams (up1, up2, ...; server ids 101, 102, ...) and one downstream
    (`down`, server id 1) under `root`, each in `root/<name>` on a free 127.0.0.1 port.

    With `watchdog=True` a small helper process runs `down()` as soon as the creating process is
    gone, even if it was SIGKILLed: test runs use it so a crashed pytest leaves no servers."""

    def __init__(
        self,
        root: Path | str,
        upstreams: int = 2,
        *,
        watchdog: bool = False,
        server_options: Sequence[str] = (),
    ) -> None:
        """`server_options`: more mariadbd options for every server (TLS certificates, say)."""
        if upstreams < 1:
            raise ValueError("a sandbox needs at least one upstream")
        self.root = Path(root).expanduser().resolve()
        self._upstream_count = upstreams
        self._watchdog_enabled = watchdog
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._state = SandboxState(self.root, tuple(server_options))
        self._state.load()

    @classmethod
    def attach(cls, root: Path | str) -> Sandbox:
        """The sandbox recorded under `root`, with as many upstreams as it was created with."""
        state = read_state(Path(root).expanduser().resolve() / STATE_FILE)
        if state is None:
            raise SandboxError(f"no sandbox in {root} (no {STATE_FILE})")
        upstreams = sum(1 for item in state["instances"] if item["role"] == "upstream")
        return cls(root, upstreams=upstreams, server_options=state.get("server_options", ()))

    # -- accessors ---------------------------------------------------------------------------

    @property
    def state_file(self) -> Path:
        return self._state.state_file

    @property
    def instances(self) -> list[Instance]:
        self._state.require_instances()
        return list(self._state.instances.values())

    @property
    def upstreams(self) -> list[Instance]:
        return [inst for inst in self.instances if inst.role == "upstream"]

    @property
    def downstream(self) -> Instance:
        return self.instance(DOWNSTREAM_NAME)

    def instance(self, name: str) -> Instance:
        return self._state.instance(name)

    def pid(self, name: str) -> int | None:
        """The server's pid if it is alive, else None."""
        self.instance(name)
        pid = self._state.pids.get(name)
        return pid if pid is not None and self._state.alive(name, pid) else None

    def __enter__(self) -> Sandbox:
        self.up()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.down()

    # -- lifecycle ---------------------------------------------------------------------------

    def up(self, timeout: float = START_TIMEOUT) -> list[Instance]:
        """Start every server that is not running (reusing the ones that are) and wait until all
        answer. Idempotent. If a server fails to start, the ones started by this call are stopped
        again and SandboxError names the failing one with the tail of its error log."""
        mariadbd, install_db = find_binary("mariadbd"), find_binary("mariadb-install-db")
        self.root.mkdir(parents=True, exist_ok=True)
        state = self._state
        with state.locked():
            state.load()
            if not state.instances:
                state.plan(self._upstream_count)
            elif len(self.upstreams) != self._upstream_count:
                raise SandboxError(
                    f"sandbox {self.root} has {len(self.upstreams)} upstreams, not "
                    f"{self._upstream_count}; run `down` first to change that"
                )
            to_start = [inst for inst in state.instances.values() if not process.is_up(state, inst)]
            # A stale state file (e.g. after a reboot) may point at ports now used by others.
            for inst in to_start:
                if state.pids.get(inst.name) is None and not port_is_free(inst.port):
                    state.replace(inst, port=free_ports(1)[0])
            to_start = [state.instances[inst.name] for inst in to_start]
            state.write()
            process.install([inst for inst in to_start if not process.is_initialized(inst)], install_db)
            try:
                process.start(state, to_start, mariadbd, timeout, fresh_ports=True)
            finally:
                state.write()
        # It exits by itself when someone else's down() removed the state file.
        if self._watchdog_enabled and (self._watchdog is None or self._watchdog.poll() is not None):
            self._watchdog = start_watchdog(self.root)
        return self.instances

    def down(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop every server of this sandbox and delete its data. Works from the state file alone
        and also finds servers whose datadir is under `root` but the state file forgot."""
        state = self._state
        if not self.root.exists():
            state.forget()
            return
        with state.locked():
            state.load()
            pids = {name: pid for name, pid in state.pids.items() if pid is not None}
            targets = [pid for name, pid in pids.items() if state.alive(name, pid)]
            targets += [pid for pid in servers_under(self.root) if pid not in targets]
            terminate(targets, timeout, state.procs.values())
            still = [pid for pid in targets if pid_alive(pid)]
            if still:
                raise SandboxError(f"could not stop mariadbd pids {still} of sandbox {self.root}")
            for datadir in state.datadirs():
                shutil.rmtree(datadir, ignore_errors=True)
                shutil.rmtree(datadir.with_name(datadir.name + ".tmp"), ignore_errors=True)
            for inst in state.instances.values():
                if inst.socket_path.parent != inst.datadir:
                    inst.socket_path.unlink(missing_ok=True)
            self.state_file.unlink(missing_ok=True)
            state.forget()
        with contextlib.suppress(OSError):
            (self.root / LOCK_FILE).unlink()
            self.root.rmdir()
        if self._watchdog is not None:
            if self._watchdog.poll() is None:
                self._watchdog.terminate()
            self._watchdog.wait()
            self._watchdog = None

    def status(self) -> list[InstanceStatus]:
        self._state.load()
        result = []
        for inst in self.instances:
            version = running_version(inst)
            result.append(
                InstanceStatus(
                    name=inst.name,
                    role=inst.role,
                    host=inst.host,
                    port=inst.port,
                    server_id=inst.server_id,
                    pid=self.pid(inst.name),
                    running=version is not None,
                    version=version,
                )
            )
        return result

    def stop_instance(self, name: str, *, graceful: bool = True, timeout: float = STOP_TIMEOUT) -> None:
        """Stop one server and keep its data. `graceful=False` SIGKILLs it, like a crash."""
        with self._state.locked():
            self._state.load()
            process.stop(self._state, name, timeout, graceful=graceful)
            self._state.write()

    def start_instance(self, name: str, timeout: float = START_TIMEOUT) -> Instance:
        """Start a stopped server on its old port with its old data; no-op if it is running."""
        with self._state.locked():
            self._state.load()
            inst = self.instance(name)
            if not process.is_up(self._state, inst):
                try:
                    process.start(self._state, [inst], find_binary("mariadbd"), timeout, fresh_ports=False)
                finally:
                    self._state.write()
        return inst

    def restart_instance(
        self, name: str, *, graceful: bool = True, timeout: float = START_TIMEOUT
    ) -> Instance:
        self.stop_instance(name, graceful=graceful)
        return self.start_instance(name, timeout=timeout)
