"""A shard's live state in the daemon (replicator/shard_flow.py)."""

from __future__ import annotations

import pytest

from replicator.shard_flow import Admission, ShardFlow, ShardFlows
from replicator.shard_id import ShardId
from replicator.state.pauses import Pause
from replicator.state.positions import Position

A, B, C = ShardId("s1", "db", "a"), ShardId("s1", "db", "b"), ShardId("s2", "db", "c")


def pause(shard: ShardId, file_seq: int, pos: int) -> Pause:
    position = Position(f"mysql-bin.{file_seq:06d}", pos)
    return Pause(shard, position, (file_seq, pos, 0), "because")


def test_a_change_read_again_is_one_routed_before():
    flow = ShardFlows()[A]
    assert not flow.read_before((1, 10, 0))
    flow.routed = (1, 10, 2)
    assert flow.read_before((1, 10, 2)) and flow.read_before((1, 4, 0))
    assert not flow.read_before((1, 10, 3)) and not flow.read_before((2, 4, 0))


def test_the_last_ddl_decided_only_moves_forward():
    flow = ShardFlows()[A]
    assert not flow.decided_before((1, 4, 0))
    flow.decided((1, 50, 0))
    flow.decided((1, 20, 0))  # an older one handled again after a rewind
    assert flow.ddl_done == (1, 50, 0)
    assert flow.decided_before((1, 20, 0)) and not flow.decided_before((1, 60, 0))


def test_a_pause_at_rows_before_ddls_decided_already_has_them_decided_again():
    # (a decision resumed it past its DDLs up to (1, 50, 0); read again, a row at (1, 20, 3)
    # paused it: that decision saved (1, 20, 3) as its DDL done, and the DDLs after it stack
    # on that pause as they are read, L67)
    flow = ShardFlows()[A]
    flow.decided((1, 50, 0))
    flow.decided((1, 20, 3), rows=True)
    assert flow.ddl_done == (1, 20, 3)
    assert not flow.decided_before((1, 30, 0)) and flow.decided_before((1, 10, 0))


def test_a_source_is_held_back_by_its_earliest_paused_shard_only():
    flows = ShardFlows()
    flows.restore({A: pause(A, 2, 300), B: pause(B, 1, 900), C: pause(C, 1, 4)}, {})
    assert flows.paused_from("s1") == (1, 900, 0)
    assert flows.paused_from("s2") == (1, 4, 0)
    assert flows.paused_from("s3") is None
    flows[B].pause = None
    assert flows.paused_from("s1") == (2, 300, 0)
    assert set(flows.pauses()) == {A, C} and flows.is_paused(A) and not flows.is_paused(B)


def test_a_restart_restores_pauses_and_decided_ddls():
    flows = ShardFlows()
    flows.restore({A: pause(A, 1, 4)}, {B: (3, 7, 0)})
    assert flows[A].paused and flows[B].ddl_done == (3, 7, 0) and not flows[B].paused


def test_a_groups_cleared_columns_replace_what_its_shards_had():
    flows = ShardFlows()
    flows.set_cleared([A, B], {A: ["old"], B: ["x", "y"]})
    flows.set_cleared([A, B], {B: ["y"]})  # A's rename finished
    assert (flows[A].cleared, flows[B].cleared) == ((), ("y",))


def test_naming_a_shard_does_not_make_it_known_to_get():
    flows = ShardFlows()
    assert flows.get(A) is None and not flows.is_paused(A)
    flows[A]
    assert flows.get(A) is not None


# (a shard paused from (1, 100, 0), its last change routed (1, 50, 0), its DDL decided up to
# (1, 40, 0), deletes filtered out): the change read, whether its table is in the group, was
# applied, its DDL holds the gate -> what becomes of it
ADMISSIONS = [
    ((1, 100, 0), True, False, False, "I", Admission.PAUSED),
    ((1, 200, 3), False, False, False, "I", Admission.PAUSED),  # (paused comes first)
    ((1, 99, 9), True, False, False, "I", Admission.SUBMIT),  # from before its pause: goes on
    ((1, 60, 0), False, False, False, "I", Admission.LEFT),
    ((1, 60, 0), False, False, True, "I", Admission.HELD),  # behind its DDL under way: its CREATE
    ((1, 60, 0), False, True, False, "I", Admission.GONE),  # applied before it left
    ((1, 30, 0), False, False, False, "I", Admission.GONE),  # before the DDL it left by
    ((1, 50, 0), True, False, False, "I", Admission.AGAIN),
    ((1, 10, 0), True, True, True, "U", Admission.AGAIN),
    ((1, 60, 0), True, False, False, "D", Admission.FILTERED),
    ((1, 60, 0), True, True, True, "D", Admission.FILTERED),  # (filtered before applied)
    ((1, 60, 0), True, True, False, "U", Admission.APPLIED),
    ((1, 60, 0), True, True, True, "U", Admission.APPLIED),  # (applied: not held either)
    ((1, 60, 0), True, False, True, "U", Admission.HELD),
    ((1, 60, 0), True, False, False, "U", Admission.SUBMIT),
]


class Answers:
    """The daemon's answers to admission's questions, and the questions asked, in order (each
    of the subject `c`)."""

    def __init__(self, in_group: bool, applied: bool, gate_closed: bool):
        self.answers = {"group": in_group, "applied": applied, "gate": gate_closed}
        self.asked: list[str] = []

    def _ask(self, name: str, subject) -> bool:
        self.asked.append(name)
        return self.answers[name]

    def in_group(self, subject) -> bool:
        return self._ask("group", subject)

    def applied(self, subject) -> bool:
        return self._ask("applied", subject)

    def gate_closed(self, subject) -> bool:
        return self._ask("gate", subject)


@pytest.mark.parametrize(("change", "in_group", "applied", "gate_closed", "op", "expected"), ADMISSIONS)
def test_what_becomes_of_a_change_read_for_a_shard(change, in_group, applied, gate_closed, op, expected):
    flow = ShardFlow(A, pause(A, 1, 100), routed=(1, 50, 0), ddl_done=(1, 40, 0), ignored=frozenset("D"))
    assert flow.admit(change, op, Answers(in_group, applied, gate_closed), change) is expected


def test_only_changes_taken_for_the_shard_count_as_routed():
    taken = {a for a in Admission if a.routed}
    assert taken == {Admission.FILTERED, Admission.APPLIED, Admission.HELD, Admission.SUBMIT}


def test_admission_asks_the_daemon_only_what_it_needs():
    paused = ShardFlow(A, pause(A, 1, 100))
    asks = Answers(True, False, False)
    assert paused.admit((1, 100, 0), "I", asks, "c") is Admission.PAUSED
    assert asks.asked == []
    running = ShardFlow(A)
    assert running.admit((1, 5, 0), "I", asks, "c") is Admission.SUBMIT
    assert asks.asked == ["group", "applied", "gate"]
    joining = ShardFlow(A)
    asks = Answers(False, False, True)
    assert joining.admit((1, 5, 0), "I", asks, "c") is Admission.HELD
    assert asks.asked == ["group", "gate", "applied", "gate"]
