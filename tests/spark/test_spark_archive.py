"""The class archive of Spark's driver JVM (replicator/spark/archive.py): `make setup`
builds it, a session maps Spark's classes from it, and one that does not match this
JDK or installation is ignored without a word on stdout."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from replicator.spark import archive

pytestmark = pytest.mark.timeout(300)

# a session in a process of its own (the tests' own session is up already), logging
# where each class came from
SESSION = """
import sys
from replicator.spark.session import spark_session
# (as `--spark-conf` gives it: added to the archive's options)
spark = spark_session(conf={"spark.driver.extraJavaOptions": "-Xlog:class+load=info:file=" + sys.argv[1]})
print("rows", spark.range(5).count())
"""


def session(tmp_path, env=None) -> tuple[subprocess.CompletedProcess, list[str]]:
    log = tmp_path / "classes.log"
    done = subprocess.run(
        [sys.executable, "-c", SESSION, str(log)], capture_output=True, text=True, timeout=240, env=env
    )
    assert done.returncode == 0, done.stderr
    return done, [line for line in log.read_text().splitlines() if " org.apache.spark." in line]


def test_setup_built_the_archive_and_a_session_maps_sparks_classes_from_it(tmp_path):
    assert archive.archive_path().exists(), "make setup builds it: python -m replicator.spark.archive_build"
    done, spark_classes = session(tmp_path)
    assert done.stdout.strip() == "rows 5"
    # (lambdas are made as the JVM runs: from neither)
    shared = [line for line in spark_classes if "shared objects file" in line]
    from_jars = [line for line in spark_classes if "source: file:" in line or "source: jar:" in line]
    assert len(shared) > 1000 and len(from_jars) < 0.05 * len(shared), (len(shared), len(from_jars))


@pytest.mark.long  # (a JVM started without an archive: 35 s)
def test_an_archive_of_another_installation_is_ignored_quietly(tmp_path):
    env = os.environ | {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    foreign = subprocess.run(
        [sys.executable, "-c", "from replicator.spark import archive; print(archive.archive_path())"],
        capture_output=True, text=True, env=env, check=True,
    ).stdout.strip()
    os.makedirs(os.path.dirname(foreign))
    with open(foreign, "wb") as f:  # not this JVM's archive
        f.write(os.urandom(64 * 1024))
    done, spark_classes = session(tmp_path, env)
    assert done.stdout.strip() == "rows 5"  # no JVM note on the command's output
    assert spark_classes and not any("shared objects file" in line for line in spark_classes)


def test_a_spark_setting_of_the_command_line_is_checked():
    done = subprocess.run(
        [sys.executable, "-m", "replicator.cli.shardmerge", "backfill", "--config", "x.yaml", "--spark-conf", "memory=4g"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2 and "'memory=4g': expected spark.SOME.SETTING=VALUE" in done.stderr


def test_a_reinstalled_spark_gets_an_archive_of_its_own_and_the_old_one_is_stale(tmp_path, monkeypatch):
    # CI makes a new virtualenv at the same path: same jars, new modification times,
    # which the JVM refuses an archive for
    home = tmp_path / "pyspark"
    (home / "jars").mkdir(parents=True)
    jar = home / "jars" / "spark-core.jar"
    jar.write_bytes(b"classes")
    monkeypatch.setattr(archive, "spark_home", lambda: home)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = archive.archive_path()
    first.parent.mkdir(parents=True)
    first.write_bytes(b"archive")
    assert archive.archive_path() == first and archive.stale_archives() == []

    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 1_000_000_000))
    again = archive.archive_path()
    assert again != first and again.parent == first.parent
    assert archive.stale_archives() == [first]

    monkeypatch.setattr(archive, "spark_home", lambda: tmp_path / "elsewhere")  # another installation's
    assert first not in archive.stale_archives()
