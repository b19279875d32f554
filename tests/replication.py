"""A replication task on the sandbox for end-to-end tests: shard tables on the two
upstreams, a task config, the daemon as a real process, and the check that the
downstream table equals the union of the shards, row for row, with the schema the
coordinator says."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pymysql

from lattice import materialize, render_table, table_from_data
from replicator.apply.inspect import read_table, with_server_choices
from replicator.apply.meta import Meta
from replicator.compare import (
    Sides,
    compare_shard,
    held_as_datetime,
    held_as_double,
    held_as_text,
    origin_filter,
    temporal,
)
from replicator.compiled import PURE
from replicator.config import load_config
from replicator.sandbox import Sandbox
from replicator.shard_id import ShardId

_tasks = itertools.count(1)
REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def admin_task(sandbox: Sandbox, workdir: Path, create: str, **kwargs) -> ReplicationTask:
    """A task whose daemon serves its admin API on a free port, at `task.addr`."""
    port = free_port()
    task = ReplicationTask(sandbox, workdir, create, admin=f"  port: {port}\n", **kwargs)
    task.addr = f"http://127.0.0.1:{port}"
    return task


class ReplicationTask:
    """Shards are (instance name, schema, table); all start from `create` (a CREATE
    TABLE with {table} in place of the name)."""

    def __init__(self, sandbox: Sandbox, workdir: Path, create: str, shards_per_server: int = 2,
                 extract: bool = True, options: str = "", admin: str = "", user: tuple[str, str] | None = None,
                 tls: str = "", table_glob: str = "orders_*"):
        """`tls`: a tls block (`{mode: ..., ca: ...}`) for every source and the target;
        `table_glob`: the route's tables (with `shards_per_server=0` the caller makes them)."""
        n = next(_tasks)
        self.sandbox = sandbox
        self.extract = extract
        self.workdir = workdir
        self.name = f"rep{n}_{os.getpid()}"
        self.target_db = f"merged_{self.name}"
        self.meta_schema = f"meta_{self.name}"
        self.shards: list[tuple[str, str, str]] = []
        for i, inst in enumerate(sandbox.upstreams, start=1):
            schema = f"{self.name}_db{i}"
            inst.execute([f"DROP DATABASE IF EXISTS `{schema}`", f"CREATE DATABASE `{schema}`"])
            for j in range(shards_per_server):
                table = f"orders_{i}{j}"
                inst.execute(create.format(table=f"`{schema}`.`{table}`"))
                self.shards.append((inst.name, schema, table))
        login = (f"    user: {user[0]}\n    password_env: {user[1]}\n" if user
                 else "    user: root\n    password: \"\"\n") + (f"    tls: {tls}\n" if tls else "")
        sources = "".join(
            f"  - id: s{i}\n    host: 127.0.0.1\n    port: {inst.port}\n{login}"
            f"    server_id: {7000 + 10 * n + i}\n"
            for i, inst in enumerate(sandbox.upstreams, start=1)
        )
        extract_block = ("    extract:\n      source: _source\n      schema: _schema\n      table: _table\n"
                         if extract else "")
        self.config_path = workdir / f"{self.name}.yaml"
        self.config_path.write_text(
            f"task: {self.name}\nsources:\n{sources}"
            f"target:\n  host: 127.0.0.1\n  port: {sandbox.downstream.port}\n{login.replace('    ', '  ')}"
            f"  flavor: mariadb\n  meta_schema: {self.meta_schema}\n"
            f"routes:\n  - schema: \"{self.name}_db*\"\n    table: \"{table_glob}\"\n    target: {self.target_db}.orders\n"
            f"{extract_block}"
            f"options:\n  workers: 3\n  batch_size: 50\n  heartbeat: 1\n  max_backoff: 2\n{options}"
            + "admin:\n" + (admin or "  port: 0\n")  # daemons run side by side: no fixed port
        )
        self.config = load_config(self.config_path)
        self.process: subprocess.Popen | None = None
        self.log = workdir / f"{self.name}.log"
        self.pure = False  # its daemons' row path as Python, not compiled (replicator/compiled.py)

    def source_of(self, instance: str) -> str:
        return f"s{[i.name for i in self.sandbox.upstreams].index(instance) + 1}"

    def shard_id(self, shard: tuple[str, str, str]) -> ShardId:
        return ShardId(self.source_of(shard[0]), shard[1], shard[2])

    def sql(self, shard: tuple[str, str, str], statement: str) -> list[tuple]:
        """Run a statement on a shard; {t} stands for its qualified table name."""
        inst = self.sandbox.instance(shard[0])
        return inst.execute(statement.format(t=f"`{shard[1]}`.`{shard[2]}`"))

    # -- the daemon ------------------------------------------------------------------------
    def start(
        self, crash_at: str | None = None, wait: bool = True, group: bool = False, timeout: float = 60,
        command: tuple[str, ...] = ("run", "--config"), fault_at: str | None = None,
    ) -> subprocess.Popen:
        """Start the daemon; unless told not to, wait until it reads the binlogs (its
        first start takes the binlog position of that moment). With `group` it leads a
        process group of its own (its workers with it), which `kill(group=True)` ends.
        `command`: the `shardmerge` command and flag the config path follows; `fault_at`: a
        fault point to pass (`replicator.faults.fault_point`)."""
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env.pop(PURE, None)
        if self.pure:
            env[PURE] = "1"
        env.pop("SHARDMERGE_CRASH_AT", None)
        if crash_at:
            env["SHARDMERGE_CRASH_AT"] = crash_at
        env.pop("SHARDMERGE_FAULT_AT", None)
        if fault_at:  # (replicator/faults.py: fault_point)
            env["SHARDMERGE_FAULT_AT"] = fault_at
        out = self.log.open("a")
        runs = self.log_text().count(" running: ")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "replicator.cli.shardmerge", *command, str(self.config_path)],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=group,
        )
        if wait:
            self.wait_for(lambda: self.log_text().count(" running: ") > runs or self.process.poll() is not None,
                          timeout=timeout, what="the daemon to start")
        return self.process

    def crash_and_recover(self, crash_at: str, story: Callable[[], object]) -> None:
        """Run `story` (writes upstream) while the daemon kills itself at `crash_at`; start
        it again: the downstream must come in sync and the daemon stop cleanly."""
        self.start(crash_at=crash_at)
        writer = threading.Thread(target=story)
        writer.start()
        code = self.wait_exit(timeout=60)
        writer.join()
        assert code == -9, f"the daemon did not crash at {crash_at}:\n{self.log_text()[-3000:]}"
        self.start()
        self.wait_in_sync(timeout=90)
        assert self.stop() == 0

    def stop(self, timeout: float = 60) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=timeout)
        self.process = None
        return code

    def kill(self, group: bool = False) -> None:
        """SIGKILL the daemon; with `group`, its whole process group (workers too), as a
        supervisor that kills a service's cgroup does."""
        assert self.process is not None
        if group:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        else:
            self.process.kill()
        self.process.wait(timeout=30)
        if not group:
            self._reap_workers()
        self.process = None

    def wait_exit(self, timeout: float) -> int | None:
        assert self.process is not None
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reap_workers()
        self.process = None
        return code

    def _reap_workers(self) -> None:
        """A SIGKILLed daemon leaves its worker processes; they notice the closed pipe
        and exit, but give them a moment so the next daemon's server ids are free."""
        time.sleep(0.5)

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    # -- checks --------------------------------------------------------------------------------
    def meta(self) -> Meta:
        from replicator.servers import connect_downstream

        down = self.config.target.connection_kwargs()
        return Meta(lambda: connect_downstream(down), self.meta_schema, self.name)

    def coordinator_table(self):
        stored = self.meta().groups.load(f"{self.target_db}.orders")
        return table_from_data(stored.meta["target"]) if stored and stored.meta.get("target") else None

    def upstream_join(self):
        """The join of the shards as they are now (before a daemon has kept one)."""
        from replicator.source.routing import Router
        from replicator.spark.shards import groups, snapshot

        router = Router.from_config(self.config)
        (group,) = groups(self.config, router, [snapshot(s, router) for s in self.config.sources])
        return group.joined

    def downstream_table(self):
        with self.sandbox.downstream.connect() as conn:
            try:
                return read_table(conn, self.target_db, "orders")
            except LookupError:
                return None

    def difference(self) -> str | None:
        """None when downstream equals the union of the shards; else what differs."""
        if not self.extract:
            return self.union_difference()
        down = self.sandbox.downstream
        actual_table = self.downstream_table()
        if actual_table is None:
            return "no downstream table"
        target = self.coordinator_table() or self.upstream_join()
        expected_table = with_server_choices(materialize(target, "mariadb"), actual_table)
        if actual_table != expected_table:
            return f"schema differs:\n{render_table(actual_table)}\nexpected\n{render_table(expected_table)}"
        extract = {"source": "_source", "schema": "_schema", "table": "_table"}
        for shard in self.shards:
            inst = self.sandbox.instance(shard[0])
            with inst.connect() as conn:
                upstream = read_table(conn, shard[1], shard[2])
            where = origin_filter(extract if actual_table.column("_source") else {}, self.shard_id(shard))
            result = compare_shard(
                self.shard_id(shard),
                [c.name for c in upstream.columns if c.generated is None],
                Sides(
                    inst.execute,
                    f"`{shard[1]}`.`{shard[2]}`",
                    down.execute,
                    f"`{self.target_db}`.orders",
                    where,
                    errors=(pymysql.err.MySQLError,),  # downstream behind: a column not there yet
                    as_text=held_as_text(upstream, actual_table),
                    as_float=held_as_double(upstream, actual_table),
                    zero_dates=temporal(upstream),
                    as_datetime=held_as_datetime(upstream, actual_table),
                ),
            )
            if not result.equal:
                return result.describe()
        return None

    def union_difference(self) -> str | None:
        """Without extract columns a downstream row says not which shard it came from:
        downstream must hold the rows of all shards together, once each, in the columns
        every shard and the downstream table have (by name)."""
        down = self.sandbox.downstream
        actual = self.downstream_table()
        if actual is None:
            return "no downstream table"
        names = {c.key for c in actual.columns if c.generated is None}
        tables = []
        for shard in self.shards:
            with self.sandbox.instance(shard[0]).connect() as conn:
                tables.append(read_table(conn, shard[1], shard[2]))
        for table in tables:
            names &= {c.key for c in table.columns if c.generated is None}
        columns = ", ".join(f"`{n}`" for n in sorted(names))
        upstream = sorted(row for shard in self.shards for row in self.sql(shard, f"SELECT {columns} FROM {{t}}"))
        try:
            downstream = sorted(down.execute(f"SELECT {columns} FROM `{self.target_db}`.orders"))
        except pymysql.err.MySQLError as exc:
            return f"downstream not readable yet: {exc}"
        if upstream == downstream:
            return None
        missing = sorted(set(upstream) - set(downstream))[:3]
        extra = sorted(set(downstream) - set(upstream))[:3]
        return (f"{len(upstream)} rows upstream, {len(downstream)} downstream in ({columns}); "
                f"missing {missing} extra {extra}")

    def wait_in_sync(self, timeout: float = 60, settle: float = 1.0) -> None:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.difference()
            if last is None:
                time.sleep(settle)  # and stays so: nothing more arrives
                last = self.difference()
                if last is None:
                    return
            time.sleep(0.5)
        raise AssertionError(f"not in sync after {timeout}s: {last}\n--- daemon log ---\n{self.log_text()[-4000:]}")

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 30, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}\n--- daemon log ---\n{self.log_text()[-4000:]}")

    def cleanup(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
        for inst in self.sandbox.upstreams:
            for schema in {s[1] for s in self.shards if s[0] == inst.name}:
                inst.execute(f"DROP DATABASE IF EXISTS `{schema}`")
        self.sandbox.downstream.execute([f"DROP DATABASE IF EXISTS `{self.target_db}`",
                                         f"DROP DATABASE IF EXISTS `{self.meta_schema}`"])


class SideDaemon:
    """Another daemon of a task (a standby, a member), in a process group of its own,
    logging apart: `shardmerge run` with `args` before its config."""

    def __init__(self, task: ReplicationTask, name: str, args: tuple[str, ...] = (), config: Path | None = None,
                 on: Callable[[list[str]], list[str]] | None = None, env: dict[str, str] | None = None):
        """`on`: what runs a command where the daemon runs (a test host's `argv`); `env`: more
        of its environment (a crash point, say)."""
        self.name = name
        self.log = Path(task.workdir) / f"{name}.log"
        argv = [sys.executable, "-m", "replicator.cli.shardmerge", "run", *args, "--config",
                str(config or task.config_path)]
        self.process = subprocess.Popen(
            on(argv) if on is not None else argv,
            stdout=self.log.open("a"),
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
            cwd=REPO,
            start_new_session=True,
        )

    def text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def wait_for(self, words: str, timeout: float, count: int = 1) -> float:
        """Seconds until its log says `words` (`count` times)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.text().count(words) >= count:
                return time.monotonic() - started
            assert self.process.poll() is None, f"the {self.name} ended:\n{self.text()[-3000:]}"
            time.sleep(0.1)
        raise AssertionError(f"the {self.name}'s log never said {words!r} ({count}x):\n{self.text()[-3000:]}")

    def wait_for_match(self, pattern: str, timeout: float, accept: Callable[[re.Match], bool]) -> re.Match:
        """The first match of `pattern` in its log that `accept` takes, waited for."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            found = next((m for m in re.finditer(pattern, self.text()) if accept(m)), None)
            if found is not None:
                return found
            assert self.process.poll() is None, f"the {self.name} ended:\n{self.text()[-3000:]}"
            time.sleep(0.1)
        raise AssertionError(f"the {self.name}'s log never matched {pattern!r}:\n{self.text()[-3000:]}")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
