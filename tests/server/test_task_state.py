"""How the applier's partitions were spread (`task_state`, `replicator/state/task_state.py`)
and what a start takes of it (`replicator/daemon/startup.partitions`), against a real
MariaDB: the checkpoints mean the spread they were written under, so a start after an
unclean stop keeps it, and one after a clean stop takes what the config asks."""

from __future__ import annotations

import pytest

from replicator.apply.meta import Meta
from replicator.config import Options
from replicator.daemon import startup
from replicator.daemon.safe_mode import SafeMode
from replicator.servers import connect_downstream
from replicator.state.task_state import Spread

SOURCES = ("s4", "s1", "s2", "s3")


@pytest.fixture
def meta(sandbox):
    d = sandbox.downstream
    sandbox.downstream.execute("DROP DATABASE IF EXISTS spread_meta")
    m = Meta(lambda: connect_downstream({"host": d.host, "port": d.port, "user": d.user, "password": d.password}),
             "spread_meta", "t")
    m.ensure()
    return m


def start(meta: Meta, workers: int = 4, row_events: bool = True, sources=SOURCES) -> tuple[int, Spread, bool]:
    """The start's partitions and spread, and whether it reads its sources again in safe mode
    (after an unclean stop: up to their highest checkpoints, `SafeMode.read_again`)."""
    safe = SafeMode(False)
    partitions, spread = startup.partitions(meta, Options(workers=workers), row_events, safe, sources)
    meta.task_state.mark_started(partitions, spread)
    return partitions, spread, safe.unclean


def test_a_spread_by_source_is_saved_with_its_sources_and_read_back_as_it_was(meta):
    assert start(meta) == (4, Spread(True, ("s1", "s2", "s3", "s4")), False)
    last = meta.task_state.load()
    assert (last.clean, last.partitions, last.spread) == (False, 4, Spread(True, ("s1", "s2", "s3", "s4")))
    meta.task_state.mark_stopped()
    assert meta.task_state.load().clean


@pytest.mark.parametrize("clean", [True, False])
def test_a_source_added_takes_the_new_spread_after_a_clean_stop_and_the_saved_one_after_an_unclean(meta, clean):
    start(meta)
    if clean:
        meta.task_state.mark_stopped()
    partitions, spread, safe = start(meta, sources=(*SOURCES, "s5"))
    kept = Spread(True, ("s1", "s2", "s3", "s4"))
    assert (partitions, spread, safe) == ((4, Spread(True, (*kept.sources, "s5")), False) if clean else (4, kept, True))


def test_a_spread_saved_before_its_sources_were_is_kept_after_an_unclean_stop(meta):
    """(The row a daemon of before wrote: 'source' and no list, its checkpoints under the
    hash of each id.)"""
    meta.execute(["INSERT INTO spread_meta.task_state (task, clean_stop, partitions, spread) VALUES ('t', 0, 4, 'source')"])
    assert start(meta) == (4, Spread(True, ()), True)
    meta.task_state.mark_stopped()
    assert start(meta)[1] == Spread(True, ("s1", "s2", "s3", "s4"))


def test_a_member_keeps_the_saved_spread_and_checkpoints(meta):
    """Issue 75: the task's checkpoints are every member's: a spread asked otherwise (another
    workers count) is not taken, the checkpoints not cleared, even after a clean stop of the
    task. (Its safe mode is its sources' own: `SafeMode.read_again`, tests/unit/test_safe_mode.py.)"""
    start(meta)
    meta.task_state.mark_stopped()
    meta.execute(["INSERT INTO spread_meta.checkpoint (task, source, shard, part, file_seq, txn_pos, idx) "
                  "VALUES ('t', 's1', 's1.db.t1', 0, 1, 4, 0)"])
    safe = SafeMode(False)
    partitions, spread = startup.partitions(meta, Options(workers=8), True, safe, SOURCES, member=True)
    assert (partitions, spread, safe.unclean, safe()) == (4, Spread(True, ("s1", "s2", "s3", "s4")), False, False)
    assert meta.rows("SELECT COUNT(*) FROM spread_meta.checkpoint") == [(1,)]


@pytest.mark.parametrize(("window", "timed"), [(0.0, False), (30.0, True)])
def test_an_unclean_stop_reads_again_in_safe_mode_and_for_the_window_only_if_one_is_set(meta, window, timed):
    """Issue 74: after an unclean stop the changes up to each source's highest checkpoint are
    read again in safe mode (`read_again`, tests/unit/test_safe_mode.py); a time window besides
    only where `safe_mode_window` asks one (it was 60 s by default, every row of a catch-up after
    a crash in safe mode)."""
    start(meta)
    safe = SafeMode(False)
    startup.partitions(meta, Options(workers=4, safe_mode_window=window), True, safe, SOURCES)
    assert safe.unclean and safe() is timed
