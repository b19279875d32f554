"""Issue 46: every reason a shard pauses for ends with `; way out: ` and the commands that
let it go on (replicator/schema/way_out.py), for every kind of block a shard group makes,
as the coordinator decides them, and for the pauses the daemon makes itself."""

from __future__ import annotations

import re

import pytest

from replicator.daemon.ddl_path import refused_entry
from replicator.schema import way_out
from replicator.schema.coordinator import Coordinator
from replicator.schema.group import BlockKind
from replicator.schema.plan import Player
from replicator.shard_id import ShardId
from replicator.state.coordinator_store import InMemoryStore

BASE = "CREATE TABLE t (id INT PRIMARY KEY, a INT NOT NULL)"
S1, S2 = ShardId("s1", "db", "t1"), ShardId("s2", "db", "t2")
COMMAND = re.compile(r"`(shardctl|shardmerge) [^`]+`")


def group() -> Player:
    player = Player("shop.t", coordinator=Coordinator("shop.t", "mariadb", InMemoryStore()))
    player.start({S1: BASE, S2: BASE.replace("t (", "t2 (")})
    return player


def _way_out(reason: str) -> str:
    assert way_out.WAY_OUT in reason, reason
    return reason.split(way_out.WAY_OUT, 1)[1]


def _disable(player: Player) -> None:
    player.coordinator.disable_ddl_propagation()


# each kind of block, made as it is made upstream: the DDL of s1, and what to run first
BLOCKS = [
    ("conflict", None, "ALTER TABLE t1 MODIFY a DATETIME NOT NULL", "binlog skip --source s1 --table db.t1"),
    ("conflict", None, "ALTER TABLE t1 DROP PRIMARY KEY", "binlog skip --source s1 --table db.t1"),
    ("unsupported", None, "ALTER TABLE t1 ADD COLUMN b INTEGR", "set-schema --source s1 --table db.t1"),
    ("truncate", None, "TRUNCATE TABLE t1", "binlog skip --source s1 --table db.t1"),
    # (it printed `--target TARGET`: a placeholder, not a command to run as printed)
    ("waiting", _disable, "ALTER TABLE t1 ADD COLUMN b INT", "enable-ddl-propagation --target shop.t`"),
]


@pytest.mark.parametrize(("kind", "first", "ddl", "command"), BLOCKS, ids=[f"{b[0]}: {b[2]}" for b in BLOCKS])
def test_every_block_names_its_way_out(kind, first, ddl, command):
    player = group()
    if first is not None:
        first(player)
    decision = player.ddl(S1, ddl)
    block = player.coordinator.blocked[S1]
    assert block.kind == kind
    way = _way_out(block.reason)
    assert command in way and COMMAND.search(way), way
    assert block.reason.count(way_out.WAY_OUT) == 1
    # what the decision says, and what the daemon pauses the shard with, say it too
    assert way in decision.message or kind == "waiting"


def test_a_lost_key_names_the_table_the_shard_and_the_way_out():
    player = group()
    decision = player.ddl(S1, "ALTER TABLE t1 DROP PRIMARY KEY")
    assert decision.result == "conflict" and decision.downstream == ()
    reason = player.coordinator.blocked[S1].reason
    assert reason.startswith(
        "the merged table t would lose its primary key (id): the shard's table has no primary key"
    )
    assert "s1.db.t1 resumes by itself" in reason and "restore the key on s1.db.t1" in reason
    assert player.coordinator.blocked.keys() == {S1}  # the other shard goes on
    # the way out it names: the key back upstream resumes it
    assert player.ddl(S1, "ALTER TABLE t1 ADD PRIMARY KEY (id)").result == "resolved"
    assert not player.coordinator.blocked


def test_every_block_kind_has_a_way_out():
    for kind in BlockKind:
        assert COMMAND.search(_way_out(way_out.of_block(kind, S1, "why")))


def test_the_daemons_own_pauses_name_their_way_out():
    assert "`shardctl journal retry --target shop.t --seq 4`" in _way_out(refused_entry("shop.t", 4, "boom"))
    waits = refused_entry("shop.t", 5, "boom", waits_for=4)
    assert "`shardctl journal retry --target shop.t --seq 4`" in _way_out(waits)
    for way in (way_out.refused_row(S1), way_out.outside(S1), way_out.unreplayed(S1)):
        assert "--source s1 --table db.t1" in way and COMMAND.search(way)



def test_a_shard_held_twice_takes_the_way_out_each_prints():
    """A shard held by its group (a DDL we cannot follow) and by a journal entry the
    downstream refused (an earlier DDL of it; live stories 240011): the `binlog skip` its
    pause prints (its flags alone) takes the block; `binlog list` names the entry with its
    `--pos`, which takes the entry."""
    from replicator.api.blocked import BlockedDDL, Held, Wanted, choose

    reason = way_out.of_block(BlockKind.UNSUPPORTED, S1, "unsupported DDL: why")
    printed = re.search(r"`shardctl binlog skip ([^`]+)`", reason).group(1).split()
    assert printed == ["--source", "s1", "--table", "db.t1"], reason
    held = [
        BlockedDDL("shop.t", S1, Held.UNSUPPORTED, "mysql-bin.000001:200", "ALTER TABLE t1 ...", reason),
        BlockedDDL("shop.t", S1, Held.REFUSED, "mysql-bin.000001:100", "ALTER TABLE t1 MODIFY a SMALLINT",
                   "boom", seq=11),
    ]
    can = {Held.CONFLICT, Held.UNSUPPORTED, Held.REFUSED}
    assert choose(held, Wanted(source=printed[1], table=printed[3]), "binlog skip", can) is held[0]
    entry = re.search(r"`shardctl binlog skip ([^`]+)`", held[1].way_out()).group(1).split()
    assert entry == ["--source", "s1", "--table", "db.t1", "--pos", "mysql-bin.000001:100"]
    assert choose(held, Wanted(source=entry[1], table=entry[3], position=entry[5]), "binlog skip", can) is held[1]
    # two shards' blocks named by a target alone stay for the operator to name
    other = BlockedDDL("shop.t", S2, Held.CONFLICT, "mysql-bin.000001:300", "ALTER TABLE t2 ...", "why")
    with pytest.raises(Exception, match="2 blocked DDLs"):
        choose([held[0], other], Wanted(target="shop.t"), "binlog skip", can)
