"""The type lattice, one row per rule: column definition a, column definition b,
flavor, and the joined definition (or the conflict's wording)."""

from __future__ import annotations

import pytest

from lattice import (
    JoinConflict,
    Table,
    compare,
    converts_through,
    converts_values,
    join,
    parse_table,
)


def column(definition: str, charset: str = "utf8mb4") -> Table:
    return parse_table(f"CREATE TABLE t (c {definition}) DEFAULT CHARSET={charset}")


CONFLICT = "conflict"

# (rule, flavor, a, b, joined definition or CONFLICT + wording)
ROWS = [
    # docs/design.md "Integer types"
    ("int widens to bigint", "mariadb", "int", "bigint", "bigint"),
    ("tinyint < smallint", "tidb", "tinyint", "smallint", "smallint"),
    ("unsigned ∨ signed = wider signed (mysql)", "mysql", "int unsigned", "int", "bigint"),
    ("tinyint unsigned ∨ tinyint = smallint", "mariadb", "tinyint unsigned", "tinyint", "smallint"),
    ("smallint unsigned ∨ bigint = bigint", "mariadb", "smallint unsigned", "bigint", "bigint"),
    ("unsigned ∨ unsigned keeps unsigned", "mariadb", "int unsigned", "smallint unsigned", "int unsigned"),
    ("bigint unsigned ∨ signed has no join", "mariadb", "bigint unsigned", "int", CONFLICT + "no integer type"),
    ("tidb: no signedness change", "tidb", "int unsigned", "int", CONFLICT + "signedness"),
    ("zerofill only pads: dropped when one side lacks it", "mariadb", "int zerofill", "int unsigned",
     "int unsigned"),
    # docs/design.md "Precision" and "Versions": exact widenings
    ("decimal: most integer digits + largest scale", "mariadb", "decimal(6,2)", "decimal(7,4)",
     "decimal(8,4)"),
    ("decimal: same on mysql", "mysql", "decimal(10,0)", "decimal(5,5)", "decimal(15,5)"),
    ("decimal: past 65 digits", "mariadb", "decimal(65,0)", "decimal(30,30)", CONFLICT + "65"),
    ("decimal: tidb cannot change precision", "tidb", "decimal(6,2)", "decimal(7,4)", CONFLICT + "precision"),
    ("decimal: tidb equal decimals join", "tidb", "decimal(6,2)", "decimal(6,2)", "decimal(6,2)"),
    ("float < double (docs/design.md 'Versions')", "mariadb", "float", "double", "double"),
    ("float < double on tidb too", "tidb", "float", "double", "double"),
    ("float(M,D) differing loses the (M,D)", "mariadb", "float(7,2)", "float(7,3)", "float"),
    ("more fractional seconds (docs/design.md 'Versions')", "mariadb", "datetime", "datetime(3)", "datetime(3)"),
    ("time fsp", "tidb", "time(2)", "time(6)", "time(6)"),
    ("timestamp fsp", "mysql", "timestamp(1)", "timestamp(4)", "timestamp(4)"),
    ("bit widens", "mariadb", "bit(3)", "bit(9)", "bit(9)"),
    # docs/design.md "Other types": independent
    ("float vs datetime (S3/S4)", "mariadb", "float", "datetime", CONFLICT + "cannot join float with datetime"),
    ("datetime vs timestamp", "mariadb", "datetime", "timestamp", CONFLICT),
    ("date vs datetime", "mariadb", "date", "datetime", CONFLICT),
    ("year vs int", "mariadb", "year", "int", CONFLICT),
    ("decimal vs double", "mariadb", "decimal(5,2)", "double", CONFLICT),
    ("json vs text", "mariadb", "json", "longtext", CONFLICT),
    ("text vs datetime (the seed's text/datetime case)", "mariadb", "text", "datetime", CONFLICT),
    # docs/design.md "Character types"
    ("char < varchar", "mariadb", "char(5)", "varchar(3)", "varchar(5)"),
    ("char ∨ char", "mariadb", "char(5)", "char(9)", "char(9)"),
    ("varchar widens", "tidb", "varchar(10)", "varchar(20)", "varchar(20)"),
    ("varchar(255) ∨ text = text (utf8mb4, mysql/mariadb)", "mariadb", "varchar(255)", "text", "text"),
    ("tidb: text and varchar(255) cannot be joined for utf8mb4 (seed note)", "tidb", "varchar(255)", "text",
     CONFLICT + "docs/design.md, 'Character types'"),
    ("tidb: latin1 varchar ∨ text joins", "tidb", "varchar(10) character set latin1",
     "text character set latin1", "text character set latin1"),
    ("varchar ∨ tinytext costs 4 bytes a character", "mariadb", "varchar(100)", "tinytext", "text"),
    ("tinytext < text < mediumtext", "mariadb", "tinytext", "mediumtext", "mediumtext"),
    ("varchar(65532) exists only for latin1: utf8mb4 goes to text", "mariadb",
     "varchar(20000) character set utf8mb3", "varchar(10)", "mediumtext"),
    ("char(n) charset binary is binary(n)", "mariadb", "char(4) character set binary", "binary(4)", "binary(4)"),
    ("binary pads: binary(3) ∨ binary(5) = varbinary(5)", "mariadb", "binary(3)", "binary(5)", "varbinary(5)"),
    ("binary < varbinary", "mariadb", "binary(3)", "varbinary(2)", "varbinary(3)"),
    ("varbinary < blob", "mariadb", "varbinary(100)", "tinyblob", "tinyblob"),
    ("blob vs text", "mariadb", "blob", "text", CONFLICT),
    ("string vs binary", "mariadb", "varchar(5)", "varbinary(5)", CONFLICT),
    # docs/design.md "Character sets"
    ("utf8 < utf8mb4", "mariadb", "varchar(5) character set utf8mb3 collate utf8mb3_general_ci",
     "varchar(5) character set utf8mb4 collate utf8mb4_general_ci",
     "varchar(5) character set utf8mb4 collate utf8mb4_general_ci"),
    ("utf8_bin ∨ utf8mb4_bin = utf8mb4_bin", "mariadb", "varchar(5) collate utf8mb3_bin",
     "varchar(5) collate utf8mb4_bin", "varchar(5) collate utf8mb4_bin"),
    ("latin1 vs utf8mb4", "mariadb", "varchar(5) character set latin1", "varchar(5)", CONFLICT + "character sets"),
    ("collations that sort differently", "mariadb", "varchar(5) collate utf8mb4_bin",
     "varchar(5) collate utf8mb4_general_ci", CONFLICT + "collations"),
    # docs/design.md "Sets and enums"
    ("enum append at the end", "mariadb", "enum('a','b')", "enum('a','b','c')", "enum('a','b','c')"),
    ("enum reordered", "mariadb", "enum('a','b')", "enum('b','a')", CONFLICT + "appending"),
    ("enum inserted in the middle", "tidb", "enum('a','c')", "enum('a','b','c')", CONFLICT),
    ("set append", "mysql", "set('x')", "set('x','y')", "set('x','y')"),
    ("enum vs set", "mariadb", "enum('a')", "set('a')", CONFLICT),
    # spatial
    ("point ∨ linestring = geometry", "mariadb", "point", "linestring", "geometry"),
]


@pytest.mark.parametrize(("rule", "flavor", "a", "b", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_type_rule(rule, flavor, a, b, expected):
    ta, tb = column(a), column(b)
    result = join(ta, tb, flavor)
    if expected.startswith(CONFLICT):
        assert isinstance(result, JoinConflict), f"expected a conflict, got {result}"
        assert result.column == "c"
        assert expected[len(CONFLICT):] in result.reason
        assert compare(ta, tb, flavor) == "incomparable"
        return
    assert not isinstance(result, JoinConflict), str(result)
    assert result.column("c").type == column(expected).column("c").type
    # the join is above both sides, and commutes
    assert compare(ta, result, flavor) in (-1, 0)
    assert compare(tb, result, flavor) in (-1, 0)
    assert join(tb, ta, flavor) == result


# (rule, the value's type, the type holding it, the type it is converted to, converts otherwise)
THROUGH = [
    ("a decimal's scale padded shows in text", "decimal(6,2)", "decimal(8,4)", "varchar(40)", True),
    ("the same scale reads alike", "decimal(6,2)", "decimal(9,2)", "varchar(40)", False),
    ("an integer in a decimal with decimals", "int", "decimal(12,2)", "varchar(40)", True),
    ("an integer in a wider integer", "smallint", "bigint", "varchar(40)", False),
    ("a time's fraction padded", "datetime", "datetime(3)", "varchar(40)", True),
    ("a timestamp in a datetime of its fraction", "timestamp(3)", "datetime(3)", "varchar(40)", False),
    ("a date at midnight", "date", "datetime", "varchar(40)", True),
    ("a float in a double", "float", "double", "varchar(40)", True),
    ("bits of more bytes", "bit(3)", "bit(12)", "varbinary(8)", True),
    ("bits of as many bytes", "bit(3)", "bit(7)", "varbinary(8)", False),
    ("text held as text", "varchar(10)", "varchar(40)", "text", False),
    ("an enum's label in a longer list", "enum('x','y')", "enum('x','y','z')", "varchar(40)", False),
    ("an enum's index where its list leads", "enum('x','y')", "enum('x','y','z')", "smallint", False),
    ("an enum's index where it does not", "enum('y','x')", "enum('x','y')", "smallint", True),
    ("a number to a number: the value", "decimal(6,2)", "decimal(8,4)", "double", False),
    ("held in its own type", "decimal(8,4)", "decimal(8,4)", "varchar(40)", False),
    # a shard's own ALTER that keeps a value (L59): its text upstream after the ALTER against
    # the text a string column downstream kept of it before
    ("an integer made a DECIMAL with a scale gains its zeros", "mediumint unsigned", "decimal(14,4)",
     "varchar(21)", True),
    ("a DATETIME made DATETIME(3) gains '.000'", "datetime", "datetime(3)", "varchar(30)", True),
    ("an integer made a DECIMAL without a scale reads alike", "int", "decimal(12,0)", "varchar(21)", False),
    ("a number downstream converts with it", "mediumint unsigned", "decimal(14,4)", "decimal(14,4)", False),
]


@pytest.mark.parametrize(("rule", "value", "held", "to", "otherwise"), THROUGH, ids=[r[0] for r in THROUGH])
def test_converts_through(rule, value, held, to, otherwise):
    """A value held downstream in a wider type than its shard's, then converted (live stories
    seed 22159): whether it may read otherwise than converted from the shard's type."""
    a, b, c = (column(d).column("c").type for d in (value, held, to))
    assert converts_through(a, b, c) is otherwise


# (rule, before, after, whether an ALTER from one to the other may give a value another text)
CONVERTS = [
    ("a widening keeps values", "varchar(10)", "varchar(30)", False),
    ("a CHAR drops a VARCHAR's trailing spaces", "varchar(30)", "char(30)", True),
    ("and a TEXT's", "text", "char(30)", True),
    ("a CHAR's values have none to drop", "char(10)", "char(30)", False),
    ("a VARCHAR keeps a CHAR's values", "char(30)", "varchar(30)", False),
    ("a shorter VARCHAR cuts trailing spaces past its length", "varchar(70)", "varchar(60)", True),
    ("and a TEXT made a VARCHAR", "text", "varchar(255)", True),
    ("a shorter CHAR has none to cut", "char(70)", "char(60)", False),
    ("a TEXT holds a VARCHAR's every character", "varchar(255)", "text", False),
    ("an ENUM made a number holds its indexes", "enum('x','y')", "smallint", True),
    ("a scale cut rounds", "decimal(6,2)", "decimal(6,1)", True),
]


@pytest.mark.parametrize(("rule", "before", "after", "converts"), CONVERTS, ids=[r[0] for r in CONVERTS])
def test_converts_values(rule, before, after, converts):
    a, b = (column(d).column("c").type for d in (before, after))
    assert converts_values(a, b, "mariadb") is converts
