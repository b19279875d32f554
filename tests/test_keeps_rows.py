"""`keeps_rows(old, new)`: every row valid in old is valid in new, which makes a
version bump minor (seeds 000, 001). Table-driven cases, then the property that the
join keeps the rows of each side."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings

from lattice import Flavor, JoinConflict, join, keeps_rows, parse_table
from tests.strategies import is_valid, related_tables

BASE = "id INT PRIMARY KEY, a INT NOT NULL"

CASES = [
    # (old columns, new columns, every old row fits the new table)
    (BASE, f"{BASE}, x INT NULL", True),  # an extra nullable column (issue 12 defect)
    (BASE, f"{BASE}, x INT NOT NULL DEFAULT 3", True),
    (BASE, f"{BASE}, x INT NOT NULL", False),  # rows without x are refused
    (BASE, f"{BASE}, x INT AS (a + 1) VIRTUAL", True),
    (BASE, "id INT PRIMARY KEY, a BIGINT NOT NULL", True),  # widened
    (BASE, "id INT PRIMARY KEY, a SMALLINT NOT NULL", False),  # narrowed
    (BASE, "id INT PRIMARY KEY, a INT NULL", True),  # relaxed
    ("id INT PRIMARY KEY, a INT NULL", BASE, False),  # tightened
    (BASE, "id INT PRIMARY KEY", False),  # a dropped column: its values have nowhere to go
    (BASE, "id INT PRIMARY KEY, a INT NOT NULL DEFAULT 0", True),  # a default where none was
    ("id INT PRIMARY KEY, a INT NULL", "id INT PRIMARY KEY, a INT NULL DEFAULT 0", False),  # NULL -> 0
    ("id INT PRIMARY KEY, a INT NOT NULL DEFAULT 1", BASE, False),  # rows leaving a out are refused
    (BASE, f"{BASE}, KEY ka (a)", True),  # a plain index accepts every row
    (f"{BASE}, KEY ka (a)", BASE, True),
    (BASE, f"{BASE}, UNIQUE KEY ua (a)", False),  # a new unique key may refuse old rows
    (f"{BASE}, UNIQUE KEY ua (a)", BASE, True),
    (f"{BASE}, b INT, UNIQUE KEY ua (a)", f"{BASE}, b INT, UNIQUE KEY uab (a, b)", True),
    (f"{BASE}, b INT, UNIQUE KEY uab (a, b)", f"{BASE}, b INT, UNIQUE KEY ua (a)", False),
    (BASE, f"{BASE}, CONSTRAINT c CHECK (a > 0)", False),
    (f"{BASE}, CONSTRAINT c CHECK (a > 0)", BASE, True),
    ("id INT PRIMARY KEY, v VARCHAR(10)", "id INT PRIMARY KEY, v VARCHAR(20)", True),
    ("id INT PRIMARY KEY, v VARCHAR(20)", "id INT PRIMARY KEY, v VARCHAR(10)", False),
]


@pytest.mark.parametrize(("old", "new", "kept"), CASES)
def test_keeps_rows(old, new, kept):
    a = parse_table(f"CREATE TABLE t ({old})")
    b = parse_table(f"CREATE TABLE t ({new})")
    assert keeps_rows(a, b) is kept


@pytest.mark.parametrize("flavor", [f.value for f in Flavor])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables=related_tables(2))
def test_the_join_keeps_the_rows_of_both_sides(flavor, tables):
    assume(all(is_valid(t) for t in tables))
    a, b = tables
    joined = join(a, b, flavor)
    assume(not isinstance(joined, JoinConflict))
    assert keeps_rows(a, joined, flavor) and keeps_rows(b, joined, flavor)
    assert keeps_rows(a, a, flavor)
