"""Random but realistic column definitions, as model objects (rendered to SQL with
`lattice.render`), and the small type moves the generator makes on them: widen,
narrow, another family. The types are the issue's list: integers of each width,
signed and unsigned, DECIMAL, CHAR/VARCHAR/TEXT in several character sets,
ENUM/SET, DATE/DATETIME/TIMESTAMP, JSON."""

from __future__ import annotations

import random
from dataclasses import replace

from lattice.model import (
    INTEGER_BITS,
    INTEGER_BY_BITS,
    NULL_DEFAULT,
    Column,
    ColumnType,
    Default,
    Family,
    Generated,
)
from lattice.sqltext import quote_identifier, quote_string

CHARSETS = (
    ("latin1", "latin1_swedish_ci"),
    ("utf8mb3", "utf8mb3_general_ci"),
    ("utf8mb4", "utf8mb4_general_ci"),
    ("utf8mb4", "utf8mb4_bin"),
)
MEMBERS = ("x", "y", "z", "w", "v")
INTEGERS = tuple(INTEGER_BITS)
VARCHAR_LENGTHS = (1, 5, 20, 60, 255)
# Columns a key can hold without a prefix, and with enough distinct values for rows
# of every shard to stay apart under a UNIQUE key.
_WIDE_DOMAIN = (Family.INTEGER, Family.DECIMAL, Family.DATETIME, Family.TIMESTAMP, Family.DATE)


def charset(r: random.Random) -> tuple[str, str]:
    return r.choice(CHARSETS)


def random_type(r: random.Random) -> ColumnType:
    kind = r.choice(
        ["int", "int", "int", "decimal", "varchar", "varchar", "char", "text", "enum", "set",
         "date", "datetime", "timestamp", "json"]
    )
    if kind == "int":
        return ColumnType(Family.INTEGER, r.choice(INTEGERS), unsigned=r.random() < 0.4)
    if kind == "decimal":
        scale = r.randint(0, 4)
        return ColumnType(Family.DECIMAL, "decimal", precision=r.randint(max(scale, 1) + 1, 14), scale=scale,
                          unsigned=r.random() < 0.2)
    if kind in ("varchar", "char", "text"):
        cs, coll = charset(r)
        if kind == "text":
            return ColumnType(Family.STRING, r.choice(["tinytext", "text"]), charset=cs, collation=coll)
        length = r.choice(VARCHAR_LENGTHS) if kind == "varchar" else r.choice((1, 4, 10, 30))
        return ColumnType(Family.STRING, kind, length=length, charset=cs, collation=coll)
    if kind in ("enum", "set"):
        cs, coll = charset(r)
        members = MEMBERS[: r.randint(1, 4)]
        return ColumnType(Family.ENUM if kind == "enum" else Family.SET, kind, members=members,
                          charset=cs, collation=coll)
    if kind == "date":
        return ColumnType(Family.DATE, "date")
    if kind in ("datetime", "timestamp"):
        return ColumnType(Family(kind), kind, fsp=r.choice((0, 0, 3, 6)))
    return ColumnType(Family.JSON, "json")


def literal_default(r: random.Random, t: ColumnType) -> Default | None:
    """A DEFAULT the type takes, or None for types given none (TEXT, JSON)."""
    f = t.family
    if f == Family.INTEGER:
        return Default(r.choice(("0", "7")))
    if f == Family.DECIMAL:
        return Default(r.choice(("0", "1")))
    if f == Family.STRING and not t.is_text_kind:
        return Default(r.choice(("''", "'d'")))
    if f == Family.ENUM:
        return Default(quote_string(r.choice(t.members)))
    if f == Family.SET:
        return Default(r.choice(("''", quote_string(t.members[0]))))
    if f == Family.DATE:
        return Default("'2020-01-02'")
    if f in (Family.DATETIME, Family.TIMESTAMP):
        if r.random() < 0.3:
            return Default(f"current_timestamp({t.fsp})" if t.fsp else "current_timestamp()", is_expression=True)
        return Default("'2020-01-02 03:04:05'")
    return None


def random_column(r: random.Random, name: str) -> Column:
    t = random_type(r)
    nullable = r.random() < 0.5
    default = literal_default(r, t) if r.random() < 0.5 else None
    if nullable and default is None:
        default = NULL_DEFAULT
    return Column(name, t, nullable=nullable, default=default)


def enum_not_null(name: str) -> Column:
    """The filler table (docs/design.md "Adding a column") has `enum 0` for a new NOT NULL enum without DEFAULT,
    which the server refuses: a known defect class worth adding often."""
    cs, coll = CHARSETS[2]
    return Column(name, ColumnType(Family.ENUM, "enum", members=("x", "y"), charset=cs, collation=coll),
                  nullable=False)


def generated_over(r: random.Random, source: Column, name: str, variant: int = 0) -> Column | None:
    """A generated column reading `source`; `variant` picks another expression, for
    shards that differ in it."""
    q = quote_identifier(source.name)
    stored = r.random() < 0.5
    if source.type.family == Family.INTEGER and source.generated is None:
        modulus = (97, 89, 83)[variant % 3]
        return Column(name, ColumnType(Family.INTEGER, "bigint"), nullable=True,
                      generated=Generated(f"{q} % {modulus}", stored))
    if source.type.name == "varchar" and source.generated is None:  # CHAR: the server refuses LEFT()
        cs, coll = source.type.charset, source.type.collation
        return Column(name, ColumnType(Family.STRING, "varchar", length=8, charset=cs, collation=coll),
                      nullable=True, generated=Generated(f"left({q},{3 + variant % 3})", stored))
    return None


def keyable(column: Column) -> bool:
    t = column.type
    if t.is_text_kind or t.family == Family.JSON:
        return False
    return not (t.name == "varchar" and (t.length or 0) > 255)


def unique_worthy(column: Column) -> bool:
    t = column.type
    if t.family == Family.INTEGER:
        return t.name != "tinyint"
    if t.family == Family.STRING:
        return keyable(column) and (t.length or 0) >= 20
    return t.family in _WIDE_DOMAIN


# -- type moves ------------------------------------------------------------------------------
def widen(r: random.Random, c: Column, indexed: bool) -> Column | None:
    t = c.type
    f = t.family
    if f == Family.INTEGER and INTEGER_BITS[t.name] < 64:
        bits = INTEGER_BITS[t.name]
        wider = [b for b in INTEGER_BY_BITS if b > bits]
        return replace(c, type=replace(t, name=INTEGER_BY_BITS[r.choice(wider)]))
    if f == Family.DECIMAL:
        scale = (t.scale or 0) + r.choice((0, 1))
        return replace(c, type=replace(t, precision=min(65, (t.precision or 10) + r.choice((1, 2, 4))), scale=scale))
    if t.name == "varchar":
        # widening an indexed VARCHAR(255) past the key limit is a known defect class
        length = 1000 if indexed and (t.length or 0) >= 60 and r.random() < 0.6 else (t.length or 1) * 2 + 3
        return replace(c, type=replace(t, length=length))
    if t.name == "char":
        return replace(c, type=replace(t, name="varchar", length=(t.length or 1) + r.choice((0, 5))))
    if t.name in ("tinytext", "text"):
        return replace(c, type=replace(t, name={"tinytext": "text", "text": "mediumtext"}[t.name]))
    if f in (Family.ENUM, Family.SET) and len(t.members) < len(MEMBERS):
        return replace(c, type=replace(t, members=MEMBERS[: len(t.members) + 1]))
    if f in (Family.DATETIME, Family.TIMESTAMP) and (t.fsp or 0) < 6:
        return replace(c, type=replace(t, fsp=6))
    if t.is_character and t.charset in ("latin1", "utf8mb3"):
        return recharset(c, "utf8mb4", "utf8mb4_general_ci")
    return None


def narrow(r: random.Random, c: Column) -> Column | None:
    t = c.type
    f = t.family
    if f == Family.INTEGER and INTEGER_BITS[t.name] > 8:
        bits = INTEGER_BITS[t.name]
        return replace(c, type=replace(t, name=INTEGER_BY_BITS[r.choice([b for b in INTEGER_BY_BITS if b < bits])]))
    if f == Family.DECIMAL and (t.precision or 10) > (t.scale or 0) + 1:
        return replace(c, type=replace(t, precision=(t.precision or 10) - 1))
    if t.name in ("varchar", "char") and (t.length or 1) > 1:
        return replace(c, type=replace(t, length=max(1, (t.length or 1) // 2)))
    if f in (Family.ENUM, Family.SET) and len(t.members) > 1:
        members = t.members[:-1]
        default = c.default
        if default is not None and not default.is_null and default.sql.strip("'") not in members:
            default = None if not c.nullable else NULL_DEFAULT
        return replace(c, type=replace(t, members=members), default=default)
    if t.is_character and t.charset == "utf8mb4":
        return recharset(c, *r.choice(CHARSETS[:2]))
    if f in (Family.DATETIME, Family.TIMESTAMP) and t.fsp:
        return replace(c, type=replace(t, fsp=0))
    return None


def recharset(c: Column, cs: str, coll: str) -> Column:
    return replace(c, type=replace(c.type, charset=cs, collation=coll))


def retype(r: random.Random, c: Column) -> Column:
    """Another type, likely another family: a conflict unless every shard follows."""
    t = random_type(r)
    default = c.default
    if default is not None and not default.is_null:
        default = literal_default(r, t)
    if default is None and c.nullable:
        default = NULL_DEFAULT
    return replace(c, type=t, default=default)
