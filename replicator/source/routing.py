"""Which upstream table goes to which downstream table. One place decides it, so the preflight
check, the binlog tracker and the applier can never disagree about a table's fate."""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase

from replicator.config import DEFAULT_META_SCHEMA, SYSTEM_SCHEMAS, Filters, Route, TaskConfig


class Router:
    """Routes `schema.table` of an upstream to the first route whose globs match it, after the
    filters: with a non-empty `allow` list the table must match one of its globs, it must match
    none of `block`, and system schemas and the meta schema are never routed."""

    def __init__(
        self,
        routes: Iterable[Route],
        filters: Filters | None = None,
        *,
        meta_schema: str = DEFAULT_META_SCHEMA,
    ) -> None:
        self.routes = tuple(routes)
        self.filters = filters or Filters()
        self.meta_schema = meta_schema
        # a worker asks for every table map and every rows event: globs matched once a table
        self._known: dict[tuple[str, str], Route | None] = {}

    @classmethod
    def from_config(cls, config: TaskConfig) -> Router:
        return cls(config.routes, config.filters, meta_schema=config.target.meta_schema)

    def route(self, schema: str, table: str) -> Route | None:
        try:
            return self._known[schema, table]
        except KeyError:
            pass
        found = next((r for r in self.routes if r.matches(schema, table)), None)
        self._known[schema, table] = found = found if self.allowed(schema, table) else None
        return found

    def allowed(self, schema: str, table: str) -> bool:
        """Whether the filters let `schema.table` through (routes aside): never a table of
        an online-DDL tool (its rows are copies of a shard's)."""
        if self._reserved(schema) or self.filters.online_ddl.tool_table(table):
            return False
        name = f"{schema}.{table}"
        if self.filters.allow and not any(fnmatchcase(name, glob) for glob in self.filters.allow):
            return False
        return not any(fnmatchcase(name, glob) for glob in self.filters.block)

    def watches_schema(self, schema: str) -> bool:
        """Whether tables of `schema` may be routed. The replication core tracks every table of
        such a schema, routed or not, so that a RENAME TABLE into a routed name can be followed
        with the table's schema already known."""
        if self._reserved(schema):
            return False
        return any(route.matches_schema(schema) for route in self.routes)

    def targets(self) -> list[str]:
        """The distinct downstream tables, "schema.table", in route order."""
        return list(dict.fromkeys(route.target for route in self.routes))

    def _reserved(self, schema: str) -> bool:
        return schema.lower() in SYSTEM_SCHEMAS or schema == self.meta_schema
