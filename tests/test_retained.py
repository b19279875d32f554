"""The type a filler (a partial column's default, given to rows of shards lacking the
column) is held in: the column's, except a time's fraction digits (seed 861757)."""

from __future__ import annotations

import pytest

from lattice import parse_table, render_type
from replicator.schema.retained import _filler_type


@pytest.mark.parametrize(
    ("definition", "held"),
    [
        ("DATETIME(6) DEFAULT '2020-01-02 03:04:05'", "datetime"),
        ("DATETIME(6) DEFAULT '2020-01-02 03:04:05.120000'", "datetime(2)"),
        ("TIMESTAMP(3) NULL DEFAULT '2020-01-02 03:04:05.999'", "timestamp(3)"),
        ("TIME(4) DEFAULT '12:00:00.5'", "time(1)"),
        ("DATETIME(6) DEFAULT '2020-01-02'", "datetime"),
        ("DATETIME DEFAULT '2020-01-02 03:04:05'", "datetime"),
        ("ENUM('x','y') DEFAULT 'y'", "enum('x','y')"),
        ("DECIMAL(12,4) DEFAULT 1.5", "decimal(12,4)"),
    ],
)
def test_a_filler_is_held_in_what_its_value_needs_of_the_type(definition: str, held: str):
    column = parse_table(f"CREATE TABLE t (id INT PRIMARY KEY, c {definition})").column("c")
    assert render_type(_filler_type(column.type, column.default.sql)).lower() == held
