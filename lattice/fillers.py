"""Seed 002, "Adding column on first shard": the default a NOT NULL column gets while
some shard lacks it, so that shard's rows (which omit the column) still insert.

| Type                  | Default                 |
| int                   | 0                       |
| float/double          | 0.0                     |
| decimal               | 0                       |
| bit                   | 0                       |
| char/varchar/text     | ''                      |
| binary/varbinary/blob | ''                      |
| year                  | '0000'                  |
| date                  | '0000-00-00'            |
| time                  | '00:00:00'              |
| datetime, timestamp   | '0000-00-00 00:00:00'   |
| enum/set              | 0                       |
| json                  | 'null'                  |

Two departures, both because the server rejects the seed's value: an ENUM gets its
first member (`DEFAULT 0` is "Invalid default value"; the first member is what MySQL
itself uses for a NOT NULL enum), a SET gets the empty set ''. Spatial and unknown
types have no literal default at all; `None` tells the renderer to make such a
column nullable instead, which is more compatible still.
"""

from __future__ import annotations

from lattice.model import ColumnType, Default, Family
from lattice.sqltext import quote_string

_FILLERS: dict[Family, str] = {
    Family.INTEGER: "0",
    Family.FLOAT: "0.0",
    Family.DECIMAL: "0",
    Family.BIT: "b'0'",
    Family.STRING: "''",
    Family.BINARY: "''",
    Family.YEAR: "0",  # numeric 0 is the year 0000 (a string '0' would mean 2000)
    Family.DATE: "'0000-00-00'",
    Family.TIME: "'00:00:00'",
    Family.DATETIME: "'0000-00-00 00:00:00'",
    Family.TIMESTAMP: "'0000-00-00 00:00:00'",
    Family.SET: "''",
    Family.JSON: "'null'",
}


def filler_default(ctype: ColumnType) -> Default | None:
    if ctype.family == Family.ENUM:
        return Default(quote_string(ctype.members[0])) if ctype.members else None
    sql = _FILLERS.get(ctype.family)
    return Default(sql) if sql is not None else None
