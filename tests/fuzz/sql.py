"""Talking to the servers: statements, round trips, names in backquotes."""

from __future__ import annotations

from collections.abc import Sequence

from pymysql.constants import CLIENT

Statement = tuple[str, Sequence | None]  # SQL with %s marks, and their values


def quote_identifier(name: str) -> str:
    """A name in backquotes, a backquote in it doubled (MariaDB manual, "Identifier Names")."""
    return "`" + name.replace("`", "``") + "`"


def run(conn, statement: str, args: Sequence | None = None) -> tuple:
    with conn.cursor() as cur:
        cur.execute(statement, args)
        return cur.fetchall()


def run_all(conn, statements: Sequence[Statement]) -> list[tuple]:
    """The statements' rows, each statement's; in one round trip where the connection
    takes several statements at once (a story makes thousands of them: the fuzzer's time
    is mostly waiting for the server). The first one the server refuses raises its error,
    and the ones after it do not run."""
    if not conn.client_flag & CLIENT.MULTI_STATEMENTS:
        return [run(conn, sql, args) for sql, args in statements]
    with conn.cursor() as cur:
        cur.execute(";\n".join(cur.mogrify(sql, args) for sql, args in statements))
        results = [cur.fetchall()]
        while cur.nextset():
            results.append(cur.fetchall())
    return results
