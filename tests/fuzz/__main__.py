"""`python -m tests.fuzz`: run random schema stories against MariaDB servers of its
own and check issue 12's properties; shrink each distinct violation to a scenario
YAML in --out. Exit status 1 when any story violated a property.

    python -m tests.fuzz --seed 1 --count 10000 --jobs 2      # `make fuzz`
    python -m tests.fuzz --replay fuzz-out/P3-data-lost-seed42.yaml --verbose

Story i of a run is the story of seed SEED+i: `--seed SEED+i --count 1` runs it alone.
The run pins PYTHONHASHSEED (--hash-seed, default 0): the coordinator's downstream DDL
has been seen to depend on it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from replicator.sandbox import Sandbox
from tests import ram_dir
from tests.fuzz import workers
from tests.fuzz.oracle import PROPERTIES, Violation
from tests.fuzz.runner import Servers, StoryResult, run_story
from tests.fuzz.story import load_story, new_story, write_story


@dataclass
class Totals:
    stories: int = 0
    steps: int = 0
    rows: int = 0
    inconclusive: int = 0
    errors: list[str] = field(default_factory=list)
    by_property: Counter = field(default_factory=Counter)  # stories violating each property
    first: dict[str, tuple[StoryResult, Violation]] = field(default_factory=dict)  # kind -> first story
    kinds: Counter = field(default_factory=Counter)
    moves: Counter = field(default_factory=Counter)  # the generator's moves MariaDB took

    def add(self, result: StoryResult) -> None:
        self.stories += 1
        self.moves.update(result.moves)
        self.steps += result.steps
        self.rows += result.rows
        self.inconclusive += result.inconclusive is not None
        if result.error:
            self.errors.append(f"seed {result.seed}: {result.error}")
        for prop in {v.prop for v in result.violations}:
            self.by_property[prop] += 1
        for v in result.violations:
            self.kinds[v.kind] += 1
            self.first.setdefault(v.kind, (result, v))


def run_many(servers: Servers, seeds: range, jobs: int, verbose: bool) -> tuple[Totals, float]:
    totals = Totals()
    started = time.monotonic()

    def report(result: StoryResult) -> None:
        fresh = [v for v in result.violations if v.kind not in totals.first]
        again = sorted({v.kind for v in result.violations if v.kind in totals.first})
        totals.add(result)
        for v in fresh:
            print(f"  seed {result.seed}: {v.kind} at step {v.step}: {_first_line(v.message)}", flush=True)
        if again:  # one line, so every story a kind shows up in can be replayed
            print(f"  seed {result.seed}: again {', '.join(again)}", flush=True)
        if verbose and result.error:
            print(f"  seed {result.seed}: fuzzer error: {result.error}", flush=True)
        if totals.stories % 100 == 0:
            elapsed = time.monotonic() - started
            print(f"  {totals.stories} stories, {totals.steps} steps, {elapsed:.0f}s "
                  f"({totals.stories / elapsed:.2f}/s)", flush=True)

    if jobs <= 1:
        workers.init(servers, verbose)
        for seed in seeds:
            report(workers.work(seed))
    else:
        for seed, result in workers.in_pool(workers.work, seeds, jobs, (servers, verbose)):
            if isinstance(result, BaseException):
                result = StoryResult(seed, new_story({}, []), error=f"the worker failed: {type(result).__name__}: {result}")
            report(result)
    return totals, time.monotonic() - started


def shrink_all(servers: Servers, totals: Totals, out: Path, budget: int, jobs: int) -> list[tuple[Path, Violation]]:
    work = [(kind, result, v, budget) for kind, (result, v) in sorted(totals.first.items())]
    print(f"shrinking {len(work)} distinct violation(s)...", flush=True)
    if jobs <= 1:
        workers.init(servers)
        done = ((job, workers.shrink_one(job)) for job in work)
    else:
        done = workers.in_pool(workers.shrink_one, work, jobs, (servers,))
    written = []
    for job, outcome in done:
        if isinstance(outcome, BaseException):
            print(f"  {job[0]}: shrinking failed ({type(outcome).__name__}: {outcome}); "
                  f"replay seed {job[1].seed} with --count 1", flush=True)
            continue
        kind, result, small, shown, lines = outcome
        story = {
            "description": f"fuzz: {kind} (seed {result.seed}, hash seed {os.environ.get('PYTHONHASHSEED')}, "
            f"step {shown.step}): {_first_line(shown.message)}",
            **{k: v for k, v in small.items() if k != "description"},
        }
        path = write_story(story, out / f"{_slug(kind)}-seed{result.seed}.yaml")
        written.append((path, shown))
        print(f"  {kind}: {len(result.story['steps'])} -> {len(small['steps'])} steps, "
              f"{len(small['shards'])} shard(s): {path}" + "".join(f"\n  {line}" for line in lines), flush=True)
    return written


def summary(totals: Totals, wall: float, seed: int, jobs: int) -> str:
    per = "  ".join(f"{p} {totals.by_property.get(p, 0)}" for p in PROPERTIES)
    lines = [
        f"fuzz seed={seed} jobs={jobs}: stories {totals.stories}, steps {totals.steps}, rows checked {totals.rows}, "
        f"inconclusive {totals.inconclusive}, fuzzer errors {len(totals.errors)}",
        f"stories violating: {per}",
        "moves: " + ", ".join(f"{m} {n}" for m, n in totals.moves.most_common()),
        f"distinct violations: {len(totals.kinds)}",
    ]
    lines += [f"  {n:5d}  {kind}" for kind, n in totals.kinds.most_common()]
    lines.append(f"wall {wall:.1f}s, {totals.stories / wall if wall else 0:.2f} stories/s")
    return "\n".join(lines)


def _first_line(text: str) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= 400 else line[:397] + "..."


def _slug(kind: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", kind).strip("-")[:80]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    parser.add_argument("--count", type=int, default=100, help="stories to run (default 100)")
    parser.add_argument("--jobs", type=int, default=1, help="stories run in parallel (default 1)")
    parser.add_argument("--out", type=Path, default=Path("fuzz-out"), help="shrunk stories (default fuzz-out/)")
    parser.add_argument("--replay", type=Path, help="run this scenario YAML instead of generated stories")
    parser.add_argument("--verbose", action="store_true", help="print every step and its downstream DDL")
    parser.add_argument("--no-shrink", action="store_true", help="report violations without shrinking them")
    parser.add_argument("--shrink-budget", type=int, default=300, help="replays per shrink (default 300)")
    parser.add_argument("--sandbox", type=Path, help="a running sandbox to use (default: start one)")
    parser.add_argument("--hash-seed", type=int, default=0,
                        help="PYTHONHASHSEED of the run (default 0): the coordinator's DDL may depend on it")
    args = parser.parse_args(argv)
    if argv is None and os.environ.get("PYTHONHASHSEED") != str(args.hash_seed):
        # string hashing orders sets, and the code under test is not free of that: pin
        # it, so a seed (and a shrunk story) replays the same DDL
        os.execve(sys.executable, [sys.executable, "-m", "tests.fuzz", *sys.argv[1:]],
                  {**os.environ, "PYTHONHASHSEED": str(args.hash_seed)})

    own = args.sandbox is None
    # (its servers' data in memory where there is room: a story is mostly DDL, tests/ram_dir.py)
    prefix = "shardmerge-fuzz-"
    root = (ram_dir.make(prefix) or Path(tempfile.mkdtemp(prefix=prefix))) if own else args.sandbox
    sandbox = Sandbox(root / "sandbox", upstreams=1, watchdog=True) if own else Sandbox.attach(root)
    if own:
        sandbox.up()
    try:
        servers = Servers(sandbox.upstreams[0], sandbox.downstream)
        if args.replay is not None:
            result = run_story(servers, story=load_story(args.replay), log=print if args.verbose else None)
            for v in result.violations:
                print(f"{v.kind} at step {v.step}: {v.message}")
            if result.error or result.inconclusive:
                print(result.error or f"inconclusive: {result.inconclusive}")
            print(f"{result.steps} steps, {result.rows} rows checked, {result.seconds:.1f}s, "
                  f"{len(result.violations)} violation(s)")
            return 1 if result.violations else 0
        print(f"fuzz: seed {args.seed}, {args.count} stories, {args.jobs} job(s)", flush=True)
        totals, wall = run_many(servers, range(args.seed, args.seed + args.count), args.jobs, args.verbose)
        for error in totals.errors[:5]:
            print(f"fuzzer error: {error}", file=sys.stderr)
        if totals.kinds and not args.no_shrink:
            for path, v in shrink_all(servers, totals, args.out, args.shrink_budget, args.jobs):
                print(f"{path}: {_first_line(v.message)}")
        print(summary(totals, wall, args.seed, args.jobs))
        return 1 if totals.kinds else 0
    finally:
        if own:
            sandbox.down()
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
