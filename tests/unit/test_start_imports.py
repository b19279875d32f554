"""What `shardmerge run` imports before its first row (`replicator/cli/run_cli.py`, and
its workers' start), in an interpreter of its own: not the packages only a worker, a failover or an RSA login needs
(the fork server imports the workers' own: `replicator/source/spawn.py`)."""

from __future__ import annotations

import json
import subprocess
import sys

RUN_IMPORTS = """
import json, sys
from replicator.heap import collector_paused
with collector_paused():
    from replicator.apply.early_meta import EarlyMeta
    from replicator.apply.applier import ApplierFailed
    from replicator.daemon import Daemon, DaemonError
    from replicator.transient import Backoff
# what starting the workers imports and pickles (`startup.start_workers`)
import pickle
from replicator.source.spawn import worker_entry
from replicator.source.worker_setup import WorkerSetup
pickle.loads(pickle.dumps(worker_entry))
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""

NOT_BEFORE_THE_FIRST_ROW = {
    "pymysqlreplication",  # the workers' (their fork server imports it beside the daemon)
    "cryptography",  # an RSA login's only (`replicator/lazy_rsa.py`)
    "pyspark",  # a backfill's, a resync's
}


def test_the_daemon_imports_none_of_what_only_workers_failovers_and_rsa_logins_need() -> None:
    done = subprocess.run([sys.executable, "-c", RUN_IMPORTS], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    imported = set(json.loads(done.stdout.splitlines()[-1]))
    assert "replicator" in imported and "pymysql" in imported  # (it did import the daemon)
    assert imported & NOT_BEFORE_THE_FIRST_ROW == set()
