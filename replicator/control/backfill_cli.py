"""`shardmerge backfill --config X`: copy every shard's rows into the merged
downstream tables with Spark, then hand off to `shardmerge run` (see
replicator/spark/backfill.py)."""

from __future__ import annotations

import argparse
import sys

from replicator.control.run_cli import _config
from replicator.usage import command


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = command(
        subparsers,
        "backfill",
        help="copy all shards' rows into the downstream tables (Spark), before `shardmerge run`",
        example="shardmerge backfill --config task.yaml --truncate && shardmerge run --config task.yaml\n"
        "shardmerge backfill --config task.yaml --spark-master spark://spark-master:7077",
        description="Copy every routed shard's rows, projected onto the joined schema, into the "
        "downstream tables; record the binlog positions `shardmerge run` starts from.",
    )
    parser.add_argument("--config", required=True, help="task config (YAML)")
    parser.add_argument("--spark-master", default=None, help="Spark master URL (default local[*])")
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
    parser.add_argument("--truncate", action="store_true", help="empty downstream tables that hold rows")
    parser.add_argument(
        "--rows-per-split", type=int, default=200_000, help="rows of a shard read by one Spark task"
    )
    parser.set_defaults(handler=run)


class Bars:
    """A progress bar per table on a terminal; a line per table otherwise."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.tty = stream.isatty()
        self.bars: dict = {}

    def table_started(self, target: str, estimated_rows: int) -> None:
        if self.tty:
            from tqdm import tqdm

            self.bars[target] = tqdm(
                total=estimated_rows, desc=target, unit=" rows", unit_scale=True, file=self.stream
            )
        else:
            print(f"{target}: about {estimated_rows} rows to copy", file=self.stream, flush=True)

    def table_progress(self, target: str, rows: int) -> None:
        bar = self.bars.get(target)
        if bar is not None:
            bar.update(max(0, min(rows, bar.total) - bar.n))

    def table_done(self, result) -> None:
        bar = self.bars.pop(result.target, None)
        if bar is not None:
            bar.total = max(bar.total, result.rows)
            bar.update(result.rows - bar.n)
            bar.close()


def run(args: argparse.Namespace) -> int:
    from replicator.spark.backfill import MergePolicy, backfill
    from replicator.spark.session import spark_session

    config = _config(args.config)
    policy = MergePolicy(args.merge, args.latest_column)
    spark = spark_session(args.spark_master, app=f"shardmerge backfill {config.task}")
    try:
        report = backfill(
            config,
            spark,
            tables=args.tables,
            policy=policy,
            truncate=args.truncate,
            rows_per_split=args.rows_per_split,
            listener=Bars(),
        )
    finally:
        spark.stop()
    print(format_report(report))
    if report.ddl_during:
        print("\nDDL ran during the backfill:", file=sys.stderr)
        for note in report.ddl_during:
            print(f"- {note}", file=sys.stderr)
        return 3
    return 0


def format_report(report) -> str:
    lines = [f"{'shard':<48} {'rows':>12} {'seconds':>9} {'rows/s':>10} {'dropped':>8}"]
    for table in report.tables:
        for s in table.shards:
            rate = s.rows / s.seconds if s.seconds else 0.0
            lines.append(f"{s.shard:<48} {s.rows:>12} {s.seconds:>9.1f} {rate:>10.0f} {s.dropped:>8}")
        rate = table.rows / table.seconds if table.seconds else 0.0
        made = "created" if table.created else "existing"
        lines.append(
            f"{table.target + ' (' + made + ')':<48} {table.rows:>12} {table.seconds:>9.1f} {rate:>10.0f}"
        )
    lines.append("")
    for source, (p0, p1) in sorted(report.positions.items()):
        lines.append(
            f"source {source}: read from {p0}; `shardmerge run` starts there, in safe mode until {p1}"
        )
    return "\n".join(lines)
