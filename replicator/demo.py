"""`shardmerge demo`: the lattice at work on a local sandbox. Four shards of
`orders` on two upstream servers get ALTERed differently; their schemas are read
back from the servers, joined, and the joined table is created downstream, where
every shard's rows then insert unchanged. A conflicting ALTER shows what a
conflict looks like."""

from __future__ import annotations

import argparse
from pathlib import Path

from lattice.join import JoinConflict, join_all
from lattice.model import Table
from lattice.sqltext import quote_identifier
from replicator.sandbox import Instance, Sandbox

BASE = """CREATE TABLE {name} (
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  customer_id INT NOT NULL,
  amount DECIMAL(10,2) NOT NULL,
  status ENUM('new','paid') NOT NULL DEFAULT 'new',
  note VARCHAR(100),
  created_at DATETIME NOT NULL
) DEFAULT CHARSET=utf8mb4"""

# (server, schema, table, ALTERs run on that shard only)
SHARDS = [
    ("up1", "shop_01", "orders_001", ["ALTER TABLE orders_001 ADD COLUMN coupon VARCHAR(20) NOT NULL"]),
    (
        "up1",
        "shop_01",
        "orders_002",
        [
            "ALTER TABLE orders_002 MODIFY amount DECIMAL(12,4) NOT NULL",
            "ALTER TABLE orders_002 ADD INDEX by_customer (customer_id)",
        ],
    ),
    (
        "up2",
        "shop_02",
        "orders_003",
        [
            "ALTER TABLE orders_003 MODIFY status ENUM('new','paid','shipped') NOT NULL DEFAULT 'new'",
            "ALTER TABLE orders_003 MODIFY note TEXT",
        ],
    ),
    (
        "up2",
        "shop_02",
        "orders_004",
        [
            "ALTER TABLE orders_004 DROP COLUMN note",
            "ALTER TABLE orders_004 MODIFY customer_id INT NULL",
            "ALTER TABLE orders_004 ADD INDEX by_customer (customer_id)",
        ],
    ),
]
ROWS_PER_SHARD = 5


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="run the demo on a local sandbox")
    parser.add_argument("--dir", default=".sandbox", help="sandbox folder (default: .sandbox)")
    parser.add_argument("--keep", action="store_true", help="leave the sandbox running afterwards")
    parser.set_defaults(handler=run)


def heading(text: str) -> None:
    print(f"\n== {text} " + "=" * max(0, 70 - len(text)))


def show_create(inst: Instance, schema: str, table: str) -> str:
    return inst.execute(f"SHOW CREATE TABLE {quote_identifier(schema)}.{quote_identifier(table)}")[0][1]


def run(args: argparse.Namespace) -> int:
    sandbox = Sandbox(Path(args.dir), upstreams=2)
    heading("starting the sandbox")
    for inst in sandbox.up():
        print(f"  {inst.name:5} {inst.role:10} 127.0.0.1:{inst.port}")
    try:
        return _demo(sandbox)
    finally:
        if not args.keep:
            sandbox.down()


def _demo(sandbox: Sandbox) -> int:
    heading("shards: the same table, ALTERed differently on each")
    tables: list[Table] = []
    for server, schema in dict.fromkeys((s[0], s[1]) for s in SHARDS):
        sandbox.instance(server).execute([f"DROP DATABASE IF EXISTS {schema}", f"CREATE DATABASE {schema}"])
    for server, schema, table, alters in SHARDS:
        inst = sandbox.instance(server)
        inst.execute([BASE.format(name=table), *alters], database=schema)
        for i in range(1, ROWS_PER_SHARD + 1):
            _insert_sample(inst, schema, table, i)
        shard = Table.from_sql(show_create(inst, schema, table))
        tables.append(shard)
        print(f"  {server}:{schema}.{table}")
        for alter in alters:
            print(f"      {alter}")

    joined = join_all(tables, "mariadb")
    if isinstance(joined, JoinConflict):
        print(f"unexpected conflict: {joined}")
        return 1
    heading("the join of all four shard schemas, as downstream DDL (mariadb)")
    ddl = joined.to_sql("mariadb", name="shop.orders")
    print(ddl + ";")

    down = sandbox.downstream
    down.execute(["DROP DATABASE IF EXISTS shop", "CREATE DATABASE shop", ddl])
    heading("every shard's rows insert unchanged into the joined table")
    total = 0
    for number, ((server, schema, table, _), shard) in enumerate(zip(SHARDS, tables, strict=True), start=1):
        inst = sandbox.instance(server)
        columns = [c.name for c in shard.columns if c.generated is None]
        names = ", ".join(quote_identifier(c) for c in columns)
        rows = inst.execute(f"SELECT {names} FROM {schema}.{table}")
        with down.connect("shop") as conn, conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES'")
            marks = ", ".join(["%s"] * len(columns))
            # shards number their rows alike; offset the keys so they stay apart here
            offset = 1000 * number
            cur.executemany(
                f"INSERT INTO orders ({names}) VALUES ({marks})",
                [(row[0] + offset, *row[1:]) for row in rows],
            )
        total += len(rows)
        print(f"  {schema}.{table}: {len(rows)} rows")
    count = down.execute("SELECT COUNT(*) FROM shop.orders")[0][0]
    print(f"  downstream shop.orders holds {count} rows (shards wrote {total})")

    heading("the same four shards joined for a TiDB downstream")
    result = join_all(tables, "tidb")
    print(f"  {result}" if isinstance(result, JoinConflict) else result.to_sql("tidb", name="shop.orders"))

    heading("a conflict: one shard adds `note2 DATETIME`, another `note2 TEXT`")
    up1, up2 = sandbox.instance("up1"), sandbox.instance("up2")
    up1.execute("ALTER TABLE orders_001 ADD COLUMN note2 DATETIME", database="shop_01")
    up2.execute("ALTER TABLE orders_003 ADD COLUMN note2 TEXT", database="shop_02")
    tables[0] = Table.from_sql(show_create(up1, "shop_01", "orders_001"))
    tables[2] = Table.from_sql(show_create(up2, "shop_02", "orders_003"))
    print(f"  {join_all(tables, 'mariadb')}")
    return 0 if count == total else 1


def _insert_sample(inst: Instance, schema: str, table: str, i: int) -> None:
    columns = {c.name for c in Table.from_sql(show_create(inst, schema, table)).columns}
    row = {
        "id": i,
        "customer_id": 100 + i,
        "amount": f"{i * 10}.25",
        "created_at": f"2026-11-{i:02d} 10:00:00",
    }
    if "note" in columns:
        row["note"] = f"note {i}"
    if "coupon" in columns:
        row["coupon"] = f"C{i}"
    names = ", ".join(row)
    marks = ", ".join(["%s"] * len(row))
    with inst.connect(schema) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", list(row.values()))
