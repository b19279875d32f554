"""A row filter's condition (`filters.rows`, DM's expression filter): SQL text read
once with sqlglot (MySQL dialect) into a Python function of a row, which answers as
MariaDB's `SELECT (condition)` would on that row (replicator/row_values.py holds the
server's conversions). Two steps, as two errors are told at two times: `parse_condition`
refuses what no table could evaluate (a syntax error, a subquery, a function outside
the supported set, one whose value changes from call to call) when the config is read;
`Condition.compile` refuses a column the table does not have, when its schema is known
(`check`, the daemon's start, a backfill)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

import sqlglot
from sqlglot import exp

from lattice import Family, Table
from replicator import row_values as rv
from replicator.row_values import Value

Row = Mapping[str, Value]  # column name, lowercased -> value
Evaluate = Callable[[Row], Value]

SUPPORTED = (
    "comparisons (= <=> != <> < <= > >=), AND, OR, NOT, XOR, IS [NOT] NULL|TRUE|FALSE, "
    "IN, BETWEEN, LIKE, + - * / DIV MOD, CONCAT, LOWER, UPPER, LENGTH, CHAR_LENGTH, "
    "SUBSTRING, TRIM, COALESCE, IFNULL, IF, CASE"
)
_NONDETERMINISTIC = frozenset(
    (
        "NOW",
        "SYSDATE",
        "RAND",
        "UUID",
        "UUID_SHORT",
        "CURDATE",
        "CURTIME",
        "CURRENT_DATE",
        "CURRENT_TIME",
        "CURRENT_TIMESTAMP",
        "LOCALTIME",
        "LOCALTIMESTAMP",
        "UTC_DATE",
        "UTC_TIME",
        "UTC_TIMESTAMP",
        "UNIX_TIMESTAMP",
        "CONNECTION_ID",
        "USER",
        "CURRENT_USER",
        "SESSION_USER",
        "SYSTEM_USER",
        "LAST_INSERT_ID",
        "ROW_COUNT",
        "FOUND_ROWS",
        "SLEEP",
        "BENCHMARK",
        "DATABASE",
        "SCHEMA",
        "VERSION",
    )
)
_NONDETERMINISTIC_NODES = (
    exp.Rand,
    exp.Uuid,
    exp.CurrentTimestamp,
    exp.CurrentDate,
    exp.CurrentTime,
    exp.CurrentUser,
)
# how strongly a value's collation holds (the server's derivation): a column's over a literal's
_COLUMN, _LITERAL, _NUMERIC = 2, 4, 5


class ConditionError(ValueError):
    """A condition that cannot be evaluated; the message says what and how to fix it."""


@dataclass(frozen=True)
class Condition:
    """A parsed condition; `text` as written, which the backfill's reads push down."""

    text: str
    tree: exp.Expression = field(compare=False, repr=False)
    columns: tuple[str, ...] = ()  # the columns it reads, lowercased

    def compile(self, table: Table) -> Callable[[Row], int | None]:
        """The condition over rows of `table`: 1, 0 or None (NULL). ConditionError
        names a column the table does not have."""
        columns = {c.name.lower(): c for c in table.columns}
        missing = [c for c in self.columns if c not in columns]
        if missing:
            have = ", ".join(c.name for c in table.columns)
            raise ConditionError(f"no column {missing[0]!r} in {table.name} (its columns: {have})")
        node = _Compiler(columns).compile(self.tree)
        return lambda row: rv.truth(node.fn(row))


def parse_condition(text: str) -> Condition:
    """The condition `text`, or ConditionError saying why it cannot be evaluated."""
    if not isinstance(text, str) or not text.strip():
        raise ConditionError("expected a SQL condition such as \"status = 'deleted'\"")
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.CRITICAL)  # (it logs what it falls back on; we refuse it instead)
    try:
        trees = sqlglot.parse(text, read="mysql")
    except sqlglot.errors.SqlglotError as exc:
        raise ConditionError(f"not a SQL condition: {_parse_error(exc)}") from None
    finally:
        logger.setLevel(level)
    if len(trees) != 1 or trees[0] is None or isinstance(trees[0], exp.Block):
        raise ConditionError("expected one condition, not several statements")
    tree = trees[0]
    for node in tree.walk():
        _check_node(node)
    columns = tuple(dict.fromkeys(c.name.lower() for c in tree.find_all(exp.Column)))
    # compiled once over no table: what it uses is checked now, its columns later
    _Compiler(None).compile(tree)
    return Condition(text, tree, columns)


def _parse_error(exc: Exception) -> str:
    """Sqlglot's message without its class names: "Required keyword: 'expression' missing
    for EQ. Line 1, Col: 3." """
    first = str(exc).splitlines()[0]
    return re.sub(r"<class 'sqlglot\.[\w.]*?\.(\w+)'>", r"\1", first)


def _check_node(node: exp.Expression) -> None:
    if node.comments:
        raise ConditionError("comments are not allowed in a condition; remove them")
    if isinstance(node, exp.Subquery | exp.Select | exp.Exists | exp.Any | exp.All):
        raise ConditionError("a subquery is not supported: a condition reads only the row itself")
    if isinstance(node, exp.Command | exp.Placeholder | exp.Parameter | exp.SessionParameter):
        raise ConditionError(f"not a condition: {node.sql(dialect='mysql')}")
    name = _function_name(node)
    if isinstance(node, _NONDETERMINISTIC_NODES) or name in _NONDETERMINISTIC:
        raise ConditionError(
            f"{name or node.key.upper()}() is not deterministic: the stream, the backfill and "
            "verify would each decide differently; use the row's own columns"
        )
    if isinstance(node, exp.Column) and node.table:
        raise ConditionError(f"write {node.name} without its table name ({node.sql(dialect='mysql')})")


def _function_name(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Anonymous):
        return str(node.this).upper()
    if isinstance(node, exp.Func):
        return node.sql_name().upper()
    return None


@dataclass(frozen=True)
class _Node:
    fn: Evaluate
    strength: int = _NUMERIC  # the collation's derivation, for strings
    ci: bool = True  # case-insensitive (a _ci collation); False: _bin, _cs or binary
    charset: str = "utf8mb4"


def _aggregate(*nodes: _Node) -> tuple[int, bool]:
    """The collation the server gives an operation over these values: the strongest
    derivation's; between equals, a _bin one's (the binary collation of a charset wins).
    As (derivation, case-insensitive)."""
    strength = min(n.strength for n in nodes)
    return strength, all(n.ci for n in nodes if n.strength == strength)


def _collation(*nodes: _Node) -> bool:
    """Whether comparing these values ignores case."""
    return _aggregate(*nodes)[1]


class _Compiler:
    """Sqlglot's tree into closures; `columns` None checks what the tree uses only."""

    def __init__(self, columns: Mapping[str, object] | None):
        self.columns = columns

    def compile(self, node: exp.Expression) -> _Node:
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            raise ConditionError(
                f"{_describe(node)} is not supported in a row filter; supported: {SUPPORTED}"
            )
        return method(node)

    def _all(self, nodes) -> list[_Node]:
        return [self.compile(n) for n in nodes]

    # -- leaves
    def _Column(self, node: exp.Column) -> _Node:
        name = node.name.lower()
        if self.columns is None:
            return _Node(lambda row: None)
        column = self.columns[name]
        t = column.type
        if t.family == Family.BINARY or t.charset == "binary":
            return _Node(lambda row: row.get(name), _COLUMN, False, "binary")
        if t.family in (Family.STRING, Family.ENUM, Family.SET, Family.JSON):
            collation = (t.collation or "").lower()
            ci = not collation.endswith(("_bin", "_cs"))
            return _Node(lambda row: row.get(name), _COLUMN, ci, t.charset or "utf8mb4")
        return _Node(lambda row: row.get(name))

    def _Literal(self, node: exp.Literal) -> _Node:
        if node.is_string:
            text = node.this
            return _Node(lambda row: text, _LITERAL)
        value = _number(node.this)
        return _Node(lambda row: value)

    def _Null(self, node: exp.Null) -> _Node:
        return _Node(lambda row: None)

    def _Boolean(self, node: exp.Boolean) -> _Node:
        value = int(bool(node.this))
        return _Node(lambda row: value)

    def _HexString(self, node: exp.HexString) -> _Node:
        raw = bytes.fromhex(node.this if len(node.this) % 2 == 0 else "0" + node.this)
        return _Node(lambda row: raw, _LITERAL, False, "binary")

    def _Paren(self, node: exp.Paren) -> _Node:
        return self.compile(node.this)

    # -- logic
    def _And(self, node: exp.And) -> _Node:
        a, b = self._all((node.this, node.expression))

        def fn(row: Row) -> Value:
            x = rv.truth(a.fn(row))
            if x == 0:
                return 0
            y = rv.truth(b.fn(row))
            return 0 if y == 0 else None if x is None or y is None else 1

        return _Node(fn)

    def _Or(self, node: exp.Or) -> _Node:
        a, b = self._all((node.this, node.expression))

        def fn(row: Row) -> Value:
            x = rv.truth(a.fn(row))
            if x == 1:
                return 1
            y = rv.truth(b.fn(row))
            return 1 if y == 1 else None if x is None or y is None else 0

        return _Node(fn)

    def _Xor(self, node: exp.Xor) -> _Node:
        a, b = self._all((node.this, node.expression))

        def fn(row: Row) -> Value:
            x, y = rv.truth(a.fn(row)), rv.truth(b.fn(row))
            return None if x is None or y is None else x ^ y

        return _Node(fn)

    def _Not(self, node: exp.Not) -> _Node:
        a = self.compile(node.this)

        def fn(row: Row) -> Value:
            x = rv.truth(a.fn(row))
            return None if x is None else 1 - x

        return _Node(fn)

    def _Is(self, node: exp.Is) -> _Node:
        a = self.compile(node.this)
        other = node.expression
        if isinstance(other, exp.Null):
            return _Node(lambda row: int(a.fn(row) is None))
        if isinstance(other, exp.Boolean):
            wanted = int(bool(other.this))
            return _Node(lambda row: int(rv.truth(a.fn(row)) == wanted))
        raise ConditionError(f"IS {other.sql(dialect='mysql')} is not supported; use IS NULL, TRUE or FALSE")

    # -- comparison
    def _compare(self, node: exp.Binary, test: Callable[[int], bool]) -> _Node:
        a, b = self._all((node.this, node.expression))
        ci = _collation(a, b)

        def fn(row: Row) -> Value:
            order = rv.compare(a.fn(row), b.fn(row), ci)
            return None if order is None else int(test(order))

        return _Node(fn)

    def _EQ(self, node):
        return self._compare(node, lambda o: o == 0)

    def _NEQ(self, node):
        return self._compare(node, lambda o: o != 0)

    def _LT(self, node):
        return self._compare(node, lambda o: o < 0)

    def _LTE(self, node):
        return self._compare(node, lambda o: o <= 0)

    def _GT(self, node):
        return self._compare(node, lambda o: o > 0)

    def _GTE(self, node):
        return self._compare(node, lambda o: o >= 0)

    def _NullSafeEQ(self, node: exp.NullSafeEQ) -> _Node:
        a, b = self._all((node.this, node.expression))
        ci = _collation(a, b)

        def fn(row: Row) -> Value:
            x, y = a.fn(row), b.fn(row)
            if x is None or y is None:
                return int(x is None and y is None)
            return int(rv.compare(x, y, ci) == 0)

        return _Node(fn)

    def _In(self, node: exp.In) -> _Node:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise ConditionError("IN takes a list of values here, not a subquery")
        a = self.compile(node.this)
        items = self._all(node.expressions)
        ci = _collation(a, *items)  # (one collation for the whole list, as the server's)

        def fn(row: Row) -> Value:
            x = a.fn(row)
            if x is None:
                return None
            unknown = False
            for item in items:
                order = rv.compare(x, item.fn(row), ci)
                if order == 0:
                    return 1
                unknown = unknown or order is None
            return None if unknown else 0

        return _Node(fn)

    def _Between(self, node: exp.Between) -> _Node:
        a, low, high = self._all((node.this, node.args["low"], node.args["high"]))
        ci = _collation(a, low, high)

        def fn(row: Row) -> Value:
            x = a.fn(row)
            above, below = rv.compare(x, low.fn(row), ci), rv.compare(x, high.fn(row), ci)
            if (above is not None and above < 0) or (below is not None and below > 0):
                return 0
            return None if above is None or below is None else 1

        return _Node(fn)

    def _Like(self, node: exp.Like, escape: str = "\\") -> _Node:
        a, b = self._all((node.this, node.expression))
        ci = _collation(a, b)
        negate = bool(node.args.get("negate"))

        def fn(row: Row) -> Value:
            found = rv.like(a.fn(row), b.fn(row), escape, ci)
            return None if found is None else (1 - found if negate else found)

        return _Node(fn)

    def _Escape(self, node: exp.Escape) -> _Node:
        char = node.expression
        if not isinstance(node.this, exp.Like) or not (isinstance(char, exp.Literal) and char.is_string):
            raise ConditionError("ESCAPE takes a one-character string after LIKE")
        if len(char.this) != 1:
            raise ConditionError(f"ESCAPE {char.sql(dialect='mysql')}: one character is wanted")
        return self._Like(node.this, char.this)

    # -- arithmetic
    def _arith(self, node: exp.Binary, op: Callable[[Value, Value], Value]) -> _Node:
        a, b = self._all((node.this, node.expression))
        return _Node(lambda row: op(a.fn(row), b.fn(row)))

    def _Add(self, node):
        return self._arith(node, rv.add)

    def _Sub(self, node):
        return self._arith(node, rv.subtract)

    def _Mul(self, node):
        return self._arith(node, rv.multiply)

    def _Div(self, node):
        return self._arith(node, rv.divide)

    def _IntDiv(self, node):
        return self._arith(node, rv.int_divide)

    def _Mod(self, node):
        return self._arith(node, rv.modulo)

    def _Neg(self, node: exp.Neg) -> _Node:
        inner = node.this
        if isinstance(inner, exp.Literal) and not inner.is_string:
            value = -_number(inner.this)
            return _Node(lambda row: value)
        a = self.compile(inner)
        return _Node(lambda row: rv.negate(a.fn(row)))

    # -- functions
    def _Concat(self, node: exp.Concat) -> _Node:
        parts = self._all(node.expressions)
        return _Node(lambda row: rv.concat([p.fn(row) for p in parts]), *_aggregate(*parts))

    def _string_fn(self, node: exp.Func, op: Callable[[Value], Value]) -> _Node:
        a = self.compile(node.this)
        return _Node(lambda row: op(a.fn(row)), min(a.strength, _LITERAL), a.ci, a.charset)

    def _Lower(self, node):
        return self._string_fn(node, rv.lower)

    def _Upper(self, node):
        return self._string_fn(node, rv.upper)

    def _Length(self, node: exp.Length) -> _Node:
        a = self.compile(node.this)
        if node.args.get("binary"):
            charset = a.charset
            return _Node(lambda row: rv.octet_length(a.fn(row), charset))
        return _Node(lambda row: rv.char_length(a.fn(row)))

    def _Substring(self, node: exp.Substring) -> _Node:
        a, start = self._all((node.this, node.args["start"]))
        length = node.args.get("length")
        if length is None:
            return _Node(lambda row: rv.substring(a.fn(row), start.fn(row)), a.strength, a.ci, a.charset)
        n = self.compile(length)
        return _Node(
            lambda row: rv.substring(a.fn(row), start.fn(row), n.fn(row), has_length=True),
            a.strength,
            a.ci,
            a.charset,
        )

    def _Trim(self, node: exp.Trim) -> _Node:
        a = self.compile(node.this)
        removed = node.args.get("expression")
        cut = self.compile(removed) if removed is not None else _Node(lambda row: " ")
        position = str(node.args.get("position") or "BOTH").upper()
        leading, trailing = position in ("BOTH", "LEADING"), position in ("BOTH", "TRAILING")
        return _Node(
            lambda row: rv.trim(a.fn(row), cut.fn(row), leading, trailing), a.strength, a.ci, a.charset
        )

    def _Coalesce(self, node: exp.Coalesce) -> _Node:
        parts = self._all([node.this, *node.expressions])

        def fn(row: Row) -> Value:
            for part in parts:
                value = part.fn(row)
                if value is not None:
                    return value
            return None

        return _Node(fn, *_aggregate(*parts))

    def _If(self, node: exp.If) -> _Node:
        test, yes = self._all((node.this, node.args["true"]))
        no = self.compile(node.args["false"]) if node.args.get("false") is not None else _Node(lambda r: None)
        return _Node(
            lambda row: yes.fn(row) if rv.truth(test.fn(row)) == 1 else no.fn(row), *_aggregate(yes, no)
        )

    def _Case(self, node: exp.Case) -> _Node:
        subject = self.compile(node.this) if node.this is not None else None
        whens = [(self.compile(i.this), self.compile(i.args["true"])) for i in node.args["ifs"]]
        default = node.args.get("default")
        otherwise = self.compile(default) if default is not None else _Node(lambda row: None)
        results = [t for _, t in whens] + [otherwise]
        ci = _collation(subject, *(w for w, _ in whens)) if subject is not None else True

        def fn(row: Row) -> Value:
            value = subject.fn(row) if subject is not None else None
            for when, then in whens:
                if subject is None:
                    hit = rv.truth(when.fn(row)) == 1
                else:
                    hit = rv.compare(value, when.fn(row), ci) == 0
                if hit:
                    return then.fn(row)
            return otherwise.fn(row)

        return _Node(fn, *_aggregate(*results))


def _number(text: str) -> int | Decimal | float:
    if "e" in text.lower():
        return float(text)
    return Decimal(text) if "." in text else int(text)


def _describe(node: exp.Expression) -> str:
    name = _function_name(node)
    if name:
        return f"function {name}()"
    return f"{node.sql(dialect='mysql')!r}"


def row_of_literals(
    columns: tuple[str, ...], values: tuple[str, ...], wanted: tuple[str, ...]
) -> dict[str, Value]:
    """The columns a condition reads of a row of the stream's literals."""
    out: dict[str, Value] = {}
    for name, text in zip(columns, values, strict=True):
        key = name.lower()
        if key in wanted:
            out[key] = rv.from_literal(text)
    return out
