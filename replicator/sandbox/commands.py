"""The command lines of a sandbox server: mariadb-install-db's and mariadbd's, with the options
every server gets and those an upstream adds, and where the binaries are."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

from replicator.sandbox.instance import Instance, SandboxError

# Debian puts the server in /usr/sbin, which is not on a normal user's PATH.
_EXTRA_BIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/usr/libexec", "/usr/local/mysql/bin")

# Small and fast rather than durable: sandbox data is disposable.
COMMON_SERVER_OPTIONS = (
    "--bind-address=127.0.0.1",
    "--skip-name-resolve",
    "--character-set-server=utf8mb4",
    "--collation-server=utf8mb4_general_ci",
    "--innodb-buffer-pool-size=64M",
    "--innodb-log-file-size=32M",
    "--innodb-flush-log-at-trx-commit=2",
    "--max-connections=300",
    # a LONGTEXT or JSON value may take up to 4 GB; a row event or statement with one of
    # more than the default 16 MB would break the connection
    "--max-allowed-packet=1G",
)
# What the binlog reader needs from a shard: full before/after images and column names.
_UPSTREAM_SERVER_OPTIONS = (
    "--log-bin=mysql-bin",
    "--binlog-format=ROW",
    "--binlog-row-image=FULL",
    "--binlog-row-metadata=FULL",
    "--sync-binlog=0",
    # (an upstream made the replica of another keeps its GTIDs in its own binlog, which
    # a source failing over to it reads on from: tests/daemon/test_failover.py)
    "--log-slave-updates",
)


def find_binary(name: str) -> str:
    search_path = os.pathsep.join([os.environ.get("PATH", ""), *_EXTRA_BIN_DIRS])
    found = shutil.which(name, path=search_path)
    if found is None:
        raise SandboxError(f"{name} not found; install MariaDB (`make setup` does it)")
    return found


def install_command(inst: Instance, install_db: str) -> list[str]:
    return [
        install_db,
        "--no-defaults",
        f"--datadir={inst.datadir}",
        # Concurrent installs sharing /tmp clash on their temporary table names.
        f"--tmpdir={inst.tmpdir}",
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
        "--skip-name-resolve",
        # Must match the server's value, or its first start rebuilds the redo log.
        "--innodb-log-file-size=32M",
        *_user_option(),
    ]


def server_command(inst: Instance, mariadbd: str, server_options: Sequence[str]) -> list[str]:
    return [
        mariadbd,
        "--no-defaults",
        f"--datadir={inst.datadir}",
        f"--port={inst.port}",
        f"--socket={inst.socket_path}",
        f"--tmpdir={inst.tmpdir}",
        f"--server-id={inst.server_id}",
        f"--pid-file={inst.datadir / 'mariadbd.pid'}",
        f"--log-error={inst.error_log}",
        *COMMON_SERVER_OPTIONS,
        *(_UPSTREAM_SERVER_OPTIONS if inst.role == "upstream" else ()),
        *server_options,
        *_user_option(),
    ]


def _user_option() -> list[str]:
    # mariadbd refuses to run as root unless told to; as anyone else the option is an error.
    return ["--user=root"] if os.geteuid() == 0 else []
