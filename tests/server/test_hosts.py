"""The test hosts of issue 75's member tests (tests/hosts.py): a MariaDB server on one host
is reached from another over TCP, a host cut off from the network cannot reach it (its
connections time out) while the others still do, and healed it reaches it again."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.hosts import PREFIX, HostServer, Network, _ip

ROOT = Path(__file__).resolve().parent.parent.parent

QUERY = textwrap.dedent(
    """
    import sys, pymysql
    try:
        conn = pymysql.connect(host=sys.argv[1], port=3306, user="root", connect_timeout=2, read_timeout=3)
        with conn.cursor() as cur:
            cur.execute("SELECT @@server_id, SUBSTRING_INDEX(USER(), '@', -1)")
            print(*cur.fetchone())
    except pymysql.err.OperationalError as exc:
        print("unreachable", exc.args[0])
    """
)


def _query_from(host, address: str) -> str:
    done = subprocess.run(
        host.argv([sys.executable, "-c", QUERY, address]),
        capture_output=True, text=True, timeout=30, cwd=ROOT, check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def network():
    with Network() as net:
        yield net
    assert not [n for n in _ip("netns", "list").stdout.split() if n.startswith(net.tag)]


def test_a_server_on_one_host_is_reached_from_another_and_not_once_that_one_is_cut_off(network, tmp_path):
    db, app, other = network.host("db"), network.host("app"), network.host("other")
    server = HostServer(db, tmp_path, "down", "downstream", server_id=7)
    server.start()
    try:
        # over TCP from the app host's address, as the server sees it
        assert _query_from(app, db.address) == f"7 {app.address}"
        assert _query_from(other, db.address) == f"7 {other.address}"
        assert server.instance.execute("SELECT @@server_id") == [(7,)]  # (from the machine, through the bridge)
        network.cut(app)
        assert _query_from(app, db.address) == "unreachable 2003"  # (timed out: nothing refused it)
        assert _query_from(other, db.address) == f"7 {other.address}"
        network.heal(app)
        assert _query_from(app, db.address) == f"7 {app.address}"
    finally:
        server.stop()


def test_a_network_left_by_a_killed_run_is_removed_by_the_next():
    code = "from tests.hosts import Network; n = Network(); n.host('a'); print(n.tag, flush=True); import os; os._exit(0)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    tag = done.stdout.strip()
    assert tag.startswith(PREFIX)
    assert any(n.startswith(tag) for n in _ip("netns", "list").stdout.split())  # (left behind)
    with Network():
        assert not any(n.startswith(tag) for n in _ip("netns", "list").stdout.split())
        assert tag not in _ip("-o", "link").stdout
