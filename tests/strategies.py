"""Hypothesis strategies for shard tables: a base table and mutations of it, so that
generated pairs and triples often join (random unrelated tables mostly conflict,
which would leave the interesting half of the lattice untested)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from lattice.join import settle
from lattice.literals import RawValue, canonical_default
from lattice.model import (
    NULL_DEFAULT,
    PRIMARY,
    Check,
    Column,
    ColumnType,
    Family,
    Generated,
    Index,
    IndexKind,
    IndexPart,
    Table,
    TableOptions,
)
from lattice.sqltext import canonical_expression

CHARSETS = [("latin1", "latin1_swedish_ci"), ("utf8mb3", "utf8mb3_general_ci"),
            ("utf8mb4", "utf8mb4_general_ci"), ("utf8mb4", "utf8mb4_bin"), ("utf8mb3", "utf8mb3_bin")]
NAMES = ["a", "b", "c", "d", "e", "f"]


def _charset():
    return st.sampled_from(CHARSETS)


@st.composite
def column_types(draw, spatial: bool = True) -> ColumnType:
    kind = draw(st.sampled_from(
        ["int", "int", "decimal", "float", "bit", "char", "varchar", "varchar", "text", "binary", "varbinary",
         "blob", "enum", "set", "year", "date", "time", "datetime", "timestamp", "json"]
        + (["spatial"] if spatial else [])
    ))
    if kind == "int":
        name = draw(st.sampled_from(["tinyint", "smallint", "mediumint", "int", "bigint"]))
        unsigned = draw(st.booleans())
        return ColumnType(Family.INTEGER, name, unsigned=unsigned, zerofill=unsigned and draw(st.booleans()))
    if kind == "decimal":
        scale = draw(st.integers(0, 6))
        precision = draw(st.integers(scale + 1, scale + 12))  # room for the 1.5 default
        return ColumnType(Family.DECIMAL, "decimal", precision=precision, scale=scale,
                          unsigned=draw(st.booleans()))
    if kind == "float":
        name = draw(st.sampled_from(["float", "double"]))
        if draw(st.booleans()):
            return ColumnType(Family.FLOAT, name, precision=7, scale=draw(st.sampled_from([2, 3])))
        return ColumnType(Family.FLOAT, name)
    if kind == "bit":
        return ColumnType(Family.BIT, "bit", length=draw(st.integers(1, 16)))
    if kind in ("char", "varchar", "text"):
        charset, collation = draw(_charset())
        if kind == "text":
            name = draw(st.sampled_from(["tinytext", "text", "mediumtext"]))
            return ColumnType(Family.STRING, name, charset=charset, collation=collation)
        length = draw(st.integers(1, 20 if kind == "char" else 60))
        return ColumnType(Family.STRING, kind, length=length, charset=charset, collation=collation)
    if kind in ("binary", "varbinary"):
        return ColumnType(Family.BINARY, kind, length=draw(st.integers(1, 12)))
    if kind == "blob":
        return ColumnType(Family.BINARY, draw(st.sampled_from(["tinyblob", "blob"])))
    if kind in ("enum", "set"):
        members = ("x", "y", "z", "w")[: draw(st.integers(1, 4))]
        charset, collation = draw(_charset())
        family = Family.ENUM if kind == "enum" else Family.SET
        return ColumnType(family, kind, members=members, charset=charset, collation=collation)
    if kind == "year":
        return ColumnType(Family.YEAR, "year")
    if kind == "date":
        return ColumnType(Family.DATE, "date")
    if kind in ("time", "datetime", "timestamp"):
        return ColumnType(Family(kind), kind, fsp=draw(st.integers(0, 6)))
    if kind == "json":
        return ColumnType(Family.JSON, "json")
    return ColumnType(Family.SPATIAL, draw(st.sampled_from(["point", "geometry", "linestring"])))


_DEFAULT_LITERALS: dict[Family, list[RawValue]] = {
    Family.INTEGER: [RawValue("number", "0"), RawValue("number", "7")],
    Family.DECIMAL: [RawValue("number", "0"), RawValue("number", "1.5")],
    Family.FLOAT: [RawValue("number", "0"), RawValue("number", "2.5")],
    Family.BIT: [RawValue("bit", 1)],
    Family.STRING: [RawValue("string", ""), RawValue("string", "d")],
    Family.BINARY: [RawValue("string", "")],
    Family.ENUM: [RawValue("string", "x")],
    Family.SET: [RawValue("string", ""), RawValue("string", "x")],
    Family.YEAR: [RawValue("number", "2001")],
    Family.DATE: [RawValue("string", "2020-01-02")],
    Family.TIME: [RawValue("string", "01:02:03")],
    Family.DATETIME: [RawValue("string", "2020-01-02 03:04:05"), RawValue("now", 0)],
    Family.TIMESTAMP: [RawValue("string", "2020-01-02 03:04:05"), RawValue("now", 0)],
}


@st.composite
def columns(draw, name: str, spatial: bool = True) -> Column:
    ctype = draw(column_types(spatial))
    nullable = draw(st.booleans())
    if ctype.family == Family.SPATIAL:
        nullable = True  # a NOT NULL geometry cannot be filled by any default
    choices = _DEFAULT_LITERALS.get(ctype.family, [])
    if ctype.family in (Family.JSON, Family.SPATIAL) or ctype.is_text_kind:
        choices = []  # MySQL allows no literal default on these
    default = None
    if choices and draw(st.booleans()):
        raw = draw(st.sampled_from(choices))
        if raw.kind == "now" and (ctype.fsp or 0) != 0:
            raw = RawValue("now", ctype.fsp)
        default = canonical_default(raw, ctype)
    if nullable and default is None:
        default = NULL_DEFAULT
    comment = draw(st.sampled_from([None, None, "note"]))
    return Column(name, ctype, nullable=nullable, default=default, comment=comment)


@st.composite
def generated_columns(draw, name: str) -> Column:
    expression = canonical_expression(draw(st.sampled_from(["`id` + 1", "`id` * 2", "`id` - 1"]))).sql
    return Column(name, ColumnType(Family.INTEGER, "bigint"), nullable=True,
                  generated=Generated(expression, stored=draw(st.booleans())))


def _keyable(column: Column) -> bool:
    t = column.type
    return not (t.is_text_kind or t.family in (Family.JSON, Family.SPATIAL))


@st.composite
def base_tables(draw, spatial: bool = True) -> Table:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    cols = [Column("id", ColumnType(Family.INTEGER, "int"), nullable=False,
                   auto_increment=draw(st.booleans()))]
    for n in names:
        if draw(st.integers(0, 9)) == 0:
            cols.append(draw(generated_columns(n)))
        else:
            cols.append(draw(columns(n, spatial)))
    if any(c.generated for c in cols):
        # MariaDB: a generated column may not read an AUTO_INCREMENT column
        cols[0] = replace(cols[0], auto_increment=False)
    indexes = [Index(PRIMARY, IndexKind.PRIMARY, (IndexPart("id"),))]
    keyable = [c for c in cols[1:] if _keyable(c) and c.generated is None]
    for i, c in enumerate(draw(st.lists(st.sampled_from(keyable), max_size=2, unique_by=lambda c: c.name))
                          if keyable else []):
        kind = draw(st.sampled_from([IndexKind.UNIQUE, IndexKind.PLAIN]))
        comment = draw(st.sampled_from([None, None, "x", "y"]))  # (comments join as options do)
        indexes.append(Index(f"k{i}_{c.name}", kind, (IndexPart(c.name),), comment))
    checks = []
    ints = [c for c in cols[1:] if c.type.family == Family.INTEGER and c.generated is None]
    if ints and draw(st.booleans()):
        c = draw(st.sampled_from(ints))
        expression = canonical_expression(f"`{c.name}` >= 0")
        checks.append(Check(f"chk_{c.name}", expression.sql, True, expression.columns))
    options = TableOptions(engine="InnoDB", charset="utf8mb4", collation="utf8mb4_general_ci")
    return Table("t", tuple(cols), tuple(indexes), tuple(checks), options)


@st.composite
def mutations(draw, table: Table, spatial: bool = True) -> Table:
    """A shard that ran a few ALTERs: columns added, dropped, widened or narrowed,
    nullability flipped, indexes and checks added or dropped."""
    cols = list(table.columns)
    indexes = list(table.indexes)
    checks = list(table.checks)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["add", "drop", "retype", "null", "default", "drop_index", "unique",
                                   "drop_check", "enum", "kin", "kin", "kin", "widen_key", "drop_key"]))
        others = [c for c in cols if c.name != "id"]
        if op == "add":
            free = [n for n in NAMES if n not in {c.name for c in cols}]
            if free:
                cols.append(draw(columns(draw(st.sampled_from(free)), spatial)))
        elif op == "drop" and others:
            victim = draw(st.sampled_from(others))
            cols.remove(victim)
            indexes = [ix for ix in indexes if victim.name not in ix.columns]
            checks = [ch for ch in checks if victim.name not in ch.columns]
        elif op == "retype" and others:
            victim = draw(st.sampled_from(others))
            new = draw(columns(victim.name, spatial))
            cols[cols.index(victim)] = new
            if not _keyable(new):
                indexes = [ix for ix in indexes if victim.name not in ix.columns]
            if new.type.family != Family.INTEGER:
                checks = [ch for ch in checks if victim.name not in ch.columns]
        elif op == "kin" and others:
            victim = draw(st.sampled_from(others))
            if victim.generated is None:
                for _ in range(20):
                    new = draw(columns(victim.name, spatial))
                    if new.type.family == victim.type.family:
                        break
                if new.type.family == victim.type.family:
                    ctype = new.type
                    default = victim.default if victim.default is None or victim.default.is_null else None
                    if ctype.family in (Family.ENUM, Family.SET):
                        ctype = replace(ctype, members=victim.type.members)
                    cols[cols.index(victim)] = replace(victim, type=ctype, default=default or (
                        NULL_DEFAULT if victim.nullable else None))
                    if not _keyable(victim) or not _keyable(new):
                        indexes = [ix for ix in indexes if victim.name not in ix.columns]
        elif op == "null" and others:
            victim = draw(st.sampled_from([c for c in others if c.generated is None] or others))
            if victim.generated is None and victim.type.family != Family.SPATIAL:
                nullable = not victim.nullable
                default = victim.default
                if nullable and default is None:
                    default = NULL_DEFAULT
                if not nullable and default is not None and default.is_null:
                    default = None
                cols[cols.index(victim)] = replace(victim, nullable=nullable, default=default)
        elif op == "default" and others:
            victim = draw(st.sampled_from(others))
            if victim.generated is None and not victim.nullable:
                cols[cols.index(victim)] = replace(victim, default=None)
        elif op == "drop_index" and len(indexes) > 1:
            indexes.remove(draw(st.sampled_from(indexes[1:])))
        elif op == "unique":
            indexes = [replace(ix, kind=IndexKind.UNIQUE) if ix.kind == IndexKind.PLAIN else ix for ix in indexes]
        elif op == "widen_key":
            # issue 46: a shard's key on more columns (the merged key is the union)
            pk = next((ix for ix in indexes if ix.kind == IndexKind.PRIMARY), None)
            fits = [c for c in others if _keyable(c) and c.generated is None and not c.nullable
                    and c.type.family != Family.SPATIAL and pk is not None and c.key not in pk.columns]
            if fits:
                c = draw(st.sampled_from(fits))
                indexes[indexes.index(pk)] = replace(pk, parts=(*pk.parts, IndexPart(c.name)))
        elif op == "drop_key" and draw(st.integers(0, 3)) == 0:
            indexes = [ix for ix in indexes if ix.kind != IndexKind.PRIMARY]
        elif op == "drop_check" and checks:
            checks.pop()
        elif op == "enum":
            for i, c in enumerate(cols):
                if c.type.family == Family.ENUM and len(c.type.members) < 4:
                    members = (*c.type.members, ("x", "y", "z", "w")[len(c.type.members)])
                    cols[i] = replace(c, type=replace(c.type, members=members))
    if draw(st.booleans()):
        cols = [cols[0], *draw(st.permutations(cols[1:]))]
    if not any(ix.kind == IndexKind.PRIMARY for ix in indexes):
        cols[0] = replace(cols[0], auto_increment=False)
    return replace(table, columns=tuple(cols), indexes=tuple(indexes), checks=tuple(checks))


def is_valid(table: Table) -> bool:
    """A table a server would hold: the join's own rules leave it unchanged."""
    try:
        return settle(table) == table
    except Exception:
        return False


@st.composite
def related_tables(draw, count: int, spatial: bool = True) -> list[Table]:
    base = draw(base_tables(spatial))
    tables = [draw(mutations(base, spatial)) for _ in range(count)]
    return tables
