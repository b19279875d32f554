"""Backfill throughput: `shardmerge backfill` next to mydumper + myloader and mysqldump.

On a private sandbox (2 upstream MariaDB servers, 1 downstream), 4 shard tables (2
per server) hold --rows rows in all (a 6-column order table with a secondary
index). In the same run, each into an empty downstream:

1. mysqldump x4: for every shard, `mysqldump --no-create-info | sed (rename the
   table) | mariadb` into the merged table, the 4 pipelines side by side;
2. mydumper + myloader: per server, `mydumper -t 4 --rows` into a folder, then
   `myloader -t 4` of it into the downstream, both servers side by side (each
   shard lands in a table of its own, as myloader restores; it writes no binlog by
   default, the backfill does: both as a user runs them);
3. shardmerge cold: the `shardmerge backfill` command in a fresh process (JVM and
   SparkSession start included), as a user runs it;
4. shardmerge warm: `backfill()` in a SparkSession already up (its start timed
   apart), then once more in it (hot: the JVM has compiled the copy's code).

Prints seconds, rows/s, the ratios to each anchor, and the CPU seconds of each
process kind (the CLI's Python, Spark's JVM (driver and, in local mode, the
executors), executors on a cluster, the upstream and downstream servers, the dump
and load tools): on a small machine all share the same cores.

With --workers 1,2 the cold command runs again on a Spark standalone cluster of 1
and then 2 workers (one core each) and prints rows/s of each.

    .venv/bin/python bench/backfill.py [--rows 1000000] [--workers 1,2] [--spark-conf KEY=VALUE]

Goals (issue 16): cold >= 1x mydumper + myloader at 1M rows, >= 2x at 5M; warm
>= 2x at 1M.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from replicator.config import load_config  # noqa: E402
from replicator.sandbox import Sandbox  # noqa: E402

TABLE = (
    "CREATE TABLE {t} (id BIGINT NOT NULL PRIMARY KEY, customer INT NOT NULL, amount DECIMAL(10,2) NOT NULL, "
    "note VARCHAR(64) NULL, created DATETIME NOT NULL, status TINYINT NOT NULL DEFAULT 0, "
    "KEY by_customer (customer)) DEFAULT CHARSET=utf8mb4"
)
SHARDS = [
    ("up1", "shop_01", "orders_1"),
    ("up1", "shop_01", "orders_2"),
    ("up2", "shop_02", "orders_3"),
    ("up2", "shop_02", "orders_4"),
]
SHARDMERGE = Path(sys.executable).with_name("shardmerge")


def prepare(sb: Sandbox, rows: int) -> None:
    per = rows // len(SHARDS)
    for n, (inst_name, schema, table) in enumerate(SHARDS):
        inst = sb.instance(inst_name)
        inst.execute(f"CREATE DATABASE IF NOT EXISTS {schema}")
        inst.execute(TABLE.format(t=f"{schema}.{table}"))
        inst.execute(
            f"INSERT INTO {schema}.{table} SELECT {n * per} + seq, seq % 9973, (seq % 100000) + 0.25, "
            f"CONCAT('order note number ', seq), '2026-11-21 10:00:00' + INTERVAL (seq % 86400) SECOND, "
            f"seq % 5 FROM {schema}.seq_0_to_{per - 1}"
        )
        inst.execute(f"ANALYZE TABLE {schema}.{table}")  # the row estimate the splits are planned on


def config_file(sb: Sandbox, workdir: Path) -> Path:
    sources = "".join(
        f"  - id: s{i}\n    host: 127.0.0.1\n    port: {inst.port}\n    user: root\n    password: ''\n"
        f"    server_id: {900 + i}\n"
        for i, inst in enumerate(sb.upstreams, start=1)
    )
    path = workdir / "bench.yaml"
    path.write_text(
        f"task: bench\nsources:\n{sources}target:\n  host: 127.0.0.1\n  port: {sb.downstream.port}\n"
        f"  user: root\n  password: ''\n  flavor: mariadb\n"
        f"routes:\n  - schema: 'shop_*'\n    table: 'orders_*'\n    target: shop.orders\n"
    )
    return path


def reset_downstream(sb: Sandbox, create: bool) -> None:
    sb.downstream.execute(
        ["DROP DATABASE IF EXISTS shop", "DROP DATABASE IF EXISTS shardmerge_meta"]
        + [f"DROP DATABASE IF EXISTS {schema}" for schema in sorted({s[1] for s in SHARDS})]
    )
    if create:
        sb.downstream.execute(["CREATE DATABASE shop", TABLE.format(t="shop.orders")])


def downstream_rows(sb: Sandbox, tables: list[str]) -> int:
    return sum(sb.downstream.execute(f"SELECT COUNT(*) FROM {t}")[0][0] for t in tables)


# -- the anchors --------------------------------------------------------------------------------
def mysqldump(sb: Sandbox, workdir: Path) -> list[str]:
    down = sb.downstream
    reset_downstream(sb, create=True)

    def pipe(shard) -> None:
        inst = sb.instance(shard[0])
        command = (
            f"mysqldump -h127.0.0.1 -P{inst.port} -uroot --no-create-info --complete-insert --skip-add-locks "
            f"--single-transaction {shard[1]} {shard[2]} | sed 's/`{shard[2]}`/`orders`/g' | "
            f"mariadb -h127.0.0.1 -P{down.port} -uroot shop"
        )
        subprocess.run(command, shell=True, check=True, executable="/bin/bash")

    with ThreadPoolExecutor(len(SHARDS)) as pool:
        list(pool.map(pipe, SHARDS))
    return ["shop.orders"]


def mydumper_myloader(sb: Sandbox, workdir: Path, rows: int) -> list[str]:
    reset_downstream(sb, create=False)
    servers = sorted({(s[0], s[1]) for s in SHARDS})
    chunk = max(10_000, rows // len(SHARDS) // 8)

    def dump_and_load(server: tuple[str, str]) -> None:
        name, schema = server
        folder = workdir / f"dump-{name}"
        subprocess.run(["rm", "-rf", str(folder)], check=True)
        port = sb.instance(name).port
        tool(["mydumper", "-h", "127.0.0.1", "-P", str(port), "-u", "root", "-B", schema, "-t", "4",
              "--rows", str(chunk), "--trx-consistency-only", "-o", str(folder)])
        tool(["myloader", "-h", "127.0.0.1", "-P", str(sb.downstream.port), "-u", "root", "-d", str(folder),
              "-t", "4"])

    with ThreadPoolExecutor(len(servers)) as pool:
        list(pool.map(dump_and_load, servers))
    return [f"{schema}.{table}" for _, schema, table in SHARDS]


def tool(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")


# -- shardmerge -----------------------------------------------------------------------------------
def cold(
    config: Path, master: str | None = None, settings: tuple[str, ...] = (), split: int | None = None
) -> None:
    command = [str(SHARDMERGE), "backfill", "--config", str(config)]
    if split:
        command += ["--rows-per-split", str(split)]
    if master:
        command += ["--spark-master", master]
    for setting in settings:
        command += ["--spark-conf", setting]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"shardmerge backfill failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


# -- CPU per process kind ---------------------------------------------------------------------------
class CpuSampler:
    """CPU seconds per process kind while a step runs: /proc read every 0.1 s, the last
    figure of each process kept (processes that end mid-step count up to their last
    sample)."""

    def __init__(self, sb: Sandbox) -> None:
        self.sb = sb
        self.tick = os.sysconf("SC_CLK_TCK")
        self.seen: dict[int, tuple[str, float]] = {}
        self.base: dict[int, float] = {}
        self._stop = threading.Event()

    def kind(self, cmd: str) -> str | None:
        if "mariadbd" in cmd and str(self.sb.root) in cmd:
            return "downstream" if f"--port={self.sb.downstream.port}" in cmd else "upstreams"
        if "java" in cmd:
            if "CoarseGrainedExecutorBackend" in cmd:
                return "executors"
            if "deploy.master.Master" in cmd or "deploy.worker.Worker" in cmd:
                return "cluster daemons"
            return "spark JVM"
        if "shardmerge" in cmd and "python" in cmd:
            return "CLI python"
        for tool in ("mydumper", "myloader", "mysqldump", "mariadb ", "sed "):
            if cmd.startswith(tool) or f"/{tool}" in cmd:
                return "dump/load tools"
        return None

    def read(self) -> dict[int, tuple[str, float]]:
        out = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            kind = self.kind(cmd)
            if kind is not None:
                out[int(pid)] = (kind, (int(fields[11]) + int(fields[12])) / self.tick)
        return out

    def __enter__(self) -> CpuSampler:
        self.base = {pid: cpu for pid, (_, cpu) in self.read().items()}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.seen.update(self.read())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.seen.update(self.read())

    def spent(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for pid, (kind, cpu) in self.seen.items():
            out[kind] = out.get(kind, 0.0) + cpu - self.base.get(pid, 0.0)
        return {k: v for k, v in sorted(out.items()) if v >= 0.05}


def timed(sb: Sandbox, step: Callable[[], object]) -> tuple[float, dict[str, float], object]:
    with CpuSampler(sb) as cpu:
        started = time.perf_counter()
        result = step()
        seconds = time.perf_counter() - started
    return seconds, cpu.spent(), result


def line(name: str, seconds: float, rows: int, cpu: dict[str, float]) -> str:
    shares = ", ".join(f"{k} {v:.1f}s" for k, v in cpu.items())
    return f"{name:<34} {seconds:7.2f} s {rows / seconds:10.0f} rows/s   CPU: {shares}"


def scaling(sb: Sandbox, config: Path, rows: int, workers: list[int], settings: tuple[str, ...]) -> None:
    from replicator.spark.cluster import LocalCluster

    for n in workers:
        with LocalCluster(workers=n, cores=1) as cluster:
            reset_downstream(sb, create=False)
            seconds, cpu, _ = timed(sb, lambda: cold(config, cluster.master, settings))
            assert downstream_rows(sb, ["shop.orders"]) == rows
            print(line(f"cold, cluster of {n} worker(s)", seconds, rows, cpu), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--workers", default="", help="e.g. 1,2: the cold command on a standalone cluster")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="to every run")
    parser.add_argument("--rows-per-split", type=int, help="the backfill's chunks (default: its own)")
    args = parser.parse_args()
    # (before the rows are made: a tool missing at its turn was a traceback minutes in)
    missing = [tool for tool in ("mydumper", "myloader", "mysqldump") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(
            f"{', '.join(missing)} not found: apt-get install mydumper mariadb-client "
            "(make bench-backfill installs mydumper)"
        )
    settings = tuple(args.spark_conf)
    rows = args.rows - args.rows % len(SHARDS)
    with tempfile.TemporaryDirectory(prefix="bench-backfill-") as tmp, Sandbox(Path(tmp) / "sb") as sb:
        work = Path(tmp)
        print(f"preparing {rows} rows in {len(SHARDS)} shards on 2 servers ...", flush=True)
        prepare(sb, rows)
        config = config_file(sb, work)
        seconds: dict[str, float] = {}

        def run(name: str, step: Callable[[], object], tables: list[str] | None = None) -> None:
            took, cpu, made = timed(sb, step)
            assert downstream_rows(sb, tables or made) == rows, name  # type: ignore[arg-type]
            seconds[name] = took
            print(line(name, took, rows, cpu), flush=True)

        run("mysqldump | sed | mariadb x4", lambda: mysqldump(sb, work))
        run("mydumper + myloader", lambda: mydumper_myloader(sb, work, rows))
        reset_downstream(sb, create=False)
        split = args.rows_per_split
        run("shardmerge backfill, cold", lambda: cold(config, None, settings, split), ["shop.orders"])

        from replicator.spark.backfill import backfill
        from replicator.spark.session import spark_session

        started = time.perf_counter()
        spark = spark_session(conf=dict(s.split("=", 1) for s in settings))
        spark.range(1).count()
        print(f"(SparkSession start, apart: {time.perf_counter() - started:.2f} s)", flush=True)
        task = load_config(config)
        chunks = {"rows_per_split": split} if split else {}
        for name in ("shardmerge backfill, warm", "shardmerge backfill, hot"):
            reset_downstream(sb, create=False)
            run(name, lambda: backfill(task, spark, **chunks), ["shop.orders"])
        spark.stop()

        anchor = seconds["mydumper + myloader"]
        goals = {"cold": 1.0 if rows < 5_000_000 else 2.0, "warm": 2.0, "hot": None}
        for run_kind, goal in goals.items():
            ours = seconds[f"shardmerge backfill, {run_kind}"]
            wanted = f" (goal {goal:g}x)" if goal else ""
            print(
                f"{run_kind:<5}: {anchor / ours:5.2f}x mydumper + myloader{wanted}, "
                f"{seconds['mysqldump | sed | mariadb x4'] / ours:5.2f}x mysqldump x4"
            )
        if args.workers:
            scaling(sb, config, rows, [int(n) for n in args.workers.split(",")], settings)


if __name__ == "__main__":
    main()
