"""The thread that renews a row (`replicator/state/renewal.py`): it tells `gone` once the row
is another's, but not where it was stopped while its call hung (chaos with partitions: a
member's renewal of the epoch before, stuck cut off, found its row the new epoch's once healed
and ended the process that had joined again)."""

from __future__ import annotations

import threading

import pytest

from replicator.state.renewal import Gone, Renewal


@pytest.mark.parametrize("stopped_meanwhile", [False, True])
def test_a_renewal_tells_gone_unless_it_was_stopped_while_its_call_hung(stopped_meanwhile):
    calling, answer = threading.Event(), threading.Event()
    told: list[Gone] = []

    def renew() -> None:
        calling.set()
        answer.wait(5)
        raise Gone("the row is another's")

    renewal = Renewal("member", "member a", 0.01, renew, gone=told.append)
    renewal.start()
    assert calling.wait(5)
    if stopped_meanwhile:
        renewal.stop()
    answer.set()
    renewal.join(5)
    assert not renewal.is_alive()
    assert [str(g) for g in told] == ([] if stopped_meanwhile else ["the row is another's"])
