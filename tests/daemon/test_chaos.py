"""The chaos run of `tests/chaos.py` with a fixed seed, short enough for every test
run: random traffic and shard DDLs on eight shards, binlogs rotating every few
transactions, the daemon's process group SIGKILLed every few seconds; at the end
every shard equals its rows downstream, by key, and the schema is the join.
Longer runs with other seeds: `make chaos SEED=… DURATION=… KILLS=…`."""

from __future__ import annotations

import pytest

from tests.chaos import run_chaos


def test_repeated_sigkills_with_fast_rotation_lose_nothing(sandbox, tmp_path):
    report = run_chaos(sandbox, tmp_path, seed=17, duration=40, kills=12, catch_up=90, log=lambda _m: None)
    assert report.kills == 12
    assert report.counts.ddls == 8 * 7 and report.counts.deletes > 0 and report.counts.key_moves > 0
    assert report.ok, report.summary()


@pytest.mark.long
def test_repeated_sigkills_with_row_events_applied_as_they_are_lose_nothing(sandbox, tmp_path):
    report = run_chaos(sandbox, tmp_path, seed=23, duration=40, kills=12, catch_up=90, log=lambda _m: None,
                       row_events=True)
    assert report.kills == 12 and report.counts.key_moves > 0
    assert report.ok, report.summary()


def test_members_killed_at_random_lose_nothing(sandbox, tmp_path):
    """Issue 75: three members share the task's two sources; each kill goes to one of them,
    started again at once under its name, so sources move between members, the coordinator
    too; the shards' ALTERs read by members that do not coordinate are decided by the one that
    does, through the schema queue."""
    report = run_chaos(sandbox, tmp_path, seed=31, duration=40, kills=10, catch_up=90, log=lambda _m: None,
                       members=3)
    assert report.kills == 10 and report.counts.ddls == 8 * 7 and report.counts.key_moves > 0
    assert report.ok, report.summary()


def test_members_cut_off_and_killed_at_random_lose_nothing(sandbox, tmp_path):
    """Issue 75: four members, each on a test host of its own (a network namespace); one
    strike in four cuts a member off from every server for one to three lease times and heals
    it (the coordinator too: it comes back as a member), the others kill one, or change the
    crew; the shards' ALTERs go on throughout. 0 lost, extra or different, every member
    stopped cleanly at the end."""
    report = run_chaos(sandbox, tmp_path, seed=41, duration=40, kills=12, catch_up=90, log=lambda _m: None,
                       members=4, partitions=True)
    assert report.kills == 12 and report.counts.ddls == 8 * 7 and report.counts.key_moves > 0
    assert report.ok, report.summary()
