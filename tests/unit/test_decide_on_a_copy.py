"""A decision works on a copy of its group's state and leaves the state in place as it was
(issue 72: decide on a value, install it once its writes committed). Every regression story
of the schema fuzzer (tests/fuzz/regressions/: renames started, finished and cancelled,
conflicts, resumes, skips, set-schema, shards joining and leaving, propagation off and on)
is played twice side by side: once as the coordinator always took it, in place, and once
through `Coordinator.decide`, where each step is first decided and thrown away (a commit
that failed), then decided again and installed. The thrown-away decision must leave the
state as it was, to the last field saved; the installed one must decide as the coordinator
in place did; and both groups end equal."""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path

import pytest

from replicator.schema.coordinator import Coordinator, Decision
from replicator.schema.plan import Player, Scenario, ScenarioError, load_scenario

STORIES = sorted((Path(__file__).parent.parent / "fuzz" / "regressions").glob("*.yaml"))


def state(c: Coordinator) -> str:
    """Everything the group keeps, as it saves it, and its join and blocks."""
    group = c.group
    try:
        joined = repr(group.join.table()) if group.join.shards else None
    except Exception as exc:  # (a conflict the join holds is part of the state too)
        joined = f"conflict: {exc}"
    shards = {str(s): st.to_data() for s, st in sorted(c.shards.items())}
    kept = {"shards": shards, "group": group._meta(), "join": joined, "blocked": sorted(map(str, group.blocked))}
    return json.dumps(kept, sort_keys=True, default=str)


def same(d: Decision) -> tuple:
    return (d.result, d.downstream, str(d.version), d.blocked, d.unblocked, d.message)


def player(scenario: Scenario) -> Player:
    named = [*scenario.shards, *(s.shard for s in scenario.steps if s.shard)]
    c = Coordinator(scenario.target, scenario.flavor, extract_columns=scenario.extract)
    return Player(scenario.target, scenario.flavor, named, coordinator=c, schema_charset=scenario.schema_charset)


@pytest.mark.parametrize("path", STORIES, ids=[p.stem.split("-")[0] for p in STORIES])
def test_a_decision_thrown_away_leaves_its_group_as_it_was_and_one_installed_decides_alike(path):
    scenario = load_scenario(path)
    in_place, copied = player(scenario), player(scenario)
    in_place.start(scenario.shards)
    copied.start(scenario.shards)
    for step in scenario.steps:
        c = copied.coordinator
        before, trackers = state(c), copy.deepcopy(copied.trackers)
        with contextlib.suppress(ScenarioError):
            c.decide(lambda step=step: copied.play(step))  # (never installed)
        assert state(c) == before, f"steps[{step.index}] thrown away changed the group"
        copied.trackers = trackers  # (the trackers are the story's upstream, not the group's)
        try:
            expected = in_place.play(step)
        except ScenarioError as exc:
            with pytest.raises(ScenarioError, match=str(exc)[:40].replace("(", r"\(").replace(")", r"\)")):
                c.decide(lambda step=step: copied.play(step))
            continue
        new, decision = c.decide(lambda step=step: copied.play(step))
        assert state(c) == before  # (decided, not installed yet)
        c.install(new)
        assert same(decision) == same(expected), f"steps[{step.index}]"
        assert state(c) == state(in_place.coordinator), f"steps[{step.index}]"
    assert len(scenario.steps) > 0
