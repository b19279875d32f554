"""Downstream DDL at size: ALTER waves over 64 shards while rows flow into a 10M-row table.

A private sandbox: 64 shard tables (`shop_01.orders` ... `shop_64.orders`, 32 on each of two
upstream servers) merged with extract columns into `shop.orders` downstream, which starts
with `--rows` rows (10,000,000: loaded directly, as a backfill would have left them). The
daemon runs while a writer inserts `--rate` rows/s into the shards in turn (transactions of
10 rows) and a marker row is committed every 0.1 s on the shards in turn, timed at its
commit and watched for downstream (by its whole key). Two waves, each shard ALTERed in turn
every `--every` seconds:

- ADD COLUMN note VARCHAR(20) NULL: the first shard's decision adds the column downstream
  (the others' are no-ops downstream);
- MODIFY n BIGINT NOT NULL: the first shard's decision widens the column downstream, a copy
  of the table: by pt-online-schema-change (`--copy pt-osc`, the default) or by the server
  (`--copy blocking`);
- CHANGE amount total: the rename (docs/design.md "Renaming columns"). The first shard's decision renames
the column
  downstream and brings `amount` back, empty, for the shards not renamed yet, with an index
  (lattice/old_name_index.py); the last one's copies the rows those shards wrote meanwhile
  into `total` and drops `amount`. The writer names `total` on a shard once it has it.

For each wave it prints how each downstream statement ran and how long it took (from the
daemon's log), the wave's time from the first ALTER to the last decision, and the markers'
lag during it (p50, p99, max: the longest stall of the applier shows as the largest lag);
the same lag before the waves as the baseline; and at the end each shard's row count
upstream against downstream.

    .venv/bin/python bench/downstream_ddl.py [--rows 10000000] [--rate 2000] [--every 0.25]
        [--copy pt-osc|blocking]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script: `bench` (a namespace package) and `replicator`

from bench.replication import as_installed, percentile, position  # noqa: E402
from bench.sysbench import Daemon, poll_until  # noqa: E402
from replicator.sandbox import Sandbox  # noqa: E402

TASK, META = "ddlbench", "ddlbench_meta"
TARGET = "shop.orders"
SHARDS = tuple((i // 32, f"shop_{i + 1:02d}") for i in range(64))  # (server, schema)
CREATE = (
    "CREATE TABLE {schema}.orders (id BIGINT NOT NULL PRIMARY KEY, n INT NOT NULL DEFAULT 0, "
    "amount DECIMAL(10,2) NOT NULL DEFAULT 0) DEFAULT CHARSET=utf8mb4"
)
WAVES = (
    ("ADD COLUMN note VARCHAR(20) NULL", "note"),
    ("MODIFY n BIGINT NOT NULL DEFAULT 0", "n"),
    ("CHANGE amount total DECIMAL(10,2) NOT NULL DEFAULT 0", "total"),
)
UNKNOWN_COLUMN = 1054
MARKER_BASE = 2_000_000_000
MARKER_EVERY = 0.1
RAN = re.compile(r"shardmerge\.ddl: \S+: (.*) (ran \S+|changed \d+ rows) in ([\d.]+) s")


def source(server: int) -> str:
    return f"s{server + 1}"


def config_text(sb: Sandbox, copy: str) -> str:
    starts = [position(inst) for inst in sb.upstreams]
    sources = "".join(
        f"  - id: s{i}\n    host: 127.0.0.1\n    port: {inst.port}\n    user: root\n"
        f"    server_id: {8800 + i}\n    start: {{file: {f}, pos: {p}}}\n"
        for i, (inst, (f, p)) in enumerate(zip(sb.upstreams, starts, strict=True), start=1)
    )
    return (
        f"task: {TASK}\nsources:\n{sources}"
        f"target: {{host: 127.0.0.1, port: {sb.downstream.port}, user: root, flavor: mariadb, "
        f"meta_schema: {META}}}\n"
        f"routes:\n  - {{schema: 'shop_*', table: orders, target: {TARGET}, "
        "extract: {source: _source, schema: _schema, table: _table}}\n"
        f"options: {{workers: 4, batch_size: 1000, heartbeat: 1, copy_ddl: {copy}}}\nadmin: {{port: 0}}\n"
    )


@dataclass
class Flow:
    """The writer's rows and the markers: sent (commit time) and seen downstream."""

    sb: Sandbox
    rate: int
    sent: dict[tuple[int, str, int], float] = field(default_factory=dict)
    seen: dict[tuple[int, str, int], float] = field(default_factory=dict)
    rows: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    deadline: float = float("inf")  # (monotonic) the watcher's last look for late markers
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> list[threading.Thread]:
        threads = [threading.Thread(target=f, daemon=True) for f in (self._write, self._mark, self._watch)]
        for t in threads:
            t.start()
        return threads

    def _write(self) -> None:
        conns = [inst.connect(autocommit=True) for inst in self.sb.upstreams]
        n, tick, every = 0, time.monotonic(), 10 / self.rate
        renamed: set[str] = set()
        while not self.stop.is_set():
            server, schema = SHARDS[(n // 10) % len(SHARDS)]
            values = ",".join(f"({100_000_000 + n + i}, {i}, 1.5)" for i in range(10))
            with conns[server].cursor() as cur:
                amount = "total" if schema in renamed else "amount"
                try:
                    cur.execute(f"INSERT INTO {schema}.orders (id, n, {amount}) VALUES {values}")
                except pymysql.err.OperationalError as exc:
                    if exc.args[0] != UNKNOWN_COLUMN or schema in renamed:
                        raise
                    renamed.add(schema)  # (the rename wave reached the shard)
                    cur.execute(f"INSERT INTO {schema}.orders (id, n, total) VALUES {values}")
            n += 10
            self.rows = n
            tick += every
            time.sleep(max(0.0, tick - time.monotonic()))

    def _mark(self) -> None:
        conns = [inst.connect(autocommit=True) for inst in self.sb.upstreams]
        n, tick = 0, time.monotonic()
        while not self.stop.is_set():
            n += 1
            server, schema = SHARDS[n % len(SHARDS)]
            with conns[server].cursor() as cur:
                cur.execute(f"INSERT INTO {schema}.orders (id, n) VALUES ({MARKER_BASE + n}, -1)")
            with self.lock:
                self.sent[(server, schema, MARKER_BASE + n)] = time.time()
            tick += MARKER_EVERY
            time.sleep(max(0.0, tick - time.monotonic()))

    def _watch(self) -> None:
        with self.sb.downstream.connect(autocommit=True) as conn, conn.cursor() as cur:
            while not self.stop.is_set() or self.pending():
                pending = self.pending()
                if pending:
                    keys = ",".join(f"('{source(s)}','{schema}','orders',{i})" for s, schema, i in pending)
                    if len(pending) == 1:
                        keys += "," + keys  # (two elements: a row constructor IN of one scans)
                    try:
                        cur.execute(
                            f"SELECT _source, _schema, id FROM {TARGET} WHERE "
                            f"(_source, _schema, _table, id) IN ({keys})"
                        )
                    except Exception:  # (a table swapped under it): look again
                        time.sleep(0.05)
                        continue
                    now = time.time()
                    with self.lock:
                        for src, schema, i in cur.fetchall():
                            self.seen.setdefault((int(src[1:]) - 1, schema, int(i)), now)
                time.sleep(0.02)
                if self.stop.is_set() and time.monotonic() > self.deadline:
                    return

    def pending(self) -> list[tuple[int, str, int]]:
        with self.lock:
            return [k for k in self.sent if k not in self.seen][:200]

    def lags(
        self,
        since: float,
        until: float,
        altered: dict[tuple[int, str], float] | None = None,
        after: bool = False,
    ) -> list[float]:
        """Lags of the markers committed in [since, until] (unseen: until now); with `altered`
        (each shard's ALTER time) only those of shards not altered yet at the marker's commit,
        or (`after`) of shards altered by then."""
        with self.lock:
            now = time.time()
            return [
                self.seen.get(k, now) - t
                for k, t in self.sent.items()
                if since <= t <= until
                and (altered is None or (altered.get(k[:2], float("inf")) <= t) == after)
            ]


def load(sb: Sandbox, rows: int) -> float:
    """The downstream table's rows, as a backfill leaves them, spread over the shards."""
    started = time.perf_counter()
    per = rows // len(SHARDS)
    for server, schema in SHARDS:
        sb.downstream.execute(
            f"INSERT INTO {TARGET} (id, n, amount, _source, _schema, _table) "
            f"SELECT seq, seq % 1000, 1.00, '{source(server)}', '{schema}', 'orders' FROM seq_1_to_{per}",
            "shop",
        )
    return time.perf_counter() - started


def decisions(sb: Sandbox) -> int:
    return sb.downstream.execute(f"SELECT COUNT(*) FROM {META}.coordinator_history WHERE task = '{TASK}'")[0][
        0
    ]


def report_lag(title: str, lags: list[float]) -> None:
    if not lags:
        print(f"  {title}: no marker")
        return
    p50, p99, top = percentile(lags, 50), percentile(lags, 99), max(lags)
    print(
        f"  {title}: lag p50 {p50 * 1000:,.0f} ms, p99 {p99 * 1000:,.0f} ms, max {top * 1000:,.0f} ms "
        f"({len(lags)} markers)"
    )


def wave(sb: Sandbox, flow: Flow, log: Path, spec: str, column: str, every: float, timeout: float) -> None:
    before, offset = decisions(sb), len(log.read_text(errors="replace"))
    started = time.time()
    altered: dict[tuple[int, str], float] = {}
    for server, schema in SHARDS:
        sb.upstreams[server].execute(f"ALTER TABLE {schema}.orders {spec}")
        altered[(server, schema)] = time.time()
        time.sleep(every)
    issued = time.time()
    done = poll_until(lambda: decisions(sb) >= before + len(SHARDS), timeout, every=0.2)
    decided = time.time()
    print(
        f"\n{spec} on 64 shards, one every {every:g} s: ALTERs issued in {issued - started:.1f} s; "
        f"{'all decided' if done else 'NOT all decided'} {decided - started:.1f} s after the first"
    )
    for statement, how, seconds in RAN.findall(log.read_text(errors="replace")[offset:]):
        print(f"  downstream: {statement[:90]} {how} in {float(seconds):.2f} s")
    time.sleep(2)  # (the markers of the wave's end arrive)
    report_lag("during the wave, all shards", flow.lags(started, decided))
    report_lag("  shards not ALTERed yet", flow.lags(started, decided, altered, after=False))
    report_lag(
        "  shards ALTERed (their rows wait for the downstream change)",
        flow.lags(started, decided, altered, True),
    )
    print(f"  the column downstream: {column_type(sb, column)}")


def column_type(sb: Sandbox, column: str) -> str:
    rows = sb.downstream.execute(
        "SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA='shop' "
        f"AND TABLE_NAME='orders' AND COLUMN_NAME='{column}'"
    )
    return rows[0][0] if rows else "absent"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows downstream at the start")
    parser.add_argument("--rate", type=int, default=2000, help="rows/s written upstream meanwhile")
    parser.add_argument("--every", type=float, default=0.25, help="seconds between two shards' ALTERs")
    parser.add_argument("--copy", choices=("pt-osc", "blocking"), default="pt-osc")
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    as_installed()  # (as a pip-installed daemon starts)

    with (
        tempfile.TemporaryDirectory(prefix="bench-ddl-") as tmp,
        Sandbox(Path(tmp) / "sb", upstreams=2) as sb,
    ):
        root = Path(tmp)
        for server, schema in SHARDS:
            sb.upstreams[server].execute([f"CREATE DATABASE {schema}", CREATE.format(schema=schema)])
        config = root / "task.yaml"
        config.write_text(config_text(sb, args.copy))
        log = root / "daemon.log"
        daemon = Daemon(config, log)
        daemon.start()
        made = poll_until(lambda: column_type(sb, "id") != "absent", 120)
        daemon.stop()
        if not made:
            raise SystemExit(f"the daemon did not make {TARGET}:\n{log.read_text()[-3000:]}")
        print(f"{len(SHARDS)} shards on 2 servers into {TARGET}; copy_ddl: {args.copy}")
        print(f"loading {args.rows:,} rows downstream ... {load(sb, args.rows):.1f} s")

        flow = Flow(sb, args.rate)
        daemon.start()
        threads = flow.run()
        try:
            time.sleep(10)
            base = time.time()
            time.sleep(10)
            print(
                f"\nrows flowing: {args.rate:,} rows/s in transactions of 10 over the 64 shards, "
                f"a marker every {MARKER_EVERY:g} s"
            )
            report_lag("before the waves", flow.lags(base, time.time()))
            for spec, column in WAVES:
                wave(sb, flow, log, spec, column, args.every, args.timeout)
        finally:
            flow.deadline = time.monotonic() + 60
            flow.stop.set()
            for t in threads:
                t.join(timeout=90)
            print(f"\nthe daemon: {daemon.stop()}")
        counts = dict(
            ((s, sc), n)
            for s, sc, n in sb.downstream.execute(
                f"SELECT _source, _schema, COUNT(*) FROM {TARGET} GROUP BY _source, _schema"
            )
        )
        per = args.rows // len(SHARDS)
        wrong = []
        for server, schema in SHARDS:
            up = sb.upstreams[server].execute(f"SELECT COUNT(*) FROM {schema}.orders")[0][0]
            if counts.get((source(server), schema), 0) != up + per:
                wrong.append(
                    f"{schema}: {up + per} expected, {counts.get((source(server), schema), 0)} downstream"
                )
        print(f"rows of each shard downstream: {'all 64 OK' if not wrong else '; '.join(wrong[:5])}")
        # the writer's rows hold 1.5, under either name: after the rename, all in `total`
        moved = sb.downstream.execute(
            f"SELECT COUNT(*), SUM(total = 1.5) FROM {TARGET} WHERE id >= 100000000 AND id < {MARKER_BASE}"
        )[0]
        held = int(moved[1] or 0)
        print(f"the writer's rows downstream: {moved[0]:,}, holding their amount in total: {held:,}")
        return 1 if wrong or moved[0] != held else 0


if __name__ == "__main__":
    raise SystemExit(main())
