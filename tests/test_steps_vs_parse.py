"""diff's typed steps: the table after each downstream statement, built by diff, is
the table the old parse-based `expected_tables` computed from the statements' text."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lattice import Flavor, JoinConflict, Table, diff, join_all, table_from_data
from replicator.ddl_executor import expected_tables
from replicator.plan import load_scenario, replay
from tests.strategies import is_valid, related_tables

SCENARIOS = sorted((Path(__file__).parent / "scenarios").glob("*.yaml"))
FLAVORS = [f.value for f in Flavor]


def parsed_afters(start: Table | None, statements, flavor: str) -> list[Table | None]:
    return [table_from_data(t) if t is not None else None for t in expected_tables(start, statements, flavor)]


def assert_same(steps, start, flavor, where):
    expected = parsed_afters(start, [s.sql for s in steps], flavor)
    for i, (step, parsed) in enumerate(zip(steps, expected, strict=True)):
        assert step.after == parsed, f"{where} statement {i}: {step.sql}\n{difference(step.after, parsed)}"


def difference(a: Table | None, b: Table | None) -> str:
    if a is None or b is None:
        return f"{a} != {b}"
    lines = [f"built  {x}" for x in set(a.columns) - set(b.columns)]
    lines += [f"parsed {x}" for x in set(b.columns) - set(a.columns)]
    lines += [f"built  {x}" for x in set(a.indexes) - set(b.indexes)]
    lines += [f"parsed {x}" for x in set(b.indexes) - set(a.indexes)]
    lines += [f"built  {x}" for x in set(a.checks) - set(b.checks)]
    lines += [f"parsed {x}" for x in set(b.checks) - set(a.checks)]
    if a.options != b.options:
        lines += [f"built  {a.options}", f"parsed {b.options}"]
    return "\n".join(lines)


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_steps_match_the_parsed_statements(path: Path, flavor: str):
    scenario = load_scenario(path, flavor=flavor)
    before = None
    for step, decision, coordinator in replay(scenario):
        where = f"{path.name} step {step.index if step else 'initial'}"
        assert_same(decision.steps, before, flavor, where)
        before = coordinator.propagated


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(tables=related_tables(3, spatial=False), flavor=st.sampled_from(FLAVORS))
def test_generated_diffs_match_the_parsed_statements(tables, flavor):
    tables = [t for t in tables if is_valid(t)]
    if len(tables) < 2:
        return
    old, new = join_all(tables[:1], flavor), join_all(tables, flavor)
    if isinstance(new, JoinConflict) or isinstance(old, JoinConflict):
        return
    for a, b in ((old, new), (new, old)):
        assert_same(diff(a, b, flavor=flavor, target="db.t"), a, flavor, "generated")
