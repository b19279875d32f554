"""Shared fixtures, for the tests of every folder (tests/unit, server, daemon, spark). The MariaDB
sandbox starts lazily: only a session that has a test asking for `sandbox` or `scratch_db` pays
the second or so it takes, and pure unit tests never do."""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from replicator.apply.meta import Meta
from replicator.sandbox import Sandbox
from replicator.servers import connect_downstream
from replicator.spark.cluster import LocalCluster, RunningCluster
from tests import ram_dir

# Tests that use any of these get the `mariadb` marker, so `-m "not mariadb"` skips them.
MARIADB_FIXTURES = frozenset({"sandbox", "scratch_db"})
# Tests on the Spark cluster get the `cluster` marker: `make test-cluster` runs them, `make test` not.
CLUSTER_FIXTURES = frozenset({"spark_cluster"})
_RAM_FOLDER = pytest.StashKey[Path]()  # this run's temporary folders, in memory


# The files with the most test time first, largest first (summed from a JUnit report of a full
# run with the servers' data in memory: those of 20 s and more): with a file per worker at a
# time (--dist loadfile, which keeps the order here), a long file started late holds the run's
# end for its whole length. Each is a file's name without its folder (tests/unit, server,
# daemon or spark) and `.py`.
SLOW_FIRST = (
    "test_converted_rows", "test_crash_points", "test_unreadable_resume", "test_paused_shards",
    "test_resync", "test_ways_out_live", "test_replication", "test_operator", "test_admin",
    "test_live_stories", "test_dm_verbs", "test_fuzz", "test_backfill", "test_downstream_faults_retried",
    "test_row_filters_end_to_end", "test_faults", "test_backfill_resume", "test_join_laws", "test_chaos",
    "test_scenarios_mariadb", "test_row_events", "test_shard_decisions", "test_plan_cli",
    "test_tutorial_first_task", "test_keeps_rows", "test_live_view", "test_validation",
    "test_decide_on_a_copy", "test_failover", "test_downstream_alter", "test_long_pauses",
    "test_monitoring", "test_downstream_steps", "test_standby", "test_cli_help",
)


@pytest.hookimpl(tryfirst=True)  # (before pytest's own reads `basetemp`)
def pytest_configure(config: pytest.Config) -> None:
    """The run's temporary folders in memory (tests/ram_dir.py), unless given (--basetemp);
    an xdist worker gets its folder under the controller's."""
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        folder = ram_dir.make()
        if folder is not None:
            config.option.basetemp = str(folder)
            config.stash[_RAM_FOLDER] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_RAM_FOLDER, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: n for n, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))  # (stable: in a file, its order)
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if MARIADB_FIXTURES.intersection(fixtures):
            item.add_marker(pytest.mark.mariadb)
        if CLUSTER_FIXTURES.intersection(fixtures):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """Two upstreams (up1, up2) and a downstream (down), shared by the whole session. Tests that
    stop an instance must start it again; `scratch_db` also restarts any left stopped."""
    # The watchdog tears the servers down even if this pytest process is killed.
    sb = Sandbox(tmp_path_factory.mktemp("sandbox"), upstreams=2, watchdog=True)
    sb.up()
    try:
        yield sb
    finally:
        sb.down()


@pytest.fixture
def scratch_db(sandbox: Sandbox, request: pytest.FixtureRequest) -> Iterator[str]:
    """The name of a database unique to this test, created empty on every sandbox instance and
    dropped afterwards."""
    slug = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")[:40]
    name = f"t_{slug}_{uuid.uuid4().hex[:8]}"
    # Cheap when all are running; brings back an instance an earlier failed test left stopped.
    sandbox.up()
    for inst in sandbox.instances:
        inst.execute(f"CREATE DATABASE `{name}`")
    yield name
    sandbox.up()
    for inst in sandbox.instances:
        inst.execute(f"DROP DATABASE IF EXISTS `{name}`")


@dataclass(frozen=True)
class ScratchMeta:
    """A task's meta schema beside the scratch database (`<db>_meta`, task "task"), its tables
    made, and the downstream's connection settings."""

    meta: Meta
    kwargs: dict

    def connect(self):
        return connect_downstream(self.kwargs)

    def another(self) -> Meta:
        """The same meta schema as another daemon of the task sees it (its own connections)."""
        return Meta(self.connect, self.meta.schema, self.meta.task)


@pytest.fixture
def scratch_meta(sandbox: Sandbox, scratch_db: str) -> Iterator[ScratchMeta]:
    down = sandbox.downstream
    kwargs = {"host": down.host, "port": down.port, "user": down.user, "password": down.password}
    meta = Meta(lambda: connect_downstream(kwargs), f"{scratch_db}_meta", "task")
    meta.ensure()
    yield ScratchMeta(meta, kwargs)
    meta.close()
    down.execute(f"DROP DATABASE IF EXISTS `{scratch_db}_meta`")


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole test session (a cold one takes ~10 s)."""
    from replicator.spark.session import spark_session

    session = spark_session("local[2]", app="shardmerge tests")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCluster]:
    """A Spark standalone master and one worker (1 core, 1 GB) on 127.0.0.1, for the session
    (about 20 s to start); its executors get the JDBC driver only from the driver (spark.jars)."""
    with LocalCluster(directory=tmp_path_factory.mktemp("spark-cluster")) as cluster:
        yield cluster
