"""A row is read with the tracked table only where the binlog's table map has each column
in that type (`replicator.source.decode.binlog_type_problem`): else the shard pauses, as a
row that does not fit (a skipped DDL that changed a type: issue 76's live stories)."""

from __future__ import annotations

import pytest
from pymysqlreplication.column import Column as MapColumn
from pymysqlreplication.constants import FIELD_TYPE as F

from lattice import parse_table
from replicator.source.decode import SchemaMismatch, binlog_type_problem, patch_table_map


def tracked(sql_type: str):
    return parse_table(f"CREATE TABLE t (c {sql_type})").columns[0].type


# (the binlog's field type and metadata, the tracked type, what the pause says or None)
CASES = [
    ({"type": F.LONG}, "INT", None),
    ({"type": F.LONG}, "INT UNSIGNED", None),
    ({"type": F.LONGLONG}, "INT", "bigint, the tracked schema int"),
    ({"type": F.TINY}, "TINYINT(1)", None),
    ({"type": F.TIMESTAMP2, "fsp": 6}, "TIMESTAMP(6) NULL", None),
    ({"type": F.TIMESTAMP2, "fsp": 6}, "TIMESTAMP(3) NULL", "timestamp(6), the tracked schema timestamp(3)"),
    ({"type": F.TIMESTAMP}, "TIMESTAMP NULL", None),  # (the old format: no fsp)
    ({"type": F.DATETIME2, "fsp": 0}, "DATE", "datetime, the tracked schema date"),
    ({"type": F.NEWDECIMAL, "precision": 10, "decimals": 0}, "DECIMAL", None),
    ({"type": F.NEWDECIMAL, "precision": 5, "decimals": 2}, "DECIMAL(6,2)", "decimal(5,2), the tracked schema"),
    ({"type": F.DOUBLE}, "FLOAT(30)", None),
    ({"type": F.VARCHAR, "max_length": 60}, "VARCHAR(255)", None),  # (a length is not compared)
    ({"type": F.VARCHAR, "max_length": 60}, "INT", "varchar, the tracked schema int"),
    ({"type": F.STRING}, "INET6", None),
    ({"type": F.BLOB, "length_size": 4}, "JSON", None),
    ({"type": F.BLOB, "length_size": 2}, "TEXT", None),
    ({"type": F.ENUM}, "SET('a','b')", "enum, the tracked schema set"),
    ({"type": F.BIT, "bits": 8}, "BIT(8)", None),
    ({"type": F.BIT, "bits": 8}, "BIT(4)", "bit(8), the tracked schema bit(4)"),
]


@pytest.mark.parametrize(("binlog", "sql_type", "problem"), CASES, ids=[f"{c[1]}-{c[0]['type']}" for c in CASES])
def test_a_column_is_read_with_the_tracked_type_only_where_the_binlog_has_it(binlog, sql_type, problem):
    got = binlog_type_problem(MapColumn(**binlog), tracked(sql_type))
    if problem is None:
        assert got is None
    else:
        assert got is not None and got.startswith(problem), got


# (the columns that take NULL in the binlog's table map, as its bitmap: bit i for column i;
# the tracked table; what the pause says or None)
NULLS = [
    (0b00, "id INT NOT NULL, c TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP", None),
    (0b10, "id INT NOT NULL, c TIMESTAMP NULL DEFAULT NULL", None),
    (0b00, "id INT NOT NULL, c TIMESTAMP NULL DEFAULT NULL", None),  # (tracked NULL-able: any value fits)
    # a skipped DDL made it NULL-able upstream: a NULL read into the NOT NULL column the daemon
    # keeps would be written downstream as the current time (live stories 120046)
    (0b10, "id INT NOT NULL, c TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP",
     "the binlog has column 'c' of t as NULL-able, the tracked schema timestamp NOT NULL"),
]


@pytest.mark.parametrize(("bits", "columns", "problem"), NULLS)
def test_a_column_that_takes_null_in_the_binlog_is_not_read_into_a_tracked_not_null_one(bits, columns, problem):
    table = parse_table(f"CREATE TABLE t ({columns}, PRIMARY KEY (id))")
    cols = [MapColumn(type=F.LONG), MapColumn(type=F.TIMESTAMP2, fsp=0)]
    for col in cols:
        col.name = None
    if problem is None:
        patch_table_map(cols, table, bytes([bits]))
        return
    with pytest.raises(SchemaMismatch) as found:
        patch_table_map(cols, table, bytes([bits]))
    assert str(found.value).startswith(problem), found.value


def test_a_table_map_read_again_keeps_its_null_bitmap():
    """A table map whose bytes were parsed before comes as a `LightTableMap` (after a rewind,
    the same map again): it carries the bitmap too, so the worker compares it as the first
    time (live stories 230031: a skipped DDL that made a column NULL-able paused the shard
    only after a restart, its rows since the skip written downstream meanwhile)."""
    from replicator.source.binlog_compat import LightTableMap

    header = bytes(19)
    known = {"table_id": 7, "schema": "db", "table": "t", "columns": [], "table_obj": object(),
             "null_bitmask": bytes([0b10])}
    event = LightTableMap(header, known)
    assert getattr(event, "null_bitmask", None) == bytes([0b10])


def test_our_type_codes_are_the_binlogs_as_pymysqlreplication_numbers_them():
    """`replicator.source.field_types` (which spares the daemon importing pymysqlreplication)
    names every code the library does, with its number."""
    from replicator.source import field_types

    def codes(module) -> dict[str, int]:
        return {name: getattr(module, name) for name in dir(module) if name.isupper()}

    assert codes(field_types) == codes(F)
