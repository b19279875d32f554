"""The task configuration: which upstream servers to read, which shard tables go to which
downstream table, and how. Loaded from YAML (the format, field by field, is in
configs/example.yaml) and validated completely at load time, so a typo surfaces as one line
naming the file and the field (`tasks.yaml: sources[1].port: expected an integer from 1 to
65535, got 'abc'`) instead of as a failure an hour into a run.

List indexes in field paths count from 0, like every YAML/JSON path tool does."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from replicator import config_keys

if TYPE_CHECKING:
    from replicator.row_condition import Condition

DEFAULT_META_SCHEMA = "shardmerge_meta"
# Compared in lower case: information_schema and performance_schema are case-insensitive, and a
# user schema that differs from `mysql` only in case is not worth the risk of routing.
SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})
SOURCE_FLAVORS = ("mysql", "mariadb")
TARGET_FLAVORS = ("mysql", "mariadb", "tidb")
EXTRACT_KINDS = config_keys.EXTRACT.names  # source, schema, table

MAX_PORT = 65535
MAX_SERVER_ID = 4294967295  # server_id is an unsigned 32-bit integer
# a daemon holding an even lease epoch streams with the configured id XOR this
# (`startup.stream_server_id`): a standby taking over never shares an id with the old active
STANDBY_FLIP = 2**31
MAX_BATCH_SIZE = 100000
MAX_ROWS_PER_SPLIT = 100_000_000
# a backfill chunk: fewer, larger ones, as each is a Spark job (bench/backfill.py, 5M rows: 200,000
# rows a chunk copied at 0.82x mydumper + myloader, 625,000 at 1.00x)
ROWS_PER_SPLIT = 1_000_000
MAX_WORKERS = 64
MAX_HEARTBEAT = 4294967  # seconds; the servers' limit for MASTER_HEARTBEAT_PERIOD
MAX_LEASE_TTL = 600.0  # seconds: a standby waits that long at most after the active died
MIN_BINLOG_POS = 4  # every binlog file starts with a 4-byte magic number
MAX_BINLOG_POS = 2**64 - 1
MAX_IDENTIFIER = 64  # MySQL's limit on schema, table and column names

# Task and source ids end up in shard ids ("source.schema.table") and meta table rows: no dots.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_META_SCHEMA = re.compile(r"[A-Za-z0-9_$]{1,64}")
# Characters that would make a downstream name ambiguous: the schema.table separator, the
# quote character, and glob characters (a target is a name, not a pattern).
_BAD_IDENTIFIER_CHARS = frozenset(".`*?[]/\\\0")
_MARIADB_GTID = re.compile(r"\d+-\d+-\d+(\s*,\s*\d+-\d+-\d+)*")
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# uuid:1-5:7, and MySQL 8.3's tagged form uuid:tag:1-5
_MYSQL_GTID_ONE = rf"{_UUID}(:([A-Za-z_][A-Za-z0-9_]{{0,31}}|\d+(-\d+)?))+"
_MYSQL_GTID = re.compile(rf"{_MYSQL_GTID_ONE}(\s*,\s*{_MYSQL_GTID_ONE})*")

# The keys each section takes: the tuples the field checks read, from the keys the configuration
# reference is rendered from (replicator/config_keys.py), so a key is in both or in neither.
_TOP_FIELDS = config_keys.TOP.names
_VALIDATOR_FIELDS = config_keys.VALIDATOR.names
VALIDATOR_MODES = ("off", "fast", "full")
_ONLINE_DDL_FIELDS = config_keys.ONLINE_DDL.names
TASK_MODES = ("incremental", "all", "full")
_ADMIN_FIELDS = config_keys.ADMIN.names
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
_SOURCE_FIELDS = config_keys.SOURCES.names
_START_FIELDS = config_keys.START.names
_TARGET_FIELDS = config_keys.TARGET.names
_TLS_FIELDS = config_keys.TLS.names
TLS_MODES = ("disabled", "preferred", "required", "verify_ca", "verify_identity")
_ROUTE_FIELDS = config_keys.ROUTES.names
_EXTRACT_FIELDS = config_keys.EXTRACT_COLUMN.names
_FILTER_FIELDS = config_keys.FILTERS.names
_EVENT_FILTER_FIELDS = config_keys.EVENT_FILTER.names
# DM's expression filter: a row is ignored where its condition is TRUE
ROW_FILTER_CONDITIONS = ("ignore_insert", "ignore_update_old", "ignore_update_new", "ignore_delete")
_ROW_FILTER_FIELDS = config_keys.ROW_FILTER.names
COPY_MODES = ("pt-osc", "blocking")  # options.copy_ddl
_OPTION_FIELDS = config_keys.OPTIONS.names


# Checks and converts one YAML value, or raises ValueError saying what was expected.
Convert = Callable[[Any], Any]


class ConfigError(ValueError):
    """A config that cannot be used; the message names the file and the field path."""


@dataclass(frozen=True)
class StartPosition:
    """Where to start reading a source's binlog the first time: file and pos, or a GTID."""

    file: str | None = None
    pos: int | None = None
    gtid: str | None = None


@dataclass(frozen=True)
class TlsConfig:
    """A server connection's TLS, as the mysql client's --ssl-mode: preferred (TLS where
    the server offers it), required (encrypted, the server's certificate unchecked),
    verify_ca (signed by `ca`), verify_identity (and issued to the host name)."""

    mode: str = "preferred"
    ca: str | None = None
    cert: str | None = None  # a client certificate and its key, where the server asks for one
    key: str | None = None

    def connection_kwargs(self) -> dict[str, Any]:
        """pymysql's arguments (see replicator.servers.connect)."""
        if self.mode == "disabled":
            return {"ssl_disabled": True}
        if self.mode == "preferred" and self.cert is None:
            return {}  # pymysql's default: TLS where the server offers it
        ssl = {
            "ca": self.ca,
            "cert": self.cert,
            "key": self.key,
            "verify_mode": self.mode in ("verify_ca", "verify_identity"),
            "check_hostname": self.mode == "verify_identity",
        }
        return {"ssl": {k: v for k, v in ssl.items() if v is not None}}


@dataclass(frozen=True)
class SourceConfig:
    id: str
    host: str
    port: int
    user: str
    password: str = field(repr=False)
    server_id: int  # the replica server id we stream this source's binlog with
    start: StartPosition | None = None
    flavor: str | None = None  # None: detected from the server's VERSION()
    tls: TlsConfig = TlsConfig()

    def connection_kwargs(self) -> dict[str, Any]:
        login = {"host": self.host, "port": self.port, "user": self.user, "password": self.password}
        return {**login, **self.tls.connection_kwargs()}


@dataclass(frozen=True)
class TargetConfig:
    host: str
    port: int
    user: str
    password: str = field(repr=False)
    flavor: str
    meta_schema: str = DEFAULT_META_SCHEMA
    tls: TlsConfig = TlsConfig()

    def connection_kwargs(self) -> dict[str, Any]:
        login = {"host": self.host, "port": self.port, "user": self.user, "password": self.password}
        return {**login, **self.tls.connection_kwargs()}


class FrozenMap(Mapping[str, str]):
    """A read-only, hashable dict, so a Route holding one can be a dict key or set member."""

    __slots__ = ("_data",)

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        self._data = dict(items)

    def __getitem__(self, key: str) -> str:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and self._data == dict(other.items())

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"


@dataclass(frozen=True)
class Extract:
    """One extract column (DM's extract-source/-schema/-table): a part of where a row came
    from, its source id, schema or table name, put in a column of the target. The whole
    name, or what `pattern` (a regular expression the whole name must match) captures in
    its first group; `type` is the column's SQL type (None: a VARCHAR of the name)."""

    part: str  # source | schema | table
    column: str
    pattern: str | None = None
    type: str | None = None

    def value(self, parts: Mapping[str, str]) -> str | None:
        """The column's value for a shard of these names (`ShardId.parts`); None when the
        pattern does not match (`shardmerge check` says which table)."""
        name = parts[self.part]
        if self.pattern is None:
            return name
        found = re.fullmatch(self.pattern, name)
        if found is None:
            return None
        return found.group(1) if found.groups() else found.group(0)


def extracted(
    extract: Mapping[str, str] | Iterable[Extract], parts: Mapping[str, str]
) -> dict[str, str | None]:
    """Extract column (lower-cased) -> its value for a shard of these names (`ShardId.parts`).
    `extract`: the columns with how each is filled, or a mapping of kinds to columns (whole names)."""
    rules = [Extract(k, v) for k, v in extract.items()] if isinstance(extract, Mapping) else list(extract)
    return {e.column.lower(): e.value(parts) for e in rules}


@dataclass(frozen=True)
class Route:
    """Upstream tables matching the `schema` and `table` globs (or, when given, the
    `schema_regex` and `table_regex` regular expressions, matching whole names) go to
    target_schema.target_table. `extract` maps kinds (source, schema, table) to the target
    columns filled with where a row came from; it is a hashable read-only mapping (a dict
    or (kind, column) pairs passed in are converted), and `extract_columns` gives a plain
    dict copy. `extracts` are those columns with how each is filled (`Extract`); given
    only `extract`, each takes its whole name."""

    schema: str
    table: str
    target_schema: str
    target_table: str
    extract: Mapping[str, str] = field(default_factory=FrozenMap)
    schema_regex: str | None = None
    table_regex: str | None = None
    extracts: tuple[Extract, ...] = ()

    def __post_init__(self) -> None:
        if self.extracts:
            pairs: Iterable[tuple[str, str]] = ((e.part, e.column) for e in self.extracts)
        else:
            pairs = self.extract.items() if isinstance(self.extract, Mapping) else self.extract
        # Kinds in a fixed order, so iteration (and column order downstream) does not depend on
        # how the YAML listed them.
        ordered = sorted(((str(k), str(v)) for k, v in pairs), key=lambda p: _extract_order(p[0]))
        object.__setattr__(self, "extract", FrozenMap(ordered))
        by_part = {e.part: e for e in self.extracts}
        object.__setattr__(self, "extracts", tuple(by_part.get(k) or Extract(k, v) for k, v in ordered))

    @property
    def target(self) -> str:
        return f"{self.target_schema}.{self.target_table}"

    @property
    def extract_columns(self) -> dict[str, str]:
        return dict(self.extract.items())

    def coordinator_extract(self) -> dict[str, Any]:
        """What the coordinator of the route's target takes of its extract columns."""
        return {
            "extract_columns": self.extract_columns,
            "extract_types": {e.column: e.type for e in self.extracts if e.type},
            "captured": {e.part: e.pattern for e in self.extracts if e.pattern},
        }

    def extract_values(self, parts: Mapping[str, str]) -> tuple[str | None, ...]:
        """The extract columns' values for a shard of these names, in `extract` order."""
        return tuple(e.value(parts) for e in self.extracts)

    def matches(self, schema: str, table: str) -> bool:
        # Case-sensitive like schema and table names on Linux servers (lower_case_table_names=0).
        if not self.matches_schema(schema):
            return False
        if self.table_regex:
            return re.fullmatch(self.table_regex, table) is not None
        return fnmatchcase(table, self.table)

    def matches_schema(self, schema: str) -> bool:
        if self.schema_regex:
            return re.fullmatch(self.schema_regex, schema) is not None
        return fnmatchcase(schema, self.schema)


# DM's shadow-table-rules and trash-table-rules: the tables an online-DDL tool makes
# beside a shard's table (its copy being altered, its changelog, the old table after the
# swap). Their rows are copies of the shard's, never routed, whatever a route's globs say;
# the tracker follows their schemas, so the swap is one schema change of the shard.
ONLINE_DDL_TOOLS = {
    "gh-ost": (r"_(.+)_gho", r"_(.+)_(?:ghc|del)"),
    "pt-osc": (r"_(.+)_new", r"_(.+)_old"),
}


@dataclass(frozen=True)
class OnlineDDL:
    """Table-name rules (regular expressions on whole table names) of the tools' tables."""

    shadow: tuple[str, ...] = tuple(s for s, _ in ONLINE_DDL_TOOLS.values())
    trash: tuple[str, ...] = tuple(t for _, t in ONLINE_DDL_TOOLS.values())

    def tool_table(self, table: str) -> bool:
        return any(re.fullmatch(rule, table) for rule in (*self.shadow, *self.trash))


# DM's binlog event filters: the kinds of events one can ignore
EVENT_KINDS = (
    "insert",
    "update",
    "delete",
    "truncate table",
    "drop table",
    "add index",
    "drop index",
    "drop column",
)


@dataclass(frozen=True)
class EventFilter:
    """Events of the tables matching `tables` (globs on schema.table) that are ignored:
    `ignore` kinds (EVENT_KINDS) and DDL whose text matches one of `sql` (regexes,
    case-insensitive). What ignoring each means: replicator/schema/event_filter.py."""

    tables: tuple[str, ...] = ("*.*",)
    ignore: frozenset[str] = frozenset()
    sql: tuple[str, ...] = ()

    def covers(self, schema: str, table: str) -> bool:
        return any(fnmatchcase(f"{schema}.{table}", glob) for glob in self.tables)


@dataclass(frozen=True)
class RowFilter:
    """Rows of the tables matching `tables` ignored by a condition on their values (DM's
    expression filter): an insert where `ignore_insert` is TRUE of the row; an update
    where `ignore_update_old` is TRUE of the row before and `ignore_update_new` of the row
    after (both, where both are given); a delete where `ignore_delete` is TRUE of the row
    deleted. NULL and FALSE keep the row. `path` is where it is in the config, for errors.
    How the stream and the backfill apply it: replicator/source/row_filter.py."""

    tables: tuple[str, ...]
    ignore_insert: Condition | None = None
    ignore_update_old: Condition | None = None
    ignore_update_new: Condition | None = None
    ignore_delete: Condition | None = None
    path: str = "filters.rows"

    def covers(self, schema: str, table: str) -> bool:
        return any(fnmatchcase(f"{schema}.{table}", glob) for glob in self.tables)

    def conditions(self) -> list[tuple[str, Condition]]:
        """(field, condition) of the conditions given."""
        given = ((f, getattr(self, f)) for f in ROW_FILTER_CONDITIONS)
        return [(f, c) for f, c in given if c is not None]


@dataclass(frozen=True)
class Filters:
    allow: tuple[str, ...] = ()  # globs on "schema.table"; empty: everything is allowed
    block: tuple[str, ...] = ()
    online_ddl: OnlineDDL = OnlineDDL()  # tables of online-DDL tools: never routed
    events: tuple[EventFilter, ...] = ()  # binlog events ignored
    rows: tuple[RowFilter, ...] = ()  # rows ignored by their values


@dataclass(frozen=True)
class Options:
    batch_size: int = 1000
    workers: int = 4
    safe_mode: bool = False
    safe_mode_window: float = 0.0
    heartbeat: float = 5.0
    max_backoff: float = 30.0
    # apply a shard's row events as the binlog holds them where its table and the target
    # match (MariaDB to MariaDB; replicator/source/row_events.py)
    row_events: bool = True
    spark_master: str | None = None  # the backfill of task_mode all or full (None: local[*])
    # Spark settings of backfill and verify (as spark-submit's --conf; the command line's win)
    spark_conf: tuple[tuple[str, str], ...] = ()
    # rows of a shard read by one Spark task (one chunk of a resumable backfill)
    backfill_rows_per_split: int = ROWS_PER_SPLIT
    # a row the downstream refuses: pause its shard until the operator says (shardctl
    # handle-error), or skip it into the dead-letter table and go on
    on_row_error: str = "pause"
    # a downstream ALTER the server can make neither instantly nor in place (a copy of the
    # table): by pt-online-schema-change while the rows go on, or by the server, holding
    # them (replicator/apply/downstream_alter.py)
    copy_ddl: str = "pt-osc"
    # seconds the lease of the daemon that runs the task lives unrenewed: a standby takes
    # over that long after the active one died (replicator/state/lease.py)
    lease_ttl: float = 6.0
    # bytes (compressed) of changes a paused shard parks in the meta schema, so its source
    # reads on; past it the shard holds its source's binlog from there (0: no parking;
    # replicator/daemon/parking.py)
    park_limit: int = 1 << 30


@dataclass(frozen=True)
class AdminConfig:
    """The daemon's admin API. Port 0: none. Beyond localhost a bearer token is required."""

    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = field(default=None, repr=False)  # never printed
    token_env: str | None = None  # the variable holding the token, for the clients to read it too

    @property
    def local(self) -> bool:
        return self.host in LOOPBACK_HOSTS


@dataclass(frozen=True)
class ValidatorConfig:
    """DM's continuous validation: rows applied are read back from downstream, `fast`
    whether each is there (or gone, after a delete), `full` also its values; a row still
    differing `error_delay` seconds after it was applied is an error (replicator/apply/validator.py)."""

    mode: str = "off"
    error_delay: float = 60.0


@dataclass(frozen=True)
class TaskConfig:
    task: str
    sources: tuple[SourceConfig, ...]
    target: TargetConfig
    routes: tuple[Route, ...]
    filters: Filters = Filters()
    options: Options = Options()
    path: str | None = None  # the file it was loaded from
    admin: AdminConfig = AdminConfig()
    # DM's task-mode: incremental streams (from the config's start, the saved position);
    # all backfills first, then streams from where the backfill began, in one `run`; full
    # backfills and stops
    task_mode: str = "incremental"
    validator: ValidatorConfig = ValidatorConfig()

    def source(self, source_id: str) -> SourceConfig:
        for source in self.sources:
            if source.id == source_id:
                return source
        raise KeyError(source_id)


def load_config(
    path: str | Path, *, environ: Mapping[str, str] | None = None, source_passwords: bool = True
) -> TaskConfig:
    """Read and validate the YAML task config at `path`; ConfigError names what is wrong.
    `source_passwords=False`: for a command that never connects to a source (`status`), so
    an operator without the sources' secrets can run it: their password_env is checked but
    not read, and their password is left empty."""
    where = str(path)
    return parse_config(
        _read_yaml(path), where, environ=environ, path=where, source_passwords=source_passwords
    )


def load_admin(path: str | Path) -> AdminConfig:
    """Only the admin section of the task config at `path`: where the daemon's admin API
    listens and the variable holding its token (named, not read: the client reads it). For
    `shardctl`, whose operator need not have the servers' passwords: the rest of the file
    is neither validated nor read."""
    root = _Node(str(path), "", _read_yaml(path), "a mapping with task, sources, target and routes")
    root.require_mapping(root.expected)
    node = root.child("admin")
    return AdminConfig() if node.absent else _parse_admin(node, None)


def _read_yaml(path: str | Path) -> Any:
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: not UTF-8 text: {exc.reason}") from exc
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: {_yaml_message(exc)}") from exc


def parse_config(
    data: Any,
    where: str = "config",
    *,
    environ: Mapping[str, str] | None = None,
    path: str | None = None,
    source_passwords: bool = True,
) -> TaskConfig:
    """Validate already-parsed YAML (or any dict of the same shape) into a TaskConfig."""
    env = os.environ if environ is None else environ
    root = _Node(where, "", data, "a mapping with task, sources, target and routes")
    root.check_fields(_TOP_FIELDS)
    task = root.get("task", required=True, convert=_name)
    mode = root.get("task_mode", default="incremental", convert=_choice(TASK_MODES))
    # In the order of the format, so the first problem reported is the first in the file.
    sources = _parse_sources(root.child("sources", required=True), env if source_passwords else None)
    target = _parse_target(root.child("target", required=True), env)
    routes = _parse_routes(root.child("routes", required=True), target)
    filters_node = root.child("filters")
    filters = Filters() if filters_node.absent else _parse_filters(filters_node)
    filters = replace(filters, online_ddl=_parse_online_ddl(root.child("online_ddl")))
    options_node = root.child("options")
    options = Options() if options_node.absent else _parse_options(options_node)
    admin_node = root.child("admin")
    admin = AdminConfig() if admin_node.absent else _parse_admin(admin_node, env)
    validator_node = root.child("validator")
    validator = ValidatorConfig() if validator_node.absent else _parse_validator(validator_node)
    return TaskConfig(task, sources, target, routes, filters, options, path, admin, mode, validator)


# -- sections ----------------------------------------------------------------------------------


def _parse_sources(node: _Node, env: Mapping[str, str] | None) -> tuple[SourceConfig, ...]:
    items = node.items("a list of sources")
    if not items:
        raise node.error("expected at least one source")
    sources: list[SourceConfig] = []
    seen_ids: dict[str, int] = {}
    seen_server_ids: dict[int, int] = {}
    for index, item in enumerate(items):
        item.require_mapping("a source with id, host, user and server_id")
        item.check_fields(_SOURCE_FIELDS)
        source_id = item.get("id", required=True, convert=_name)
        if source_id in seen_ids:
            raise item.error(f"duplicate source id {source_id!r}, also sources[{seen_ids[source_id]}]", "id")
        seen_ids[source_id] = index
        server_id = item.get("server_id", required=True, convert=_int_range(1, MAX_SERVER_ID))
        if server_id == STANDBY_FLIP:
            raise item.error(
                f"server_id {STANDBY_FLIP} cannot be used: a daemon holding an even lease epoch streams "
                f"with the configured id XOR {STANDBY_FLIP}, which would be 0; choose another",
                "server_id",
            )
        if server_id in seen_server_ids or server_id ^ STANDBY_FLIP in seen_server_ids:
            other = seen_server_ids.get(server_id, seen_server_ids.get(server_id ^ STANDBY_FLIP))
            raise item.error(
                f"server_id {server_id} is taken by sources[{other}] (the same, or the one a daemon "
                f"holding an even lease epoch streams it with: XOR {STANDBY_FLIP}); every binlog stream "
                "of a task needs its own replica server id",
                "server_id",
            )
        seen_server_ids[server_id] = index
        flavor = item.get("flavor", convert=_choice(SOURCE_FLAVORS))
        start_node = item.child("start")
        sources.append(
            SourceConfig(
                id=source_id,
                host=item.get("host", required=True, convert=_nonempty_string),
                port=item.get("port", default=3306, convert=_int_range(1, MAX_PORT)),
                user=item.get("user", required=True, convert=_nonempty_string),
                password=_password(item, env),
                server_id=server_id,
                start=None if start_node.absent else _parse_start(start_node, flavor),
                flavor=flavor,
                tls=_parse_tls(item.child("tls")),
            )
        )
    return tuple(sources)


def _parse_start(node: _Node, flavor: str | None) -> StartPosition:
    node.require_mapping("file and pos, or gtid")
    node.check_fields(_START_FIELDS)
    gtid = node.get("gtid", convert=_nonempty_string)
    file = node.get("file", convert=_binlog_file)
    has_pos = node.has("pos")
    if gtid is not None and (file is not None or has_pos):
        raise node.error("give either gtid or file and pos, not both")
    if gtid is not None:
        return StartPosition(gtid=node.child("gtid").convert(lambda value: check_gtid(value, flavor)))
    if file is None:
        if has_pos:
            raise node.error("pos needs file")
        raise node.error("expected file and pos, or gtid")
    # A file alone means its beginning: the first event is right after the magic number.
    pos = node.get("pos", default=MIN_BINLOG_POS, convert=_int_range(MIN_BINLOG_POS, MAX_BINLOG_POS))
    return StartPosition(file=file, pos=pos)


def check_gtid(gtid: str, flavor: str | None) -> str:
    """A MariaDB GTID position or a MySQL GTID set, as the source's flavor (None: either)."""
    mariadb = bool(_MARIADB_GTID.fullmatch(gtid))
    mysql = bool(_MYSQL_GTID.fullmatch(gtid))
    from replicator.server_rules import server_rules  # (lattice's flavors: not loaded for every config)

    rules = server_rules(flavor) if flavor is not None else None
    if rules is not None and rules.gtid_positions and not mariadb:
        raise ValueError(f"expected a MariaDB GTID position like 0-101-1234, got {gtid!r}")
    if rules is not None and rules.gtid_sets and not mysql:
        raise ValueError(
            f"expected a MySQL GTID set like 3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5, got {gtid!r}"
        )
    if not (mariadb or mysql):
        raise ValueError(
            "expected a MariaDB GTID position (0-101-1234) or a MySQL GTID set "
            f"(3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5), got {gtid!r}"
        )
    return gtid


def _parse_target(node: _Node, env: Mapping[str, str]) -> TargetConfig:
    node.require_mapping("a mapping with host, user and flavor")
    node.check_fields(_TARGET_FIELDS)
    meta_schema = node.get("meta_schema", default=DEFAULT_META_SCHEMA, convert=_meta_schema)
    return TargetConfig(
        host=node.get("host", required=True, convert=_nonempty_string),
        port=node.get("port", default=3306, convert=_int_range(1, MAX_PORT)),
        user=node.get("user", required=True, convert=_nonempty_string),
        password=_password(node, env),
        flavor=node.get("flavor", required=True, convert=_choice(TARGET_FLAVORS)),
        meta_schema=meta_schema,
        tls=_parse_tls(node.child("tls")),
    )


def _parse_tls(node: _Node) -> TlsConfig:
    if node.absent:
        return TlsConfig()
    node.require_mapping("a mapping with mode and, as the mode needs, ca, cert and key")
    node.check_fields(_TLS_FIELDS)
    mode = node.get("mode", default="preferred", convert=_choice(TLS_MODES))
    files = {name: node.get(name, convert=_readable_file) for name in ("ca", "cert", "key")}
    if mode in ("verify_ca", "verify_identity") and files["ca"] is None:
        raise node.error(f"mode {mode} checks the server's certificate against a CA: give its file as ca")
    if (files["cert"] is None) != (files["key"] is None):
        raise node.error("a client certificate needs its key: give both cert and key, or neither")
    if mode == "disabled" and any(files.values()):
        raise node.error("mode disabled uses no certificates: remove ca, cert and key, or choose a mode")
    return TlsConfig(mode, **files)


def _readable_file(value: Any) -> str:
    try:
        path = Path(_nonempty_string(value)).expanduser()
    except RuntimeError:  # ~user of no user here
        raise ValueError(f"expected a readable file, got {str(value)!r}") from None
    if not path.is_file() or not os.access(path, os.R_OK):
        raise ValueError(f"expected a readable file, got {str(value)!r}")
    return str(path)


def _parse_routes(node: _Node, target: TargetConfig) -> tuple[Route, ...]:
    items = node.items("a list of routes")
    if not items:
        raise node.error("expected at least one route")
    routes = []
    for item in items:
        item.require_mapping("a route with schema, table and target")
        item.check_fields(_ROUTE_FIELDS)
        names = {}
        for part in ("schema", "table"):
            glob = item.get(part, convert=_nonempty_string)
            regex = item.get(f"{part}_regex", convert=_regex)
            if glob is None and regex is None:
                raise item.error(f"missing required field {part!r} (or {part}_regex, a regular expression)")
            if glob is not None and regex is not None:
                raise item.error(f"give {part} (a glob) or {part}_regex (a regular expression), not both")
            names[part] = (glob or "*", regex)
        target_schema, target_table = item.get("target", required=True, convert=_target_name)
        if target_schema == target.meta_schema:
            raise item.error(
                f"{target_schema} is the meta schema (target.meta_schema); route elsewhere", "target"
            )
        extract_node = item.child("extract")
        extracts = () if extract_node.absent else _parse_extract(extract_node)
        routes.append(
            Route(
                names["schema"][0],
                names["table"][0],
                target_schema,
                target_table,
                schema_regex=names["schema"][1],
                table_regex=names["table"][1],
                extracts=extracts,
            )
        )
    for item, route in zip(items, routes, strict=True):
        first = next(r for r in routes if r.target == route.target)
        if route.extracts != first.extracts:
            raise item.error(
                f"the extract columns differ from another route's into {route.target}: every route "
                "into one target fills the same columns the same way",
                "extract",
            )
    return tuple(routes)


def _parse_extract(node: _Node) -> tuple[Extract, ...]:
    """source/schema/table: a column name (the whole name goes in it), or {column, regex
    (its first group is the value), type (the column's SQL type)}."""
    node.require_mapping("a mapping of source, schema and/or table to column names")
    node.check_fields(EXTRACT_KINDS)
    extracts: list[Extract] = []
    for kind in EXTRACT_KINDS:
        child = node.child(kind)
        if child.absent:
            continue
        if child.is_mapping:
            child.expected = "a mapping with column, and optionally regex and type"
            child.check_fields(_EXTRACT_FIELDS)
            column = child.get("column", required=True, convert=_identifier)
            extract = Extract(
                kind, column, child.get("regex", convert=_regex), child.get("type", convert=_column_type)
            )
        else:
            extract = Extract(kind, node.get(kind, convert=_identifier))
        for other in extracts:
            # Column names are case-insensitive in MySQL: `_Source` and `_source` are one column.
            if other.column.lower() == extract.column.lower():
                raise node.error(f"column {extract.column!r} is already the {other.part} column", kind)
        extracts.append(extract)
    return tuple(extracts)


def _regex(value: Any) -> str:
    text = _nonempty_string(value)
    try:
        re.compile(text)
    except re.error as exc:
        raise ValueError(f"not a regular expression ({exc}): {text!r}") from None
    return text


def _column_type(value: Any) -> str:
    """An SQL column type, as the target will have it (`INT UNSIGNED`, `VARCHAR(32)`)."""
    from lattice import parse_table

    text = _nonempty_string(value)
    try:
        column = parse_table(f"CREATE TABLE t (c {text} NOT NULL)").columns[0]
    except Exception as exc:
        raise ValueError(f"not a column type: {text!r} ({exc})") from None
    if column.generated is not None or column.default is not None:
        raise ValueError(f"a type alone is wanted, not {text!r}")
    return text


def _parse_filters(node: _Node) -> Filters:
    node.require_mapping("a mapping with allow and/or block")
    node.check_fields(_FILTER_FIELDS)
    events = node.child("events")
    items = [] if events.absent else events.items("a list of event filters (tables, ignore, sql)")
    rows = node.child("rows")
    row_items = [] if rows.absent else rows.items("a list of row filters (tables, ignore_insert, ...)")
    return Filters(
        allow=_glob_list(node.child("allow")),
        block=_glob_list(node.child("block")),
        events=tuple(_parse_event_filter(i) for i in items),
        rows=tuple(_parse_row_filter(i) for i in row_items),
    )


def _parse_row_filter(node: _Node) -> RowFilter:
    node.expected = f"a row filter with tables and one or more of {', '.join(ROW_FILTER_CONDITIONS)}"
    node.check_fields(_ROW_FILTER_FIELDS)
    tables = _glob_list(node.child("tables", required=True))
    if not tables:
        raise node.error("an empty list matches no table; give globs such as 'shop_*.orders'", "tables")
    conditions = {}
    for name in ROW_FILTER_CONDITIONS:
        child = node.child(name)
        if not child.absent:
            conditions[name] = child.convert(_condition)
    if not conditions:
        raise node.error(f"ignores nothing: give one or more of {', '.join(ROW_FILTER_CONDITIONS)}")
    return RowFilter(tables, **conditions, path=node.path)


def _condition(value: Any) -> Condition:
    # (sqlglot loaded only for a config that has row filters: every command reads the config)
    from replicator.row_condition import ConditionError, parse_condition

    if not isinstance(value, str):
        raise ValueError(f"expected a SQL condition as a string, got {_got(value)}")
    try:
        return parse_condition(value)
    except ConditionError as exc:
        raise ValueError(f"{value!r}: {exc}") from None


def _parse_event_filter(node: _Node) -> EventFilter:
    node.expected = "a filter with tables, ignore and/or sql"
    node.check_fields(_EVENT_FILTER_FIELDS)
    tables = _glob_list(node.child("tables")) or ("*.*",)
    kinds = node.child("ignore")
    kind_items = [] if kinds.absent else kinds.items("a list of event kinds")
    ignore = frozenset(i.convert(_choice(EVENT_KINDS)) for i in kind_items)
    sql = node.child("sql")
    patterns = tuple(i.convert(_regex) for i in ([] if sql.absent else sql.items("a list of regexes")))
    if not ignore and not patterns:
        raise node.error("ignores nothing: give ignore (event kinds) or sql (patterns of DDL text)")
    return EventFilter(tables, ignore, patterns)


def _parse_online_ddl(node: _Node) -> OnlineDDL:
    """online_ddl: gh-ost, pt-osc, both (the default), none, a list of tools, or the rules
    themselves: {shadow: [regex...], trash: [regex...]} (DM's shadow-/trash-table-rules)."""
    if node.absent:
        return OnlineDDL()
    value = node.value
    if isinstance(value, dict):
        node.expected = "a mapping with shadow and trash"
        node.check_fields(_ONLINE_DDL_FIELDS)
        rules = {}
        for field_name in _ONLINE_DDL_FIELDS:
            child = node.child(field_name)
            items = [] if child.absent else child.items("a list of regular expressions")
            rules[field_name] = tuple(i.convert(_regex) for i in items)
        return OnlineDDL(**rules)
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        expected = "gh-ost, pt-osc, both, none or {shadow: [...], trash: [...]}"
        raise node.error(f"expected {expected}, got {_got(value)}")
    tools = []
    for name in names:
        if name in ("none", "both"):
            tools += [] if name == "none" else list(ONLINE_DDL_TOOLS)
        elif name in ONLINE_DDL_TOOLS:
            tools.append(name)
        else:
            raise node.error(f"unknown online-DDL tool {name!r}; expected gh-ost, pt-osc, both or none")
    return OnlineDDL(
        tuple(ONLINE_DDL_TOOLS[t][0] for t in dict.fromkeys(tools)),
        tuple(ONLINE_DDL_TOOLS[t][1] for t in dict.fromkeys(tools)),
    )


def _glob_list(node: _Node) -> tuple[str, ...]:
    if node.absent:
        return ()
    return tuple(item.convert(_table_glob) for item in node.items("a list of globs on schema.table"))


def _parse_options(node: _Node) -> Options:
    node.require_mapping("a mapping of option names to values")
    node.check_fields(_OPTION_FIELDS)
    defaults = Options()
    return Options(
        batch_size=node.get("batch_size", default=defaults.batch_size, convert=_int_range(1, MAX_BATCH_SIZE)),
        workers=node.get("workers", default=defaults.workers, convert=_int_range(1, MAX_WORKERS)),
        safe_mode=node.get("safe_mode", default=defaults.safe_mode, convert=_bool),
        safe_mode_window=node.get(
            "safe_mode_window", default=defaults.safe_mode_window, convert=_seconds(allow_zero=True)
        ),
        heartbeat=node.get("heartbeat", default=defaults.heartbeat, convert=_seconds(maximum=MAX_HEARTBEAT)),
        max_backoff=node.get("max_backoff", default=defaults.max_backoff, convert=_seconds()),
        row_events=node.get("row_events", default=defaults.row_events, convert=_bool),
        spark_master=node.get("spark_master", convert=_nonempty_string),
        spark_conf=node.get("spark_conf", default=(), convert=_spark_conf),
        backfill_rows_per_split=node.get(
            "backfill_rows_per_split",
            default=defaults.backfill_rows_per_split,
            convert=_int_range(1, MAX_ROWS_PER_SPLIT),
        ),
        on_row_error=node.get(
            "on_row_error", default=defaults.on_row_error, convert=_choice(("pause", "skip"))
        ),
        copy_ddl=node.get("copy_ddl", default=defaults.copy_ddl, convert=_choice(COPY_MODES)),
        lease_ttl=node.get("lease_ttl", default=defaults.lease_ttl, convert=_seconds(maximum=MAX_LEASE_TTL)),
        park_limit=node.get("park_limit", default=defaults.park_limit, convert=_int_range(0, 1 << 40)),
    )


def _parse_validator(node: _Node) -> ValidatorConfig:
    node.require_mapping("a mapping with mode (off, fast, full) and error_delay")
    node.check_fields(_VALIDATOR_FIELDS)
    defaults = ValidatorConfig()
    return ValidatorConfig(
        mode=node.get("mode", default=defaults.mode, convert=_validator_mode),
        error_delay=node.get("error_delay", default=defaults.error_delay, convert=_seconds(allow_zero=True)),
    )


def _parse_admin(node: _Node, env: Mapping[str, str] | None) -> AdminConfig:
    """`env` None: the token's variable named, not read (`load_admin`)."""
    node.require_mapping("a mapping with host, port and token_env")
    node.check_fields(_ADMIN_FIELDS)
    defaults = AdminConfig()
    host = node.get("host", default=defaults.host, convert=_nonempty_string)
    port = node.get("port", default=defaults.port, convert=_int_range(0, MAX_PORT))
    token_env = node.get("token_env", convert=_env_name)
    token = None
    if token_env is not None and env is not None:
        if not env.get(token_env):
            raise node.error(f"environment variable {token_env} is not set", "token_env")
        token = env[token_env]
    if host not in LOOPBACK_HOSTS and token_env is None and port:
        raise node.error(
            f"the admin API listens on {host}, beyond localhost: set token_env to the variable holding "
            "the bearer token clients must send",
            "token_env",
        )
    return AdminConfig(host, port, token, token_env)


def _password(node: _Node, env: Mapping[str, str] | None) -> str:
    """`env` None: a password_env is checked but not read (`load_config(source_passwords=False)`)."""
    if node.has("password") and node.has("password_env"):
        raise node.error("give either password or password_env, not both")
    if node.has("password_env"):
        name = node.get("password_env", convert=_env_name)
        if env is None:
            return ""
        if name not in env:
            raise node.error(f"environment variable {name} is not set", "password_env")
        return env[name]
    value = node.child("password").value
    # No password, or `password:` left empty: an account without a password.
    if value is _MISSING or value is None:
        return ""
    if not isinstance(value, str):
        # Never echo the value: it is a password.
        raise node.error('expected a string; quote the password, e.g. password: "0123"', "password")
    return value


# -- converters: value -> checked value, or ValueError with what was expected ------------------


def _got(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _nonempty_string(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a non-empty string, got {_got(value)}")
    return value


def _name(value: Any) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ValueError(f"expected 1 to 64 letters, digits, '-' and '_', got {_got(value)}")
    return value


def _env_name(value: Any) -> str:
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
        raise ValueError(f"expected the name of an environment variable, got {_got(value)}")
    return value


def _meta_schema(value: Any) -> str:
    if not isinstance(value, str) or not _META_SCHEMA.fullmatch(value):
        raise ValueError(f"expected 1 to 64 letters, digits, '_' and '$', got {_got(value)}")
    if value.lower() in SYSTEM_SCHEMAS:
        raise ValueError(f"{value} is a system schema")
    return value


def _identifier(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a column name, got {_got(value)}")
    _check_identifier(value)
    return value


def _check_identifier(name: str) -> None:
    if len(name) > MAX_IDENTIFIER:
        raise ValueError(f"{name!r} is longer than {MAX_IDENTIFIER} characters")
    bad = sorted(set(name) & _BAD_IDENTIFIER_CHARS)
    if bad:
        raise ValueError(f"{name!r} contains {bad[0]!r}")
    if name != name.rstrip():
        raise ValueError(f"{name!r} ends with a space, which MySQL does not allow in names")


def _target_name(value: Any) -> tuple[str, str]:
    if not isinstance(value, str) or value.count(".") != 1:
        raise ValueError(f"expected schema.table, got {_got(value)}")
    schema, table = value.split(".")
    if not schema or not table:
        raise ValueError(f"expected schema.table, got {_got(value)}")
    _check_identifier(schema)
    _check_identifier(table)
    if schema.lower() in SYSTEM_SCHEMAS:
        raise ValueError(f"{schema} is a system schema")
    return schema, table


def _table_glob(value: Any) -> str:
    # Without a dot the glob would be matched against "schema.table" as a whole and most likely
    # match nothing (`shop_01` was meant as `shop_01.*`): reject it rather than silently filter.
    if not isinstance(value, str) or "." not in value:
        raise ValueError(f"expected a glob on schema.table such as 'shop_*.*', got {_got(value)}")
    return value


def _binlog_file(value: Any) -> str:
    if not isinstance(value, str) or not value or "/" in value:
        raise ValueError(f"expected a binlog file name such as mysql-bin.000003, got {_got(value)}")
    return value


def _choice(choices: Iterable[str]) -> Convert:
    options = tuple(choices)

    def convert(value: Any) -> str:
        if isinstance(value, str) and value.lower() in options:
            return value.lower()
        raise ValueError(f"expected one of {', '.join(options)}, got {_got(value)}")

    return convert


def _validator_mode(value: Any) -> str:
    # YAML 1.1 reads a bare `off` as false
    return "off" if value is False else _choice(VALIDATOR_MODES)(value)


def _spark_conf(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping of Spark settings to values, got {_got(value)}")
    for name, setting in value.items():
        if not isinstance(name, str) or not name.startswith("spark."):
            raise ValueError(f"{name!r} is not a Spark setting (spark.*)")
        if not isinstance(setting, str | int | float | bool):
            raise ValueError(f"{name}: expected a value, got {_got(setting)}")
    return tuple((k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in value.items())


def _int_range(low: int, high: int) -> Convert:
    def convert(value: Any) -> int:
        # bool is an int in Python; `port: yes` is not a port.
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"expected an integer from {low} to {high}, got {_got(value)}")
        return value

    return convert


def _seconds(*, allow_zero: bool = False, maximum: float | None = None) -> Convert:
    lowest = "0 or more" if allow_zero else "more than 0"
    expected = f"a number of seconds, {lowest}" + (f" and at most {maximum}" if maximum else "")

    def convert(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:  # NaN
            raise ValueError(f"expected {expected}, got {_got(value)}")
        too_low = value < 0 if allow_zero else value <= 0
        if too_low or (maximum is not None and value > maximum):
            raise ValueError(f"expected {expected}, got {_got(value)}")
        return float(value)

    return convert


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {_got(value)}")
    return value


def _extract_order(kind: str) -> int:
    return EXTRACT_KINDS.index(kind) if kind in EXTRACT_KINDS else len(EXTRACT_KINDS)


# -- value checks for importers of other formats (replicator/cli/dm/) ---------------------
# A value they carry over is held to this format's rules, and their error names the field of
# their own format. Each returns the value or raises ValueError saying what was expected.

check_name = _name
check_nonempty = _nonempty_string
check_port = _int_range(1, MAX_PORT)
check_server_id = _int_range(1, MAX_SERVER_ID)
check_binlog_file = _binlog_file
check_binlog_pos = _int_range(MIN_BINLOG_POS, MAX_BINLOG_POS)
check_target_name = _target_name
check_identifier = _identifier
check_regex = _regex
check_readable_file = _readable_file


def read_yaml(path: str | Path) -> Any:
    """A YAML file as this format reads it (a key given twice is an error); ConfigError names
    the file."""
    return _read_yaml(path)


# -- walking the parsed YAML with field paths --------------------------------------------------

_MISSING = object()


class _Node:
    """A value in the parsed YAML and its field path, for error messages that name the field."""

    def __init__(self, where: str, path: str, value: Any, expected: str = "a value") -> None:
        self.where = where
        self.path = path
        self.value = value
        self.expected = expected

    @property
    def missing(self) -> bool:
        return self.value is _MISSING

    @property
    def absent(self) -> bool:
        # An optional section left empty (`options:` with every line commented out) is null.
        return self.value is _MISSING or self.value is None

    def error(self, message: str, key: str | None = None) -> ConfigError:
        path = self._join(key) if key is not None else self.path
        return ConfigError(f"{self.where}: {path}: {message}" if path else f"{self.where}: {message}")

    def require_mapping(self, expected: str) -> None:
        if not isinstance(self.value, dict):
            got = "nothing" if self.value is None else _got(self.value)
            raise self.error(f"expected {expected}, got {got}")

    def check_fields(self, allowed: tuple[str, ...]) -> None:
        self.require_mapping(self.expected)
        for key in self.value:
            if key in allowed:
                continue
            name = str(key)
            close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}?" if close else f"expected one of {', '.join(allowed)}"
            raise self.error(f"unknown field {name!r} ({hint})")

    def has(self, key: str) -> bool:
        return isinstance(self.value, dict) and key in self.value

    @property
    def is_mapping(self) -> bool:
        return isinstance(self.value, dict)

    def child(self, key: str, *, required: bool = False) -> _Node:
        if not self.has(key):
            if required:
                raise self.error(f"missing required field {key!r}")
            return _Node(self.where, self._join(key), _MISSING)
        return _Node(self.where, self._join(key), self.value[key])

    def get(
        self, key: str, *, required: bool = False, default: Any = None, convert: Convert | None = None
    ) -> Any:
        node = self.child(key, required=required)
        if node.missing:
            return default
        return node.convert(convert) if convert else node.value

    def convert(self, convert: Convert) -> Any:
        try:
            return convert(self.value)
        except ValueError as exc:
            raise self.error(str(exc)) from None

    def items(self, expected: str) -> list[_Node]:
        if not isinstance(self.value, list):
            got = "nothing" if self.value is None else _got(self.value)
            raise self.error(f"expected {expected}, got {got}")
        return [_Node(self.where, f"{self.path}[{i}]", item) for i, item in enumerate(self.value)]

    def _join(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping; plain YAML keeps the last one,
    so a second `port:` further down would silently win."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        # Keys merged in with `<<: *anchor` may legitimately be overridden; only scalar keys
        # written in this mapping itself count.
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _yaml_message(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return f"invalid YAML: {problem}"
    return f"line {mark.line + 1}, column {mark.column + 1}: invalid YAML: {problem}"
