"""Members (issue 75, `shardmerge run --member`) side by side with one daemon, on the same
binlogs: what sharing a task's sources costs per row, and what a DDL decision costs per
member.

On a private sandbox (`--sources` upstream servers, one downstream; each source one shard
table, its ids its own), a bulk workload (1,000-row INSERTs and an UPDATE of a tenth of
them) is written first. Then each runner copies it into an emptied downstream, from the same
binlog positions:

- one daemon: `shardmerge run`, today's default (the anchor);
- N members, N = 1, 2, 4: `shardmerge run --member mK`, all on this machine (they share its
  cores, so the wall time is not what grows with N here: the CPU per row is).

For each it prints rows/s, the CPU seconds per 1,000 rows of each process kind (the daemons,
their source workers, the downstream MariaDB), and the cost of the members' coordination per
batch: the CPU per 1,000 rows above one daemon's (each batch of a member reads its member's
row and its table's version row with shared locks in its transaction).

Then, with the rows caught up, a wave of DDL: every shard table ALTERed (ADD COLUMN, one after
another, a second apart); the first is a new column downstream, the others leave the join as it
is. Each is a decision of the coordinator, and every other member reads the group again after
it (before 2026-12-05 it started again). The run prints the time from the last ALTER to the
last shard's DDL done, and the CPU of the wave per decision, for each runner.

Last, the model (docs/operations/members.md): the CPU a task needs is rows x c_row + decisions x
(c_decision + (N - 1) x c_follow); c_row and c_decision from one member, c_follow (what each
other member spends taking a decision) from two, checked against four.

    .venv/bin/python -m bench.members [--sources 4] [--rows 250000] [--members 1,2,4]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from bench.replication import (
    Run,
    as_installed,
    bench_sandbox,
    bulk,
    children,
    config_text,
    cpu_of,
    expected,
    forget,
    last_commit,
    per_thousand,
    position,
    server_cpu,
    wait_until,
    when_quiet,
    write,
)
from replicator.sandbox import Sandbox

REPO = Path(__file__).resolve().parent.parent
TTL = 3.0  # the members' lease_ttl (s): how fast a start is seen


@dataclass
class Wave:
    seconds: float = 0.0  # from the last ALTER to the last shard's DDL done
    cpu: dict[str, float] = field(default_factory=dict)


@contextmanager
def daemons(sandbox: Sandbox, root: Path, starts, workers: int, members: int):
    """One daemon (members 0; -1: in safe mode throughout) or `members` members, started afresh
    at `starts`; their pids."""
    config = root / "members.yaml"
    config.write_text(
        config_text(sandbox, starts, workers, row_events=True, extract=False)
        + f"  lease_ttl: {TTL}\n" + ("  safe_mode: true\n" if members < 0 else "") + "admin:\n  port: 0\n"
    )
    members = max(members, 0)
    names = [f"m{k}" for k in range(1, members + 1)] or [None]
    procs = []
    with ExitStack() as stack:
        for name in names:
            log = stack.enter_context((root / f"{name or 'daemon'}.log").open("a"))
            argv = [sys.executable, "-m", "replicator.cli.shardmerge", "run", "--config", str(config),
                    "--log-level", "WARNING", *(["--member", name] if name else [])]
            procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO))
            if name == "m1":
                time.sleep(1.0)  # (the first takes the lease and makes every source's first start)
        try:
            yield [p.pid for p in procs]
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(timeout=90)


def merged(sandbox: Sandbox) -> tuple[int, int] | None:
    with suppress(Exception):
        got = sandbox.downstream.execute("SELECT COUNT(*), SUM(a) FROM merged.orders")[0]
        return int(got[0]), int(got[1] or 0)
    return None


class Cpu:
    """CPU seconds of the daemons and of their source workers, read while they live."""

    def __init__(self, pids: list[int]):
        self.pids, self.workers = pids, {}

    def look(self) -> None:
        for pid in self.pids:
            for child in children(pid):
                with suppress(FileNotFoundError, ProcessLookupError):
                    self.workers[child] = cpu_of(child)

    def now(self) -> dict[str, float]:
        self.look()
        daemons = 0.0
        for pid in self.pids:
            with suppress(FileNotFoundError, ProcessLookupError):
                daemons += cpu_of(pid)
        workers = sum(self.workers.values())
        return {"daemons (route, apply)": daemons, "source workers (read, decode)": workers}


def ddl_done(sandbox: Sandbox) -> int:
    with suppress(Exception):
        return int(sandbox.downstream.execute("SELECT COUNT(*) FROM bench_meta.ddl_done")[0][0])
    return 0


def name_of(members: int) -> str:
    if members < 0:
        return "one daemon, safe mode"
    return f"{members} member{'s' if members > 1 else ''}" if members else "one daemon"


def run_rows(sandbox: Sandbox, span, root: Path, workers: int, members: int) -> Run:
    """The bulk span copied from its start; the run's time and CPU."""
    want = expected(sandbox, 1)
    goal = sum(w[0] for w in want), sum(w[1] for w in want)
    run = Run(name_of(members), 0.0)
    forget(sandbox)
    with server_cpu(sandbox, run):
        wall = time.time()
        with daemons(sandbox, root, span.starts, workers, members) as pids:
            cpu = Cpu(pids)
            caught_up = when_quiet(sandbox, lambda: merged(sandbox) == goal)
            wait_until(lambda: (cpu.look(), caught_up())[1], f"{run.name}: the rows")
            run.seconds = last_commit(sandbox) - wall
            run.cpu.update(cpu.now())
    return run


def run_wave(sandbox: Sandbox, root: Path, workers: int, members: int, column: str) -> Wave:
    """Started afresh where the binlogs end now, every shard ALTERed a second apart: the time
    from the last ALTER to the last shard's DDL done, and the CPU of the wave."""
    wave = Wave()
    forget(sandbox)
    starts = tuple(position(inst) for inst in sandbox.upstreams)
    with daemons(sandbox, root, starts, workers, members) as pids:
        cpu = Cpu(pids)
        wait_until(lambda: merged(sandbox) is not None, f"{name_of(members)}: the table")
        time.sleep(3 * TTL)  # (the members joined, the sources given out, every start done)
        before, down = cpu.now(), sandbox.pid(sandbox.downstream.name)
        down_before = cpu_of(down)
        last = time.perf_counter()
        for i, inst in enumerate(sandbox.upstreams, start=1):
            if i > 1:
                time.sleep(1.0)
            inst.execute(f"ALTER TABLE orders ADD COLUMN {column} INT NULL", database=f"bench_{i}")
            last = time.perf_counter()
        n = len(sandbox.upstreams)
        wait_until(lambda: (cpu.look(), ddl_done(sandbox) >= n)[1], f"{name_of(members)}: the DDLs",
                   timeout=300)
        wave.seconds = time.perf_counter() - last
        time.sleep(2 * TTL)  # (the members' starts after the last decision)
        after = cpu.now()
        wave.cpu = {k: after[k] - before[k] for k in after}
        wave.cpu["downstream MariaDB"] = cpu_of(down) - down_before
    return wave


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sources", type=int, default=4)
    parser.add_argument("--rows", type=int, default=250_000, help="bulk rows inserted per source")
    parser.add_argument("--members", default="1,2,4", help="the member counts to run")
    parser.add_argument("--workers", type=int, default=4, help="each daemon's apply partitions")
    args = parser.parse_args()
    counts = [int(n) for n in args.members.split(",")]
    as_installed()
    root, sandbox = bench_sandbox(args.sources, "shardmerge-bench-members-")
    try:
        span = write(sandbox, bulk, args.rows, 1)
        print(f"bulk: {span.changes:,} row changes")
        runners = [0, -1, *counts]
        runs = {}
        for members in runners:
            run = runs[members] = run_rows(sandbox, span, root, args.workers, members)
            print(f"  {run.name:21} {run.seconds:6.1f} s {span.changes / run.seconds:9,.0f} rows/s   "
                  f"CPU ms per 1,000 rows: {per_thousand(run.cpu, span.changes)}")
        print(f"\nDDL waves: each of the {args.sources} shard tables ALTERed (ADD COLUMN), a second apart")
        waves = {}
        for k, members in enumerate(runners):
            wave = waves[members] = run_wave(sandbox, root, args.workers, members, f"e{k}")
            per = {kind: s / args.sources for kind, s in wave.cpu.items()}
            print(f"  {name_of(members):21} the last shard's DDL done {wave.seconds:.1f} s after its ALTER; "
                  "CPU s per decision: " + "  ".join(f"{kind} {s:.2f}" for kind, s in per.items()))
        report([(m, runs[m], waves[m]) for m in runners], span.changes, args.sources)
    finally:
        sandbox.down()
    return 0


def _total(cpu: dict[str, float]) -> float:
    return sum(v for k, v in cpu.items() if not k.startswith("upstream"))


def report(results, changes: int, decisions: int) -> None:
    # (a member starts in safe mode up to its sources' highest checkpoints, as one daemon does
    # after an unclean stop: those rows go decoded, as upserts; one daemon in safe mode
    # throughout is the anchor of the coordination's cost with every row so)
    for anchor in (0, -1):
        one = next(r for m, r, _ in results if m == anchor)
        base = _total(one.cpu) * 1_000_000 / changes
        print(f"\nCPU ms per 1,000 rows (every process but the upstreams') above {one.name}'s ({base:.1f}):")
        for members, run, _ in results:
            if members > 0:
                mine = _total(run.cpu) * 1_000_000 / changes
                share = 100 * (mine - base) / base
                print(f"  {run.name:21} {mine:7.1f}  ({mine - base:+.1f}, {share:+.0f}%)")
    waves = {m: _total(w.cpu) / decisions for m, _, w in results if m > 0}
    if 1 in waves and 2 in waves:
        c_decision, c_follow = waves[1], waves[2] - waves[1]
        print(f"\nmodel: CPU s per decision = {c_decision:.2f} + (N - 1) x {c_follow:.2f} (fit on N = 1, 2)")
        for n, measured in sorted(waves.items()):
            predicted = c_decision + (n - 1) * c_follow
            print(f"  N = {n}: predicted {predicted:.2f} s, measured {measured:.2f} s")


if __name__ == "__main__":
    sys.exit(main())
