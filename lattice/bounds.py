"""Whether every value a generated column's expression computes fits the column's type,
for the few forms where that can be told without the rows (docs/design.md "Generated columns"). A value
that does not fit is cut to fit when MariaDB computes it on read
(VIRTUAL, unindexed), and refused when it computes it on write (STORED, or indexed):
so an index added on a VIRTUAL column refuses no row exactly when every value fits.

The forms: a column itself, `column % N` of an integer column, and `LEFT(column, n)`
(or `SUBSTRING(column, 1, n)`) of a string, ENUM or SET column in the target's character
set (or any, into utf8mb4), or of a number's text or members spelt in ASCII in any.
Anything else may not fit."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from lattice.charsets import recoding
from lattice.flavor import Flavor
from lattice.model import ColumnType, Family, Table, integer_range
from lattice.typejoin import ColumnTypes


def always_fits(expression: str, table: Table, target: ColumnType, flavor: Flavor) -> bool:
    try:
        tree = sqlglot.parse_one(expression, read="mysql")
    except sqlglot.errors.SqlglotError:
        return False
    while isinstance(tree, exp.Paren):
        tree = tree.this
    if isinstance(tree, exp.Column):
        source = _column_type(tree, table)
        return source is not None and ColumnTypes(flavor).leq(source, target)
    if isinstance(tree, exp.Mod):
        return _remainder_fits(tree, table, target)
    if isinstance(tree, exp.Left):
        return _prefix_fits(tree.this, _integer(tree.expression), table, target)
    if isinstance(tree, exp.Substring) and _integer(tree.args.get("start")) == 1:
        return _prefix_fits(tree.this, _integer(tree.args.get("length")), table, target)
    return False


def _remainder_fits(tree: exp.Mod, table: Table, target: ColumnType) -> bool:
    source, modulus = _column_type(tree.this, table), _integer(tree.expression)
    if source is None or source.family != Family.INTEGER or not modulus or target.family != Family.INTEGER:
        return False
    largest = abs(modulus) - 1  # the sign is the dividend's
    if target.unsigned and not source.unsigned:
        return False
    return largest <= integer_range(target)[1]


def _prefix_fits(column: exp.Expression, length: int | None, table: Table, target: ColumnType) -> bool:
    source = _column_type(column, table)
    if source is None or length is None or target.name not in ("char", "varchar"):
        return False  # TEXT types count bytes
    # a number's text is digits, a sign and a point: characters of every set (F159), as
    # are members spelt in ASCII (F170); other text fits a set holding all its characters
    number = source.family in (Family.INTEGER, Family.DECIMAL)
    ascii_members = source.family in (Family.ENUM, Family.SET) and all(m.isascii() for m in source.members)
    text = source.family in (Family.STRING, Family.ENUM, Family.SET)
    same_set = source.charset == target.charset  # the table's default too, unnamed
    held = same_set or recoding(source.charset, target.charset) is not None
    if not (number or ascii_members or (text and held)):
        return False
    return length <= (target.length or 1)


def _column_type(node: exp.Expression, table: Table) -> ColumnType | None:
    if not isinstance(node, exp.Column):
        return None
    column = table.column(node.name)
    return None if column is None or column.generated is not None else column.type


def _integer(node: exp.Expression | None) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return int(node.this)
        except ValueError:
            return None
    return None
