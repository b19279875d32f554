"""Our row codec against python-mysql-replication, on a real binlog: the same rows
events decoded both ways must write the same rows. Every column family the codec
handles, with edge values: extremes, NULLs, negative times with fractions, zero
dates, 65-digit decimals, BINARY padding, empty sets, multi-byte text."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent

from lattice import Table, parse_table
from replicator.source import binlog_compat
from replicator.source.decode import Encoder, patch_table_map
from replicator.source.rowcodec import RowCodec, Unsupported, present_columns, rows_body

binlog_compat.install()

COLUMNS = {
    "ti": "TINYINT",
    "tu": "TINYINT UNSIGNED",
    "si": "SMALLINT",
    "su": "SMALLINT UNSIGNED",
    "mi": "MEDIUMINT",
    "mu": "MEDIUMINT UNSIGNED",
    "ii": "INT",
    "iu": "INT UNSIGNED",
    "bi": "BIGINT",
    "bu": "BIGINT UNSIGNED",
    "d0": "DECIMAL(10,0)",
    "d1": "DECIMAL(12,3)",
    "d2": "DECIMAL(65,30)",
    "d3": "DECIMAL(5,5) UNSIGNED",
    "fl": "FLOAT",
    "db": "DOUBLE",
    "b1": "BIT(1)",
    "b2": "BIT(13)",
    "ch": "CHAR(5)",
    "vc": "VARCHAR(300)",
    "vl": "VARCHAR(10) CHARACTER SET latin1",
    "v3": "VARCHAR(20) CHARACTER SET utf8mb3",
    "bn": "BINARY(4)",
    "vb": "VARBINARY(10)",
    "tt": "TINYTEXT",
    "tx": "TEXT",
    "mt": "MEDIUMTEXT",
    "bl": "BLOB",
    "en": "ENUM('a','b','c')",
    "st": "SET('x','y','z')",
    "yr": "YEAR",
    "dt": "DATE",
    "t0": "TIME",
    "t3": "TIME(3)",
    "t6": "TIME(6)",
    "t1": "TIME(1)",
    "dt0": "DATETIME",
    "dt2": "DATETIME(2)",
    "dt6": "DATETIME(6)",
    "ts0": "TIMESTAMP NULL",
    "ts4": "TIMESTAMP(4) NULL",
    "js": "JSON",
    "pt": "POINT",
}

TEMPORAL = [
    c for c, t in COLUMNS.items() if t.split("(")[0].split(" ")[0] in ("TIME", "DATETIME", "TIMESTAMP")
]


def value(name: str, sql_type: str, rng: random.Random):
    if rng.random() < 0.1 and name not in ("id",):
        return None
    t = sql_type.split("(")[0].split(" ")[0]
    unsigned = "UNSIGNED" in sql_type
    bits = {"TINYINT": 8, "SMALLINT": 16, "MEDIUMINT": 24, "INT": 32, "BIGINT": 64}
    if t in bits:
        b = bits[t]
        lo, hi = (0, 2**b - 1) if unsigned else (-(2 ** (b - 1)), 2 ** (b - 1) - 1)
        return rng.choice([lo, hi, 0, 1, -1 if lo < 0 else 2, rng.randint(lo, hi)])
    if t == "DECIMAL":
        p, s = (int(x) for x in sql_type[sql_type.index("(") + 1 : sql_type.index(")")].split(","))
        digits = "".join(rng.choice("0123456789") for _ in range(p - s))
        frac = "".join(rng.choice("0123456789") for _ in range(s))
        text = (digits or "0") + ("." + frac if s else "")
        sign = "" if unsigned or rng.random() < 0.5 else "-"
        return Decimal(rng.choice([sign + text, "0", sign + "1" + ("." + "0" * (s - 1) + "1" if s else "")]))
    if t in ("FLOAT", "DOUBLE"):
        return rng.choice([0.0, -1.5, 3.4e38 if t == "FLOAT" else 1.7e308, rng.uniform(-1e6, 1e6)])
    if t == "BIT":
        width = int(sql_type[4:-1])
        return rng.randint(0, 2**width - 1)
    if t in ("CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT"):
        limit = {"CHAR": 5, "TINYTEXT": 60, "TEXT": 400, "MEDIUMTEXT": 800}.get(t)
        if t == "VARCHAR":
            limit = int(sql_type[8 : sql_type.index(")")])
        alphabet = "abcXYZ '\\" + (
            "é" if "latin1" in sql_type else "éжκ中😀" if "utf8mb3" not in sql_type else "éжκ中"
        )
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, limit)))
    if t in ("BINARY", "VARBINARY", "BLOB"):
        limit = 4 if t == "BINARY" else 10 if t == "VARBINARY" else 300
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, limit)))
    if t == "ENUM":
        return rng.choice(["a", "b", "c"])
    if t == "SET":
        return ",".join(m for m in "xyz" if rng.random() < 0.5)
    if t == "YEAR":
        return rng.choice([1901, 2155, 2024, 0])
    if t == "DATE":
        return rng.choice(["0000-00-00", "1000-01-01", "9999-12-31", "2024-02-29"])
    if t == "TIME":
        return rng.choice(
            [
                "-838:59:59",
                "838:59:59",
                "-00:00:00.5",
                "-01:02:03.25",
                "12:34:56.789012",
                "00:00:00",
                "-00:00:01.000001",
            ]
        )
    if t == "DATETIME":
        return rng.choice(
            [
                "0000-00-00 00:00:00",
                "1000-01-01 00:00:00",
                "9999-12-31 23:59:59.99",
                "2024-02-29 12:30:45.123456",
            ]
        )
    if t == "TIMESTAMP":
        return rng.choice(
            [
                "1970-01-01 00:00:01",
                "2038-01-19 03:14:07.9999",
                "2024-02-29 12:30:45.1234",
                "0000-00-00 00:00:00",
            ]
        )
    if t == "JSON":
        return rng.choice(['{"a": [1, 2]}', "null", '"x"', "[]"])
    if t == "POINT":
        return None
    raise AssertionError(t)


def create(table: str) -> str:
    cols = ", ".join(f"{n} {t}" for n, t in COLUMNS.items())
    return f"CREATE TABLE {table} (id INT PRIMARY KEY, {cols}) DEFAULT CHARSET=utf8mb4"


def decode_both(port: int, file: str, pos: int, tracked: Table):
    """The rows of every rows event, decoded by the library (+ Encoder) and by RowCodec."""
    settings = {"host": "127.0.0.1", "port": port, "user": "root", "passwd": ""}
    events = [TableMapEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent]
    results = {}
    for way, server_id in (("library", 9901), ("codec", 9902)):
        stream = BinLogStreamReader(
            settings,
            server_id=server_id,
            resume_stream=True,
            log_file=file,
            log_pos=pos,
            blocking=False,
            is_mariadb=False,
            only_events=events,
        )
        images: list[dict] = []
        codec = None
        encoder = Encoder(tracked)
        for event in stream:
            if isinstance(event, TableMapEvent):
                patch_table_map(event.columns, tracked)
                codec = RowCodec(tracked, event.columns)
                continue
            if way == "library":
                for row in event.rows:
                    for k in ("values", "before_values", "after_values"):
                        if k in row:
                            images.append(
                                encoder.encode(row[k], row.get(k.replace("values", "none_sources")))
                            )
            else:
                body = rows_body(event)
                present = present_columns(event.columns_present_bitmap, event.number_of_columns)
                second = (
                    present_columns(event.columns_present_bitmap2, event.number_of_columns)
                    if isinstance(event, UpdateRowsEvent)
                    else None
                )
                at = 0
                while at < len(body):
                    image, at = codec.image(body, at, present)
                    images.append(dict(zip(codec.columns_of(present), image, strict=True)))
                    if second is not None:
                        image, at = codec.image(body, at, second)
                        images.append(dict(zip(codec.columns_of(second), image, strict=True)))
        stream.close()
        results[way] = images
    return results["library"], results["codec"]


def test_codec_writes_what_the_library_decodes(sandbox, scratch_db):
    up, down = sandbox.upstreams[0], sandbox.downstream
    up.execute(create(f"`{scratch_db}`.t"))
    tracked = parse_table(up.execute(f"SHOW CREATE TABLE `{scratch_db}`.t")[0][1])
    file, pos = up.execute("SHOW MASTER STATUS")[0][:2]
    rng = random.Random(2024)
    names = ["id", *COLUMNS]
    with up.connect(scratch_db) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")  # zero dates and the like, as old data has them
        cur.execute("SET SESSION time_zone = '+00:00'")
        for i in range(1, 121):
            row = [i] + [value(n, t, rng) for n, t in COLUMNS.items()]
            marks = ", ".join("%s" for _ in names)
            cur.execute(f"INSERT INTO t ({', '.join(names)}) VALUES ({marks})", row)
        cur.execute("SELECT * FROM t ORDER BY id")
        stored = cur.fetchall()  # the oracle: what the server holds for the inserted rows
        cur.execute(f"SELECT {', '.join(f'CAST({c} AS CHAR)' for c in TEMPORAL)} FROM t ORDER BY id")
        texts = cur.fetchall()  # and its text of each temporal value
        cur.execute("UPDATE t SET pt = ST_GeomFromText('POINT(1 2)'), st = '' WHERE id % 3 = 0")
        cur.execute("UPDATE t SET t3 = '-00:00:00.001', dt6 = '2000-01-01 00:00:00.000001' WHERE id % 5 = 0")
        cur.execute("DELETE FROM t WHERE id % 7 = 0")
    library, codec = decode_both(up.port, file, int(pos), tracked)
    assert len(library) == len(codec) > 120
    # a temporal value is written as the server writes it as text, with its column's own
    # fraction digits: a string column downstream keeps it so (L53)
    for way, images in (("codec", codec), ("library", library)):
        for image, text in zip(images, texts, strict=False):
            for col, server in zip(TEMPORAL, text, strict=True):
                if server is not None:
                    assert image[col] == f"'{server}'", f"{way}: row {image['id']} column {col}"
    # write both into two copies of the table; the rows must come out the same
    for name, images in (("via_library", library), ("via_codec", codec)):
        down.execute(
            create(f"`{scratch_db}`.{name}").replace("id INT PRIMARY KEY", "n INT PRIMARY KEY, id INT")
        )
        with down.connect(scratch_db) as conn, conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")
            cur.execute("SET SESSION time_zone = '+00:00'")
            for n, image in enumerate(images):
                cols = ", ".join(f"`{c}`" for c in image)
                cur.execute(f"INSERT INTO {name} (n, {cols}) VALUES ({n}, {', '.join(image.values())})")
    a = down.execute(f"SELECT * FROM `{scratch_db}`.via_library ORDER BY n")
    b = down.execute(f"SELECT * FROM `{scratch_db}`.via_codec ORDER BY n")
    for row, truth in zip(b, stored, strict=False):  # the first images are the inserts, in order
        for col, x, y in zip(["id", *COLUMNS], row[1:], truth, strict=True):
            assert x == y, f"row {truth[0]} column {col}: the server stored {y!r}, the codec wrote {x!r}"
    assert len(a) == len(b)
    for row_a, row_b in zip(a, b, strict=True):
        for col, x, y in zip(["n", "id", *COLUMNS], row_a, row_b, strict=True):
            assert x == y, f"row {row_a[0]} column {col}: library {x!r}, codec {y!r}"


def test_unknown_binlog_types_fall_back_to_the_library():
    table = parse_table("CREATE TABLE t (j JSON)")

    class MySQLJson:  # MySQL's binary JSON (type 245) is the library's job
        type = 245

    with pytest.raises(Unsupported, match="column j"):
        RowCodec(table, [MySQLJson()])


def test_fraction_of_a_negative_time_is_read_like_the_server():
    from replicator.source.rowcodec import _time2

    # -00:00:00.5 with fsp 1: int part -1 (offset), fraction byte 256 - 50 (hundredths, two's complement)
    intpart = (0x800000 - 1).to_bytes(3, "big")
    assert _time2(1)(intpart + bytes([256 - 50]), 0)[0] == "'-00:00:00.5'"
    assert _time2(0)((0x800000 + (12 << 12) + (34 << 6) + 56).to_bytes(3, "big"), 0)[0] == "'12:34:56'"


def test_the_library_path_undoes_its_negative_time_fractions():
    from replicator.source.decode import _library_time

    library_reads = -dt.timedelta(hours=1, minutes=2, seconds=3, microseconds=800000)  # of -01:02:03.2
    assert _library_time(library_reads) == -dt.timedelta(hours=1, minutes=2, seconds=3, microseconds=200000)
    assert _library_time(dt.timedelta(seconds=5, microseconds=1)) == dt.timedelta(seconds=5, microseconds=1)
