"""Where a resumed shard's rows of its paused time end (`Pauses.resume`): the rows up to
there go through its scratch window (or are read again row by row), under the tables it
had while paused; the rows after are live. Its DDLs decided while it was paused bound it
from below: after a restart its source may not have read up to its pause yet when a
decision resumes it (live stories L45, seed 47823: its rows went as live ones, naming a
column it had dropped since, 1054)."""

from __future__ import annotations

import pytest

from lattice import Flavor
from replicator.daemon.pauses import paused_until
from replicator.shard_id import ShardId
from replicator.source.source_state import SourceState
from replicator.state.pauses import Pause
from replicator.state.positions import Position

SHARD = ShardId("s1", "db", "t2")
PAUSE = Pause(SHARD, Position("mysql-bin.000001", 9507129), (1, 9507129, 1), "a conflict")

CASES = [
    # (rule, furthest read, the shard's last DDL decided, until)
    ("read past its pause: as far as read", 9600000, None, (1, 9600000)),
    ("and past its DDLs decided while paused", 9600000, (1, 9520665, 0), (1, 9600000)),
    ("read short of its pause (a restart): past its last DDL decided while paused", 9504435,
     (1, 9529807, 0), (1, 9529808)),
    ("nothing read since a restart: the same", None, (1, 9529807, 0), (1, 9529808)),
    ("a DDL decided before its pause is not of its paused time", 9504435, (1, 9506954, 0), (1, 9504435)),
    ("nothing read, no DDL while paused: nothing of its paused time known", None, (1, 9506954, 0), None),
]


@pytest.mark.parametrize(("rule", "read", "ddl_done", "until"), CASES, ids=[c[0] for c in CASES])
def test_where_a_resumed_shards_paused_time_ends(rule, read, ddl_done, until):
    state = SourceState("s1", Flavor.MARIADB)
    state.furthest = Position("mysql-bin.000001", read) if read is not None else None
    assert paused_until(state, ddl_done, PAUSE) == until
