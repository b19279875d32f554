"""The functions a condition may call (CONCAT, LOWER, UPPER, LENGTH, CHAR_LENGTH, SUBSTRING,
TRIM, COALESCE, IFNULL), IF and CASE; a string's result keeps its operand's collation."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlglot import exp

from replicator import row_values as rv
from replicator.row_condition.node import LITERAL, Node, Row, aggregate, collation
from replicator.row_values import Value

if TYPE_CHECKING:
    from replicator.row_condition.compiler import Compiler


def concat(c: Compiler, node: exp.Concat) -> Node:
    parts = c.all(node.expressions)
    return Node(lambda row: rv.concat([p.fn(row) for p in parts]), *aggregate(*parts))


def _string_fn(op: Callable[[Value], Value]) -> Callable[[Compiler, exp.Func], Node]:
    """The function `op` of one string."""

    def compile_string_fn(c: Compiler, node: exp.Func) -> Node:
        a = c.compile(node.this)
        return Node(lambda row: op(a.fn(row)), min(a.strength, LITERAL), a.ci, a.charset)

    return compile_string_fn


def length(c: Compiler, node: exp.Length) -> Node:
    a = c.compile(node.this)
    if node.args.get("binary"):
        charset = a.charset
        return Node(lambda row: rv.octet_length(a.fn(row), charset))
    return Node(lambda row: rv.char_length(a.fn(row)))


def substring(c: Compiler, node: exp.Substring) -> Node:
    a, start = c.all((node.this, node.args["start"]))
    length = node.args.get("length")
    if length is None:
        return Node(lambda row: rv.substring(a.fn(row), start.fn(row)), a.strength, a.ci, a.charset)
    n = c.compile(length)
    return Node(
        lambda row: rv.substring(a.fn(row), start.fn(row), n.fn(row), has_length=True),
        a.strength,
        a.ci,
        a.charset,
    )


def trim(c: Compiler, node: exp.Trim) -> Node:
    a = c.compile(node.this)
    removed = node.args.get("expression")
    cut = c.compile(removed) if removed is not None else Node(lambda row: " ")
    position = str(node.args.get("position") or "BOTH").upper()
    leading, trailing = position in ("BOTH", "LEADING"), position in ("BOTH", "TRAILING")
    return Node(lambda row: rv.trim(a.fn(row), cut.fn(row), leading, trailing), a.strength, a.ci, a.charset)


def coalesce(c: Compiler, node: exp.Coalesce) -> Node:
    parts = c.all([node.this, *node.expressions])

    def fn(row: Row) -> Value:
        for part in parts:
            value = part.fn(row)
            if value is not None:
                return value
        return None

    return Node(fn, *aggregate(*parts))


def if_(c: Compiler, node: exp.If) -> Node:
    test, yes = c.all((node.this, node.args["true"]))
    no = c.compile(node.args["false"]) if node.args.get("false") is not None else Node(lambda r: None)
    return Node(lambda row: yes.fn(row) if rv.truth(test.fn(row)) == 1 else no.fn(row), *aggregate(yes, no))


def case(c: Compiler, node: exp.Case) -> Node:
    subject = c.compile(node.this) if node.this is not None else None
    whens = [(c.compile(i.this), c.compile(i.args["true"])) for i in node.args["ifs"]]
    default = node.args.get("default")
    otherwise = c.compile(default) if default is not None else Node(lambda row: None)
    results = [t for _, t in whens] + [otherwise]
    ci = collation(subject, *(w for w, _ in whens)) if subject is not None else True

    def fn(row: Row) -> Value:
        value = subject.fn(row) if subject is not None else None
        for when, then in whens:
            hit = rv.truth(when.fn(row)) == 1 if subject is None else rv.compare(value, when.fn(row), ci) == 0
            if hit:
                return then.fn(row)
        return otherwise.fn(row)

    return Node(fn, *aggregate(*results))


HANDLERS = {
    exp.Concat: concat,
    exp.Lower: _string_fn(rv.lower),
    exp.Upper: _string_fn(rv.upper),
    exp.Length: length,
    exp.Substring: substring,
    exp.Trim: trim,
    exp.Coalesce: coalesce,
    exp.If: if_,
    exp.Case: case,
}
