"""A class-data-sharing archive of the classes Spark's driver loads, so that a
command's JVM maps them ready-made instead of reading and verifying some ten
thousand classes from jars: on this project's machines it cuts a SparkSession's
start from about 7 s to 3.5 s, and its first job by a second.

The archive belongs to one JDK and one pyspark installation (its class path); the
JVM checks that and ignores one that does not match, so a stale archive costs
only the time it would have saved. `make setup` builds it (about 30 s, see
replicator/spark/archive_build.py):

    python -m replicator.spark.archive_build [--if-missing]

Only the driver's JVM uses it (in local mode it runs the executors too); executors
on a cluster start from other class paths.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def archive_path() -> Path:
    import pyspark

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "shardmerge"
    # one per installation: the class path recorded in the archive is this one's
    where = hashlib.sha1(str(spark_home()).encode()).hexdigest()[:10]
    return cache / f"spark-{pyspark.__version__}-{where}.jsa"


def java_options() -> list[str]:
    """The driver's JVM options that use the archive, when there is one. The JVM's
    own notes on it (a mismatch, classes it skips) would go to stdout: off."""
    path = archive_path()
    if not path.exists():
        return []
    return [f"-XX:SharedArchiveFile={path}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
