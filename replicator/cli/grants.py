"""What an account may do, read from the text of SHOW GRANTS. Parsing the text instead of asking
the server to try things means the check never needs to start a binlog dump or read a row to
learn that it would be refused."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_IDENT = r"`(?:[^`]|``)*`|\*|[^\s.`]+"
_OBJECT_GRANT = re.compile(
    rf"GRANT\s+(?P<privileges>.+?)\s+ON\s+(?:(?P<kind>TABLE|FUNCTION|PROCEDURE|PACKAGE\s+BODY|PACKAGE)\s+)?"
    rf"(?P<schema>{_IDENT})\.(?P<table>{_IDENT})\s+TO\s",
    re.IGNORECASE | re.DOTALL,
)
_QUOTED = r"`(?:[^`]|``)*`"
_ROLE = rf"{_QUOTED}(?:@{_QUOTED})?"  # MariaDB: `role`; MySQL: `role`@`host`
_ROLE_GRANT = re.compile(rf"GRANT\s+(?P<roles>{_ROLE}(?:\s*,\s*{_ROLE})*)\s+TO\s", re.IGNORECASE)

# MySQL 8.0.26 renamed REPLICATION SLAVE to REPLICATION REPLICA (both names are accepted and
# either may be shown); MariaDB 10.5 made REPLICATION CLIENT an alias of BINLOG MONITOR.
_ALIASES = {
    "REPLICATION SLAVE": frozenset({"REPLICATION SLAVE", "REPLICATION REPLICA"}),
    "BINLOG MONITOR": frozenset({"BINLOG MONITOR", "REPLICATION CLIENT"}),
    "REPLICATION CLIENT": frozenset({"REPLICATION CLIENT"}),
    "SELECT": frozenset({"SELECT"}),
}


@dataclass(frozen=True)
class Grant:
    """Privileges on one object: `*`.`*` (global), `db`.`*` (db is a LIKE pattern, as in the
    server's grant tables) or `db`.`table`. Column-level privileges are left out: they never
    allow reading whole rows."""

    privileges: frozenset[str]  # upper case, single spaces; "ALL" for ALL [PRIVILEGES]
    schema: str  # unquoted; "*" for global
    table: str  # unquoted; "*" for every table

    def gives(self, privilege: str) -> bool:
        """Whether this grant holds `privilege`, on whatever object it is on."""
        return "ALL" in self.privileges or bool(
            _ALIASES.get(privilege, frozenset({privilege})) & self.privileges
        )

    def covers(self, privilege: str, schema: str | None = None, table: str | None = None) -> bool:
        """Whether this grant gives `privilege` globally (schema None) or on schema.table."""
        if not self.gives(privilege):
            return False
        if self.schema == "*":
            return True
        if schema is None or not _like(self.schema, schema):
            return False
        return self.table == "*" or self.table == table


@dataclass(frozen=True)
class Grants:
    grants: tuple[Grant, ...]
    roles: tuple[str, ...]  # granted roles, quoted as SHOW GRANTS FOR accepts them

    @classmethod
    def parse(cls, lines: Iterable[str]) -> Grants:
        grants: list[Grant] = []
        roles: list[str] = []
        for line in lines:
            grant = parse_grant(line)
            if grant is not None:
                grants.append(grant)
            else:
                roles.extend(parse_role_grant(line))
        return cls(tuple(grants), tuple(roles))

    def merged(self, other: Grants) -> Grants:
        roles = self.roles + tuple(r for r in other.roles if r not in self.roles)
        return Grants(self.grants + other.grants, roles)

    def has_global(self, privilege: str) -> bool:
        return any(g.schema == "*" and g.covers(privilege) for g in self.grants)

    def can_select(self, schema: str, table: str) -> bool:
        return any(g.covers("SELECT", schema, table) for g in self.grants)


def parse_grant(line: str) -> Grant | None:
    """The privileges of one `GRANT ... ON ... TO ...` line; None for lines that are not about
    tables (role grants, PROXY, routines, SET DEFAULT ROLE)."""
    match = _OBJECT_GRANT.match(line.strip())
    if match is None or (match["kind"] and match["kind"].upper() != "TABLE"):
        return None
    privileges = frozenset(_normalize(p) for p in _split_top_level(match["privileges"]) if "(" not in p)
    privileges -= {"PROXY", "USAGE"}
    if not privileges:
        return None
    return Grant(privileges, _unquote(match["schema"]), _unquote(match["table"]))


def parse_role_grant(line: str) -> list[str]:
    """The roles of a `GRANT role1, role2 TO user` line, quoted; [] for any other line."""
    match = _ROLE_GRANT.match(line.strip())
    if match is None:
        return []
    return [role.strip() for role in _split_top_level(match["roles"]) if role.strip()]


def _normalize(privilege: str) -> str:
    name = " ".join(privilege.upper().split())
    return "ALL" if name == "ALL PRIVILEGES" else name


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside parentheses and backticks: `SELECT (a, b), INSERT`."""
    parts, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(text):
        if ch == "`":
            quoted = not quoted
        elif quoted:
            continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def _unquote(name: str) -> str:
    if name.startswith("`") and name.endswith("`") and len(name) >= 2:
        return name[1:-1].replace("``", "`")
    return name


def _like(pattern: str, name: str) -> bool:
    """MySQL's LIKE as used for database names in grants: `%` any run, `_` any one character,
    a backslash escapes. Case-sensitive, like schema names on Linux."""
    regex, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            regex.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        regex.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.fullmatch("".join(regex), name, re.DOTALL) is not None
