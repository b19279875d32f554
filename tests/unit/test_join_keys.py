"""Issue 46: the merged table's primary key is the union of the shards' keys
(lattice/keys.py), in the first shard's order then the columns the others add; where no
key can take every shard's rows the join has none, and `loses_key` says why the
coordinator refuses that. Table-driven, pure; the lattice laws over shards that widen
or drop their keys are tests/unit/test_join_laws.py's (tests/strategies.py `widen_key`)."""

from __future__ import annotations

import pytest

from lattice import diff, join, join_all, loses_key, parse_table

BASE = "id INT NOT NULL, a INT NOT NULL, b VARCHAR(10) NOT NULL, n INT NULL"


def table(key: str | None, columns: str = BASE):
    keyed = f", PRIMARY KEY ({key})" if key else ""
    return parse_table(f"CREATE TABLE t ({columns}{keyed})")


def key_of(t) -> tuple[str, ...] | None:
    return tuple(p.column for p in t.primary_key.parts) if t.primary_key else None


UNIONS = [
    # shards' keys, in shard order -> the merged key (None: no key can take every shard's rows)
    (["id", "id"], ("id",)),
    (["id", "id, a"], ("id", "a")),
    (["id, a", "id"], ("id", "a")),
    (["id, a", "id, b"], ("id", "a", "b")),
    (["id, b", "id, a"], ("id", "b", "a")),
    (["a, id", "id, a"], ("a", "id")),  # the same columns: the first shard's order
    (["id", "id, a", "id, b"], ("id", "a", "b")),
    (["id", None], None),  # a shard without a key
    (["id", "id, n"], None),  # n is nullable where it is no key column (a key makes it NOT NULL)
    (["id", "id, b(4)"], ("id", "b(4)")),
    (["id, b(4)", "id, b(6)"], None),  # one column, prefixes of two lengths
]


@pytest.mark.parametrize(("keys", "expected"), UNIONS, ids=[" | ".join(map(str, k)) for k, _ in UNIONS])
def test_the_merged_key_is_the_union_of_the_shards_keys(keys, expected):
    tables = []
    for k in keys:
        columns = BASE.replace("n INT NULL", "n INT NOT NULL") if k and "n" in k.split(", ") else BASE
        tables.append(table(k, columns))
    joined = join_all(tables)
    got = key_of(joined)
    if got is not None:
        got = tuple(f"{p.column}({p.length})" if p.length else p.column for p in joined.primary_key.parts)
    assert got == expected
    # in any order of the shards, the same table (a key's order is no part of equality)
    assert join_all(reversed(tables)) == joined


def test_a_key_widened_by_one_shard_is_changed_downstream_in_one_alter():
    before = table("id")
    after = join(before, table("id, a"))
    assert [s.sql for s in diff(before, after, target="shop.t")] == [
        "ALTER TABLE `shop`.`t` DROP PRIMARY KEY, ADD PRIMARY KEY (`id`,`a`)"
    ]


LOSSES = [
    # the shard's new key -> why the merged table (key id) would lose its key
    (None, "the shard's table has no primary key"),
    ("id, n", "the union of the keys (id, n) needs column n NOT NULL in every shard"),
]


@pytest.mark.parametrize(("key", "why"), LOSSES)
def test_loses_key_says_why(key, why):
    before = join(table("id"), table("id"))
    proposed = table(key, BASE.replace("n INT NULL", "n INT NOT NULL") if key else BASE)
    after = join(table("id"), proposed)
    assert after.primary_key is None
    reason = loses_key(before, after, proposed)
    assert reason == f"the merged table t would lose its primary key (id): {why}"


def test_loses_key_is_silent_where_the_table_keeps_or_never_had_a_key():
    keyed, bare = table("id"), table(None)
    assert loses_key(keyed, join(keyed, table("id, a"))) is None
    assert loses_key(bare, join(bare, keyed)) is None  # (the merged table had none: nothing lost)
    assert loses_key(None, keyed) is None


def test_a_column_a_shard_lacks_cannot_join_the_key():
    with_c = table("id, c", BASE + ", c INT NOT NULL")
    joined = join(table("id"), with_c)
    assert joined.primary_key is None
    assert loses_key(table("id"), joined, with_c).endswith("needs column c in every shard")


@pytest.mark.parametrize("first", ["c1", "C1"])
def test_a_key_part_is_spelled_as_its_joined_column(first):
    # DDL corpus (innodb-alter.test): one shard renames its key column in case only; the
    # server renames the key's part with it, so the join's key names the joined column.
    other = "C1" if first == "c1" else "c1"
    a = parse_table(f"CREATE TABLE t ({first} INT NOT NULL, PRIMARY KEY ({first}))")
    b = parse_table(f"CREATE TABLE t ({other} INT NOT NULL, PRIMARY KEY ({other}))")
    for joined in (join(a, b), join(b, a)):
        assert key_of(joined) == (joined.columns[0].name,)
        assert join(joined, a) == joined  # still the top of both
