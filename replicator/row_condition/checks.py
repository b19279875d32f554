"""What a condition may use, checked node by node when the config is read, before any table
is known: no comments, subqueries, placeholders, table names on columns, or functions whose
value changes from call to call."""

from __future__ import annotations

from sqlglot import exp

from replicator.row_condition.node import ConditionError

_NONDETERMINISTIC = frozenset(
    (
        "NOW",
        "SYSDATE",
        "RAND",
        "UUID",
        "UUID_SHORT",
        "CURDATE",
        "CURTIME",
        "CURRENT_DATE",
        "CURRENT_TIME",
        "CURRENT_TIMESTAMP",
        "LOCALTIME",
        "LOCALTIMESTAMP",
        "UTC_DATE",
        "UTC_TIME",
        "UTC_TIMESTAMP",
        "UNIX_TIMESTAMP",
        "CONNECTION_ID",
        "USER",
        "CURRENT_USER",
        "SESSION_USER",
        "SYSTEM_USER",
        "LAST_INSERT_ID",
        "ROW_COUNT",
        "FOUND_ROWS",
        "SLEEP",
        "BENCHMARK",
        "DATABASE",
        "SCHEMA",
        "VERSION",
    )
)
_NONDETERMINISTIC_NODES = (
    exp.Rand,
    exp.Uuid,
    exp.CurrentTimestamp,
    exp.CurrentDate,
    exp.CurrentTime,
    exp.CurrentUser,
)


def check_node(node: exp.Expression) -> None:
    if node.comments:
        raise ConditionError("comments are not allowed in a condition; remove them")
    if isinstance(node, exp.Subquery | exp.Select | exp.Exists | exp.Any | exp.All):
        raise ConditionError("a subquery is not supported: a condition reads only the row itself")
    if isinstance(node, exp.Command | exp.Placeholder | exp.Parameter | exp.SessionParameter):
        raise ConditionError(f"not a condition: {node.sql(dialect='mysql')}")
    name = function_name(node)
    if isinstance(node, _NONDETERMINISTIC_NODES) or name in _NONDETERMINISTIC:
        raise ConditionError(
            f"{name or node.key.upper()}() is not deterministic: the stream, the backfill and "
            "verify would each decide differently; use the row's own columns"
        )
    if isinstance(node, exp.Column) and node.table:
        raise ConditionError(f"write {node.name} without its table name ({node.sql(dialect='mysql')})")


def function_name(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Anonymous):
        return str(node.this).upper()
    if isinstance(node, exp.Func):
        return node.sql_name().upper()
    return None
