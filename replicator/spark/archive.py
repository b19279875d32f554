"""A class-data-sharing archive of the classes Spark's driver loads, so that a
command's JVM maps them ready-made instead of reading and verifying some ten
thousand classes from jars: on this project's machines it cuts a SparkSession's
start from about 7 s to 3.5 s, and its first job by a second.

The archive belongs to one JDK and one pyspark installation: the JVM checks its
own build and each jar of the class path (path, size and modification time) and
ignores an archive that does not match, so a stale one costs only the time it
would have saved. A reinstalled pyspark (a new virtualenv at the same path, as CI
makes) has jars of new times, so the archive's name carries all the JVM checks
and `make setup` builds one where it is missing (about 30 s, see
replicator/spark/archive_build.py):

    python -m replicator.spark.archive_build [--if-missing]

Only the driver's JVM uses it (in local mode it runs the executors too); executors
on a cluster start from other class paths.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def archive_path() -> Path:
    import pyspark

    return _cache() / f"spark-{pyspark.__version__}-{_digest(str(spark_home()))}-{_digest(_matched())}.jsa"


def stale_archives() -> list[Path]:
    """This installation's archives that no longer match it (160 MB each)."""
    current = archive_path()
    return [p for p in current.parent.glob(current.name.rsplit("-", 1)[0] + "-*.jsa") if p != current]


def _cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "shardmerge"


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def _matched() -> str:
    """What the JVM checks an archive against: its own build and the class path's jars."""
    parts = []
    java = _java()
    if java is not None:
        jvm = java.parent.parent / "lib" / "server" / "libjvm.so"
        parts.append(f"{java}:{_stamp(jvm) if jvm.exists() else _stamp(java)}")
    jars = spark_home() / "jars"
    if jars.is_dir():
        parts.extend(f"{jar.name}:{_stamp(jar)}" for jar in sorted(jars.iterdir()))
    return "\n".join(parts)


def _java() -> Path | None:
    """The java pyspark starts: JAVA_HOME's, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and os.path.exists(found) else None


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size}:{st.st_mtime_ns}"


def java_options() -> list[str]:
    """The driver's JVM options that use the archive, when there is one. The JVM's
    own notes on it (a mismatch, classes it skips) would go to stdout: off."""
    path = archive_path()
    if not path.exists():
        return []
    return [f"-XX:SharedArchiveFile={path}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
