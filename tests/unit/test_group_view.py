"""The view of a shard group other threads read (replicator/schema/group.py): made after
each decision, never changed. Decisions hammered on one thread while another reads
the views as routing and the admin API do: every view read is whole (its blocked
shards are its shards', their blocks its own, its version never goes back), and
nothing read raises, though the coordinator's own dicts change size all along."""

from __future__ import annotations

import random
import threading
from types import SimpleNamespace

import pytest

from lattice import render_table
from replicator.api.operations import binlog_schemas, ddl_state, differences
from replicator.schema.coordinator import Coordinator
from replicator.schema.group import GroupView, Version
from replicator.schema.plan import Player
from replicator.shard_id import ShardId
from replicator.state.coordinator_store import InMemoryStore

BASE = "CREATE TABLE t (id INT PRIMARY KEY, a INT NOT NULL)"
SHARDS = [ShardId(f"s{i % 3}", "db", f"t{i}") for i in range(30)]


def _statement(rnd: random.Random, shard: ShardId, n: int) -> str:
    """One shard's next DDL: columns added and dropped, a type others cannot join (a
    conflict that pauses it), the table dropped and created again (the group's dicts
    of shards shrink and grow)."""
    t = shard.table
    return rnd.choice(
        [
            f"ALTER TABLE {t} ADD COLUMN c{n} INT",
            f"ALTER TABLE {t} ADD COLUMN IF NOT EXISTS b VARCHAR(10)",
            f"ALTER TABLE {t} DROP COLUMN IF EXISTS b",
            f"ALTER TABLE {t} MODIFY a DATETIME NOT NULL",  # no join with INT: a conflict
            f"ALTER TABLE {t} MODIFY a BIGINT NOT NULL",
            f"DROP TABLE {t}",
            f"CREATE TABLE IF NOT EXISTS {t} (id INT PRIMARY KEY, a INT NOT NULL)",
        ]
    )


class _Daemon(SimpleNamespace):
    """What the admin API's reads use of a daemon: the views (the one the reader took, so
    its answers can be held against that view), pauses, the journal."""

    def views(self) -> dict[str, GroupView]:
        return {"shop.t": self.view}


def test_views_read_while_decisions_are_made_are_whole():
    player = Player("shop.t", coordinator=Coordinator("shop.t", "mariadb", InMemoryStore()))
    player.start({shard: BASE for shard in SHARDS})
    coordinator = player.coordinator
    holder = SimpleNamespace(view=coordinator.view())
    daemon = _Daemon(
        view=holder.view,
        flows={},
        flavor=coordinator.flavor,
        meta=SimpleNamespace(journal=SimpleNamespace(pending=lambda target: [])),
    )
    done = threading.Event()
    problems: list[str] = []
    reads = 0

    def decide() -> None:
        rnd = random.Random(43)
        try:
            for n in range(600):
                shard = rnd.choice(SHARDS)
                player.ddl(shard, _statement(rnd, shard, n))
                holder.view = coordinator.view()  # as the group's executor publishes it
        except Exception as exc:  # (the decisions themselves must not fail either)
            problems.append(f"deciding: {type(exc).__name__}: {exc}")
        finally:
            done.set()

    def read() -> None:
        nonlocal reads
        last = Version(0, 0)
        try:
            while not done.is_set() or reads < 50:
                daemon.view = view = holder.view
                if not set(view.blocked) <= set(view.shards):
                    problems.append(f"blocked {sorted(map(str, view.blocked))} not all of the group's shards")
                for shard, block in view.blocked.items():
                    if view.shards[shard].block is not block:
                        problems.append(f"{shard}: its block is not the group's")
                if view.version < last:
                    problems.append(f"version {view.version} after {last}")
                last = view.version
                # what routing reads, and the admin API's answers from the same view
                assert all(shard in view.shards for shard in view.blocked)
                state = ddl_state(daemon, "shop.t")
                assert set(state["shards"]) == {str(s) for s in view.shards}
                binlog_schemas(daemon)
                if view.target is not None:
                    render_table(view.target, "mariadb")
                    for shard_view in view.shards.values():
                        if shard_view.current is not None:
                            differences(shard_view.current, view.target)
                reads += 1
        except Exception as exc:
            problems.append(f"reading: {type(exc).__name__}: {exc}")
            done.set()

    threads = [threading.Thread(target=decide), threading.Thread(target=read)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not problems, problems[:5]
    assert reads >= 50
    # the hammering did what it is for: shards left and came back, some were blocked
    assert coordinator.group.history, "no decisions were made"


def test_a_view_cannot_be_changed_by_its_readers():
    coordinator = Coordinator("shop.t", "mariadb", InMemoryStore())
    player = Player("shop.t", coordinator=coordinator)
    player.start({SHARDS[0]: BASE})
    view = coordinator.view()
    for mapping in (view.shards, view.blocked, view.cleared, view.columns, view.extract_columns):
        with pytest.raises(TypeError):
            mapping[SHARDS[1]] = None  # type: ignore[index]
    player.ddl(SHARDS[0], "ALTER TABLE t0 ADD COLUMN b INT")
    assert view.target is not None and view.target.column("b") is None  # the old view stays as it was
    assert coordinator.view().target.column("b") is not None
