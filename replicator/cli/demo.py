"""`shardmerge demo` (what `make demo` runs): the daemon merging four live shards.

A local sandbox holds two upstream servers with two shard tables of `orders` each,
and one downstream server. `shardmerge run` merges the shards into `shop.orders`
while every shard takes rows and its own ALTERs, in its own order: an added
column, a dropped one, a widened type, a column rename, an index, and one
conflict (two shards add the same column with types that do not join) that
blocks one shard until the other gives way. The coordinator's decisions are
printed as they happen. At the end: the merged table, the schema history, and
each shard compared with its rows downstream, count and content.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from lattice import materialize, table_from_data
from replicator.apply.inspect import read_table, with_server_choices
from replicator.apply.meta import Meta
from replicator.compare import Sides, compare_shard, origin_filter
from replicator.sandbox import Instance, Sandbox
from replicator.servers import connect_downstream
from replicator.shard_id import ShardId
from replicator.usage import command

TARGET = "shop.orders"
META_SCHEMA = "shardmerge_demo_meta"
TASK = "demo"
EXTRACT = {"source": "_source", "schema": "_schema", "table": "_table"}
BASE = """CREATE TABLE {table} (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  customer_id INT NOT NULL,
  amount DECIMAL(10,2) NOT NULL,
  status ENUM('new','paid') NOT NULL DEFAULT 'new',
  note VARCHAR(100) NULL,
  created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
) DEFAULT CHARSET=utf8mb4"""
SHARDS = [  # (instance, source id, schema, table)
    ("up1", "s1", "shop_01", "orders_001"),
    ("up1", "s1", "shop_01", "orders_002"),
    ("up2", "s2", "shop_02", "orders_003"),
    ("up2", "s2", "shop_02", "orders_004"),
]
ADD_COUPON = "ALTER TABLE {t} ADD COLUMN coupon VARCHAR(20) NULL"
WIDEN_AMOUNT = "ALTER TABLE {t} MODIFY amount DECIMAL(12,4) NOT NULL"
RENAME = "ALTER TABLE {t} RENAME COLUMN customer_id TO client_id"
INDEX = "ALTER TABLE {t} ADD INDEX by_created (created_at)"

# Each shard's script: ("rows", n) writes n rows (and updates and deletes a few),
# ("ddl", sql), ("set", event) / ("wait", event) order the conflict between shards.
SCRIPTS: dict[str, list[tuple[str, str | int]]] = {
    "orders_001": [
        ("rows", 30), ("ddl", ADD_COUPON), ("rows", 20), ("ddl", WIDEN_AMOUNT), ("rows", 20),
        ("ddl", RENAME), ("rows", 20), ("ddl", INDEX), ("rows", 30),
    ],
    "orders_002": [
        ("rows", 30), ("ddl", RENAME), ("rows", 20), ("ddl", INDEX), ("rows", 20),
        ("ddl", WIDEN_AMOUNT), ("rows", 20), ("ddl", ADD_COUPON), ("rows", 30),
    ],
    "orders_003": [
        ("rows", 30), ("ddl", INDEX), ("rows", 20), ("wait", "float added"),
        # the conflict: orders_004 has priority FLOAT; float and datetime do not join
        ("ddl", "ALTER TABLE {t} ADD COLUMN priority DATETIME NULL"), ("wait", "conflict decided"),
        ("rows", 20), ("rows", 20),  # written while blocked: they wait, none is lost
        ("wait", "resolved"),
        ("ddl", RENAME), ("rows", 20), ("ddl", WIDEN_AMOUNT), ("rows", 20), ("ddl", ADD_COUPON), ("rows", 30),
    ],
    "orders_004": [
        ("rows", 30), ("ddl", "ALTER TABLE {t} ADD COLUMN priority FLOAT NULL"), ("set", "float added"),
        ("rows", 20), ("ddl", "ALTER TABLE {t} DROP COLUMN note"), ("wait", "conflict decided"),
        ("rows", 20), ("snapshot", "while orders_003 is blocked"),
        # orders_004 gives way: its priority becomes a DATETIME too, which resolves the conflict
        ("ddl", "ALTER TABLE {t} DROP COLUMN priority"),
        ("ddl", "ALTER TABLE {t} ADD COLUMN priority DATETIME NULL"), ("set", "resolved"),
        ("rows", 20), ("ddl", INDEX), ("rows", 20), ("ddl", WIDEN_AMOUNT), ("ddl", ADD_COUPON),
        ("rows", 20), ("ddl", RENAME), ("rows", 30),
    ],
}  # fmt: skip


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = command(
        subparsers, "demo", help="run the demo on a local sandbox", example="shardmerge demo --keep"
    )
    parser.add_argument("--dir", default=".sandbox", help="sandbox folder (default: .sandbox)")
    parser.add_argument("--keep", action="store_true", help="leave the sandbox running afterwards")
    parser.add_argument(
        "--timeout", type=float, default=180.0, help="seconds to wait for the daemon to catch up"
    )
    parser.set_defaults(handler=run)


def first_line(statement: str) -> str:
    lines = statement.splitlines()
    return lines[0] + (" …" if len(lines) > 1 else "")


def heading(text: str) -> None:
    print(f"\n== {text} " + "=" * max(0, 76 - len(text)), flush=True)


class Console:
    """Lines from several threads, stamped with the seconds since the workload began."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.start = time.monotonic()

    def say(self, text: str) -> None:
        with self.lock:
            print(f"  [{time.monotonic() - self.start:5.1f}s] {text}", flush=True)


@dataclass
class Shard:
    inst: Instance
    source: str
    schema: str
    table: str
    rng: random.Random
    columns: dict[str, tuple[str, int | None]] = field(default_factory=dict)  # name -> (type, scale) now

    @property
    def id(self) -> ShardId:
        return ShardId(self.source, self.schema, self.table)

    @property
    def qualified(self) -> str:
        return f"`{self.schema}`.`{self.table}`"

    def refresh(self) -> None:
        rows = self.inst.execute(
            "SELECT column_name, data_type, numeric_scale FROM information_schema.columns "
            f"WHERE table_schema='{self.schema}' AND table_name='{self.table}'"
        )
        self.columns = {name: (kind, scale) for name, kind, scale in rows}

    def value(self, column: str, n: int) -> str | None:
        kind, scale = self.columns[column]
        if column in ("customer_id", "client_id"):
            return str(self.rng.randint(1, 500))
        if column == "amount":
            return f"{self.rng.randint(1, 9999)}.{self.rng.randint(0, 10**scale - 1):0{scale}d}"
        if column == "note":
            return f"'order {n} of {self.table}'"
        if column == "coupon":
            return self.rng.choice(["NULL", "'WELCOME10'", "'BLACKFRIDAY'"])
        if column == "priority" and kind == "datetime":
            return f"'2026-11-{self.rng.randint(1, 28):02d} 12:00:00'"
        return None  # let the default be

    def rows(self, n: int) -> None:
        self.refresh()
        written = [c for c in self.columns if c not in ("id", "status", "created_at")]
        values = []
        for i in range(n):
            row = [self.value(c, i) for c in written]
            values.append("(" + ",".join("NULL" if v is None else v for v in row) + ")")
        names = ",".join(f"`{c}`" for c in written)
        statements = [f"INSERT INTO {self.qualified} ({names}) VALUES {','.join(values)}"]
        statements.append(
            f"UPDATE {self.qualified} SET status='paid' "
            f"WHERE status='new' AND id % 3 = {self.rng.randint(0, 2)}"
        )
        if "note" in self.columns:
            statements.append(f"UPDATE {self.qualified} SET note=CONCAT(note, ' (paid)') WHERE id % 7 = 0")
        statements.append(f"DELETE FROM {self.qualified} WHERE id % 13 = {self.rng.randint(0, 12)} LIMIT 2")
        self.inst.execute(statements)


def run(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    sandbox = Sandbox(root, upstreams=2)
    heading("starting the sandbox")
    for inst in sandbox.up():
        print(f"  {inst.name:5} {inst.role:10} 127.0.0.1:{inst.port}")
    try:
        return Demo(sandbox, root, args.timeout).run()
    finally:
        if not args.keep:
            sandbox.down()


class Demo:
    def __init__(self, sandbox: Sandbox, root: Path, timeout: float):
        self.sandbox = sandbox
        self.root = root
        self.timeout = timeout
        self.down = sandbox.downstream
        self.shards = [
            Shard(sandbox.instance(inst), source, schema, table, random.Random(table))
            for inst, source, schema, table in SHARDS
        ]
        kwargs = {"host": self.down.host, "port": self.down.port, "user": self.down.user}
        self.meta = Meta(
            lambda: connect_downstream({**kwargs, "password": self.down.password}), META_SCHEMA, TASK
        )
        self.console = Console()
        self.events = {name: threading.Event() for name in ("float added", "conflict decided", "resolved")}
        self.failures: list[str] = []
        self.daemon: subprocess.Popen | None = None

    def run(self) -> int:
        self.create_shards()
        config = self.write_config()
        try:
            self.start_daemon(config)
            heading("the workload: rows on every shard, ALTERs in different orders")
            self.workload()
            heading(f"waiting for the daemon to catch up (log: {self.log})")
            comparisons = self.wait_in_sync()
            code = self.stop_daemon()
        finally:
            if self.daemon is not None and self.daemon.poll() is None:
                self.daemon.kill()
        self.show_table()
        self.show_history()
        return self.show_check(comparisons, code)

    # -- set-up ------------------------------------------------------------------------------------
    def create_shards(self) -> None:
        heading("four shards of orders on two servers, all alike for now")
        for inst_name, schema in dict.fromkeys((s[0], s[2]) for s in SHARDS):
            self.sandbox.instance(inst_name).execute(
                [f"DROP DATABASE IF EXISTS {schema}", f"CREATE DATABASE {schema}"]
            )
        for shard in self.shards:
            shard.inst.execute(BASE.format(table=shard.qualified))
            print(f"  {shard.inst.name}  {shard.schema}.{shard.table}")
        print(BASE.format(table="orders_NNN"))
        self.down.execute(["DROP DATABASE IF EXISTS shop", f"DROP DATABASE IF EXISTS {META_SCHEMA}"])

    def write_config(self) -> Path:
        sources = "".join(
            f"  - id: {source}\n    host: 127.0.0.1\n    port: {self.sandbox.instance(inst).port}\n"
            f"    user: root\n    server_id: {9100 + n}\n"
            for n, (inst, source) in enumerate(dict.fromkeys((s[0], s[1]) for s in SHARDS), start=1)
        )
        text = (
            f"task: {TASK}\nsources:\n{sources}"
            f"target:\n  host: 127.0.0.1\n  port: {self.down.port}\n  user: root\n  flavor: mariadb\n"
            f"  meta_schema: {META_SCHEMA}\n"
            "routes:\n"
            '  - schema: "shop_*"\n    table: "orders_*"\n    target: shop.orders\n'
            "    extract: {source: _source, schema: _schema, table: _table}  # ids repeat across shards\n"
            "options:\n  batch_size: 200\n  heartbeat: 1\n"
            "admin:\n  port: 0\n"
        )
        path = self.root / "demo.yaml"
        path.write_text(text)
        heading(f"the task config ({path})")
        print(text.rstrip())
        return path

    @property
    def log(self) -> Path:
        return self.root / "demo-daemon.log"

    def start_daemon(self, config: Path) -> None:
        heading("shardmerge run --config " + str(config))
        with self.log.open("w") as out:
            self.daemon = subprocess.Popen(
                [sys.executable, "-m", "replicator.cli.shardmerge", "run", "--config", str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        deadline = time.monotonic() + 60
        while " running: " not in self.log.read_text():
            if self.daemon.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the daemon did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.2)
        line = next(line for line in self.log.read_text().splitlines() if " running: " in line)
        print("  " + line.split(": ", 1)[1])

    # -- the workload ------------------------------------------------------------------------------
    def workload(self) -> None:
        self.console = Console()
        watcher_stop = threading.Event()
        watcher = threading.Thread(target=self.watch_history, args=(watcher_stop,), daemon=True)
        watcher.start()
        threads = [threading.Thread(target=self.script, args=(shard,)) for shard in self.shards]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(1.0)  # the last decisions
        watcher_stop.set()
        watcher.join()
        if self.failures:
            raise SystemExit("the workload failed: " + "; ".join(self.failures))

    def script(self, shard: Shard) -> None:
        try:
            for step, arg in SCRIPTS[shard.table]:
                if step == "rows":
                    shard.rows(int(arg))
                    time.sleep(0.3)
                elif step == "ddl":
                    sql = str(arg).format(t=shard.table)
                    shard.inst.execute(sql, database=shard.schema)
                    self.console.say(f"{shard.id:24} ran  {sql}")
                    time.sleep(0.5)
                elif step == "set":
                    self.events[str(arg)].set()
                elif step == "wait":
                    if not self.events[str(arg)].wait(timeout=60):
                        raise TimeoutError(f"waited 60 s for '{arg}'")
                elif step == "snapshot":
                    time.sleep(1.0)
                    self.snapshot(str(arg))
        except Exception as exc:  # a failed shard must not hang the others
            self.failures.append(f"{shard.id}: {exc}")
            for event in self.events.values():
                event.set()

    def watch_history(self, stop: threading.Event) -> None:
        seen = 0
        while not stop.is_set():
            stored = self.meta.groups.load(TARGET)
            history = stored.history if stored else []
            for entry in history[seen:]:
                self.decision(entry)
            seen = len(history)
            time.sleep(0.2)

    def decision(self, entry: dict) -> None:
        shard = entry["shard"] or "-"
        text = f"{shard:24} -> v{entry['version']} {entry['result']}"
        if entry.get("message"):
            text += f": {entry['message']}"
        for statement in entry["downstream"]:
            text += f"\n{'':34}downstream: {first_line(statement)}"
        self.console.say(text)
        if entry["result"] == "conflict":
            self.events["conflict decided"].set()

    def snapshot(self, title: str) -> None:
        lines = [f"rows {title} (upstream / downstream, read live):"]
        for shard in self.shards:
            up = shard.inst.execute(f"SELECT COUNT(*) FROM {shard.qualified}")[0][0]
            where = origin_filter(EXTRACT, shard.id)
            down = self.down.execute(f"SELECT COUNT(*) FROM shop.orders WHERE {where}")[0][0]
            lines.append(f"{'':34}{shard.id:24} {up:5} / {down:5}")
        self.console.say("\n".join(lines))

    # -- the end -----------------------------------------------------------------------------------
    def compare(self):
        results = []
        for shard in self.shards:
            with shard.inst.connect() as conn:
                table = read_table(conn, shard.schema, shard.table)
            results.append(
                compare_shard(
                    shard.id,
                    [c.name for c in table.columns if c.generated is None],
                    Sides(
                        shard.inst.execute,
                        shard.qualified,
                        self.down.execute,
                        "shop.orders",
                        origin_filter(EXTRACT, shard.id),
                        errors=(Exception,),
                    ),
                )
            )
        return results

    def wait_in_sync(self):
        deadline = time.monotonic() + self.timeout
        while True:
            results = self.compare()
            if all(r.equal for r in results) or time.monotonic() > deadline:
                return results
            if self.daemon is not None and self.daemon.poll() is not None:
                print(f"  the daemon stopped (exit {self.daemon.returncode})")
                return results
            time.sleep(0.5)

    def stop_daemon(self) -> int:
        assert self.daemon is not None
        self.daemon.send_signal(signal.SIGTERM)
        code = self.daemon.wait(timeout=60)
        print(f"  caught up; the daemon stopped on SIGTERM (exit {code})")
        return code

    def show_table(self) -> None:
        heading("the merged table downstream: shop.orders")
        print(self.down.execute("SHOW CREATE TABLE shop.orders")[0][1] + ";")
        names = [
            "_source",
            "_schema",
            "_table",
            "id",
            "client_id",
            "amount",
            "status",
            "note",
            "coupon",
            "priority",
        ]
        for shard in self.shards:
            where = origin_filter(EXTRACT, shard.id)
            rows = self.down.execute(
                f"SELECT {', '.join(names)} FROM shop.orders WHERE {where} ORDER BY id DESC LIMIT 2"
            )
            for row in rows:
                print("  " + " | ".join("NULL" if v is None else str(v) for v in row))

    def show_history(self) -> None:
        heading("the schema history of shop.orders (shardmerge status --config demo.yaml)")
        stored = self.meta.groups.load(TARGET)
        for entry in stored.history if stored else []:
            shard = entry["shard"] or "-"
            print(f"  v{entry['version']:6} {entry['result']:10} {shard:24} {entry['ddl'] or ''}")
            for statement in entry["downstream"]:
                print(f"  {'':42}-> {first_line(statement)}")

    def show_check(self, comparisons, daemon_code: int) -> int:
        heading("check: each shard against its rows downstream")
        print(f"  {'shard':24} {'upstream':>8} {'downstream':>10}  rows equal")
        for r in comparisons:
            print(f"  {r.shard:24} {r.upstream_rows:8} {r.downstream_rows:10}  {'yes' if r.equal else 'NO'}")
            if not r.equal:
                print("    " + r.describe())
        up = sum(r.upstream_rows for r in comparisons)
        down = self.down.execute("SELECT COUNT(*) FROM shop.orders")[0][0]
        print(f"  {'all shards':24} {up:8} {down:10}")
        schema_ok = self.schema_matches()
        print(f"  the downstream table is the coordinator's joined schema: {'yes' if schema_ok else 'NO'}")
        ok = all(r.equal for r in comparisons) and up == down and schema_ok and daemon_code == 0
        print("\ndemo " + ("passed" if ok else "FAILED") + f"; the daemon's log is {self.log}")
        return 0 if ok else 1

    def schema_matches(self) -> bool:
        stored = self.meta.groups.load(TARGET)
        if not stored or not stored.meta.get("target"):
            return False
        joined = table_from_data(stored.meta["target"])
        with self.down.connect() as conn:
            actual = read_table(conn, "shop", "orders")
        return actual == with_server_choices(materialize(joined, "mariadb"), actual)
