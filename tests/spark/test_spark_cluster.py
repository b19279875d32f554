"""Backfill and verify on a real Spark standalone cluster: a master and a worker started from
the installed pyspark (the `spark_cluster` fixture), the sandbox's shards, and the MariaDB
JDBC driver, which reaches the executors only through the driver (spark.jars or spark-submit's
--jars). The commands run as a user runs them: `shardmerge ... --spark-master spark://...`, and
spark-submit with replicator/cli/spark_submit.py. Tests that use the cluster get the `cluster`
marker (`make test-cluster`); those of a master that is not there run in `make test` too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replicator.spark.cluster import ClusterError, LocalCluster, RunningCluster
from replicator.spark.session import JDBC_JAR
from tests.replication import REPO, ReplicationTask
from tests.spark.test_backfill import COLUMNS, CREATE, differing_schemas, fill, shardmerge

pytestmark = pytest.mark.timeout(900)

ROWS = 5_000  # per shard; 2,000 rows a split: three tasks a shard
SUBMIT = REPO / "replicator" / "cli" / "spark_submit.py"


def filled(task: ReplicationTask) -> None:
    """Four shards on two servers whose schemas differ, ROWS rows each."""
    differing_schemas(task)
    for n, shard in enumerate(task.shards):
        fill(task, shard, ROWS, n * 1_000_000, COLUMNS.replace("note, ", "") if n == 0 else COLUMNS)


def downstream_rows(task: ReplicationTask) -> int:
    return task.sandbox.downstream.execute(f"SELECT COUNT(*) FROM `{task.target_db}`.orders")[0][0]


def finished_app(cluster: RunningCluster, name: str) -> dict:
    """The master's record of the application `name` that ran last, once it finished."""
    deadline = time.monotonic() + 30  # the driver's goodbye reaches the master a moment later
    while True:
        apps = [a for a in cluster.state()["completedapps"] if a["name"] == name]
        if apps or time.monotonic() > deadline:
            assert apps, f"no finished application {name!r}: {cluster.state()}"
            return max(apps, key=lambda a: a["starttime"])
        time.sleep(0.5)


def assert_ran_on_executors(cluster: RunningCluster, name: str) -> None:
    """The application ran an executor on the worker, which loaded the JDBC jar the driver
    served and ran the job's tasks (on a cluster the rows are read and written only there)."""
    app = finished_app(cluster, name)
    assert app["state"] == "FINISHED", app
    executors = sorted((cluster.work_dir() / app["id"]).iterdir())
    assert executors, f"no executor of {app['id']} ran on the worker"
    log = "\n".join((e / "stderr").read_text(errors="replace") for e in executors)
    assert f"{JDBC_JAR.name} to class loader" in log, log[-3000:]  # fetched from the driver, not the worker's
    assert "Finished task" in log, log[-3000:]
    assert any((e / JDBC_JAR.name).is_file() for e in executors)


@pytest.fixture(scope="module")
def copied(sandbox, spark_cluster: RunningCluster, tmp_path_factory: pytest.TempPathFactory):
    """A task whose shards `shardmerge backfill --spark-master` copied on the cluster."""
    task = ReplicationTask(sandbox, tmp_path_factory.mktemp("copied"), CREATE)
    filled(task)
    options = f"--config {task.config_path} --spark-master {spark_cluster.master} --rows-per-split 2000"
    result = shardmerge("backfill", *options.split())
    yield task, result
    task.cleanup()


def test_backfill_on_the_cluster_copies_every_shard_row_for_row(copied, spark_cluster):
    task, result = copied
    assert result.returncode == 0, result.stderr
    assert f"{task.target_db}.orders: done, {4 * ROWS:,} rows copied in " in result.stderr
    assert downstream_rows(task) == 4 * ROWS
    assert task.difference() is None  # row for row, each shard's values in the joined schema
    assert_ran_on_executors(spark_cluster, f"shardmerge backfill {task.name}")


def test_verify_on_the_cluster_finds_planted_differences_and_its_fix_sql_repairs_them(
    copied, spark_cluster, tmp_path
):
    task, _ = copied
    down = task.sandbox.downstream
    table = f"`{task.target_db}`.orders"
    down.execute(f"DELETE FROM {table} WHERE id = 17")
    down.execute(f"UPDATE {table} SET amount = amount + 1 WHERE id = {3_000_000 + 42}")
    fix = tmp_path / "fix.sql"
    options = (
        f"--config {task.config_path} --spark-master {spark_cluster.master} --fix-sql {fix} --chunk-rows 1000"
    )
    result = shardmerge("verify", *options.split())
    assert result.returncode == 4, result.stderr  # the downstream needs fixing
    assert f"{4 * ROWS} rows upstream, {4 * ROWS - 1} downstream" in result.stdout
    assert "missing 1, extra 0, different 1" in result.stdout
    # a key with its shard's extract columns (_source, _schema, _table)
    first, last = task.shard_id(task.shards[0]), task.shard_id(task.shards[3])
    assert f"missing: key 17, {first.source}, {first.schema}, {first.table}" in result.stdout
    assert f"different: key {3_000_000 + 42}, {last.source}, {last.schema}, {last.table}" in result.stdout
    assert_ran_on_executors(spark_cluster, f"shardmerge verify {task.name}")
    subprocess.run(
        ["mariadb", "-h127.0.0.1", f"-P{down.port}", "-uroot"], input=fix.read_text(), text=True, check=True
    )
    assert task.difference() is None


def spark_submit(*args: str) -> tuple[int, str]:
    """spark-submit of the installed pyspark, with this checkout's shardmerge on the driver: its
    exit status and output (spark-submit passes the Python driver's stderr on to its stdout)."""
    import pyspark

    env = {**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable}
    result = subprocess.run(
        [str(Path(pyspark.__file__).parent / "bin" / "spark-submit"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    return result.returncode, result.stdout + result.stderr


@pytest.fixture
def task(sandbox, tmp_path):
    t = ReplicationTask(sandbox, tmp_path, CREATE)
    yield t
    t.cleanup()


def test_spark_submit_runs_the_backfill_on_the_cluster(task, spark_cluster, tmp_path):
    filled(task)
    events = tmp_path / "events"
    events.mkdir()
    # the event log, in plain JSON lines, says what settings the job ran with
    confs = f"spark.sql.shuffle.partitions=4 spark.eventLog.enabled=true spark.eventLog.dir={events} "
    confs += "spark.eventLog.compress=false"
    code, output = spark_submit(
        *f"--master {spark_cluster.master} --jars {JDBC_JAR}".split(),
        *(option for conf in confs.split() for option in ("--conf", conf)),
        *f"{SUBMIT} backfill --config {task.config_path} --rows-per-split 2000".split(),
    )
    assert code == 0, output[-5000:]
    assert f"{task.target_db}.orders: done, {4 * ROWS:,} rows copied in " in output
    assert task.difference() is None
    assert_ran_on_executors(spark_cluster, f"shardmerge backfill {task.name}")
    # the settings the job ran with: spark-submit's where it made them, ours where it did not
    settings = spark_properties(events)
    assert settings["spark.sql.shuffle.partitions"] == "4" and settings["spark.scheduler.mode"] == "FAIR"
    assert settings["spark.master"] == spark_cluster.master
    assert settings["spark.app.name"] == f"shardmerge backfill {task.name}"


def spark_properties(events: Path) -> dict[str, str]:
    """The Spark properties of the one application whose event log is in `events` (a folder
    of rolled files, by Spark 4's default)."""
    for log in sorted(events.rglob("events_*")):
        for line in log.read_text().splitlines():
            event = json.loads(line)
            if event["Event"] == "SparkListenerEnvironmentUpdate":
                return dict(event["Spark Properties"])
    raise AssertionError(f"no environment in {events}")


def test_spark_submit_without_the_jdbc_jar_says_to_pass_it(task, spark_cluster):
    code, output = spark_submit(
        "--master", spark_cluster.master, str(SUBMIT), "backfill", "--config", str(task.config_path)
    )
    assert code == 2, output[-5000:]
    assert f"org.mariadb.jdbc.Driver is not on the driver's class path: pass --jars {JDBC_JAR}" in output
    assert "Traceback" not in output
    assert not task.sandbox.downstream.execute(f"SHOW DATABASES LIKE '{task.target_db}'")


# -- a master that is not there: no cluster needed, so these run in `make test` too -------------
@pytest.mark.parametrize("command", ["backfill", "verify"])
def test_an_unreachable_master_is_named_within_seconds(task, command):
    started = time.monotonic()
    result = shardmerge(command, "--config", str(task.config_path), "--spark-master", "spark://127.0.0.1:1")
    assert time.monotonic() - started < 30  # Spark alone retries for over a minute
    assert result.returncode == 3, result.stderr  # ExitCode.CONNECTION
    assert (
        "the Spark master spark://127.0.0.1:1 is unreachable (127.0.0.1:1: Connection refused)"
        in result.stderr
    )
    assert "Traceback" not in result.stderr
    assert not task.sandbox.downstream.execute(f"SHOW DATABASES LIKE '{task.target_db}'")


def test_a_master_url_without_a_port_is_refused_as_bad_input(task):
    result = shardmerge(
        "backfill", "--config", str(task.config_path), "--spark-master", "spark://spark-master"
    )
    assert result.returncode == 2, result.stderr  # ExitCode.CONFIG
    assert "the Spark master spark://spark-master is not spark://HOST:PORT" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.cluster  # a spark-submit JVM: 10-20 s
def test_spark_submit_to_an_unreachable_master_is_named_within_seconds(task):
    started = time.monotonic()
    options = f"--master spark://127.0.0.1:1 --jars {JDBC_JAR} {SUBMIT} verify --config {task.config_path}"
    code, output = spark_submit(*options.split())
    assert time.monotonic() - started < 60
    assert code == 3, output[-5000:]
    assert "shardmerge verify: the Spark master spark://127.0.0.1:1 is unreachable" in output
    assert "Traceback" not in output


@pytest.mark.cluster  # a master's JVM: 5-10 s
def test_a_cluster_that_cannot_start_says_which_process_and_why(tmp_path):
    with (
        pytest.raises(ClusterError, match=r"worker-0 exited with status 1:(.|\n)*Usage: Worker"),
        LocalCluster(memory="lots", directory=tmp_path),
    ):
        pass
    # The master is stopped too. Not read from its log: a TERM that comes before its JVM set
    # its handlers ends it without a word (CI saw that once).
    assert not _processes_working_in(tmp_path)


def _processes_working_in(directory):
    """The pids whose environment points SPARK_LOCAL_DIRS into `directory`: the cluster's JVMs."""
    marker = f"SPARK_LOCAL_DIRS={directory}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker in environ.read_bytes():
                found.append(int(environ.parent.name))
        except OSError:  # gone, or not ours
            continue
    return found
