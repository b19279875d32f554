"""Tokens, a cursor for our DDL grammar, literals and expressions.

sqlglot's MySQL tokenizer does the lexing (quotes, backticks, comments, b'..', x'..')
and sqlglot parses every expression (defaults, generated columns, checks) into a
canonical form. The table-level grammar (column attributes, ALTER specs) is ours: the
sqlglot statement parser misreads or rejects too much of MySQL's (TIMESTAMP becomes
TIMESTAMPTZ, REAL becomes FLOAT, `point`, `ADD COLUMN (a, b)`, `CONVERT TO`,
`RENAME TABLE` ...), and errors must name the spec and its position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import sqlglot
from sqlglot import exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.tokens import Token, TokenType

from lattice.flavor import Flavor

_DIALECT = MySQL()  # (its settings: an identifier may start with a digit, `1ea10`)
_TOKENIZER = _DIALECT.tokenizer_class
QUOTED_IDENTIFIER = TokenType.IDENTIFIER
_STRINGISH = {TokenType.STRING, TokenType.NATIONAL_STRING}
_QUOTED = _STRINGISH | {QUOTED_IDENTIFIER, TokenType.HEX_STRING, TokenType.BIT_STRING}


class DDLSyntaxError(ValueError):
    """A statement we cannot read. Carries the statement and the character offset."""

    def __init__(self, message: str, statement: str, offset: int | None):
        self.reason = message
        self.statement = statement
        self.offset = offset
        super().__init__(f"{message}{describe_position(statement, offset)}: {shorten(statement)}")


def describe_position(statement: str, offset: int | None) -> str:
    if offset is None:
        return ""
    line = statement.count("\n", 0, offset) + 1
    col = offset - (statement.rfind("\n", 0, offset) + 1) + 1
    return f" at line {line}, column {col}"


def shorten(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def tokenize(sql: str, *, upstream: Flavor | str = Flavor.MARIADB) -> list[Token]:
    """sqlglot's tokens with two of its habits undone: it swallows everything after
    a command word such as RENAME into one string, and it merges keyword pairs
    (`PRIMARY KEY`, `DOUBLE PRECISION`) into one token. Our grammar wants words.
    What the server executes inside comments is read (see `executed`)."""
    sql = executed(sql, upstream)
    return _split_words(sql, _tokenize_from(sql, 0))


_VERSION = re.compile(r"\d{5,6}")


def executed(sql: str, upstream: Flavor | str = Flavor.MARIADB) -> str:
    """The statement as the server runs it: the markers of executable comments
    (`/*! ... */`, `/*!50100 ... */`, and on MariaDB `/*M! ... */`, `/*M!100500 ... */`)
    become spaces, so their text counts and every offset stays where it was. Other
    comments stay comments, TiDB's `/*T! ... */` too: MySQL and MariaDB ignore it. A
    versioned comment counts whatever the version: the binlog's server ran it."""
    runs_mariadb = Flavor.parse(upstream).rules.runs_mariadb_comments
    out = list(sql)
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"`":
            i = _past_quoted(sql, i)
        elif c == "#" or sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end
            mariadb = runs_mariadb and sql.startswith("/*M!", i)
            marker = 3 if sql.startswith("/*!", i) else 4 if mariadb else 0
            if marker:
                version = _VERSION.match(sql, i + marker)
                start = version.end() if version else i + marker
                out[i:start] = " " * (start - i)
                if end < n:
                    out[end : end + 2] = "  "
            i = end + 2
        else:
            i += 1
    return "".join(out)


def _past_quoted(sql: str, i: int) -> int:
    quote, i = sql[i], i + 1
    while i < len(sql):
        if sql[i] == "\\" and quote != "`":
            i += 2
        elif sql[i] == quote:
            if sql.startswith(quote * 2, i):
                i += 2
            else:
                return i + 1
        else:
            i += 1
    return i


def _tokenize_from(sql: str, offset: int) -> list[Token]:
    try:
        tokens = _TOKENIZER(dialect=_DIALECT).tokenize(sql[offset:])
    except Exception as exc:  # sqlglot raises TokenError with its own wording
        raise DDLSyntaxError(f"cannot tokenize ({exc})", sql, offset or None) from exc
    if offset:
        tokens = [_moved(t, offset) for t in tokens]
    for i, tok in enumerate(tokens):
        if tok.token_type == TokenType.STRING and i > 0 and tokens[i - 1].token_type in _COMMANDS:
            rest = tokens[i - 1].end + 1
            if sql[rest:].lstrip()[:1] not in ("'", '"'):
                return tokens[:i] + _tokenize_from(sql, rest)
    return tokens


_COMMANDS = {TokenType.COMMAND, TokenType.RENAME, TokenType.SHOW, TokenType.EXECUTE, TokenType.FETCH}


def _moved(
    tok: Token,
    offset: int,
    token_type: TokenType | None = None,
    text: str | None = None,
    start: int | None = None,
    end: int | None = None,
) -> Token:
    return Token(
        token_type or tok.token_type,
        tok.text if text is None else text,
        tok.line,
        tok.col,
        (tok.start if start is None else start) + offset,
        (tok.end if end is None else end) + offset,
        tok.comments,
    )


def _split_words(sql: str, tokens: list[Token]) -> list[Token]:
    out: list[Token] = []
    for tok in tokens:
        if tok.token_type in _QUOTED or not any(ch.isspace() for ch in tok.text):
            out.append(tok)
            continue
        for m in re.finditer(r"\S+", sql[tok.start : tok.end + 1]):
            out.append(
                _moved(tok, 0, TokenType.VAR, m.group(), tok.start + m.start(), tok.start + m.end() - 1)
            )
    return out


class Cursor:
    """Walks the tokens of one statement. Words compare case-insensitively; a
    backtick-quoted identifier never matches a keyword. Its parenthesised groups and
    top-level parts, cursors of their own, are `lattice/sqlgroups.py`'s."""

    def __init__(self, sql: str, tokens: list[Token] | None = None, start: int = 0, end: int | None = None):
        self.sql = sql
        self.tokens = tokenize(sql) if tokens is None else tokens
        self.pos = start
        self.end = len(self.tokens) if end is None else end

    # -- inspection ----------------------------------------------------------------
    @property
    def at_end(self) -> bool:
        return self.pos >= self.end

    def peek(self, ahead: int = 0) -> Token | None:
        i = self.pos + ahead
        return self.tokens[i] if i < self.end else None

    def word(self, ahead: int = 0) -> str | None:
        """The upper-cased keyword at the cursor, or None for literals and quoted names."""
        tok = self.peek(ahead)
        if tok is None or tok.token_type in _STRINGISH or tok.token_type == QUOTED_IDENTIFIER:
            return None
        return tok.text.upper()

    def is_word(self, *words: str, ahead: int = 0) -> bool:
        return self.word(ahead) in words

    def is_type(self, token_type: TokenType, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok is not None and tok.token_type == token_type

    def offset(self) -> int:
        tok = self.peek()
        if tok is not None:
            return tok.start
        return self.tokens[self.end - 1].end + 1 if self.end else 0

    # -- consumption -----------------------------------------------------------------
    def next(self) -> Token:
        tok = self.peek()
        if tok is None:
            raise self.error("unexpected end of statement")
        self.pos += 1
        return tok

    def accept(self, *words: str) -> bool:
        """Consume the words if they all follow, in order."""
        for i, w in enumerate(words):
            if self.word(i) != w:
                return False
        self.pos += len(words)
        return True

    def accept_any(self, *words: str) -> str | None:
        w = self.word()
        if w in words:
            self.pos += 1
            return w
        return None

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise self.error(f"expected {' '.join(words)}")

    def accept_type(self, token_type: TokenType) -> Token | None:
        if self.is_type(token_type):
            return self.next()
        return None

    def expect_type(self, token_type: TokenType, what: str) -> Token:
        tok = self.accept_type(token_type)
        if tok is None:
            raise self.error(f"expected {what}")
        return tok

    def accept_equals(self) -> None:
        self.accept_type(TokenType.EQ)

    def identifier(self, what: str = "a name") -> str:
        tok = self.peek()
        if (
            tok is None
            or tok.token_type in _STRINGISH
            or tok.token_type
            in (
                TokenType.L_PAREN,
                TokenType.R_PAREN,
                TokenType.COMMA,
                TokenType.DOT,
                TokenType.SEMICOLON,
            )
        ):
            raise self.error(f"expected {what}")
        self.pos += 1
        return tok.text

    def qualified_name(self, what: str = "a table name") -> tuple[str | None, str]:
        first = self.identifier(what)
        if self.accept_type(TokenType.DOT):
            return first, self.identifier(what)
        return None, first

    def string(self, what: str = "a string") -> str:
        tok = self.peek()
        if tok is None or tok.token_type not in _STRINGISH:
            raise self.error(f"expected {what}")
        self.pos += 1
        return decode_string(self.sql, tok)

    def name(self, what: str = "a name") -> str:
        """An identifier, or a name written as a string (`CHARACTER SET 'utf8mb4'`)."""
        tok = self.peek()
        if tok is not None and tok.token_type in _STRINGISH:
            return self.string(what)
        return self.identifier(what)

    def integer(self, what: str = "a number") -> int:
        tok = self.peek()
        if tok is None or tok.token_type != TokenType.NUMBER or not tok.text.isdigit():
            raise self.error(f"expected {what}")
        self.pos += 1
        return int(tok.text)

    def text(self, start: int | None = None, end: int | None = None) -> str:
        """Source text of tokens [start, end) (default: the rest of this cursor)."""
        start = self.pos if start is None else start
        end = self.end if end is None else end
        if start >= end:
            return ""
        return self.sql[self.tokens[start].start : self.tokens[end - 1].end + 1]

    def skip_to_end(self) -> None:
        self.pos = self.end

    def error(self, message: str) -> DDLSyntaxError:
        tok = self.peek()
        if tok is not None:
            message = f"{message}, found {tok.text!r}"
        return DDLSyntaxError(message, self.sql, self.offset())

    def expect_end(self) -> None:
        if not self.at_end:
            raise self.error("unexpected text")


# -- literals ----------------------------------------------------------------------
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "%": "\\%", "_": "\\_"}


def decode_string(sql: str, tok: Token) -> str:
    """Decode a quoted literal from its source text (sqlglot drops backslash escapes)."""
    raw = sql[tok.start : tok.end + 1]
    if raw[:1] in "nN" and raw[1:2] in ("'", '"'):
        raw = raw[1:]
    if raw[0] not in ("'", '"') or raw[-1] != raw[0]:
        return tok.text
    return unquote(raw)


def unquote(raw: str) -> str:
    """The text of a quoted literal as written (`quote_string`'s, or any the server reads)."""
    quote = raw[0]
    body = raw[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
        elif ch == quote and i + 1 < len(body) and body[i + 1] == quote:
            out.append(quote)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def quote_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''").replace("\0", "\\0") + "'"


def quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


# -- expressions -------------------------------------------------------------------
@dataclass(frozen=True)
class Expression:
    sql: str  # canonical text
    columns: frozenset[str]  # lower-cased column names the expression reads
    # only exact arithmetic (+, -, *, %, ABS) on columns and numbers: its value is a
    # number that depends on the columns' values, not on their text or scale (not `/`,
    # whose scale follows its operands' in a SELECT: 1.0 / 3 is 0.33333, 1.00 / 3 0.333333)
    exact: bool = False


@lru_cache(maxsize=4096)
def canonical_expression(text: str) -> Expression:
    """Parse an expression with sqlglot and print it one canonical way: column names
    lower-cased in backticks, keywords and functions upper-cased. Text sqlglot cannot
    parse is kept with its whitespace collapsed, so equality still works on it."""
    try:
        tree = sqlglot.parse_one(text, read="mysql")
    except Exception:
        return Expression(" ".join(text.split()), frozenset())
    while isinstance(tree, exp.Paren):  # `(a + 1)` and `a + 1` are one expression
        tree = tree.this
    for column in tree.find_all(exp.Column):
        ident = column.this
        if isinstance(ident, exp.Identifier):
            ident.set("this", ident.name.lower())
            ident.set("quoted", True)
    # The server stores its own rewrite of an expression (SHOW CREATE TABLE shows
    # `a <= 5` for `NOT (a > 5)`, and no redundant parentheses): do the same rewrites,
    # so the text written in DDL and the text the server shows compare equal.
    tree = _strip_parens(_server_form(tree), None, None)
    columns = frozenset(c.name.lower() for c in tree.find_all(exp.Column))
    return Expression(_DIALECT.generate(tree), columns, all(_exact(node) for node in tree.walk()))


_EXACT = (exp.Add, exp.Sub, exp.Mul, exp.Mod, exp.Neg, exp.Abs, exp.Paren, exp.Column, exp.Identifier)


def _exact(node: exp.Expression) -> bool:
    if isinstance(node, exp.Literal):
        return not node.is_string
    return isinstance(node, _EXACT)


class _MySQLAndMariaDB(MySQL):
    """MySQL as sqlglot prints it, except what MariaDB would not read back."""

    class Generator(MySQL.Generator):
        TRANSFORMS: ClassVar[dict] = {
            **MySQL.Generator.TRANSFORMS,
            # sqlglot prints REGEXP as REGEXP_LIKE(), a function MariaDB does not have.
            exp.RegexpLike: lambda self, e: self.binary(e, "REGEXP"),
        }


_DIALECT = _MySQLAndMariaDB()

_NEGATED_COMPARISON: dict[type[exp.Expression], type[exp.Expression]] = {
    exp.EQ: exp.NEQ,
    exp.NEQ: exp.EQ,
    exp.GT: exp.LTE,
    exp.LTE: exp.GT,
    exp.LT: exp.GTE,
    exp.GTE: exp.LT,
}
_BOOLEAN = (exp.Predicate, exp.Connector, exp.Not, exp.In, exp.Between, exp.Boolean)
_NOW = {"NOW", "LOCALTIME", "LOCALTIMESTAMP", "CURRENT_TIMESTAMP"}


def _peel(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _server_form(node: exp.Expression) -> exp.Expression:
    """MariaDB's rewrites when it stores an expression, children first."""
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expression):
            node.set(key, _server_form(value))
        elif isinstance(value, list):
            node.set(key, [_server_form(v) if isinstance(v, exp.Expression) else v for v in value])
    if isinstance(node, exp.Like) and node.args.get("negate"):
        node.set("negate", None)
        return exp.Not(this=node)  # one spelling of `a NOT LIKE b`
    if isinstance(node, exp.In) and len(node.expressions) == 1 and not node.args.get("query"):
        return exp.EQ(this=node.this, expression=node.expressions[0])  # `a IN (7)` is `a = 7`
    if isinstance(node, exp.Not):
        return _not(_peel(node.this))
    if _is_datetime(node):
        # TIMESTAMP'x' (a literal) and TIMESTAMP('x') (one argument) are the DATETIME the
        # server stores as cast('x' as datetime)
        return exp.Cast(this=node.this, to=exp.DataType.build("DATETIME"))
    if isinstance(node, exp.Length) and node.args.get("binary"):
        return exp.Anonymous(this="OCTET_LENGTH", expressions=[node.this])  # LENGTH() counts bytes
    if isinstance(node, (exp.Anonymous, exp.Localtime, exp.Localtimestamp)):
        name = node.name.upper() if isinstance(node, exp.Anonymous) else node.key.upper()
        if name in _NOW:  # NOW() and LOCALTIME are stored as current_timestamp()
            args = node.expressions if isinstance(node, exp.Anonymous) else [node.this] if node.this else []
            return exp.CurrentTimestamp(this=args[0]) if args else exp.CurrentTimestamp()
    return node


def _is_datetime(node: exp.Expression) -> bool:
    if isinstance(node, exp.Timestamp):
        return not node.args.get("zone")
    literal = isinstance(node, exp.Cast) and node.this.is_string
    return literal and node.to.this == exp.DataType.Type.TIMESTAMPTZ


def _not(arg: exp.Expression) -> exp.Expression:
    """`NOT arg` as MariaDB stores it (negate_expression() and the neg_transformers)."""
    if isinstance(arg, exp.Not):  # NOT NOT x is x when x is a condition, else x <> 0
        inner = _peel(arg.this)
        if isinstance(inner, _BOOLEAN):
            return inner
        return exp.NEQ(this=inner, expression=exp.Literal.number(0))
    if isinstance(arg, exp.Column):  # NOT a is a = 0
        return exp.EQ(this=arg, expression=exp.Literal.number(0))
    return _negated(arg)


def _negated(arg: exp.Expression) -> exp.Expression:
    arg = _peel(arg)
    negated = _NEGATED_COMPARISON.get(type(arg))
    if negated is not None:
        return negated(this=arg.this, expression=arg.expression)
    if isinstance(arg, (exp.And, exp.Or)):  # De Morgan
        other = exp.Or if isinstance(arg, exp.And) else exp.And
        return exp.Paren(this=other(this=_negated(arg.this), expression=_negated(arg.expression)))
    if isinstance(arg, exp.Not):
        return _peel(arg.this)
    return exp.Not(this=arg)


# Which parentheses MariaDB leaves out: only cases where MySQL's precedence and
# sqlglot's parser agree that they change nothing, so the text means the same to both.
_FACTOR = (exp.Mul, exp.Div, exp.IntDiv, exp.Mod)
_ARITHMETIC = (exp.Add, exp.Sub, *_FACTOR, exp.Neg)
_COMPARISON = (exp.GT, exp.GTE, exp.LT, exp.LTE)
_EQUALITY = (exp.EQ, exp.NEQ, exp.NullSafeEQ)
_PREDICATE = (*_COMPARISON, *_EQUALITY, exp.Is, exp.Like, exp.RegexpLike, exp.In, exp.Between)
_OPERATORS = (*_ARITHMETIC, *_PREDICATE, exp.Not, exp.Connector, exp.Binary, exp.Unary)


def _atom(node: exp.Expression) -> bool:
    return isinstance(node, (exp.Column, exp.Literal, exp.Null, exp.Boolean)) or (
        isinstance(node, exp.Func) and not isinstance(node, _OPERATORS)
    )


def _redundant_parens(child: exp.Expression, parent: exp.Expression | None, key: str | None) -> bool:
    if parent is None or isinstance(parent, exp.Paren) or _atom(child):
        return True
    if isinstance(parent, exp.Func) and not isinstance(parent, _OPERATORS):
        return True  # a function argument
    if isinstance(parent, exp.In) and key == "expressions":
        return True
    if isinstance(parent, exp.Or) and isinstance(child, exp.And):
        return True  # AND binds tighter than OR
    if isinstance(parent, (exp.And, exp.Or)):
        return isinstance(child, (*_PREDICATE, *_ARITHMETIC, exp.Not)) or type(child) is type(parent)
    if isinstance(parent, exp.Not):
        return isinstance(child, _PREDICATE)
    if isinstance(parent, _PREDICATE):
        if isinstance(child, _ARITHMETIC):
            return True
        return isinstance(parent, _EQUALITY) and key == "this" and isinstance(child, _COMPARISON)
    if isinstance(parent, (exp.Add, exp.Sub)):
        return isinstance(child, (*_FACTOR, exp.Neg)) or (
            key == "this" and isinstance(child, (exp.Add, exp.Sub))
        )
    if isinstance(parent, _FACTOR):
        return isinstance(child, exp.Neg) or (key == "this" and isinstance(child, _FACTOR))
    return False


def _strip_parens(node: exp.Expression, parent: exp.Expression | None, key: str | None) -> exp.Expression:
    while isinstance(node, exp.Paren) and _redundant_parens(_peel(node), parent, key):
        node = node.this
    for arg, value in list(node.args.items()):
        if isinstance(value, exp.Expression):
            node.set(arg, _strip_parens(value, node, arg))
        elif isinstance(value, list):
            items = [_strip_parens(v, node, arg) if isinstance(v, exp.Expression) else v for v in value]
            node.set(arg, items)
    return node


def rename_in_expression(sql: str, old: str, new: str) -> str:
    """Rewrite references to column `old` as `new` in a canonical expression."""
    return rename_columns_in_expression(sql, {old.lower(): new})


def rename_columns_in_expression(sql: str, renames: dict[str, str]) -> str:
    """Rewrite column references by `renames` (lower-cased old name -> new name) all at
    once, so a swap (`a`->`b`, `b`->`a`) does not collapse into one name."""
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except Exception:
        return sql
    for column in tree.find_all(exp.Column):
        new = renames.get(column.name.lower())
        if new is not None:
            column.this.set("this", new.lower())
    return canonical_expression(tree.sql(dialect="mysql")).sql


def split_statements(sql: str) -> list[str]:
    """Split a script at top-level semicolons (not those inside quotes or comments)."""
    tokens = tokenize(sql)
    statements: list[str] = []
    start: int | None = None
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            if start is not None:
                statements.append(sql[start : tok.start].strip())
            start = None
        elif start is None:
            start = tok.start
    if start is not None:
        statements.append(sql[start:].strip())
    return [s for s in statements if s]
