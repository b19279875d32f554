"""`shardmerge verify --config X [--fix-sql FILE]`: compare the union of the shards
with the downstream tables (see replicator/spark/verify.py). Exit status 0 when
equal, 4 when they differ (the fix SQL, and the command that applies it, printed)."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from replicator.cli.backfill_cli import add_job_output, session_of
from replicator.cli.progress import Progress
from replicator.cli.run_cli import _config
from replicator.errors import ExitCode
from replicator.server_rules import server_rules
from replicator.usage import command

# The fix SQL is applied by hand with the mariadb/mysql client: the session must read
# its TIMESTAMP literals in UTC and keep a 0 in an AUTO_INCREMENT column, as the daemon does.
FIX_HEADER = [
    "-- written by shardmerge verify; apply with the command it printed (mariadb -h HOST -u USER -p < FILE)",
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
    parser.add_argument(
        "--spark-master", default=None, help="Spark master URL (default options.spark_master, else local[*])"
    )
    parser.add_argument("--tables", nargs="+", metavar="SCHEMA.TABLE", help="only these downstream tables")
    parser.add_argument(
        "--fix-sql", type=Path, metavar="FILE", help="write the SQL that makes downstream equal"
    )
    parser.add_argument("--chunk-rows", type=int, default=10_000, help="rows per checksummed chunk")
    add_job_output(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from replicator.spark.verify import verify

    config = _config(args.config)
    spark = session_of(args, config, f"shardmerge verify {config.task}")
    try:
        report = verify(
            config,
            spark,
            tables=args.tables,
            chunk_rows=args.chunk_rows,
            fix=args.fix_sql is not None,
            listener=Progress("checked", json_events=args.json),
        )
    finally:
        spark.stop()
    apply = None
    if args.fix_sql is not None:
        args.fix_sql.write_text("\n".join(FIX_HEADER + report.fix_sql) + "\n")
        apply = fix_command(config.target, args.fix_sql)
    if args.json:
        data = {"equal": report.equal, "tables": [table_data(t) for t in report.tables], "fix_command": apply}
        print(json.dumps({"event": "report", **data}, default=str))
    else:
        print(format_report(report))
        if apply is not None:
            statements = sum(1 for s in report.fix_sql if not s.startswith("--"))
            print(f"fix SQL: {args.fix_sql} ({statements} statements); apply it with:\n  {apply}")
    return ExitCode.OK if report.equal else ExitCode.WAITING  # the downstream needs fixing


def fix_command(target, path: Path) -> str:
    """The client command that applies the fix SQL to the target (the password asked)."""
    client = server_rules(target.flavor).client
    return (
        f"{client} --host={shlex.quote(target.host)} --port={target.port} --user={shlex.quote(target.user)} "
        f"-p < {shlex.quote(str(path))}"
    )


def table_data(t) -> dict:
    return {
        "target": t.target,
        "equal": t.equal,
        "upstream_rows": t.upstream_rows,
        "downstream_rows": t.downstream_rows,
        "missing": [{"shard": str(s), "key": list(k)} for s, k in t.missing],
        "extra": [{"shard": str(s) if s else None, "key": list(k)} for s, k in t.extra],
        "different": [{"shard": str(s), "key": list(k)} for s, k in t.different],
        "unsettled": [{"shard": str(s) if s else None, "key": list(k)} for s, k in t.unsettled],
    }


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
        if t.unsettled:
            lines.append(
                f"  {len(t.unsettled)} rows changed by the stream in every look, not compared "
                "(run verify again to look at them): first key "
                + ", ".join(str(k) for k in t.unsettled[0][1])
            )
    return "\n".join(lines)
