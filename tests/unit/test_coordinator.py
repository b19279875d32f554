"""The coordinator beyond what the scenarios show: versions, history, column
states, restoring from its store, TRUNCATE with extract columns."""

from __future__ import annotations

from dataclasses import replace

import pytest

from replicator.config import EventFilter
from replicator.schema.coordinator import Coordinator, CoordinatorError
from replicator.schema.event_filter import kept_columns, taken
from replicator.schema.group import Version
from replicator.schema.plan import Player, ScenarioError, parse_scenario
from replicator.shard_id import ShardId
from replicator.source.tracker import change_of
from replicator.state.coordinator_store import InMemoryStore

S = ShardId.parse

BASE = "CREATE TABLE t (id INT PRIMARY KEY, a INT NOT NULL)"


def group(n: int = 2, store=None, **kwargs) -> Player:
    """n shards with the same table, through the daemon's path (tracker, coordinator)."""
    player = Player("shop.t", coordinator=Coordinator("shop.t", "mariadb", store or InMemoryStore(), **kwargs))
    player.start({ShardId(f"s{i}", "db", f"t{i}"): BASE for i in range(1, n + 1)})
    return player


@pytest.mark.parametrize(("ddl", "version"), [
    ("ALTER TABLE t1 ADD COLUMN b INT", "1.1"),  # a new nullable column: every old row fits
    ("ALTER TABLE t1 MODIFY a BIGINT NOT NULL", "1.1"),  # widening
    ("ALTER TABLE t1 MODIFY a INT NULL", "1.1"),  # relaxing
    ("ALTER TABLE t1 DROP COLUMN a", "1.1"),  # first shard: a gets a default, still compatible
])
def test_forward_compatible_changes_are_minor(ddl, version):
    c = group()
    d = c.ddl(S("s1.db.t1"), ddl)
    assert str(d.version) == version


def test_tightening_is_a_major_version():
    c = group()
    c.ddl(S("s1.db.t1"), "ALTER TABLE t1 MODIFY a BIGINT NOT NULL")
    c.ddl(S("s2.db.t2"), "ALTER TABLE t2 MODIFY a BIGINT NOT NULL")
    assert str(c.coordinator.version) == "1.1"
    c.ddl(S("s1.db.t1"), "ALTER TABLE t1 MODIFY a INT NOT NULL")
    d = c.ddl(S("s2.db.t2"), "ALTER TABLE t2 MODIFY a INT NOT NULL")  # narrowing back
    assert d.version == Version(2, 0)
    d = c.ddl(S("s2.db.t2"), "ALTER TABLE t2 ADD COLUMN c INT")
    assert d.version == Version(2, 1)


def test_history_keeps_version_shard_ddls_and_the_callers_time():
    c = group(clock=lambda: 1234.5)  # (the coordinator reads no clock of its own)
    c.ddl(S("s1.db.t1"), "ALTER TABLE t1 ADD COLUMN b INT")
    entry = c.coordinator.group.history[-1]
    assert entry["version"] == "1.1" and entry["shard"] == "s1.db.t1"
    assert entry["ddl"] == "ALTER TABLE t1 ADD COLUMN b INT"
    assert entry["downstream"] == ["ALTER TABLE `shop`.`t` ADD COLUMN `b` int NULL DEFAULT NULL AFTER `a`"]
    assert entry["time"] == 1234.5 and entry["result"] == "applied"


def test_column_states():
    c = group(3)
    c.ddl(S("s1.db.t1"), "ALTER TABLE t1 ADD COLUMN b INT")
    c.ddl(S("s1.db.t1"), "ALTER TABLE t1 ADD COLUMN x INT")
    for shard in map(S, ("s1.db.t1", "s2.db.t2", "s3.db.t3")):
        c.ddl(shard, f"ALTER TABLE {shard.table} ADD COLUMN IF NOT EXISTS x INT")
    c.ddl(S("s1.db.t1"), "ALTER TABLE t1 DROP COLUMN b")
    assert c.coordinator.group.column_states() == {"a": "exists", "b": "dropped", "id": "exists", "x": "exists"}
    c.ddl(S("s2.db.t2"), "ALTER TABLE t2 DROP COLUMN a")
    assert c.coordinator.group.column_states()["a"] == "partial"


def test_column_states_say_which_shards_made_a_rename_under_way():
    c = group(3)
    c.ddl(S("s1.db.t1"), "ALTER TABLE t1 RENAME COLUMN a TO b")
    states = c.coordinator.group.column_states()
    assert states["a"] == "partial: renaming to b, 1 of 3 shards made it: s1.db.t1"
    assert states["b"] == "partial: renamed from a, 1 of 3 shards made it: s1.db.t1"
    c.ddl(S("s2.db.t2"), "ALTER TABLE t2 RENAME COLUMN a TO b")
    assert c.coordinator.group.column_states()["b"].endswith("2 of 3 shards made it: s1.db.t1, s2.db.t2")
    c.ddl(S("s3.db.t3"), "ALTER TABLE t3 RENAME COLUMN a TO b")
    states = c.coordinator.group.column_states()
    assert states["b"] == "exists" and states.get("a", "dropped") == "dropped"


def renaming_with_s3_paused() -> tuple[InMemoryStore, Player]:
    """s1 renames a to b (pending: s2, s3 have a); s3 is paused by a conflict on z."""
    store = InMemoryStore()
    c = group(3, store)
    c.ddl(S("s1.db.t1"), "ALTER TABLE t1 RENAME COLUMN a TO b")
    c.ddl(S("s2.db.t2"), "ALTER TABLE t2 ADD COLUMN z DATETIME")
    c.ddl(S("s3.db.t3"), "ALTER TABLE t3 ADD COLUMN z FLOAT")  # conflict: s3 paused
    return store, c


def test_restart_from_the_store_resumes_exactly():
    store, c = renaming_with_s3_paused()
    c.coordinator.disable_ddl_propagation()
    again = Player("shop.t", coordinator=Coordinator("shop.t", "mariadb", store))
    assert again.coordinator.target.same_rendering(c.coordinator.target)
    assert again.coordinator.propagated.same_rendering(c.coordinator.propagated)
    old, new = c.coordinator, again.coordinator
    assert new.version == old.version and new.blocked == old.blocked and not new.group.propagation
    assert [r.old for r in new.renames] == ["a"] and len(new.group.history) == len(old.group.history)
    # both continue the same way
    for coord in (c, again):
        coord.coordinator.enable_ddl_propagation()
        d1 = coord.ddl(S("s2.db.t2"), "ALTER TABLE t2 RENAME COLUMN a TO b")
        d2 = coord.ddl(S("s3.db.t3"), "ALTER TABLE t3 DROP COLUMN z, RENAME COLUMN a TO b")
    assert d1.downstream == () and "UPDATE `shop`.`t` SET `b` = `a` WHERE `a` IS NOT NULL" in d2.downstream
    assert again.coordinator.target.same_rendering(c.coordinator.target)


def test_a_drop_of_a_renames_old_name_while_paused_is_remembered_across_a_restart():
    store, c = renaming_with_s3_paused()
    c.ddl(S("s3.db.t3"), "ALTER TABLE t3 DROP COLUMN a")  # paused: a drop waiting with it
    c.ddl(S("s3.db.t3"), "ALTER TABLE t3 ADD COLUMN a INT")  # a column a of its own
    again = Player("shop.t", coordinator=Coordinator("shop.t", "mariadb", store))
    assert again.coordinator.shards[S("s3.db.t3")].block.dropped == ("a",)
    for coord in (c, again):
        coord.ddl(S("s2.db.t2"), "ALTER TABLE t2 RENAME COLUMN a TO b")  # s3 still "has" a
        assert [r.old for r in coord.coordinator.renames] == ["a"]
        d = coord.ddl(S("s3.db.t3"), "ALTER TABLE t3 MODIFY z DATETIME")  # s3 resumes
        # its old a went with the rename: the copy runs, and its own a comes back afresh
        assert d.result == "resolved" and not coord.coordinator.renames
        assert "UPDATE `shop`.`t` SET `b` = `a` WHERE `a` IS NOT NULL" in d.downstream
        assert any(s.startswith("ALTER TABLE `shop`.`t` ADD COLUMN `a` int") for s in d.downstream)


def test_a_paused_shards_own_column_renamed_away_and_added_again_is_no_holder_across_a_restart():
    """F171: s3, paused, adds a (it would be the group's a), renames it to b as s1 did and
    adds a again: that a is its own, and s2's rename, the last holder's, finishes it."""
    store = InMemoryStore()
    c = group(3, store)
    c.ddl(S("s3.db.t3"), "ALTER TABLE t3 DROP COLUMN a")
    c.ddl(S("s1.db.t1"), "ALTER TABLE t1 RENAME COLUMN a TO b")  # pending: s2 has a
    c.ddl(S("s2.db.t2"), "ALTER TABLE t2 ADD COLUMN z DATETIME")
    c.ddl(S("s3.db.t3"), "ALTER TABLE t3 ADD COLUMN z FLOAT")  # conflict: s3 paused
    c.ddl(S("s3.db.t3"), "ALTER TABLE t3 ADD COLUMN a INT NOT NULL")
    c.ddl(S("s3.db.t3"), "ALTER TABLE t3 RENAME COLUMN a TO b")
    c.ddl(S("s3.db.t3"), "ALTER TABLE t3 ADD COLUMN a INT NOT NULL")
    again = Player("shop.t", coordinator=Coordinator("shop.t", "mariadb", store))
    assert again.coordinator.shards[S("s3.db.t3")].block.unmoved == (("a", "b"),)
    for coord in (c, again):
        d = coord.ddl(S("s2.db.t2"), "ALTER TABLE t2 RENAME COLUMN a TO b")
        assert not coord.coordinator.renames and S("s3.db.t3") in coord.coordinator.blocked
        assert "UPDATE `shop`.`t` SET `b` = `a` WHERE `a` IS NOT NULL" in d.downstream


def test_truncate_deletes_the_shards_rows_when_extract_columns_tell_them_apart():
    c = group(extract_columns={"source": "_src", "schema": "_db", "table": "_tbl"})
    d = c.ddl(S("s1.db.t1"), "TRUNCATE TABLE t1")
    assert d.result == "applied"
    where = "`_src` = 's1' AND `_db` = 'db' AND `_tbl` = 't1'"
    assert d.downstream == (f"DELETE FROM `shop`.`t` WHERE {where} LIMIT 5000",)


EXTRACT = {"source": "_src", "schema": "_db", "table": "_tbl"}


@pytest.mark.parametrize(("captured", "where"), [
    # DM's extract-* (what import-dm writes): the column holds a pattern's first group
    ({"source": r"s(\d+)", "table": r"t(\d+)"}, "`_src` = '1' AND `_db` = 'db' AND `_tbl` = '1'"),
    # a pattern without a group: the whole match
    ({"table": r"t\d"}, "`_src` = 's1' AND `_db` = 'db' AND `_tbl` = 't1'"),
    # captures the other shard shares: its rows cannot be told apart, the shard pauses
    ({"source": r"(s)\d+", "table": r"(t)\d+"}, None),
    # a name the pattern does not match: no value to delete by
    ({"table": r"orders_(\d+)"}, None),
])
def test_truncate_with_extract_columns_from_patterns_deletes_by_what_they_capture(captured, where):
    """Issue 71: a TRUNCATE with regex-captured extract columns paused, `no extract columns`."""
    c = group(extract_columns=EXTRACT, captured=captured)
    d = c.ddl(S("s1.db.t1"), "TRUNCATE TABLE t1")
    if where is not None:
        assert d.result == "applied" and d.downstream == (f"DELETE FROM `shop`.`t` WHERE {where} LIMIT 5000",)
    else:
        block = c.coordinator.blocked[S("s1.db.t1")]
        assert (d.result, block.kind, d.downstream) == ("unsupported", "truncate", ())
        assert "do not tell its rows from another shard's" in block.reason, block.reason


def test_truncate_without_extract_columns_pauses_the_shard_with_its_schema_known():
    """Issue 46: kind truncate, the reason says why and the way out, and the shard's next
    DDL is followed (its schema was not forgotten)."""
    c = group()
    d = c.ddl(S("s1.db.t1"), "TRUNCATE TABLE t1")
    block = c.coordinator.blocked[S("s1.db.t1")]
    assert (d.result, block.kind, d.downstream) == ("unsupported", "truncate", ())
    assert "no extract columns" in block.reason
    assert block.reason.endswith("(the shard goes on after its TRUNCATE); or configure extract columns for "
                                 "source, schema and table on the route (then `shardmerge backfill --truncate`), "
                                 "which lets a TRUNCATE delete one shard's rows")
    assert "`shardctl binlog skip --source s1 --table db.t1`" in block.reason
    assert c.coordinator.shards[S("s1.db.t1")].current is not None
    # a later DDL is followed (the schema is known), and the shard stays held at its TRUNCATE
    d = c.ddl(S("s1.db.t1"), "ALTER TABLE t1 ADD COLUMN c INT")
    assert d.result == "applied" and d.downstream and S("s1.db.t1") in d.blocked
    assert c.coordinator.blocked[S("s1.db.t1")].kind == "truncate"
    skipped = c.coordinator.skip_ddl(S("s1.db.t1"))
    assert skipped.result == "resolved" and not c.coordinator.blocked
    d = c.ddl(S("s1.db.t1"), "ALTER TABLE t1 ADD COLUMN b INT")
    assert d.result == "applied" and "unknown" not in d.message


@pytest.mark.parametrize("resolved_by", ["the-other-shard", "a-skip", "a-restart"])
def test_a_truncate_hold_outlasts_a_conflict_that_comes_after_it(resolved_by):
    """A shard held at its TRUNCATE (no extract columns) whose next DDL conflicts: when the
    conflict clears (the other shard does the same, or the DDL is skipped) the shard is held
    at its TRUNCATE again, not resumed: its rows downstream are still to be deleted. Across a
    restart from the store too."""
    store = InMemoryStore()
    c = group(store=store)
    a, b = S("s1.db.t1"), S("s2.db.t2")
    c.ddl(a, "TRUNCATE TABLE t1")
    d = c.ddl(a, "ALTER TABLE t1 MODIFY a VARCHAR(10) NOT NULL")  # no join with b's INT
    assert d.result == "conflict" and c.coordinator.blocked[a].kind == "conflict"
    if resolved_by == "a-restart":
        c = Player("shop.t", coordinator=Coordinator("shop.t", "mariadb", store))
    if resolved_by == "a-skip":
        d = c.coordinator.skip_ddl(a)
    else:
        d = c.ddl(b, "ALTER TABLE t2 MODIFY a VARCHAR(10) NOT NULL")
    assert a not in d.unblocked
    block = c.coordinator.blocked[a]
    assert block.kind == "truncate" and block.ddl == "TRUNCATE TABLE t1"
    d = c.coordinator.skip_ddl(a)  # (deleted by hand: the way out)
    assert d.unblocked == (a,) and not c.coordinator.blocked


@pytest.mark.parametrize("shards", [1, 2, 3])
def test_the_merged_key_goes_when_every_shard_dropped_it(shards):
    """One shard dropping its key pauses (the merged table would lose its key while others
    keep it); once every shard has dropped it, the merged table drops it too and the paused
    shards resume (the corpus: a single shard's DROP PRIMARY KEY is followed)."""
    c = group(shards)
    names = [S(f"s{i}.db.t{i}") for i in range(1, shards + 1)]
    for n, shard in enumerate(names, 1):
        d = c.ddl(shard, f"ALTER TABLE t{n} DROP PRIMARY KEY")
        if n < shards:
            assert d.result == "conflict" and "would lose its primary key" in d.message
            assert "way out: " in c.coordinator.blocked[shard].reason
    assert d.result == ("resolved" if shards > 1 else "applied")
    assert set(d.unblocked) == set(names[:-1])
    assert not c.coordinator.blocked and "DROP PRIMARY KEY" in " ".join(d.downstream)


def test_unknown_shard_and_bad_create_are_errors():
    c = group()
    with pytest.raises(CoordinatorError, match=r"unknown shard s9\.db\.t9; known: s1\.db\.t1, s2\.db\.t2"):
        c.coordinator.skip_ddl(S("s9.db.t9"))
    with pytest.raises(ScenarioError, match=r"scenario: shards: shard id 'nodots' is not source\.schema\.table"):
        parse_scenario({"target": "shop.t", "shards": {"nodots": BASE}})
    with pytest.raises(ScenarioError, match="not a CREATE TABLE we can read"):
        c.start({S("s3.db.t3"): "CREATE TABLE t3 (a INTT)"})


def test_an_alter_of_a_table_the_tracker_never_saw_waits_for_its_schema():
    c = group()
    d = c.ddl(S("s9.db.t9"), "ALTER TABLE t9 ADD COLUMN b INT")
    assert d.result == "unsupported" and d.blocked == (S("s9.db.t9"),)
    assert "which is not tracked" in d.message and "set-schema" in d.message


def test_other_statements_are_ignored_and_said_so():
    c = group()
    d = c.ddl(S("s1.db.t1"), "GRANT SELECT ON *.* TO x")
    assert d.result == "ignored" and "does not change the shard's table" in d.message and d.downstream == ()


def test_a_ddl_that_does_not_apply_to_the_tracked_schema_blocks_the_shard():
    c = group()
    d = c.ddl(S("s1.db.t1"), "ALTER TABLE t1 ADD COLUMN a INT")
    assert d.result == "unsupported" and d.blocked == (S("s1.db.t1"),)
    assert "Duplicate column name 'a'" in d.message


# -- DM's `drop column` event filter: pinned columns ---------------------------------------------------
DROP_COLUMN = [EventFilter(("*.*",), frozenset({"drop column"}))]


def filtered(c: Player, shard: str, sql: str, filters=DROP_COLUMN):
    """A shard's DDL as the DDL executor takes it under filters.events: what a `drop column`
    filter covering the shard keeps is pinned before the coordinator takes the change."""
    state = c.coordinator.shards[S(shard)]
    seen, _ = taken(filters, change_of(S(shard), state.current, sql), state.current)
    c.coordinator.pin(kept_columns(filters, seen))
    return c.ddl(S(shard), sql)


def drops(decision, column: str) -> bool:
    """The downstream DDL drops the column, or renames it away."""
    return any(f"DROP COLUMN `{column}`" in s or f"CHANGE COLUMN `{column}`" in s for s in decision.downstream)


def test_a_pinned_column_stays_downstream_nullable_after_the_last_shard_drops_it():
    c, plain = group(), group()
    before = c.coordinator.target.column("a")
    for shard in ("s1.db.t1", "s2.db.t2"):
        ddl = f"ALTER TABLE {S(shard).table} DROP COLUMN a"
        d = filtered(c, shard, ddl)
        assert not drops(d, "a")
        last = plain.ddl(S(shard), ddl)
    assert last.downstream == ("ALTER TABLE `shop`.`t` DROP COLUMN `a`",)  # without the filter
    # the shards' new rows leave it NULL: NOT NULL no more, its type kept
    assert d.downstream == ("ALTER TABLE `shop`.`t` MODIFY COLUMN `a` int NULL DEFAULT NULL",)
    a = c.coordinator.target.column("a")
    assert a.nullable and a.type == before.type and not before.nullable
    assert c.coordinator.group.column_states() == {"a": "pinned", "id": "exists"}
    assert plain.coordinator.group.column_states() == {"a": "dropped", "id": "exists"}
    # the other shards' DDLs go on around it
    d = c.ddl(S("s1.db.t1"), "ALTER TABLE t1 ADD COLUMN b INT")
    assert d.downstream == ("ALTER TABLE `shop`.`t` ADD COLUMN `b` int NULL DEFAULT NULL AFTER `id`",)


def test_a_pinned_column_survives_a_restart():
    store = InMemoryStore()
    c = group(store=store)
    filtered(c, "s1.db.t1", "ALTER TABLE t1 DROP COLUMN a")
    again = Player("shop.t", coordinator=Coordinator("shop.t", "mariadb", store))
    assert again.coordinator.group.pinned == c.coordinator.group.pinned and set(again.coordinator.group.pinned) == {"a"}
    # the restored coordinator keeps it though the last shard's drop is not filtered
    d = again.ddl(S("s2.db.t2"), "ALTER TABLE t2 DROP COLUMN a")
    assert d.downstream == ("ALTER TABLE `shop`.`t` MODIFY COLUMN `a` int NULL DEFAULT NULL",)
    third = Coordinator("shop.t", "mariadb", store)
    assert third.target.same_rendering(again.coordinator.target) and third.group.column_states()["a"] == "pinned"
    d = Player("shop.t", coordinator=third).ddl(S("s1.db.t1"), "ALTER TABLE t1 ADD COLUMN b INT")
    assert not drops(d, "a") and third.target.column("a").nullable


def test_a_pinned_column_holds_no_key_nor_auto_increment_once_no_shard_has_it():
    c = Player("shop.t", coordinator=Coordinator("shop.t", "mariadb", InMemoryStore()))
    c.start({S("s1.db.t1"): "CREATE TABLE t1 (id INT PRIMARY KEY, n INT NOT NULL AUTO_INCREMENT, UNIQUE KEY (n))"})
    d = filtered(c, "s1.db.t1", "ALTER TABLE t1 DROP COLUMN n")
    # in one statement: the server refuses an AUTO_INCREMENT column leading no key (1075)
    assert d.downstream == ("ALTER TABLE `shop`.`t` DROP INDEX `n`, MODIFY COLUMN `n` int NULL DEFAULT NULL",)


def test_a_shard_adding_a_pinned_column_back_has_it_in_the_join():
    c = group()
    for shard in ("s1.db.t1", "s2.db.t2"):
        filtered(c, shard, f"ALTER TABLE {S(shard).table} DROP COLUMN a")
    d = c.ddl(S("s1.db.t1"), "ALTER TABLE t1 ADD COLUMN a BIGINT NOT NULL DEFAULT 3")
    # the shard's type and default; still nullable: rows downstream hold NULL there
    assert d.downstream == ("ALTER TABLE `shop`.`t` MODIFY COLUMN `a` bigint NULL DEFAULT 3",)
    assert c.coordinator.group.column_states()["a"] == "partial"


def test_a_rename_under_the_filter_and_a_drop_it_does_not_cover_go_downstream():
    c = group()
    only_s1 = [EventFilter(("db.t1",), frozenset({"drop column"}))]
    d = filtered(c, "s1.db.t1", "ALTER TABLE t1 RENAME COLUMN a TO b", only_s1)  # a rename is no drop
    assert d.downstream[:2] == (
        "ALTER TABLE `shop`.`t` MODIFY COLUMN `a` int NULL DEFAULT 0",  # (online, the rows flowing)
        "ALTER TABLE `shop`.`t` CHANGE COLUMN `a` `b` int NULL DEFAULT 0",  # (at once)
    )
    d = filtered(c, "s2.db.t2", "ALTER TABLE t2 DROP COLUMN a", only_s1)
    assert c.coordinator.group.pinned == {}
    assert d.downstream[:3] == (
        "UPDATE `shop`.`t` SET `b` = `a` WHERE `a` IS NOT NULL",
        "ALTER TABLE `shop`.`t` DROP INDEX IF EXISTS `__shardmerge_was_86f7e437faa5a7fc`",
        "ALTER TABLE `shop`.`t` DROP COLUMN `a`",
    )


def test_a_pinned_column_renamed_by_a_shard_keeps_its_name_and_values_downstream():
    """The rename moves no values downstream: they stay under the pinned name, and the new
    name is a column the shard adds (its rows already downstream get the new column's
    default there)."""
    c = group(3)
    filtered(c, "s1.db.t1", "ALTER TABLE t1 DROP COLUMN a")
    d = c.ddl(S("s2.db.t2"), "ALTER TABLE t2 RENAME COLUMN a TO b")
    assert not drops(d, "a") and not c.coordinator.renames
    assert d.downstream == ("ALTER TABLE `shop`.`t` ADD COLUMN `b` int NOT NULL DEFAULT 0 AFTER `id`",)
    d = c.ddl(S("s3.db.t3"), "ALTER TABLE t3 CHANGE a b INT NOT NULL")
    assert d.downstream == ("ALTER TABLE `shop`.`t` MODIFY COLUMN `a` int NULL DEFAULT NULL",)
    assert [col.name for col in c.coordinator.target.columns] == ["id", "b", "a"]


def test_a_pending_rename_of_a_column_pinned_since_never_takes_its_values_away():
    c = group()
    d = c.ddl(S("s2.db.t2"), "ALTER TABLE t2 RENAME COLUMN a TO b")  # starts: s1 still writes a
    assert d.downstream[:2] == (
        "ALTER TABLE `shop`.`t` MODIFY COLUMN `a` int NULL DEFAULT 0",  # (online, the rows flowing)
        "ALTER TABLE `shop`.`t` CHANGE COLUMN `a` `b` int NULL DEFAULT 0",  # (at once)
    )
    d = filtered(c, "s1.db.t1", "ALTER TABLE t1 DROP COLUMN a")
    # no copy into b, no drop of a: what s1 wrote to a stays there
    assert d.downstream == () and [(r.old, r.new) for r in c.coordinator.renames] == [("a", "b")]
    # if b goes from every shard, the rename is cancelled: its values come back into a
    d = c.ddl(S("s2.db.t2"), "ALTER TABLE t2 DROP COLUMN b")
    assert d.downstream == (
        "UPDATE `shop`.`t` SET `a` = `b` WHERE `a` IS NULL AND `b` IS NOT NULL",
        "ALTER TABLE `shop`.`t` DROP INDEX IF EXISTS `__shardmerge_was_86f7e437faa5a7fc`",
        "ALTER TABLE `shop`.`t` DROP COLUMN `b`",
    )
    assert c.coordinator.target.column("a").nullable and not c.coordinator.renames


def test_a_paused_shards_rename_of_a_column_pinned_meanwhile_is_a_drop():
    c = group(3)
    c.ddl(S("s2.db.t2"), "ALTER TABLE t2 ADD COLUMN z DATETIME")
    c.ddl(S("s3.db.t3"), "ALTER TABLE t3 ADD COLUMN z FLOAT")  # conflict: s3 paused
    c.ddl(S("s3.db.t3"), "ALTER TABLE t3 RENAME COLUMN a TO b")  # waits with it
    filtered(c, "s1.db.t1", "ALTER TABLE t1 DROP COLUMN a")
    block = c.coordinator.blocked[S("s3.db.t3")]
    assert (block.renames, block.dropped) == ((), ("a",))
    c.ddl(S("s2.db.t2"), "ALTER TABLE t2 DROP COLUMN a")
    d = c.ddl(S("s3.db.t3"), "ALTER TABLE t3 MODIFY z DATETIME")
    assert d.result == "resolved" and not drops(d, "a")
    assert d.downstream[0] == "ALTER TABLE `shop`.`t` ADD COLUMN `b` int NOT NULL DEFAULT 0 AFTER `id`"
    assert c.coordinator.group.column_states()["a"] == "pinned"


@pytest.mark.parametrize(("leaves", "holders"), [
    ("ALTER TABLE t3 DROP COLUMN b", "s3.db.t3"),  # F152 (seed 1603014)
    ("DROP TABLE t3", "shards that left"),  # F154: its rows stay downstream
])
def test_a_rename_onto_a_column_whose_rows_have_the_old_name_too_waits(leaves, holders):
    """s3 had both a and b, so its rows hold values of their own in both; a rename of a to
    b onto the b it left behind (or left with) would move rows by whether b holds a value,
    and its cancel would copy s3's own b into every NULL of s3's a. The renaming shard
    waits, across a restart too, and resumes when it drops b (a drop of a); with b gone
    downstream no row holds a value there."""
    store = InMemoryStore()
    c = group(3, store)
    t1, t3 = S("s1.db.t1"), S("s3.db.t3")
    c.ddl(t3, "ALTER TABLE t3 ADD COLUMN b INT")
    assert c.ddl(t1, "ALTER TABLE t1 RENAME COLUMN a TO b").result == "conflict"  # s3 has b
    d = c.ddl(t3, leaves)
    assert t1 in c.coordinator.blocked and not c.coordinator.renames
    assert not any(s.startswith("UPDATE") for s in d.downstream)
    reason = c.coordinator.blocked[t1].reason
    assert f"downstream b holds values of {holders}" in reason and "drop b upstream" in reason
    again = Player("shop.t", coordinator=Coordinator("shop.t", "mariadb", store))
    state = again.coordinator.shards.get(t3)
    records = {state.wrote} if state is not None else again.coordinator.group.departed
    assert records == {frozenset({"id", "a", "b"})}
    for coord in (c, again):
        d = coord.ddl(t1, "ALTER TABLE t1 DROP COLUMN b")
        assert d.result == "resolved" and not coord.coordinator.blocked and not coord.coordinator.renames
        assert "ALTER TABLE `shop`.`t` DROP COLUMN `b`" in d.downstream
        assert all("b" not in written for written in coord.coordinator.group.departed)


def test_the_record_of_departed_rows_follows_a_rename_and_forgets_what_goes():
    c = group(3)
    t1, t2, t3 = S("s1.db.t1"), S("s2.db.t2"), S("s3.db.t3")
    c.ddl(t3, "ALTER TABLE t3 ADD COLUMN z INT")
    c.ddl(t3, "DROP TABLE t3")
    assert c.coordinator.group.departed == {frozenset({"id", "a"})}  # z went downstream with t3
    c.ddl(t1, "ALTER TABLE t1 RENAME COLUMN a TO b")
    c.ddl(t2, "ALTER TABLE t2 RENAME COLUMN a TO b")  # finished: a's values are b's
    assert c.coordinator.group.departed == {frozenset({"id", "b"})}


def test_a_rename_onto_a_column_filled_by_current_timestamp_moves_every_value_null_too():
    """F153 (seed 1903579): t4 leaves a b that every other row got the time of its ADD in,
    a filler no value tells apart; t1's rename of a onto it moves every value of a, NULL
    too (the row's own), where b takes NULL."""
    c = Player("shop.t", coordinator=Coordinator("shop.t", "mariadb", InMemoryStore()))
    c.start({S(f"s{i}.db.t{i}"): "CREATE TABLE t (id INT PRIMARY KEY, a DATETIME NULL)" for i in (1, 2, 3)})
    t1, t4 = S("s1.db.t1"), S("s4.db.t4")
    c.ddl(t4, "CREATE TABLE t4 (id INT PRIMARY KEY, b DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP, z FLOAT)")
    assert c.ddl(t1, "ALTER TABLE t1 ADD COLUMN z DATETIME").result == "conflict"  # t4's z
    c.ddl(t1, "ALTER TABLE t1 RENAME COLUMN a TO b")
    d = c.ddl(t4, "DROP TABLE t4")  # t1 resumes: its rename starts onto t4's b (t2, t3 have a)
    assert d.result == "resolved"
    assert "UPDATE `shop`.`t` SET `b` = `a`, `a` = NULL" in d.downstream


def test_a_rename_waits_for_no_paused_shard_whose_column_of_that_name_it_renamed_to_itself():
    """F155 (seed 2101781): t2, paused by its refused rename of a to x, has an x of its
    own (a's values): not the group's x, so the rename of x to y finishes once t1 and t3
    made it, moving t3's values; t2's x comes back empty, held for it."""
    c = group(3)
    t1, t2, t3 = S("s1.db.t1"), S("s2.db.t2"), S("s3.db.t3")
    c.ddl(t1, "ALTER TABLE t1 ADD COLUMN x INT")
    c.ddl(t3, "ALTER TABLE t3 ADD COLUMN x INT")
    c.ddl(t1, "ALTER TABLE t1 RENAME COLUMN a TO b")  # pending: t2 and t3 have a
    assert c.ddl(t2, "ALTER TABLE t2 RENAME COLUMN a TO x").result == "conflict"
    c.ddl(t1, "ALTER TABLE t1 RENAME COLUMN x TO y")
    d = c.ddl(t3, "ALTER TABLE t3 RENAME COLUMN x TO y")
    assert [(r.old, r.new) for r in c.coordinator.renames] == [("a", "b")]
    assert d.downstream[:3] == (
        "UPDATE `shop`.`t` SET `y` = `x` WHERE `x` IS NOT NULL",
        "ALTER TABLE `shop`.`t` DROP INDEX IF EXISTS `__shardmerge_was_11f6ad8ec52a2984`",
        "ALTER TABLE `shop`.`t` DROP COLUMN `x`",
    )


def test_a_column_gone_downstream_holds_no_values_of_the_shards_that_had_it():
    c = group(2)
    t1, t2 = S("s1.db.t1"), S("s2.db.t2")
    c.ddl(t2, "ALTER TABLE t2 ADD COLUMN b INT")
    c.ddl(t2, "ALTER TABLE t2 DROP COLUMN b")  # no shard has b: gone downstream
    assert c.coordinator.shards[t2].wrote == frozenset({"id", "a"})
    d = c.ddl(t1, "ALTER TABLE t1 RENAME COLUMN a TO b")
    assert d.result == "applied" and [r.new for r in c.coordinator.renames] == ["b"]


def test_extract_columns_lead_a_new_primary_key_and_a_table_made_with_them_last_keeps_them_so():
    extract = {"source": "_src", "schema": "_db", "table": "_tbl"}
    fresh = group(extract_columns=extract)
    assert [p.column for p in fresh.coordinator.target.primary_key.parts] == ["_src", "_db", "_tbl", "id"]
    store = InMemoryStore()
    old = Coordinator("shop.t", "mariadb", store, extract_columns=extract)
    old.extract = replace(old.extract, leads=False)  # as a table made before the layout
    Player("shop.t", coordinator=old).start({ShardId("s1", "db", "t1"): BASE, ShardId("s2", "db", "t2"): BASE})
    again = Player("shop.t", coordinator=Coordinator("shop.t", "mariadb", store, extract_columns=extract))
    d = again.ddl(S("s1.db.t1"), "ALTER TABLE t1 ADD COLUMN b INT")
    assert [p.column for p in again.coordinator.target.primary_key.parts] == ["id", "_src", "_db", "_tbl"]
    assert not any("PRIMARY" in s for s in d.downstream)  # no rebuild of the table's key


# -- a DDL we cannot follow, then the operator's table -------------------------------------------
UNFOLLOWED_DEFAULT = "SET STATEMENT sort_buffer_size=1048576 FOR ALTER TABLE t1 ALTER COLUMN c SET DEFAULT 7"


@pytest.mark.parametrize("way", ["replace", "set-schema"])
def test_a_conflict_the_operators_table_makes_holds_through_ddls_its_worker_reads_on_the_old_table(way):
    """s1 runs a DDL we cannot follow (its default of c unlike the others'); the operator's
    way out gives its table, which conflicts: the shard stays held. Its worker still has the
    table from before that DDL (it takes the new one when it reads again from the pause), so
    its next DDL, read meanwhile, must be taken on the operator's table: taken on the
    worker's, it cleared the conflict and the default was lost (live stories 112059)."""
    c = group()
    s1 = S("s1.db.t1")
    c.ddl(s1, "ALTER TABLE t1 ADD COLUMN c INT NULL")
    c.ddl(S("s2.db.t2"), "ALTER TABLE t2 ADD COLUMN c INT NULL")
    assert c.ddl(s1, UNFOLLOWED_DEFAULT).result == "unsupported"
    if way == "replace":
        d = c.coordinator.replace_ddl(s1, "ALTER TABLE t1 ALTER COLUMN c SET DEFAULT 7", None)
    else:
        d = c.coordinator.set_schema(s1, change_of(s1, c.coordinator.shards[s1].accepted,
                                                   "ALTER TABLE t1 ALTER COLUMN c SET DEFAULT 7").after)
    assert d.result == "conflict" and "differ" in d.message, d.message
    d = c.ddl(s1, "ALTER TABLE t1 ADD COLUMN z INT")  # (its worker's table: c without the default)
    assert d.result == "conflict", d.message
    assert c.coordinator.shards[s1].current.column("c").default.sql == "7"
    d = c.ddl(S("s2.db.t2"), "ALTER TABLE t2 ALTER COLUMN c SET DEFAULT 7")  # (the other gives way)
    assert s1 in d.unblocked and c.coordinator.shards[s1].current.column("z") is not None


@pytest.mark.parametrize(("held_by", "stays"), [("conflict", "unsupported"), ("unsupported", "unsupported"), (None, "unsupported")])
def test_rows_its_worker_cannot_read_hold_the_shard_where_they_are_over_a_conflict(held_by, stays):
    """Rows of s1 its worker cannot read pause it there (`pause_shard`). Held by a conflict,
    they block it too, the conflict under them, so its later DDL stacks on them and is not
    decided when the conflict clears (L79); held by a DDL we could not follow, they are of
    its paused time (read again with the table its way out gives) and change nothing."""
    c = group()
    s1 = S("s1.db.t1")
    if held_by == "conflict":
        c.ddl(S("s2.db.t2"), "ALTER TABLE t2 ADD COLUMN note INT NULL DEFAULT 1")
        assert c.ddl(s1, "ALTER TABLE t1 ADD COLUMN note INT NULL DEFAULT 2").result == "conflict"
    elif held_by == "unsupported":
        assert c.ddl(s1, FIRST).result == "unsupported"
    before = c.coordinator.blocked.get(s1)
    d = c.coordinator.pause_shard(s1, "the binlog has 4 columns for t1", position="bin.000001:300")
    block = c.coordinator.blocked[s1]
    assert block.kind == stays, block
    if held_by == "unsupported":
        assert block == before and "already paused" in d.message, d.message
        return
    assert (block.ddl, block.position) == ("(rows of s1.db.t1)", "bin.000001:300"), block
    assert block.under == (before if held_by == "conflict" else None)
    table = c.coordinator.shards[s1].current
    later = c.coordinator.apply(change_of(s1, table, "ALTER TABLE t1 ADD COLUMN z INT NULL"), position="bin.000001:400")
    assert later.result == "unsupported" and "decided once that one's way out gave it" in later.message
    if held_by == "conflict":  # (the other shard gives way: s1 stays held at its rows, z not taken)
        c.ddl(S("s2.db.t2"), "ALTER TABLE t2 ALTER COLUMN note SET DEFAULT 2")
        assert c.coordinator.blocked[s1].kind == "unsupported"
        assert c.coordinator.target.column("z") is None


def test_a_set_schema_under_a_conflict_keeps_the_value_its_rows_got_in_a_column_added_while_held():
    """L81 (live stories): s1, held by a conflict, adds c4 TEXT NOT NULL (its rows get ''), then
    runs a DDL we cannot follow. Its set-schema holds it by the conflict again, which keeps what
    its rows got; its MODIFY of c4 to NULL DEFAULT NULL (the value stays '' upstream) is taken
    on it. When the other shard gives way, c4 comes downstream, and s1's rows get ''. Once, the
    conflict set-schema made again had forgotten it: they got the MODIFY's default, NULL."""
    c = group(extract_columns={"source": "_src", "schema": "_db", "table": "_tbl"})
    s1, s2 = S("s1.db.t1"), S("s2.db.t2")
    c.ddl(s2, "ALTER TABLE t2 ADD COLUMN note INT NULL DEFAULT 1")
    assert c.ddl(s1, "ALTER TABLE t1 ADD COLUMN note INT NULL DEFAULT 2").result == "conflict"
    assert c.ddl(s1, "ALTER TABLE t1 ADD COLUMN c4 TEXT NOT NULL").result == "conflict"
    table = c.coordinator.shards[s1].current
    assert c.coordinator.apply(change_of(s1, table, FIRST), position="bin.000001:100").result == "unsupported"
    c.coordinator.set_schema(s1, table)
    assert c.coordinator.blocked[s1].kind == "conflict"
    assert c.ddl(s1, "ALTER TABLE t1 MODIFY COLUMN c4 TEXT NULL DEFAULT NULL").result == "conflict"
    d = c.ddl(s2, "ALTER TABLE t2 ALTER COLUMN note SET DEFAULT 2")
    assert s1 in d.unblocked and c.coordinator.target.column("c4") is not None
    assert any("SET `c4` = ''" in sql and "'s1'" in sql for sql in d.downstream), d.downstream


# -- two DDLs we cannot follow, one after the other ------------------------------------------------
FIRST = "SET STATEMENT div_precision_increment=6 FOR ALTER TABLE t1 MODIFY a BIGINT NOT NULL"
SECOND = "SET STATEMENT sort_buffer_size=1048576 FOR ALTER TABLE t1 ADD COLUMN b INT NULL"


def held_by_two(conflict: bool, second: str = SECOND) -> tuple[Player, ShardId]:
    """s1 (held by a conflict first, with `conflict`) runs FIRST, then `second`, at binlog
    positions of their own."""
    c = group()
    s1 = S("s1.db.t1")
    if conflict:
        c.ddl(S("s2.db.t2"), "ALTER TABLE t2 ADD COLUMN note INT NULL DEFAULT 1")
        assert c.ddl(s1, "ALTER TABLE t1 ADD COLUMN note INT NULL DEFAULT 2").result == "conflict"
    table = c.coordinator.shards[s1].current
    assert c.coordinator.apply(change_of(s1, table, FIRST), position="bin.000001:100").result == "unsupported"
    d = c.coordinator.apply(change_of(s1, table, second), position="bin.000001:200")  # (its worker's table)
    assert d.result == "unsupported" and "decided once that one's way out gave it" in d.message, d.message
    return c, s1


@pytest.mark.parametrize("conflict", [False, True])
def test_a_second_unfollowed_ddl_waits_for_the_first_ones_way_out(conflict):
    """The shard's table is unknown from the first on: its block stays there, naming the
    second, and a restart reading the second again changes nothing. Replaced, running, it
    resumes with the first's table (its worker reads the second again from its pause and
    it is decided then); held by its conflict, the second is taken now on that table and
    holds it, under its conflict, and the decision says the table the first's way out gave
    (its pin there, the second decided with it). The second's way out takes it on that table."""
    c, s1 = held_by_two(conflict)
    block = c.coordinator.blocked[s1]
    assert (block.ddl, block.position) == (FIRST, "bin.000001:100")
    assert block.stacked == ((SECOND, "bin.000001:200"),) and "1 more DDL after it" in block.reason
    assert "SHOW CREATE TABLE as it was right here, not now" in block.reason
    again = c.coordinator.apply(change_of(s1, c.coordinator.shards[s1].accepted, SECOND), position="bin.000001:200")
    assert "already paused" in again.message and c.coordinator.blocked[s1] == block
    d = c.coordinator.replace_ddl(s1, "ALTER TABLE t1 MODIFY a BIGINT NOT NULL", "bin.000001:100")
    if not conflict:
        assert s1 not in d.blocked and s1 not in c.coordinator.blocked and d.gave == ()
        assert c.coordinator.shards[s1].current.column("a").type.name == "bigint"
        return
    block = c.coordinator.blocked[s1]
    assert (block.kind, block.ddl, block.position) == ("unsupported", SECOND, "bin.000001:200"), block
    assert block.under.kind == "conflict" and block.stacked == ()
    (gave,) = d.gave
    assert (gave.shard, gave.through, gave.table.column("a").type.name, gave.table.column("b")) == (
        s1, "bin.000001:200", "bigint", None)
    d = c.coordinator.replace_ddl(s1, "ALTER TABLE t1 ADD COLUMN b INT NULL", "bin.000001:200")
    assert c.coordinator.blocked[s1].kind == "conflict" and d.gave == ()
    current = c.coordinator.shards[s1].current
    assert current.column("a").type.name == "bigint" and current.column("b") is not None
    d = c.ddl(S("s2.db.t2"), "ALTER TABLE t2 ALTER COLUMN note SET DEFAULT 2")  # (the other gives way)
    assert s1 in d.unblocked


def test_a_ddl_read_after_an_unfollowed_one_under_a_conflict_is_taken_on_the_table_its_way_out_gives():
    """One we can follow, read while the table was unknown, waits too; held by its conflict,
    the shard takes it on the table the first one's way out gives (skip: the conflict's),
    and is held by that conflict still; the pin is that table, the DDL decided with it."""
    c, s1 = held_by_two(True, "ALTER TABLE t1 ADD COLUMN z INT NULL")
    d = c.coordinator.skip_ddl(s1)
    assert c.coordinator.blocked[s1].kind == "conflict" and s1 not in d.unblocked, d.message
    (gave,) = d.gave
    assert gave.through == "bin.000001:200" and gave.table.column("z") is None
    assert gave.table.column("a").type.name == "int"
    assert c.coordinator.shards[s1].current.column("z") is not None


def test_ddls_after_a_second_unfollowed_one_wait_on_it_in_turn():
    """Held by its conflict, the shard ran FIRST, SECOND and one we can follow: the first
    one's way out takes SECOND, which holds it, the third stacked on it now; SECOND's way out
    takes the third on the table it gives, and says that table, the third decided with it."""
    c, s1 = held_by_two(True)
    third = "ALTER TABLE t1 ADD COLUMN z INT NULL"
    c.coordinator.apply(change_of(s1, c.coordinator.shards[s1].accepted, third), position="bin.000001:300")
    assert [p for _, p in c.coordinator.blocked[s1].stacked] == ["bin.000001:200", "bin.000001:300"]
    assert "the shard ran 2 more DDLs after it" in c.coordinator.blocked[s1].reason
    d = c.coordinator.replace_ddl(s1, "ALTER TABLE t1 MODIFY a BIGINT NOT NULL", "bin.000001:100")
    block = c.coordinator.blocked[s1]
    assert (block.position, block.stacked, d.gave[0].through) == ("bin.000001:200", ((third, "bin.000001:300"),),
                                                                  "bin.000001:200")
    assert "the shard ran 1 more DDL after it (ALTER TABLE t1 ADD COLUMN z INT NULL)" in block.reason
    d = c.coordinator.replace_ddl(s1, "ALTER TABLE t1 ADD COLUMN b INT NULL", "bin.000001:200")
    (gave,) = d.gave
    assert (gave.through, gave.table.column("b") is not None, gave.table.column("z")) == ("bin.000001:300", True, None)
    assert c.coordinator.blocked[s1].kind == "conflict" and c.coordinator.shards[s1].current.column("z") is not None
