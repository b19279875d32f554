"""Preflight checks of a task config against the real servers: everything that would otherwise
stop replication later (a STATEMENT binlog, a missing privilege, a table UPDATEs cannot be
applied to) reported up front, one line per problem, each with the fix.

Every source is checked on its own connection, in parallel, so an unreachable source costs its
connect timeout once and never hides the problems of the others. The checks that compare sources
(server ids, shards of a route) run afterwards on what was read."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import pymysql

from lattice import quote_identifier, quote_string
from replicator.cli.grants import Grants
from replicator.cli.row_filter_check import row_filter_problems
from replicator.config import SYSTEM_SCHEMAS, Route, RowFilter, SourceConfig, TargetConfig, TaskConfig
from replicator.errors import connect_failure, error_number, reason_of
from replicator.server_rules import server_rules
from replicator.servers import connect, flavor_of
from replicator.source.gtid import GtidState
from replicator.source.routing import Router

Level = Literal["error", "warning"]

CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 30.0
MAX_PARALLEL = 16
ACCESS_DENIED = 1045  # ER_ACCESS_DENIED_ERROR

BINLOG_VARIABLES = (
    "log_bin",
    "binlog_format",
    "binlog_row_image",
    "binlog_row_metadata",
    "server_id",
    "log_slave_updates",
    "gtid_binlog_pos",
)
# Where BINLOG MONITOR took over SHOW MASTER STATUS / SHOW BINARY LOGS from REPLICATION CLIENT.
MARIADB_BINLOG_MONITOR = (10, 5)

Connect = Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Problem:
    level: Level
    source: str | None  # None: the target, or the task as a whole
    table: str | None  # "schema.table"
    message: str
    fix: str

    def __str__(self) -> str:
        where = [self.level, self.source or "target"]
        if self.table:
            where.append(self.table)
        return "  ".join([*where, f"{self.message}: {self.fix}"])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ShardTable:
    """A routed upstream table and what the checks need to know about its keys."""

    schema: str
    table: str
    route: Route
    row_key: tuple[str, ...] | None  # primary key, or a unique key over NOT NULL columns
    auto_increment_pk: str | None  # the column, when the primary key is one AUTO_INCREMENT column

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"


@dataclass
class SourceFacts:
    """What was learned from one source; `server_id` is None when it could not be reached."""

    source: SourceConfig
    index: int
    server_id: int | None = None
    tables: list[ShardTable] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def reachable(self) -> bool:
        return self.server_id is not None


def run_checks(config: TaskConfig, *, connect: Connect | None = None) -> list[Problem]:
    """Every problem found, the sources' in config order first, then the target's."""
    connect = connect or _connect
    router = Router.from_config(config)
    workers = min(MAX_PARALLEL, len(config.sources) + 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        target_future = pool.submit(check_target, config.target, connect, config.options.row_events)
        indexes = range(len(config.sources))
        rows = config.filters.rows
        facts = list(pool.map(lambda i: inspect_source(config.sources[i], i, router, connect, rows), indexes))
        target_problems = target_future.result()

    by_source: dict[str, list[Problem]] = {f.source.id: list(f.problems) for f in facts}
    for problem in [*server_id_problems(config, facts), *collision_problems(facts)]:
        by_source[problem.source or ""].append(problem)
    problems = [p for f in facts for p in by_source[f.source.id]]
    return problems + target_problems + route_problems(config, facts)


# -- one source --------------------------------------------------------------------------------


def inspect_source(
    source: SourceConfig,
    index: int,
    router: Router,
    connect: Connect,
    row_filters: Sequence[RowFilter] = (),
) -> SourceFacts:
    facts = SourceFacts(source, index)
    try:
        conn = connect(source.connection_kwargs())
    except pymysql.MySQLError as exc:
        facts.problems.append(_unreachable(source.id, f"sources[{index}]", source, exc, connect))
        return facts
    step = "reading the server's settings"
    try:
        with conn:
            version, account = _query(conn, "SELECT VERSION(), CURRENT_USER()")[0]
            variables = read_variables(conn, BINLOG_VARIABLES)
            facts.server_id = int(variables.get("server_id", "0"))
            flavor = flavor_of(version)
            facts.problems += flavor_problems(source, index, version)
            if not server_rules(flavor).has_binlog:
                return facts
            facts.problems += binlog_problems(source.id, variables)
            facts.problems += failover_problems(source.id, flavor, variables)
            step = "reading the tables"
            facts.tables = read_routed_tables(conn, router)
            facts.problems += key_problems(source.id, facts.tables)
            step = "reading the tables the row filters cover"
            facts.problems += [
                Problem("error", source.id, table, message, fix)
                for table, message, fix in row_filter_problems(
                    conn, source.id, [(t.schema, t.table) for t in facts.tables], row_filters, _query
                )
            ]
            step = "reading the grants"
            grants, unreadable_roles = read_grants(conn)
            facts.problems += privilege_problems(
                source.id, grants, unreadable_roles, account, flavor, version_tuple(version), facts.tables
            )
            if not facts.tables:
                facts.problems += hidden_shard_problems(source.id, grants, account, router.routes)
    except pymysql.MySQLError as exc:
        facts.problems.append(
            Problem(
                "error",
                source.id,
                None,
                f"check failed while {step}: {reason_of(exc)}",
                "make sure the user may run SHOW GLOBAL VARIABLES, SHOW GRANTS and read "
                "information_schema, then run the check again",
            )
        )
    return facts


def binlog_problems(source_id: str, variables: Mapping[str, str]) -> list[Problem]:
    """The binlog settings the replicator relies on, from SHOW GLOBAL VARIABLES."""
    problems = []

    def error(message: str, fix: str) -> None:
        problems.append(Problem("error", source_id, None, message, fix))

    if variables.get("log_bin", "OFF").upper() not in ("ON", "1"):
        error(
            "log_bin is OFF; the server writes no binlog",
            "in my.cnf log_bin=mysql-bin (with a server_id) and restart the server; "
            "log_bin cannot be changed at runtime",
        )
    binlog_format = variables.get("binlog_format", "").upper()
    if binlog_format != "ROW":
        error(
            f"binlog_format is {binlog_format or 'unknown'}; the binlog must carry rows",
            "SET GLOBAL binlog_format=ROW and in my.cnf binlog_format=ROW",
        )
    # Servers before MySQL 5.6 / MariaDB 10.1.6 have no binlog_row_image: their row images are full.
    row_image = variables.get("binlog_row_image", "FULL").upper()
    if row_image != "FULL":
        error(
            f"binlog_row_image is {row_image}; UPDATE and DELETE events must carry whole rows",
            "SET GLOBAL binlog_row_image=FULL and in my.cnf binlog_row_image=FULL",
        )
    row_metadata = variables.get("binlog_row_metadata")
    if row_metadata is None:
        problems.append(
            Problem(
                "warning",
                source_id,
                None,
                "binlog_row_metadata does not exist on this server (before MySQL 8.0.1 and MariaDB 10.5); "
                "rows will be read with the tracked schema",
                "nothing to do unless table schemas are changed outside the binlog; "
                "MySQL 8.0.1+ or MariaDB 10.5+ can put column names into the binlog",
            )
        )
    elif row_metadata.upper() != "FULL":
        problems.append(
            Problem(
                "warning",
                source_id,
                None,
                f"binlog_row_metadata is {row_metadata.upper()}; rows will be read with the tracked schema",
                "SET GLOBAL binlog_row_metadata=FULL and in my.cnf binlog_row_metadata=FULL",
            )
        )
    return problems


def failover_problems(source_id: str, flavor: str, variables: Mapping[str, str]) -> list[Problem]:
    """What keeps the source from moving to another server of its replication when that
    one is promoted (docs/operations/failover.md): its positions are found there by GTID."""

    def warning(message: str, fix: str) -> Problem:
        return Problem("warning", source_id, None, message, fix)

    if not server_rules(flavor).moves_by_gtid:
        return [
            warning(
                "a source moves to another server by GTID on MariaDB only; after a failover of this "
                "server its positions cannot be found on the promoted one",
                "after such a failover copy the source's shards again (backfill)",
            )
        ]
    problems = []
    domains = sorted({g.domain for g in GtidState.parse(variables.get("gtid_binlog_pos")).last})
    if len(domains) > 1:
        problems.append(
            warning(
                f"the binlog has {len(domains)} GTID domains ({', '.join(map(str, domains))}); a source "
                "moves to another server by the GTIDs of one domain only",
                "write in one domain (gtid_domain_id), or after a failover copy the source's shards again "
                "(backfill)",
            )
        )
    if variables.get("log_slave_updates", "OFF").upper() not in ("ON", "1"):
        problems.append(
            warning(
                "log_slave_updates is OFF: a server without it keeps no binlog of what it replicates, "
                "so a source cannot move to it once it is promoted",
                "set log_slave_updates=ON in my.cnf of every server a source may move to (a restart)",
            )
        )
    return problems


def flavor_problems(source: SourceConfig, index: int, version: str) -> list[Problem]:
    actual = flavor_of(version)
    if not server_rules(actual).has_binlog:
        return [
            Problem(
                "error",
                source.id,
                None,
                f"the server is TiDB ({version}), which writes no MySQL binlog",
                f"remove sources[{index}]; TiDB can only be a target",
            )
        ]
    if source.flavor is not None and source.flavor != actual:
        return [
            Problem(
                "error",
                source.id,
                None,
                f"flavor is {source.flavor} in the config but the server is {actual} ({version})",
                f"set sources[{index}].flavor: {actual}, or leave it out to have it detected",
            )
        ]
    return []


def key_problems(source_id: str, tables: Iterable[ShardTable]) -> list[Problem]:
    return [
        Problem(
            "error",
            source_id,
            t.name,
            "no primary key and no unique key over NOT NULL columns; "
            "UPDATE and DELETE could not find the row downstream",
            f"ALTER TABLE {quote_identifier(t.schema)}.{quote_identifier(t.table)} ADD PRIMARY KEY (...), "
            "or make the columns of a unique key NOT NULL",
        )
        for t in tables
        if t.row_key is None
    ]


def privilege_problems(
    source_id: str,
    grants: Grants,
    unreadable_roles: Sequence[str],
    account: str,
    flavor: str,
    version: tuple[int, ...],
    tables: Iterable[ShardTable],
) -> list[Problem]:
    who = quote_account(account)
    # Privileges may still come through a role whose grants we could not read: then we can only
    # warn, not claim they are missing.
    level: Level = "warning" if unreadable_roles else "error"
    unless = ""
    if unreadable_roles:
        roles = ", ".join(unreadable_roles)
        unless = f" (unless granted through role {roles}, whose grants could not be read)"
    monitor = "REPLICATION CLIENT"
    if server_rules(flavor).binlog_monitor_privilege and version >= MARIADB_BINLOG_MONITOR:
        monitor = "BINLOG MONITOR"
    needed = [
        ("REPLICATION SLAVE", "it cannot stream the binlog"),
        (monitor, "it cannot read binlog positions (SHOW MASTER STATUS, SHOW BINARY LOGS)"),
    ]
    problems = [
        Problem(
            level,
            source_id,
            None,
            f"{who} lacks {privilege}; {why}{unless}",
            f"GRANT {privilege} ON *.* TO {who}",
        )
        for privilege, why in needed
        if not grants.has_global(privilege)
    ]
    problems += [
        Problem(
            level,
            source_id,
            t.name,
            f"{who} lacks SELECT on the table; its schema and rows cannot be read{unless}",
            f"GRANT SELECT ON {quote_identifier(t.schema)}.* TO {who}",
        )
        for t in tables
        if not grants.can_select(t.schema, t.table)
    ]
    return problems


def hidden_shard_problems(
    source_id: str, grants: Grants, account: str, routes: Sequence[Route]
) -> list[Problem]:
    """A source where the user sees no routed table: the server hides every table a user
    has no privilege on, so its shards may be there unseen, and the task would then
    replicate nothing of it. A warning, not an error: a source may have no shard yet, which
    the check cannot tell from a hidden one; said only where no SELECT grant of the user
    covers a route's schemas (then they are truly not there)."""
    uncovered = [(i, r) for i, r in enumerate(routes) if not _select_covers(grants, r)]
    if not uncovered:
        return []
    who = quote_account(account)
    names = " or ".join(f"routes[{i}] ({_route_glob(r)})" for i, r in uncovered)
    grants_needed = list(dict.fromkeys(_select_grant(r, who) for _, r in uncovered))
    return [
        Problem(
            "warning",
            source_id,
            None,
            f"no table routed by {names} is visible to {who}; the server hides the tables a "
            "user has no privilege on, so its shards would not be replicated",
            f"if the source has shards, {'; '.join(grants_needed)}",
        )
    ]


def _route_glob(route: Route) -> str:
    return f"{route.schema_regex or route.schema}.{route.table_regex or route.table}"


def _schema_like(route: Route) -> str | None:
    """The route's schema glob as the LIKE pattern a database grant takes (`_` and `%`
    escaped, `*` as `%`, `?` as `_`); None for a regular expression or a character class."""
    if route.schema_regex or "[" in route.schema:
        return None
    escaped = route.schema.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%")
    return escaped.replace("*", "%").replace("?", "_")


def _select_covers(grants: Grants, route: Route) -> bool:
    """Whether a SELECT grant of the user covers the schemas of the route: every schema,
    the route's own pattern, or the one schema it names."""
    pattern = _schema_like(route)
    one_schema = not route.schema_regex and not any(ch in route.schema for ch in "*?[")
    return any(
        grant.schema in ("*", pattern) or (one_schema and grant.covers("SELECT", route.schema, "*"))
        for grant in grants.grants
        if grant.table == "*" and grant.gives("SELECT")
    )


def _select_grant(route: Route, who: str) -> str:
    pattern = _schema_like(route)
    if pattern is None:
        return f"GRANT SELECT ON `<each schema {route.schema_regex or route.schema} matches>`.* TO {who}"
    return f"GRANT SELECT ON {quote_identifier(pattern)}.* TO {who}"


# -- across sources ----------------------------------------------------------------------------


def server_id_problems(config: TaskConfig, facts: Sequence[SourceFacts]) -> list[Problem]:
    """Each upstream needs its own @@server_id, and none may equal a replica server_id we stream
    with: a server refuses (or, in a chain, skips the events of) a replica that has its own id."""
    problems = []
    replica_ids = {s.server_id: (i, s.id) for i, s in enumerate(config.sources)}
    first_with: dict[int, str] = {}
    for f in facts:
        if not f.reachable:
            continue
        sid = f.server_id
        assert sid is not None
        if sid == 0:
            problems.append(
                Problem(
                    "error",
                    f.source.id,
                    None,
                    "server_id is 0; the server refuses replicas",
                    "SET GLOBAL server_id=<unique id> and in my.cnf server_id=<the same id>",
                )
            )
            continue
        if sid in first_with:
            problems.append(
                Problem(
                    "error",
                    f.source.id,
                    None,
                    f"the server's server_id {sid} is also that of source {first_with[sid]} "
                    "(the same server twice, or a clone)",
                    "give every upstream server its own server_id (SET GLOBAL server_id and in my.cnf), "
                    "or remove the duplicate source",
                )
            )
        else:
            first_with[sid] = f.source.id
        if sid in replica_ids:
            index, owner = replica_ids[sid]
            problems.append(
                Problem(
                    "error",
                    f.source.id,
                    None,
                    f"the server's server_id {sid} is the replica server_id of source {owner} in the config",
                    f"set sources[{index}].server_id to an id that no server uses",
                )
            )
    return problems


def collision_problems(facts: Sequence[SourceFacts]) -> list[Problem]:
    """Shards numbering rows with their own AUTO_INCREMENT produce the same ids: merged into one
    table without a column telling them apart, a row of one shard would overwrite another's."""
    shards: dict[Route, int] = defaultdict(int)
    for f in facts:
        for t in f.tables:
            shards[t.route] += 1
    problems = []
    for f in facts:
        for t in f.tables:
            count = shards[t.route]
            if t.auto_increment_pk is None or t.route.extract or count < 2:
                continue
            problems.append(
                Problem(
                    "warning",
                    f.source.id,
                    t.name,
                    f"primary key {t.auto_increment_pk} is AUTO_INCREMENT and {count} shards merge into "
                    f"{t.route.target} without extract columns; equal ids of two shards would collide",
                    "add extract columns (source, schema, table) to the route and to the downstream primary "
                    "key, or give the shards disjoint auto_increment_offset/auto_increment_increment",
                )
            )
    return problems


def route_problems(config: TaskConfig, facts: Sequence[SourceFacts]) -> list[Problem]:
    if not any(f.reachable for f in facts):
        return []  # nothing to say about routes when no source could be read
    used = {t.route for f in facts for t in f.tables}
    return _capture_problems(facts) + [
        Problem(
            "warning",
            None,
            route.target,
            f"routes[{i}] ({route.schema_regex or route.schema}.{route.table_regex or route.table}) "
            "matches no table on any reachable source",
            "check its globs (case-sensitive), the filters and the routes before it, and that the "
            "user can see the tables (SELECT)",
        )
        for i, route in enumerate(config.routes)
        if route not in used
    ]


def _capture_problems(facts: Sequence[SourceFacts]) -> list[Problem]:
    """A routed table whose name an extract column's pattern does not match: its rows
    would get NULL there, which the column (NOT NULL) refuses."""
    problems = []
    for f in facts:
        for t in f.tables:
            parts = {"source": f.source.id, "schema": t.schema, "table": t.table}
            for extract in t.route.extracts:
                if extract.pattern and extract.value(parts) is None:
                    problems.append(
                        Problem(
                            "error",
                            f.source.id,
                            t.name,
                            f"its {extract.part} name does not match the pattern {extract.pattern!r} of "
                            f"extract column {extract.column}: its rows would have no value there",
                            "change the extract pattern, or the route so that it leaves the table out",
                        )
                    )
    return problems


# -- target ------------------------------------------------------------------------------------


def check_target(
    target: TargetConfig, connect: Connect | None = None, row_events: bool = False
) -> list[Problem]:
    connect = connect or _connect
    try:
        conn = connect(target.connection_kwargs())
    except pymysql.MySQLError as exc:
        return [_unreachable(None, "target", target, exc, connect)]
    try:
        with conn:
            version = str(_query(conn, "SELECT VERSION()")[0][0])
            grants, _ = read_grants(conn)
            account = _text(_query(conn, "SELECT CURRENT_USER()")[0][0])
    except pymysql.MySQLError as exc:
        return [Problem("error", None, None, f"check failed: {reason_of(exc)}", "check the target server")]
    actual = flavor_of(version)
    if actual != target.flavor:
        return [
            Problem(
                "error",
                None,
                None,
                f"target.flavor is {target.flavor} but the server is {actual} ({version})",
                f"set target.flavor: {actual}",
            )
        ]
    replays = any(grants.has_global(p) for p in ("BINLOG REPLAY", "SUPER"))
    if row_events and server_rules(actual).binlog_replay and not replays:
        return [
            Problem(
                "warning",
                None,
                None,
                "the target user may not run BINLOG statements: every row is decoded and written as "
                "SQL, not applied as the binlog holds it (slower)",
                f"GRANT BINLOG REPLAY ON *.* TO {quote_account(account)}, or set options.row_events: false",
            )
        ]
    return []


# -- reading servers ---------------------------------------------------------------------------


def read_variables(conn: Any, names: Iterable[str]) -> dict[str, str]:
    """Global values; a variable the server does not have is absent from the result."""
    names = list(names)
    marks = ", ".join(["%s"] * len(names))
    rows = _query(conn, f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({marks})", names)
    return {_text(name).lower(): _text(value) for name, value in rows}


def read_grants(conn: Any) -> tuple[Grants, list[str]]:
    """The account's grants merged with those of its roles (and theirs); and the roles whose
    grants the account may not read."""
    grants = Grants.parse(_text(row[0]) for row in _query(conn, "SHOW GRANTS FOR CURRENT_USER()"))
    unreadable: list[str] = []
    pending, seen = list(grants.roles), set(grants.roles)
    while pending:
        role = pending.pop(0)
        try:
            role_grants = Grants.parse(_text(row[0]) for row in _query(conn, f"SHOW GRANTS FOR {role}"))
        except pymysql.MySQLError:
            unreadable.append(role)
            continue
        grants = grants.merged(role_grants)
        for inner in role_grants.roles:
            if inner not in seen:
                seen.add(inner)
                pending.append(inner)
    return grants, unreadable


def read_routed_tables(conn: Any, router: Router) -> list[ShardTable]:
    """The base tables the router routes, with their keys. information_schema only shows tables
    the account has some privilege on, so invisible tables are missing here (and a route may then
    look empty)."""
    system = sorted(SYSTEM_SCHEMAS)
    rows = _query(
        conn,
        "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
        # MariaDB lists system-versioned tables as 'SYSTEM VERSIONED'; sequences and views are not shards.
        "WHERE TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED') "
        f"AND TABLE_SCHEMA NOT IN ({', '.join(['%s'] * len(system))}) ORDER BY TABLE_SCHEMA, TABLE_NAME",
        system,
    )
    routed: dict[tuple[str, str], Route] = {}
    for schema, table in rows:
        schema, table = _text(schema), _text(table)
        route = router.route(schema, table)
        if route is not None:
            routed[(schema, table)] = route
    if not routed:
        return []
    schemas = sorted({schema for schema, _ in routed})
    marks = ", ".join(["%s"] * len(schemas))
    columns = _query(
        conn,
        "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, IS_NULLABLE, EXTRA FROM information_schema.COLUMNS "
        f"WHERE TABLE_SCHEMA IN ({marks})",
        schemas,
    )
    stats = _query(
        conn,
        "SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, NON_UNIQUE, COLUMN_NAME "
        f"FROM information_schema.STATISTICS WHERE TABLE_SCHEMA IN ({marks}) "
        "ORDER BY TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX",
        schemas,
    )
    not_null: dict[tuple[str, str], set[str]] = defaultdict(set)
    auto_increment: dict[tuple[str, str], set[str]] = defaultdict(set)
    for schema, table, column, nullable, extra in columns:
        key = (_text(schema), _text(table))
        if _text(nullable).upper() == "NO":
            not_null[key].add(_text(column))
        if "auto_increment" in _text(extra).lower():
            auto_increment[key].add(_text(column))
    unique: dict[tuple[str, str], dict[str, list[str | None]]] = defaultdict(lambda: defaultdict(list))
    for schema, table, index, non_unique, column in stats:
        if int(non_unique) == 0:
            key = (_text(schema), _text(table))
            unique[key][_text(index)].append(None if column is None else _text(column))
    return [
        _shard_table(
            schema,
            table,
            route,
            unique[(schema, table)],
            not_null[(schema, table)],
            auto_increment[(schema, table)],
        )
        for (schema, table), route in routed.items()
    ]


def _shard_table(
    schema: str,
    table: str,
    route: Route,
    unique: Mapping[str, list[str | None]],
    not_null: set[str],
    auto_increment: set[str],
) -> ShardTable:
    primary = unique.get("PRIMARY")
    row_key: tuple[str, ...] | None = None
    if primary and None not in primary:
        row_key = tuple(c for c in primary if c is not None)
    else:
        # Like InnoDB's choice of a clustered key without a primary key: a unique key whose
        # columns are all NOT NULL (a NULL can repeat in a unique key, so it identifies nothing).
        # A functional key part (MySQL 8) has no column name and is skipped.
        for name in sorted(unique):
            columns = unique[name]
            if None not in columns and all(c in not_null for c in columns):
                row_key = tuple(c for c in columns if c is not None)
                break
    pk_auto = None
    if primary and len(primary) == 1 and primary[0] in auto_increment:
        pk_auto = primary[0]
    return ShardTable(schema, table, route, row_key, pk_auto)


# -- helpers -----------------------------------------------------------------------------------


def version_tuple(version: str) -> tuple[int, ...]:
    # MariaDB's replication handshake prefixes 5.5.5- to the real version; VERSION() does not, but
    # a version string copied from elsewhere might.
    text = version.removeprefix("5.5.5-")
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if match is None:
        return (0,)
    return tuple(int(part) for part in match.groups() if part is not None)


def quote_account(account: str) -> str:
    """CURRENT_USER()'s user@host as GRANT wants it: 'user'@'host'."""
    user, at, host = account.rpartition("@")
    if not at:
        return quote_string(account)
    return f"{quote_string(user)}@{quote_string(host)}"


def _connect(kwargs: Mapping[str, Any]) -> Any:
    return connect(kwargs, connect_timeout=CONNECT_TIMEOUT, read_timeout=READ_TIMEOUT)


def _unreachable(
    source_id: str | None,
    field_path: str,
    server: SourceConfig | TargetConfig,
    exc: Exception,
    connect: Connect,
) -> Problem:
    message, fix = connect_failure(field_path, server.host, server.port, exc)
    login = server.connection_kwargs()
    anonymous = _shadowing_account(login, connect, exc)
    if anonymous is not None:
        user = quote_account(f"{login.get('user', '')}@{anonymous.rpartition('@')[2]}")
        message += (
            f"; the server has an anonymous account {quote_account(anonymous)}, which it matches before "
            f"{field_path}.user on connections from this host (a more specific host wins, whatever the user)"
        )
        fix = (
            f"DROP USER {quote_account(anonymous)} on that server (mariadb-secure-installation removes "
            f"anonymous accounts), or create {user} with the same password and grants"
        )
    return Problem("error", source_id, None, message, fix)


def _shadowing_account(login: Mapping[str, Any], connect: Connect, exc: Exception) -> str | None:
    """The anonymous account (`@localhost`) that took a login refused with its password: a
    default `mariadb-install-db` leaves ``''@'localhost'``, which the server picks before
    `'user'@'%'` and which has no password. Told by logging in the same way without the
    password: CURRENT_USER() is then the anonymous account."""
    if error_number(exc) != ACCESS_DENIED or not login.get("password"):
        return None
    try:
        conn = connect({**login, "password": ""})
    except pymysql.MySQLError:
        return None
    try:
        with conn:
            account = _text(_query(conn, "SELECT CURRENT_USER()")[0][0])
    except pymysql.MySQLError:
        return None
    return account if account.startswith("@") else None


def _query(conn: Any, sql: str, args: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def _text(value: Any) -> str:
    # Some servers hand information_schema and SHOW results back as bytes.
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)
