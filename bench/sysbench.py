"""sysbench OLTP on 4 shard schemas over 2 servers, merged by shardmerge, next to a native replica.

On a private sandbox (2 upstream MariaDB servers, 1 downstream), sysbench 1.0.20 prepares 4
shard schemas, sb_1 and sb_2 on up1, sb_3 and sb_4 on up2, each with the tables sbtest1 and
sbtest2 of --table-size rows. The daemon merges each table of every shard into one downstream
table (sb.sbtest1, sb.sbtest2) with extract columns _source, _schema and _table: sysbench
numbers every shard's rows from 1, so the ids overlap. In one run:

1. the downstream starts with the prepared rows: the daemon's first start, at the binlog
   position after prepare, creates its tables and is stopped; each shard table is copied with
   SELECT ... INTO OUTFILE upstream and LOAD DATA downstream (the extract columns set), into
   the merged tables and, for the anchor, into a downstream schema of the shard's own name;
2. sysbench oltp_write_only (or oltp_read_write) runs --time seconds on every shard schema at
   once, unthrottled; at half time sbtest1 of sb_1 and sb_3 (a shard on each server) gets
   ADD COLUMN note; the binlog positions before and after are recorded and the row changes
   between them counted (mariadb-binlog);
3. the anchor applies that span: the downstream as a native multi-source replica of both
   servers (slave_parallel_threads 0, START SLAVE UNTIL the recorded end), each shard schema
   into its own downstream schema: the native tool cannot merge tables whose ids overlap, so
   it writes the same rows into 4 schemas, the same work in rows/s;
4. shardmerge applies the same span from the same content: the daemon started again resumes
   at the recorded start, timed until its watermark (everything before it is applied
   downstream) reaches the recorded end;
5. lag, live: the native replica started at the positions of now (the daemon stopped), then
   the daemon (caught up again), each alone under the same load: sysbench --lag-time seconds
   at --lag-share (0.5) of its unthrottled rate (or --rate), while a marker row committed
   upstream every 0.1 s is watched for downstream (p50, p99); then the catch-up after the
   load stops is timed. (Unthrottled, sysbench and the two upstream servers take most of the
   two cores themselves; at half that rate both appliers have a share of them left.)
6. every shard table upstream is compared with its rows downstream (count and checksum).

It prints the upstream transactions/s, the row changes of the span, rows/s of the anchor and
of shardmerge (unthrottled: each replays the whole span as fast as it can) and their ratio,
the lag and the catch-up, the CPU seconds of each process kind, OK/DIFF per shard, and what
the daemon logged, paused or refused. A wait that does not end within --timeout seconds is
reported ("did not catch up: N of M rows in T s"), never waited out.

    .venv/bin/python bench/sysbench.py [--table-size 250000] [--threads 2] [--time 60]
        [--workload write_only|read_write] [--timeout 600] [--lag-time 30] [--rate TPS] [--keep]

(make bench-sysbench installs sysbench and runs it.)
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script: `bench` (a namespace package) and `replicator`

from bench.replication import as_installed, children, cpu_of, percentile, position  # noqa: E402
from replicator import compiled  # noqa: E402
from replicator.sandbox import Instance, Sandbox  # noqa: E402

TASK = "sysbench"
META = "sysbench_meta"
TARGET_SCHEMA = "sb"
TABLES = ("sbtest1", "sbtest2")
EXTRACT = {"source": "_source", "schema": "_schema", "table": "_table"}
# one shard on each server ALTERs midway, the other does not: the join must carry both
ALTERED = ("sb_1", "sb_3")
ALTER = "ALTER TABLE sbtest1 ADD COLUMN note VARCHAR(32) NULL"
# Lag markers: rows of sbtest2 sysbench never touches (its ids stay within --table-size, its k
# values positive), found downstream by the k index whatever the primary key's column order.
MARKER_BASE = 1_000_000_000
MARKER_EVERY = 0.1
MARKER_IDS = itertools.count(1)
SAMPLE_EVERY = 0.2  # seconds between /proc reads of the CPU watch
DAEMON_STOP = 60.0  # seconds a clean stop may take before the daemon's process group is killed
ROW_LINE = re.compile(rb"^### (INSERT INTO|UPDATE|DELETE FROM) ")


@dataclass(frozen=True)
class Shard:
    """One shard schema: its server (index into the sandbox's upstreams) and source id."""

    server: int
    schema: str

    @property
    def source(self) -> str:
        return f"s{self.server + 1}"

    def where(self, table: str) -> str:
        """Its rows in a merged table."""
        return (f"{EXTRACT['source']} = '{self.source}' AND {EXTRACT['schema']} = '{self.schema}' "
                f"AND {EXTRACT['table']} = '{table}'")


SHARDS = (Shard(0, "sb_1"), Shard(0, "sb_2"), Shard(1, "sb_3"), Shard(1, "sb_4"))


# -- small helpers ---------------------------------------------------------------------------------
def file_seq(binlog: str) -> int:
    return int(binlog.rsplit(".", 1)[1])


def poll_until(done: Callable[[], bool], timeout: float, every: float = 0.05) -> bool:
    """True once `done()`, False when `timeout` seconds passed first: nothing waits unbounded."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)
    return True


def dict_rows(inst: Instance, sql: str) -> list[dict[str, Any]]:
    """A statement's rows by column name (SHOW ... STATUS has too many columns to count)."""
    with inst.connect() as conn, conn.cursor() as cur:
        cur.execute(sql)
        names = [d[0] for d in cur.description or ()]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def positions(sb: Sandbox) -> tuple[tuple[str, int], ...]:
    return tuple(position(inst) for inst in sb.upstreams)


# -- CPU per process kind --------------------------------------------------------------------------
def read_cpu(pid: int) -> float | None:
    """A process's CPU seconds, None once it is gone: it may end between any two reads."""
    try:
        return cpu_of(pid)
    except (OSError, ValueError, IndexError):
        return None


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (the daemon's source workers are its fork server's
    children, not its own)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        try:
            kids = children(todo.pop())
        except OSError:  # ended meanwhile: it has no children left
            continue
        found += kids
        todo += kids
    return found


Kinds = Callable[[], dict[str, list[int]]]


class CpuWatch:
    """CPU seconds per process kind over a `with` block: /proc read every SAMPLE_EVERY s and on
    both ends, each process counted up to its last read (one that ends mid-block keeps what it
    had; one born in it counts from 0)."""

    def __init__(self, kinds: Kinds) -> None:
        self.kinds = kinds
        self.last: dict[int, tuple[str, float]] = {}
        self.base: dict[int, float] = {}
        self.names: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        for kind, pids in self.kinds().items():
            if kind not in self.names:
                self.names.append(kind)
            for pid in pids:
                cpu = read_cpu(pid)
                if cpu is not None:
                    self.last[pid] = (kind, cpu)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY):
            self._sample()

    def __enter__(self) -> CpuWatch:
        self._sample()
        self.base = {pid: cpu for pid, (_, cpu) in self.last.items()}
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def spent(self) -> dict[str, float]:
        out = dict.fromkeys(self.names, 0.0)
        for pid, (kind, cpu) in self.last.items():
            out[kind] += cpu - self.base.get(pid, 0.0)
        return out


def server_kinds(sb: Sandbox) -> Kinds:
    def kinds() -> dict[str, list[int]]:
        ups = [sb.pid(inst.name) for inst in sb.upstreams]
        down = sb.pid(sb.downstream.name)
        return {"downstream MariaDB": [down] if down else [],
                "upstream MariaDB": [p for p in ups if p]}

    return kinds


def daemon_kinds(sb: Sandbox, daemon: Daemon) -> Kinds:
    def kinds() -> dict[str, list[int]]:
        pid = daemon.pid
        return {"source workers": descendants(pid) if pid else [], "daemon": [pid] if pid else [],
                **server_kinds(sb)()}

    return kinds


def cpu_text(cpu: dict[str, float], rows: int) -> str:
    """CPU seconds of each kind, and per 1,000 rows when `rows`."""

    def per(seconds: float) -> str:
        return f" ({seconds * 1000 / rows:.3f}/1,000 rows)" if rows else ""

    return ", ".join(f"{kind} {seconds:.1f} s{per(seconds)}" for kind, seconds in cpu.items())


# -- sysbench ---------------------------------------------------------------------------------------
def sysbench(args: argparse.Namespace, inst: Instance, schema: str, command: str, *extra: str) -> list[str]:
    # sysbench's own tables, AUTO_INCREMENT id and all (its run writes explicit ids anyway)
    return ["sysbench", f"oltp_{args.workload}", "--db-driver=mysql", "--mysql-host=127.0.0.1",
            f"--mysql-port={inst.port}", "--mysql-user=root", f"--mysql-db={schema}",
            f"--tables={len(TABLES)}", f"--table-size={args.table_size}", *extra, command]


def wait_process(proc: subprocess.Popen[bytes], deadline: float) -> float:
    """Reap `proc` (killed past `deadline`) and return its CPU seconds, from the kernel's own
    account of it (exact, where sampling /proc would miss its last moments)."""
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            proc.kill()
        time.sleep(0.05)


def prepare(sb: Sandbox, args: argparse.Namespace, root: Path) -> None:
    procs = []
    for shard in SHARDS:
        inst = sb.upstreams[shard.server]
        inst.execute(f"CREATE DATABASE {shard.schema}")
        out = (root / f"prepare-{shard.schema}.out").open("wb")
        command = sysbench(args, inst, shard.schema, "prepare", f"--threads={len(TABLES)}")
        procs.append((shard, subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT), out))
    deadline = time.monotonic() + max(args.timeout, 600)
    for _, proc, out in procs:  # all of them before judging: none is left running behind an error
        wait_process(proc, deadline)
        out.close()
    for shard, proc, _ in procs:
        if proc.returncode:
            tail = (root / f"prepare-{shard.schema}.out").read_text(errors="replace")[-1500:]
            raise SystemExit(f"sysbench prepare of {shard.schema} failed ({proc.returncode}):\n{tail}")


@dataclass
class Load:
    transactions: int = 0
    tps: float = 0.0  # the sum of every sysbench's transactions/s
    seconds: float = 0.0  # the longest sysbench's total time
    ignored_errors: int = 0
    cpu: float = 0.0  # sysbench's own CPU seconds
    alters: list[str] = field(default_factory=list)


def parse_sysbench(text: str, load: Load) -> None:
    found = re.search(r"transactions:\s+(\d+)\s+\(([\d.]+) per sec", text)
    total = re.search(r"total time:\s+([\d.]+)s", text)
    if not found or not total:
        raise SystemExit(f"no transactions in sysbench's output:\n{text[-1500:]}")
    load.transactions += int(found.group(1))
    load.tps += float(found.group(2))
    load.seconds = max(load.seconds, float(total.group(1)))
    ignored = re.search(r"ignored errors:\s+(\d+)", text)
    load.ignored_errors += int(ignored.group(1)) if ignored else 0


def alter_midway(sb: Sandbox, delay: float, load: Load, stop: threading.Event) -> None:
    """The shards of ALTERED run ALTER after `delay` seconds, one after the other."""
    if stop.wait(delay):
        return
    for shard in (s for s in SHARDS if s.schema in ALTERED):
        started = time.perf_counter()
        try:
            sb.upstreams[shard.server].execute(ALTER, database=shard.schema)
        except pymysql.MySQLError as exc:
            load.alters.append(f"{shard.schema}: failed: {exc}")
            continue
        load.alters.append(f"{shard.schema} at {delay:.1f} s ({time.perf_counter() - started:.2f} s)")


def run_load(
    sb: Sandbox, args: argparse.Namespace, root: Path, tag: str, seconds: float, *, rate: int = 0,
    alter: bool = False,
) -> Load:
    """sysbench on every shard schema at once, `rate` transactions/s each (0: unthrottled)."""
    load = Load()
    extra = [f"--threads={args.threads}", f"--time={seconds:g}", "--report-interval=0", f"--rate={rate}"]
    procs = []
    for shard in SHARDS:
        out = (root / f"{tag}-{shard.schema}.out").open("wb")
        command = sysbench(args, sb.upstreams[shard.server], shard.schema, "run", *extra)
        procs.append((shard, subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT), out))
    stop = threading.Event()
    altering = threading.Thread(target=alter_midway, args=(sb, seconds / 2, load, stop), daemon=True)
    if alter:
        altering.start()
    deadline = time.monotonic() + seconds + 120  # its --time, and room for a slow connect and exit
    for _, proc, out in procs:  # all of them before judging: none is left running behind an error
        load.cpu += wait_process(proc, deadline)
        out.close()
    stop.set()
    if alter:
        altering.join(timeout=120)
    for shard, proc, _ in procs:
        text = (root / f"{tag}-{shard.schema}.out").read_text(errors="replace")
        if proc.returncode:
            raise SystemExit(f"sysbench run on {shard.schema} failed ({proc.returncode}):\n{text[-1500:]}")
        parse_sysbench(text, load)
    return load


# -- the span: row changes between two recorded positions ------------------------------------------
@dataclass
class Span:
    """Each source's row changes between `starts` and `ends`, for "N of M rows": a position
    (one a transaction ends at) gives the rows of the span before it."""

    starts: tuple[tuple[str, int], ...]
    ends: tuple[tuple[str, int], ...]
    marks: list[list[tuple[int, int]]] = field(default_factory=list)  # per source: (file_seq, end_log_pos)
    counts: list[list[int]] = field(default_factory=list)  # rows up to and with that event
    transactions: int = 0

    @property
    def total(self) -> int:
        return sum(c[-1] for c in self.counts if c)

    def rows_before(self, source: int, file: int, pos: int) -> int:
        """Rows of the span's events ending at or before (file, pos) of source `source`."""
        i = bisect.bisect_right(self.marks[source], (file, pos))
        return self.counts[source][i - 1] if i else 0

    def applied(self, reached: dict[int, tuple[int, int]]) -> int:
        return sum(self.rows_before(s, *where) for s, where in reached.items())


def binlog_pieces(inst: Instance, start: tuple[str, int], end: tuple[str, int]) -> list[list[str]]:
    """mariadb-binlog's arguments for each binlog file of the span (a span may cross a rotation)."""
    files = [r[0] for r in inst.execute("SHOW BINARY LOGS")]
    inside = [f for f in files if file_seq(start[0]) <= file_seq(f) <= file_seq(end[0])]
    pieces = []
    for name in inside:
        args = [f"--start-position={start[1]}"] if name == start[0] else []
        args += [f"--stop-position={end[1]}"] if name == end[0] else []
        pieces.append([*args, name])
    return pieces


def count_rows(inst: Instance, piece: list[str], marks: list[tuple[int, int]], counts: list[int]) -> int:
    """Append (file, end_log_pos) and the running row count of every row event of one binlog
    file's part; return its transactions. The rows are the decoded images' headers (grep
    keeps Python off the column lines, most of the output)."""
    seq = file_seq(piece[-1])
    reader = subprocess.Popen(
        ["mariadb-binlog", "--read-from-remote-server", "--host=127.0.0.1", f"--port={inst.port}",
         "--user=root", "--base64-output=decode-rows", "--verbose", *piece],
        stdout=subprocess.PIPE,
    )
    keep = subprocess.Popen(
        ["grep", "-a", "-E", r"^(#.* end_log_pos |### (INSERT INTO|UPDATE|DELETE FROM) )"],
        stdin=reader.stdout, stdout=subprocess.PIPE,
    )
    assert reader.stdout is not None and keep.stdout is not None
    reader.stdout.close()
    total = counts[-1] if counts else 0
    end, transactions = 0, 0
    for line in keep.stdout:
        if ROW_LINE.match(line):
            total += 1
            if marks and marks[-1] == (seq, end):
                counts[-1] = total
            else:
                marks.append((seq, end))
                counts.append(total)
        else:
            end = int(line.split(b" end_log_pos ", 1)[1].split(None, 1)[0])
            transactions += b"\tXid = " in line or b" Xid = " in line
    keep.wait()
    if reader.wait():
        raise SystemExit(f"mariadb-binlog {' '.join(piece)} on port {inst.port} failed ({reader.returncode})")
    return transactions


def measure_span(sb: Sandbox, starts: tuple[tuple[str, int], ...], ends: tuple[tuple[str, int], ...]) -> Span:
    span = Span(starts, ends)
    for inst, start, end in zip(sb.upstreams, starts, ends, strict=True):
        marks: list[tuple[int, int]] = []
        counts: list[int] = []
        for piece in binlog_pieces(inst, start, end):
            span.transactions += count_rows(inst, piece, marks, counts)
        span.marks.append(marks)
        span.counts.append(counts)
    return span


# -- the initial content downstream ----------------------------------------------------------------
def shard_columns(sb: Sandbox, shard: Shard, table: str) -> list[str]:
    rows = sb.upstreams[shard.server].execute(
        f"SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '{shard.schema}' "
        f"AND TABLE_NAME = '{table}' ORDER BY ORDINAL_POSITION"
    )
    return [r[0] for r in rows]


def copy_in(sb: Sandbox, root: Path, anchor: bool) -> None:
    """Every shard table's rows into the merged tables (the extract columns set) and, for the
    anchor, into a downstream copy of the shard schema: dumped by the server as text, loaded
    by the server (no row goes through Python; the downstream writes no binlog)."""
    folder = root / "copy"
    folder.mkdir()
    down = sb.downstream
    if anchor:
        down.execute([f"CREATE DATABASE {s.schema}" for s in SHARDS])

    def one(item: tuple[Shard, str]) -> None:
        shard, table = item
        inst = sb.upstreams[shard.server]
        path = folder / f"{shard.schema}.{table}.tsv"
        inst.execute(f"SELECT * FROM {shard.schema}.{table} INTO OUTFILE '{path}'")
        columns = ", ".join(shard_columns(sb, shard, table))
        filled = ", ".join(f"{EXTRACT[k]} = '{v}'" for k, v in
                           (("source", shard.source), ("schema", shard.schema), ("table", table)))
        loads = [f"LOAD DATA INFILE '{path}' INTO TABLE {TARGET_SCHEMA}.{table} ({columns}) SET {filled}"]
        if anchor:
            create = inst.execute(f"SHOW CREATE TABLE {shard.schema}.{table}")[0][1]
            loads += [f"USE {shard.schema}", create, f"LOAD DATA INFILE '{path}' INTO TABLE {table}"]
        down.execute(["SET SESSION unique_checks = 0", *loads])
        path.unlink()

    with ThreadPoolExecutor(2) as pool:  # two cores
        list(pool.map(one, [(s, t) for s in SHARDS for t in TABLES]))


# -- the daemon --------------------------------------------------------------------------------------
def config_text(sb: Sandbox, starts: tuple[tuple[str, int], ...]) -> str:
    sources = "".join(
        f"  - id: s{i}\n    host: 127.0.0.1\n    port: {inst.port}\n    user: root\n"
        f"    server_id: {8700 + i}\n    start: {{file: {start[0]}, pos: {start[1]}}}\n"
        for i, (inst, start) in enumerate(zip(sb.upstreams, starts, strict=True), start=1)
    )
    extract = ", ".join(f"{k}: {v}" for k, v in EXTRACT.items())
    routes = "".join(
        f"  - {{schema: 'sb_*', table: {t}, target: {TARGET_SCHEMA}.{t}, extract: {{{extract}}}}}\n"
        for t in TABLES
    )
    return (
        f"task: {TASK}\ntask_mode: incremental\nsources:\n{sources}"
        f"target: {{host: 127.0.0.1, port: {sb.downstream.port}, user: root, flavor: mariadb, "
        f"meta_schema: {META}}}\nroutes:\n{routes}"
        "options: {workers: 4, batch_size: 1000, heartbeat: 1}\n"
        "admin: {port: 0}\n"  # no HTTP port to collide with anything else on the machine
    )


class Daemon:
    """`shardmerge run` of the bench's task, in a session of its own: its fork server and source
    workers are in its process group, which a stop that overruns kills whole."""

    def __init__(self, config: Path, log: Path) -> None:
        self.config, self.log = config, log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "replicator.cli.shardmerge", "run", "--config", str(self.config),
                 "--log-level", "INFO"],
                stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True,
            )

    def exited(self) -> int | None:
        """Its exit status once it ended on its own."""
        return None if self.proc is None else self.proc.poll()

    def stop(self) -> str:
        """A clean stop (SIGTERM: it applies what it read and saves its positions), bounded."""
        if self.proc is None:
            return "not started"
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=DAEMON_STOP)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
                return f"did not stop within {DAEMON_STOP:.0f} s: killed"
        return "stopped cleanly" if proc.returncode == 0 else f"exited with {proc.returncode}"


def watermarks(sb: Sandbox) -> dict[int, tuple[int, int]]:
    """Each source's (file, position) before which everything is applied downstream."""
    try:
        rows = sb.downstream.execute(
            f"SELECT source, file_seq, txn_pos FROM {META}.watermark WHERE task = '{TASK}'"
        )
    except pymysql.MySQLError:
        return {}
    return {int(r[0][1:]) - 1: (int(r[1]), int(r[2])) for r in rows}


def reached(at: dict[int, tuple[int, int]], ends: tuple[tuple[str, int], ...]) -> bool:
    return all(at.get(i, (0, 0)) >= (file_seq(f), p) for i, (f, p) in enumerate(ends))


def last_commit() -> str:
    """When the daemon last committed a batch (each batch writes its checkpoints)."""
    return f"SELECT UNIX_TIMESTAMP(MAX(updated_at)) FROM {META}.checkpoint WHERE task = '{TASK}'"


def first_start(sb: Sandbox, root: Path, starts: tuple[tuple[str, int], ...], timeout: float) -> Path:
    """The daemon's first start at the recorded position, to create the merged tables as it
    wants them (the join of the shards with the extract columns in the key) and save its start
    and schemas there; stopped again before anything is written upstream."""
    config = root / "task.yaml"
    config.write_text(config_text(sb, starts))
    daemon = Daemon(config, root / "daemon.log")
    daemon.start()
    query = f"SELECT COUNT(*) FROM {META}.coordinator_meta WHERE task = '{TASK}'"

    def ready() -> bool:
        if daemon.exited() is not None:
            return True
        with suppress(pymysql.MySQLError):
            return sb.downstream.execute(query)[0][0] == len(TABLES)
        return False

    try:
        if not poll_until(ready, timeout) or daemon.exited() is not None:
            raise SystemExit(f"the daemon's first start did not make the merged tables:\n{log_tail(root)}")
    finally:
        daemon.stop()
    saved = watermarks(sb)
    if saved != {i: (file_seq(f), p) for i, (f, p) in enumerate(starts)}:
        raise SystemExit(f"the daemon saved {saved}, not the recorded start {starts}")
    # an unclean stop would put its next start in safe mode (REPLACE for INSERT): not what we time
    clean = sb.downstream.execute(f"SELECT clean_stop FROM {META}.task_state WHERE task = '{TASK}'")
    if clean != [(1,)]:
        raise SystemExit(f"the daemon's first start did not stop cleanly:\n{log_tail(root)}")
    return config


def log_tail(root: Path, lines: int = 15) -> str:
    with suppress(OSError):
        return "\n".join((root / "daemon.log").read_text(errors="replace").splitlines()[-lines:])
    return "(no daemon log)"


# -- the two runs on the span -------------------------------------------------------------------------
@dataclass
class Run:
    name: str
    total: int
    applied: int = 0
    seconds: float = 0.0
    done: bool = False
    error: str = ""
    cpu: dict[str, float] = field(default_factory=dict)

    def rate(self) -> float:
        rows = self.total if self.done else self.applied
        return rows / self.seconds if self.seconds else 0.0

    def text(self) -> str:
        if self.done:
            return f"{self.total:,} rows in {self.seconds:.1f} s: {self.rate():,.0f} rows/s"
        why = f" ({self.error})" if self.error else ""
        return (f"did not catch up{why}: {self.applied:,} of {self.total:,} rows in {self.seconds:.1f} s "
                f"({self.rate():,.0f} rows/s)")


def replica_state(sb: Sandbox) -> tuple[dict[int, tuple[int, int]], str]:
    """Each connection's executed position, and the first replication error."""
    at, error = {}, ""
    for row in dict_rows(sb.downstream, "SHOW ALL SLAVES STATUS"):
        source = int(str(row["Connection_name"])[1:]) - 1
        if row["Relay_Master_Log_File"]:
            at[source] = (file_seq(str(row["Relay_Master_Log_File"])), int(row["Exec_Master_Log_Pos"]))
        error = error or str(row["Last_SQL_Error"] or row["Last_IO_Error"] or "")
    return at, error


def replica_from(sb: Sandbox, starts: tuple[tuple[str, int], ...]) -> None:
    """The downstream made a multi-source replica of both servers from these positions: one
    connection per server, each shard schema into the downstream schema of its name."""
    sb.downstream.execute([
        f"CHANGE MASTER 's{i}' TO MASTER_HOST='127.0.0.1', MASTER_PORT={inst.port}, MASTER_USER='root', "
        f"MASTER_PASSWORD='', MASTER_LOG_FILE='{file}', MASTER_LOG_POS={pos}, MASTER_USE_GTID=no"
        for i, (inst, (file, pos)) in enumerate(zip(sb.upstreams, starts, strict=True), start=1)
    ])


def replica_gone(sb: Sandbox) -> None:
    sb.downstream.execute("STOP ALL SLAVES")
    sb.downstream.execute([f"RESET SLAVE 's{i}' ALL" for i in range(1, len(sb.upstreams) + 1)])


def anchor(sb: Sandbox, span: Span, timeout: float) -> Run:
    """The native replica over the span, unthrottled (`START SLAVE UNTIL` its end)."""
    down = sb.downstream
    replica_from(sb, span.starts)
    run = Run("native replica", span.total)
    state: dict[str, Any] = {}

    def done() -> bool:
        state["at"], run.error = replica_state(sb)
        return bool(run.error) or reached(state["at"], span.ends)

    try:
        with CpuWatch(server_kinds(sb)) as cpu:
            started = time.perf_counter()
            down.execute([f"START SLAVE 's{i}' UNTIL MASTER_LOG_FILE='{f}', MASTER_LOG_POS={p}"
                          for i, (f, p) in enumerate(span.ends, start=1)])
            run.done = poll_until(done, timeout) and not run.error
            run.seconds = time.perf_counter() - started
        run.cpu = cpu.spent()
        run.applied = span.applied(state.get("at", {}))
    finally:
        replica_gone(sb)
    return run


def catch_up(
    sb: Sandbox, daemon: Daemon, ends: tuple[tuple[str, int], ...], timeout: float
) -> tuple[bool, str]:
    """Wait (bounded) until the daemon's watermarks pass `ends`; False and why when not."""
    why: list[str] = []

    def done() -> bool:
        if daemon.exited() is not None:
            why.append(f"the daemon exited with {daemon.exited()}")
            return True
        return reached(watermarks(sb), ends)

    ok = poll_until(done, timeout, every=0.1)
    return ok and not why, "; ".join(why)


def shardmerge(sb: Sandbox, daemon: Daemon, span: Span, timeout: float) -> Run:
    """The daemon started again: it resumes at the span's start (its saved watermark) and is
    timed to its last commit of the span, its start included."""
    run = Run("shardmerge", span.total)
    with CpuWatch(daemon_kinds(sb, daemon)) as cpu:
        started = time.time()
        daemon.start()
        run.done, run.error = catch_up(sb, daemon, span.ends, timeout)
        finished = time.time()
    run.cpu = cpu.spent()
    if run.done:
        committed = sb.downstream.execute(last_commit())[0][0]
        finished = float(committed) if committed is not None else finished
    run.seconds = finished - started
    run.applied = span.applied(watermarks(sb))
    return run


# -- lag ------------------------------------------------------------------------------------------------
class Markers:
    """A marker row committed every MARKER_EVERY s on the shards in turn, each timed when its
    commit returned, and watched for downstream every 20 ms."""

    def __init__(self, sb: Sandbox, merged: bool = True) -> None:
        """`merged`: watched in the merged table, else in the anchor's copies of the schemas."""
        self.sb = sb
        tables = [f"{TARGET_SCHEMA}.sbtest2"] if merged else [f"{s.schema}.sbtest2" for s in SHARDS]
        self.query = " UNION ALL ".join(f"SELECT -k FROM {t} WHERE k < 0" for t in tables)
        self.sent: dict[int, float] = {}
        self.arrived: dict[int, float] = {}
        self.lock = threading.Lock()
        self.writing = threading.Event()
        self.watching = threading.Event()
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._write, daemon=True),
                        threading.Thread(target=self._watch, daemon=True)]

    def __enter__(self) -> Markers:
        self.writing.set()
        self.watching.set()
        for t in self.threads:
            t.start()
        return self

    def stop_writing(self) -> None:
        self.writing.clear()
        self.threads[0].join(timeout=30)

    def __exit__(self, *exc: object) -> None:
        self.writing.clear()
        self.watching.clear()
        for t in self.threads:
            t.join(timeout=30)

    def _write(self) -> None:
        conns = [inst.connect(autocommit=True) for inst in self.sb.upstreams]
        try:
            tick = time.monotonic()
            while self.writing.is_set():
                n = next(MARKER_IDS)  # (each phase's markers new rows: the last phase's stay)
                shard = SHARDS[n % len(SHARDS)]
                sql = (f"INSERT INTO {shard.schema}.sbtest2 (id, k, c, pad) "
                       f"VALUES ({MARKER_BASE + n}, {-n}, 'marker {n}', '')")
                try:
                    with conns[shard.server].cursor() as cur:
                        cur.execute(sql)
                    with self.lock:
                        self.sent[n] = time.time()
                except pymysql.MySQLError as exc:  # not committed: not a marker
                    self.errors.append(str(exc))
                tick += MARKER_EVERY
                time.sleep(max(0.0, tick - time.monotonic()))
        finally:
            for conn in conns:
                conn.close()

    def _watch(self) -> None:
        with self.sb.downstream.connect(autocommit=True) as conn, conn.cursor() as cur:
            while self.watching.is_set():
                try:
                    cur.execute(self.query)
                except pymysql.MySQLError as exc:  # (a downstream DDL's lock, say): look again
                    self.errors.append(str(exc))
                    time.sleep(0.1)
                    continue
                now = time.time()
                with self.lock:
                    for (n,) in cur.fetchall():
                        self.arrived.setdefault(int(n), now)
                time.sleep(0.02)

    def lags(self) -> tuple[list[float], int]:
        """Seconds from commit upstream to sight downstream, and the markers never seen."""
        with self.lock:
            seen = [self.arrived[n] - t for n, t in self.sent.items() if n in self.arrived]
            return seen, len(self.sent) - len(seen)


@dataclass
class Lag:
    rate: int  # transactions/s asked of each sysbench
    load: Load
    lags: list[float]
    unseen: int
    run: Run  # the catch-up after the load stopped
    cpu: dict[str, float]
    span: Span


def lag_phase(sb: Sandbox, daemon: Daemon, args: argparse.Namespace, root: Path, rate: int) -> Lag:
    """The daemon caught up and running; sysbench at `rate` transactions/s per shard schema and
    the markers; then the catch-up after both stop, timed to the daemon's last commit."""
    starts = positions(sb)
    with CpuWatch(daemon_kinds(sb, daemon)) as cpu, Markers(sb) as markers:
        load = run_load(sb, args, root, "lag", args.lag_time, rate=rate)
        markers.stop_writing()
        stopped, ends = time.time(), positions(sb)
        done, error = catch_up(sb, daemon, ends, args.timeout)
        finished = time.time()
        if done:  # the last markers' sight, after the last commit
            poll_until(lambda: markers.lags()[1] == 0, 5)
    span = measure_span(sb, starts, ends)
    run = Run("catch-up", span.total, done=done, error=error)
    if done:
        committed = sb.downstream.execute(last_commit())[0][0]
        finished = max(stopped, float(committed)) if committed is not None else finished
    run.seconds = finished - stopped
    run.applied = span.applied(watermarks(sb))
    seen, unseen = markers.lags()
    return Lag(rate, load, seen, unseen, run, cpu.spent(), span)


def anchor_lag_phase(sb: Sandbox, args: argparse.Namespace, root: Path, rate: int) -> Lag:
    """The native replica live from the positions of now (the daemon stopped meanwhile), under
    the same load and markers as the daemon's lag phase, watched in its copies; then its
    catch-up after the load stopped."""
    starts = positions(sb)
    replica_from(sb, starts)
    try:
        sb.downstream.execute("START ALL SLAVES")
        with CpuWatch(server_kinds(sb)) as cpu, Markers(sb, merged=False) as markers:
            load = run_load(sb, args, root, "anchor-lag", args.lag_time, rate=rate)
            markers.stop_writing()
            stopped, ends = time.time(), positions(sb)
            done = poll_until(lambda: reached(replica_state(sb)[0], ends), args.timeout, every=0.05)
            finished = time.time()
            if done:
                poll_until(lambda: markers.lags()[1] == 0, 5)
        span = measure_span(sb, starts, ends)
        run = Run("catch-up", span.total, done=done)
        run.seconds = finished - stopped
        run.applied = span.applied(replica_state(sb)[0])
    finally:
        replica_gone(sb)
    seen, unseen = markers.lags()
    return Lag(rate, load, seen, unseen, run, cpu.spent(), span)


# -- correctness ---------------------------------------------------------------------------------------
def checksum(inst: Instance, table: str, columns: list[str], where: str = "") -> tuple[int, int]:
    """Rows and an order-free checksum of their values (NULLs skipped alike on both sides)."""
    expr = "CONCAT_WS('|', " + ", ".join(f"`{c}`" for c in columns) + ")"
    sql = f"SELECT COUNT(*), COALESCE(SUM(CRC32({expr})), 0) FROM {table}"
    sql += f" WHERE {where}" if where else ""
    count, total = inst.execute(sql)[0]
    return int(count), int(total)


def compare(sb: Sandbox, merged: bool) -> list[str]:
    """One line per shard table: its rows upstream against its rows downstream, in the merged
    table (`merged`) or in the anchor's copy of its schema."""
    lines = []
    for shard in SHARDS:
        for table in TABLES:
            columns = shard_columns(sb, shard, table)
            up = checksum(sb.upstreams[shard.server], f"{shard.schema}.{table}", columns)
            if merged:
                down = checksum(sb.downstream, f"{TARGET_SCHEMA}.{table}", columns, shard.where(table))
            else:
                down = checksum(sb.downstream, f"{shard.schema}.{table}", columns)
            verdict = "OK" if up == down else f"DIFF: downstream {down[0]:,} rows, checksum {down[1]}"
            name = f"{shard.source}.{shard.schema}.{table}"
            lines.append(f"  {name}: {up[0]:,} rows, checksum {up[1]}: {verdict}")
    return lines


def daemon_health(sb: Sandbox, root: Path) -> list[str]:
    """What the daemon logged at WARNING or above, paused and refused."""
    text = ""
    with suppress(OSError):
        text = (root / "daemon.log").read_text(errors="replace")
    bad = [line for line in text.splitlines() if re.search(r" (WARNING|ERROR|CRITICAL) |Traceback", line)]
    out = [f"  log lines at WARNING or above: {len(bad)}"]
    # the first few distinct ones (a line's first 24 characters are its time)
    out += [f"    {line[:240]}" for line in {line[24:]: line for line in reversed(bad)}.values()][-8:]
    for what, sql in (
        ("paused shards", f"SELECT shard, LEFT(reason, 300) FROM {META}.pause"),
        ("refused rows (dead letters)", f"SELECT shard, LEFT(error, 300) FROM {META}.dead_letter"),
    ):
        try:
            rows = sb.downstream.execute(sql)
        except pymysql.MySQLError as exc:
            out.append(f"  {what}: unknown ({exc})")
            continue
        out.append(f"  {what}: {len(rows)}")
        out += [f"    {r[0]}: {r[1]}" for r in rows[:5]]
    ddl = [line.split("shardmerge.ddl: ", 1)[1][:200] for line in text.splitlines()
           if "shardmerge.ddl: " in line]
    out += [f"  DDL decision: {line}" for line in ddl[:6]]
    return out


# -- the bench ------------------------------------------------------------------------------------------
def lag_rate(args: argparse.Namespace, load: Load) -> int:
    """sysbench's --rate per shard schema in the lag phases: --rate, else --lag-share of what
    it did unthrottled. (Unthrottled, sysbench and the upstream servers take most of two
    cores by themselves: the replica and the daemon live beside them need a share left.)"""
    tps = float(args.rate) if args.rate else load.tps * args.lag_share
    return max(1, round(tps / len(SHARDS)))


def lag_text(seconds: float) -> str:
    return "not seen" if seconds == float("inf") else f"{seconds * 1000:,.0f} ms"


def print_lag(lag: Lag, args: argparse.Namespace, who: str) -> None:
    print(f"\nlag, {who}: sysbench --rate={lag.rate} on each shard schema ({lag.rate * len(SHARDS):,} "
          f"transactions/s asked, {lag.load.tps:,.0f} done) for {args.lag_time:g} s, "
          f"{lag.span.total:,} row changes")
    # a marker never seen counts as the longest lag of all: p99 is not made up of the seen alone
    lags = lag.lags + [float("inf")] * lag.unseen
    if lags:
        p50, p99 = (lag_text(percentile(lags, p)) for p in (50, 99))
        unseen = f", {lag.unseen} not seen by the end of the catch-up" if lag.unseen else ""
        print(f"  lag p50 {p50}, p99 {p99} ({len(lags)} markers{unseen})")
    else:
        print("  lag: no marker was committed")
    what = f"in {lag.run.seconds:.1f} s" if lag.run.done else lag.run.text()
    print(f"  catch-up after the load stopped: {what}")
    print(f"  CPU (throttled): {cpu_text(lag.cpu, lag.span.total)}; sysbench {lag.load.cpu:.1f} s")


def phase(title: str) -> float:
    print(title, end=" ... ", flush=True)
    return time.perf_counter()


def bench(sb: Sandbox, args: argparse.Namespace, root: Path) -> int:
    print(f"sysbench oltp_{args.workload}: {len(SHARDS)} shard schemas (sb_1, sb_2 on up1; sb_3, sb_4 on "
          f"up2) x {len(TABLES)} tables x {args.table_size:,} rows; merged tables of "
          f"{args.table_size * len(SHARDS):,} rows; {args.threads} threads per schema; "
          f"{os.cpu_count()} cores; {compiled.status()}")
    t = phase("prepare")
    prepare(sb, args, root)
    starts = positions(sb)
    t = phase(f"{time.perf_counter() - t:.1f} s; the daemon's first start")
    config = first_start(sb, root, starts, args.timeout)
    t = phase(f"{time.perf_counter() - t:.1f} s; initial copy downstream")
    copy_in(sb, root, anchor=True)
    print(f"{time.perf_counter() - t:.1f} s", flush=True)

    with CpuWatch(server_kinds(sb)) as cpu:
        load = run_load(sb, args, root, "load", args.time, alter=True)
    span = measure_span(sb, starts, positions(sb))
    print(f"\nload: {load.tps:,.0f} transactions/s upstream ({load.transactions:,} in {load.seconds:.1f} s, "
          f"{load.ignored_errors} ignored errors); ALTER {', '.join(load.alters) or 'none'}")
    print(f"  CPU: sysbench {load.cpu:.1f} s, {cpu_text(cpu.spent(), 0)}")
    print(f"span: {span.total:,} row changes in {span.transactions:,} transactions "
          f"({span.total / max(1, span.transactions):.2f} per transaction)")

    base = anchor(sb, span, args.timeout)
    print(f"\nanchor, native multi-source replica (unthrottled): {base.text()}")
    print(f"  CPU: {cpu_text(base.cpu, span.total)}")
    copies = compare(sb, merged=False)
    wrong = [line for line in copies if not line.endswith(": OK")]
    print(f"  its copies of the shard tables: {len(copies) - len(wrong)} of {len(copies)} OK",
          *wrong, sep="\n")

    daemon = Daemon(config, root / "daemon.log")
    try:
        mine = shardmerge(sb, daemon, span, args.timeout)
        print(f"\nshardmerge (unthrottled, its start included): {mine.text()}")
        print(f"  CPU: {cpu_text(mine.cpu, span.total)}")
        print(f"  shardmerge / anchor: {mine.rate() / base.rate() if base.rate() else 0:.3f}x"
              + ("" if mine.done else " (it did not catch up: its rows/s so far)"))
        if mine.done:
            rate = lag_rate(args, load)
            daemon.stop()  # (the replica alone under the load, as the daemon will be)
            print_lag(anchor_lag_phase(sb, args, root, rate), args, "native replica")
            daemon.start()
            caught, why = catch_up(sb, daemon, positions(sb), args.timeout)
            if not caught:
                print(f"\nlag phase: skipped (the daemon did not catch up after the replica's: {why})")
            else:
                print_lag(lag_phase(sb, daemon, args, root, rate), args, "shardmerge")
        else:
            print("\nlag phase: skipped (the daemon did not catch up the span)")
    finally:
        stopped = daemon.stop()
    print(f"\nthe daemon: {stopped}", *daemon_health(sb, root), sep="\n")
    lines = compare(sb, merged=True)
    behind = "" if mine.done else " (the daemon did not catch up: a DIFF may be rows it had not applied)"
    print(f"\nmerged tables against the shards{behind}:", *lines, sep="\n")
    return 0 if all(line.endswith(": OK") for line in lines) else 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--table-size", type=int, default=250_000, help="rows of each shard table")
    parser.add_argument("--threads", type=int, default=2, help="sysbench threads per shard schema")
    parser.add_argument("--time", type=float, default=60.0, help="seconds of unthrottled load")
    parser.add_argument("--workload", choices=("write_only", "read_write"), default="write_only")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds any catch-up may take")
    parser.add_argument("--lag-time", type=float, default=30.0, help="seconds of the lag phase's load")
    parser.add_argument("--rate", type=int, default=0,
                        help="transactions/s of the lag phases, in all (default: --lag-share of the load's)")
    parser.add_argument("--lag-share", type=float, default=0.5,
                        help="the lag phases' rate as a share of the unthrottled load's (default 0.5)")
    parser.add_argument("--keep", action="store_true", help="leave the sandbox running and its folder")
    args = parser.parse_args()
    as_installed()  # (as a pip-installed daemon starts)
    if shutil.which("sysbench") is None:
        raise SystemExit("sysbench not found: apt-get install sysbench (make bench-sysbench does it)")

    root = Path(tempfile.mkdtemp(prefix="shardmerge-sysbench-"))
    # 1 GB of buffer pool: the merged tables of the full size (2 x 1M rows) stay in memory
    sb = Sandbox(root / "sandbox", upstreams=2, watchdog=not args.keep,
                 server_options=("--innodb-buffer-pool-size=1G",))
    with sandbox_up(sb, root, args.keep):
        return bench(sb, args, root)


@contextmanager
def sandbox_up(sb: Sandbox, root: Path, keep: bool) -> Iterator[None]:
    sb.up()
    try:
        yield
    finally:
        if keep:
            print(f"\nkept: {root} (daemon.log, task.yaml); stop the servers with "
                  f".venv/bin/shardmerge sandbox down --dir {sb.root}")
        else:
            sb.down()
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
