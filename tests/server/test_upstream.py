"""What the daemon reads from an upstream server before it starts
(`replicator/source/upstream.py`), against a real MariaDB."""

from __future__ import annotations

from replicator.config import Route
from replicator.servers import connect
from replicator.source.routing import Router
from replicator.source.upstream import watched_schemas

# (the glob "*" watches every schema a route may watch: the system schemas never)
EVERY = Router([Route("*", "*", "merged", "t")])
SHOP = Router([Route("up_shop_*", "orders_*", "merged", "t")])


def test_the_watched_tables_are_every_base_table_of_a_watched_schema_and_no_system_table(sandbox):
    up = sandbox.upstreams[0]
    up.execute([
        "DROP DATABASE IF EXISTS up_shop_1", "DROP DATABASE IF EXISTS up_other",
        "CREATE DATABASE up_shop_1", "CREATE DATABASE up_other",
        "CREATE TABLE up_shop_1.orders_1 (id INT PRIMARY KEY)",
        "CREATE TABLE up_shop_1.notes (id INT PRIMARY KEY)",  # (tracked: a rename may route it)
        "CREATE VIEW up_shop_1.v AS SELECT id FROM up_shop_1.orders_1",
        "CREATE TABLE up_other.orders_1 (id INT PRIMARY KEY)",
    ])
    try:
        server = {"host": up.host, "port": up.port, "user": up.user, "password": up.password}
        with connect(server) as conn, conn.cursor() as cur:
            shop = watched_schemas(cur, SHOP)
            every = watched_schemas(cur, EVERY)
        assert sorted(shop) == ["up_shop_1.notes", "up_shop_1.orders_1"]
        assert shop["up_shop_1.orders_1"].startswith("CREATE TABLE `orders_1`")
        assert {"up_shop_1.notes", "up_shop_1.orders_1", "up_other.orders_1"} <= set(every)
        assert not [k for k in every if k.split(".")[0].lower() in ("mysql", "sys", "performance_schema")]
    finally:
        up.execute(["DROP DATABASE up_shop_1", "DROP DATABASE up_other"])
