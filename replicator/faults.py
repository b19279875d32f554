"""Crash points for the recovery tests: with SHARDMERGE_CRASH_AT=name[:n] in the
environment, the daemon sends itself SIGKILL the n-th time (default first) it
passes the named point. Unset in production, where a call costs one dict lookup."""

from __future__ import annotations

import os
import signal
from collections import Counter

_SPEC = os.environ.get("SHARDMERGE_CRASH_AT", "")
_POINTS = {}
for item in filter(None, (p.strip() for p in _SPEC.split(","))):
    name, _, count = item.partition(":")
    _POINTS[name] = int(count or 1)
_SEEN: Counter = Counter()


def crash_point(name: str, after: str | None = None) -> None:
    """With `after`, the point counts only once the process has passed that one."""
    if not _POINTS:
        return
    if after is not None and not _SEEN[after]:
        return
    _SEEN[name] += 1
    if name in _POINTS and _SEEN[name] >= _POINTS[name]:
        os.kill(os.getpid(), signal.SIGKILL)


_FAULTS = {}
for item in filter(None, (p.strip() for p in os.environ.get("SHARDMERGE_FAULT_AT", "").split(","))):
    name, _, count = item.partition(":")
    _FAULTS[name] = int(count or 1)


def faults_armed() -> bool:
    """Whether any fault point is set: a hot path asks once, not per call."""
    return bool(_FAULTS)


def fault_point(name: str) -> bool:
    """With SHARDMERGE_FAULT_AT=name[:n], True the n-th time the process passes the point
    (once): the tests' way to make a part misbehave where it never should, to show that the
    rest catches it. Unset in production, where a call costs one dict lookup."""
    if not _FAULTS:
        return False
    _SEEN[name] += 1
    return name in _FAULTS and _SEEN[name] == _FAULTS[name]
