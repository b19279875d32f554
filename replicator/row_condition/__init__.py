"""A row filter's condition (`filters.rows`, DM's expression filter): SQL text read
once with sqlglot (MySQL dialect) into a Python function of a row, which answers as
MariaDB's `SELECT (condition)` would on that row (replicator/row_values.py holds the
server's conversions). Two steps, as two errors are told at two times: `parse_condition`
refuses what no table could evaluate (a syntax error, a subquery, a function outside
the supported set, one whose value changes from call to call) when the config is read;
`Condition.compile` refuses a column the table does not have, when its schema is known
(`check`, the daemon's start, a backfill).

- `condition`: `Condition`, `parse_condition`, and a row of the stream's literals;
- `checks`: what a condition may use, checked when the config is read;
- `compiler`: the tree into closures, each kind of node by its module: `leaves` (columns,
  literals), `logic` (AND, OR, NOT, IS), `comparisons` (=, IN, BETWEEN, LIKE), `arithmetic`,
  `functions` (CONCAT ... CASE);
- `node`: a compiled node, the collation it carries, and `ConditionError`."""

from replicator.row_condition.condition import Condition, parse_condition, row_of_literals
from replicator.row_condition.node import ConditionError

__all__ = ["Condition", "ConditionError", "parse_condition", "row_of_literals"]
