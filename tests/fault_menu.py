"""The faults of `make chaos FAULTS=mix` (issue 70): what an operator's servers do to a
daemon left running for months, other than killing it. The chaos run strikes one at each
of its moments, in a cycle over the kinds asked for, each cycle in an order of its own:

    kill                SIGKILL of the daemon's process group (whichever daemon runs the task)
    stop                SIGSTOP of the active daemon past its lease; the standby takes over;
                        SIGCONT: the old one must exit 4 without writing (then it comes back
                        as the standby)
    kill_connections    KILL CONNECTION of every client session on the downstream
    restart_downstream  SIGKILL of the downstream server, started again
    kill_dumps          KILL of an upstream's binlog dump threads
    restart_upstream    an upstream server stopped by SIGTERM or SIGKILL and started again;
                        its writers reconnect
    read_lock           FLUSH TABLES WITH READ LOCK on the downstream, held 2-5 s
    long_transaction    a downstream transaction holding the merged table's newest rows
                        (and its metadata lock) for 2-8 s

None of them needs a person: at the end every shard must be equal, none paused. What a
strike saw that is wrong (a takeover that did not come, an old daemon that did not exit 4)
goes to `problems`, and fails the run.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pymysql

from tests.replication import ReplicationTask
from tests.traffic import Kills

KINDS = (
    "kill",
    "stop",
    "kill_connections",
    "restart_downstream",
    "kill_dumps",
    "restart_upstream",
    "read_lock",
    "long_transaction",
)
MENUS = {"kill": ("kill",), "mix": KINDS}
STANDBY_KINDS = {"stop"}  # (a standby must run to take over)


def parse_faults(text: str) -> tuple[str, ...]:
    """`mix`, `kill`, or kinds by comma: `kill,restart_downstream`."""
    if text in MENUS:
        return MENUS[text]
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise ValueError(f"unknown fault {', '.join(unknown) or '(none)'}: use mix, or some of {', '.join(KINDS)}")
    return kinds


@dataclass
class Strikes:
    """What the faults did: how many of each kind, the takeovers' seconds, what went wrong."""

    counts: Counter = field(default_factory=Counter)
    takeovers: list[float] = field(default_factory=list)
    demoted: int = 0  # daemons that found their lease taken, exited 4, and were started again
    woke_standby: int = 0  # daemons stopped in their start that went on as the standby
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.counts.items()))
        taken = f"; takeovers {min(self.takeovers):.1f}-{max(self.takeovers):.1f} s" if self.takeovers else ""
        woke = f"; stopped in their start, woke as the standby {self.woke_standby}" if self.woke_standby else ""
        return f"faults: {kinds}{taken}; demoted and started again {self.demoted}{woke}"


class Menu:
    """Strikes the faults; `daemons` knows the task's daemons (`tests.chaos.Pair`), `guards`
    by upstream name the locks its writers hold through each transaction and ALTER (held
    around an upstream's restart, so that no statement of theirs is in flight)."""

    def __init__(self, task: ReplicationTask, daemons, guards: dict[str, list[threading.Lock]],
                 rng: random.Random, kinds: tuple[str, ...], log: Callable[[str], None] = print):
        self.task, self.daemons, self.guards, self.random = task, daemons, guards, rng
        self.kinds, self.log = kinds, log
        self.strikes = Strikes()
        self._cycle: list[str] = []

    def strike(self, kills: Kills) -> None:
        if not self._cycle:
            self._cycle = list(self.kinds)
            self.random.shuffle(self._cycle)
        kind = self._cycle.pop()
        self.strikes.demoted += self.daemons.revive()
        before = kills.kills
        self.log(f"  {time.strftime('%H:%M:%S')} fault {kills.kills + 1}: {kind} (lease holder {self.daemons.active_pid()})")
        getattr(self, f"_{kind}")(kills)
        self.strikes.counts[kind] += 1
        kills.kills = before + 1  # (faults of every kind: `kill` counts its own)

    # -- the daemons --------------------------------------------------------------------------
    def _kill(self, kills: Kills) -> None:
        self.daemons.kill_active(kills)

    def _stop(self, kills: Kills) -> None:
        # (the lease row names a daemon killed a moment ago till the standby takes over)
        deadline = time.monotonic() + 30
        while (pid := self.daemons.active_pid()) is None or not self.daemons.running(pid):
            if time.monotonic() > deadline:
                return self._kill(kills)
            time.sleep(0.2)
        os.killpg(pid, signal.SIGSTOP)
        stopped, holder = time.monotonic(), None
        try:
            deadline = stopped + 3 * self.task.config.options.lease_ttl + 30
            while time.monotonic() < deadline and self.daemons.active_pid() in (pid, None):
                time.sleep(0.2)
            holder = self.daemons.active_pid()
            if holder in (pid, None):
                self.strikes.problems.append(f"no takeover {time.monotonic() - stopped:.0f} s after SIGSTOP of {pid}")
                self.daemons.dump_others(pid)  # (where the standby is: its stacks in the log)
            else:
                self.strikes.takeovers.append(time.monotonic() - stopped)
        finally:
            woken = self.task.log.stat().st_size if self.task.log.exists() else 0
            try:
                os.killpg(pid, signal.SIGCONT)
            except ProcessLookupError:
                self.strikes.problems.append(f"the daemon {pid} stopped past its lease was gone before SIGCONT")
        outcome = self._after_sigcont(pid, holder, woken)
        if outcome == "standby":
            self.strikes.woke_standby += 1
            return
        if outcome != 4:
            self.strikes.problems.append(f"the daemon stopped past its lease exited {outcome} on SIGCONT, not 4")
        self.daemons.restart(pid)

    def _after_sigcont(self, pid: int, holder: int | None, woken: int, timeout: float = 60):
        """What the daemon `pid` did when woken: its exit status (4: it found its lease taken
        while it ran), "standby" (stopped in its start, before it ran, it went on with the start
        and found the lease taken: it waits as the standby, as a daemon started then would), or
        None: neither within `timeout`. A standby's line naming the new holder, logged after
        the SIGCONT, can only be the woken daemon's: the new holder does not log it of itself,
        and no other daemon is started meanwhile."""
        waiting = re.compile(rf"standby: task {re.escape(self.task.name)} is run by [^ :]+:{holder}:")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.daemons.wait_exit(pid, timeout=0.5)
            if code is not None:
                return code
            if holder is not None and self.task.log.exists():
                with self.task.log.open("rb") as text:
                    text.seek(woken)
                    if waiting.search(text.read().decode(errors="replace")):
                        return "standby"
        return None

    # -- the downstream -----------------------------------------------------------------------
    def _kill_connections(self, kills: Kills) -> None:
        _kill_sessions(self.task.sandbox.downstream, "COMMAND NOT IN ('Daemon', 'Binlog Dump', 'Killed') "
                       "AND USER NOT IN ('system user', 'event_scheduler')")

    def _restart_downstream(self, kills: Kills) -> None:
        self.task.sandbox.restart_instance(self.task.sandbox.downstream.name, graceful=False)

    def _read_lock(self, kills: Kills) -> None:
        with _session(self.task.sandbox.downstream) as conn, conn.cursor() as cur:
            cur.execute("SET SESSION lock_wait_timeout = 10")
            try:
                cur.execute("FLUSH TABLES WITH READ LOCK")
            except pymysql.err.OperationalError:
                return  # (a long statement in the way: no lock this time)
            time.sleep(self.random.uniform(2, 5))
            cur.execute("UNLOCK TABLES")

    def _long_transaction(self, kills: Kills) -> None:
        table = f"`{self.task.target_db}`.`orders`"
        with _session(self.task.sandbox.downstream) as conn, conn.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 10, lock_wait_timeout = 10")
            try:
                cur.execute("BEGIN")
                cur.execute(f"SELECT 1 FROM {table} ORDER BY `id` DESC LIMIT 50 FOR UPDATE")
                time.sleep(self.random.uniform(2, 8))
            except pymysql.err.OperationalError:
                pass  # (the daemon's DDL held the table longer than 10 s: no rows held this time)
            finally:
                with contextlib.suppress(pymysql.err.MySQLError):
                    conn.rollback()

    # -- the upstreams ------------------------------------------------------------------------
    def _kill_dumps(self, kills: Kills) -> None:
        inst = self.random.choice(self.task.sandbox.upstreams)
        _kill_sessions(inst, "COMMAND LIKE 'Binlog Dump%'")

    def _restart_upstream(self, kills: Kills) -> None:
        inst = self.random.choice(self.task.sandbox.upstreams)
        guards = self.guards.get(inst.name, [])
        with contextlib.ExitStack() as held:
            for guard in guards:
                held.enter_context(guard)
            self.task.sandbox.restart_instance(inst.name, graceful=self.random.random() < 0.5)


@contextlib.contextmanager
def _session(inst):
    conn = _connect(inst)
    try:
        yield conn
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def _connect(inst, timeout: float = 60.0):
    """A session on `inst`, waiting for it to come back from a restart."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return inst.connect(autocommit=True)
        except pymysql.err.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _kill_sessions(inst, where: str) -> None:
    with _session(inst) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND {where}")
        for (session,) in cur.fetchall():
            with contextlib.suppress(pymysql.err.OperationalError, pymysql.err.InternalError):
                cur.execute(f"KILL CONNECTION {int(session)}")
