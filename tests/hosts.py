"""Test hosts on one machine (issue 75): a network namespace each (`ip netns`), joined to a
bridge by a veth pair, so what runs on two hosts talks over real TCP between two addresses.

A host's link taken down (its bridge end) partitions it: its packets are dropped, as a
network partition drops them (connections time out, nothing refuses them), and brought up
again it is healed. MariaDB servers run on hosts too (`HostServer`): `ip netns exec` runs
mariadbd in the host's namespace, listening on its address; the test's own process (in the
machine's namespace) reaches every host through the bridge's address.

Needs root (the sandbox's CI runs as root). Names carry the creating process's id: a
network left by a killed run is removed by the next one (`remove_stale`)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from replicator.sandbox.commands import find_binary, install_command, server_command
from replicator.sandbox.instance import Instance, Role, SandboxError
from replicator.sandbox.pids import pid_alive, terminate
from tests.tcp_proxy import Proxy

PREFIX = "smh"  # every name this module makes starts so (an interface name has 15 characters)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


@dataclass(frozen=True)
class Host:
    name: str
    netns: str
    address: str
    link: str  # the bridge's end of its veth pair: down, the host is cut off

    def argv(self, argv: list[str]) -> list[str]:
        """`argv` run on this host."""
        return ["ip", "netns", "exec", self.netns, *argv]


class Network:
    """Hosts on a bridge of their own, 10.<a>.<b>.0/24 (the bridge is .1)."""

    def __init__(self) -> None:
        remove_stale()
        pid = os.getpid()
        self.tag = f"{PREFIX}{pid}"
        self.subnet = f"10.{200 + pid % 50}.{pid // 50 % 250}"
        self.bridge = f"{self.tag}b"
        self.hosts: dict[str, Host] = {}
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")

    @property
    def gateway(self) -> str:
        """The bridge's address: the machine's own namespace as the hosts reach it."""
        return f"{self.subnet}.1"

    def host(self, name: str) -> Host:
        n = len(self.hosts) + 1
        netns, link = f"{self.tag}h{n}", f"{self.tag}v{n}"
        host = Host(name, netns, f"{self.subnet}.{10 + n}", link)
        _ip("netns", "add", netns)
        _ip("link", "add", link, "type", "veth", "peer", "name", f"{link}p")
        _ip("link", "set", f"{link}p", "netns", netns)
        _ip("-n", netns, "link", "set", f"{link}p", "name", "eth0")
        _ip("-n", netns, "addr", "add", f"{host.address}/24", "dev", "eth0")
        _ip("-n", netns, "link", "set", "eth0", "up")
        _ip("-n", netns, "link", "set", "lo", "up")
        _ip("link", "set", link, "master", self.bridge, "up")
        self.hosts[name] = host
        return host

    def cut(self, host: Host) -> None:
        """The host partitioned from every other and from the machine."""
        _ip("link", "set", host.link, "down")

    def heal(self, host: Host) -> None:
        """Linked again. (Its neighbours' addresses forgotten: those it failed to resolve
        while cut off are otherwise tried again only after a second or so.)"""
        _ip("link", "set", host.link, "up")
        _ip("-n", host.netns, "neigh", "flush", "all")

    def close(self) -> None:
        for host in self.hosts.values():
            _ip("netns", "del", host.netns, check=False)
            _ip("link", "del", host.link, check=False)
        _ip("link", "del", self.bridge, check=False)
        self.hosts.clear()

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def remove_stale() -> None:
    """Namespaces and links of runs whose process is gone."""
    dead = re.compile(rf"{PREFIX}(\d+)[hvb]")

    def gone(name: str) -> bool:
        found = dead.match(name)
        return found is not None and not pid_alive(int(found.group(1)))

    for line in _ip("netns", "list").stdout.splitlines():
        if line.split() and gone(line.split()[0]):
            _ip("netns", "del", line.split()[0], check=False)
    for name in re.findall(r"^\d+: ([^:@]+)", _ip("-o", "link").stdout, re.M):
        if gone(name):
            _ip("link", "del", name, check=False)


class HostServer:
    """A MariaDB server on a host, in `root/<name>`, listening on the host's address, root
    reachable from any address (the servers here are disposable)."""

    def __init__(self, host: Host, root: Path, name: str, role: Role, server_id: int, port: int = 3306):
        self.host = host
        self.instance = Instance(
            name=name, role=role, host=host.address, port=port, server_id=server_id, datadir=root / name
        )
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> None:
        inst = self.instance
        if not (inst.datadir / ".initialized").exists():
            shutil.rmtree(inst.datadir, ignore_errors=True)
            inst.datadir.mkdir(parents=True)
            inst.tmpdir.mkdir(parents=True, exist_ok=True)
            subprocess.run(install_command(inst, find_binary("mariadb-install-db")), capture_output=True, check=True)
            (inst.datadir / ".initialized").touch()
            first = True
        else:
            first = False
        argv = [*server_command(inst, find_binary("mariadbd"), ()), f"--bind-address={inst.host}"]
        self.proc = subprocess.Popen(
            self.host.argv(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while not inst.socket_path.exists() or not self._socket_answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = inst.error_log.read_text(errors="replace")[-2000:] if inst.error_log.exists() else ""
                raise SandboxError(f"{inst.name} on {self.host.name} did not start:\n{log}")
            time.sleep(0.1)
        if first:  # (through the socket, which is a file: any namespace reaches it)
            self._on_socket(
                "CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY ''; "
                "GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION; "
                "DELETE FROM mysql.global_priv WHERE User = ''; FLUSH PRIVILEGES"
            )

    def _socket_answers(self) -> bool:
        with contextlib.suppress(Exception):
            self._on_socket("SELECT 1")
            return True
        return False

    def _on_socket(self, sql: str) -> None:
        import pymysql
        from pymysql.constants import CLIENT

        conn = pymysql.connect(
            unix_socket=str(self.instance.socket_path), user="root", client_flag=CLIENT.MULTI_STATEMENTS,
            connect_timeout=2,
        )
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                while cur.nextset():
                    pass
        finally:
            conn.close()

    def stop(self, kill: bool = False) -> None:
        if self.proc is None:
            return
        pid = self.proc.pid
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        terminate([pid], 30.0, [self.proc])
        self.proc = None


def through_relays(task, network: Network, relays: list[Proxy]) -> Path:
    """The config of `task` (a `tests.replication.ReplicationTask`) as a daemon on a test host
    reads it: every server reached through a relay on the machine's address on the hosts'
    bridge (the sandbox's listen on 127.0.0.1); `relays` gets each, for the caller to close."""

    def relayed(found: re.Match) -> str:
        relay = Proxy(int(found.group(2)), bind=network.gateway)
        relays.append(relay)
        return f"host: {network.gateway}{found.group(1)}port: {relay.port}"

    text = re.sub(r"host: 127\.0\.0\.1(\n\s+)port: (\d+)", relayed, task.config_path.read_text())
    assert text.count(network.gateway) == 1 + len(task.sandbox.upstreams), text
    path = task.config_path.with_name(f"{task.name}-relayed.yaml")
    path.write_text(text)
    return path
