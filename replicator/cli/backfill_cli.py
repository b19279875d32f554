"""`shardmerge backfill --config X`: copy every shard's rows into the merged
downstream tables with Spark, then hand off to `shardmerge run` (see
replicator/spark/backfill.py)."""

from __future__ import annotations

import argparse
import json
import sys

from replicator.cli.progress import Progress
from replicator.cli.run_cli import _config
from replicator.config import TaskConfig
from replicator.errors import ExitCode
from replicator.usage import command


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = command(
        subparsers,
        "backfill",
        help="copy all shards' rows into the downstream tables (Spark), before `shardmerge run`",
        example="shardmerge backfill --config task.yaml --truncate && shardmerge run --config task.yaml\n"
        "shardmerge backfill --config task.yaml --spark-master spark://spark-master:7077",
        description="Copy every routed shard's rows, projected onto the joined schema, into the "
        "downstream tables; record the binlog positions `shardmerge run` starts from. Rows are "
        "copied in chunks, each recorded once committed: run again after an interrupted backfill "
        "(killed, Ctrl-C) and it continues from the chunks not recorded.",
    )
    parser.add_argument("--config", required=True, help="task config (YAML)")
    parser.add_argument(
        "--spark-master", default=None, help="Spark master URL (default options.spark_master, else local[*])"
    )
    parser.add_argument(
        "--tables",
        nargs="+",
        metavar="SCHEMA.TABLE",
        help="only these downstream tables (default: all targets)",
    )
    parser.add_argument(
        "--merge",
        default="fail",
        choices=["fail", "keep-first", "keep-latest"],
        help="rows of different shards with the same primary or unique key: fail (report them, write "
        "nothing), keep the first shard's (in config order), or the one with the greatest --latest-column",
    )
    parser.add_argument("--latest-column", help="the column keep-latest compares")
    parser.add_argument(
        "--truncate",
        action="store_true",
        help="empty downstream tables that hold rows, when a new backfill starts (one continued keeps them)",
    )
    parser.add_argument(
        "--restart",
        action="store_true",
        help="start over instead of continuing an interrupted backfill: forget its finished chunks and "
        "empty the tables (implies --truncate)",
    )
    parser.add_argument(
        "--rows-per-split",
        type=int,
        default=None,
        help="rows of a shard in one chunk: read and written by one Spark task, in one downstream "
        "transaction, and recorded when done (a continued backfill keeps the chunks it had); "
        "default options.backfill_rows_per_split (1,000,000)",
    )
    add_job_output(parser)
    parser.set_defaults(handler=run)


def add_job_output(parser: argparse.ArgumentParser) -> None:
    """What a Spark job's command shows: progress and its report, as text or JSON."""
    parser.add_argument(
        "--json", action="store_true", help="progress events and the report as JSON lines on stdout"
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        type=_spark_setting,
        metavar="KEY=VALUE",
        help="a Spark setting, as spark-submit's --conf (repeatable), e.g. spark.driver.memory=4g "
        "or spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1",
    )
    parser.add_argument(
        "--spark-log-level",
        default="WARN",
        choices=["ERROR", "WARN", "INFO", "DEBUG"],
        help="Spark's own logging (default WARN)",
    )


def _spark_setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip().startswith("spark."):
        raise argparse.ArgumentTypeError(f"{text!r}: expected spark.SOME.SETTING=VALUE")
    return key.strip(), value


def session_of(args: argparse.Namespace, config: TaskConfig, app: str):
    """The job's SparkSession: the command line's master and settings over the config's."""
    from replicator.spark.session import spark_session

    return spark_session(
        args.spark_master or config.options.spark_master,
        app=app,
        log_level=args.spark_log_level,
        conf=dict(config.options.spark_conf) | dict(args.spark_conf),
    )


def run(args: argparse.Namespace) -> int:
    from replicator.spark.backfill import MergePolicy, backfill

    config = _config(args.config)
    policy = MergePolicy(args.merge, args.latest_column)
    spark = session_of(args, config, f"shardmerge backfill {config.task}")
    try:
        report = backfill(
            config,
            spark,
            tables=args.tables,
            policy=policy,
            truncate=args.truncate,
            restart=args.restart,
            rows_per_split=args.rows_per_split or config.options.backfill_rows_per_split,
            listener=Progress("copied", json_events=args.json),
        )
    finally:
        spark.stop()
    if args.json:
        print(json.dumps({"event": "report", **report.data()}))
    else:
        print(format_report(report))
    if report.ddl_during:
        print("\nDDL ran during the backfill:", file=sys.stderr)
        for note in report.ddl_during:
            print(f"- {note}", file=sys.stderr)
        return ExitCode.WAITING  # the operator decides what to do about it
    return ExitCode.OK


def format_report(report) -> str:
    """A row per shard and table: rows, time, pace, rows a merge policy dropped, and
    chunks (`12/40`: 12 of 40 copied again by this run, the rest by an interrupted one)."""
    lines = [f"{'shard':<48} {'rows':>12} {'seconds':>9} {'rows/s':>10} {'dropped':>8} {'chunks':>11}"]
    for table in report.tables:
        for s in table.shards:
            rate = s.rows / s.seconds if s.seconds else 0.0
            lines.append(
                f"{s.shard:<48} {s.rows:>12} {s.seconds:>9.1f} {rate:>10.0f} {s.dropped:>8} "
                f"{_chunks(s.chunks, s.resumed_chunks):>11}"
            )
        rate = table.rows / table.seconds if table.seconds else 0.0
        made = "created" if table.created else "existing"
        lines.append(
            f"{table.target + ' (' + made + ')':<48} {table.rows:>12} {table.seconds:>9.1f} {rate:>10.0f} "
            f"{'':>8} {_chunks(table.chunks, table.resumed_chunks):>11}"
        )
        if table.restarted:
            lines.append(f"  copied again from scratch: {table.restarted}")
    lines.append("")
    if report.resumed:
        done = sum(t.resumed_chunks for t in report.tables)
        total = sum(t.chunks for t in report.tables)
        lines.append(
            f"continued an interrupted backfill: {total - done} of {total} chunks copied by this run, "
            f"{done} before it"
        )
    for source, (p0, p1) in sorted(report.positions.items()):
        # (safe mode covers what was written while the copy read: nothing, where P1 is P0)
        after = f"in safe mode until {p1}" if str(p1) != str(p0) else "nothing was written while it copied"
        lines.append(f"source {source}: read from {p0}; `shardmerge run` starts there, {after}")
    return "\n".join(lines)


def _chunks(total: int, resumed: int) -> str:
    return f"{total - resumed}/{total}" if resumed else str(total)
