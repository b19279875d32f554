"""Members of one task (issue 75, `shardmerge run --member NAME`): daemons that share its
sources, each reading its own; the one holding the lease coordinates and gives the sources
out. Rows flow throughout: a member that joins takes a source from the busiest, one that is
killed has its source taken by another within the lease's time, and at the end the
downstream equals the shards (0 lost, 0 extra, 0 different)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hosts import Host, Network, through_relays
from tests.replication import REPO, ReplicationTask, SideDaemon, free_port
from tests.tcp_proxy import Proxy
from tests.traffic import Writer

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]

CREATE = (
    "CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, note VARCHAR(20)) "
    "DEFAULT CHARSET=utf8mb4"
)
TTL = 3.0


class Member(SideDaemon):
    """A daemon of the task run as a member (on a test host: `on` and its `config`)."""

    def __init__(self, task: ReplicationTask, name: str, on: Host | None = None, config: Path | None = None,
                 env: dict[str, str] | None = None):
        super().__init__(task, f"member-{name}", ("--member", name), config, on.argv if on is not None else None,
                         env)


class Crew:
    """A task with a short lease and the members started in it: at the test's end every one
    still running is killed and the task cleaned up (`crew`)."""

    def __init__(self, task: ReplicationTask):
        self.task, self.started = task, []

    def member(self, name: str, on: Host | None = None, config: Path | None = None,
               env: dict[str, str] | None = None) -> Member:
        started = Member(self.task, name, on, config, env)
        self.started.append(started)
        return started


@pytest.fixture
def crew(sandbox, tmp_path):
    made = Crew(ReplicationTask(sandbox, tmp_path, CREATE, options=f"  lease_ttl: {TTL}\n"))
    yield made
    for member in made.started:
        member.kill()
    made.task.cleanup()


def owners(task: ReplicationTask) -> dict[str, str]:
    rows = task.sandbox.downstream.execute(
        f"SELECT source, member FROM `{task.meta_schema}`.source_owner WHERE task = '{task.name}'"
    )
    return {str(s): str(m) for s, m in rows}


def wait_owners(task: ReplicationTask, wanted: dict[str, str], timeout: float) -> float:
    started = time.monotonic()
    while owners(task) != wanted:
        assert time.monotonic() - started < timeout, f"sources read by {owners(task)}, not {wanted}"
        time.sleep(0.1)
    return time.monotonic() - started


def test_members_share_the_sources_and_take_a_killed_ones_with_no_row_lost(crew):
    task = crew.task
    with Writer(task) as writer:
        a = crew.member("a")
        a.wait_for("member a (epoch 1) coordinates the task and reads s1, s2", timeout=60)
        a.wait_for(" running: ", timeout=60)
        b = crew.member("b")
        # b joins: a gives it a source (a reads two, b none), and starts again with the other
        # (the lease, given up as a starts again, may go to b: either coordinates then)
        wait_owners(task, {"s1": "a", "s2": "b"}, timeout=30)
        b.wait_for(" running: ", timeout=60)
        a.wait_for(" running: ", timeout=60, count=2)
        # (a, asked to hand s2 over, drained first: b reads on where a stopped and met no stream
        # of a's still open; read again in safe mode, at most the transaction a's worker was
        # in when it stopped, its rows applied but not its end)
        assert "handed over s2 to b (drained: read on from here)" in a.text(), a.text()[-3000:]
        first = b.text().split(" running: ")[0]
        assert "4052" not in first, first[-3000:]
        top = re.search(r"source s2: safe mode till it passes its highest checkpoint (\d+):(\d+)#", first)
        start = re.search(r"source s2: reading from \S+\.0*(\d+):(\d+)", first)
        assert start is not None, first[-3000:]
        assert top is None or top.groups() == start.groups(), first[-3000:]
        shown = subprocess.run(
            [sys.executable, "-m", "replicator.cli.shardmerge", "status", "--config", str(task.config_path)],
            capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, check=True,
        ).stdout
        assert re.search(r"^member a \(epoch \d+\): reads s1\nmember b \(epoch \d+\): reads s2$", shown, re.M), shown
        time.sleep(3)
        runs = a.text().count(" running: ")
        b.kill()
        # a takes s2 (and the lease, if b held it) once b's rows expired, and starts again
        took = wait_owners(task, {"s1": "a", "s2": "a"}, timeout=60)
        assert took < TTL + 10, f"s2 was given to a after {took:.1f}s"
        a.wait_for(" running: ", timeout=60, count=runs + 1)
        assert "coordinates the task and reads s1, s2" in a.text().split(" running: ")[-2]
        time.sleep(2)
    assert not writer.failures, writer.failures[:3]
    task.wait_in_sync(timeout=120)
    assert task.difference() is None
    assert a.stop() == 0


RESTART = "(StandingChanged: "  # (a member's log, each time its standing has it start again)
STARTS_AGAIN = "; starting again in "  # (each time it starts again, for whatever reason: a handover,
# a connection the coordinator ended while it was cut off)


def two_members(crew: Crew, env: dict[str, str] | None = None) -> tuple[Member, Member]:
    """Members a and b running, a coordinating and reading s1, b reading s2 (a joined first:
    it read both, and started again with s1 once b joined); `env`: more of a's environment."""
    task = crew.task
    a = crew.member("a", env=env)
    a.wait_for(" running: ", timeout=60)
    b = crew.member("b")
    wait_owners(task, {"s1": "a", "s2": "b"}, timeout=30)
    b.wait_for(" running: ", timeout=60)
    a.wait_for(" running: ", timeout=60, count=2)
    return a, b


def test_a_ddl_read_by_a_member_that_does_not_coordinate_is_decided_by_the_coordinator(crew):
    """The member sends its shard's DDL through the schema queue and holds that shard's rows
    behind it (its source's other shard goes on); the coordinator decides it and runs the
    downstream DDL once, and answers; the member reads the group again as the decision left
    it, without starting again (a start again held every shard of its sources for about a
    second), and the shard's rows after the DDL arrive, in its new column. The other member's
    shards' DDLs move the group too: it reads it again, and does not start again either."""
    task = crew.task
    a, b = two_members(crew)
    restarts = b.text().count(RESTART)
    altered, _sibling = [s for s in task.shards if task.source_of(s[0]) == "s2"]
    task.sql(altered, "ALTER TABLE {t} ADD COLUMN extra INT NULL")
    task.sql(altered, "INSERT INTO {t} (id, amount, note, extra) VALUES (1, 1.5, 'after', 7)")
    for shard in task.shards:
        if shard != altered:
            task.sql(shard, "INSERT INTO {t} (id, amount, note) VALUES (1, 1.5, 'after')")
    b.wait_for("waits for the coordinator's decision (member b does not coordinate)", timeout=30)
    a.wait_for(f"shard {task.shard_id(altered)}: its DDL at", timeout=30)
    b.wait_for(f"shard {task.shard_id(altered)}: the coordinator decided its DDL at", timeout=30)
    task.wait_in_sync(timeout=60)
    assert task.downstream_table().column("extra") is not None
    assert task.sandbox.downstream.execute(
        f"SELECT extra FROM `{task.target_db}`.orders WHERE _table = '{altered[2]}'"
    ) == [(7,)]
    for n, shard in enumerate(s for s in task.shards if task.source_of(s[0]) == "s1"):  # (a's)
        task.sql(shard, f"ALTER TABLE {{t}} ADD COLUMN x{n} INT NULL")
        task.sql(shard, f"INSERT INTO {{t}} (id, amount, note, x{n}) VALUES (2, 2.5, 'x', {n})")
    task.sql(altered, "INSERT INTO {t} (id, amount, note, extra) VALUES (2, 2.5, 'later', 8)")
    task.wait_in_sync(timeout=60)
    assert b.text().count(RESTART) == restarts, b.text()[-3000:]
    queued = f"SELECT COUNT(*) FROM `{task.meta_schema}`.schema_queue WHERE task = '{task.name}'"
    deadline = time.monotonic() + 10
    while task.sandbox.downstream.execute(queued) != [(0,)]:  # (answered, then taken by the member)
        assert time.monotonic() < deadline, "the answered entry stayed in the schema queue"
        time.sleep(0.2)
    assert b.stop() == 0 and a.stop() == 0


def test_a_ddl_the_downstream_refuses_pauses_its_shard_on_its_member_once(crew):
    """The coordinator's decision of another member's DDL fails (the downstream refuses its
    statement): the shard is paused, saved with the answer, naming the journal entry; its
    member starts again once and holds it paused, not sending the DDL again for ever."""
    task = crew.task
    a, b = two_members(crew)
    altered, _sibling = [s for s in task.shards if task.source_of(s[0]) == "s2"]
    # (by hand, downstream: a column of that name the shard's ADD cannot add)
    task.sandbox.downstream.execute(f"ALTER TABLE `{task.target_db}`.orders ADD COLUMN extra VARCHAR(3) NULL")
    task.sql(altered, "ALTER TABLE {t} ADD COLUMN extra INT NULL")
    restarts = b.text().count(RESTART)
    b.wait_for("waits for the coordinator's decision (member b does not coordinate)", timeout=30)
    # (by the answer, or by the decision's count of the group moving: whichever b sees first)
    b.wait_for(RESTART, timeout=30, count=restarts + 1)
    runs = b.text().count(" running: ")
    b.wait_for(" running: ", timeout=30, count=runs + 1)
    time.sleep(4)
    assert b.text().count(RESTART) == restarts + 1, "member b started again more than once"
    (reason,) = task.sandbox.downstream.execute(
        f"SELECT reason FROM `{task.meta_schema}`.pause WHERE task = '{task.name}' "
        f"AND shard = '{task.shard_id(altered)}'"
    )[0]
    assert f"downstream DDL of {task.target_db}.orders (journal entry" in reason, reason
    assert b.stop() == 0 and a.stop() == 0


def test_the_coordinator_killed_in_another_members_ddl_leaves_it_run_once_and_its_rows_flowing(crew):
    """a, the coordinator, dies right after the downstream ran the statement of b's DDL (before
    its journal entry is done): b takes the lease within its time and finishes that decision
    (the journal's entry found done downstream, not run twice), the rows b's shard wrote
    after the DDL arrive in its column, and a, started again, joins as a member."""
    task = crew.task
    a, b = two_members(crew, env={"SHARDMERGE_CRASH_AT": "ddl_statement_ran"})
    altered = next(s for s in task.shards if task.source_of(s[0]) == "s2")
    task.sql(altered, "ALTER TABLE {t} ADD COLUMN extra INT NULL")
    task.sql(altered, "INSERT INTO {t} (id, amount, note, extra) VALUES (1, 1.5, 'after', 7)")
    assert a.process.wait(timeout=60) == -9, a.text()[-3000:]
    b.wait_for("coordinates the task", timeout=60)
    task.wait_in_sync(timeout=90)
    assert task.downstream_table().column("extra") is not None
    assert task.sandbox.downstream.execute(
        f"SELECT extra FROM `{task.target_db}`.orders WHERE _table = '{altered[2]}'"
    ) == [(7,)]
    added = task.sandbox.downstream.execute(
        f"SELECT COUNT(*) FROM `{task.meta_schema}`.ddl_journal WHERE statements LIKE '%ADD COLUMN `extra`%'"
    )
    assert added == [(1,)], added
    queued = f"SELECT COUNT(*) FROM `{task.meta_schema}`.schema_queue WHERE task = '{task.name}'"
    assert task.sandbox.downstream.execute(queued) == [(0,)]  # (b reads s2 itself now: taken)
    again = crew.member("a")
    deadline = time.monotonic() + 60
    while sorted(owners(task).values()) != ["a", "b"]:  # (b gives it one of its two)
        assert time.monotonic() < deadline, f"sources read by {owners(task)}"
        time.sleep(0.2)
    again.wait_for(" running: ", timeout=60)
    time.sleep(2)
    assert task.difference() is None
    assert b.stop() == 0 and again.stop() == 0


def with_admin(task: ReplicationTask, name: str) -> tuple[Path, str]:
    """The task's config for member `name` with an admin API of its own, and its address."""
    port = free_port()
    path = task.config_path.with_name(f"{task.name}-{name}.yaml")
    path.write_text(task.config_path.read_text().replace("admin:\n  port: 0\n", f"admin:\n  port: {port}\n"))
    return path, f"http://127.0.0.1:{port}"


def shardctl(addr: str, *args: str) -> subprocess.CompletedProcess:
    """`shardctl --addr addr args`, again for up to 10 s while no daemon answers there (a member
    starting again serves its admin API anew, a moment later)."""
    deadline = time.monotonic() + 10
    while True:
        done = subprocess.run([sys.executable, "-m", "replicator.cli.shardctl", "--addr", addr, *args],
                              capture_output=True, text=True, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
        if "no shardmerge daemon answers" not in done.stderr or time.monotonic() > deadline:
            return done
        time.sleep(0.5)


def test_shardctl_lists_the_members_moves_a_source_and_forgets_one_stopped(crew):
    """`shardctl members` on any member's API: a reading s1, b reading s2, one coordinating;
    `move` gives s2 to a, for good, under traffic (the balance gives b s1 instead, and never
    s2 back); a live member is not removed (the way named); stopped, its source goes to a,
    and removed, the list no longer has it. The downstream ends equal to the shards."""
    task = crew.task
    (config_a, api_a), (config_b, api_b) = with_admin(task, "a"), with_admin(task, "b")
    with Writer(task) as writer:
        a = crew.member("a", config=config_a)
        a.wait_for(" running: ", timeout=60)
        b = crew.member("b", config=config_b)
        wait_owners(task, {"s1": "a", "s2": "b"}, timeout=30)
        b.wait_for(" running: ", timeout=60)
        # (a starts again once it gave b a source, giving up the lease: either may hold it then)
        deadline, wanted = time.monotonic() + 30, {"a": (True, ["s1"]), "b": (True, ["s2"])}
        while True:
            listed = json.loads(shardctl(api_b, "--json", "members").stdout)["members"]
            coordinating = [n for n, m in listed.items() if m["coordinates"]]
            if {n: (m["live"], m["sources"]) for n, m in listed.items()} == wanted and len(coordinating) == 1:
                break
            assert time.monotonic() < deadline, listed
            time.sleep(0.5)
        (coordinator,) = coordinating
        time.sleep(2)  # (each member has said its lag: once a second)
        shown = shardctl(api_b, "query-status").stdout
        said = {"a": "coordinates, " if coordinator == "a" else "", "b": "coordinates, " if coordinator == "b" else ""}
        assert re.search(rf"^members: a \({said['a']}reads s1, lag [\d.]+s\); b \({said['b']}reads s2, lag [\d.]+s\)$",
                         shown, re.M), shown
        metrics = shardctl({"a": api_a, "b": api_b}[coordinator], "metrics").stdout
        assert re.search(
            rf'^shardmerge_member{{epoch="\d+",member="{coordinator}",role="coordinator",task="{task.name}"}} 1',
            metrics, re.M), metrics[-2000:]
        moved = shardctl(api_b, "members", "move", "--source", "s2", "--to", "a")
        assert moved.returncode == 0 and "s2: moved to member a" in moved.stdout, moved.stdout + moved.stderr
        # (and the balance gives b the source a has not been given: s1)
        wait_owners(task, {"s1": "b", "s2": "a"}, timeout=30)
        time.sleep(3)
        assert owners(task) == {"s1": "b", "s2": "a"}, "the balance gave the moved source back"
        refused = shardctl(api_a, "members", "remove", "--member", "b")
        assert refused.returncode != 0 and "member b is live: stop it first" in refused.stderr, refused.stderr
        assert b.stop() == 0
        wait_owners(task, {"s1": "a", "s2": "a"}, timeout=30)
        removed = shardctl(api_a, "members", "remove", "--member", "b")
        assert removed.returncode == 0, removed.stderr
        text = shardctl(api_a, "members").stdout
        assert "moved by the operator: s2 to a" in text and "\nb " not in text, text
        time.sleep(2)
    assert not writer.failures, writer.failures[:3]
    task.wait_in_sync(timeout=120)
    assert task.difference() is None
    assert a.stop() == 0


def test_a_member_starting_again_keeps_its_admin_api_answering(crew):
    """A source moved to member b and back starts it again (twice or more): its admin API's
    address never refuses a connection meanwhile; asked while b starts again, it answers 503
    with Retry-After, and a plain `shardctl query-status` (no retry of the test's) waits for it
    and succeeds every time."""
    task = crew.task
    (config_a, _), (config_b, api_b) = with_admin(task, "a"), with_admin(task, "b")
    a = crew.member("a", config=config_a)
    a.wait_for(" running: ", timeout=60)
    b = crew.member("b", config=config_b)
    wait_owners(task, {"s1": "a", "s2": "b"}, timeout=30)
    b.wait_for(" running: ", timeout=60)
    seen: dict[str, int] = {}
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            try:
                with urllib.request.urlopen(api_b + "/api/v1/status", timeout=5):
                    kind = "served"
            except urllib.error.HTTPError as exc:
                kind = f"{exc.code} Retry-After {exc.headers.get('Retry-After')}"
            except (urllib.error.URLError, OSError):
                kind = "refused"
            seen[kind] = seen.get(kind, 0) + 1
            time.sleep(0.02)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    for to in ("b", "a"):
        restarts, runs = b.text().count(STARTS_AGAIN), b.text().count(" running: ")
        moved = shardctl(api_b, "members", "move", "--source", "s1", "--to", to)
        assert moved.returncode == 0, moved.stdout + moved.stderr
        b.wait_for(STARTS_AGAIN, timeout=60, count=restarts + 1)
        b.wait_for(" running: ", timeout=60, count=runs + 1)
    asked = [
        subprocess.run([sys.executable, "-m", "replicator.cli.shardctl", "--addr", api_b, "query-status"],
                       capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                       timeout=60)
        for _ in range(3)
    ]
    time.sleep(1)
    stop.set()
    poller.join()
    assert all(done.returncode == 0 for done in asked), [done.stderr for done in asked]
    assert "refused" not in seen and seen.get("served") and seen.get("503 Retry-After 1"), seen
    assert set(seen) <= {"served", "503 Retry-After 1"}, seen
    task.wait_in_sync(timeout=60)
    assert task.difference() is None
    assert a.stop() == 0 and b.stop() == 0


@contextlib.contextmanager
def relayed(crew: Crew) -> Iterator[tuple[Network, Path]]:
    """Test hosts, and the task's config as a member on one of them reads it (every server
    through a relay); at the end the crew's members are killed, then the relays closed and
    the hosts removed."""
    relays: list[Proxy] = []
    with Network() as network:
        try:
            yield network, through_relays(crew.task, network, relays)
        finally:
            for member in crew.started:
                member.kill()
            for relay in relays:
                relay.close()


def test_a_member_cut_off_from_the_network_commits_nothing_once_its_source_is_taken(crew):
    """Member b, on a host of its own, is cut off from every server under traffic (in a
    transaction, may be: its session holds its locks on the server for hours, unless ended):
    within the lease's time a takes its source and reads on from b's last commit; healed, b
    commits nothing more of it (its writes fenced: it no longer reads it), starts again, and
    joins in a new epoch. The downstream ends equal to the shards."""
    task = crew.task
    with relayed(crew) as (network, config):
        host = network.host("b")
        with Writer(task) as writer:
            a = crew.member("a")
            a.wait_for(" running: ", timeout=60)
            b = crew.member("b", on=host, config=config)
            wait_owners(task, {"s1": "a", "s2": "b"}, timeout=30)
            b.wait_for(" running: ", timeout=60)
            time.sleep(3)
            network.cut(host)
            took = wait_owners(task, {"s1": "a", "s2": "a"}, timeout=60)
            assert took < TTL + 10, f"s2 was given to a after {took:.1f}s"
            a.wait_for("coordinates the task and reads s1, s2", timeout=30)
            time.sleep(3)
            restarts = b.text().count(STARTS_AGAIN)
            network.heal(host)
            b.wait_for(STARTS_AGAIN, timeout=60, count=restarts + 1)
            b.wait_for(" running: ", timeout=60, count=2)  # (b joined again, took a source from a)
            time.sleep(3)
        assert not writer.failures, writer.failures[:3]
        task.wait_in_sync(timeout=120)
        assert task.difference() is None
        assert b.stop() == 0 and a.stop() == 0


def test_the_coordinator_cut_off_and_healed_starts_again_as_a_member_and_does_not_end(crew):
    """Member a coordinates from a host of its own and is cut off under traffic with a DDL
    read by b meanwhile: b takes the lease within its time and decides the DDL; healed, a
    finds its lease another's (or its connection dead, whichever comes first), commits
    nothing of its own (its transactions fail their fence) and starts again as a member, its process going on (it ended
    before, as a daemon that lost its task does: chaos with partitions); it takes a source
    again by the balance. The downstream ends equal to the shards."""
    task = crew.task
    with relayed(crew) as (network, config):
        host = network.host("a")
        with Writer(task) as writer:
            a = crew.member("a", on=host, config=config)
            a.wait_for(" running: ", timeout=60)
            b = crew.member("b")
            wait_owners(task, {"s1": "a", "s2": "b"}, timeout=30)
            a.wait_for("coordinates the task and reads s1", timeout=60)
            time.sleep(2)
            network.cut(host)
            b.wait_for("coordinates the task", timeout=60)
            altered = next(s for s in task.shards if task.source_of(s[0]) == "s2")
            task.sql(altered, "ALTER TABLE {t} ADD INDEX by_note (note)")  # (the writer's rows fit)
            time.sleep(2)
            before = max(int(e) for e in re.findall(r"member a \(epoch (\d+)\)", a.text()))
            network.heal(host)
            # Healed, a starts again by whichever it meets first: its renewer finding the lease
            # another's ("starts again, as a member") or a write of its main loop losing the
            # connection the cut left dead (crash-only, "this daemon starts again"); either way
            # it joins in a newer epoch as a member, not as the coordinator
            joined = a.wait_for_match(
                r"member a \(epoch (\d+)\)( coordinates the task and)? reads", 60, lambda m: int(m[1]) > before
            )
            assert joined[2] is None, a.text()[-3000:]
            a.wait_for(" running: ", timeout=60, count=a.text().count(" running: ") + 1)
            time.sleep(3)
            assert a.process.poll() is None, a.text()[-3000:]
        assert not writer.failures, writer.failures[:3]
        task.wait_in_sync(timeout=120)
        assert task.difference() is None
        b.wait_for("ADD INDEX by_note (note) -> ", timeout=10)  # (decided by b, coordinating)
        assert "this daemon stops now" not in a.text(), a.text()[-3000:]
        assert a.stop() == 0 and b.stop() == 0
