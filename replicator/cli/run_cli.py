"""`shardmerge run --config X`: the daemon of a task (stops cleanly on SIGTERM), and
`shardmerge status --config X`: what the daemon has written down, readable while
it runs or after it stopped."""

from __future__ import annotations

import argparse
import json
import logging
import threading
from collections import Counter

from replicator.config import ConfigError, TaskConfig, load_config
from replicator.errors import CliError, ExitCode, StartAgain, connect_failure
from replicator.usage import command, dm_alias_config

log = logging.getLogger("shardmerge.daemon")

START_TASK = (
    "Run the replication daemon of a task: the same as `shardmerge run`, in DM's spelling (the config "
    "given as CONFIG or --config). Unlike DM's start-task it runs in the foreground, till `shardctl "
    "stop-task` or SIGTERM, and runs no precheck first (`shardmerge check-task` does); started again "
    "it goes on from its checkpoints (DM's start-task of a stopped task does too)."
)


def register_run(subparsers: argparse._SubParsersAction, dm: bool = False) -> None:
    """`run`; with `dm`, DM's spelling `start-task`."""
    parser = command(
        subparsers,
        "start-task" if dm else "run",
        help="DM's start-task: the same as `shardmerge run`"
        if dm
        else "run the replication daemon of a task",
        example="shardmerge start-task task.yaml\nshardctl --config task.yaml stop-task"
        if dm
        else "shardmerge run --config task.yaml --log-format json",
        description=START_TASK if dm else None,
    )
    _log_flags(parser)
    if dm:
        dm_alias_config(parser, run)
        return
    parser.add_argument("--config", required=True, help="task config (YAML)")
    parser.add_argument(
        "--member",
        metavar="NAME",
        help="run as this member of the task, beside its other members on other machines, each "
        "reading its share of the sources (being built, issue 75: schema changes read by a member "
        "that does not coordinate wait for the coordinator)",
    )
    parser.set_defaults(handler=run)


def register_start_task(subparsers: argparse._SubParsersAction) -> None:
    register_run(subparsers, dm=True)


def _log_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="the least severe lines logged (default: INFO); DEBUG also shows a server error's traceback",
    )
    parser.add_argument(
        "--log-format", default="text", choices=["text", "json"], help="json: one object per line"
    )


def register_status(subparsers: argparse._SubParsersAction) -> None:
    parser = command(
        subparsers,
        "status",
        help="the state a task's daemon has saved downstream",
        example="shardmerge status --config task.yaml --json",
    )
    parser.add_argument("--config", required=True, help="task config (YAML)")
    parser.add_argument("--json", action="store_true", help="print the saved state as JSON, for scripts")
    parser.set_defaults(handler=status)


def _config(path: str, *, source_passwords: bool = True) -> TaskConfig:
    try:
        return load_config(path, source_passwords=source_passwords)
    except ConfigError as exc:
        raise CliError(str(exc)) from exc


def run(args: argparse.Namespace) -> int:
    from replicator.heap import collector_paused
    from replicator.source.spawn import start_fork_server

    config = _config(args.config)
    from replicator.logs import configure

    configure(config.task, args.log_level, args.log_format)
    with collector_paused():
        from replicator.apply.early_meta import EarlyMeta

        target = config.target  # (its server's work while the rest is imported)
        early = EarlyMeta.begin(target.connection_kwargs(), target.meta_schema, config.task)
        from replicator.apply.applier import ApplierFailed
        from replicator.daemon import Daemon, DaemonError
        from replicator.daemon.startup import KeptAdmin
        from replicator.transient import Backoff
    meta_ready = early.ready()  # (its thread ended)
    # (forked from this process, which has no thread yet: the workers' modules are imported)
    start_fork_server(fork=True)
    if config.task_mode != "incremental":
        code = backfill_first(config)
        if code != ExitCode.OK or config.task_mode == "full":
            return code
    stopping = threading.Event()  # (SIGTERM during a wait to start again too)
    backoff = Backoff(cap=config.options.max_backoff)
    attempt = 0
    again: Counter[str] = Counter()  # (the starts again so far, by error: the retries metric)
    member = getattr(args, "member", None)
    kept = KeptAdmin() if member else None  # (a member's admin API answers while it starts again)
    try:
        while True:
            attempt += 1
            try:
                daemon = Daemon(
                    config, args.log_format, stopping, again, meta_ready=meta_ready, member=member, kept=kept
                )
                meta_ready = False  # (a start again makes sure of it itself)
                return daemon.run()
            except StartAgain as exc:
                again[exc.kind] += 1
                attempt = 1 if exc.ran else attempt
                delay = backoff.delay(attempt)
                log.warning("the daemon met an error a retry cures (%s); starting again in %.1fs", exc, delay)
            except DaemonError as exc:
                raise CliError(str(exc), exc.code) from exc
            except ApplierFailed:
                return 1  # logged with its traceback where it happened
            if stopping.wait(delay):
                return 0
    finally:
        if kept is not None:
            kept.close()  # (the process ends: nothing starts again)


def backfill_first(config) -> int:
    """task_mode all and full: copy the shards with the Spark backfill, unless it is done
    (or the task already streams); one interrupted before (the daemon killed during it)
    continues from its unfinished chunks, one that failed runs again from scratch."""
    import logging

    from replicator.apply.meta import Meta
    from replicator.cli.progress import Progress
    from replicator.servers import connect_downstream
    from replicator.spark.backfill import backfill
    from replicator.spark.session import spark_session

    log = logging.getLogger("shardmerge.task")
    down = config.target.connection_kwargs()
    meta = Meta(lambda: connect_downstream(down), config.target.meta_schema, config.task)
    meta.ensure()
    records = meta.backfill.load()
    if meta.task_state.load() is not None:
        log.info("phase: streaming (task_mode %s: the task streams already, no backfill)", config.task_mode)
        return ExitCode.OK
    if records and all(r.state == "done" for r in records.values()):
        log.info("phase: streaming (task_mode %s: the backfill is done)", config.task_mode)
        return ExitCode.OK
    again = bool(records)
    log.info(
        "phase: backfill (task_mode %s%s)",
        config.task_mode,
        ": the last one did not finish" if again else "",
    )
    spark = spark_session(
        config.options.spark_master,
        app=f"shardmerge backfill {config.task}",
        conf=dict(config.options.spark_conf),
    )
    try:
        report = backfill(
            config,
            spark,
            truncate=again,
            rows_per_split=config.options.backfill_rows_per_split,
            listener=Progress("copied"),
        )
    finally:
        spark.stop()
    log.info("backfill done: %s", json.dumps(report.data()))
    if report.ddl_during:
        for note in report.ddl_during:
            log.warning("DDL ran during the backfill: %s", note)
        return ExitCode.WAITING  # the operator decides what to do about it
    return ExitCode.OK


def _reach_target(config: TaskConfig) -> None:
    """Connected to once first, so that a target that cannot be reached is named, with its
    address and the config's field to fix, as `shardmerge check` names it."""
    import pymysql

    from replicator.servers import connect_downstream

    target = config.target
    try:
        connect_downstream(target.connection_kwargs()).close()
    except pymysql.err.MySQLError as exc:
        message, fix = connect_failure("target", target.host, target.port, exc)
        raise CliError(f"target: {message}; {fix}", ExitCode.CONNECTION) from exc


def status(args: argparse.Namespace) -> int:
    from replicator.cli.status import saved_status

    # it reads the target only: an operator without the sources' passwords may run it
    config = _config(args.config, source_passwords=False)
    _reach_target(config)
    report = saved_status(config)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    print(f"task {report['task']} ({report['task_mode']}): {report['phase']}")
    if report.get("daemon"):
        d = report["daemon"]
        if d["live"]:
            print(f"run by daemon {d['holder']} (lease epoch {d['epoch']})")
        elif d["released"]:
            print(f"last run by daemon {d['holder']}, which stopped cleanly: `shardmerge run` goes on")
        else:
            print(
                f"last run by daemon {d['holder']}, whose lease expired {-d['expires_in']:.0f} s ago: it is "
                "down or cut off from the downstream; `shardmerge run` (or a standby) takes over"
            )
    for name, m in report["members"].items():
        print(f"member {name} (epoch {m['epoch']}): reads {', '.join(m['sources']) or 'no source'}")
    for source, s in report["sources"].items():
        print(f"source {source}: resumes at {s['position']}")
    for target, g in report["groups"].items():
        print(f"group {target}: version {g['version']}, {len(g['shards'])} shards")
        for shard, block in g["blocked"].items():
            print(f"  blocked {shard} ({block['kind']}) at {block['position']}: {block['reason']}")
            print(f"    DDL: {block['ddl']}")
    for shard, p in report["paused"].items():
        print(f"paused {shard} from {p['position']}: {p['reason']}")
    for shard in report.get("resuming", ()):
        print(f"resuming {shard}: its rows written while paused are being merged")
    for target, b in report["backfill"].items():
        print(f"backfill of {target}: {b['done']} of {b['chunks']} chunks copied ({b['rows']:,} rows)")
    return 0
