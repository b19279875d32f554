"""What the live runs share (`tests/chaos.py`, `tests/live_stories.py`): a shard's writer
(random transactions of inserts, updates, updates that move the primary key, deletes), the
SIGKILLs of the daemon's process group and its restarts, waiting for it to catch up, and
the final comparison of a shard with its rows downstream and of the downstream schema.

A writer builds its row values through `values` (SQL literals by column name), which each
run gives its own way: chaos's fixed columns, the live stories' the shard's table now."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace

import pymysql

from lattice import Table, compare, materialize, quote_identifier, render_table
from replicator.apply.inspect import read_table, with_server_choices
from replicator.compare import (
    KeyedComparison,
    Sides,
    compare_by_key,
    held_as_datetime,
    held_as_double,
    held_as_text,
    temporal,
)
from replicator.daemon.row_path import UNEXPLAINED_DROP
from replicator.state.positions import Position
from replicator.transient import lost
from tests.replication import ReplicationTask


@dataclass
class Counts:
    """What the writers did (shared by them, under a lock)."""

    transactions: int = 0
    inserts: int = 0
    updates: int = 0
    key_moves: int = 0
    deletes: int = 0
    ddls: int = 0
    refused: int = 0  # transactions the shard refused (a live story's values in a UNIQUE key)

    def add(self, other: Counts) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)


class RowTotals:
    """A run's row comparisons (`shards`, one per shard) summed."""

    shards: list[KeyedComparison]

    @property
    def lost(self) -> int:
        return sum(s.lost for s in self.shards)

    @property
    def extra(self) -> int:
        return sum(s.extra for s in self.shards)

    @property
    def different(self) -> int:
        return sum(s.different for s in self.shards)


@dataclass(frozen=True)
class Change:
    """One transaction's statements, the ids of the writer's rows once it commits, and
    what it counts."""

    statements: tuple[str, ...]
    live: tuple[int, ...]
    counts: Counts
    touched: frozenset[int] = frozenset()  # the ids it inserts, updates, moves or deletes


class ShardTraffic(threading.Thread):
    """One shard's random transactions, about six a second, each of one to three changes:
    inserts of one to three rows, an update of one to three rows, an update that moves one
    row's key, deletes. Ids come from [first_id, last_id]; when they run out, only updates
    and deletes. `guard` is held through each transaction: whoever changes the shard's
    table holds it too, so the next transaction's values fit the table as it is."""

    refusals_allowed = False  # a refused transaction ends the writer (`error`) unless allowed
    reconnects = False  # a lost connection ends the writer unless it connects again

    def __init__(self, name: str, table: str, connect: Callable[[], object], rng: random.Random,
                 counts: Counts, lock: threading.Lock, stop: threading.Event,
                 first_id: int = 1, last_id: int | None = None):
        super().__init__(name=name, daemon=True)
        self.table, self.connect, self.random = table, connect, rng
        self.counts, self.lock, self.stop_event = counts, lock, stop
        self.guard = threading.Lock()
        self.live: list[int] = []
        # the ids each committed transaction touched, in commit order (a run that discards a
        # shard's rows of some time, as `binlog skip` does, leaves those ids out of its compare)
        self.history: list[frozenset[int]] = []
        self.next_id, self.last_id = first_id, last_id
        self.error: str | None = None

    # -- what a run gives ---------------------------------------------------------------------
    def values(self, row_id: int | None) -> dict[str, str]:
        """A row's values as SQL literals by column name (without `id`); `row_id` None: the
        values of an update (of any row)."""
        raise NotImplementedError

    def step(self, conn) -> bool:
        """One step of the writer (a transaction); False when it is done."""
        self.transaction(conn)
        return True

    def finish(self, conn) -> None:
        """What the writer does after its last step."""

    # -- the loop -------------------------------------------------------------------------------
    def run(self) -> None:
        conn = self.connect()
        try:
            while not self.stop_event.is_set():
                more, conn = self._again_if_lost(conn, self.step)
                if not more:
                    break
                time.sleep(self.random.uniform(0.05, 0.28))
            _, conn = self._again_if_lost(conn, self.finish)
        except Exception as exc:  # the run reports it; the writer must not die silently
            self.error = f"{self.name}: {type(exc).__name__}: {exc}"
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    def _again_if_lost(self, conn, what: Callable[[object], object]) -> tuple[object, object]:
        """`what(conn)`; with `reconnects`, once more on a new connection after losing this
        one (its server restarted: whoever restarts it holds `guard`, so nothing of the
        writer's was in flight, and what failed did not run)."""
        deadline = time.monotonic() + 120
        while True:
            try:
                return what(conn), conn
            except pymysql.err.MySQLError as exc:
                if not (self.reconnects and lost(exc)):
                    raise
            while True:
                with contextlib.suppress(Exception):
                    conn.close()
                try:
                    conn = self.connect()
                    break
                except pymysql.err.OperationalError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)

    def transaction(self, conn) -> None:
        with self.guard:
            change = self._change()
            try:
                with conn.cursor() as cur:
                    for statement in change.statements:
                        cur.execute(statement)
                conn.commit()
            except pymysql.err.MySQLError as exc:
                if self.reconnects and lost(exc):
                    raise  # (`run` connects again)
                conn.rollback()
                if not self.refusals_allowed:
                    raise
                with self.lock:
                    self.counts.refused += 1
                return
            self.live = list(change.live)
            self.history.append(change.touched)
            with self.lock:
                self.counts.add(change.counts)

    # -- the changes ----------------------------------------------------------------------------
    def _ids_left(self) -> int:
        return 1 << 62 if self.last_id is None else self.last_id - self.next_id + 1

    def _take_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def _change(self) -> Change:
        """A transaction's changes, each on the rows as the ones before it leave them. Ids
        taken stay taken though the shard refuses the transaction: an id is never reused."""
        r = self.random
        live = list(self.live)
        statements: list[str] = []
        touched: set[int] = set()
        counted = Counts(transactions=1)
        for _ in range(r.choice((1, 1, 1, 2, 3))):
            roll = r.random()
            if (roll < 0.4 or not live) and self._ids_left() > 3:
                for _ in range(r.randint(1, 3)):
                    row_id = self._take_id()
                    values = self.values(row_id)
                    names = ", ".join(quote_identifier(n) for n in ("id", *values))
                    statements.append(f"INSERT INTO {self.table} ({names}) "
                                      f"VALUES ({', '.join((str(row_id), *values.values()))})")
                    live.append(row_id)
                    touched.add(row_id)
                    counted.inserts += 1
            elif not live:
                continue
            elif roll < 0.65:
                targets = r.sample(live, min(len(live), r.randint(1, 3)))
                sets = ", ".join(f"{quote_identifier(k)} = {v}" for k, v in self.values(None).items())
                if not sets:
                    continue
                statements.append(f"UPDATE {self.table} SET {sets} WHERE id IN ({', '.join(map(str, targets))})")
                touched.update(targets)
                counted.updates += len(targets)
            elif roll < 0.8 and self._ids_left() > 0:
                old, new = r.choice(live), self._take_id()
                live.remove(old)
                live.append(new)
                statements.append(f"UPDATE {self.table} SET id = {new} WHERE id = {old}")
                touched.update((old, new))
                counted.key_moves += 1
            else:
                gone = r.sample(live, min(len(live), r.randint(1, 2)))
                for row_id in gone:
                    live.remove(row_id)
                statements.append(f"DELETE FROM {self.table} WHERE id IN ({', '.join(map(str, gone))})")
                touched.update(gone)
                counted.deletes += len(gone)
        return Change(tuple(statements), tuple(live), counted, frozenset(touched))


# -- the daemon's process group ---------------------------------------------------------------
@dataclass
class Kills:
    kills: int = 0
    crashes: list[str] | None = None  # the daemon exited by itself: its exit status, when


def kill_and_restart(task: ReplicationTask, kills: Kills) -> None:
    """SIGKILL the daemon's process group and start it again (not waiting for it to read);
    a daemon found already gone died by itself: a crash."""
    assert task.process is not None
    code = task.process.poll()
    if code is not None:
        kills.crashes = [*(kills.crashes or []), f"exit status {code} before kill {kills.kills + 1}"]
    task.kill(group=True)
    kills.kills += 1
    task.start(wait=False, group=True)


def kill_at(task: ReplicationTask, moments: Iterable[float], kills: Kills, stop: threading.Event | None = None,
            log: Callable[[Kills], None] | None = None, kill: Callable[[Kills], None] | None = None) -> None:
    """Kill and restart the daemon at each moment (seconds from now) until `stop` is set
    (`kill`: how, instead of `kill_and_restart`)."""
    begin = time.monotonic()
    for moment in moments:
        wait = max(0.0, begin + moment - time.monotonic())
        if stop is not None and stop.wait(wait):
            return
        if stop is None:
            time.sleep(wait)
        if kill is not None:
            kill(kills)
        else:
            kill_and_restart(task, kills)
        if log is not None:
            log(kills)


# -- catching up and comparing ------------------------------------------------------------------
def unexplained_drops(task: ReplicationTask) -> int:
    """Row events a worker dropped that the daemon could not account for (issue 76: it
    pauses the shard there, and the log says so, across restarts): never expected."""
    return task.log_text().count(UNEXPLAINED_DROP)


def wait_caught_up(task: ReplicationTask, timeout: float) -> bool:
    """Every source's watermark has reached the end of its binlog (writers stopped):
    everything read is applied. A paused shard holds it back: then False at timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if caught_up(task):
            return True
        if task.process is not None and task.process.poll() is not None:
            return False
        time.sleep(0.5)
    return False


def caught_up(task: ReplicationTask) -> bool:
    ends = {task.source_of(inst.name): last_commit(inst).key for inst in task.sandbox.upstreams}
    try:
        marks = task.meta().watermarks.load()
    except pymysql.err.MySQLError:
        return False
    return bool(marks) and all(s in marks and marks[s][0].key >= end for s, end in ends.items())


def last_commit(inst) -> Position:
    """Where the binlog's last transaction ends (the events that open a new binlog
    file, after a rotation, are not one: a reader that is done stands at its start)."""
    file = inst.execute("SHOW MASTER STATUS")[0][0]
    ends = [int(row[4]) for row in inst.execute(f"SHOW BINLOG EVENTS IN '{file}'")
            if row[2] in ("Xid", "Query")]
    return Position(file, ends[-1] if ends else 4)


def merged_table(task: ReplicationTask) -> Table:
    with task.sandbox.downstream.connect() as conn:
        return read_table(conn, task.target_db, "orders")


def compare_rows(task: ReplicationTask, shard: tuple[str, str, str], where: str,
                 upstream: tuple[str, str] | None = None, merged: Table | None = None,
                 downstream: str | None = None, leave_out: Iterable[str] = (),
                 only: str | None = None) -> KeyedComparison:
    """A shard's rows, by `id`, against the downstream rows `where` selects; `upstream`
    (schema, table) reads them from another table of the shard's server (a copy of them),
    `downstream` (qualified) from another table than the target (a view of it); the
    columns `leave_out` are not compared; `only` (a condition, on both sides) compares
    some rows only."""
    inst = task.sandbox.instance(shard[0])
    schema, table = upstream or shard[1:]
    with inst.connect() as conn:
        columns = read_table(conn, schema, table)
    skip = {c.lower() for c in leave_out}
    held = merged or merged_table(task)
    return compare_by_key(
        task.shard_id(shard),
        [c.name for c in columns.columns if c.generated is None and c.name.lower() not in skip],
        ["id"],
        Sides(
            inst.execute,
            f"{quote_identifier(schema)}.{quote_identifier(table)}" if only is None
            else f"(SELECT * FROM {quote_identifier(schema)}.{quote_identifier(table)} WHERE {only}) AS shard",
            task.sandbox.downstream.execute,
            downstream or f"{quote_identifier(task.target_db)}.`orders`",
            where if only is None else f"({where}) AND ({only})",
            errors=(pymysql.err.MySQLError,),
            as_text=held_as_text(columns, held),
            as_float=held_as_double(columns, held),
            zero_dates=temporal(columns),
            as_datetime=held_as_datetime(columns, held),
        ),
    )


def combined(a: KeyedComparison, b: KeyedComparison) -> KeyedComparison:
    """Two comparisons of one shard's rows (apart) as one."""
    return replace(a, upstream_rows=a.upstream_rows + b.upstream_rows,
                   downstream_rows=a.downstream_rows + b.downstream_rows, lost=a.lost + b.lost,
                   extra=a.extra + b.extra, different=a.different + b.different,
                   samples=a.samples + b.samples, error=a.error or b.error)


def downstream_problem(task: ReplicationTask) -> str | None:
    """None when the downstream table is the coordinator's joined table."""
    actual = merged_table(task)
    believed = task.coordinator_table()
    if believed is None:
        return "the coordinator has no joined table"
    expected = with_server_choices(materialize(believed, "mariadb"), actual)
    if actual != expected:
        return f"downstream differs from the coordinator's table:\n{render_table(actual)}\nvs\n{render_table(expected)}"
    return None


def join_problem(task: ReplicationTask, joined: Table | None = None, exact: bool = True) -> str | None:
    """None when the coordinator's table is the join of the shards now (`joined`, default
    all of them); not `exact`: when it takes every row of that join (a wider table is the
    documented outcome of shards that dropped, narrowed or left: their rows stay)."""
    believed = task.coordinator_table()
    joined = joined if joined is not None else task.upstream_join()
    if believed is None:
        return "the coordinator has no joined table"
    a, b = materialize(joined, "mariadb"), materialize(believed, "mariadb")
    if a == b or (not exact and compare(a, b, "mariadb") == -1):
        return None
    return f"the coordinator's table differs from the join:\n{render_table(believed)}\nvs\n{render_table(joined)}"


class Writer:
    """Rows into every shard from a thread, in batches of multi-row INSERTs and
    UPDATEs, until stopped: the load that is in flight when a fault strikes (the
    shards' tables have id, amount and note first)."""

    def __init__(self, task: ReplicationTask, rows_per_batch: int = 200):
        self.task = task
        self.rows_per_batch = rows_per_batch
        self.next_id = 1
        self.stopped = threading.Event()
        self.failures: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.thread.join(timeout=60)

    def batch(self) -> None:
        first, n = self.next_id, self.rows_per_batch
        self.next_id += n
        for shard in self.task.shards:
            values = ",".join(f"({i}, {i}.5, 'n{i}')" for i in range(first, first + n))
            try:
                self.task.sql(shard, f"INSERT INTO {{t}} VALUES {values}")
                self.task.sql(shard, f"UPDATE {{t}} SET amount = amount + 1 WHERE id % 7 = {first % 7}")
            except Exception as exc:  # its server is being restarted: the next batch goes on
                self.failures.append(f"{shard[0]}: {exc}")

    def _run(self) -> None:
        while not self.stopped.is_set():
            self.batch()
            time.sleep(0.05)
