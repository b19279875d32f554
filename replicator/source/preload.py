"""What the fork server of the source workers (`replicator.source.spawn`) makes once,
before it forks them: importing this module is its job. The worker module (the SQL
parser and all), and the TLS context of the preferred mode, which every worker's
binlog connections use and would each make otherwise (30 ms of CPU per worker), and
the parser's own tables (sqlglot builds its generator's dispatch and more at a process's
first parse): a worker's first act is to parse its tracked tables, which took it 10-15 ms
of its start cold, a third of that warm.
No collection runs during those imports, and what they made is frozen (`replicator.heap`)."""

from __future__ import annotations

from replicator.heap import collector_paused

# (what every worker is forked with, frozen after: kept out of their collections, they walk
# only what each makes of its own and leave the pages they share with the server as they are)
with collector_paused():
    import replicator.source.worker  # noqa: F401 (imported for the workers forked after)
    from replicator.servers import preferred_tls_context

    preferred_tls_context()
    from lattice import parse_table

    parse_table(
        "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, b VARCHAR(32) NOT NULL DEFAULT 'x',"
        " c DECIMAL(10,2) DEFAULT 1.5, d DATETIME NULL, KEY (b)) DEFAULT CHARSET=utf8mb4",
        shown=True,
    )
