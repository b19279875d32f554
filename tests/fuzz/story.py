"""A story as a scenario dict in `plan`'s YAML format, and the glue around it: its
steps as `replicator.schema.plan` steps (parsed the way `plan` parses them), YAML out, and
an offline stand-in for the server (the lattice's own DDL application) so the
generator can be tested without a database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from lattice import parse_table
from lattice.apply import SchemaError, apply_changes
from lattice.ddl import AlterTable, CreateTable, DropTables, ModifyColumn, RenameColumn, parse_ddl
from lattice.model import Table, key
from replicator.schema.plan import Scenario, Step, parse_scenario
from tests.fuzz.generator import TARGET, StoryGenerator, table_of

Story = dict[str, Any]


def new_story(shards: dict[str, str], steps: list[dict[str, str]], description: str | None = None) -> Story:
    story: Story = {}
    if description:
        story["description"] = description
    story.update({"flavor": "mariadb", "target": TARGET, "shards": dict(shards), "steps": list(steps)})
    return story


def scenario(story: Story) -> Scenario:
    return parse_scenario(story, where="story")


def plan_step(index: int, raw: dict[str, str]) -> Step:
    """One step as `plan` reads it (so a step the fuzzer plays is one a scenario file
    can hold)."""
    (step,) = parse_scenario(
        {"target": TARGET, "shards": {"s0.db.t0": "CREATE TABLE t0 (a INT)"}, "steps": [raw]}, where="step"
    ).steps
    step.index = index
    return step


def to_yaml(story: Story) -> str:
    return yaml.safe_dump(story, sort_keys=False, allow_unicode=True, width=1000)


def write_story(story: Story, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_yaml(story))
    return path


def load_story(path: Path | str) -> Story:
    story = yaml.safe_load(Path(path).read_text())
    scenario(story)  # a file plan cannot read is refused here, with the field named
    return story


def renames_in(ddl: str) -> list[tuple[str, str]]:
    """The column renames of an ALTER TABLE (RENAME COLUMN, CHANGE to another name)."""
    try:
        statement = parse_ddl(ddl, default_schema="db")
    except Exception:
        return []
    if not isinstance(statement, AlterTable):
        return []
    out = []
    for change in statement.changes:
        if isinstance(change, RenameColumn):
            out.append((change.old_name, change.new_name))
        elif isinstance(change, ModifyColumn) and key(change.old_name) != key(change.spec.column.name):
            out.append((change.old_name, change.spec.column.name))
    return out


# -- offline: the lattice's DDL application standing in for the server --------------------------
class ModelShards:
    """The shards' tables as the lattice applies DDL to them: for generator tests only
    (the fuzzer proper asks MariaDB)."""

    def __init__(self) -> None:
        self.tables: dict[str, Table] = {}

    def create(self, shard: str, sql: str) -> bool:
        if shard in self.tables:
            return False
        try:
            self.tables[shard] = parse_table(sql)
        except (SchemaError, ValueError):
            return False
        return True

    def run(self, step: dict[str, str]) -> bool:
        shard, ddl = step["shard"], step["ddl"]
        try:
            statement = parse_ddl(ddl, default_schema="db")
        except Exception:
            return False
        if isinstance(statement, CreateTable):
            return self.create(shard, ddl)
        if isinstance(statement, DropTables):
            return self.tables.pop(shard, None) is not None
        if not isinstance(statement, AlterTable) or statement.name.name != table_of(shard):
            return False
        current = self.tables.get(shard)
        if current is None:
            return False
        try:
            self.tables[shard] = apply_changes(current, statement.changes)
        except (SchemaError, ValueError):
            return False
        return True


def offline_story(seed: int, attempts: int = 8) -> Story:
    """The story the generator makes for `seed` when the lattice stands in for the
    server (what `tests/server/test_fuzz.py` checks without a database)."""
    generator = StoryGenerator(seed)
    shards = ModelShards()
    start = {s: sql for s, sql in generator.start().items() if shards.create(s, sql)}
    steps: list[dict[str, str]] = []
    while not generator.done(shards.tables):
        for attempt in range(attempts):
            proposal = generator.propose(shards.tables, attempt)
            if proposal is not None and shards.run(proposal.step):
                generator.accepted(proposal)
                steps.append(proposal.step)
                break
        else:
            generator.skipped()
    return new_story(start, steps, f"offline story of seed {seed}")
