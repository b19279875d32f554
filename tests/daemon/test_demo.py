"""`shardmerge demo` (what `make demo` runs) end to end, on its own sandbox."""

from __future__ import annotations

import subprocess
import sys

from tests.replication import REPO


def test_the_demo_merges_four_live_shards_and_checks_them(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "replicator.cli.shardmerge", "demo", "--dir", str(tmp_path / "sb")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    assert "conflict: s2.shop_02.orders_003 paused: column priority: cannot join float with datetime" in out
    assert "resolved: schema accepted; resumed s2.shop_02.orders_003" in out
    # the rename finished on the last shard: the old column's values copied, then dropped
    assert "DROP COLUMN `customer_id`" in out
    checks = [line for line in out.splitlines() if line.strip().startswith("s") and line.rstrip().endswith("yes")]
    assert len(checks) == 4
    assert "the downstream table is the coordinator's joined schema: yes" in out
    assert out.rstrip().splitlines()[-1].startswith("demo passed")
    # the sandbox is taken down afterwards
    assert "mariadbd" not in subprocess.run(["pgrep", "-af", str(tmp_path)], capture_output=True, text=True).stdout
