"""`shardmerge run`: the daemon of a task, above the stages it wires together.

- `main_loop`: the `Daemon`, the facade: it makes the parts, runs the lifecycle and the loop;
- `tenure`: the lease it runs under (the standby's wait, the renewal, lost, released);
- `starting`: its start in order, once it holds the lease; `startup`: the pieces of it
  (sources opened, groups read, workers started);
- `workers`: the source workers' processes and pipes; `dispatch`: what reaches the loop,
  routed; `duties`: the loop's periodic duties (flushes, watermarks);
- `shutdown`: its stop, clean or to start again in the process;
- `pauses`: pausing and resuming shards;
- `row_path`, `ddl_path`: a shard's rows on their way to the applier, its DDLs to its group;
- `safe_mode`: when rows are applied in safe mode;
- `status`: what it tells the admin API.

Paused shards ("re-read from the paused position"): while a shard is paused its
changes are dropped and the source's watermark stays before the first one, so a
restart reads them again; when the shard resumes, its worker is rewound to the
pause position with the schemas of that position (what it sent before it took the
rewind is dropped), and every change the daemon has already routed is dropped on
the way, so only the paused shard's rows come back. What the watermark is, and
who holds it back, is in `replicator.apply.watermark`.
"""

from replicator.daemon.main_loop import Daemon, run_daemon
from replicator.errors import DaemonError

__all__ = ["Daemon", "DaemonError", "run_daemon"]
