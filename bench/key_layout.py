"""Where the extract columns go in a merged table's keys: what inserts pay, what a shard's
statements read.

One downstream server of a private sandbox, three copies of a sysbench-like table merged
from `--shards` shards with extract columns for source, schema and table:

- trailing: the primary key (id, _source, _schema, _table), as tables were made before;
- trailing + index: the same and a secondary index (_source, _schema, _table);
- leading: the primary key (_source, _schema, _table, id), as the coordinator makes it now.

Rows go in as the applier writes them (multi-row INSERTs of `--batch` rows, each from one
shard, the shards in turn, one transaction per batch, ids rising in each shard), timed per
layout; the copies are filled in turn, twice, and the second, warm pass is reported. Then a
shard's fill UPDATE (what a shard adding a column downstream already has runs) and a delete
of one chunk of its rows (backfill recovery) are run in a rolled-back transaction, and the
rows each read and wrote are printed (Handler_read_* and Handler_write/update/delete).

    .venv/bin/python bench/key_layout.py [--rows 1000000] [--shards 4] [--batch 100]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from replicator.sandbox import Sandbox

COLUMNS = (
    "id BIGINT NOT NULL, k INT NOT NULL DEFAULT 0, c CHAR(120) NOT NULL DEFAULT '', "
    "pad CHAR(60) NOT NULL DEFAULT '', _source VARCHAR(64) NOT NULL, _schema VARCHAR(64) NOT NULL, "
    "_table VARCHAR(64) NOT NULL, note VARCHAR(16) NULL, KEY k_1 (k)"
)
LAYOUTS = {
    "trailing": "PRIMARY KEY (id, _source, _schema, _table)",
    "trailing + index": "PRIMARY KEY (id, _source, _schema, _table), KEY shard (_source, _schema, _table)",
    "leading": "PRIMARY KEY (_source, _schema, _table, id)",
}
READS = ("first", "key", "last", "next", "prev", "rnd", "rnd_next")
WRITES = ("write", "update", "delete")


def table_name(layout: str) -> str:
    return "bench.t_" + layout.replace(" + ", "_").replace(" ", "_")


def origin(shard: int) -> tuple[str, str, str]:
    return (f"s{shard % 2}", f"sb_{shard}", "sbtest1")


def fill(conn, table: str, rows: int, shards: int, batch: int, first: int) -> float:
    """Seconds to insert `rows` rows, batch by batch, shard after shard."""
    per_shard = rows // shards
    started = time.perf_counter()
    with conn.cursor() as cur:
        for low in range(first, first + per_shard, batch):
            for shard in range(shards):
                src, db, tbl = origin(shard)
                values = ",".join(
                    f"({n},{n % 50000},'{n:0120d}','{n:060d}','{src}','{db}','{tbl}')"
                    for n in range(low, min(low + batch, first + per_shard))
                )
                cur.execute(f"INSERT INTO {table} (id,k,c,pad,_source,_schema,_table) VALUES {values}")
                conn.commit()
    return time.perf_counter() - started


def handlers(cur) -> dict[str, int]:
    cur.execute("SHOW SESSION STATUS LIKE 'Handler_%'")
    return {name[len("Handler_") :].lower(): int(value) for name, value in cur.fetchall()}


def reads(conn, table: str, sql: str) -> tuple[int, int]:
    """Rows read and written by one statement, rolled back."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT 1 FROM {table} LIMIT 0")  # (the table opened: its statistics read)
        cur.fetchall()
        cur.execute("START TRANSACTION")
        before = handlers(cur)
        cur.execute(sql)
        after = handlers(cur)
        cur.execute("ROLLBACK")
    read = sum(after[f"read_{k}"] - before[f"read_{k}"] for k in READS)
    return read, sum(after[k] - before[k] for k in WRITES)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per table, all shards together")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument(
        "--batch", type=int, default=100, help="rows per INSERT (one shard's, one transaction)"
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-keys-") as tmp, Sandbox(Path(tmp) / "sb") as sandbox:
        conn = sandbox.downstream.connect()
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE bench")
            for layout, keys in LAYOUTS.items():
                cur.execute(f"CREATE TABLE {table_name(layout)} ({COLUMNS}, {keys}) DEFAULT CHARSET=utf8mb4")
        per_shard = args.rows // args.shards
        seconds: dict[str, list[float]] = {layout: [] for layout in LAYOUTS}
        for rounds, first in enumerate((1, 1 + per_shard)):
            for layout in LAYOUTS:
                seconds[layout].append(
                    fill(conn, table_name(layout), args.rows, args.shards, args.batch, first)
                )
            if rounds == 0:
                print(
                    f"{args.rows:,} rows per table in the first pass "
                    f"({args.shards} shards, {args.batch} a batch)"
                )
        base = seconds["trailing"][1]
        print(f"\ninserting {args.rows:,} more rows into {args.rows:,} (the warm pass):")
        for layout, (_, warm) in seconds.items():
            print(
                f"  {layout:18} {args.rows / warm:10,.0f} rows/s   {warm / base:5.2f}x the time of trailing"
            )

        src, db, tbl = origin(1)
        where = f"_source='{src}' AND _schema='{db}' AND _table='{tbl}'"
        total = 2 * args.rows
        print(f"\none shard's statements on {total:,} rows ({total // args.shards:,} of them the shard's):")
        for layout in LAYOUTS:
            table = table_name(layout)
            for what, sql in (
                ("fill UPDATE", f"UPDATE {table} SET note='x' WHERE {where}"),
                ("chunk delete", f"DELETE FROM {table} WHERE {where} AND id >= 1000 AND id < 2000"),
            ):
                read, wrote = reads(conn, table, sql)
                print(
                    f"  {layout:18} {what:13} read {read:>10,}  wrote {wrote:>10,}  "
                    f"({read / max(wrote, 1):,.2f}x)"
                )
        conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
