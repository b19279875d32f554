"""Throwaway local MariaDB servers for demos and tests: N upstreams that write ROW binlogs
the way the shards we replicate from must, and one downstream to merge into.

Everything about a running sandbox (ports, pids, datadirs) is kept in `<root>/sandbox.json`,
so a later process (`shardmerge sandbox status|down`, or a test run after a crash) can find
and stop the servers without having started them."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import pymysql
from pymysql.connections import Connection
from pymysql.constants import CLIENT

from replicator.servers import connect, server_version

Role = Literal["upstream", "downstream"]

STATE_FILE = "sandbox.json"
LOCK_FILE = ".sandbox.lock"
DOWNSTREAM_NAME = "down"
DOWNSTREAM_SERVER_ID = 1
UPSTREAM_SERVER_ID_BASE = 100
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0

# Debian puts the server in /usr/sbin, which is not on a normal user's PATH.
_EXTRA_BIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/usr/libexec", "/usr/local/mysql/bin")
# The kernel limit for AF_UNIX paths is 108 bytes including the NUL.
_MAX_SOCKET_PATH = 100
# Ephemeral ports can be taken between our probe and the server's bind; retry with new ones.
_PORT_ATTEMPTS = 3

# Small and fast rather than durable: sandbox data is disposable.
_COMMON_SERVER_OPTIONS = (
    "--bind-address=127.0.0.1",
    "--skip-name-resolve",
    "--character-set-server=utf8mb4",
    "--collation-server=utf8mb4_general_ci",
    "--innodb-buffer-pool-size=64M",
    "--innodb-log-file-size=32M",
    "--innodb-flush-log-at-trx-commit=2",
    "--max-connections=300",
    # a LONGTEXT or JSON value may take up to 4 GB; a row event or statement with one of
    # more than the default 16 MB would break the connection
    "--max-allowed-packet=1G",
)
# What the binlog reader needs from a shard: full before/after images and column names.
_UPSTREAM_SERVER_OPTIONS = (
    "--log-bin=mysql-bin",
    "--binlog-format=ROW",
    "--binlog-row-image=FULL",
    "--binlog-row-metadata=FULL",
    "--sync-binlog=0",
    # (an upstream made the replica of another keeps its GTIDs in its own binlog, which
    # a source failing over to it reads on from: tests/test_failover.py)
    "--log-slave-updates",
)


class SandboxError(RuntimeError):
    """A sandbox server could not be set up, started, reached or stopped."""


@dataclass(frozen=True, kw_only=True)
class Instance:
    """How to reach one sandbox server. Immutable: a restarted server keeps its port."""

    name: str
    role: Role
    host: str = "127.0.0.1"
    port: int
    server_id: int
    datadir: Path
    user: str = "root"
    password: str = ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def error_log(self) -> Path:
        return self.datadir / "error.log"

    @property
    def tmpdir(self) -> Path:
        # Not inside the datadir, where any directory shows up as a database.
        return self.datadir.with_name(self.datadir.name + ".tmp")

    @property
    def socket_path(self) -> Path:
        path = self.datadir / "s.sock"
        if len(str(path)) <= _MAX_SOCKET_PATH:
            return path
        return Path("/tmp") / f"shardmerge-{self.port}.sock"

    def connect(self, database: str | None = None, **kwargs: Any) -> Connection:
        server = {"host": self.host, "port": self.port, "user": self.user, "password": self.password}
        # max_allowed_packet as the servers have it (_COMMON_SERVER_OPTIONS)
        return connect(server, database=database, **{"max_allowed_packet": 1 << 30, **kwargs})

    def execute(self, sql: str | Iterable[str], database: str | None = None) -> list[tuple[Any, ...]]:
        """Run one statement, several `;`-separated ones, or a list of them; return the rows of
        the last one (empty for statements without a result set)."""
        statements = [sql] if isinstance(sql, str) else list(sql)
        # The server splits multi-statement strings, which is safe with ';' inside literals.
        conn = self.connect(database, client_flag=CLIENT.MULTI_STATEMENTS)
        rows: list[tuple[Any, ...]] = []
        try:
            with conn.cursor() as cur:
                for statement in statements:
                    cur.execute(statement)
                    rows = list(cur.fetchall())
                    while cur.nextset():
                        rows = list(cur.fetchall())
        finally:
            conn.close()
        return rows

    def ping(self, timeout: float = 1.0) -> bool:
        """True when the server answers `SELECT 1`."""
        try:
            conn = self.connect(connect_timeout=timeout, read_timeout=max(timeout, 5))
        except pymysql.MySQLError:
            return False
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT 1")
                return cur.fetchone() == (1,)
        except pymysql.MySQLError:
            return False
        finally:
            conn.close()


@dataclass(frozen=True)
class InstanceStatus:
    name: str
    role: Role
    host: str
    port: int
    server_id: int
    pid: int | None
    running: bool
    version: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
        self._server_options = tuple(server_options)
        self._watchdog_enabled = watchdog
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._instances: dict[str, Instance] = {}
        self._pids: dict[str, int | None] = {}
        # Servers this object spawned: polling them reaps them, so they never linger as zombies.
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._load_state()

    @classmethod
    def attach(cls, root: Path | str) -> Sandbox:
        """The sandbox recorded under `root`, with as many upstreams as it was created with."""
        state = _read_state(Path(root).expanduser().resolve() / STATE_FILE)
        if state is None:
            raise SandboxError(f"no sandbox in {root} (no {STATE_FILE})")
        upstreams = sum(1 for item in state["instances"] if item["role"] == "upstream")
        return cls(root, upstreams=upstreams, server_options=state.get("server_options", ()))

    # -- accessors ---------------------------------------------------------------------------

    @property
    def state_file(self) -> Path:
        return self.root / STATE_FILE

    @property
    def instances(self) -> list[Instance]:
        self._require_instances()
        return list(self._instances.values())

    @property
    def upstreams(self) -> list[Instance]:
        return [inst for inst in self.instances if inst.role == "upstream"]

    @property
    def downstream(self) -> Instance:
        return self.instance(DOWNSTREAM_NAME)

    def instance(self, name: str) -> Instance:
        self._require_instances()
        try:
            return self._instances[name]
        except KeyError:
            known = ", ".join(self._instances)
            raise SandboxError(f"no instance {name!r} in sandbox {self.root} (have {known})") from None

    def pid(self, name: str) -> int | None:
        """The server's pid if it is alive, else None."""
        self.instance(name)
        pid = self._pids.get(name)
        return pid if pid is not None and self._alive(name, pid) else None

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
        mariadbd, install_db = _find_binary("mariadbd"), _find_binary("mariadb-install-db")
        self.root.mkdir(parents=True, exist_ok=True)
        with self._locked():
            self._load_state()
            if not self._instances:
                self._plan()
            elif len(self.upstreams) != self._upstream_count:
                raise SandboxError(
                    f"sandbox {self.root} has {len(self.upstreams)} upstreams, not "
                    f"{self._upstream_count}; run `down` first to change that"
                )
            to_start = [inst for inst in self._instances.values() if not self._is_up(inst)]
            # A stale state file (e.g. after a reboot) may point at ports now used by others.
            for inst in to_start:
                if self._pids.get(inst.name) is None and not _port_is_free(inst.port):
                    self._replace(inst, port=free_ports(1)[0])
            to_start = [self._instances[inst.name] for inst in to_start]
            self._write_state()
            self._install([inst for inst in to_start if not _is_initialized(inst.datadir)], install_db)
            try:
                self._start(to_start, mariadbd, timeout, fresh_ports=True)
            finally:
                self._write_state()
        # It exits by itself when someone else's down() removed the state file.
        if self._watchdog_enabled and (self._watchdog is None or self._watchdog.poll() is not None):
            self._watchdog = _start_watchdog(self.root)
        return self.instances

    def down(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop every server of this sandbox and delete its data. Works from the state file alone
        and also finds servers whose datadir is under `root` but the state file forgot."""
        if not self.root.exists():
            self._forget()
            return
        with self._locked():
            self._load_state()
            pids = {name: pid for name, pid in self._pids.items() if pid is not None}
            targets = [pid for name, pid in pids.items() if self._alive(name, pid)]
            targets += [pid for pid in _servers_under(self.root) if pid not in targets]
            _terminate(targets, timeout, self._procs.values())
            still = [pid for pid in targets if _pid_alive(pid)]
            if still:
                raise SandboxError(f"could not stop mariadbd pids {still} of sandbox {self.root}")
            for datadir in self._datadirs():
                shutil.rmtree(datadir, ignore_errors=True)
                shutil.rmtree(datadir.with_name(datadir.name + ".tmp"), ignore_errors=True)
            for inst in self._instances.values():
                if inst.socket_path.parent != inst.datadir:
                    inst.socket_path.unlink(missing_ok=True)
            self.state_file.unlink(missing_ok=True)
            self._forget()
        with contextlib.suppress(OSError):
            (self.root / LOCK_FILE).unlink()
            self.root.rmdir()
        if self._watchdog is not None:
            if self._watchdog.poll() is None:
                self._watchdog.terminate()
            self._watchdog.wait()
            self._watchdog = None

    def status(self) -> list[InstanceStatus]:
        self._load_state()
        result = []
        for inst in self.instances:
            version = _server_version(inst)
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
        with self._locked():
            self._load_state()
            self._stop(name, timeout, graceful=graceful)
            self._write_state()

    def start_instance(self, name: str, timeout: float = START_TIMEOUT) -> Instance:
        """Start a stopped server on its old port with its old data; no-op if it is running."""
        with self._locked():
            self._load_state()
            inst = self.instance(name)
            if not self._is_up(inst):
                try:
                    self._start([inst], _find_binary("mariadbd"), timeout, fresh_ports=False)
                finally:
                    self._write_state()
        return inst

    def restart_instance(
        self, name: str, *, graceful: bool = True, timeout: float = START_TIMEOUT
    ) -> Instance:
        self.stop_instance(name, graceful=graceful)
        return self.start_instance(name, timeout=timeout)

    # -- internals ---------------------------------------------------------------------------

    def _require_instances(self) -> None:
        if not self._instances:
            raise SandboxError(f"sandbox {self.root} is not up")

    def _forget(self) -> None:
        self._instances.clear()
        self._pids.clear()
        self._procs.clear()

    def _plan(self) -> None:
        names = [f"up{i}" for i in range(1, self._upstream_count + 1)] + [DOWNSTREAM_NAME]
        ports = free_ports(len(names))
        for i, (name, port) in enumerate(zip(names, ports, strict=True), start=1):
            upstream = name != DOWNSTREAM_NAME
            self._instances[name] = Instance(
                name=name,
                role="upstream" if upstream else "downstream",
                port=port,
                server_id=UPSTREAM_SERVER_ID_BASE + i if upstream else DOWNSTREAM_SERVER_ID,
                datadir=self.root / name,
            )
            self._pids[name] = None

    def _replace(self, inst: Instance, *, port: int) -> Instance:
        new = Instance(**{**asdict(inst), "port": port})
        self._instances[inst.name] = new
        return new

    def _install(self, instances: list[Instance], install_db: str) -> None:
        def install(inst: Instance) -> None:
            # A datadir left half-made by an interrupted install would make mariadbd fail oddly.
            shutil.rmtree(inst.datadir, ignore_errors=True)
            inst.datadir.mkdir(parents=True)
            inst.tmpdir.mkdir(parents=True, exist_ok=True)
            cmd = [
                install_db,
                "--no-defaults",
                f"--datadir={inst.datadir}",
                # Concurrent installs sharing /tmp clash on their temporary table names.
                f"--tmpdir={inst.tmpdir}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
                # Must match the server's value, or its first start rebuilds the redo log.
                "--innodb-log-file-size=32M",
                *_user_option(),
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
                raise SandboxError(f"mariadb-install-db failed for {inst.name} in {inst.datadir}:\n{tail}")
            (inst.datadir / ".initialized").touch()

        if instances:
            with ThreadPoolExecutor(len(instances)) as pool:
                list(pool.map(install, instances))

    def _start(self, instances: list[Instance], mariadbd: str, timeout: float, *, fresh_ports: bool) -> None:
        """Start `instances` and wait for all of them; if any fails, stop the ones started here
        (they keep their data) so a failed call leaves nothing half-up behind."""
        try:
            self._start_all(instances, mariadbd, timeout, fresh_ports=fresh_ports)
        except BaseException:
            for inst in instances:
                with contextlib.suppress(SandboxError):
                    self._stop(inst.name, STOP_TIMEOUT, graceful=False)
            raise

    def _start_all(
        self, instances: list[Instance], mariadbd: str, timeout: float, *, fresh_ports: bool
    ) -> None:
        pending = list(instances)
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            # Spawn from the calling thread, all at once; only the waiting happens in parallel.
            for inst in pending:
                self._spawn(inst, mariadbd)
            with ThreadPoolExecutor(max(len(pending), 1)) as pool:
                errors = list(pool.map(lambda inst: self._wait_ready(inst, timeout), pending))
            failed = [(inst, err) for inst, err in zip(pending, errors, strict=True) if err is not None]
            if not failed:
                return
            retry = [inst for inst, err in failed if fresh_ports and _port_clash(inst)]
            if len(retry) != len(failed) or attempt == _PORT_ATTEMPTS:
                raise SandboxError("\n\n".join(err for _, err in failed if err is not None))
            ports = free_ports(len(retry))
            pending = [self._replace(inst, port=port) for inst, port in zip(retry, ports, strict=True)]
            self._write_state()

    def _spawn(self, inst: Instance, mariadbd: str) -> None:
        inst.tmpdir.mkdir(parents=True, exist_ok=True)
        cmd = [
            mariadbd,
            "--no-defaults",
            f"--datadir={inst.datadir}",
            f"--port={inst.port}",
            f"--socket={inst.socket_path}",
            f"--tmpdir={inst.tmpdir}",
            f"--server-id={inst.server_id}",
            f"--pid-file={inst.datadir / 'mariadbd.pid'}",
            f"--log-error={inst.error_log}",
            *_COMMON_SERVER_OPTIONS,
            *(_UPSTREAM_SERVER_OPTIONS if inst.role == "upstream" else ()),
            *self._server_options,
            *_user_option(),
        ]
        # A session of its own: Ctrl-C in the terminal that ran `sandbox up` must not reach it.
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        self._procs[inst.name] = proc
        self._pids[inst.name] = proc.pid
        # Record the pid before waiting, so a crash while waiting still leaves it findable.
        self._write_state()

    def _wait_ready(self, inst: Instance, timeout: float) -> str | None:
        """None when the server answers, else a message for SandboxError."""
        deadline = time.monotonic() + timeout
        pid = self._pids[inst.name]
        while time.monotonic() < deadline:
            if pid is None or not self._alive(inst.name, pid):
                return _failure(inst, "exited during startup")
            if inst.ping(timeout=1.0):
                return None
            time.sleep(0.05)
        return _failure(inst, f"did not answer SELECT 1 within {timeout:.0f} s")

    def _stop(self, name: str, timeout: float, *, graceful: bool) -> None:
        inst = self.instance(name)
        pid = self._pids.get(name)
        proc = self._procs.pop(name, None)
        if pid is not None and self._alive(name, pid, proc):
            if not graceful:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            _terminate([pid], timeout, [proc] if proc else [])
            if _pid_alive(pid):
                raise SandboxError(f"could not stop {name} (pid {pid}, port {inst.port})")
        self._pids[name] = None

    def _is_up(self, inst: Instance) -> bool:
        pid = self._pids.get(inst.name)
        if pid is None or not self._alive(inst.name, pid):
            self._pids[inst.name] = None
            return False
        # Alive but not yet answering: typically still starting, or shutting down. Give it a moment.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self._alive(inst.name, pid):
            if inst.ping():
                return True
            time.sleep(0.1)
        raise SandboxError(_failure(inst, f"runs as pid {pid} but does not answer SELECT 1"))

    def _alive(self, name: str, pid: int, proc: subprocess.Popen[bytes] | None = None) -> bool:
        proc = proc or self._procs.get(name)
        if proc is not None and proc.pid == pid:
            return proc.poll() is None
        # Not our child: check the pid still belongs to this server, not a recycled pid.
        inst = self._instances.get(name)
        return _pid_alive(pid) and (inst is None or _is_server_for(pid, inst.datadir))

    def _datadirs(self) -> list[Path]:
        dirs = {inst.datadir for inst in self._instances.values()}
        # Datadirs from a run whose state file is gone are recognised by their InnoDB files.
        dirs |= {p for p in self.root.iterdir() if p.is_dir() and (p / "ibdata1").exists()}
        return sorted(dirs)

    def _load_state(self) -> None:
        state = _read_state(self.state_file)
        if state is None:
            return
        instances: dict[str, Instance] = {}
        pids: dict[str, int | None] = {}
        for item in state["instances"]:
            item = dict(item)
            pids[item["name"]] = item.pop("pid", None)
            item["datadir"] = Path(item["datadir"])
            instances[item["name"]] = Instance(**item)
        self._instances, self._pids = instances, pids

    def _write_state(self) -> None:
        state = {
            "root": str(self.root),
            "server_options": list(self._server_options),
            "instances": [
                {**asdict(inst), "datadir": str(inst.datadir), "pid": self._pids.get(inst.name)}
                for inst in self._instances.values()
            ],
        }
        tmp = self.state_file.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.state_file)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # Serialises up/down/start/stop between processes, e.g. a test run and `sandbox down`.
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / LOCK_FILE, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


# -- helpers -----------------------------------------------------------------------------------


def _read_state(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise SandboxError(f"unreadable sandbox state {path}: {exc}") from exc


def _find_binary(name: str) -> str:
    search_path = os.pathsep.join([os.environ.get("PATH", ""), *_EXTRA_BIN_DIRS])
    found = shutil.which(name, path=search_path)
    if found is None:
        raise SandboxError(f"{name} not found; install MariaDB (`make setup` does it)")
    return found


def _user_option() -> list[str]:
    # mariadbd refuses to run as root unless told to; as anyone else the option is an error.
    return ["--user=root"] if os.geteuid() == 0 else []


def _is_initialized(datadir: Path) -> bool:
    return (datadir / ".initialized").exists()


def free_ports(count: int) -> list[int]:
    # Hold all sockets open together so the kernel hands out distinct ports.
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def _port_is_free(port: int) -> bool:
    # SO_REUSEADDR like mariadbd itself, so TIME_WAIT leftovers do not count as taken.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


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


def _server_version(inst: Instance) -> str | None:
    try:
        conn = inst.connect(connect_timeout=1, read_timeout=5)
    except pymysql.MySQLError:
        return None
    try:
        return server_version(conn)
    except pymysql.MySQLError:
        return None
    finally:
        conn.close()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Orphans are reaped by pid 1, which in some containers never does it: a zombie is dead.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.decode(errors="replace").split("\0")


def _is_server_for(pid: int, datadir: Path) -> bool:
    args = _cmdline(pid)
    if args is None:
        # No /proc (not Linux): trust the pid.
        return not Path("/proc/self").exists()
    return f"--datadir={datadir}" in args


def _servers_under(root: Path) -> list[int]:
    """Pids of mariadbd processes whose datadir lies under `root`."""
    prefix = f"--datadir={root}{os.sep}"
    pids = []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            args = _cmdline(int(entry.name))
            if args and any(arg.startswith(prefix) for arg in args) and _pid_alive(int(entry.name)):
                pids.append(int(entry.name))
    return pids


def _terminate(pids: list[int], timeout: float, procs: Iterable[subprocess.Popen[bytes]]) -> None:
    """SIGTERM, wait up to `timeout`, then SIGKILL whatever is left."""
    children = {proc.pid: proc for proc in procs}

    def alive(pid: int) -> bool:
        proc = children.get(pid)
        if proc is not None:
            return proc.poll() is None
        return _pid_alive(pid)

    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        for pid in pids:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not any(alive(pid) for pid in pids):
            return


def _start_watchdog(root: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    package_parent = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    # Its own session, so the Ctrl-C that interrupts the parent leaves it alive to clean up.
    return subprocess.Popen(
        [sys.executable, "-m", "replicator.sandbox", "--watch", str(os.getpid()), str(root)],
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def _watch(parent: int, root: Path) -> int:
    """Run by the watchdog process: once `parent` is gone, tear the sandbox down."""
    state_file = root / STATE_FILE
    while os.getppid() == parent and state_file.exists():
        time.sleep(0.5)
    if state_file.exists():
        Sandbox(root).down()
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--watch":
        sys.exit(_watch(int(sys.argv[2]), Path(sys.argv[3])))
    sys.exit(f"usage: {sys.argv[0]} --watch PARENT_PID ROOT")
