"""End-to-end replication throughput and lag, next to the decoder alone.

On a private sandbox (2 upstream MariaDB servers, 1 downstream), each source gets
a shard table and a fixed workload of row changes (inserts, and one update per
ten rows); then, in the same run:

1. baseline: python-mysql-replication alone decodes the same binlogs, one process
   per source in parallel (what our workers do before any of our work), rows/s;
2. shardmerge: the daemon replicates the same binlogs from the same start into the
   downstream table, rows/s from start to caught up; the ratio of the two;
3. lag: with the daemon caught up, each source takes a steady load of 5,000
   rows/s; marker rows timestamped at their upstream commit are watched for
   downstream; p50 and p99 of the delay.

    .venv/bin/python bench/replication.py [--rows 500000] [--rate 5000] [--seconds 20]

Goals (issue 4): ratio >= 0.6; lag p99 < 1 s.
"""

from __future__ import annotations

import argparse
import multiprocessing
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from replicator.sandbox import Sandbox

REPO = Path(__file__).resolve().parent.parent
TABLE = (
    "CREATE TABLE {t} (id BIGINT NOT NULL PRIMARY KEY, a INT NOT NULL, b VARCHAR(32) NOT NULL, "
    "c DECIMAL(10,2) NOT NULL, d DATETIME NOT NULL) DEFAULT CHARSET=utf8mb4"
)


def master_position(inst) -> tuple[str, int]:
    file, pos = inst.execute("SHOW MASTER STATUS")[0][:2]
    return file, int(pos)


def load(inst, schema: str, rows: int, start_id: int = 1, chunk: int = 2000) -> int:
    """Insert `rows` rows and update a tenth of them; returns the row changes made."""
    changes = 0
    with inst.connect(schema) as conn, conn.cursor() as cur:
        for first in range(start_id, start_id + rows, chunk):
            last = min(first + chunk, start_id + rows)
            values = ",".join(
                f"({i},{i % 1000},'row {i}',{i % 100000}.25,'2026-11-21 10:00:00')"
                for i in range(first, last)
            )
            cur.execute(f"INSERT INTO orders VALUES {values}")
            changes += last - first
            cur.execute(f"UPDATE orders SET a = a + 1 WHERE id >= {first} AND id < {last} AND id % 10 = 0")
            changes += cur.rowcount
    return changes


def decode(args: tuple) -> int:
    """The baseline: decode one source's binlog from start to end, touching every row."""
    port, file, pos, server_id = args
    stream = BinLogStreamReader(
        {"host": "127.0.0.1", "port": port, "user": "root", "passwd": ""},
        server_id=server_id,
        resume_stream=True,
        log_file=file,
        log_pos=pos,
        blocking=False,
        is_mariadb=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
    )
    rows = 0
    for event in stream:
        rows += len(event.rows)
    stream.close()
    return rows


def config_text(sandbox: Sandbox, starts: list[tuple[str, int]], workers: int) -> str:
    sources = "".join(
        f"  - id: s{i}\n    host: 127.0.0.1\n    port: {inst.port}\n    user: root\n"
        f"    server_id: {8800 + i}\n"
        f"    start: {{file: {start[0]}, pos: {start[1]}}}\n"
        for i, (inst, start) in enumerate(zip(sandbox.upstreams, starts, strict=True), start=1)
    )
    return (
        f"task: bench\nsources:\n{sources}target:\n  host: 127.0.0.1\n  port: {sandbox.downstream.port}\n"
        f"  user: root\n  flavor: mariadb\nroutes:\n  - schema: 'bench_*'\n    table: orders\n"
        f"    target: merged.orders\n    extract: {{source: _source}}\n"
        f"options:\n  workers: {workers}\n  batch_size: 1000\n  heartbeat: 1\n"
    )


def count(down) -> int:
    return int(down.execute("SELECT COUNT(*) FROM merged.orders")[0][0])


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def steady_load(inst, schema: str, rate: int, seconds: float, first_id: int, markers: dict, lock) -> None:
    """`rate` rows/s in batches every 50 ms; the first row of each batch is a marker
    whose commit time is recorded."""
    per_tick = max(1, rate // 20)
    next_id = first_id
    deadline = time.monotonic() + seconds
    with inst.connect(schema) as conn, conn.cursor() as cur:
        tick = time.monotonic()
        while time.monotonic() < deadline:
            values = ",".join(
                f"({i},{i % 1000},'steady {i}',1.25,'2026-11-21 10:00:00')"
                for i in range(next_id, next_id + per_tick)
            )
            cur.execute(f"INSERT INTO orders VALUES {values}")
            committed = time.time()
            with lock:
                markers[(schema, next_id)] = committed
            next_id += per_tick
            tick += 0.05
            time.sleep(max(0.0, tick - time.monotonic()))


def watch_markers(down, markers: dict, lock, arrived: dict, stop: threading.Event) -> None:
    sources = {}
    with down.connect("merged") as conn, conn.cursor() as cur:
        while not stop.is_set() or len(arrived) < len(markers):
            with lock:
                pending = [k for k in markers if k not in arrived]
            if not pending:
                time.sleep(0.005)
                if stop.is_set():
                    break
                continue
            ids = ",".join(str(k[1]) for k in pending)
            cur.execute(f"SELECT _source, id FROM orders WHERE id IN ({ids})")
            now = time.time()
            for source, key in cur.fetchall():
                schema = sources.setdefault(source, f"bench_{source[1:]}")
                if (schema, key) in markers and (schema, key) not in arrived:
                    arrived[(schema, key)] = now
            conn.commit()
            time.sleep(0.005)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=500_000, help="rows inserted per source")
    parser.add_argument("--rate", type=int, default=5000, help="steady rows/s per source for the lag run")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the lag run")
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="shardmerge-bench-"))
    sandbox = Sandbox(root / "sandbox", upstreams=2)
    sandbox.up()
    daemon = None
    try:
        for i, inst in enumerate(sandbox.upstreams, start=1):
            inst.execute([f"CREATE DATABASE bench_{i}", TABLE.format(t=f"bench_{i}.orders")])
        starts = [master_position(inst) for inst in sandbox.upstreams]
        t0 = time.perf_counter()
        with multiprocessing.Pool(2) as pool:
            changes = sum(
                pool.starmap(
                    load,
                    [(inst, f"bench_{i}", args.rows) for i, inst in enumerate(sandbox.upstreams, start=1)],
                )
            )
        print(f"workload: {changes:,} row changes on 2 sources in {time.perf_counter() - t0:.1f} s")

        # 1. the decoder alone, one process per source
        t0 = time.perf_counter()
        with multiprocessing.Pool(2) as pool:
            decoded = sum(
                pool.map(
                    decode,
                    [
                        (inst.port, *start, 8700 + i)
                        for i, (inst, start) in enumerate(zip(sandbox.upstreams, starts, strict=True))
                    ],
                )
            )
        baseline_s = time.perf_counter() - t0
        baseline = decoded / baseline_s
        print(
            f"mysql-replication alone: {decoded:,} rows decoded in {baseline_s:.1f} s "
            f"= {baseline:,.0f} rows/s"
        )

        # 2. shardmerge end to end
        config = root / "bench.yaml"
        config.write_text(config_text(sandbox, starts, args.workers))
        log = (root / "daemon.log").open("w")
        t0 = time.perf_counter()
        daemon = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "replicator.control.cli",
                "run",
                "--config",
                str(config),
                "--log-level",
                "WARNING",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
        down = sandbox.downstream
        expected = 2 * args.rows
        while True:
            time.sleep(0.5)
            try:
                if count(down) >= expected:
                    break
            except Exception:
                pass
            if daemon.poll() is not None:
                raise SystemExit(f"the daemon stopped; see {root / 'daemon.log'}")
        # updates land after their inserts; wait until the last of them is there too
        while int(down.execute("SELECT COALESCE(SUM(a), 0) FROM merged.orders")[0][0]) != sum(
            int(inst.execute("SELECT SUM(a) FROM orders", database=f"bench_{i}")[0][0])
            for i, inst in enumerate(sandbox.upstreams, start=1)
        ):
            time.sleep(0.2)
        e2e_s = time.perf_counter() - t0
        e2e = changes / e2e_s
        print(
            f"shardmerge end to end:   {changes:,} row changes applied in {e2e_s:.1f} s = {e2e:,.0f} rows/s "
            f"(including the daemon's start)"
        )
        print(
            f"ratio end-to-end / decode: {e2e / baseline:.2f}   (goal >= 0.6: "
            f"{'met' if e2e / baseline >= 0.6 else 'NOT met'})"
        )

        # 3. lag under a steady load
        markers: dict = {}
        arrived: dict = {}
        lock = threading.Lock()
        stop = threading.Event()
        watcher = threading.Thread(target=watch_markers, args=(down, markers, lock, arrived, stop))
        watcher.start()
        loaders = [
            threading.Thread(
                target=steady_load,
                args=(inst, f"bench_{i}", args.rate, args.seconds, 10_000_000, markers, lock),
            )
            for i, inst in enumerate(sandbox.upstreams, start=1)
        ]
        for t in loaders:
            t.start()
        for t in loaders:
            t.join()
        stop.set()
        watcher.join(timeout=30)
        lags = [arrived[k] - markers[k] for k in markers if k in arrived]
        lost = len(markers) - len(lags)
        print(
            f"lag at {args.rate:,} rows/s per source over {args.seconds:.0f} s: "
            f"p50 {percentile(lags, 50) * 1000:.0f} ms   p99 {percentile(lags, 99) * 1000:.0f} ms"
            f"   max {max(lags) * 1000:.0f} ms   ({len(lags)} markers{f', {lost} not seen' if lost else ''})"
        )
        print(f"goal lag p99 < 1 s: {'met' if percentile(lags, 99) < 1 else 'NOT met'}")
    finally:
        if daemon is not None:
            daemon.terminate()
            daemon.wait(timeout=60)
        sandbox.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
