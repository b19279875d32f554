"""docs/design.md "Adding a column": the default a NOT NULL column gets while
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

from lattice.literals import RawValue, canonical_default
from lattice.model import ColumnType, Default, Family

_ZERO = RawValue("number", "0")
_EMPTY = RawValue("string", "")
_FILLERS: dict[Family, RawValue] = {
    Family.INTEGER: _ZERO,
    Family.FLOAT: RawValue("number", "0.0"),
    Family.DECIMAL: _ZERO,
    Family.BIT: RawValue("bit", 0),
    Family.STRING: _EMPTY,
    Family.BINARY: _EMPTY,
    Family.YEAR: _ZERO,  # numeric 0 is the year 0000 (a string '0' would mean 2000)
    Family.DATE: RawValue("string", "0000-00-00"),
    Family.TIME: RawValue("string", "00:00:00"),
    Family.DATETIME: RawValue("string", "0000-00-00 00:00:00"),
    Family.TIMESTAMP: RawValue("string", "0000-00-00 00:00:00"),
    Family.SET: _EMPTY,
    Family.JSON: RawValue("string", "null"),
}


def filler_default(ctype: ColumnType) -> Default | None:
    """The filler as the server holds it for this type (a BINARY(2) '' is x'0000', a
    DECIMAL(5,2) 0 is 0.00), so a table with fillers compares with the server's."""
    if ctype.family == Family.ENUM:
        raw = RawValue("string", ctype.members[0]) if ctype.members else None
    else:
        raw = _FILLERS.get(ctype.family)
    return canonical_default(raw, ctype) if raw is not None else None
