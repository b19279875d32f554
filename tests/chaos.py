"""Chaos run: random shard traffic and shard DDLs while the daemon's whole process
group is SIGKILLed again and again, with binlogs rotating every few transactions.

Eight shard tables (four on each of two upstreams; `--upstreams` for more) merge into one target with
extract columns; or, with `row_events`, without them (each shard's ids its own), no
safe mode after a crash, so that shard row events are applied as the binlog holds
them wherever a shard's table and the target match (`replicator.source.row_events`),
decoded rows elsewhere, both in every run. One writer per shard runs random transactions (inserts, updates,
updates that move the primary key, deletes) at about six a second, and at random
moments the seven compatible ALTERs of `ALTERS`, in an order of its own. Meanwhile
the daemon is killed every few seconds and started again. At the end the writers
stop, the daemon catches up (no more kills) and every shard is compared row by row,
by key, with its rows downstream: lost, extra and different rows, and the schema
(downstream = the coordinator's joined table = the join of the shards now).

    python -m tests.chaos --seed 7 --duration 600 --kills 150     # `make chaos`
    python -m tests.chaos --seed 7 --row-events                    # `make chaos ROW_EVENTS=1`
    python -m tests.chaos --seed 7 --standby                       # `make chaos STANDBY=1`
    python -m tests.chaos --seed 7 --members 3                     # `make chaos MEMBERS=3`
    python -m tests.chaos --seed 7 --members 4 --partitions        # `make chaos MEMBERS=4 PARTITIONS=1`

With `standby`, two daemons run the task (docs/operations/high-availability.md): each kill goes to the
one holding the lease, the other takes over, the killed one comes back as the standby. With
`members`, that many daemons run the task as its members (issue 75): each kill goes to one of
them at random, which starts again at once. With `partitions` too, each member runs on a test
host of its own (a network namespace, tests/hosts.py), reaching the servers through relays, and
one strike in four cuts a member's host off from every server for one to three lease times
instead of killing it, then heals it (it must commit nothing once its sources are taken).

With extract columns, the events' rows go as they are with their extract values appended
only for events of 8 rows or more and outside safe mode; the run's events hold 1 to 3 rows.
To kill the daemon among such events, take every event so and no safe mode:

    SHARDMERGE_EXTEND_MIN_ROWS=1 CHAOS_OPTIONS='  safe_mode_window: 0
    ' python -m tests.chaos --seed 7

`run_chaos` is also what the fixed-seed test in `tests/daemon/test_chaos.py` calls.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path

import pymysql

from lattice import quote_identifier
from replicator.compare import KeyedComparison, origin_filter
from replicator.daemon.row_path import UNEXPLAINED_DROP
from replicator.sandbox import Sandbox
from tests.fault_menu import STANDBY_KINDS, Menu, Strikes, parse_faults
from tests.hosts import Host, Network, through_relays
from tests.replication import REPO, ReplicationTask
from tests.traffic import (
    Counts,
    Kills,
    RowTotals,
    ShardTraffic,
    compare_rows,
    downstream_problem,
    join_problem,
    kill_and_restart,
    kill_at,
    merged_table,
    unexplained_drops,
    wait_caught_up,
)

CREATE = (
    "CREATE TABLE {table} (id INT NOT NULL PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, "
    "v VARCHAR(40) NOT NULL DEFAULT '', note VARCHAR(20) NULL, legacy INT NULL, "
    "created DATETIME NOT NULL DEFAULT '2026-01-01 00:00:00') DEFAULT CHARSET=utf8mb4"
)
# Compatible in every order: each shard runs all of them, each in its own order.
ALTERS = {
    "add_nullable": "ALTER TABLE {t} ADD COLUMN c_null INT NULL",
    "add_not_null_default": "ALTER TABLE {t} ADD COLUMN c_flag TINYINT NOT NULL DEFAULT 1",
    "widen_varchar": "ALTER TABLE {t} MODIFY v VARCHAR(80) NOT NULL DEFAULT ''",
    "widen_decimal": "ALTER TABLE {t} MODIFY amount DECIMAL(14,4) NOT NULL",
    "add_index": "ALTER TABLE {t} ADD INDEX by_created (created)",
    "drop_column": "ALTER TABLE {t} DROP COLUMN legacy",
    "rename_column": "ALTER TABLE {t} RENAME COLUMN note TO remark",
}
ROTATE_AT = 4096  # max_binlog_size: the smallest the server takes
EXTRACT = {"source": "_source", "schema": "_schema", "table": "_table"}
IDS_PER_SHARD = 10_000_000  # without extract columns each shard's ids are its own


@dataclass
class ChaosReport(RowTotals):
    seed: int
    duration: float
    kills: int
    counts: Counts
    shards: list[KeyedComparison] = field(default_factory=list)
    schema_problem: str | None = None
    caught_up: bool = False
    seconds: float = 0.0
    unexplained: int = 0  # row events a worker dropped unexplained (`unexplained_drops`)
    strikes: Strikes | None = None  # with a fault menu (`--faults`): what its faults did
    crashes: list[str] = field(default_factory=list)  # the daemon exited by itself (with a menu)

    @property
    def ok(self) -> bool:
        return (self.caught_up and self.schema_problem is None and all(s.equal for s in self.shards)
                and self.unexplained == 0 and not self.crashes
                and (self.strikes is None or not self.strikes.problems))

    def summary(self) -> str:
        lines = [
            f"chaos seed={self.seed} duration={self.duration:.0f}s kills={self.kills} "
            f"transactions={self.counts.transactions} inserts={self.counts.inserts} "
            f"updates={self.counts.updates} key_moves={self.counts.key_moves} "
            f"deletes={self.counts.deletes} ddls={self.counts.ddls}",
            f"result: lost={self.lost} extra={self.extra} different={self.different} "
            f"schema={'equal' if self.schema_problem is None else 'DIFFERENT'} "
            f"caught_up={self.caught_up} unexplained_drops={self.unexplained} wall={self.seconds:.0f}s "
            f"-> {'OK' if self.ok else 'FAILED'}",
        ]
        if self.strikes is not None:
            lines.insert(1, self.strikes.summary())
            lines += [f"  fault: {p}" for p in self.strikes.problems]
        lines += [f"  crash: {c}" for c in self.crashes]
        lines += [f"  {s.describe()}" for s in self.shards if not s.equal]
        if self.schema_problem:
            lines.append(f"  {self.schema_problem}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {
            "seed": self.seed,
            "duration": self.duration,
            "kills": self.kills,
            "counts": asdict(self.counts),
            "lost": self.lost,
            "extra": self.extra,
            "different": self.different,
            "schema_equal": self.schema_problem is None,
            "caught_up": self.caught_up,
            "unexplained_drops": self.unexplained,
            "seconds": round(self.seconds, 1),
            "faults": dict(self.strikes.counts) if self.strikes is not None else {"kill": self.kills},
            "fault_problems": self.strikes.problems if self.strikes is not None else [],
            "takeovers": [round(t, 1) for t in self.strikes.takeovers] if self.strikes is not None else [],
            "crashes": self.crashes,
            "ok": self.ok,
        }


class ShardWriter(ShardTraffic):
    """One shard's traffic (`ShardTraffic`), and its ALTERs at its own moments."""

    reconnects = True  # (a fault menu restarts the upstreams)

    def __init__(self, task: ReplicationTask, shard, seed: int, duration: float, counts: Counts,
                 lock: threading.Lock, stop: threading.Event, first_id: int = 1, alters: bool = True):
        inst = task.sandbox.instance(shard[0])
        super().__init__(f"writer-{shard[2]}", f"{quote_identifier(shard[1])}.{quote_identifier(shard[2])}",
                         lambda: inst.connect(shard[1], autocommit=False), random.Random(seed),
                         counts, lock, stop, first_id)
        self.duration = duration
        self.instance = shard[0]
        order = list(ALTERS)
        self.random.shuffle(order)
        moments = sorted(self.random.uniform(0.05, 0.85) * duration for _ in order)
        self.schedule = list(zip(moments, order, strict=True))
        self.done: set[str] = set()
        self.started = time.monotonic()

    def step(self, conn) -> bool:
        elapsed = time.monotonic() - self.started
        if elapsed >= self.duration:
            return False
        if self.schedule and self.schedule[0][0] <= elapsed:
            self._alter(conn, self.schedule[0][1])
            self.schedule.pop(0)  # (after it ran: one its connection lost runs again)
        else:
            self.transaction(conn)
        return True

    def finish(self, conn) -> None:
        while self.schedule:  # a short run still runs every ALTER
            self._alter(conn, self.schedule[0][1])
            self.schedule.pop(0)

    def _alter(self, conn, name: str) -> None:
        with self.guard, conn.cursor() as cur:  # (`guard`: no upstream restart meanwhile)
            cur.execute(ALTERS[name].format(t=self.table))
        self.done.add(name)
        with self.lock:
            self.counts.ddls += 1

    def values(self, row_id: int | None) -> dict[str, str]:
        r = self.random
        wide_v = "widen_varchar" in self.done
        wide_amount = "widen_decimal" in self.done
        amount = Decimal(r.randint(0, 10**9 if wide_amount else 10**7)) / (10000 if wide_amount else 100)
        text = "".join(r.choice("abcdefghij") for _ in range(r.randint(0, 80 if wide_v else 40)))
        values = {"amount": f"'{amount}'", "v": f"'{text}'"}
        note = "remark" if "rename_column" in self.done else "note"
        values[note] = "NULL" if r.random() < 0.2 else f"'n{r.randint(0, 999)}'"
        if "drop_column" not in self.done:
            values["legacy"] = "NULL" if r.random() < 0.3 else str(r.randint(-1000, 1000))
        if "add_nullable" in self.done and r.random() < 0.7:
            values["c_null"] = "NULL" if r.random() < 0.3 else str(r.randint(0, 99))
        if "add_not_null_default" in self.done and r.random() < 0.7:
            values["c_flag"] = str(r.randint(0, 5))
        if r.random() < 0.3:
            values["created"] = f"'2026-{r.randint(1, 12):02d}-{r.randint(1, 28):02d} 10:00:00'"
        return values


# -- the run ------------------------------------------------------------------------------------
def run_chaos(
    sandbox: Sandbox,
    workdir: Path,
    seed: int,
    duration: float,
    kills: int,
    catch_up: float = 120.0,
    log=print,
    row_events: bool = False,
    standby: bool = False,
    faults: tuple[str, ...] | None = None,
    members: int = 0,
    partitions: bool = False,
) -> ChaosReport:
    started = time.monotonic()
    rng = random.Random(seed)
    saved = {inst.name: inst.execute("SELECT @@GLOBAL.max_binlog_size")[0][0] for inst in sandbox.upstreams}
    for inst in sandbox.upstreams:
        inst.execute(f"SET GLOBAL max_binlog_size = {ROTATE_AT}")
    # CHAOS_OPTIONS adds task options in either mode (with extract columns, `safe_mode_window: 0`
    # keeps their row events going as they are, values appended, between the kills)
    options = ("  safe_mode_window: 0\n" if row_events else "") + os.environ.get("CHAOS_OPTIONS", "")
    if members:
        options += "  lease_ttl: 3\n"
    task = ReplicationTask(sandbox, workdir, CREATE, shards_per_server=4, extract=not row_events, options=options)
    counts, lock, stop = Counts(), threading.Lock(), threading.Event()
    report = ChaosReport(seed, duration, 0, counts)
    standby = standby or bool(faults and STANDBY_KINDS & set(faults))
    pair = Pair(task) if standby or faults else None
    network = Network() if members and partitions else None
    crew = Members(task, members, random.Random(rng.randrange(2**32)), network) if members else None
    try:
        if crew is not None:
            crew.start()
        else:
            task.start(group=True)
        if pair is not None and standby:
            pair.start()
        writers = [
            ShardWriter(task, shard, rng.randrange(2**32), duration, counts, lock, stop,
                        first_id=1 + (k * IDS_PER_SHARD if row_events else 0))
            for k, shard in enumerate(task.shards)
        ]
        for writer in writers:
            writer.start()
        # `kills` kills, one at a random moment in each of `kills` equal slices of the run
        # (so from half to one and a half slices apart)
        slice_ = duration / max(kills, 1)
        killed = Kills()

        def progress(k: Kills) -> None:
            report.kills = k.kills
            if k.kills % 10 == 0:
                log(f"  {k.kills} kills, {counts.transactions} transactions, {counts.ddls} DDLs")

        moments = [(i + rng.uniform(0.25, 0.75)) * slice_ for i in range(kills)]
        strike = pair.kill_active if pair is not None else crew.kill_one if crew is not None else None
        if faults:
            guards: dict[str, list[threading.Lock]] = {}
            for writer in writers:
                guards.setdefault(writer.instance, []).append(writer.guard)
            menu = Menu(task, pair, guards, random.Random(rng.randrange(2**32)), faults, log)
            report.strikes, strike = menu.strikes, menu.strike
        kill_at(task, moments, killed, log=progress, kill=strike)
        report.crashes = list(killed.crashes or []) if faults else []
        for writer in writers:
            writer.join()
        failed = [w.error for w in writers if w.error]
        if failed:
            raise RuntimeError("a writer failed: " + "; ".join(failed))
        if pair is not None:
            pair.stop()
        if crew is not None:
            crew.revive()  # (every member running, no more kills: they catch up)
            cut = f", {crew.partitions} partitioned and healed" if network is not None else ""
            log(f"  crew: {crew.joined} joined, {crew.left} left cleanly, {crew.removed} removed{cut}")
        else:
            task.kill(group=True)
            task.start(group=True)  # and no more kills: let it catch up
        report.caught_up = wait_caught_up(task, catch_up)
        report.shards = compare_shards(task)
        report.schema_problem = schema_problem(task)
        report.unexplained = unexplained_drops(task) + (crew.unexplained() if crew is not None else 0)
        if report.ok:
            if crew is not None:
                assert crew.stop() == [0] * members, "a member did not stop cleanly"
            else:
                assert task.stop() == 0, "the daemon did not stop cleanly"
    finally:
        report.seconds = time.monotonic() - started
        stop.set()
        if pair is not None:
            pair.stop()
        if crew is not None:
            crew.kill_all()
        if network is not None:
            network.close()
        if task.process is not None:
            task.kill(group=True)
        for name, size in saved.items():
            sandbox.instance(name).execute(f"SET GLOBAL max_binlog_size = {size}")
        if report.ok:
            task.cleanup()
    return report


class Pair:
    """The task's second daemon (`--standby`): each kill goes to whichever of the two holds
    the task's lease, the other takes over, and the killed one comes back as the standby."""

    def __init__(self, task: ReplicationTask):
        self.task = task
        self.other: subprocess.Popen | None = None

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.other = subprocess.Popen(
            [sys.executable, "-m", "replicator.cli.shardmerge", "run", "--config", str(self.task.config_path)],
            stdout=self.task.log.open("a"), stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True,
        )

    def active_pid(self) -> int | None:
        """The pid of the daemon holding the lease (None: none, or the downstream is down)."""
        try:
            rows = self.task.sandbox.downstream.execute(
                f"SELECT holder FROM `{self.task.meta_schema}`.lease WHERE task = '{self.task.name}'"
            )
        except pymysql.err.MySQLError:
            return None
        pid = str(rows[0][0]).split(":")[1] if rows else ""
        return int(pid) if pid.isdigit() else None

    def kill_active(self, kills: Kills) -> None:
        other = self.other
        if other is not None and other.pid == self.active_pid():
            if other.poll() is not None:
                kills.crashes = [*(kills.crashes or []), f"exit status {other.returncode} before kill {kills.kills + 1}"]
            self.stop()
            kills.kills += 1
            self.start()
        else:
            kill_and_restart(self.task, kills)

    def process(self, pid: int) -> subprocess.Popen | None:
        return next((p for p in (self.task.process, self.other) if p is not None and p.pid == pid), None)

    def revive(self) -> int:
        """Start again, as the standby, each daemon that exited 4 by itself (its lease was
        taken while the downstream kept it from renewing: it ends, as a supervisor would
        start it again, docs/operations/high-availability.md); how many."""
        revived = 0
        if self.task.process is not None and self.task.process.poll() == 4:
            self.task.start(wait=False, group=True)
            revived += 1
        if self.other is not None and self.other.poll() == 4:
            self.stop()
            self.start()
            revived += 1
        return revived

    def running(self, pid: int) -> bool:
        process = self.process(pid)
        return process is not None and process.poll() is None

    def dump_others(self, pid: int) -> None:
        """SIGUSR1 to the daemons other than `pid`: their threads' stacks go to the log."""
        for process in (self.task.process, self.other):
            if process is not None and process.pid != pid and process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGUSR1)

    def wait_exit(self, pid: int, timeout: float) -> int | None:
        """The exit status of the daemon `pid` (None: still running after `timeout`)."""
        process = self.process(pid)
        if process is None:
            return None
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def restart(self, pid: int) -> None:
        """Start the daemon `pid` was again (killed first if it still runs), as the standby."""
        if self.other is not None and self.other.pid == pid:
            self.stop()
            self.start()
        elif self.task.process is not None and self.task.process.pid == pid:
            if self.task.process.poll() is None:
                self.task.kill(group=True)
            self.task.start(wait=False, group=True)

    def stop(self) -> None:
        if self.other is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.other.pid, signal.SIGKILL)
            self.other.wait(timeout=30)
            self.other = None


class Members:
    """`--members N`: N daemons run the task as its members (issue 75), each in a process
    group of its own, logging apart; each kill goes to one of them at random (a SIGKILL of its
    group), which is started again at once under its name. One kill in four is a change of
    the crew instead: the member is stopped (SIGTERM: it leaves) or killed, and a member of a
    new name joins in its place (it takes sources from the busiest); the one gone is removed
    (`Members.remove`, what `shardctl members remove` runs) once its row expired."""

    CHURN = 0.25

    PARTITION = 0.25  # (of the strikes, with a network)
    TTL = 3.0  # (the task's lease_ttl in a run with members)

    def __init__(self, task: ReplicationTask, n: int, rng: random.Random, network: Network | None = None):
        """`network`: each member on a host of its own there, which a strike may cut off."""
        self.task, self.rng, self.network = task, rng, network
        self.names = [chr(ord("a") + i) for i in range(n)]
        self.processes: dict[str, subprocess.Popen] = {}
        self.gone: list[str] = []  # members left or killed for good, not removed yet
        self.joined = self.left = self.removed = self.partitions = 0
        self.relays: list = []
        self.config = through_relays(task, network, self.relays) if network is not None else task.config_path
        self.hosts: dict[str, Host] = {}
        self.cut: dict[str, threading.Timer] = {}  # members cut off now, each healed by its timer
        self._cut_lock = threading.Lock()

    def start(self) -> None:
        for name in self.names:
            self._spawn(name)
        # (the first to run coordinates; the others read their sources a second later)
        self.task.wait_for(lambda: self._running() > 0, timeout=60, what="a member to start")

    def _running(self) -> int:
        return sum(self._log(n).read_text().count(" running: ") > 0 for n in self.names if self._log(n).exists())

    def _log(self, name: str) -> Path:
        return Path(self.task.workdir) / f"member-{name}.log"

    def _spawn(self, name: str) -> None:
        argv = [sys.executable, "-m", "replicator.cli.shardmerge", "run", "--member", name, "--config",
                str(self.config)]
        if self.network is not None:
            if name not in self.hosts:
                self.hosts[name] = self.network.host(name)
            argv = self.hosts[name].argv(argv)
        self.processes[name] = subprocess.Popen(
            argv, stdout=self._log(name).open("a"), stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )

    def kill_one(self, kills: Kills) -> None:
        self._remove_gone()
        if self.network is not None and self.rng.random() < self.PARTITION and self._partition(kills):
            return
        name = self.rng.choice(self.names)
        process = self.processes[name]
        code = process.poll()
        if code is not None:
            kills.crashes = [*(kills.crashes or []), f"member {name}: exit status {code} before kill {kills.kills + 1}"]
        churn = self.rng.random() < self.CHURN
        if churn and self.rng.random() < 0.5 and code is None:
            process.send_signal(signal.SIGTERM)  # (it leaves: its sources go to the others at once)
            try:
                left = process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                left = None
            if left != 0:
                kills.crashes = [*(kills.crashes or []), f"member {name}: stopped with {left}, not 0"]
            self.left += 1
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        kills.kills += 1
        if not churn:
            self._spawn(name)
            return
        new = chr(ord("a") + len(self.processes))
        self.names[self.names.index(name)] = new
        self.gone.append(name)
        self.joined += 1
        self._spawn(new)

    def _partition(self, kills: Kills) -> bool:
        """A member's host cut off from every server (its sessions hang, nothing refuses them),
        healed one to three lease times later: within the first its sources go to others. False
        where every member is cut off already (the strike kills one instead)."""
        with self._cut_lock:
            whole = [n for n in self.names if n not in self.cut]
            if not whole:
                return False
            name = self.rng.choice(whole)
            self.network.cut(self.hosts[name])
            timer = threading.Timer(self.rng.uniform(self.TTL, 3 * self.TTL), self._heal, (name,))
            self.cut[name] = timer
        timer.daemon = True
        timer.start()
        self.partitions += 1
        kills.kills += 1
        return True

    def _heal(self, name: str) -> None:
        with self._cut_lock:
            if self.cut.pop(name, None) is not None:
                self.network.heal(self.hosts[name])

    def heal_all(self) -> None:
        with self._cut_lock:
            cut, self.cut = self.cut, {}
            for name, timer in cut.items():
                timer.cancel()
                self.network.heal(self.hosts[name])

    def _remove_gone(self) -> None:
        """The members gone whose rows expired forgotten, as the operator would."""
        if not self.gone:
            return
        members = self.task.meta().members
        try:
            removed = [name for name in self.gone if members.remove(name)]
        finally:
            members.db.close()
        self.gone = [name for name in self.gone if name not in removed]
        self.removed += len(removed)

    def unexplained(self) -> int:
        return sum(
            self._log(n).read_text().count(UNEXPLAINED_DROP) for n in self.processes if self._log(n).exists()
        )

    def revive(self) -> None:
        if self.network is not None:
            self.heal_all()
        for name in self.names:
            if self.processes[name].poll() is not None:
                self._spawn(name)

    def stop(self) -> list[int]:
        for name in self.names:
            self.processes[name].send_signal(signal.SIGTERM)
        return [self.processes[name].wait(timeout=60) for name in self.names]

    def kill_all(self) -> None:
        if self.network is not None:
            self.heal_all()
        for process in self.processes.values():
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
        for relay in self.relays:
            relay.close()


def compare_shards(task: ReplicationTask) -> list[KeyedComparison]:
    merged = merged_table(task)
    return [
        compare_rows(task, shard, origin_filter(EXTRACT, task.shard_id(shard)) if task.extract
                     else f"`id` BETWEEN {k * IDS_PER_SHARD + 1} AND {(k + 1) * IDS_PER_SHARD}", merged=merged)
        for k, shard in enumerate(task.shards)
    ]


def schema_problem(task: ReplicationTask) -> str | None:
    """None when downstream = the coordinator's joined table = the join of the shards now."""
    return downstream_problem(task) or join_problem(task)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    parser.add_argument("--duration", type=float, default=240.0, help="seconds of traffic (default 240)")
    parser.add_argument("--kills", type=int, default=None, help="SIGKILLs over the run (default duration/4)")
    parser.add_argument("--catch-up", type=float, default=180.0, help="seconds allowed to catch up at the end")
    parser.add_argument("--dir", default=None, help="sandbox and logs (default: a new temporary folder)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON too")
    parser.add_argument("--keep", action="store_true", help="leave the sandbox running after a failed run")
    parser.add_argument("--members", type=int, default=0,
                        help="N daemons run the task as its members (issue 75); each kill goes to one")
    parser.add_argument("--partitions", action="store_true",
                        help="with --members: each member on a test host; some strikes cut one off, then heal it")
    parser.add_argument("--standby", action="store_true",
                        help="two daemons of the task: each kill goes to whichever runs it")
    parser.add_argument("--upstreams", type=int, default=2,
                        help="upstream servers, four shard tables on each (default 2)")
    parser.add_argument("--row-events", action="store_true",
                        help="no extract columns and no safe mode: row events applied as they are")
    parser.add_argument("--faults", default=None,
                        help="a fault menu instead of kills only: mix, or kinds by comma (tests/fault_menu.py)")
    args = parser.parse_args(argv)
    try:
        faults = parse_faults(args.faults) if args.faults else None
    except ValueError as exc:
        parser.error(str(exc))
    kills = args.kills if args.kills is not None else max(1, int(args.duration / 4))
    root = Path(args.dir or tempfile.mkdtemp(prefix=f"shardmerge-chaos-{args.seed}-"))
    root.mkdir(parents=True, exist_ok=True)
    what = f"{kills} faults ({', '.join(faults)})" if faults else f"{kills} kills"
    print(f"chaos: seed {args.seed}, {args.duration:.0f}s, {what}, in {root}", flush=True)
    sandbox = Sandbox(root / "sandbox", upstreams=args.upstreams, watchdog=not args.keep)
    sandbox.up()
    report = None
    try:
        report = run_chaos(sandbox, root, args.seed, args.duration, kills, args.catch_up,
                           log=lambda m: print(m, flush=True), row_events=args.row_events,
                           standby=args.standby, faults=faults, members=args.members,
                           partitions=args.partitions)
    finally:
        if not (args.keep and (report is None or not report.ok)):
            sandbox.down()
    print(report.summary())
    if args.json:
        print(json.dumps(report.to_json()))
    if not report.ok:
        print(f"daemon log: {root}/{next(iter(root.glob('*.log')), Path('?')).name}", file=sys.stderr)
    elif args.dir is None:
        # A passed run's log holds nothing to read; a failed one's stays for the post-mortem.
        shutil.rmtree(root, ignore_errors=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
