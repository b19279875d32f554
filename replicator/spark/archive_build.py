"""Builds the Spark class archive (replicator/spark/archive.py): a session that runs
the kinds of work a backfill and a verify do, in a JVM that writes the classes it
loaded to the archive as it exits; then a session that maps it, before it is put
where sessions look for it.

    python -m replicator.spark.archive_build [--if-missing]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from replicator.spark.archive import archive_path, stale_archives


def build() -> Path:
    path = archive_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        partial = Path(tmp) / path.name
        done = subprocess.run(
            [sys.executable, "-m", "replicator.spark.archive_build", "--exercise", str(partial)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0 or not partial.exists():
            raise SystemExit(f"the Spark class archive was not written:\n{done.stdout}{done.stderr}")
        # the JVM maps an archive cut short (a full disk) and dies of it: try it first
        tried = subprocess.run(
            [sys.executable, "-m", "replicator.spark.archive_build", "--try", str(partial)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if tried.returncode != 0:
            raise SystemExit(f"the Spark class archive does not work:\n{tried.stdout}{tried.stderr}")
        partial.replace(path)  # whole or not at all: JVMs starting now map it
    for stale in stale_archives():  # a JVM mapping one keeps its pages
        stale.unlink(missing_ok=True)
    return path


def _exercise(partial: Path) -> None:
    """In a process of its own: a session whose JVM archives its classes on exit."""
    from pyspark.sql import functions as F

    from replicator.spark.session import spark_session

    spark = spark_session(
        java_options=[f"-XX:ArchiveClassesAtExit={partial}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
    )
    df = spark.range(20_000).select(
        F.col("id"),
        F.col("id").cast("string").alias("text"),
        (F.col("id") / 3).cast("decimal(20,4)").alias("amount"),
        F.current_timestamp().alias("at"),
    )
    df.groupBy((F.col("id") % 7).alias("k")).agg(F.count("*"), F.sum("amount"), F.max("text")).collect()
    df.where(F.col("id") % 2 == 0).select(F.sha2(F.col("text"), 256)).count()
    proc = spark.sparkContext._gateway.proc  # the JVM, which writes the archive as it exits
    spark.stop()
    proc.stdin.close()  # the JVM's sign to exit (it watches its stdin)
    proc.wait(timeout=300)


def _try(partial: Path) -> None:
    from replicator.spark.session import spark_session

    spark = spark_session(java_options=[f"-XX:SharedArchiveFile={partial}"])
    spark.range(10).count()
    spark.stop()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--exercise"]:
        _exercise(Path(sys.argv[2]))
    elif sys.argv[1:2] == ["--try"]:
        _try(Path(sys.argv[2]))
    elif sys.argv[1:2] == ["--if-missing"] and archive_path().exists():
        print(f"Spark class archive: {archive_path()} (built before)")
    else:
        print(f"Spark class archive: {build()}")
