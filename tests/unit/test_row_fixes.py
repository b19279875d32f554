"""When a shard's rows' value is set around the decision's DDL that changes the column's type
(`RowsFix.goes_before`): before it where the old type gives the value the text the new one
would, after it otherwise."""

from __future__ import annotations

import pytest

from lattice import Default, Flavor, Table, parse_table
from replicator.schema.row_fixes import RowsFix


def table(ctype: str) -> Table:
    return parse_table(f"CREATE TABLE t (id INT PRIMARY KEY, c1 {ctype})")


@pytest.mark.parametrize(("value", "was", "becomes", "before"), [
    # (L10: the rows hold '' fillers, which a SMALLINT takes only once they are set)
    ("5", "VARCHAR(10) NOT NULL DEFAULT ''", "SMALLINT NOT NULL", True),
    ("'x'", "VARCHAR(10) NOT NULL", "VARCHAR(30) NOT NULL", True),
    # (L77: a BIGINT's 0 written into a TIMESTAMP is '0000-00-00 00:00:00', which a string
    # made of it keeps; set after, it is '0')
    ("0", "TIMESTAMP NOT NULL", "VARCHAR(21) NOT NULL", False),
    ("0", "DATE NOT NULL", "VARCHAR(21) NOT NULL", False),
    ("7", "INT NOT NULL", "VARCHAR(21) NOT NULL", True),
    ("'abc'", "INT NOT NULL", "VARCHAR(21) NOT NULL", False),  # (no INT value)
    # (L78: strict mode refuses 'd' in a DATETIME(6); set after the DDL making it a string)
    ("'d'", "DATETIME(6) NOT NULL", "VARCHAR(255) NOT NULL", False),
    ("'d'", "TIME NOT NULL", "VARCHAR(255) NOT NULL", False),
    ("'2020-01-02'", "DATETIME(6) NOT NULL", "DATETIME(6) NULL", False),
    ("'2020-01-02 03:04:05'", "DATETIME NOT NULL", "DATETIME(6) NOT NULL", True),
    ("NULL", "INT NULL", "VARCHAR(21) NULL", True),
    ("NULL", "INT NOT NULL", "VARCHAR(21) NULL", False),
    ("3", "INT NOT NULL", "INT NOT NULL", False),  # (the DDL leaves its type)
])
def test_a_value_is_set_before_the_ddl_changing_its_columns_type_where_the_old_type_gives_it_its_text(
    value, was, becomes, before,
):
    fix = RowsFix("c1", ("UPDATE ...",), value=Default(value))
    assert fix.goes_before(table(was), table(becomes), Flavor.MARIADB) is before
