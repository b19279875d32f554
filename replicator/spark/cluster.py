"""Spark clusters: the check that a spark:// master listens before a session waits on it,
and a standalone cluster on this machine (a master and workers on 127.0.0.1) for the
cluster tests and benches, started with the `spark-class` of the installed pyspark, whose
pip package has no sbin/ start scripts."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replicator.errors import CliError, ExitCode
from replicator.sandbox import free_ports

CONNECT_TIMEOUT = 5.0
START_TIMEOUT = 120.0  # two JVMs on a busy two-core machine
STOP_TIMEOUT = 15.0


def check_master(master: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Fail in seconds when no address of a spark:// master listens: Spark itself retries
    for a minute and then ends in a traceback. Other masters (local, yarn, k8s) pass."""
    if not master.startswith("spark://"):
        return
    errors = []
    # spark://m1:7077,m2:7077 names standby masters: one that listens is enough
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise CliError(f"the Spark master {master} is not spark://HOST:PORT (or HOST:PORT,HOST:PORT,...)")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return
        except OSError as exc:
            errors.append(f"{address}: {exc.strerror or exc}")
    raise CliError(
        f"the Spark master {master} is unreachable ({'; '.join(errors)}); check the master URL "
        "and that the master runs",
        ExitCode.CONNECTION,
    )


class ClusterError(RuntimeError):
    """A local cluster that did not come up, with the end of the log that says why."""


@dataclass(frozen=True)
class LocalCluster:
    """A standalone cluster to start on this machine: `with LocalCluster(workers=2) as cluster:`
    starts a master and the workers, each of `cores` cores and `memory`, gives the running
    cluster once every worker registered, and stops it at the end."""

    workers: int = 1
    cores: int = 1
    memory: str = "1g"
    directory: Path | None = None  # logs and work dirs; None: a temporary folder, removed at the end
    timeout: float = START_TIMEOUT
    # what __exit__ undoes; a `with` at a time
    _running: contextlib.ExitStack = field(
        default_factory=contextlib.ExitStack, init=False, repr=False, compare=False
    )

    def __enter__(self) -> RunningCluster:
        if self.directory is None:
            directory = Path(tempfile.mkdtemp(prefix="shardmerge-spark-"))
            self._running.callback(shutil.rmtree, directory, ignore_errors=True)
        else:
            directory = self.directory
        try:
            return self._running.enter_context(_started(self, directory))
        except BaseException:
            self._running.close()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self._running.close()


@dataclass(frozen=True)
class RunningCluster:
    """A running standalone cluster (see `LocalCluster`)."""

    master: str  # spark://127.0.0.1:PORT, what --spark-master takes
    web_ui: str  # the master's web UI; /json/ is the cluster's state
    directory: Path  # the processes' logs and the workers' work dirs
    processes: tuple[subprocess.Popen, ...]  # the master, then the workers; each leads a process group
    watchdog: subprocess.Popen  # stops them all if the process that started them dies

    def state(self) -> dict[str, Any]:
        """The master's view: aliveworkers, activeapps, completedapps (id, name, cores, state)..."""
        with urllib.request.urlopen(f"{self.web_ui}/json/", timeout=10) as response:
            return json.load(response)

    def work_dir(self, worker: int = 0) -> Path:
        """Where a worker keeps each application's executors: <app id>/<executor id>/stderr, jars."""
        return self.directory / f"worker-{worker}"

    def stop(self) -> None:
        self.watchdog.kill()  # first, so that it stops nothing a later cluster reuses
        self.watchdog.wait()
        if self.watchdog.stdin:
            self.watchdog.stdin.close()  # its `cat` ends too
        _stop(self.processes)


@contextlib.contextmanager
def _started(settings: LocalCluster, directory: Path) -> Iterator[RunningCluster]:
    """The master and workers of `settings`, logging to and working in `directory`."""
    import pyspark

    home = Path(pyspark.__file__).parent
    port, web_port = free_ports(2)
    directory.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",  # bind to loopback only, and say so in the URLs
        "SPARK_LOCAL_DIRS": str(directory / "local"),  # the executors' scratch space
        # No REST submission server: it takes the fixed port 6066, so a second cluster could not start.
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    master = [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
    master += ["--port", str(port), "--webui-port", str(web_port)]
    worker = [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1"]
    worker += ["--cores", str(settings.cores), "--memory", settings.memory, "--webui-port", "0"]
    # a worker's work dir is SPARK_HOME/work by default: inside the installed package
    commands = [master] + [
        [*worker, "--work-dir", str(directory / f"worker-{n}")] for n in range(settings.workers)
    ]
    logs = [directory / "master.log"] + [directory / f"worker-{n}.log" for n in range(settings.workers)]
    processes: list[subprocess.Popen] = []
    try:
        for command, log in zip(commands, logs, strict=True):
            with log.open("ab") as out:
                processes.append(
                    subprocess.Popen(
                        command,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=True,
                    )
                )
        cluster = RunningCluster(
            url, f"http://127.0.0.1:{web_port}", directory, tuple(processes), _watchdog(processes)
        )
    except BaseException:
        _stop(processes)
        raise
    try:
        _wait_for_workers(cluster, settings.workers, logs, settings.timeout)
        yield cluster
    finally:
        cluster.stop()


def _wait_for_workers(cluster: RunningCluster, workers: int, logs: list[Path], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process, log in zip(cluster.processes, logs, strict=True):
            if process.poll() is not None:
                raise ClusterError(f"{log.stem} exited with status {process.returncode}:\n{_tail(log)}")
        with contextlib.suppress(OSError, ValueError):  # the web UI is not up yet
            if cluster.state().get("aliveworkers", 0) >= workers:
                return
        time.sleep(0.5)
    raise ClusterError(
        f"{workers} worker(s) did not register with {cluster.master} within {timeout:.0f}s:\n"
        + "\n".join(f"--- {log.name}\n{_tail(log)}" for log in logs)
    )


def _tail(log: Path, lines: int = 20) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""


def _watchdog(processes: Sequence[subprocess.Popen]) -> subprocess.Popen:
    """A shell that waits for the end of a pipe only we hold: once we are gone, even
    SIGKILLed, it reads end of file and stops the cluster's process groups (executors too)."""
    groups = " ".join(f"-{p.pid}" for p in processes)
    script = f"cat >/dev/null; kill -TERM {groups}; sleep {STOP_TIMEOUT:.0f}; kill -KILL {groups}"
    return subprocess.Popen(
        ["sh", "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _stop(processes: Sequence[subprocess.Popen]) -> None:
    """SIGTERM each process group (a worker's executors are in its group), SIGKILL what is
    left after STOP_TIMEOUT."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
        deadline = time.monotonic() + STOP_TIMEOUT
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
        if all(p.poll() is not None for p in processes):
            return
