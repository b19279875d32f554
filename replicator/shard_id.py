"""The id of a shard: which upstream table of which source, `ShardId(source, schema,
table)`. Its text, `source.schema.table`, is what logs, JSON, the admin API, status
output and the meta schema's `shard` columns show; `ShardId.parse` reads it back,
and nothing else splits or formats it.

Reading the text back: source ids cannot contain dots (the config refuses them), so
the first dot ends the source; the rest must be `schema.table` with exactly one dot.
A schema or table name may hold a dot upstream (MySQL allows it in quoted names, and
MariaDB's own test suite has a table `x..d`): such a name is written in backquotes,
doubled inside as in SQL (`s1.db.`x..d``), which `parse` reads back; every other name
is written as it is. An unquoted text with more than two dots cannot say which of them
are separators: `parse` refuses it.

Ids are on the per-row hot path (dict keys and set members in the daemon, the
applier, the DDL gate), so they are interned: building one with the same parts
gives back the same object, in every way one is made (constructor, `parse`,
unpickling, copying). Equality is therefore identity and the hash is the object's
own, both as cheap as Python gets; a dict lookup never calls back into Python. The
worker sends one object per table, and pickling a batch of rows sends it once.

The tracker's keys of a source's tables, `schema.table`, are made and split here too
(`table_key`, `split_table_key`).

This module imports nothing from `replicator`: everything may import it.
"""

from __future__ import annotations

from typing import Any, NoReturn, final

_FORM = "source.schema.table"
_interned: dict[tuple[str, str, str], ShardId] = {}


@final
class ShardId:
    """One shard: `source` (a source id of the task), `schema` and `table` (the table's
    upstream names). Immutable and interned (see the module's doc): compare with `==`
    or `is`, use as a dict key freely; `str()` gives `source.schema.table`. Ids sort
    by their text, so sorted output is as it was when ids were strings."""

    __slots__ = ("_text", "schema", "source", "table")
    source: str
    schema: str
    table: str
    _text: str

    def __new__(cls, source: str, schema: str, table: str) -> ShardId:
        found = _interned.get((source, schema, table))
        if found is not None:
            return found
        for part, value in (("source", source), ("schema", schema), ("table", table)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"shard id: expected a non-empty {part} name, got {value!r}")
        if "." in source:
            raise ValueError(f"shard id: the source id {source!r} contains a dot; expected {_FORM}")
        self = object.__new__(cls)
        for name, value in (("source", source), ("schema", schema), ("table", table)):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_text", f"{source}.{_written(schema)}.{_written(table)}")
        # setdefault: two threads making the same id at once still share one object
        return _interned.setdefault((source, schema, table), self)

    @classmethod
    def parse(cls, text: str) -> ShardId:
        """`source.schema.table` -> its id. Raises ValueError naming the value and the
        expected form when it is not exactly three non-empty dot-separated names."""
        if not isinstance(text, str):
            raise ValueError(f"expected a shard id {_FORM}, got {text!r}")
        if "`" in text:
            return cls(*_read_quoted(text))
        parts = text.split(".")
        if len(parts) > 3 and all(parts):
            raise ValueError(
                f"shard id {text!r} is ambiguous: expected {_FORM} with two dots; write a schema "
                "or table name holding a dot in backquotes (s1.db.`t.old`)"
            )
        if len(parts) != 3 or not all(parts):
            raise ValueError(f"shard id {text!r} is not {_FORM}")
        return cls(parts[0], parts[1], parts[2])

    @property
    def table_key(self) -> str:
        """`schema.table`: the table's key in its source's tracker."""
        return table_key(self.schema, self.table)

    def parts(self) -> dict[str, str]:
        """{"source": ..., "schema": ..., "table": ...}: what the extract columns take."""
        return {"source": self.source, "schema": self.schema, "table": self.table}

    def __str__(self) -> str:
        return self._text

    def __format__(self, spec: str) -> str:
        return format(self._text, spec)

    def __repr__(self) -> str:
        return f"ShardId({self.source!r}, {self.schema!r}, {self.table!r})"

    def __reduce__(self) -> tuple[type[ShardId], tuple[str, str, str]]:
        return ShardId, (self.source, self.schema, self.table)  # unpickled through the interning

    def __copy__(self) -> ShardId:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> ShardId:
        return self

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError(f"ShardId is immutable (setting {name!r})")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"ShardId is immutable (deleting {name!r})")

    def __lt__(self, other: ShardId) -> bool:
        return self._text < other._text if isinstance(other, ShardId) else NotImplemented

    def __le__(self, other: ShardId) -> bool:
        return self._text <= other._text if isinstance(other, ShardId) else NotImplemented

    def __gt__(self, other: ShardId) -> bool:
        return self._text > other._text if isinstance(other, ShardId) else NotImplemented

    def __ge__(self, other: ShardId) -> bool:
        return self._text >= other._text if isinstance(other, ShardId) else NotImplemented


def _written(name: str) -> str:
    """A name as the id's text has it: in backquotes if it holds a dot or starts with one."""
    return f"`{name.replace('`', '``')}`" if "." in name or name.startswith("`") else name


def _read_quoted(text: str) -> tuple[str, str, str]:
    """`source.schema.table` where the schema or the table may be in backquotes."""
    source, dot, rest = text.partition(".")
    parts = []
    for n in range(2):
        if rest.startswith("`"):
            i, name = 1, []
            while i < len(rest):
                if rest[i] == "`" and rest[i + 1 : i + 2] == "`":
                    name.append("`")
                    i += 2
                elif rest[i] == "`":
                    break
                else:
                    name.append(rest[i])
                    i += 1
            else:
                raise ValueError(f"shard id {text!r}: a backquote is not closed")
            part, rest = "".join(name), rest[i + 1 :]
        else:
            part, sep, after = rest.partition(".")
            rest = sep + after
        parts.append(part)
        if n == 0:
            if not rest.startswith("."):
                raise ValueError(f"shard id {text!r} is not {_FORM}")
            rest = rest[1:]
    if rest or not dot or not source or not all(parts):
        raise ValueError(f"shard id {text!r} is not {_FORM}")
    return source, parts[0], parts[1]


def table_key(schema: str, table: str) -> str:
    """`schema.table`: how a source's tracker keys its tables (and the schema history
    and the worker's messages name them)."""
    return f"{schema}.{table}"


def split_table_key(key: str) -> tuple[str, str]:
    """A tracker key's schema and table: the first dot splits them (a dot in a schema
    name is not followed; one in a table name is)."""
    schema, _, table = key.partition(".")
    return schema, table
