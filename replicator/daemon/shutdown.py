"""How a daemon ends. Stopped cleanly (SIGTERM, `shardctl stop-task`, a worker's server
moved): the workers stop and what they still send is routed, the DDLs under way finish,
every routed change is committed, the watermarks are written and the stop is recorded as
clean; the lease is released last. Abandoned (a start that failed, or a running daemon
that lost the downstream): what was started is stopped as a crash would leave it, and the
daemon starts again in its process (`StartAgain`).

Threads: the main thread's, once the loop stopped turning (or the start failed); the
parts' threads (the applier's, the executors', the validator's, the renewer's) are
stopped from here."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING

from replicator.errors import StartAgain
from replicator.heap import thaw
from replicator.transient import error_kind

if TYPE_CHECKING:
    from replicator.daemon.main_loop import Daemon

log = logging.getLogger("shardmerge.daemon")


def stop_cleanly(d: Daemon) -> None:
    log.info("stopping")
    try:
        _stop_parts(d)
    finally:
        stop_admin(d)


def start_again(d: Daemon, exc: Exception, ran: bool) -> StartAgain:
    """What was started stopped (`abandon`); the error that says to start again."""
    abandon(d)
    return StartAgain(f"{type(exc).__name__}: {exc}", error_kind(exc), ran=ran)


def hand_over(d: Daemon, exc: Exception, timeout: float) -> StartAgain:
    """A member asked to hand sources over (`HandOver`): drained as at a clean stop (the
    workers stopped and what they sent routed, the DDLs under way finished, every change
    committed, the watermarks written), it gives them (`Members.hand_over`), then starts
    again without them. Not drained within `timeout` seconds (a DDL waits for its decision,
    the downstream is away), it gives nothing: the coordinator takes them once the request
    is older than the lease's time."""
    given = {}
    with contextlib.suppress(Exception):  # (any failure here: the start again, as after a crash)
        if _drained(d, time.monotonic() + timeout) and not isinstance(d.watermarks.write(), Exception):
            given = d.membership.members.handovers.hand_over(d.tenure.standing.member)
    if given:
        log.info("handed over %s (drained: read on from here)",
                 ", ".join(f"{s} to {m.name}" for s, m in sorted(given.items())))
    else:
        log.warning("%s, but it did not drain in %.0fs: it starts again, and the coordinator gives "
                    "them out once the lease's time has passed", exc, timeout)
    return start_again(d, exc, ran=True)


def _drained(d: Daemon, deadline: float | None = None) -> bool:
    """A clean stop's drain (`deadline`: a handover's, by the monotonic clock): the workers
    stopped and what they sent routed, the DDLs under way finished, every change committed;
    whether all of it was, in time and with no applier failure."""
    d.workers.stop(d.dispatch.message)
    while any(not e.idle() for e in d.executors.values()):
        if deadline is not None and time.monotonic() >= deadline:
            return False
        d.dispatch.take_results()
        time.sleep(0.05)
    d.dispatch.take_results()
    if d.applier is None or d.applier.failure is not None:
        return False
    return d.applier.wait_idle(None if deadline is None else max(0.0, deadline - time.monotonic()))


def abandon(d: Daemon) -> None:
    """Stop what a start that failed (or a running daemon that lost the downstream) had
    started, as a crash would leave it (the next start finds its stop unclean): workers,
    threads, the lease's renewal, connections. A thread of it still writing fails its
    fence (the lease given up), and must not end the process: the next start runs in it."""
    d.tenure.disarm()
    d.workers.kill()
    if d.applier is not None:
        d.applier.abandon()
    for part in filter(None, [*d.executors.values(), d.validator, d.applier, d.ends]):
        with contextlib.suppress(Exception):
            part.stop()
    d.tenure.give_up()
    with contextlib.suppress(Exception):
        d.meta.close()
    stop_admin(d, again=True)
    d.calls.refuse_pending("the daemon lost the downstream and starts again: ask again in a while")
    thaw()  # (what `freeze_long_lived` kept of this start is garbage now)


def stop_admin(d: Daemon, again: bool = False) -> None:
    """Late in the stop: while the API answers, the process is stopping (`shardctl
    stop-task` waits for that; requests to the loop are answered 503 meanwhile). Before
    the lease goes: a standby taking over may listen on the same address. A member starting
    `again` keeps its address listening (`KeptAdmin`)."""
    if d.admin is None:
        return
    if again and d.kept is not None and d.kept.server is d.admin:
        d.admin.between(f"this member ({d.member_name}) starts again: ask again in a second")
    else:
        if d.kept is not None:
            d.kept.server = None
        d.admin.stop()
    d.admin = None


def _stop_parts(d: Daemon) -> None:
    _drained(d)
    failed = d.applier is not None and d.applier.failure is not None
    if d.applier is not None:
        if not failed:
            d.duties.write_watermarks()
        d.applier.stop()
    if d.validator is not None:
        d.validator.stop()
    if d.ends is not None:
        d.ends.stop()
    for executor in d.executors.values():
        executor.stop()
    if failed:
        # not marked clean: the next start runs in safe mode for a while
        d.meta.close()
        log.error("stopped after an applier failure")
        return
    if d.tenure.standing is None:  # (a member's stop is not the task's: others may run, or have died)
        d.meta.task_state.mark_stopped()
    d.meta.close()
    stop_admin(d)
    d.tenure.release()  # (a standby takes over at once)
    log.info("stopped cleanly")
