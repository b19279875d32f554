"""A shard's row events with its extract values appended apply downstream as the rows they
carry plus those values (`replicator.source.row_extend`): real binlog events of the sandbox's
upstream (inserts, updates, deletes; NULLs; every width of null bitmap around a byte's end;
the column types the codec reads), extended and applied by a BINLOG statement into a table of
the shard's columns and three extract columns, then compared row by row with the shard."""

from __future__ import annotations

import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import FormatDescriptionEvent
from pymysqlreplication.row_event import DeleteRowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent

from lattice import Column, ColumnType, Family, parse_table
from replicator.shard_id import ShardId
from replicator.source.messages import RowEvent
from replicator.source.row_events import (
    BinlogFormat,
    EventCodec,
    binlog_statement,
    renamed_table_map,
    statement_ended,
)
from replicator.source.row_extend import (
    Extension,
    count_rows,
    extend_rows,
    extend_table_map,
    extended_map_columns,
    extended_table,
    skippers,
)
from replicator.source.rowcodec import MapColumn
from replicator.state.positions import event_end

EXTRACT = ColumnType(Family.STRING, "varchar", length=64, charset="utf8mb4", collation="utf8mb4_bin")
NAMES = ("_source", "_schema", "_table")
# (columns, rows): 5 columns make 8 bits with the extract ones, 6 make 9
TABLES = {
    "five": (
        "id INT PRIMARY KEY, a DECIMAL(10,2) NOT NULL, b VARCHAR(20), c DATETIME(3), d TEXT",
        ["(1, 1.5, 'x', '2024-01-02 03:04:05.678', 'long text')", "(2, -2.25, NULL, NULL, NULL)"],
    ),
    "six": (
        "id BIGINT PRIMARY KEY, a TINYINT, b SMALLINT UNSIGNED, c MEDIUMINT, d DOUBLE, "
        "e CHAR(3) CHARACTER SET latin1",
        ["(1, -1, 65535, -8388608, 1.5e300, 'abc')", "(2, NULL, NULL, NULL, NULL, NULL)"],
    ),
    "wide": (
        "id INT PRIMARY KEY, a DATE, b TIME(2), c TIMESTAMP(6) NULL, d YEAR, e BIT(9), "
        "f ENUM('p','q'), g SET('r','s'), h BLOB, i VARBINARY(300), j FLOAT",
        [
            "(1, '2024-02-29', '-12:34:56.78', '2024-01-01 00:00:00.000001', 2024, b'101010101', 'q', "
            "'r,s', x'00ff', REPEAT('z', 280), 0.5)",
            "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
        ],
    ),
}


def events(inst, schema: str, table: str) -> tuple[bytes, bytes, list[bytes], list[MapColumn]]:
    """The format description, the table map and the rows events of the table, as raw bytes."""
    stream = BinLogStreamReader(
        connection_settings={
            "host": inst.host,
            "port": inst.port,
            "user": inst.user,
            "passwd": inst.password,
        },
        server_id=991,
        blocking=False,
        only_events=[FormatDescriptionEvent, TableMapEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        only_schemas=None,
    )
    form, table_map, rows, columns = b"", b"", [], []
    try:
        for event in stream:
            raw = bytes(event.packet.packet._data[1:])
            if isinstance(event, FormatDescriptionEvent):
                form = raw
            elif isinstance(event, TableMapEvent) and (event.schema, event.table) == (schema, table):
                table_map, columns = raw, [MapColumn.of(c) for c in event.columns]
            elif getattr(event, "table", None) == table and getattr(event, "schema", None) == schema:
                rows.append(raw)
    finally:
        stream.close()
    return form, table_map, rows, columns


@pytest.mark.parametrize("name", sorted(TABLES))
def test_extended_events_apply_as_the_rows_and_their_extract_values(sandbox, scratch_db, name):
    up, down = sandbox.upstreams[0], sandbox.downstream
    columns, rows = TABLES[name]
    up.execute(
        [
            f"CREATE TABLE `{scratch_db}`.{name} ({columns})",
            f"INSERT INTO `{scratch_db}`.{name} VALUES {', '.join(rows)}",
            f"UPDATE `{scratch_db}`.{name} SET id = id + 10 WHERE id = 1",
            f"INSERT INTO `{scratch_db}`.{name} VALUES {rows[1].replace('(2,', '(3,', 1)}",
            f"DELETE FROM `{scratch_db}`.{name} WHERE id = 3",
        ]
    )
    extract = ", ".join(f"{n} VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL" for n in NAMES)
    down.execute(f"CREATE TABLE `{scratch_db}`.merged ({columns}, {extract})")
    form, table_map, raw_rows, map_columns = events(up, scratch_db, name)
    assert len(raw_rows) == 4
    extension = Extension.of(["s1", scratch_db, name], [Column(n, EXTRACT, nullable=False) for n in NAMES])
    checksum = BinlogFormat.of(form).checksum
    mapped = renamed_table_map(
        extend_table_map(table_map, checksum, extension), scratch_db, "merged", checksum
    )
    skips = skippers(map_columns)
    batch = [form]
    for raw in raw_rows:
        wide, _ = extend_rows(raw, checksum, skips, extension)
        batch += [mapped, statement_ended(wide, checksum)]
    down.execute(binlog_statement(batch))
    names = [c.split()[0] for c in columns.split(", ") if not c.startswith("PRIMARY")]
    shown = ", ".join(f"HEX(`{n}`)" for n in names)
    upstream = up.execute(
        f"SELECT {shown}, 's1', '{scratch_db}', '{name}' FROM `{scratch_db}`.{name} ORDER BY 1"
    )
    merged = down.execute(f"SELECT {shown}, {', '.join(NAMES)} FROM `{scratch_db}`.merged ORDER BY 1")
    assert merged == upstream and len(merged) == 2
    # decoded (an event the server refuses), an extended event's rows are the event's own,
    # the extract columns' values in the text the worker gives them where it decodes
    shard = parse_table(f"CREATE TABLE {name} ({columns})")
    extract_columns = [Column(n, EXTRACT, nullable=False) for n in NAMES]
    literals = ("'s1'", f"'{scratch_db}'", f"'{name}'")
    wide_codec = EventCodec.of(
        extended_table(shard, extract_columns), extended_map_columns(map_columns, extension), literals
    )
    plain = EventCodec.of(shard, map_columns)
    for n, raw in enumerate(raw_rows):
        wide, rows = extend_rows(raw, checksum, skips, extension)
        unit = RowEvent(
            (1, 4, event_end(n + 1)),
            ShardId("s1", scratch_db, name),
            "x.t",
            wide,
            mapped,
            BinlogFormat.of(form),
            wide_codec,
            (),
        )
        assert wide_codec.changes(unit) == [
            c._replace(
                columns=(*c.columns, *NAMES),
                values=None if c.values is None else (*c.values, *literals),
                before=None if c.before is None else (*c.before, *literals),
                before_columns=None if c.before_columns is None else (*c.before_columns, *NAMES),
            )
            for c in plain.changes(unit._replace(event=raw, codec=plain))
        ]
        # its rows counted without decoding them (an event applied as it is: query-status, metrics)
        assert (
            count_rows(raw, checksum, skips)
            == rows
            == len(plain.changes(unit._replace(event=raw, codec=plain)))
        )


def test_an_extract_column_other_than_a_varchar_or_a_value_too_long_is_not_extended():
    integer = ColumnType(Family.INTEGER, "int")
    assert Extension.of(["1"], [Column("_shard", integer, nullable=False)]) is None
    narrow = ColumnType(Family.STRING, "varchar", length=2, charset="utf8mb4")
    assert Extension.of(["s100"], [Column("_source", narrow, nullable=False)]) is None
    assert Extension.of(["s1"], [Column("_source", narrow, nullable=True)]) is None
