"""`shardmerge resync --config X --shard SOURCE.SCHEMA.TABLE`: copy one shard's rows again
while the daemon streams the others (replicator/spark/resync.py)."""

from __future__ import annotations

import argparse
import json

from replicator.control.backfill_cli import add_job_output, session_of
from replicator.control.progress import Progress
from replicator.control.run_cli import _config
from replicator.errors import CliError, ExitCode
from replicator.shard_id import ShardId
from replicator.usage import command


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = command(
        subparsers,
        "resync",
        help="copy one shard's rows again (Spark) while the others stream",
        example="shardmerge resync --config task.yaml --shard s1.shop_01.orders_001",
        description="Pause the shard (the running daemon does, or this command when none runs the "
        "task), delete its rows downstream (by the extract columns), copy them again from its "
        "upstream table, and let the daemon stream it from where the copy began. For a shard's rows "
        "found wrong downstream, or its binlog purged before its changes were read.",
    )
    parser.add_argument("--config", required=True, help="task config (YAML)")
    parser.add_argument("--shard", required=True, help="the shard, as source.schema.table")
    parser.add_argument(
        "--spark-master", default=None, help="Spark master URL (default options.spark_master, else local[*])"
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=120.0,
        help="seconds to wait for the daemon to pause the shard (default 120)",
    )
    add_job_output(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from replicator.spark.resync import resync

    config = _config(args.config)
    try:
        shard = ShardId.parse(args.shard)
    except ValueError as exc:
        raise CliError(f"--shard: {exc}") from exc
    spark = session_of(args, config, f"shardmerge resync {config.task} {shard}")
    try:
        report = resync(
            config,
            spark,
            shard,
            rows_per_split=config.options.backfill_rows_per_split,
            listener=Progress("copied", json_events=args.json),
            wait=args.wait,
        )
    finally:
        spark.stop()
    if args.json:
        print(json.dumps({"event": "report", **report.data()}))
        return ExitCode.OK
    print(
        f"shard {report.shard}: {report.deleted} rows deleted from {report.target}, {report.copied} copied "
        f"in {report.seconds:.1f} s, read from {report.p0}"
    )
    if report.streaming:
        print(f"the daemon streams it from {report.p0}, in safe mode until {report.p1}")
    else:
        print(f"`shardmerge run` streams it from {report.p0}, in safe mode until {report.p1}, once it starts")
    return ExitCode.OK
