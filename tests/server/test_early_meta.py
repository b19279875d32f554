"""The meta schema made ready while `shardmerge run` imports the daemon
(`replicator/apply/early_meta.py`), against a real MariaDB."""

from __future__ import annotations

import socket

from replicator.apply.early_meta import EarlyMeta
from replicator.apply.meta import SCHEMA_SQL
from replicator.sandbox import Sandbox
from replicator.state.db import _table_of

TABLES = {_table_of(s) for s in SCHEMA_SQL}


def down(sandbox: Sandbox, **changes) -> dict:
    d = sandbox.downstream
    return {"host": d.host, "port": d.port, "user": d.user, "password": d.password, **changes}


def tables(sandbox: Sandbox, schema: str) -> set[str]:
    rows = sandbox.downstream.execute(
        f"SELECT LOWER(TABLE_NAME) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{schema}'"
    )
    return {r[0] for r in rows}


def test_a_first_start_finds_every_table_made_and_a_restart_finds_them_there(sandbox):
    sandbox.downstream.execute("DROP DATABASE IF EXISTS early_meta")
    assert EarlyMeta.begin(down(sandbox), "early_meta", "t").ready() is True
    assert tables(sandbox, "early_meta") == TABLES
    assert EarlyMeta.begin(down(sandbox), "early_meta", "t").ready() is True
    assert tables(sandbox, "early_meta") == TABLES


def test_a_downstream_not_reached_leaves_it_to_the_start_and_raises_nothing(sandbox):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert EarlyMeta.begin(down(sandbox, port=port), "early_meta_x", "t").ready() is False


def test_a_refused_login_leaves_it_to_the_start(sandbox):
    assert EarlyMeta.begin(down(sandbox, password="wrong"), "early_meta_y", "t").ready() is False
    assert tables(sandbox, "early_meta_y") == set()
