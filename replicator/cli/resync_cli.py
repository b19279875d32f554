"""`shardmerge resync --config X --shard SOURCE.SCHEMA.TABLE` (or `--source S`: all its
shards): copy a shard's rows again while the daemon streams the others
(replicator/spark/resync.py)."""

from __future__ import annotations

import argparse
import json

from replicator.cli.backfill_cli import add_job_output, session_of
from replicator.cli.progress import Progress
from replicator.cli.run_cli import _config
from replicator.errors import CliError, ExitCode
from replicator.shard_id import ShardId
from replicator.usage import command


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = command(
        subparsers,
        "resync",
        help="copy one shard's rows again (Spark) while the others stream",
        example="shardmerge resync --config task.yaml --shard s1.shop_01.orders_001\n"
        "shardmerge resync --config task.yaml --source s1",
        description="Pause the shard (the running daemon does, or this command when none runs the "
        "task), delete its rows downstream (by the extract columns), copy them again from its "
        "upstream table, and let the daemon stream it from where the copy began. For a shard's rows "
        "found wrong downstream, or its binlog purged before its changes were read.",
    )
    parser.add_argument("--config", required=True, help="task config (YAML)")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--shard", help="the shard, as source.schema.table")
    which.add_argument(
        "--source",
        help="every shard of this source (its binlog purged before its changes were read: the stream "
        "goes on from where the copy began)",
    )
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
    from replicator.spark.resync import resync, shards_of_source

    config = _config(args.config)
    if args.source is not None:
        shards = shards_of_source(config, args.source)
    else:
        try:
            shards = [ShardId.parse(args.shard)]
        except ValueError as exc:
            raise CliError(f"--shard: {exc}") from exc
    spark = session_of(args, config, f"shardmerge resync {config.task} {args.shard or args.source}")
    try:
        report = resync(
            config,
            spark,
            shards,
            rows_per_split=config.options.backfill_rows_per_split,
            listener=Progress("copied", json_events=args.json),
            wait=args.wait,
        )
    finally:
        spark.stop()
    if args.json:
        print(json.dumps({"event": "report", **report.data()}))
        return ExitCode.OK
    for copy in report.shards:
        print(f"shard {copy.shard}: {copy.deleted} rows deleted from {copy.target}, {copy.copied} copied")
    print(f"read from {report.p0} in {report.seconds:.1f} s")
    if report.streaming:
        print(f"the daemon streams it from {report.p0}, in safe mode until {report.p1}")
    else:
        print(f"`shardmerge run` streams it from {report.p0}, in safe mode until {report.p1}, once it starts")
    return ExitCode.OK
