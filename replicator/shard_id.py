"""The id of a shard: which upstream table of which source, `ShardId(source, schema,
table)`. Its text, `source.schema.table`, is what logs, JSON, the admin API, status
output and the meta schema's `shard` columns show; `ShardId.parse` reads it back,
and nothing else splits or formats it.

Reading the text back: source ids cannot contain dots (the config refuses them), so
the first dot ends the source; the rest must be `schema.table` with exactly one dot.
A schema or table name may hold a dot upstream (MySQL allows it in quoted names),
but then the text has more than two dots and no rule can tell which of them is the
separator: `parse` refuses it, and the coordinator refuses such a shard (a group's
state is saved under the text), as it always has.

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
        object.__setattr__(self, "_text", f"{source}.{schema}.{table}")
        # setdefault: two threads making the same id at once still share one object
        return _interned.setdefault((source, schema, table), self)

    @classmethod
    def parse(cls, text: str) -> ShardId:
        """`source.schema.table` -> its id. Raises ValueError naming the value and the
        expected form when it is not exactly three non-empty dot-separated names."""
        if not isinstance(text, str):
            raise ValueError(f"expected a shard id {_FORM}, got {text!r}")
        parts = text.split(".")
        if len(parts) > 3 and all(parts):
            raise ValueError(
                f"shard id {text!r} is ambiguous: expected {_FORM} with two dots, and a dot in a "
                "schema or table name cannot be told from the separators"
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


def table_key(schema: str, table: str) -> str:
    """`schema.table`: how a source's tracker keys its tables (and the schema history
    and the worker's messages name them)."""
    return f"{schema}.{table}"


def split_table_key(key: str) -> tuple[str, str]:
    """A tracker key's schema and table: the first dot splits them (a dot in a schema
    name is not followed; one in a table name is)."""
    schema, _, table = key.partition(".")
    return schema, table
