"""Shrinking a story that violates a property to a small one that still does.

`test(story)` replays a candidate and returns the story as it ran (the start and the
steps the server took: a step that no longer applies once others are gone is left
out) when it still shows the same violation, else None. The shrinker keeps whatever
`test` returns, so the result is always a story that ran and failed:

1. delta debugging (Zeller's ddmin) over the steps;
2. each shard away (its start table and its steps);
3. each column of a CREATE TABLE away (from the start tables and CREATE TABLE
   steps at once, with its indexes);
4. ddmin over the steps again, as fewer shards and columns free more steps.

`budget` bounds the replays; when it runs out the smallest story so far is returned.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace

from lattice import parse_table, render_table
from lattice.model import Table
from tests.fuzz.generator import table_of
from tests.fuzz.story import Story

Test = Callable[[Story], Story | None]


class Budget:
    def __init__(self, test: Test, runs: int):
        self.test, self.left, self.runs = test, runs, 0

    def __call__(self, story: Story) -> Story | None:
        if self.left <= 0:
            return None
        self.left -= 1
        self.runs += 1
        return self.test(story)


def shrink(story: Story, test: Test, budget: int = 300, log: Callable[[str], None] | None = None) -> Story:
    say = log or (lambda _m: None)
    tried = Budget(test, budget)
    current = copy.deepcopy(story)
    current = ddmin_steps(current, tried)
    say(f"  shrink: {len(current['steps'])} steps after ddmin ({tried.runs} replays)")
    for shard in shards_of(current):
        if len(current["shards"]) <= 1 and shard in current["shards"]:
            continue
        smaller = tried(without_shard(current, shard))
        if smaller is not None:
            current = smaller
    for name in start_columns(current):
        candidate = without_column(current, name)
        if candidate is not None and (smaller := tried(candidate)) is not None:
            current = smaller
    current = ddmin_steps(current, tried)
    say(f"  shrink: {len(current['shards'])} shards, {len(current['steps'])} steps ({tried.runs} replays)")
    return current


def ddmin_steps(story: Story, test: Test) -> Story:
    def with_steps(steps: list) -> Story:
        return {**story, "steps": list(steps)}

    steps = list(story["steps"])
    best = story
    empty = test(with_steps([]))
    if empty is not None:
        return empty
    n = 2
    while len(steps) >= 2:
        chunk = -(-len(steps) // n)
        parts = [steps[i : i + chunk] for i in range(0, len(steps), chunk)]
        reduced = False
        for i, part in enumerate(parts):  # a part alone, then all but a part
            for candidate in (part, [s for j, p in enumerate(parts) if j != i for s in p]):
                if len(candidate) >= len(steps):
                    continue
                result = test(with_steps(candidate))
                if result is not None:
                    best, steps = result, list(result["steps"])
                    n = max(n - 1, 2) if candidate is not part else 2
                    reduced = True
                    break
            if reduced:
                break
        if not reduced:
            if n >= len(steps):
                break
            n = min(len(steps), 2 * n)
    return best


def shards_of(story: Story) -> list[str]:
    seen = list(story["shards"])
    for step in story["steps"]:
        for field in ("shard", "set_schema", "skip"):
            if step.get(field) and step[field] not in seen:
                seen.append(step[field])
    return seen


def without_shard(story: Story, shard: str) -> Story:
    def mentions(step: dict) -> bool:
        return shard in (step.get("shard"), step.get("set_schema"), step.get("skip"))

    return {
        **story,
        "shards": {s: sql for s, sql in story["shards"].items() if s != shard},
        "steps": [s for s in story["steps"] if not mentions(s)],
    }


def start_columns(story: Story) -> list[str]:
    """The columns of the start tables and of the CREATE TABLE steps (but `id`, which
    every story row is keyed by)."""
    creates = list(story["shards"].values()) + [
        s["ddl"] for s in story["steps"] if s.get("ddl", "").lstrip().upper().startswith("CREATE TABLE")
    ]
    names: list[str] = []
    for sql in creates:
        table = _table(sql)
        for column in table.columns if table is not None else ():
            if column.name not in names and column.key != "id":
                names.append(column.name)
    return names


def without_column(story: Story, name: str) -> Story | None:
    """The story with column `name` gone from every start table and every CREATE TABLE
    step (with the generated columns, indexes and checks that use it); None when such a
    table cannot be read back."""
    shards = {}
    for shard, sql in story["shards"].items():
        smaller = _without(sql, name, table_of(shard))
        if smaller is None:
            return None
        shards[shard] = smaller
    steps = []
    for step in story["steps"]:
        if step.get("ddl", "").lstrip().upper().startswith("CREATE TABLE"):
            smaller = _without(step["ddl"], name, table_of(step["shard"]))
            if smaller is None:
                return None
            step = {**step, "ddl": smaller}
        steps.append(step)
    return {**story, "shards": shards, "steps": steps}


def _without(sql: str, name: str, table_name: str) -> str | None:
    table = _table(sql)
    if table is None:
        return None
    if table.column(name) is None:
        return sql
    gone = {name.lower()} | {
        c.key for c in table.columns if c.generated is not None and f"`{name.lower()}`" in c.generated.expression.lower()
    }
    table = replace(
        table,
        columns=tuple(c for c in table.columns if c.key not in gone),
        indexes=tuple(ix for ix in table.indexes if not gone & set(ix.columns)),
        checks=tuple(ch for ch in table.checks if not gone & set(ch.columns)),
    )
    return render_table(table, "mariadb", name=table_name)


def _table(sql: str) -> Table | None:
    try:
        return parse_table(sql)
    except Exception:
        return None
