"""Issue 46, row filters: a filter's condition our evaluator (replicator/row_condition/) cannot
evaluate is refused, naming why; one row per condition. That the conditions it takes answer as
MariaDB does: tests/server/test_row_condition_against_mariadb.py."""

from __future__ import annotations

import pytest

from lattice import parse_table
from replicator.row_condition import ConditionError, parse_condition


@pytest.mark.parametrize(
    ("condition", "names"),
    [
        ("NOW() > created", "NOW() is not deterministic"),
        ("RAND() < 0.5", "RAND() is not deterministic"),
        ("a IN (SELECT id FROM x)", "subquery"),
        ("SOUNDEX(a) = 'x'", "function SOUNDEX() is not supported"),
        ("a = 1; DROP TABLE t", "one condition"),
        ("a = 1 -- trailing", "comments are not allowed"),
        ("a = ", "not a SQL condition"),
        ("t.a = 1", "without its table name"),
    ],
)
def test_a_condition_that_cannot_be_evaluated_is_refused_naming_why(condition, names):
    with pytest.raises(ConditionError, match=names.replace("(", r"\(").replace(")", r"\)")):
        parse_condition(condition)


def test_an_unknown_column_is_named_with_the_columns_there_are():
    table = parse_table("CREATE TABLE t (id INT PRIMARY KEY, status VARCHAR(10))")
    with pytest.raises(ConditionError, match=r"no column 'state' in t \(its columns: id, status\)"):
        parse_condition("state = 'x'").compile(table)
