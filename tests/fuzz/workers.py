"""The fuzzer's work in worker processes: stories and shrinks, run in a pool of
spawned processes (`in_pool`). Apart from `__main__`, which a spawned process cannot
import back."""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import signal
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from tests.fuzz.oracle import Violation
from tests.fuzz.runner import Servers, StoryResult, run_story
from tests.fuzz.shrinker import shrink
from tests.fuzz.story import Story

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_servers: Servers | None = None
_log = None  # print, for --verbose


def init(servers: Servers, verbose: bool = False) -> None:
    global _servers, _log
    _servers, _log = servers, print if verbose else None


def _init_worker(servers: Servers, verbose: bool = False) -> None:
    init(servers, verbose)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the pool
    with contextlib.suppress(OSError, AttributeError):
        # and dies with the parent, even SIGKILLed: else it runs stories on for ever
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def work(seed: int) -> StoryResult:
    assert _servers is not None
    if _log is not None:
        _log(f"story of seed {seed}:")
    return run_story(_servers, seed=seed, log=_log)


def in_pool(
    work: Callable, items: Iterable, jobs: int, initargs: tuple
) -> Iterator[tuple[object, object | BaseException]]:
    """`work(item)` for every item in `jobs` processes, as each ends: (item, result or the
    exception it raised). Spawned, not forked: a fork after an earlier pool can copy a
    lock some thread held, and the child waits on it for ever. A worker that dies breaks
    the pool; the items it had not done go to a fresh one, once."""
    pending, retried = list(items), False
    while pending:
        context = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(jobs, mp_context=context, initializer=_init_worker, initargs=initargs)
        done = False
        try:
            futures = {pool.submit(work, item): item for item in pending}
            pending = []
            for future in as_completed(futures):
                try:
                    yield futures[future], future.result()
                except BrokenProcessPool as exc:
                    if retried:
                        yield futures[future], exc
                    else:
                        pending.append(futures[future])
                except Exception as exc:
                    yield futures[future], exc
            done = True
        finally:
            # stopped early (SIGTERM, an error): the queued items are dropped, not run
            pool.shutdown(wait=done, cancel_futures=not done)
        retried = True


def shrink_one(job: tuple[str, StoryResult, Violation, int]) -> tuple[str, StoryResult, Story, Violation, list[str]]:
    """Shrink one kind of violation (in a pool worker): the smallest story found, and
    the violation as it shows there."""
    assert _servers is not None
    kind, result, violation, budget = job
    lines: list[str] = []

    def still(story: Story) -> Story | None:
        again = run_story(_servers, story=story)
        return again.story if any(v.kind == kind for v in again.violations) else None

    small = shrink(result.story, still, budget=budget, log=lines.append)
    last = run_story(_servers, story=small)
    shown = next((v for v in last.violations if v.kind == kind), violation)
    return kind, result, small, shown, lines
