"""The SparkSession of the backfill and verify jobs, and how they reach the servers
over JDBC (the Debian MariaDB Connector/J, for MySQL and MariaDB alike)."""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from replicator.errors import CliError
from replicator.spark.cluster import check_master

log = logging.getLogger("shardmerge.spark")

JDBC_JAR = Path("/usr/share/java/mariadb-java-client.jar")
JDBC_DRIVER = "org.mariadb.jdbc.Driver"
# As the applier's sessions: TIMESTAMPs in UTC, a 0 in an AUTO_INCREMENT column stays
# 0, errors are loud.
SESSION_VARIABLES = (
    "time_zone='+00:00',"
    "sql_mode='STRICT_TRANS_TABLES,NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION',"
    "foreign_key_checks=0"
)
# Settings that only count when the driver's JVM starts: spark-submit started it already.
LAUNCH_SETTINGS = frozenset({"spark.driver.extraJavaOptions", "spark.jars"})


def spark_session(
    master: str | None = None,
    app: str = "shardmerge",
    log_level: str = "WARN",
    java_options: list[str] | None = None,
    conf: dict[str, str] | None = None,
):
    """A session on `master` (local[*] by default). The JDBC jar must be on the
    driver and executors: here it is the Debian path, which the driver ships to the
    executors (spark.jars). Under spark-submit, its --master, --jars and --conf count
    (replicator/cli/spark_submit.py). `log_level`: Spark's own logging once it runs (WARN:
    what goes wrong only). `java_options` of the driver's JVM; by default the class archive's, if built
    (replicator/spark/archive.py). `conf`: settings of one's own, over ours (the
    driver's Java options are added to ours)."""
    submitted = _spark_submit_conf()
    if submitted is None and not JDBC_JAR.exists():
        raise CliError(f"the MariaDB JDBC driver is missing at {JDBC_JAR} (apt-get install libmariadb-java)")
    check_master(master or (submitted or {}).get("spark.master", ""))
    # Python workers must be this interpreter, which has our dependencies.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from replicator.spark import archive

    own = dict(conf or {})
    options = archive.java_options() if java_options is None else java_options
    scratch = ""
    if submitted is None:
        # our own scratch: Spark leaves its folders in /tmp (spark-*) even at a clean stop;
        # the log configuration from the JVM's start (Spark's default profile says INFO)
        scratch = _scratch()
        log_config = _log_config(log_level, Path(scratch))
        options = [f"-Dlog4j2.configurationFile=file:{log_config}", f"-Djava.io.tmpdir={scratch}", *options]
    settings = {
        "spark.driver.extraJavaOptions": " ".join([*options, own.pop("spark.driver.extraJavaOptions", "")]),
        "spark.jars": ",".join(j for j in (str(JDBC_JAR), own.pop("spark.jars", "")) if j),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "8",
        "spark.scheduler.mode": "FAIR",  # one job per shard, running side by side
    } | own
    if submitted is not None:
        # spark-submit's --conf, --jars and spark-defaults.conf win over our defaults (not over
        # `conf`). Its JVM is up: the driver's Java options would come too late, and --jars put
        # the JDBC driver on its class path.
        settings = {
            k: v for k, v in settings.items() if k not in LAUNCH_SETTINGS and (k in own or k not in submitted)
        }
    builder = SparkSession.builder.appName(app)
    if master or submitted is None:  # else spark-submit's --master
        builder = builder.master(master or "local[*]")
    for name, value in settings.items():
        builder = builder.config(name, value.strip())
    if submitted is None:
        _launch({"spark.master": master or "local[*]", "spark.app.name": app, **settings}, scratch)
    session = builder.getOrCreate()
    if submitted is not None:
        _check_driver_class(session)
    session.sparkContext.setLogLevel(log_level)
    return session


def _launch(settings: dict[str, str], scratch: str) -> None:
    """Start the driver's JVM (once per process) with its stderr ours to read: what it says
    there goes to our log, the notes it prints at every start (an incubator module, a
    hostname on a loopback address, no native Hadoop library) at DEBUG (`noise`). Its
    local files go to `scratch` (SPARK_LOCAL_DIRS: as spark.local.dir, Spark warns that
    a cluster manager's would win)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    conf = SparkConf(loadDefaults=False)
    for name, value in settings.items():
        conf.set(name, value.strip())
    before = os.environ.get("SPARK_LOCAL_DIRS")
    os.environ["SPARK_LOCAL_DIRS"] = scratch  # (the JVM's environment is ours at its launch)
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    finally:
        if before is None:
            os.environ.pop("SPARK_LOCAL_DIRS", None)
        else:
            os.environ["SPARK_LOCAL_DIRS"] = before
    SparkContext._ensure_initialized(gateway=gateway)
    threading.Thread(target=_relay, args=(gateway.proc.stderr,), name="spark-stderr", daemon=True).start()


# What the JVM and Spark print at every start or job that asks nothing of anyone (our
# local master binds to the loopback address on purpose; Spark has Java fallbacks for
# Hadoop's native code; Spark 4 asks the JVM for its vector module; a wide table's plan
# is shortened in Spark's own debug text).
_NOISE = re.compile(
    r"Using incubator modules|resolves to a loopback address|Set SPARK_LOCAL_IP|"
    r"Unable to load native-hadoop library|Truncated the string representation of a plan"
)


def noise(line: str) -> bool:
    return _NOISE.search(line) is not None


def _relay(stream) -> None:
    for raw in stream:
        line = raw.decode("utf-8", "replace").rstrip()
        if line:
            log.log(logging.DEBUG if noise(line) else logging.WARNING, "spark: %s", line)


def _scratch() -> str:
    """A folder of this process's for Spark's local files, removed when it exits; those of
    processes gone (killed) are removed now."""
    base = Path(tempfile.gettempdir())
    for old in base.glob("shardmerge-spark-*"):
        pid = old.name.split("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(old, ignore_errors=True)
    path = tempfile.mkdtemp(prefix=f"shardmerge-spark-{os.getpid()}-")
    atexit.register(shutil.rmtree, path, True)
    return path


def _spark_submit_conf() -> dict[str, str] | None:
    """spark-submit's settings (--master, --jars, --conf, spark-defaults.conf) when it started
    this Python process: its JVM is up and told us where (PYSPARK_GATEWAY_PORT). None if not."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to that JVM, whose properties SparkConf() reads
    return dict(SparkConf().getAll())


def _check_driver_class(session) -> None:
    """Under spark-submit the JDBC driver is there only if --jars (or --packages) brought it:
    say so now rather than with a Java stack trace at the first read."""
    jvm = session.sparkContext._jvm
    try:
        jvm.org.apache.spark.util.Utils.classForName(JDBC_DRIVER, True, False)
    except Exception as exc:
        session.stop()
        raise CliError(
            f"the JDBC driver {JDBC_DRIVER} is not on the driver's class path: pass "
            f"--jars {JDBC_JAR} (MariaDB Connector/J) to spark-submit"
        ) from exc


def _log_config(level: str, folder: Path) -> Path:
    """A log4j2 configuration: Spark's messages at `level` and above, on stderr."""
    path = folder / f"log4j2-{level.lower()}.properties"
    if not path.exists():
        path.write_text(
            f"rootLogger.level = {level.lower()}\n"
            "rootLogger.appenderRef.stderr.ref = stderr\n"
            "appender.console.type = Console\n"
            "appender.console.name = stderr\n"
            "appender.console.target = SYSTEM_ERR\n"
            "appender.console.layout.type = PatternLayout\n"
            "appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex\n"
        )
    return path


def jdbc_url(host: str, port: int, *, write: bool = False) -> str:
    """jdbc:mysql:// so that Spark picks its MySQL dialect (backquoted names);
    Connector/J takes it as its own."""
    options = ["tinyInt1isBit=false", f"sessionVariables={SESSION_VARIABLES}"]
    if write:
        options.append("useBulkStmts=true")
    return f"jdbc:mysql://{host}:{port}/?{'&'.join(options)}"


def jdbc_properties(connection: dict[str, Any]) -> dict[str, str]:
    """Login and TLS of a config's connection_kwargs(), in Connector/J 2.7's terms.
    Connector/J has no "preferred": without a mode that asks for TLS it connects in clear.
    Client certificates would need a Java key store: not carried over."""
    properties = {
        "user": str(connection.get("user", "root")),
        "password": str(connection.get("password") or ""),
        "driver": JDBC_DRIVER,
    }
    ssl = connection.get("ssl")
    if ssl:
        properties["useSsl"] = "true"
        if ssl.get("verify_mode"):
            properties["serverSslCert"] = ssl["ca"]
            if not ssl.get("check_hostname"):
                properties["disableSslHostnameVerification"] = "true"
        else:
            properties["trustServerCertificate"] = "true"
    return properties
