"""The schema-story fuzzer of issue 12 (`tests/fuzz`): a few fixed seeds on the shared
sandbox, the oracle noticing a coordinator that leaves the downstream table behind,
and, without a database, the generator (stories `plan` reads, the same story for
the same seed) and the shrinker (on a made-up property). Long runs: `make fuzz`."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from lattice import NULL_DEFAULT, parse_table
from replicator.schema.acceptance import Acceptance
from replicator.schema.plan import Player, parse_scenario
from replicator.schema.retained import Retained
from tests.fuzz import product
from tests.fuzz.floors import Floors, Holds
from tests.fuzz.generator import StoryGenerator
from tests.fuzz.lineage import Lineages
from tests.fuzz.rows import same_value, sample_rows
from tests.fuzz.runner import Servers, run_story
from tests.fuzz.seen import Seen
from tests.fuzz.shrinker import ddmin_steps, shrink, without_column
from tests.fuzz.story import load_story, new_story, offline_story, to_yaml

# Seeds whose stories hold every property today (each runs in about a second).
CLEAN_SEEDS = (7, 27, 38)
# Shrunk stories of fixed fuzzer findings (tests/fuzz/findings/INDEX.md): each violated a property once.
REGRESSIONS = sorted((Path(__file__).parent.parent / "fuzz" / "regressions").glob("*.yaml"))


@pytest.fixture
def servers(sandbox) -> Servers:
    return Servers(sandbox.upstreams[0], sandbox.downstream)


@pytest.mark.parametrize("seed", CLEAN_SEEDS)
def test_fixed_seeds_hold_every_property(servers, seed):
    result = run_story(servers, seed=seed)
    assert result.error is None, result.error
    assert result.inconclusive is None, result.inconclusive
    assert result.violations == [], [f"{v.kind} at step {v.step}: {v.message}" for v in result.violations]
    assert result.steps > 0 and result.rows > 0


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem.split("-")[0] for p in REGRESSIONS])
def test_fixed_findings_hold_every_property(servers, path):
    result = run_story(servers, story=load_story(path))
    assert result.error is None, result.error
    assert result.violations == [], [f"{v.kind} at step {v.step}: {v.message}" for v in result.violations]
    assert result.steps == len(load_story(path)["steps"])


def test_a_replayed_story_runs_the_steps_mariadb_takes(servers):
    story = new_story(
        {"s1.db.t1": "CREATE TABLE t1 (id INT PRIMARY KEY, a INT NOT NULL)",
         "s2.db.t2": "CREATE TABLE t2 (id INT PRIMARY KEY, a INT NOT NULL)"},
        [{"shard": "s1.db.t1", "ddl": "ALTER TABLE t1 ADD COLUMN b VARCHAR(10) NULL"},
         {"shard": "s1.db.t1", "ddl": "ALTER TABLE t1 DROP COLUMN nope"},  # MariaDB refuses: left out
         {"shard": "s2.db.t2", "ddl": "ALTER TABLE t2 MODIFY COLUMN a BIGINT NOT NULL"}],
    )
    result = run_story(servers, story=story)
    assert result.error is None and result.violations == []
    assert [s["ddl"] for s in result.story["steps"]] == [story["steps"][0]["ddl"], story["steps"][2]["ddl"]]


def test_the_oracle_notices_a_downstream_left_behind(servers, monkeypatch):
    """A coordinator that forgets to emit its DDL is a P2 violation, shrunk away from
    the steps that do not matter."""
    play = Player.play

    def forgetful(self, step):
        decision = play(self, step)
        return replace(decision, steps=()) if "ADD COLUMN c" in step.text else decision

    monkeypatch.setattr(Player, "play", forgetful)
    monkeypatch.setattr(product, "IN_PROCESS", True)  # the product changed in this process
    story = new_story(
        {"s1.db.t1": "CREATE TABLE t1 (id INT PRIMARY KEY, a INT NOT NULL, z INT)",
         "s2.db.t2": "CREATE TABLE t2 (id INT PRIMARY KEY, a INT NOT NULL, z INT)"},
        [{"shard": "s1.db.t1", "ddl": "ALTER TABLE t1 ADD COLUMN b INT NULL"},
         {"shard": "s2.db.t2", "ddl": "ALTER TABLE t2 ADD COLUMN c INT NULL"},
         {"shard": "s2.db.t2", "ddl": "ALTER TABLE t2 ADD INDEX ka (a)"}],
    )
    result = run_story(servers, story=story)
    assert [v.kind for v in result.violations] == ["P2:schema"]

    def still(candidate):
        again = run_story(servers, story=candidate)
        return again.story if any(v.kind == "P2:schema" for v in again.violations) else None

    small = shrink(result.story, still, budget=40)
    assert small["steps"] == [{"shard": "s2.db.t2", "ddl": "ALTER TABLE t2 ADD COLUMN c INT NULL"}]
    assert list(small["shards"]) == ["s2.db.t2"]
    assert "`z`" not in small["shards"]["s2.db.t2"] and "`a`" not in small["shards"]["s2.db.t2"]


def test_the_oracle_notices_a_column_kept_wider_than_rows_need(servers, monkeypatch):
    """P5 lets a downstream column stay nullable only while rows already there may hold
    NULL that no present shard vouches for. Here s1 makes `a` nullable and then NOT
    NULL again: its own rows are checked upstream, so downstream must follow."""
    story = new_story(
        {"s1.db.t1": "CREATE TABLE t1 (id INT PRIMARY KEY, a INT NOT NULL)",
         "s2.db.t2": "CREATE TABLE t2 (id INT PRIMARY KEY, a INT NOT NULL)"},
        [{"shard": "s1.db.t1", "ddl": "ALTER TABLE t1 MODIFY a INT NULL"},
         {"shard": "s1.db.t1", "ddl": "ALTER TABLE t1 MODIFY a INT NOT NULL"}],
    )
    honest = run_story(servers, story=story)
    assert honest.violations == [] and honest.steps == 2

    def nullable(self, column, downstream=None):
        if column.key != "a":
            return column
        return replace(column, nullable=True, default=column.default or NULL_DEFAULT)

    monkeypatch.setattr(Retained, "hold", nullable)
    monkeypatch.setattr(product, "IN_PROCESS", True)  # the product changed in this process
    assert [v.kind for v in run_story(servers, story=story).violations] == ["P5:not-equal"]


def test_the_oracle_notices_a_paused_shard_that_is_never_resumed(servers, monkeypatch):
    """P6: s2's DATETIME column conflicts with s1's INT; once s1 drops its column, s2
    joins again and must resume. A coordinator that never retries paused shards
    fails P6 (and a correct one passes)."""
    story = new_story(
        {"s1.db.t1": "CREATE TABLE t1 (id INT PRIMARY KEY)", "s2.db.t2": "CREATE TABLE t2 (id INT PRIMARY KEY)"},
        [{"shard": "s1.db.t1", "ddl": "ALTER TABLE t1 ADD COLUMN c INT NULL"},
         {"shard": "s2.db.t2", "ddl": "ALTER TABLE t2 ADD COLUMN c DATETIME NULL"},
         {"shard": "s1.db.t1", "ddl": "ALTER TABLE t1 DROP COLUMN c"}],
    )
    assert not [v for v in run_story(servers, story=story).violations if v.prop == "P6"]
    monkeypatch.setattr(Acceptance, "_retry_blocked", lambda self, exclude: [])
    monkeypatch.setattr(product, "IN_PROCESS", True)  # the product changed in this process
    assert [v.kind for v in run_story(servers, story=story).violations if v.prop == "P6"] == ["P6:not-resumed"]


# -- no database -----------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(25))
def test_generated_stories_are_scenarios_plan_reads(seed):
    story = offline_story(seed)
    scenario = parse_scenario(story)
    assert 2 <= len(scenario.shards) <= 6
    assert all(step.kind == "ddl" for step in scenario.steps)
    assert to_yaml(story).startswith("description:")


def test_a_seed_gives_one_story():
    assert offline_story(11) == offline_story(11)
    assert offline_story(11) != offline_story(12)
    assert StoryGenerator(3).start() == StoryGenerator(3).start()


def test_a_seed_gives_one_story_in_every_process():
    """Nothing in the generator may depend on the order of a set of strings, which
    changes with PYTHONHASHSEED (so --seed S+i reproduces story i of a run)."""
    code = "from tests.fuzz.story import offline_story, to_yaml; print([to_yaml(offline_story(s)) for s in range(30)])"
    root = Path(__file__).parents[2]
    stories = {
        subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": str(h)}).stdout
        for h in (1, 2, 3)
    }
    assert len(stories) == 1


def test_the_generator_makes_the_moves_of_the_known_defect_classes():
    ddls = [step["ddl"] for seed in range(60) for step in offline_story(seed)["steps"]]
    assert any("RENAME COLUMN" in d or "CHANGE COLUMN" in d for d in ddls)
    assert any("enum('x','y')" in d and "NOT NULL" in d and "DEFAULT" not in d for d in ddls)
    assert any("varchar(1000)" in d for d in ddls)
    assert any(d.startswith("CREATE TABLE") for d in ddls) and any(d.startswith("DROP TABLE") for d in ddls)
    assert any("AUTO_INCREMENT" in d for d in ddls) and any("GENERATED ALWAYS" in d for d in ddls)


def _fake_story(shards: int, steps: int) -> dict:
    ids = [f"s1.db.t{n}" for n in range(1, shards + 1)]
    return new_story(
        {s: f"CREATE TABLE t{s[-1]} (id INT PRIMARY KEY, a INT, b INT, c INT)" for s in ids},
        [{"shard": ids[i % shards], "ddl": f"ALTER TABLE t{ids[i % shards][-1]} COMMENT='{i}'"} for i in range(steps)],
    )


def test_ddmin_finds_the_two_steps_that_matter():
    story = _fake_story(3, 40)
    needed = [story["steps"][7], story["steps"][31]]
    calls = []

    def fails(candidate):
        calls.append(1)
        return candidate if all(s in candidate["steps"] for s in needed) else None

    assert ddmin_steps(story, fails)["steps"] == needed
    assert len(calls) < 60


def test_shrink_drops_shards_and_start_columns_and_keeps_what_the_test_returns():
    story = _fake_story(4, 12)
    needed = story["steps"][5]  # a step of shard t2

    def fails(candidate):
        create = candidate["shards"].get("s1.db.t2")
        if needed not in candidate["steps"] or create is None or parse_table(create).column("b") is None:
            return None
        # the replay leaves out a step the server would refuse now: shrink keeps that
        return {**candidate, "steps": [s for s in candidate["steps"] if s != story["steps"][1]]}

    small = shrink(story, fails)
    assert small["steps"] == [needed]
    assert list(small["shards"]) == ["s1.db.t2"]
    assert parse_table(small["shards"]["s1.db.t2"]).column_map.keys() == {"id", "b"}


def test_without_column_takes_its_indexes_along():
    story = new_story({"s1.db.t1": "CREATE TABLE t1 (id INT PRIMARY KEY, a INT, b INT, KEY ka (a), KEY kab (a, b))"}, [])
    table = parse_table(without_column(story, "a")["shards"]["s1.db.t1"])
    assert [c.name for c in table.columns] == ["id", "b"] and [ix.name for ix in table.indexes] == ["PRIMARY"]


def test_lineages_follow_renames_across_shards():
    t = parse_table("CREATE TABLE t (id INT PRIMARY KEY, a INT, g INT AS (a + 1))")
    lineages = Lineages()
    for shard in ("s1", "s2"):
        lineages.create(shard, t)
        lineages.accept(shard)
    a = lineages.current["s1"]["a"]
    assert lineages.current["s2"]["a"] == a and "g" not in lineages.current["s1"]  # generated: not written
    lineages.alter("s1", [("a", "b")], parse_table("CREATE TABLE t (id INT PRIMARY KEY, b INT)"))
    lineages.accept("s1")
    lineages.alter("s2", [], parse_table("CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)"))
    assert lineages.current["s1"]["b"] == a and lineages.current["s2"]["b"] == a
    for shard in ("s1", "s2"):
        lineages.accept(shard)
    assert a in lineages.live() and lineages.names(a) == {"a", "b"}
    lineages.drop("s2")
    lineages.alter("s1", [], parse_table("CREATE TABLE t (id INT PRIMARY KEY)"))
    lineages.accept("s1")
    assert a not in lineages.live()


def _two_shards_with_a() -> tuple[Lineages, int]:
    """Shards s1 and s2 with a column `a`, both accepted; and the lineage of `a`."""
    lineages = Lineages()
    for shard in ("s1", "s2"):
        lineages.create(shard, parse_table("CREATE TABLE t (id INT PRIMARY KEY, a INT)"))
        lineages.accept(shard)
    return lineages, lineages.current["s1"]["a"]


@pytest.fixture
def described(sandbox, scratch_db):
    """A CREATE TABLE as the downstream server describes it (the oracle's tables)."""
    conn = sandbox.downstream.connect()
    yield Seen(conn, scratch_db)
    conn.close()


def test_sample_rows_hit_every_extreme_and_null(described):
    t = described("CREATE TABLE t (id TINYINT UNSIGNED PRIMARY KEY, v VARCHAR(3) CHARACTER SET utf8mb4 NULL, "
                  "e ENUM('x','y') NOT NULL)")
    rows = sample_rows(t)
    assert {r["id"] for r in rows} >= {0, 255} and {r["e"] for r in rows} == {"x", "y"}
    assert {r["v"] for r in rows} >= {"😀😀😀", "a  ", None}


def test_same_value_is_the_documented_conversion_only():
    from decimal import Decimal

    assert same_value(Decimal("1.5"), Decimal("1.500")) and same_value(7, "7") and same_value(b"\x01", 1)
    assert same_value("0000-00-00 00:00:00", "0000-00-00 00:00:00.000000")
    assert not same_value("a  ", "a") and not same_value(None, 0) and not same_value("x", "y")



def test_a_renamed_away_name_added_again_is_another_lineage():
    """F74: the shard renamed `a` away itself; its new `a` holds none of that data, though
    another shard's `a` does (docs/design.md: the shard pauses for it)."""
    lineages, a = _two_shards_with_a()
    lineages.alter("s1", [("a", "b")], parse_table("CREATE TABLE t (id INT PRIMARY KEY, b INT)"))
    lineages.accept("s1")
    lineages.alter("s1", [], parse_table("CREATE TABLE t (id INT PRIMARY KEY, b INT, a INT)"))  # paused
    assert lineages.current["s1"]["b"] == a and lineages.current["s1"]["a"] != a
    assert lineages.current["s2"]["a"] == a
    # a shard joining with `a` meanwhile has the downstream `a`, not the paused one's (seed 250045)
    lineages.create("s3", parse_table("CREATE TABLE t (id INT PRIMARY KEY, a INT)"))
    assert lineages.current["s3"]["a"] == a
    # dropping `b` while it has the new `a` cancels the rename: that is the downstream `a`
    # after all, and the values written to it are (seed 280014)
    lineages.accept("s1")
    fresh = lineages.current["s1"]["a"]
    lineages.alter("s1", [], parse_table("CREATE TABLE t (id INT PRIMARY KEY, a INT)"))
    lineages.accept("s1")
    assert lineages.current["s1"]["a"] == a and lineages.names(fresh) == {"a"} and fresh in lineages.live()
    # once it dropped `b`, an `a` added again is the downstream `a` (seed 240017)
    lineages.alter("s1", [], parse_table("CREATE TABLE t (id INT PRIMARY KEY, a INT)"))
    lineages.alter("s1", [], parse_table("CREATE TABLE t (id INT PRIMARY KEY)"))
    lineages.alter("s1", [], parse_table("CREATE TABLE t (id INT PRIMARY KEY, a INT)"))
    assert lineages.current["s1"]["a"] == a


def test_a_shards_own_column_of_the_new_name_does_not_keep_its_renamed_away_name_apart():
    """F134: s2 renames `a` to `b` while s3 keeps `a`; s1 adds a `b` of its own (the
    downstream `b`, so the same lineage), renames `a` to `c`, adds `a` again and drops `c`: it has given its
    rename up, and its `a` is the others' `a` though its own `b` has that lineage too
    (seed 881553)."""
    lineages, a = _two_shards_with_a()
    lineages.create("s3", parse_table("CREATE TABLE t (id INT PRIMARY KEY, a INT)"))  # still has `a`
    lineages.accept("s3")
    lineages.alter("s2", [("a", "b")], parse_table("CREATE TABLE t (id INT PRIMARY KEY, b INT)"))
    lineages.accept("s2")
    lineages.alter("s1", [], parse_table("CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)"))
    lineages.accept("s1")
    assert lineages.current["s1"]["b"] == a
    lineages.alter("s1", [("a", "c")], parse_table("CREATE TABLE t (id INT PRIMARY KEY, c INT, b INT)"))
    lineages.alter("s1", [], parse_table("CREATE TABLE t (id INT PRIMARY KEY, a INT, c INT, b INT)"))
    assert lineages.current["s1"]["a"] != a  # apart while it holds the data as `c`
    lineages.alter("s1", [], parse_table("CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)"))
    assert lineages.current["s1"]["a"] == a


@pytest.mark.parametrize("cancelled", [False, True])
def test_a_paused_shards_column_of_a_renames_new_name_joins_it_unless_the_decision_cancelled_it(cancelled):
    """F123: s2 renames `a` to `b`; s1, paused, adds a `b` of its own. In the decision that
    accepts s1, the downstream `b` is the one that decision found (seed 490375), unless the
    decision ended the rename with no other shard left holding `b`: then it was cancelled
    (its values went back to `a`) and s1's `b` is its own column (seed 641176)."""
    lineages, a = _two_shards_with_a()
    lineages.alter("s2", [("a", "b")], parse_table("CREATE TABLE t (id INT PRIMARY KEY, b INT)"))
    lineages.accept("s2")
    lineages.alter("s1", [], parse_table("CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)"))  # paused
    before = {shard: dict(names) for shard, names in lineages.accepted.items()}
    if cancelled:
        lineages.alter("s2", [], parse_table("CREATE TABLE t (id INT PRIMARY KEY)"))  # drops `b`
    lineages.accept("s1", before, frozenset({"b"}) if cancelled else frozenset())
    assert (lineages.current["s1"]["b"] != a) is cancelled
    assert lineages.current["s1"]["a"] == a


def test_a_rename_of_a_name_the_coordinator_never_had_adds_the_new_one():
    """F79: a shard paused adds `a` (the others' `a`) and renames it to `b`: the
    coordinator never had its `a`, so `b` is a column of its own, which it may drop
    (replicator/schema/coordinator.py `_moving_rows`; seed 300329)."""
    lineages, a = _two_shards_with_a()
    lineages.alter("s1", [], parse_table("CREATE TABLE t (id INT PRIMARY KEY)"))
    lineages.accept("s1")
    lineages.alter("s1", [], parse_table("CREATE TABLE t (id INT PRIMARY KEY, a INT)"))  # paused
    assert lineages.current["s1"]["a"] == a
    lineages.alter("s1", [("a", "b")], parse_table("CREATE TABLE t (id INT PRIMARY KEY, b INT)"))
    assert lineages.current["s1"]["b"] != a
    # an accepted name's rename moves its data, renamed on while paused too
    lineages.alter("s2", [("a", "c")], parse_table("CREATE TABLE t (id INT PRIMARY KEY, c INT)"))
    lineages.alter("s2", [("c", "d")], parse_table("CREATE TABLE t (id INT PRIMARY KEY, d INT)"))
    assert lineages.current["s2"]["d"] == a


def test_a_name_only_a_paused_shard_has_is_no_downstream_column():
    """A paused shard's refused rename to `b` made no downstream `b`: another shard's
    `b` added meanwhile is a column of its own (seed 310581)."""
    lineages, a = _two_shards_with_a()
    lineages.alter("s2", [("a", "b")], parse_table("CREATE TABLE t (id INT PRIMARY KEY, b INT)"))  # paused
    lineages.alter("s1", [], parse_table("CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)"))
    assert lineages.current["s2"]["b"] == a and lineages.current["s1"]["b"] != a


def test_a_paused_shards_added_column_is_the_one_there_when_it_resumes():
    """F85: s2, paused, adds `a`, which s1 has; s1 renames `a` to `b` meanwhile: when s2
    resumes, its `a` is a new downstream column, not s1's data (seed 320324)."""
    t = parse_table("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    lineages = Lineages()
    lineages.create("s1", t)
    lineages.accept("s1")
    lineages.create("s2", parse_table("CREATE TABLE t (id INT PRIMARY KEY)"))
    lineages.accept("s2")
    a = lineages.current["s1"]["a"]
    lineages.alter("s2", [], t)  # paused
    assert lineages.current["s2"]["a"] == a
    lineages.alter("s1", [("a", "b")], parse_table("CREATE TABLE t (id INT PRIMARY KEY, b INT)"))
    lineages.accept("s1")
    lineages.accept("s2")
    assert lineages.current["s1"]["b"] == a and lineages.current["s2"]["a"] != a


@pytest.mark.parametrize("waits", [False, True])
def test_a_paused_shards_old_name_of_a_pending_rename_is_the_column_it_waits_for(waits):
    """F127: s2 renames `a` to `b`; s3, paused, adds `a` while s1 has it (the downstream
    `a`); s1 renames too. The coordinator keeps the rename pending for s3 (`_paused_holder`,
    seed 453460), so when s3 is accepted its `a` is still the column the rename moves
    (seed 740066); had the rename finished, s3's `a` would be a column of its own."""
    lineages, a = _two_shards_with_a()
    lineages.create("s3", parse_table("CREATE TABLE t (id INT PRIMARY KEY)"))
    lineages.accept("s3")
    lineages.alter("s2", [("a", "b")], parse_table("CREATE TABLE t (id INT PRIMARY KEY, b INT)"))
    lineages.accept("s2")
    lineages.alter("s3", [], parse_table("CREATE TABLE t (id INT PRIMARY KEY, a INT)"))  # paused
    assert lineages.current["s3"]["a"] == a
    lineages.alter("s1", [("a", "b")], parse_table("CREATE TABLE t (id INT PRIMARY KEY, b INT)"))
    lineages.accept("s1")
    before = {shard: dict(names) for shard, names in lineages.accepted.items()}
    lineages.accept("s3", before, frozenset(), frozenset({("a", "b")}) if waits else frozenset())
    assert (lineages.current["s3"]["a"] == a) is waits
    assert lineages.names(a) == ({"a", "b"} if waits else {"b"})


@pytest.mark.parametrize("once", [False, True])
def test_rows_of_a_lineage_no_shard_has_hold_the_column_of_its_name_wider(once, described):
    """F129: s1 wrote VARCHAR values in x and left; s2 has an x SET of its own (a lineage
    of its own: it added it while no accepted shard had x). Downstream x keeps s1's rows,
    so it may stay VARCHAR: a lineage no shard has any more floors the names it had
    (seed 763717)."""
    lineages, floors = Lineages(), Floors()
    wide = described("CREATE TABLE t (id INT PRIMARY KEY, x VARCHAR(255) CHARACTER SET utf8mb4)")
    lineages.create("s1", wide)
    lineages.accept("s1")
    floors.held("s1", wide, lineages.current["s1"])
    floors.let_go("s1")
    lineages.drop("s1")
    narrow = described("CREATE TABLE t (id INT PRIMARY KEY, x SET('x','y') CHARACTER SET utf8mb4)")
    lineages.create("s2", narrow)
    lineages.accept("s2")
    names_of = lineages.names_once if once else lineages.names
    holds = Holds(described.conn, described.db)
    assert floors.allows(narrow.column("x"), wide.column("x"), names_of, lineages.current, holds) is once


# the oracle's side of the fuzzer: what computes what a story should do
ORACLE_MODULES = ("oracle", "floors", "lineage", "rows", "seen", "product", "model", "sql")


def _imports(module: str) -> set[str]:
    import ast

    tree = ast.parse((Path(__file__).parent.parent / "fuzz" / f"{module}.py").read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


@pytest.mark.parametrize("module", ORACLE_MODULES)
def test_the_oracle_reads_the_product_only_through_plan(module):
    """Issue 72: the oracle's expectations come from MariaDB and its own rules, and it
    sees the product only as `shardmerge plan` answers (tests/fuzz/product.py); none of
    its modules imports the lattice, the coordinator, the applier or any other stage, or
    a fuzzer module that does (the generator writes its DDL with the product's renderer,
    the story's glue reads scenarios with its parser): its tables are what MariaDB
    describes (model.py), its type facts the manual's."""
    allowed = {"replicator.cli.shardmerge", "replicator.servers"}
    product = {i for i in _imports(module) if i.startswith(("replicator", "lattice")) and i not in allowed}
    assert product == set()
    fuzz = {i.rsplit(".", 1)[1] for i in _imports(module) if i.startswith("tests.fuzz.")}
    assert fuzz <= set(ORACLE_MODULES), fuzz


def test_the_oracle_reads_renames_as_the_ddl_parser_does():
    """The oracle reads a story's renames from the text (lineage.renames_in); the product's
    parser reads them from the statement (story.renames_in): on every DDL of the fixed
    findings, the scenarios and 100 offline stories they agree."""
    from tests.fuzz.lineage import renames_in as read
    from tests.fuzz.story import renames_in as parsed

    files = [*REGRESSIONS, *sorted((Path(__file__).parent.parent / "scenarios").glob("*.yaml"))]
    stories = [load_story(p) for p in files] + [offline_story(s) for s in range(100)]
    ddls = [st["ddl"] for story in stories for st in story.get("steps") or [] if "ddl" in st]
    renaming = [d for d in ddls if parsed(d)]
    assert len(renaming) > 150
    assert [(d, read(d)) for d in ddls] == [(d, parsed(d)) for d in ddls]
