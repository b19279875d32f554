"""Issue 46, row filters: a filter's condition our evaluator (replicator/row_condition/) cannot
evaluate is refused, naming why; one row per condition. That the conditions it takes answer as
MariaDB does: tests/server/test_row_condition_against_mariadb.py."""

from __future__ import annotations

import pytest

from lattice import parse_table
from replicator.row_condition import ConditionError, parse_condition

# (what, condition, what the refusal names)
REFUSED = [
    ("a function of the clock", "NOW() > created", "NOW() is not deterministic"),
    ("a random number", "RAND() < 0.5", "RAND() is not deterministic"),
    ("a subquery", "a IN (SELECT id FROM x)", "subquery"),
    ("a function we do not evaluate", "SOUNDEX(a) = 'x'", "function SOUNDEX() is not supported"),
    ("a second statement", "a = 1; DROP TABLE t", "one condition"),
    ("a comment", "a = 1 -- trailing", "comments are not allowed"),
    ("not SQL", "a = ", "not a SQL condition"),
    ("a column with its table's name", "t.a = 1", "without its table name"),
]


@pytest.mark.parametrize(("condition", "names"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_a_condition_that_cannot_be_evaluated_is_refused_naming_why(condition, names):
    with pytest.raises(ConditionError, match=names.replace("(", r"\(").replace(")", r"\)")):
        parse_condition(condition)


def test_an_unknown_column_is_named_with_the_columns_there_are():
    table = parse_table("CREATE TABLE t (id INT PRIMARY KEY, status VARCHAR(10))")
    with pytest.raises(ConditionError, match=r"no column 'state' in t \(its columns: id, status\)"):
        parse_condition("state = 'x'").compile(table)
