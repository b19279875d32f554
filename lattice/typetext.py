"""How a column type is written in SQL for a flavor: `render_type`, and the flavor's
spelling of character set and collation names. Below both `render` (whole tables)
and `typejoin` (whose conflicts name the types), so neither depends on the other.
"""

from __future__ import annotations

from lattice.flavor import Flavor
from lattice.model import ColumnType, Family
from lattice.sqltext import quote_string


def charset_name(charset: str, flavor: Flavor) -> str:
    return Flavor.parse(flavor).rules.utf8mb3 if charset == "utf8mb3" else charset


def collation_name(collation: str, flavor: Flavor) -> str:
    if collation.startswith("utf8mb3_"):
        return Flavor.parse(flavor).rules.utf8mb3 + collation[len("utf8mb3") :]
    return collation


def render_type(ctype: ColumnType, flavor: Flavor | str = Flavor.MARIADB) -> str:
    flavor = Flavor.parse(flavor)
    f = ctype.family
    name = ctype.name
    if f == Family.DECIMAL:
        text = f"decimal({ctype.precision},{ctype.scale})"
    elif f == Family.FLOAT and ctype.precision is not None:
        text = f"{name}({ctype.precision},{ctype.scale})"
    elif f in (Family.BIT,) or name in ("char", "varchar", "binary", "varbinary"):
        text = f"{name}({ctype.length})"
    elif f in (Family.ENUM, Family.SET):
        text = f"{name}(" + ",".join(quote_string(m) for m in ctype.members) + ")"
    elif f in (Family.TIME, Family.DATETIME, Family.TIMESTAMP) and ctype.fsp:
        text = f"{name}({ctype.fsp})"
    else:
        text = name
    if ctype.unsigned and f in (Family.INTEGER, Family.DECIMAL, Family.FLOAT):
        text += " unsigned"
    if ctype.zerofill:
        text += " zerofill"
    if ctype.is_character:
        if ctype.charset:
            text += f" CHARACTER SET {charset_name(ctype.charset, flavor)}"
        if ctype.collation:
            text += f" COLLATE {collation_name(ctype.collation, flavor)}"
    return text
