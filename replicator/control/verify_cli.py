"""`shardmerge verify --config X [--fix-sql FILE]`: compare the union of the shards
with the downstream tables (see replicator/spark/verify.py). Exit status 0 when
equal, 1 when they differ."""

from __future__ import annotations

import argparse
from pathlib import Path

from replicator.control.run_cli import _config
from replicator.errors import ExitCode
from replicator.usage import command

# The fix SQL is applied by hand with the mariadb/mysql client: the session must read
# its TIMESTAMP literals in UTC and keep a 0 in an AUTO_INCREMENT column, as the daemon does.
FIX_HEADER = [
    "-- written by shardmerge verify; apply with: mariadb -h HOST -u USER < FILE",
    "SET SESSION time_zone = '+00:00';",
    "SET SESSION sql_mode = 'STRICT_TRANS_TABLES,NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION';",
]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = command(
        subparsers,
        "verify",
        help="compare the shards with the downstream tables (Spark)",
        example="shardmerge verify --config task.yaml --fix-sql fix.sql",
        description="Compare the union of the shards, projected onto the joined schema, with the "
        "downstream tables: checksums per chunk, then the differing rows.",
    )
    parser.add_argument("--config", required=True, help="task config (YAML)")
    parser.add_argument("--spark-master", default=None, help="Spark master URL (default local[*])")
    parser.add_argument("--tables", nargs="+", metavar="SCHEMA.TABLE", help="only these downstream tables")
    parser.add_argument(
        "--fix-sql", type=Path, metavar="FILE", help="write the SQL that makes downstream equal"
    )
    parser.add_argument("--chunk-rows", type=int, default=10_000, help="rows per checksummed chunk")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from replicator.spark.session import spark_session
    from replicator.spark.verify import verify

    config = _config(args.config)
    spark = spark_session(args.spark_master, app=f"shardmerge verify {config.task}")
    try:
        report = verify(
            config, spark, tables=args.tables, chunk_rows=args.chunk_rows, fix=args.fix_sql is not None
        )
    finally:
        spark.stop()
    print(format_report(report))
    if args.fix_sql is not None:
        args.fix_sql.write_text("\n".join(FIX_HEADER + report.fix_sql) + "\n")
        print(
            f"fix SQL: {args.fix_sql} ({sum(1 for s in report.fix_sql if not s.startswith('--'))} statements)"
        )
    return ExitCode.OK if report.equal else ExitCode.WAITING  # the downstream needs fixing


def format_report(report) -> str:
    lines = []
    for t in report.tables:
        verdict = "equal" if t.equal else "DIFFERENT"
        lines.append(
            f"{t.target}: {verdict}: {t.upstream_rows} rows upstream, {t.downstream_rows} downstream; "
            f"{t.chunks} chunks, {t.chunks_differing} differing; missing {len(t.missing)}, "
            f"extra {len(t.extra)}, different {len(t.different)}"
        )
        for label, rows in (("missing", t.missing), ("extra", t.extra), ("different", t.different)):
            for shard, key in rows[:10]:
                where = f" (from {shard})" if shard else ""
                lines.append(f"  {label}: key {', '.join(str(k) for k in key)}{where}")
    return "\n".join(lines)
