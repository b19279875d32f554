"""A sandbox server's process: its datadir installed, mariadbd spawned and waited for until it
answers (on new ports when its own were taken meanwhile), stopped; and what its error log says
when it does not come up."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from replicator.sandbox.commands import install_command, server_command
from replicator.sandbox.instance import Instance, SandboxError
from replicator.sandbox.pids import pid_alive, terminate
from replicator.sandbox.ports import free_ports
from replicator.sandbox.state import SandboxState

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0

# Ephemeral ports can be taken between our probe and the server's bind; retry with new ones.
_PORT_ATTEMPTS = 3


def install(instances: list[Instance], install_db: str) -> None:
    def install_one(inst: Instance) -> None:
        # A datadir left half-made by an interrupted install would make mariadbd fail oddly.
        shutil.rmtree(inst.datadir, ignore_errors=True)
        inst.datadir.mkdir(parents=True)
        inst.tmpdir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(install_command(inst, install_db), capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            raise SandboxError(f"mariadb-install-db failed for {inst.name} in {inst.datadir}:\n{tail}")
        (inst.datadir / ".initialized").touch()

    if instances:
        with ThreadPoolExecutor(len(instances)) as pool:
            list(pool.map(install_one, instances))


def is_initialized(inst: Instance) -> bool:
    return (inst.datadir / ".initialized").exists()


def start(
    state: SandboxState, instances: list[Instance], mariadbd: str, timeout: float, *, fresh_ports: bool
) -> None:
    """Start `instances` and wait for all of them; if any fails, stop the ones started here
    (they keep their data) so a failed call leaves nothing half-up behind."""
    try:
        _start_all(state, instances, mariadbd, timeout, fresh_ports=fresh_ports)
    except BaseException:
        for inst in instances:
            with contextlib.suppress(SandboxError):
                stop(state, inst.name, STOP_TIMEOUT, graceful=False)
        raise


def _start_all(
    state: SandboxState, instances: list[Instance], mariadbd: str, timeout: float, *, fresh_ports: bool
) -> None:
    pending = list(instances)
    for attempt in range(1, _PORT_ATTEMPTS + 1):
        # Spawn from the calling thread, all at once; only the waiting happens in parallel.
        for inst in pending:
            _spawn(state, inst, mariadbd)
        with ThreadPoolExecutor(max(len(pending), 1)) as pool:
            errors = list(pool.map(lambda inst: _wait_ready(state, inst, timeout), pending))
        failed = [(inst, err) for inst, err in zip(pending, errors, strict=True) if err is not None]
        if not failed:
            return
        retry = [inst for inst, err in failed if fresh_ports and _port_clash(inst)]
        if len(retry) != len(failed) or attempt == _PORT_ATTEMPTS:
            raise SandboxError("\n\n".join(err for _, err in failed if err is not None))
        ports = free_ports(len(retry))
        pending = [state.replace(inst, port=port) for inst, port in zip(retry, ports, strict=True)]
        state.write()


def _spawn(state: SandboxState, inst: Instance, mariadbd: str) -> None:
    inst.tmpdir.mkdir(parents=True, exist_ok=True)
    # A session of its own: Ctrl-C in the terminal that ran `sandbox up` must not reach it.
    proc = subprocess.Popen(
        server_command(inst, mariadbd, state.server_options),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    state.procs[inst.name] = proc
    state.pids[inst.name] = proc.pid
    # Record the pid before waiting, so a crash while waiting still leaves it findable.
    state.write()


def _wait_ready(state: SandboxState, inst: Instance, timeout: float) -> str | None:
    """None when the server answers, else a message for SandboxError."""
    deadline = time.monotonic() + timeout
    pid = state.pids[inst.name]
    while time.monotonic() < deadline:
        if pid is None or not state.alive(inst.name, pid):
            return _failure(inst, "exited during startup")
        if inst.ping(timeout=1.0):
            return None
        time.sleep(0.05)
    return _failure(inst, f"did not answer SELECT 1 within {timeout:.0f} s")


def stop(state: SandboxState, name: str, timeout: float, *, graceful: bool) -> None:
    inst = state.instance(name)
    pid = state.pids.get(name)
    proc = state.procs.pop(name, None)
    if pid is not None and state.alive(name, pid, proc):
        if not graceful:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        terminate([pid], timeout, [proc] if proc else [])
        if pid_alive(pid):
            raise SandboxError(f"could not stop {name} (pid {pid}, port {inst.port})")
    state.pids[name] = None


def is_up(state: SandboxState, inst: Instance) -> bool:
    pid = state.pids.get(inst.name)
    if pid is None or not state.alive(inst.name, pid):
        state.pids[inst.name] = None
        return False
    # Alive but not yet answering: typically still starting, or shutting down. Give it a moment.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and state.alive(inst.name, pid):
        if inst.ping():
            return True
        time.sleep(0.1)
    raise SandboxError(_failure(inst, f"runs as pid {pid} but does not answer SELECT 1"))


def _port_clash(inst: Instance) -> bool:
    tail = _log_tail(inst, 30)
    return "Address already in use" in tail or "Do you already have another server running" in tail


def _log_tail(inst: Instance, lines: int = 15) -> str:
    try:
        text = inst.error_log.read_text(errors="replace")
    except OSError:
        return "(no error log)"
    return "\n".join(text.splitlines()[-lines:])


def _failure(inst: Instance, what: str) -> str:
    return (
        f"sandbox instance {inst.name} (port {inst.port}, datadir {inst.datadir}) {what}; "
        f"last lines of {inst.error_log}:\n{_log_tail(inst)}"
    )
