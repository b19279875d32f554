"""How one downstream ALTER TABLE runs on a big table without stopping the rows.

The coordinator's statements say what the table becomes, not how the server gets there.
On a table of millions of rows that matters: a change the server can make instantly (a
column added, a default changed) takes milliseconds; one it makes in place with LOCK=NONE
(an index added) takes minutes but lets other writes through; one that needs a copy of the
table (INT to BIGINT) holds every write for the whole copy. So each ALTER is tried with
`ALGORITHM=INSTANT`, then `ALGORITHM=INPLACE, LOCK=NONE`: the server refuses at once an
algorithm it cannot use (errors 1845 and 1846, before it touches a row). What neither can do
is a copy: run by pt-online-schema-change (`options.copy_ddl: pt-osc`, the default where it
is installed), which copies the rows in chunks while triggers carry the writes made
meanwhile and swaps the tables at the end, or by the server itself (`copy_ddl: blocking`),
which holds the writes while it copies. TiDB's DDL is online by design: its ALTERs go as
they are.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import pymysql

from lattice import Flavor, quote_identifier
from replicator.server_rules import server_rules

log = logging.getLogger("shardmerge.ddl")

NOT_SUPPORTED = {1845, 1846}  # ER_ALTER_OPERATION_NOT_SUPPORTED(_REASON): that algorithm cannot
ONLINE = ("ALGORITHM=INSTANT", "ALGORITHM=INPLACE, LOCK=NONE")
PT_OSC = "pt-online-schema-change"


class CopyFailed(RuntimeError):
    """pt-online-schema-change could not make the change (its own words in the message)."""


@dataclass(frozen=True)
class Ran:
    """How an ALTER ran: `instant`, `inplace`, `pt-osc`, `copy` (the server's, blocking) or
    `as is` (not an ALTER TABLE, or a flavor without algorithms); and how long it took."""

    how: str
    seconds: float


def is_alter(statement: str) -> bool:
    return statement.lstrip()[:11].upper() == "ALTER TABLE"


def online_ways(flavor: Flavor) -> tuple[str, ...]:
    """The algorithm clauses to try, best first (none for TiDB, whose DDL is online)."""
    return ONLINE if server_rules(flavor).online_alter_clauses else ()


def run_alter(
    conn,
    statement: str,
    flavor: Flavor,
    copy_mode: str,
    server: dict,
    target: str,
    on_copy: Callable[[str], None] = lambda how: None,
) -> Ran:
    """Run one downstream ALTER the most online way the server has for it. `on_copy` hears
    that a copy starts (and how), before it does: the caller lets the rows through then."""
    started = time.perf_counter()
    if not is_alter(statement):
        _execute(conn, statement)
        return Ran("as is", time.perf_counter() - started)
    for clause in online_ways(flavor):
        try:
            _execute(conn, f"{statement}, {clause}")
        except pymysql.err.MySQLError as exc:
            if exc.args and exc.args[0] in NOT_SUPPORTED:
                continue
            raise
        return Ran(clause.split(",")[0].split("=")[1].lower(), time.perf_counter() - started)
    if not online_ways(flavor):
        _execute(conn, statement)
        return Ran("as is", time.perf_counter() - started)
    if copy_mode == "pt-osc" and shutil.which(PT_OSC):
        on_copy("pt-osc")
        copy_online(statement, server, target)
        return Ran("pt-osc", time.perf_counter() - started)
    on_copy("copy")
    log.warning(
        "%s: %s needs a copy of the table, which holds its writes until done "
        "(options.copy_ddl: pt-osc runs it online where pt-online-schema-change is installed)",
        target,
        statement[:200],
    )
    _execute(conn, statement)
    return Ran("copy", time.perf_counter() - started)


def _execute(conn, sql: str) -> None:
    with conn.cursor() as cur:
        cur.execute(sql)


def alter_specs(statement: str, target: str) -> str:
    """What follows `ALTER TABLE <target>` in one of the coordinator's statements."""
    schema, table = target.split(".", 1)
    head = f"ALTER TABLE {quote_identifier(schema)}.{quote_identifier(table)} "
    if not statement.startswith(head):
        raise CopyFailed(f"not an ALTER of {target}: {statement[:200]}")
    return statement[len(head) :]


def copy_online(statement: str, server: dict, target: str) -> None:
    """The ALTER by pt-online-schema-change: the rows copied in chunks while triggers carry
    the writes made meanwhile, then the tables swapped. Credentials go in a file of the
    owner's only (not on a command line); the tool dies with the daemon (PDEATHSIG), and what
    a killed run left (its triggers, its new table) is cleared before the next."""
    schema, table = target.split(".", 1)
    clear_leftovers(server, schema, table)
    with tempfile.NamedTemporaryFile("w", prefix="shardmerge-ptosc-", suffix=".cnf", delete=True) as cnf:
        os.chmod(cnf.name, 0o600)
        cnf.write("[client]\n")
        cnf.write(f"user={server.get('user', 'root')}\npassword={server.get('password') or ''}\n")
        cnf.flush()
        dsn = f"F={cnf.name},h={server['host']},P={server['port']},D={schema},t={table}"
        command = [
            PT_OSC,
            "--alter",
            alter_specs(statement, target),
            "--execute",
            "--recursion-method=none",  # the downstream's own replicas are not ours to watch
            "--no-check-alter",  # renames are the coordinator's: its CHANGE COLUMN keeps the values
            "--no-check-unique-key-change",
            "--chunk-time=0.5",
            "--set-vars=lock_wait_timeout=5",
            "--tries=swap_tables:60:1,drop_triggers:60:1,create_triggers:60:1",
            dsn,
        ]
        done = subprocess.run(command, capture_output=True, text=True, preexec_fn=_die_with_parent)
    if done.returncode != 0:
        # its reason, not its progress lines (which start with a timestamp)
        lines = [line.strip() for line in (done.stderr + "\n" + done.stdout).splitlines() if line.strip()]
        reasons = [line for line in lines if not line[:4].isdigit()] or lines
        # the error's own lines first (`Error altering new table ...: DBD::mysql::db do
        # failed: ...`), then its last words
        errors = [line for line in reasons if "rror" in line or "failed" in line]
        said = " ".join([*errors[:3], *[line for line in reasons[-3:] if line not in errors[:3]]])
        raise CopyFailed(f"pt-online-schema-change failed on {target} (exit {done.returncode}): {said}")


def clear_leftovers(server: dict, schema: str, table: str) -> None:
    """Drop the triggers and the new table a pt-online-schema-change killed midway left."""
    from replicator.servers import connect_downstream  # (the executor's factory: TLS and all)

    q = quote_identifier
    with contextlib.closing(connect_downstream(server)) as conn, conn.cursor() as cur:
        for kind in ("ins", "upd", "del"):
            cur.execute(f"DROP TRIGGER IF EXISTS {q(schema)}.{q(f'pt_osc_{schema}_{table}_{kind}')}")
        cur.execute(f"DROP TABLE IF EXISTS {q(schema)}.{q(f'_{table}_new')}")


def _die_with_parent() -> None:
    """(In the child, before exec.) SIGTERM when the daemon dies, so no copy outlives it."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
