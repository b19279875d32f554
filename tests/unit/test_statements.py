"""The statements a batch of changes becomes downstream (`replicator.apply.statements`),
rule by rule: batch in, statements out. That each reads only the rows it changes on a
real server: tests/server/test_statement_reads.py."""

from __future__ import annotations

import pytest

from replicator.apply.statements import _after_key, _key, statements
from replicator.apply.target import TargetInfo, TargetTable
from replicator.source.messages import Change
from tests.unit.test_applier import COLS, SHARD, T, dele, info, ins, upd

# (what, target, safe, changes, statements)
STATEMENT_RULES = [
    (
        "consecutive inserts are one INSERT",
        info(),
        False,
        [ins(1), ins(2)],
        ["INSERT INTO `db`.`t` (`id`,`a`,`b`) VALUES (1,1,'x'),(2,1,'x')"],
    ),
    (
        "safe mode inserts as REPLACE",
        info(),
        True,
        [ins(1)],
        ["REPLACE INTO `db`.`t` (`id`,`a`,`b`) VALUES (1,1,'x')"],
    ),
    (
        "safe mode, with another unique key: each row's own deleted by its key, then INSERT (L60)",
        info(sole_key=False),
        True,
        [ins(1), ins(2)],
        [
            "DELETE FROM `db`.`t` WHERE `id` IN (1,2)",
            "INSERT INTO `db`.`t` (`id`,`a`,`b`) VALUES (1,1,'x'),(2,1,'x')",
        ],
    ),
    (
        "and an update: DELETE by its key + INSERT",
        info(sole_key=False),
        True,
        [upd(1, "5")],
        ["DELETE FROM `db`.`t` WHERE `id`=1", "INSERT INTO `db`.`t` (`id`,`a`,`b`) VALUES (1,5,'x')"],
    ),
    (
        "consecutive updates by the only unique key are one upsert",
        info(),
        False,
        [upd(1, "5"), upd(2, "6")],
        [
            "INSERT INTO `db`.`t` (`id`,`a`,`b`) VALUES (1,5,'x'),(2,6,'x') "
            "ON DUPLICATE KEY UPDATE `id`=VALUES(`id`),`a`=VALUES(`a`),`b`=VALUES(`b`)"
        ],
    ),
    (
        "with another unique key, each update is an UPDATE by the key",
        info(sole_key=False),
        False,
        [upd(1, "5"), upd(2, "6")],
        [
            "UPDATE `db`.`t` SET `id`=1,`a`=5,`b`='x' WHERE `id`=1",
            "UPDATE `db`.`t` SET `id`=2,`a`=6,`b`='x' WHERE `id`=2",
        ],
    ),
    (
        "safe mode, by the only unique key: updates are one upsert, the rows as they are after, there or not",
        info(),
        True,
        [upd(1, "5"), upd(2, "6")],
        [
            "INSERT INTO `db`.`t` (`id`,`a`,`b`) VALUES (1,5,'x'),(2,6,'x') "
            "ON DUPLICATE KEY UPDATE `id`=VALUES(`id`),`a`=VALUES(`a`),`b`=VALUES(`b`)"
        ],
    ),
    (
        "without a key, an update matches the whole row before, one row",
        info(key=None, sole_key=False),
        False,
        [upd(1, "5")],
        ["UPDATE `db`.`t` SET `id`=1,`a`=5,`b`='x' WHERE `id` <=> 1 AND `a` <=> 0 AND `b` <=> 'x' LIMIT 1"],
    ),
    (
        "consecutive deletes are one DELETE by key",
        info(),
        False,
        [dele(1), dele(2)],
        ["DELETE FROM `db`.`t` WHERE `id` IN (1,2)"],
    ),
    (
        "one delete is by equalities: a row constructor IN of one element reads the whole table",
        TargetInfo(T, "`db`.`t`", {c: c for c in COLS}, ("id", "a"), 1, sole_key=True),
        False,
        [dele(1)],
        ["DELETE FROM `db`.`t` WHERE `id`=1 AND `a`=1"],
    ),
    (
        "deletes by a composite key are one row constructor IN",
        TargetInfo(T, "`db`.`t`", {c: c for c in COLS}, ("id", "a"), 1, sole_key=True),
        False,
        [dele(1), dele(2)],
        ["DELETE FROM `db`.`t` WHERE (`id`,`a`) IN ((1,1),(2,1))"],
    ),
    (
        "without a key, a delete matches the whole row, one row",
        info(key=None, sole_key=False),
        False,
        [dele(1)],
        ["DELETE FROM `db`.`t` WHERE `id` <=> 1 AND `a` <=> 1 AND `b` <=> 'x' LIMIT 1"],
    ),
    (
        "with one unique key, a batch goes as its net effect: deletes, inserts, upserts",
        info(),
        False,
        [ins(1), upd(2, "5"), dele(3), ins(4), upd(1, "7"), upd(2, "6")],
        [
            "DELETE FROM `db`.`t` WHERE `id`=3",
            "INSERT INTO `db`.`t` (`id`,`a`,`b`) VALUES (1,7,'x'),(4,1,'x')",
            "INSERT INTO `db`.`t` (`id`,`a`,`b`) VALUES (2,6,'x') "
            "ON DUPLICATE KEY UPDATE `id`=VALUES(`id`),`a`=VALUES(`a`),`b`=VALUES(`b`)",
        ],
    ),
    (
        "a row deleted and made again naming every column is the upsert of its image",
        info(),
        False,
        [upd(1, "5"), dele(1), ins(1, a="9"), dele(2), ins(2), dele(2)],
        [
            "DELETE FROM `db`.`t` WHERE `id`=2",
            "INSERT INTO `db`.`t` (`id`,`a`,`b`) VALUES (1,9,'x') "
            "ON DUPLICATE KEY UPDATE `id`=VALUES(`id`),`a`=VALUES(`a`),`b`=VALUES(`b`)",
        ],
    ),
    (
        "naming fewer, it is deleted first, then inserted (what it does not name takes its default)",
        info(),
        False,
        [dele(1), ins(1, a="9", columns=("id", "a")), dele(2), ins(2), ins(3)],
        [
            "DELETE FROM `db`.`t` WHERE `id`=1",
            "INSERT INTO `db`.`t` (`id`,`a`,`b`) VALUES (3,1,'x')",
            "INSERT INTO `db`.`t` (`id`,`a`) VALUES (1,9)",
            "INSERT INTO `db`.`t` (`id`,`a`,`b`) VALUES (2,1,'x') "
            "ON DUPLICATE KEY UPDATE `id`=VALUES(`id`),`a`=VALUES(`a`),`b`=VALUES(`b`)",
        ],
    ),
    (
        "a run breaks where the operation changes, keeping order (another unique key: no folding)",
        info(sole_key=False),
        False,
        [ins(1), dele(1), ins(1)],
        [
            "INSERT INTO `db`.`t` (`id`,`a`,`b`) VALUES (1,1,'x')",
            "DELETE FROM `db`.`t` WHERE `id`=1",
            "INSERT INTO `db`.`t` (`id`,`a`,`b`) VALUES (1,1,'x')",
        ],
    ),
    (
        "a run breaks where the column list changes (a shard between versions)",
        info(),
        False,
        [ins(1), ins(2, columns=("id", "a"))],
        [
            "INSERT INTO `db`.`t` (`id`,`a`,`b`) VALUES (1,1,'x')",
            "INSERT INTO `db`.`t` (`id`,`a`) VALUES (2,1)",
        ],
    ),
    (
        "a renamed shard's row clears the old column the table still has",
        TargetInfo(T, "`db`.`t`", {"id": "id", "a": "a", "b": "b", "old": "old"}, ("id",), 1, sole_key=True),
        False,
        [ins(1)._replace(clear=("old",))],
        ["INSERT INTO `db`.`t` (`id`,`a`,`b`,`old`) VALUES (1,1,'x',NULL)"],
    ),
    (
        "a cleared column the table no longer has is left out",
        info(),
        False,
        [ins(1)._replace(clear=("old",))],
        ["INSERT INTO `db`.`t` (`id`,`a`,`b`) VALUES (1,1,'x')"],
    ),
    (
        # routed before the rename ended; the table has the name again, another shard's
        # NOT NULL column: the row takes its default (live stories seed 20196)
        "a cleared column the table has again NOT NULL is left out",
        TargetInfo(T, "`db`.`t`", {"id": "id", "a": "a", "b": "b", "old": "old"}, ("id",), 1, sole_key=True,
                   not_null=frozenset({"id", "old"})),
        False,
        [ins(1)._replace(clear=("old",))],
        ["INSERT INTO `db`.`t` (`id`,`a`,`b`) VALUES (1,1,'x')"],
    ),
]


@pytest.mark.parametrize(
    "target, safe, changes, expected",
    [row[1:] for row in STATEMENT_RULES],
    ids=[row[0] for row in STATEMENT_RULES],
)
def test_statements(target, safe, changes, expected):
    assert statements(changes, {T: target}, {T: target.major}, safe) == expected


def test_a_batch_built_for_an_older_major_version_is_rebuilt_for_the_table_now():
    """docs/design.md "Batches checked at commit": the batch was built when the table had `old`; a major change dropped
    it. At commit the rows are projected onto the columns the table has now."""
    target = info(major=2)
    change = ins(1, columns=("id", "a", "b", "old"))
    built_for = {T: 1}
    assert statements([change], {T: target}, built_for, False) == [
        "INSERT INTO `db`.`t` (`id`,`a`,`b`) VALUES (1,1,'x')"
    ]
    # built for the current version, the same batch is sent as it is (and the server
    # would refuse it: that is what the version check is for)
    assert statements([change], {T: target}, {T: 2}, False) == [
        "INSERT INTO `db`.`t` (`id`,`a`,`b`,`old`) VALUES (1,1,'x','o')"
    ]


# (what, the row's columns, the key, the row's values, the key's values)
KEY_VALUES = [
    ("one column", ("id", "a", "b"), ("id",), ("1", "2", "'x'"), ("1",)),
    ("in the key's order, not the row's", ("id", "a", "b"), ("b", "id"), ("1", "2", "'x'"), ("'x'", "1")),
    ("names compared case-insensitively", ("ID", "a", "b"), ("id",), ("1", "2", "'x'"), ("1",)),
    ("a key column the row lacks is NULL", ("id", "a"), ("id", "b"), ("1", "2"), ("1", "NULL")),
]


@pytest.mark.parametrize(
    "columns, key, values, expected", [row[1:] for row in KEY_VALUES], ids=[row[0] for row in KEY_VALUES]
)
def test_a_rows_key_values_before_and_after(columns, key, values, expected):
    target = TargetTable(T, "`db`.`t`", {c.lower(): c for c in columns}, key, 1, sole_key=True)
    update = Change((1, 4, 0), SHARD, T, "U", columns, values, values)
    moved = update._replace(before_columns=("x", *columns), before=("0", *values))
    assert _key(update, target) == _after_key(update, target) == _key(moved, target) == expected


def test_a_row_whose_values_do_not_match_its_columns_is_refused():
    target = TargetTable(T, "`db`.`t`", {"id": "id", "a": "a"}, ("id",), 1, sole_key=True)
    with pytest.raises(ValueError, match="1 values for the 2 columns id, a"):
        _after_key(Change((1, 4, 0), SHARD, T, "I", ("id", "a"), ("1",)), target)
