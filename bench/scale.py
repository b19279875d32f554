"""One daemon, many shards: 1,024 shard tables over 4 sources, each ALTERed once while
rows flow (issue 13's scale run; a bench, not a timed test).

Every shard table starts as (id, a, x); a writer per source inserts single rows into
random shard tables at `--rate` rows/s. Then every shard drops x, in random order over
`--spread` seconds. The join keeps x while any shard has it, so the downstream DROP
COLUMN is the last shard's doing: the bench reports how long after that shard's ALTER
the column is gone downstream, the rows/s applied downstream before, during and
after the ALTERs (rows keep flowing), that every row arrived, and the daemon's
memory (RSS of the daemon and of its source workers, largest seen).

    .venv/bin/python -m bench.scale [--sources 4] [--shards 1024] [--rate 500] [--spread 30]

Goal (issue 13): the downstream DDL within 2 s of the last shard's ALTER.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import threading
import time
from itertools import pairwise
from pathlib import Path

from bench.replication import as_installed, children, percentile
from replicator.sandbox import Instance, Sandbox

REPO = Path(__file__).resolve().parent.parent
TABLE = "CREATE TABLE {t} (id BIGINT NOT NULL PRIMARY KEY, a INT NOT NULL, x INT NULL) CHARSET=utf8mb4"
PER_SCHEMA = 64


def shard_tables(sources: int, shards: int) -> list[list[str]]:
    """Each source's shard tables, `shop_SS.orders_NNN`, 64 to a schema."""
    per_source = shards // sources
    out = []
    for s in range(sources):
        first = s * per_source
        out.append([f"shop_{(first + i) // PER_SCHEMA:02d}.orders_{first + i:04d}"
                    for i in range(per_source)])
    return out


def config_text(sandbox: Sandbox) -> str:
    sources = "".join(
        f"  - id: s{i}\n    host: 127.0.0.1\n    port: {inst.port}\n    user: root\n"
        f"    server_id: {8900 + i}\n"
        for i, inst in enumerate(sandbox.upstreams, start=1)
    )
    return (
        f"task: scale\nsources:\n{sources}target:\n  host: 127.0.0.1\n  port: {sandbox.downstream.port}\n"
        f"  user: root\n  flavor: mariadb\n  meta_schema: scale_meta\nroutes:\n  - schema: 'shop_*'\n"
        f"    table: 'orders_*'\n    target: merged.orders\n"
        f"    extract: {{source: _source, schema: _schema, table: _table}}\n"
        f"options:\n  workers: 4\n  batch_size: 1000\n  heartbeat: 1\n"
    )


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Writer(threading.Thread):
    """Single-row inserts into random shard tables of one source, `rate` rows/s."""

    def __init__(self, inst: Instance, tables: list[str], rate: int, seed: int) -> None:
        super().__init__(daemon=True)
        self.inst, self.tables, self.rate = inst, tables, rate
        self.random = random.Random(seed)
        self.stop = threading.Event()
        self.rows = 0

    def run(self) -> None:
        next_id = 1
        with self.inst.connect(autocommit=True) as conn, conn.cursor() as cur:
            tick = time.monotonic()
            while not self.stop.is_set():
                for _ in range(max(1, self.rate // 20)):
                    table = self.random.choice(self.tables)
                    cur.execute(f"INSERT INTO {table} (id, a) VALUES ({next_id}, 1)")
                    next_id += 1
                    self.rows += 1
                tick += 0.05
                time.sleep(max(0.0, tick - time.monotonic()))


def downstream_rows(down: Instance) -> int:
    return int(down.execute("SELECT COUNT(*) FROM merged.orders")[0][0])


def has_x(down: Instance) -> bool:
    return bool(down.execute(
        "SELECT COUNT(*) FROM information_schema.columns "
        "WHERE table_schema = 'merged' AND table_name = 'orders' AND column_name = 'x'")[0][0])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sources", type=int, default=4)
    parser.add_argument("--shards", type=int, default=1024)
    parser.add_argument("--rate", type=int, default=500, help="rows/s per source")
    parser.add_argument("--spread", type=float, default=30.0, help="seconds over which the shards ALTER")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    as_installed()  # (as a pip-installed daemon starts)

    root = Path(tempfile.mkdtemp(prefix="shardmerge-scale-"))
    sandbox = Sandbox(root / "sandbox", upstreams=args.sources)
    sandbox.up()
    daemon = None
    try:
        tables = shard_tables(args.sources, args.shards)
        for inst, mine in zip(sandbox.upstreams, tables, strict=True):
            schemas = sorted({t.split(".")[0] for t in mine})
            inst.execute([f"CREATE DATABASE {s}" for s in schemas] + [TABLE.format(t=t) for t in mine])
        config = root / "scale.yaml"
        config.write_text(config_text(sandbox))
        t0 = time.perf_counter()
        with (root / "daemon.log").open("w") as log:
            daemon = subprocess.Popen(
                [sys.executable, "-m", "replicator.cli.shardmerge", "run", "--config", str(config),
                 "--log-level", "WARNING"], stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
            )
        down = sandbox.downstream
        ready = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'merged'"
        while not down.execute(ready)[0][0]:
            if daemon.poll() is not None:
                raise SystemExit(f"the daemon stopped: see {root / 'daemon.log'}")
            time.sleep(0.2)
        print(f"{args.shards} shard tables on {args.sources} sources; the daemon ready in "
              f"{time.perf_counter() - t0:.1f} s")

        rss = {"daemon": 0.0, "workers": 0.0}
        samples: list[tuple[float, int]] = []  # (time, rows downstream)

        def sample() -> None:
            rss["daemon"] = max(rss["daemon"], rss_mb(daemon.pid))
            rss["workers"] = max(rss["workers"], sum(rss_mb(c) for c in children(daemon.pid)))
            samples.append((time.perf_counter(), downstream_rows(down)))

        writers = [Writer(inst, mine, args.rate, args.seed + i)
                   for i, (inst, mine) in enumerate(zip(sandbox.upstreams, tables, strict=True))]
        for w in writers:
            w.start()
        writing = time.perf_counter()
        warm_until = time.perf_counter() + 10
        while time.perf_counter() < warm_until:
            sample()
            time.sleep(0.5)

        # every shard drops x once, in random order over `spread` seconds
        order = [(inst, t) for inst, mine in zip(sandbox.upstreams, tables, strict=True) for t in mine]
        random.Random(args.seed).shuffle(order)
        alter_start = time.perf_counter()
        pause = args.spread / len(order)
        next_sample = time.perf_counter()
        for n, (inst, table) in enumerate(order):
            inst.execute(f"ALTER TABLE {table} DROP COLUMN x")
            if n == len(order) - 2:
                assert has_x(down), "x left downstream before the last shard dropped it"
            if time.perf_counter() >= next_sample:
                sample()
                next_sample += 0.5
            time.sleep(max(0.0, alter_start + (n + 1) * pause - time.perf_counter()))
        last_alter = time.perf_counter()
        while has_x(down):
            if time.perf_counter() - last_alter > 120:
                raise SystemExit("the downstream DROP COLUMN did not come within 120 s")
            time.sleep(0.02)
        landed = time.perf_counter() - last_alter
        sample()
        cool_until = time.perf_counter() + 10
        while time.perf_counter() < cool_until:
            sample()
            time.sleep(0.5)
        for w in writers:
            w.stop.set()
        for w in writers:
            w.join()
        written = sum(w.rows for w in writers)
        wrote = written / (time.perf_counter() - writing)
        deadline = time.perf_counter() + 120
        while downstream_rows(down) != written and time.perf_counter() < deadline:
            time.sleep(0.5)
        arrived = downstream_rows(down)

        def rate(start: float, end: float) -> float:
            inside = [(t, n) for t, n in samples if start <= t <= end]
            if len(inside) < 2:
                return float("nan")
            return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])

        per_second = [
            (b[1] - a[1]) / (b[0] - a[0]) for a, b in pairwise(samples)
            if alter_start <= a[0] and b[0] <= last_alter + landed
        ]
        print(f"writing {wrote:,.0f} rows/s in all (asked {args.rate * args.sources:,}); "
              f"{len(order)} ALTERs over "
              f"{last_alter - alter_start:.1f} s")
        lowest = min(per_second, default=float("nan"))
        middle = percentile(per_second, 50) if per_second else float("nan")
        print(f"rows/s downstream: before the ALTERs {rate(0, alter_start):,.0f}, during "
              f"{rate(alter_start, last_alter + landed):,.0f} (half-seconds: lowest {lowest:,.0f}, "
              f"p50 {middle:,.0f}), after {rate(last_alter + landed, float('inf')):,.0f}")
        print(f"the downstream DROP COLUMN landed {landed * 1000:.0f} ms after the last shard's ALTER "
              f"(goal < 2 s: {'met' if landed < 2 else 'NOT met'})")
        print(f"rows: {written:,} written, {arrived:,} downstream "
              f"({'all' if arrived == written else 'MISSING'})")
        print(f"RSS, largest seen: daemon {rss['daemon']:.0f} MB, "
              f"source workers {rss['workers']:.0f} MB in all")
    finally:
        if daemon is not None:
            daemon.terminate()
            daemon.wait(timeout=60)
        sandbox.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
