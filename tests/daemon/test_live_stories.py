"""Live stories (`tests/live_stories.py`) with fixed seeds, short enough for every test run:
the schema fuzzer's stories played by the live daemon, rows flowing on every shard and the
daemon's process group SIGKILLed during the story; at the end every shard equals its rows
downstream, the schema is the join, and the daemon never crashed. Longer runs with other
seeds: `make live-stories SEED=… COUNT=…`."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.live_stories import Knobs, LiveStory, read_finding

KNOBS = Knobs(kills=2, max_steps=12, unfollowed=0.0)


def play(sandbox, tmp_path, seed: int, knobs: Knobs = KNOBS):
    report = LiveStory(sandbox, tmp_path, seed, knobs, log=lambda _m: None).run()
    assert report.ok, "\n".join([report.line(), *report.details()])
    assert report.kills.kills >= 1 and report.steps >= 8
    assert report.counts.inserts > 0 and report.counts.key_moves > 0 and report.counts.deletes > 0
    assert all(s.upstream_rows > 0 for s in report.shards), [s.describe() for s in report.shards]
    return report


def play_story(sandbox, tmp_path, seed: int, description: str, shards: dict, steps: list, knobs: Knobs):
    """A finding's story as written (its shards' tables, its DDL steps, extract columns),
    played live with the story's seed's writers: the report, which must be ok."""
    import json

    story = tmp_path / "story.yaml"
    story.write_text(json.dumps({
        "description": description, "flavor": "mariadb", "target": "fuzz.t", "shards": shards,
        "steps": [{"shard": shard, "ddl": ddl} for shard, ddl in steps],
        "live": {"seed": seed, "extract": True},
    }))
    report = LiveStory(sandbox, tmp_path, seed, knobs, read_finding(story), log=lambda _m: None).run()
    assert report.ok, "\n".join([report.line(), *report.details()])
    return report


def held_at_its_rows_then_running(report, shard: str) -> None:
    """A shard a conflict held, its DDL the tracker could not follow skipped, whose rows
    since did not fit the table the skip kept: they held it there, under the conflict,
    before its later DDLs were decided (L79), and their printed set-schema (its table as it
    was there) took those on it. It runs at the end, every row of it as upstream."""
    assert not report.paused, [p.describe() for p in report.paused]
    (rows,) = [s for s in report.shards if str(s.shard).endswith(f".{shard.split('.')[-1]}")]
    assert rows.upstream_rows > 0 and rows.equal
    taken = [t for t in report.ways_out if t.endswith(f" {shard}") and t.split()[0] in ("set-schema", "binlog")]
    assert taken == [f"binlog skip {shard}", f"set-schema {shard}"], report.ways_out
    assert not report.retaken, report.retaken


def test_a_story_without_extract_columns_loses_nothing(sandbox, tmp_path):
    report = play(sandbox, tmp_path, 2)
    assert not report.extract and not report.paused


def test_a_pending_rename_with_extract_columns_loses_nothing(sandbox, tmp_path):
    """Two shards rename a column the third has not: each row's value is downstream under
    the old name or the new one, and compared as the rename's end will leave it."""
    report = play(sandbox, tmp_path, 4)
    assert report.extract and report.renames_pending == 1


def test_a_shard_blocked_by_a_conflict_is_reported_and_holds_back_no_other(sandbox, tmp_path):
    """A shard that joins and sets another DEFAULT is blocked (defaults differ): the daemon
    reports it with the DDL, the reason and the position, its rows downstream are its rows
    before that DDL, and every other shard is in sync."""
    report = play(sandbox, tmp_path, 3)
    (paused,) = report.paused
    assert paused.kind == "blocked, conflict" and "SET DEFAULT" in paused.ddl and "differ" in paused.reason
    assert paused.rows_before is not None and paused.rows_before.equal and paused.rows_before.upstream_rows > 0


# (replace with traffic in make test: tests/daemon/test_unreadable_resume.py; here, with kills, in make test-long)
@pytest.mark.parametrize("way_out", ["binlog skip", pytest.param("binlog replace", marks=pytest.mark.long)])
def test_the_operators_way_out_of_an_unfollowed_ddl_loses_nothing(sandbox, tmp_path, way_out):
    """Two of the story's ALTERs run under a SET STATEMENT variable the daemon cannot follow:
    each pauses its shard, and the operator runs the printed way out with the writers on and
    the daemon SIGKILLed meanwhile (`tests/live_operator.py`). Replace has every row read
    again under the DDL; skip discards the shard's rows since the pause (their ids left out
    of the compare), and every row after it must arrive (one that does not fit pauses the
    shard again, and the operator takes that way out too)."""
    report = play(sandbox, tmp_path, 5, replace(KNOBS, unfollowed=1.0, way_out=way_out))
    assert any(t.startswith(way_out) for t in report.ways_out), report.ways_out
    assert report.discarded > 0 or way_out != "binlog skip", report.discarded


_T = ("CREATE TABLE `{t}` (\n  `id` bigint NOT NULL AUTO_INCREMENT,\n  `c2` mediumint unsigned NULL DEFAULT NULL,\n"
      "{n1}  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
_N1 = "`n1` varchar(15) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL"


def test_a_shard_that_left_is_not_compared_in_a_column_a_later_leaving_dropped(sandbox, tmp_path):
    """Live stories seed 240014: t1 leaves while t4 still has `n1`, t4 leaves (`n1` goes
    downstream, with t1's values there), then t2 adds `n1` afresh: t1's rows downstream hold
    its default there, as docs/design.md says; the harness leaves `n1` out of t1's compare."""
    report = play_story(
        sandbox, tmp_path, 240014, "a column dropped downstream after a shard left with it, then added again",
        {"s2.db.t1": _T.format(t="t1", n1=f"  {_N1},\n"), "s1.db.t2": _T.format(t="t2", n1="")},
        [
            ("s1.db.t4", _T.format(t="t4", n1=f"  {_N1},\n")),
            ("s1.db.t4", "ALTER TABLE t4 ENGINE=InnoDB"),
            ("s2.db.t1", "DROP TABLE t1"),
            ("s1.db.t4", "ALTER TABLE t4 ENGINE=InnoDB"),
            ("s1.db.t4", "DROP TABLE t4"),
            ("s1.db.t2", f"ALTER TABLE t2 ADD COLUMN {_N1}"),
            ("s1.db.t2", "ALTER TABLE t2 ENGINE=InnoDB"),
        ],
        Knobs(kills=0, unfollowed=0.0),
    )
    (t1,) = [s for s in report.shards if str(s.shard).endswith(".t1")]
    assert t1.upstream_rows > 0


_L01 = ("CREATE TABLE `{t}` (\n  `id` bigint NOT NULL AUTO_INCREMENT,\n  `c2` mediumint NULL DEFAULT NULL,\n"
        "{more}  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")


def test_a_shard_resumed_at_its_own_drop_and_paused_again_on_the_way_holds_the_default_where_it_never_wrote(
    sandbox, tmp_path
):
    """Live finding L01 (seed 610027): t2 adds `x4 DEFAULT 0` where t4 has `x4 DEFAULT NULL`
    (a conflict: paused; MariaDB gives its rows 0), drops `x2` under a SET STATEMENT the
    daemon cannot follow (the operator skips it: its tracked table keeps `x2`), and drops
    `x4`, which would resume it. Its first row after the skipped DROP does not fit: it holds
    t2 there (L79: once, that DROP of `x4` resumed it first, and the row paused it again
    after). Their set-schema takes the DROP of `x4` on the table as it was there: t2 runs,
    its rows in `x4`, which no table of it the group accepted had, holding the default
    (docs/design.md), as upstream."""
    report = play_story(
        sandbox, tmp_path, 610027,
        "L01: resumed at its own DROP of a column it added in conflict, paused again before it",
        {
            "s1.db.t2": _L01.format(t="t2", more="  `x2` decimal(14,0) NULL DEFAULT NULL,\n"),
            "s1.db.t4": _L01.format(t="t4", more="  `x4` mediumint NULL DEFAULT NULL,\n"),
        },
        [
            ("s1.db.t2", "ALTER TABLE t2 ADD COLUMN `x4` mediumint NULL DEFAULT 0"),
            ("s1.db.t2", "SET STATEMENT sort_buffer_size=1048576 FOR ALTER TABLE t2 DROP COLUMN `x2`"),
            ("s1.db.t4", "ALTER TABLE t4 ENGINE=InnoDB"),
            ("s1.db.t2", "ALTER TABLE t2 DROP COLUMN `x4`"),
        ],
        Knobs(kills=0, unfollowed=0.0, way_out="binlog skip"),
    )
    held_at_its_rows_then_running(report, "s1.db.t2")


_L66 = ("CREATE TABLE `{t}` (\n  `id` bigint NOT NULL AUTO_INCREMENT,\n  `c2` mediumint NULL DEFAULT NULL,\n"
        "  `c4` timestamp(6) NULL DEFAULT '2020-01-02 03:04:05',\n"
        "{more}  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
_C4_NOT_NULL = "MODIFY COLUMN `c4` timestamp(6) NOT NULL DEFAULT '2020-01-02 03:04:05'"
_L66_SHARDS = {
    "s1.db.t2": _L66.format(t="t2", more="  `x2` decimal(14,0) NULL DEFAULT NULL,\n"),
    "s1.db.t4": _L66.format(t="t4", more="  `x4` mediumint NULL DEFAULT NULL,\n"),
}
_L66_STEPS = [
    # (t2's rows before its pause, some with a NULL `c4`, written meanwhile)
    *[("s1.db.t4", "ALTER TABLE t4 ENGINE=InnoDB")] * 4,
    ("s1.db.t4", f"ALTER TABLE t4 {_C4_NOT_NULL}"),
    ("s1.db.t4", "ALTER TABLE t4 ENGINE=InnoDB"),
    ("s1.db.t2", "ALTER TABLE t2 ADD COLUMN `x4` mediumint NULL DEFAULT 0"),
    ("s1.db.t2", "SET STATEMENT sort_buffer_size=1048576 FOR ALTER TABLE t2 DROP COLUMN `x2`"),
    ("s1.db.t4", "ALTER TABLE t4 ENGINE=InnoDB"),
    ("s1.db.t2", f"ALTER TABLE t2 {_C4_NOT_NULL}"),
    ("s1.db.t2", "ALTER TABLE t2 DROP COLUMN `x4`"),
]


def test_a_shard_resumed_past_its_timestamp_made_not_null_and_paused_again_before_it_holds_the_time_of_the_decision(
    sandbox, tmp_path
):
    """Live findings L66 and L67: as L01, t2 is paused by a conflict (`x4 DEFAULT 0` where t4
    has `x4 DEFAULT NULL`), the operator skips its DROP under a SET STATEMENT the daemon
    cannot follow, and its DROP of `x4` would resume it; meanwhile it made its nullable
    TIMESTAMP `c4` NOT NULL, as t4 had. Its first row after the skipped DROP holds it there,
    before that MODIFY and DROP (L79). Once, they were decided first (the join's `c4` NOT
    NULL, its NULLs given the time of the MODIFY downstream) and the row paused it again
    after: L66 (its rows before converted to the table it resumed at), then L67 (its way out
    taking two runs). Their set-schema as printed (its table as it was there) takes both on
    it: t2 runs, every row of it as upstream."""
    report = play_story(
        sandbox, tmp_path, 615143,
        "L66: its TIMESTAMP made NOT NULL after rows that hold it",
        _L66_SHARDS,
        _L66_STEPS,
        Knobs(kills=0, unfollowed=0.0, way_out="binlog skip"),
    )
    held_at_its_rows_then_running(report, "s1.db.t2")


_TEXT_HELD = ("CREATE TABLE `{t}` (\n  `id` bigint unsigned NOT NULL AUTO_INCREMENT,\n{c1}"
              "  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=latin1")


def t2_equal(sandbox, tmp_path, seed: int, description: str, c1: str, steps: list) -> None:
    """A finding's story on t1 (s1) and t2 (s2), both `_TEXT_HELD` with column `c1`: t2's rows
    downstream equal its rows upstream at the end."""
    report = play_story(
        sandbox, tmp_path, seed, description,
        {"s1.db.t1": _TEXT_HELD.format(t="t1", c1=c1), "s2.db.t2": _TEXT_HELD.format(t="t2", c1=c1)},
        steps, Knobs(kills=0, unfollowed=0.0),
    )
    (t2,) = [s for s in report.shards if str(s.shard).endswith(".t2")]
    assert t2.upstream_rows > 0 and t2.equal


def test_a_shards_number_made_a_decimal_reads_its_new_text_where_a_string_column_holds_it(sandbox, tmp_path):
    """Live finding L59 (seed 610336): the downstream column is a string, holding the ENUM's 'x' of
    a shard that left and t2's numbers; t2 then makes its MEDIUMINT a DECIMAL(14,4), which
    MariaDB converts in place, 0 into 0.0000. The string downstream kept '0': t2's rows are
    converted as upstream (docs/design.md "Values an ALTER converts in place")."""
    enum = "  `c1` enum('x') NULL DEFAULT 'x',\n"
    t2_equal(
        sandbox, tmp_path, 610336, "L59: a number made a DECIMAL, held downstream in a string", enum,
        [
            ("s1.db.t1", "ALTER TABLE t1 ENGINE=InnoDB"),
            ("s2.db.t2", "ALTER TABLE t2 MODIFY COLUMN `c1` mediumint unsigned NULL DEFAULT 0"),
            ("s1.db.t1", "DROP TABLE t1"),
            ("s2.db.t2", "ALTER TABLE t2 ENGINE=InnoDB"),
            ("s2.db.t2", "ALTER TABLE t2 MODIFY COLUMN `c1` decimal(14,4) NULL DEFAULT 1"),
            ("s2.db.t2", "ALTER TABLE t2 ENGINE=InnoDB"),
        ],
    )


def test_a_decimal_added_while_paused_and_made_json_reads_its_own_text(sandbox, tmp_path):
    """Live finding L64 (seed 616119): t2 renames c1 to r4, which waits for t1, and adds c1
    again as a DECIMAL(7,3) DEFAULT 1 (paused: its rename waits), then makes it JSON, as t1
    did: its rows from before the ADD hold '1.000' upstream, which the decision's fill must
    give them downstream (not the literal's '1')."""
    dec = "  `c1` decimal(7,3) NULL DEFAULT 1,\n"
    t2_equal(
        sandbox, tmp_path, 616119, "L64: a DECIMAL added while paused, made JSON", dec,
        [
            ("s2.db.t2", "ALTER TABLE t2 CHANGE COLUMN `c1` `r4` decimal(7,3) NULL DEFAULT 1"),
            ("s2.db.t2", "ALTER TABLE t2 ADD COLUMN `c1` decimal(7,3) NULL DEFAULT 1 AFTER `id`"),
            ("s1.db.t1", "ALTER TABLE t1 MODIFY COLUMN `c1` json NULL DEFAULT NULL"),
            ("s2.db.t2", "ALTER TABLE t2 MODIFY COLUMN `c1` json NULL DEFAULT NULL"),
            ("s2.db.t2", "ALTER TABLE t2 DROP COLUMN `r4`"),
            ("s2.db.t2", "ALTER TABLE t2 ENGINE=InnoDB"),
        ],
    )


def test_a_column_added_while_paused_keeps_the_default_its_rows_got_where_the_decision_adds_it(sandbox, tmp_path):
    """Live finding L69 (seed 612792): t2, paused by a conflict (its DROP DEFAULT), adds n6
    DEFAULT 0 (its rows get 0) and then makes the default 7; its DROP of the conflicting column
    ends the conflict, and the decision adds n6 downstream, whose ADD gives t2's rows 7. They
    hold 0 upstream: the decision sets them so after its ADD."""
    c1 = "  `c1` datetime NULL DEFAULT '2020-01-02 03:04:05',\n"
    t2_equal(
        sandbox, tmp_path, 612792, "L69: a column added while paused, its default changed since", c1,
        [
            ("s2.db.t2", "ALTER TABLE t2 ALTER COLUMN `c1` DROP DEFAULT"),
            ("s2.db.t2", "ALTER TABLE t2 ADD COLUMN `n6` bigint unsigned NULL DEFAULT 0"),
            ("s2.db.t2", "ALTER TABLE t2 MODIFY COLUMN `n6` bigint unsigned NULL DEFAULT 7"),
            ("s2.db.t2", "ALTER TABLE t2 DROP COLUMN `c1`"),
            ("s2.db.t2", "ALTER TABLE t2 ENGINE=InnoDB"),
        ],
    )


def test_a_column_a_paused_shard_added_is_set_to_its_value_after_the_decision_makes_it_a_string(sandbox, tmp_path):
    """Live finding L77 (seed 623872): t2 drops c1 and adds it again as a BIGINT UNSIGNED
    NOT NULL (its rows get 0), which cannot join t1's TIMESTAMP: paused. t1 makes its c1 a
    BIGINT UNSIGNED too, which ends the conflict, and the decision makes c1 a string downstream
    (it holds t1's rows' TIMESTAMPs till they are converted). t2's rows were set to 0 before
    that MODIFY, in the TIMESTAMP, which made them '0000-00-00 00:00:00' there; they are set
    after it now (`RowsFix.goes_before`), '0' as upstream."""
    c1 = "  `c1` timestamp NOT NULL DEFAULT '2020-01-02 03:04:05',\n"
    t2_equal(
        sandbox, tmp_path, 623872, "L77: a number added while paused, its column made a string", c1,
        [
            ("s2.db.t2", "ALTER TABLE t2 DROP COLUMN `c1`"),
            ("s2.db.t2", "ALTER TABLE t2 ENGINE=InnoDB"),
            ("s2.db.t2", "ALTER TABLE t2 ADD COLUMN `c1` bigint unsigned NOT NULL AFTER `id`"),
            ("s2.db.t2", "ALTER TABLE t2 ENGINE=InnoDB"),
            ("s1.db.t1", "ALTER TABLE t1 MODIFY COLUMN `c1` bigint unsigned NOT NULL"),
            ("s2.db.t2", "ALTER TABLE t2 ENGINE=InnoDB"),
        ],
    )


def test_a_string_a_paused_shard_added_is_set_after_the_decision_makes_the_time_column_a_string(sandbox, tmp_path):
    """Live finding L78 (seed 625165): t1 drops c1 and adds it again as a VARCHAR DEFAULT 'd'
    (its rows get 'd'), which cannot join t2's DATETIME(6): paused. t2 makes its c1 the same
    VARCHAR, which ends the conflict; the decision set t1's rows to 'd' before its MODIFY
    made c1 a string downstream, in the DATETIME(6), which strict mode refused: the decision
    failed, its shards paused, and every later DDL of the table waited behind it. It is set
    after that MODIFY now (`lattice.takes_literal`)."""
    c1 = "  `c1` datetime(6) NOT NULL DEFAULT '2020-01-02 03:04:05',\n"
    text = "varchar(255) CHARACTER SET utf8mb3 COLLATE utf8mb3_general_ci NOT NULL DEFAULT 'd'"
    report = play_story(
        sandbox, tmp_path, 625165, "L78: a string added while paused, its time column made a string",
        {"s1.db.t1": _TEXT_HELD.format(t="t1", c1=c1), "s2.db.t2": _TEXT_HELD.format(t="t2", c1=c1)},
        [
            ("s1.db.t1", "ALTER TABLE t1 DROP COLUMN `c1`"),
            ("s1.db.t1", "ALTER TABLE t1 ENGINE=InnoDB"),
            ("s1.db.t1", f"ALTER TABLE t1 ADD COLUMN `c1` {text} AFTER `id`"),
            ("s1.db.t1", "ALTER TABLE t1 ENGINE=InnoDB"),
            ("s2.db.t2", f"ALTER TABLE t2 MODIFY COLUMN `c1` {text}"),
            ("s2.db.t2", "ALTER TABLE t2 ENGINE=InnoDB"),
        ],
        Knobs(kills=0, unfollowed=0.0),
    )
    assert not report.paused and all(s.upstream_rows > 0 for s in report.shards)


_L68 = ("CREATE TABLE `{t}` (\n  `id` smallint NOT NULL{ai},\n"
        "  `c1` varchar(11) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',\n"
        "  `c2` set('x') CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL DEFAULT NULL,\n"
        "  `c3` date NOT NULL,\n  `c4` datetime NOT NULL,\n"
        "  `c5` tinytext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,\n"
        "  PRIMARY KEY (`id`),\n  KEY `k0` (`c1`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")


def test_a_shard_paused_again_after_a_skip_on_its_conflict_holds_the_rows_it_wrote_meanwhile(sandbox, tmp_path):
    """Live finding L68 (seed 614240): t4 is paused by a conflict (c2's default), runs an ADD
    under a SET STATEMENT the daemon cannot follow (skipped by the operator: held by the
    conflict again, its rows waiting with it), and its MODIFY of c2 would end the conflict.
    Its first row after the skipped ADD holds it there, before that MODIFY (L79: once, the
    MODIFY resumed it and the row paused it again after), and their set-schema as printed
    takes the MODIFY: t4 runs, its rows of the conflict's time too (the skip dropped no row).
    t2, on its server, runs a statement the operator skips later (the story once took the
    rows of t4 copied then for the ones its pause stood at, and saw 83 rows lost)."""
    report = play_story(
        sandbox, tmp_path, 614240, "L68: paused again after a skip on its conflict",
        {"s1.db.t2": _L68.format(t="t2", ai=""), "s1.db.t4": _L68.format(t="t4", ai=" AUTO_INCREMENT")},
        [
            ("s1.db.t4", "ALTER TABLE t4 ALTER COLUMN `c2` SET DEFAULT 'x'"),
            *[("s1.db.t2", "ALTER TABLE t2 ENGINE=InnoDB")] * 3,  # (t4's rows while paused)
            ("s1.db.t2", "ALTER TABLE t2 ADD COLUMN `n2` bigint NOT NULL DEFAULT 0 AFTER `c5`"),
            ("s1.db.t4", "SET STATEMENT tmp_table_size=16777216 FOR ALTER TABLE t4 "
                         "ADD COLUMN `n2` bigint NOT NULL DEFAULT 0 AFTER `c5`"),
            *[("s1.db.t2", "ALTER TABLE t2 ENGINE=InnoDB")] * 2,
            ("s1.db.t4", "ALTER TABLE t4 MODIFY COLUMN `c2` set('x') CHARACTER SET utf8mb4 "
                         "COLLATE utf8mb4_general_ci NULL DEFAULT NULL"),
            *[("s1.db.t2", "ALTER TABLE t2 ENGINE=InnoDB")] * 2,
            ("s1.db.t2", "SET STATEMENT tmp_table_size=16777216 FOR ALTER TABLE t2 COMMENT='b'"),
            ("s1.db.t2", "ALTER TABLE t2 ENGINE=InnoDB"),
        ],
        Knobs(kills=0, unfollowed=0.0, way_out="binlog skip"),
    )
    held_at_its_rows_then_running(report, "s1.db.t4")
