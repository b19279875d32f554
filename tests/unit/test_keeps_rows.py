"""`keeps_rows(old, new)`: every row the old table accepts, the new one accepts and
reads back as the same value, which makes a version bump minor (docs/design.md "Versions"; the
fuzzer's P4). Table-driven cases, then the property that the join keeps the rows of
each side, but for the two places where the join is not a minor change."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings

from lattice import (
    Default,
    Family,
    Flavor,
    JoinConflict,
    Table,
    holding,
    join,
    keeps_rows,
    materialize,
    parse_table,
    quote_string,
)
from tests.strategies import is_valid, related_tables

BASE = "id INT PRIMARY KEY, a INT NOT NULL"
K = "id INT PRIMARY KEY"
ENUM = "ENUM('x','y')"

CASES = [
    # (old columns, new columns, every old row fits the new table and reads back the same)
    (BASE, f"{BASE}, x INT NULL", True),  # an extra nullable column (issue 12 defect)
    (BASE, f"{BASE}, x INT NOT NULL DEFAULT 3", True),
    (BASE, f"{BASE}, x INT NOT NULL", False),  # rows without x are refused
    (BASE, f"{BASE}, x INT AS (a + 1) VIRTUAL", True),  # computed on read, cut to fit: refuses no row
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

# Defaults: a row leaving a column out gets its default, MariaDB's own where it has none.
DEFAULT_CASES = [
    # DROP DEFAULT of an ENUM NOT NULL whose default was its first member, which MariaDB
    # fills in without one (F05, F19: the default a partial column had, then every shard has it)
    (f"{K}, e {ENUM} NOT NULL DEFAULT 'x'", f"{K}, e {ENUM} NOT NULL", True),
    (f"{K}, e {ENUM} NOT NULL DEFAULT 'y'", f"{K}, e {ENUM} NOT NULL", False),  # rows left 'y', now 'x'
    (f"{K}, e {ENUM} NOT NULL", f"{K}, e {ENUM} NOT NULL DEFAULT 'x'", True),
    (f"{K}, e {ENUM} NOT NULL", f"{K}, e {ENUM} NOT NULL DEFAULT 'y'", False),
    (f"{K}, e {ENUM} NOT NULL", f"{K}, e {ENUM} NULL", False),  # rows leaving e out read back NULL, not 'x'
    (f"{K}, e {ENUM} NOT NULL", f"{K}, e ENUM('x','y','z') NOT NULL", True),  # still 'x'
    (f"{K}, m MEDIUMINT NOT NULL, e {ENUM} NOT NULL DEFAULT 'x'", f"{K}, m INT NOT NULL, e {ENUM} NOT NULL",
     True),  # F19c
    # a new ENUM NOT NULL without DEFAULT takes rows without it (F19d/e: seeds 9770, 9792, 10057, 10134)
    (K, f"{K}, e {ENUM} NOT NULL", True),
    (f"{K}, c DECIMAL(2,0) NULL", f"{K}, c DECIMAL(2,0) NULL, e {ENUM} NOT NULL, UNIQUE KEY k5 (c, id)", True),
    (K, f"{K}, s SET('x','y') NOT NULL", False),  # a SET has no default of its own: refused
    (f"{K}, s SET('x','y') NOT NULL DEFAULT ''", f"{K}, s SET('x','y') NOT NULL", False),
    # a default keeps its value through a type that keeps every value
    (f"{K}, d DECIMAL(5,3) NULL DEFAULT 1", f"{K}, d VARCHAR(10) NULL DEFAULT '1.000'", True),
    (f"{K}, d DECIMAL(5,3) NULL DEFAULT 1", f"{K}, d VARCHAR(10) NULL DEFAULT '2'", False),
    (f"{K}, e {ENUM} NULL DEFAULT 'y'", f"{K}, e VARCHAR(5) NULL DEFAULT 'y'", True),
    (f"{K}, e {ENUM} NOT NULL", f"{K}, e VARCHAR(5) NOT NULL", False),  # a VARCHAR has no 'x' of its own
    (f"{K}, e {ENUM} NOT NULL", f"{K}, e VARCHAR(5) NOT NULL DEFAULT 'x'", True),
]

# Types the lattice calls incomparable, yet every value reads back equal (F20a-e).
TYPE_CASES = [
    (f"{K}, j JSON", f"{K}, j LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", True),  # its text
    (f"{K}, j JSON", f"{K}, j MEDIUMTEXT CHARACTER SET utf8mb4", False),  # a document may be longer
    (f"{K}, j JSON", f"{K}, j LONGTEXT CHARACTER SET latin1", False),
    # TIMESTAMP -> DATETIME: rows and DDL run at time zone +00:00 (F20a)
    (f"{K}, c TIMESTAMP NULL DEFAULT '2020-01-02 03:04:05'",
     f"{K}, c DATETIME(6) NULL DEFAULT '2020-01-02 03:04:05'", True),
    (f"{K}, c TIMESTAMP(3) NULL DEFAULT CURRENT_TIMESTAMP(3)",
     f"{K}, c DATETIME(3) NULL DEFAULT CURRENT_TIMESTAMP(3)", True),
    (f"{K}, c TIMESTAMP(6) NULL", f"{K}, c DATETIME(3) NULL", False),  # fractional digits cut
    (f"{K}, c DATETIME NULL", f"{K}, c TIMESTAMP NULL", False),  # 1000-01-01 is no TIMESTAMP
    # ENUM -> a string type holding every member, counted in characters (F20b, seed 9792)
    (f"{K}, x ENUM('x','y','z','w') CHARACTER SET utf8mb4 NULL",
     f"{K}, x VARCHAR(60) CHARACTER SET utf8mb3 NULL", True),
    (f"{K}, x ENUM('x') CHARACTER SET latin1 NOT NULL", f"{K}, x VARCHAR(60) CHARACTER SET utf8mb3 NOT NULL",
     False),  # F20f: rows leaving x out got 'x', a VARCHAR refuses them
    (f"{K}, x ENUM('x','yy') NULL", f"{K}, x VARCHAR(1) NULL", False),  # 'yy' is 2 characters
    (f"{K}, x ENUM('é','ü') CHARACTER SET utf8mb4 NULL", f"{K}, x CHAR(1) CHARACTER SET latin1 NULL", True),
    (f"{K}, x ENUM('😀') CHARACTER SET utf8mb4 NULL", f"{K}, x VARCHAR(5) CHARACTER SET utf8mb3 NULL", False),
    (f"{K}, x ENUM('😀😀') CHARACTER SET utf8mb4 NULL", f"{K}, x TINYTEXT CHARACTER SET utf8mb4 NULL", True),
    # in a unique key the members must stay apart: a _ci collation may call two of them equal
    (f"{K}, x ENUM('a','ä') CHARACTER SET utf8mb4 NULL, UNIQUE KEY ux (x)",
     f"{K}, x VARCHAR(5) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL, UNIQUE KEY ux (x)", False),
    (f"{K}, x ENUM('a','ä') CHARACTER SET utf8mb4 NULL, UNIQUE KEY ux (x)",
     f"{K}, x VARCHAR(5) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL, UNIQUE KEY ux (x)", True),
    # SET -> a string type holding the longest value, every member comma-separated (F20e, seed 10126)
    (f"{K}, s SET('x','y','z') NOT NULL DEFAULT ''", f"{K}, s VARCHAR(5) NOT NULL DEFAULT ''", True),
    (f"{K}, s SET('x','y','z') NULL", f"{K}, s VARCHAR(4) NULL", False),  # 'x,y,z'
    # DECIMAL and integers -> a string type as long as the longest number (F20d, seed 10046)
    (f"{K}, d DECIMAL(14,3) NULL", f"{K}, d VARCHAR(20) CHARACTER SET utf8mb4 NULL", True),
    (f"{K}, d DECIMAL(14,3) NULL", f"{K}, d VARCHAR(15) NULL", False),  # '-99999999999.999' is 16
    (f"{K}, d DECIMAL(14,3) UNSIGNED NULL", f"{K}, d VARCHAR(15) NULL", True),
    (f"{K}, d DECIMAL(2,2) NULL", f"{K}, d VARCHAR(5) NULL", True),  # '-0.99'
    (f"{K}, d DECIMAL(2,2) NULL", f"{K}, d VARCHAR(4) NULL", False),
    (f"{K}, n INT NULL", f"{K}, n VARCHAR(11) NULL", True),  # '-2147483648'
    (f"{K}, n INT NULL", f"{K}, n VARCHAR(10) NULL", False),
    (f"{K}, n INT UNSIGNED NULL", f"{K}, n CHAR(10) NULL", True),  # '4294967295'
    (f"{K}, n INT ZEROFILL NULL", f"{K}, n VARCHAR(20) NULL", False),  # left out: padding on display only
    # an integer -> a DECIMAL with as many integer digits (seed 6060)
    (f"{K}, n MEDIUMINT NULL", f"{K}, n DECIMAL(9,2) NULL", True),  # '-8388608' has 7 digits
    (f"{K}, n MEDIUMINT NULL", f"{K}, n DECIMAL(8,2) NULL", False),
    (f"{K}, n INT UNSIGNED NULL", f"{K}, n DECIMAL(10,0) NULL", True),  # 4294967295
    (f"{K}, n INT NULL", f"{K}, n DECIMAL(10,0) UNSIGNED NULL", False),  # negatives
    (f"{K}, n DECIMAL(5,0) NULL", f"{K}, n INT NULL", True),  # seed 41363
    (f"{K}, n DECIMAL(5,0) NULL", f"{K}, n SMALLINT NULL", False),  # 99999
    (f"{K}, n DECIMAL(4,0) NULL", f"{K}, n SMALLINT UNSIGNED NULL", False),  # -9999
    (f"{K}, n DECIMAL(5,1) NULL", f"{K}, n BIGINT NULL", False),  # 1.5
    # a number -> JSON: its text is a JSON number (seed 41243)
    (f"{K}, n MEDIUMINT NOT NULL", f"{K}, n JSON NOT NULL", True),
    (f"{K}, n DECIMAL(6,2) NULL", f"{K}, n JSON NULL", True),
    (f"{K}, n INT ZEROFILL NULL", f"{K}, n JSON NULL", False),
    # temporal types without fractional seconds -> a string type as long as their text (seed 31195)
    (f"{K}, d DATE NULL", f"{K}, d VARCHAR(10) CHARACTER SET ascii NULL", True),  # '2024-02-29'
    (f"{K}, d DATE NULL", f"{K}, d VARCHAR(9) NULL", False),
    (f"{K}, d DATETIME NULL, UNIQUE KEY ud (d)", f"{K}, d CHAR(19) NULL, UNIQUE KEY ud (d)", True),
    (f"{K}, d DATETIME(3) NULL", f"{K}, d CHAR(23) NULL", True),  # '2024-02-29 12:30:45.123' (seed 61155)
    (f"{K}, d DATETIME(3) NULL", f"{K}, d VARCHAR(22) NULL", False),
    (f"{K}, y YEAR NULL", f"{K}, y VARCHAR(4) NULL", True),
    (f"{K}, t TIME NULL", f"{K}, t VARCHAR(30) NULL", False),  # '838:59:59'
    # character sets: every character of the old set in the new one, as many characters (F20c)
    (f"{K}, c ENUM('x','y') CHARACTER SET latin1 NULL", f"{K}, c ENUM('x','y','z') CHARACTER SET utf8mb4 NULL",
     True),
    (f"{K}, c ENUM('x','y') CHARACTER SET latin1 NULL", f"{K}, c ENUM('y','x') CHARACTER SET utf8mb4 NULL",
     True),  # an ENUM reads back its member, wherever it stands
    (f"{K}, c ENUM('x','y') NULL", f"{K}, c ENUM('x','z') NULL", False),  # 'y' has nowhere to go
    (f"{K}, s SET('x','y') CHARACTER SET latin1 NULL", f"{K}, s SET('x','y','z') CHARACTER SET utf8mb4 NULL",
     True),
    (f"{K}, s SET('x','y') NULL", f"{K}, s SET('y','x') NULL", False),  # 'x,y' would read back 'y,x'
    # ENUM -> SET: converted by text, a member is itself again wherever it stands (seed 1402494)
    (f"{K}, e {ENUM} CHARACTER SET latin1 NULL", f"{K}, e SET('x','y') CHARACTER SET latin1 NULL", True),
    (f"{K}, e ENUM('b','a') CHARACTER SET latin1 NULL", f"{K}, e SET('a','c','b') CHARACTER SET utf8mb4 NULL",
     True),
    (f"{K}, e {ENUM} NULL", f"{K}, e SET('x','z') NULL", False),  # 'y' has nowhere to go
    (f"{K}, e {ENUM} NOT NULL", f"{K}, e SET('x','y') NOT NULL", False),  # a SET has no 'x' of its own
    (f"{K}, e ENUM('','p') NULL", f"{K}, e SET('','p') NULL", True),  # '' reads back ''
    (f"{K}, e ENUM('','p') NULL, UNIQUE KEY ue (e)", f"{K}, e SET('','p') NULL, UNIQUE KEY ue (e)",
     False),  # the member '' and the error value '' become one: the empty set
    (f"{K}, e ENUM('x','X') COLLATE utf8mb4_bin NULL, UNIQUE KEY ue (e)",
     f"{K}, e SET('X','x') COLLATE utf8mb4_bin NULL, UNIQUE KEY ue (e)", True),
    (f"{K}, v VARCHAR(10) CHARACTER SET latin1 NULL", f"{K}, v VARCHAR(10) CHARACTER SET utf8mb4 NULL", True),
    (f"{K}, v VARCHAR(10) CHARACTER SET utf8mb3 NULL", f"{K}, v VARCHAR(10) CHARACTER SET utf8mb4 NULL", True),
    (f"{K}, v VARCHAR(10) CHARACTER SET utf8mb4 NULL", f"{K}, v VARCHAR(10) CHARACTER SET utf8mb3 NULL", False),
    (f"{K}, v VARCHAR(10) CHARACTER SET utf8mb4 NULL", f"{K}, v VARCHAR(10) CHARACTER SET latin1 NULL", False),
    (f"{K}, v CHAR(10) CHARACTER SET latin1 NULL", f"{K}, v CHAR(10) CHARACTER SET utf8mb4 NULL", True),
    (f"{K}, v VARCHAR(10) CHARACTER SET latin1 NULL", f"{K}, v CHAR(10) CHARACTER SET utf8mb4 NULL",
     False),  # CHAR drops trailing spaces
    (f"{K}, v VARCHAR(100) CHARACTER SET latin1 NULL", f"{K}, v TINYTEXT CHARACTER SET utf8mb4 NULL", False),
    (f"{K}, v VARCHAR(85) CHARACTER SET latin1 NULL", f"{K}, v TINYTEXT CHARACTER SET utf8mb4 NULL",
     True),  # '€' takes 3 bytes in UTF-8: 255 bytes
    (f"{K}, v TEXT CHARACTER SET latin1 NULL", f"{K}, v TEXT CHARACTER SET utf8mb4 NULL", False),  # bytes
    (f"{K}, v TEXT CHARACTER SET latin1 NULL", f"{K}, v MEDIUMTEXT CHARACTER SET utf8mb4 NULL", True),
    (f"{K}, v TEXT CHARACTER SET utf8mb3 NULL", f"{K}, v TEXT CHARACTER SET utf8mb4 NULL", True),
    # ... and in a unique key, a collation that keeps two different old values apart
    (f"{K}, v VARCHAR(10) CHARACTER SET latin1 COLLATE latin1_swedish_ci NULL, UNIQUE KEY uv (v)",
     f"{K}, v VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL, UNIQUE KEY uv (v)",
     False),  # 'a' and 'ä' are two values in latin1_swedish_ci, one in utf8mb4_general_ci
    (f"{K}, v VARCHAR(10) CHARACTER SET latin1 COLLATE latin1_bin NULL, UNIQUE KEY uv (v)",
     f"{K}, v VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL, UNIQUE KEY uv (v)", True),
    (f"{K}, v VARCHAR(10) CHARACTER SET latin1 COLLATE latin1_swedish_ci NULL",
     f"{K}, v VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL", True),  # no key
    # a check over a converted column may say otherwise: an ENUM is a number in `e > 1`, a string is not
    (f"{K}, e {ENUM} NULL, CONSTRAINT ce CHECK (e > 1)", f"{K}, e VARCHAR(5) NULL, CONSTRAINT ce CHECK (e > 1)",
     False),
    (f"{K}, v VARCHAR(5) COLLATE utf8mb4_bin NULL, CONSTRAINT cv CHECK (v <> 'A')",
     f"{K}, v VARCHAR(5) COLLATE utf8mb4_general_ci NULL, CONSTRAINT cv CHECK (v <> 'A')", False),  # 'a'
    (f"{BASE}, CONSTRAINT ca CHECK (a >= 0)", "id INT PRIMARY KEY, a BIGINT NOT NULL, CONSTRAINT ca CHECK (a >= 0)",
     True),  # a widening
    # conversions the rule does not make: the value reads back as another text, or not at all
    (f"{K}, d DATE NULL", f"{K}, d DATETIME NULL", False),
    (f"{K}, v VARCHAR(10) NULL", f"{K}, v INT NULL", False),
]

# Generated columns: rows do not carry them, but read them back.
GENERATED_CASES = [
    (f"{K}, c VARCHAR(255), g VARCHAR(8) AS (LEFT(c, 4)) STORED",
     f"{K}, c VARCHAR(255), g VARCHAR(8) AS (LEFT(c, 5)) STORED", False),  # F33: another expression
    (f"{BASE}, g INT AS (a + 1) STORED", f"{BASE}, g INT NULL", False),  # rows now read back NULL
    (f"{BASE}, g INT AS (a + 1) VIRTUAL", BASE, True),  # gone: rows never carried it
    (f"{BASE}, g INT AS (a + 1) STORED", f"{BASE}, g INT AS (a + 1) VIRTUAL", False),
    (f"{K}, c VARCHAR(9), g VARCHAR(4) AS (CONCAT(c, c)) VIRTUAL",
     f"{K}, c VARCHAR(9), g VARCHAR(8) AS (CONCAT(c, c)) VIRTUAL", False),  # 'abca' was cut, 'abcabc' now
    (f"{K}, c VARCHAR(9), g VARCHAR(4) AS (CONCAT(c, c)) STORED",
     f"{K}, c VARCHAR(9), g VARCHAR(8) AS (CONCAT(c, c)) STORED", True),  # a stored value fit before
    (f"{BASE}, g BIGINT AS (a % 97) STORED", "id INT PRIMARY KEY, a BIGINT NOT NULL, g BIGINT AS (a % 97) STORED",
     True),  # a wider input, the same values
    (f"{K}, d DECIMAL(5,2), g VARCHAR(20) AS (CONCAT(d)) STORED",
     f"{K}, d DECIMAL(6,3), g VARCHAR(20) AS (CONCAT(d)) STORED", False),  # '1.50' becomes '1.500'
    # more decimals keep a number computed exactly into a number (seed 620875)...
    (f"{K}, d DECIMAL(9,1), g BIGINT AS (d % 97) VIRTUAL",
     f"{K}, d DECIMAL(11,2), g BIGINT AS (d % 97) VIRTUAL", True),
    (f"{K}, d DECIMAL(9,1), g DECIMAL(12,2) AS (ABS(d) * 3 - 1.5) STORED",
     f"{K}, d DECIMAL(11,2), g DECIMAL(12,2) AS (ABS(d) * 3 - 1.5) STORED", True),
    # ...not told of a quotient (its scale follows its operands' in a SELECT), nor a
    # number as text ('2.0' becomes '2.00')
    (f"{K}, d DECIMAL(9,1), g DECIMAL(12,6) AS (d / 3) VIRTUAL",
     f"{K}, d DECIMAL(11,2), g DECIMAL(12,6) AS (d / 3) VIRTUAL", False),
    (f"{K}, d DECIMAL(9,1), g VARCHAR(20) AS (d * 2) VIRTUAL",
     f"{K}, d DECIMAL(11,2), g VARCHAR(20) AS (d * 2) VIRTUAL", False),
    (f"{K}, d DECIMAL(9,1), g INT AS (LENGTH(d)) VIRTUAL",
     f"{K}, d DECIMAL(11,2), g INT AS (LENGTH(d)) VIRTUAL", False),
    (f"{K}, c VARCHAR(9), g VARCHAR(9) AS (LEFT(c, 3)) VIRTUAL",
     f"{K}, c VARCHAR(19), g VARCHAR(9) AS (LEFT(c, 3)) VIRTUAL", True),
    (f"{K}, c VARCHAR(9) CHARACTER SET latin1, g INT AS (LENGTH(c)) VIRTUAL",
     f"{K}, c VARCHAR(9) CHARACTER SET utf8mb4, g INT AS (LENGTH(c)) VIRTUAL", False),  # 'é': 1 byte, then 2
    (f"{K}, c VARCHAR(9) CHARACTER SET utf8mb3, g VARCHAR(9) AS (CHARSET(c)) VIRTUAL",
     f"{K}, c VARCHAR(9) CHARACTER SET utf8mb4, g VARCHAR(9) AS (CHARSET(c)) VIRTUAL", False),
    (f"{BASE}, g INT AS (a + 1) VIRTUAL", f"{BASE}, g INT AS (a + 1) VIRTUAL, KEY kg (g)",
     False),  # an indexed VIRTUAL value is computed on write: refused where it was cut
    (BASE, f"{BASE}, x INT AS (a + 1) STORED", False),  # computed on write: may not fit
    (BASE, f"{BASE}, x INT AS (a + 1) VIRTUAL, KEY kx (x)", False),
    # ...unless every value the expression computes fits (lattice/bounds.py; seed 31101)
    (f"{K}, c VARCHAR(5), g VARCHAR(8) AS (LEFT(c, 3)) VIRTUAL",
     f"{K}, c VARCHAR(5), g VARCHAR(8) AS (LEFT(c, 3)) VIRTUAL, KEY kg (g)", True),
    (f"{K}, c VARCHAR(5), g VARCHAR(2) AS (LEFT(c, 3)) VIRTUAL",
     f"{K}, c VARCHAR(5), g VARCHAR(2) AS (LEFT(c, 3)) VIRTUAL, KEY kg (g)", False),
    (f"{K}, c VARCHAR(5) CHARACTER SET latin1, g VARCHAR(8) CHARACTER SET utf8mb4 AS (LEFT(c, 3)) VIRTUAL",
     f"{K}, c VARCHAR(5) CHARACTER SET latin1, g VARCHAR(8) CHARACTER SET utf8mb4 AS (LEFT(c, 3)) VIRTUAL, "
     "KEY kg (g)", True),  # utf8mb4 has every character
    (f"{K}, c VARCHAR(5) CHARACTER SET utf8mb4, g VARCHAR(8) CHARACTER SET latin1 AS (LEFT(c, 3)) VIRTUAL",
     f"{K}, c VARCHAR(5) CHARACTER SET utf8mb4, g VARCHAR(8) CHARACTER SET latin1 AS (LEFT(c, 3)) VIRTUAL, "
     "KEY kg (g)", False),  # latin1 has no '😀'
    # members spelt in ASCII are characters of every set (seed 126856)
    (f"{K}, c SET('x','y') CHARACTER SET latin1, g VARCHAR(8) CHARACTER SET utf8mb3 AS (LEFT(c, 5)) VIRTUAL",
     f"{K}, c SET('x','y') CHARACTER SET latin1, g VARCHAR(8) CHARACTER SET utf8mb3 AS (LEFT(c, 5)) VIRTUAL, "
     "KEY kg (g)", True),
    (f"{K}, c ENUM('😀','y') CHARACTER SET utf8mb4, g VARCHAR(8) CHARACTER SET utf8mb3 AS (LEFT(c, 5)) VIRTUAL",
     f"{K}, c ENUM('😀','y') CHARACTER SET utf8mb4, g VARCHAR(8) CHARACTER SET utf8mb3 AS (LEFT(c, 5)) VIRTUAL, "
     "KEY kg (g)", False),
    (f"{K}, c SET('x','y'), g VARCHAR(2) AS (LEFT(c, 5)) VIRTUAL",
     f"{K}, c SET('x','y'), g VARCHAR(2) AS (LEFT(c, 5)) VIRTUAL, KEY kg (g)", False),  # 'x,y' is 3 long
    # a number's text has characters of every set (seed 2501504)
    (f"{K}, c MEDIUMINT, g VARCHAR(8) CHARACTER SET utf8mb3 AS (LEFT(c, 4)) VIRTUAL",
     f"{K}, c MEDIUMINT, g VARCHAR(8) CHARACTER SET utf8mb3 AS (LEFT(c, 4)) VIRTUAL, KEY kg (g)", True),
    (f"{K}, c DECIMAL(9,2), g CHAR(3) CHARACTER SET latin1 AS (LEFT(c, 3)) VIRTUAL",
     f"{K}, c DECIMAL(9,2), g CHAR(3) CHARACTER SET latin1 AS (LEFT(c, 3)) VIRTUAL, KEY kg (g)", True),
    (f"{K}, c MEDIUMINT, g VARCHAR(3) AS (LEFT(c, 4)) VIRTUAL",
     f"{K}, c MEDIUMINT, g VARCHAR(3) AS (LEFT(c, 4)) VIRTUAL, KEY kg (g)", False),
    (f"{K}, c MEDIUMINT, g TINYTEXT AS (LEFT(c, 4)) VIRTUAL",
     f"{K}, c MEDIUMINT, g TINYTEXT AS (LEFT(c, 4)) VIRTUAL, KEY kg (g(4))", False),  # bytes: not told
    (BASE, f"{BASE}, x BIGINT AS (a % 97) STORED", True),
    (BASE, f"{BASE}, x TINYINT AS (a % 200) STORED", False),  # 199 does not fit
    (BASE, f"{BASE}, x TINYINT UNSIGNED AS (a % 97) STORED", False),  # a negative a gives a negative rest
    (f"{K}, a INT UNSIGNED", f"{K}, a INT UNSIGNED, x TINYINT UNSIGNED AS (a % 97) STORED", True),
    (BASE, f"{BASE}, x BIGINT AS (a) STORED, KEY kx (x)", True),
    (BASE, f"{BASE}, x SMALLINT AS (a) STORED", False),
]

# Flavors: MariaDB's implicit ENUM default; TiDB changes no type across families.
FLAVOR_CASES = [
    (f"{K}, e {ENUM} NOT NULL DEFAULT 'x'", f"{K}, e {ENUM} NOT NULL", "mariadb", True),
    (f"{K}, e {ENUM} NOT NULL DEFAULT 'x'", f"{K}, e {ENUM} NOT NULL", "mysql", False),  # refused there
    (K, f"{K}, e {ENUM} NOT NULL", "mysql", False),
    (f"{K}, x {ENUM} NULL", f"{K}, x VARCHAR(5) NULL", "mysql", True),
    (f"{K}, x {ENUM} NULL", f"{K}, x VARCHAR(5) NULL", "tidb", False),
    (BASE, f"{BASE}, x INT AS (a + 1) VIRTUAL", "mysql", False),  # not known to cut rather than refuse
]


def _table(columns: str) -> Table:
    return parse_table(f"CREATE TABLE t ({columns})")


U4, L1 = "CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", "CHARACTER SET latin1"
# `holding(a, b)`: a type taking every value of both, for the rows already downstream
# (replicator/schema/retained.py), or None
HOLDING_CASES = [
    ("VARCHAR(10)", "VARCHAR(20)", "VARCHAR(20)"),  # the join, where there is one
    ("CHAR(1) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", f"CHAR(1) {L1}",
     "CHAR(1) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"),  # another collation: the wider set's (F60)
    (f"CHAR(4) {U4}", f"CHAR(5) {L1}", f"CHAR(5) {U4}"),  # that set, long enough for both
    (f"VARCHAR(10) {U4}", f"TINYTEXT {L1}", f"TEXT {U4}"),  # 255 latin1 characters take 765 bytes
    ("BIGINT", "JSON", "JSON"),  # a number is a JSON number
    ("JSON", "INT", "JSON"),
    ("VARCHAR(20)", "INT", "VARCHAR(20)"),  # '-2147483648'
    ("VARCHAR(10)", "INT", "VARCHAR(12)"),
    ("INT", "DATE", "VARCHAR(12)"),  # neither a string: a string in the table's set
    ("SMALLINT", "SET('x','y','z') CHARACTER SET utf8mb3 COLLATE utf8mb3_general_ci",
     "VARCHAR(8) CHARACTER SET utf8mb3 COLLATE utf8mb3_general_ci"),  # the members' set (F76)
    ("SET('p','q')", "SET('q','p')", "VARCHAR(4)"),  # 'p,q' and 'q,p' are other numbers
    ("ENUM('p','q')", "SET('q','p','r')", "SET('q','p','r')"),  # the SET takes each member as it is (F151)
    ("SET('q','p','r')", "ENUM('p','q')", "SET('q','p','r')"),
    ("ENUM('p','q')", "SET('p','r')", "VARCHAR(4)"),  # no 'q' in the SET: a string for both
    ("DATE", "DATETIME(6)", None),  # a date converts to its midnight, as upstream (seed 240039)
    # but no DATE or DATETIME before 1970 fits a TIMESTAMP (F112, seed 510072)
    ("DATE", "TIMESTAMP", "DATETIME"),
    ("DATE", "TIMESTAMP(3)", "DATETIME(3)"),
    ("DATETIME", "TIMESTAMP(3)", "DATETIME(3)"),
    ("TIMESTAMP(6)", "DATETIME(2)", "DATETIME(6)"),
    ("TIME", "TIMESTAMP", None),
    ("TIME", "INT", None),  # '-838:59:59' is no number, 1 no time, and no length holds TIME's text
    ("SMALLINT", "DECIMAL(4,1) UNSIGNED", "DECIMAL(6,1)"),  # -32768 and 999.9 (seed 200831)
    ("BIGINT UNSIGNED", "DECIMAL(10,2) UNSIGNED", "DECIMAL(22,2) UNSIGNED"),
    ("TINYINT", "SMALLINT UNSIGNED", "MEDIUMINT"),  # -128 and 65535 (seed 230398)
    ("TINYINT", "BIGINT UNSIGNED", "DECIMAL(20,0)"),
    (f"VARCHAR(1) {L1}", "DECIMAL(4,0)", f"VARCHAR(8) {L1}"),  # '-9999' (seed 230553)
    (f"TINYTEXT {L1}", "DATE", f"TINYTEXT {L1}"),
    ("VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "JSON",
     "LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"),  # a document is text, a string no document
    (f"CHAR(3) {L1}", "JSON", "LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"),
    (f"CHAR(2) {U4}", "CHAR(2) CHARACTER SET ascii COLLATE ascii_bin", f"CHAR(2) {U4}"),
    (f"CHAR(2) {L1}", "CHAR(2) CHARACTER SET utf8mb3 COLLATE utf8mb3_bin",
     "CHAR(2) CHARACTER SET utf8mb3 COLLATE utf8mb3_bin"),
]


def _type(sql: str | None):
    return None if sql is None else _table(f"c {sql}").column("c").type


@pytest.mark.parametrize(("a", "b", "both"), HOLDING_CASES)
def test_holding_takes_the_values_of_both(a, b, both):
    assert holding(_type(a), _type(b), "mariadb") == _type(both)
    assert holding(_type(b), _type(a), "mariadb") == _type(both)


def test_holding_keeps_the_first_character_set_of_two_enums_where_it_has_the_members():
    """Rows of a shard that left need the member 'v' of its utf8mb4 ENUM; the shards'
    latin1 ENUM takes it, and no utf8mb4 is needed (fuzz seed 900241). Where the first
    set lacks a member, the other set's type it is."""
    shards, departed = "ENUM('x','y') CHARACTER SET latin1", f"ENUM('x','y','v') {U4}"
    assert holding(_type(shards), _type(departed), "mariadb") == _type("ENUM('x','y','v') CHARACTER SET latin1")
    assert holding(_type(departed), _type(shards), "mariadb") == _type(departed)
    emoji = f"SET('x','😀') {U4}"
    assert holding(_type("SET('x') CHARACTER SET latin1"), _type(emoji), "mariadb") == _type(emoji)
    # also where the two sets join (the wider): the shards' set has every character (F178)
    mb3 = "SET('x') CHARACTER SET utf8mb3 COLLATE utf8mb3_general_ci"
    assert holding(_type(mb3), _type(f"SET('x') {U4}"), "mariadb") == _type(mb3)
    assert holding(_type(f"SET('x') {U4}"), _type(mb3), "mariadb") == _type(f"SET('x') {U4}")


@pytest.mark.parametrize(("old", "new", "kept"), CASES + DEFAULT_CASES + TYPE_CASES + GENERATED_CASES)
def test_keeps_rows(old, new, kept):
    assert keeps_rows(_table(old), _table(new)) is kept


@pytest.mark.parametrize(("old", "new", "flavor", "kept"), FLAVOR_CASES)
def test_keeps_rows_per_flavor(old, new, flavor, kept):
    assert keeps_rows(_table(old), _table(new), flavor) is kept


def test_a_partial_column_has_its_filler():
    """A column some shard lacks, without a DEFAULT of its own, has the filler (docs/design.md "Adding a column")
    downstream (an ENUM: its first member), NOT NULL or not. So the DROP DEFAULT when the
    last shard adds it keeps an ENUM's rows (F19) and refuses an INT's; and a nullable
    one turning `DEFAULT NULL` reads NULL where rows read the filler (F34)."""
    table = _table(f"{K}, e {ENUM} NOT NULL, n INT NOT NULL, x CHAR(4) NULL")
    partial = table.with_columns(
        c if c.name == "id" else replace(c, partial=True, default=None) for c in table.columns
    )
    assert keeps_rows(partial, _table(f"{K}, e {ENUM} NOT NULL, n INT NOT NULL DEFAULT 0, x CHAR(4) NULL DEFAULT ''"))
    assert not keeps_rows(partial, _table(f"{K}, e {ENUM} NOT NULL, n INT NOT NULL, x CHAR(4) NULL DEFAULT ''"))
    assert not keeps_rows(partial, _table(f"{K}, e {ENUM} NOT NULL, n INT NOT NULL DEFAULT 0, x CHAR(4) NULL"))


def test_tables_compare_as_the_server_holds_them():
    """Seed 5025: a shard narrowed TIMESTAMP(3) DEFAULT CURRENT_TIMESTAMP(3) to
    TIMESTAMP DEFAULT CURRENT_TIMESTAMP(); the join kept the column wide with the
    shard's default, which on a TIMESTAMP(3) is CURRENT_TIMESTAMP(3) again: no DDL,
    and no row changes, so the bump is minor."""
    old = _table(f"{K}, c TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)")
    c = old.column("c")
    kept_wide = old.with_columns([old.column("id"), replace(c, default=Default("current_timestamp()", True))])
    assert keeps_rows(old, kept_wide)
    assert not keeps_rows(old, _table(f"{K}, c TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP"))


def _not_minor_by_design(side: Table, joined: Table, flavor: str) -> bool:
    """Where the join of a side is not a minor change for it, as the flavor
    holds the join:
    - a generated column another side has as a normal one ("Stored generated
      columns": the join holds it normal, so the side's rows read back its default);
    - on MariaDB, an ENUM NOT NULL without DEFAULT, which the server fills with its
      first member but the lattice takes as having no default, so the join may give it
      another side's DEFAULT, or NULL;
    - on TiDB, a column the join makes a TEXT, BLOB or JSON type, where TiDB takes no
      default: the side's default is gone (NULL instead when the column is nullable);
    - a DATETIME or TIMESTAMP the join gives more fractional digits: its DEFAULT
      CURRENT_TIMESTAMP takes them too, so rows leaving it out read the time otherwise."""
    held, own = materialize(joined, flavor), materialize(side, flavor)
    for column in own.columns:
        other = held.column(column.name)
        if other is None:
            continue
        if column.default is not None and column.default.is_expression and other.default != column.default:
            return True
        if column.generated is not None and other.generated is None:
            return True
        implicit = column.type.family == Family.ENUM and not column.nullable and column.default is None
        if flavor == "mariadb" and implicit and (
            other.nullable or other.default not in (None, Default(quote_string(column.type.members[0])))
        ):
            return True
        takes_no_default = other.type.is_text_kind or other.type.family == Family.JSON
        lost = other.default is None or other.default.is_null
        if flavor == "tidb" and takes_no_default and column.default is not None and lost:
            return True
    return False


@pytest.mark.parametrize("flavor", [f.value for f in Flavor])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables=related_tables(2))
def test_the_join_keeps_the_rows_of_both_sides(flavor, tables):
    assume(all(is_valid(t) for t in tables))
    a, b = tables
    joined = join(a, b, flavor)
    assume(not isinstance(joined, JoinConflict))
    for side in (a, b):
        assert keeps_rows(side, joined, flavor) or _not_minor_by_design(side, joined, flavor)
    assert keeps_rows(a, a, flavor)
