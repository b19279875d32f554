"""The task config's keys as data: each section with its keys, and for each its type, whether it
is required and what it does. `replicator/config.py` refuses any key a section here does not list
(its field checks read these tuples), and `replicator/cli/config_doc.py` renders the configuration
reference from them and from the defaults of config.py's dataclasses, so the page and the
parser cannot tell different stories. Nothing is imported here: config.py imports this."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Key:
    """One key of a section. `default`: the value taken when it is absent, as the reference
    shows it; None where the section's model (`Section.model`) has a field of the key's name,
    whose default is shown instead, or where there is none (a required key, an optional one
    whose absence means "not set")."""

    name: str
    type: str
    help: str
    required: bool = False
    default: str | None = None


@dataclass(frozen=True)
class Section:
    """Keys at one place of the file. `path` as config errors write it (`sources[]` is each
    item of the list); `model`: the name of the dataclass of config.py the section becomes,
    whose field defaults are shown for keys of the same name."""

    path: str
    help: str
    keys: tuple[Key, ...]
    model: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(key.name for key in self.keys)


# A server's port and password, in a source's section and the target's alike.
PORT = Key("port", "integer, 1 to 65535", "The server's port.", default="`3306`")
PASSWORD = (
    Key(
        "password",
        "string",
        "The password, in the file. Give this or `password_env`, not both; neither: an empty password.",
    ),
    Key(
        "password_env",
        "environment variable name",
        "The variable holding the password, read when the config is loaded (it must be set).",
    ),
)

TOP = Section(
    "",
    "The top of the file.",
    (
        Key(
            "task",
            "name: letters, digits, `-`, `_`",
            (
                "The task's name. Its state is kept under it in the meta schema, so renaming a task starts "
                "it from scratch."
            ),
            required=True,
        ),
        Key(
            "task_mode",
            "`incremental`, `all` or `full`",
            (
                "DM's task-mode. `incremental` streams from each source's `start` or the saved position; "
                "`all` runs the Spark backfill of every shard first, then streams from where it began, in "
                "one `shardmerge run`; `full` backfills and stops."
            ),
        ),
        Key(
            "sources",
            "list of sources (below)",
            "The upstream servers holding the shards; each one's binlog is read by a stream of its own.",
            required=True,
        ),
        Key(
            "target",
            "mapping (below)",
            "The downstream server every shard merges into.",
            required=True,
        ),
        Key(
            "routes",
            "list of routes (below)",
            "Which upstream tables go to which downstream table; the first matching route wins.",
            required=True,
        ),
        Key(
            "filters",
            "mapping (below)",
            "Tables left out, events and rows ignored.",
        ),
        Key(
            "online_ddl",
            "`both`, `gh-ost`, `pt-osc`, `none`, a list of them, or a mapping (below)",
            (
                "DM's online-ddl: the tables online-DDL tools make beside a shard's table are never routed "
                "(their rows are copies); their schemas are followed, so a tool's cut-over is one schema "
                "change of the shard."
            ),
            default="`both`",
        ),
        Key(
            "validator",
            "mapping (below)",
            "DM's continuous validation of the rows applied.",
        ),
        Key(
            "options",
            "mapping (below)",
            "Tuning.",
        ),
        Key(
            "admin",
            "mapping (below)",
            (
                "The daemon's admin API, which `shardctl` talks to. Without this section it listens on "
                "127.0.0.1:8080."
            ),
        ),
    ),
    model="TaskConfig",
)

SOURCES = Section(
    "sources[]",
    (
        "Each upstream server. Its user needs REPLICATION SLAVE, REPLICATION CLIENT (BINLOG MONITOR on "
        "MariaDB 10.5 and later) and SELECT on the shard tables."
    ),
    (
        Key(
            "id",
            "name: letters, digits, `-`, `_`",
            "Unique in the task; shard ids are `ID.schema.table`.",
            required=True,
        ),
        Key(
            "host",
            "string",
            "The server to read the binlog from.",
            required=True,
        ),
        PORT,
        Key(
            "user",
            "string",
            "The user to log in as.",
            required=True,
        ),
        *PASSWORD,
        Key(
            "server_id",
            "integer, 1 to 4294967295, not 2147483648",
            (
                "The replica server id this task streams the source's binlog with: unique in the task and no"
                " upstream server's own `@@server_id`. A standby daemon holding an even lease epoch streams "
                "with this id XOR 2^31, and so does every other reader of the source among a task's members,"
                " so two sources' ids may not differ by just that bit."
            ),
            required=True,
        ),
        Key(
            "start",
            "mapping (below)",
            (
                "Where the first run starts reading; later runs resume from the saved position. Absent: the "
                "server's current binlog position."
            ),
        ),
        Key(
            "flavor",
            "`mysql` or `mariadb`",
            "The server's kind. Absent: told from its `VERSION()`.",
        ),
        Key(
            "tls",
            "mapping (below)",
            (
                "TLS of every connection to this server: the binlog stream, the tracker, the applier, "
                "Spark's JDBC."
            ),
        ),
    ),
    model="SourceConfig",
)

START = Section(
    "sources[].start",
    "A first start position: `file` and `pos`, or `gtid`, not both.",
    (
        Key(
            "file",
            "binlog file name",
            "The binlog file to start in.",
        ),
        Key(
            "pos",
            "integer, 4 or more",
            "The position in `file`.",
            default="`4` (the start of the file)",
        ),
        Key(
            "gtid",
            "GTID",
            "A MariaDB GTID position (`0-101-1234`) or a MySQL GTID set, as the source's flavor.",
        ),
    ),
)

TLS = Section(
    "sources[].tls, target.tls",
    (
        "A connection's TLS, as the mysql client's `--ssl-mode`. Spark's JDBC (backfill, verify) takes "
        "`mode` and `ca` but not `cert` and `key`, and connects in clear under `preferred`."
    ),
    (
        Key(
            "mode",
            "`disabled`, `preferred`, `required`, `verify_ca` or `verify_identity`",
            (
                "`preferred`: TLS where the server offers it; `required`: encrypted, the certificate "
                "unchecked; `verify_ca`: signed by `ca`; `verify_identity`: and issued to the host name."
            ),
        ),
        Key(
            "ca",
            "readable file",
            "The CA's certificate; required by `verify_ca` and `verify_identity`.",
        ),
        Key(
            "cert",
            "readable file",
            "A client certificate, where the server asks for one; with `key`.",
        ),
        Key(
            "key",
            "readable file",
            "The client certificate's key; with `cert`.",
        ),
    ),
    model="TlsConfig",
)

TARGET = Section(
    "target",
    "The downstream server.",
    (
        Key(
            "host",
            "string",
            "The server's host.",
            required=True,
        ),
        PORT,
        Key(
            "user",
            "string",
            (
                "The user to log in as; it creates and changes the merged tables and writes their rows and "
                "the meta schema."
            ),
            required=True,
        ),
        *PASSWORD,
        Key(
            "flavor",
            "`mysql`, `mariadb` or `tidb`",
            "The server's kind: it decides the DDL written downstream.",
            required=True,
        ),
        Key(
            "meta_schema",
            "schema name",
            "Where the task keeps its positions, the shards' schemas and its state; never a route's target.",
        ),
        Key(
            "tls",
            "mapping (below)",
            (
                "TLS of every connection to this server: the binlog stream, the tracker, the applier, "
                "Spark's JDBC."
            ),
        ),
    ),
    model="TargetConfig",
)

ROUTES = Section(
    "routes[]",
    (
        "Upstream tables matching the schema and table patterns go to `target`. Globs (`*`, `?`, `[...]`) "
        "are case-sensitive, as table names on Linux servers; regular expressions match whole names. Each of"
        " schema and table is given as a glob or as a regular expression, not both."
    ),
    (
        Key(
            "schema",
            "glob",
            "The upstream schema.",
            default="`*`, where `schema_regex` is absent",
        ),
        Key(
            "table",
            "glob",
            "The upstream table.",
            default="`*`, where `table_regex` is absent",
        ),
        Key(
            "schema_regex",
            "regular expression",
            "The upstream schema, DM's style.",
        ),
        Key(
            "table_regex",
            "regular expression",
            "The upstream table, DM's style.",
        ),
        Key(
            "target",
            "`schema.table`",
            "The downstream table; not in the meta schema.",
            required=True,
        ),
        Key(
            "extract",
            "mapping (below)",
            (
                "Target columns filled with where each row came from, so rows of different shards with the "
                "same key stay apart (they lead the downstream primary key). Every route into one target "
                "fills the same columns the same way."
            ),
        ),
    ),
)

EXTRACT = Section(
    "routes[].extract",
    (
        "DM's extract-source/-schema/-table: any of the three, each a column name (the whole name goes in "
        "it) or a mapping (below)."
    ),
    (
        Key(
            "source",
            "column name or mapping",
            "The column holding the source id.",
        ),
        Key(
            "schema",
            "column name or mapping",
            "The column holding the upstream schema's name.",
        ),
        Key(
            "table",
            "column name or mapping",
            "The column holding the upstream table's name.",
        ),
    ),
)

EXTRACT_COLUMN = Section(
    "routes[].extract.source, .schema, .table",
    "An extract column holding a part of the name.",
    (
        Key(
            "column",
            "column name",
            "The target column.",
            required=True,
        ),
        Key(
            "regex",
            "regular expression",
            "Must match the whole name; its first group is the value (no group: the whole match).",
        ),
        Key(
            "type",
            "SQL column type",
            "The column's type, e.g. `INT UNSIGNED`.",
            default="a VARCHAR of the name",
        ),
    ),
)

FILTERS = Section(
    "filters",
    "Globs on `schema.table`, applied before the routes.",
    (
        Key(
            "allow",
            "list of globs",
            "When given, only matching tables are replicated.",
        ),
        Key(
            "block",
            "list of globs",
            "Never replicated, even when allowed.",
        ),
        Key(
            "events",
            "list of event filters (below)",
            "DM's binlog event filters.",
        ),
        Key(
            "rows",
            "list of row filters (below)",
            "DM's expression filters: rows ignored by their values.",
        ),
    ),
)

EVENT_FILTER = Section(
    "filters.events[]",
    (
        "Events of the matching tables that are ignored; give `ignore`, `sql` or both. Counted in "
        "`shardmerge_filtered_events_total`."
    ),
    (
        Key(
            "tables",
            "list of globs on `schema.table`",
            "The tables it covers.",
            default="`*.*`",
        ),
        Key(
            "ignore",
            (
                "list of `insert`, `update`, `delete`, `truncate table`, `drop table`, `add index`, `drop "
                "index`, `drop column`"
            ),
            (
                "Row changes dropped; a TRUNCATE or DROP TABLE not followed (downstream keeps the shard's "
                "rows); a shard's index changes not followed; a shard's drop of a column followed, the "
                "column kept downstream for good."
            ),
        ),
        Key(
            "sql",
            "list of regular expressions",
            (
                "Patterns of DDL text (case-insensitive): such a DDL is ignored where it changes no column; "
                "one that does pauses its shard."
            ),
        ),
    ),
)

ROW_FILTER = Section(
    "filters.rows[]",
    (
        "A row of the matching tables is ignored where its condition is TRUE (FALSE and NULL keep it); give "
        "one or more conditions. The backfill and verify read the rows `ignore_insert` keeps. Counted in "
        "`shardmerge_filtered_rows_total`."
    ),
    (
        Key(
            "tables",
            "list of globs on `schema.table`",
            "The tables it covers.",
            required=True,
        ),
        Key(
            "ignore_insert",
            "SQL condition",
            "On the row inserted.",
        ),
        Key(
            "ignore_update_old",
            "SQL condition",
            "On the row before an update; with `ignore_update_new`, both must hold.",
        ),
        Key(
            "ignore_update_new",
            "SQL condition",
            "On the row after an update.",
        ),
        Key(
            "ignore_delete",
            "SQL condition",
            "On the row deleted.",
        ),
    ),
)

ONLINE_DDL = Section(
    "online_ddl",
    "The rules themselves, DM's shadow- and trash-table-rules, instead of a tool's name.",
    (
        Key(
            "shadow",
            "list of regular expressions",
            "Whole table names of the tool's copy being altered.",
        ),
        Key(
            "trash",
            "list of regular expressions",
            "Whole table names of the tool's other tables (its changelog, the old table after the swap).",
        ),
    ),
)

VALIDATOR = Section(
    "validator",
    (
        "Rows applied are read back from downstream while streaming; a row still differing `error_delay` "
        "seconds after it was applied is an error (`shardctl validation status|show-errors`)."
    ),
    (
        Key(
            "mode",
            "`off`, `fast` or `full`",
            "`fast`: each row is there (or gone after its delete); `full`: also its values.",
        ),
        Key(
            "error_delay",
            "seconds, 0 or more",
            "How long a row may differ before it is an error.",
        ),
    ),
    model="ValidatorConfig",
)

OPTIONS = Section(
    "options",
    "Tuning.",
    (
        Key(
            "batch_size",
            "integer, 1 to 100000",
            "Rows per downstream transaction.",
        ),
        Key(
            "workers",
            "integer, 1 to 64",
            "Downstream connections applying rows in parallel.",
        ),
        Key(
            "safe_mode",
            "boolean",
            "Always write INSERT as REPLACE and UPDATE as DELETE + REPLACE.",
        ),
        Key(
            "safe_mode_window",
            "seconds, 0 or more",
            "Seconds of safe mode after an unclean stop besides what it always has (0: none): the "
            "changes up to each source's highest checkpoint, read again, go in safe mode after an "
            "unclean stop and at each start of a member; past it none was applied.",
        ),
        Key(
            "heartbeat",
            "seconds, more than 0",
            "Seconds between binlog heartbeats from each source.",
        ),
        Key(
            "max_backoff",
            "seconds, more than 0",
            "The cap of the backoff between reconnect attempts.",
        ),
        Key(
            "row_events",
            "boolean",
            (
                "MariaDB to MariaDB: where a shard's table holds what the target's rows hold, apply its row "
                "events as the binlog holds them (the target user needs BINLOG REPLAY or SUPER); false: "
                "every row as SQL."
            ),
        ),
        Key(
            "on_row_error",
            "`pause` or `skip`",
            (
                "A row the downstream refuses: pause its shard until `shardctl handle-error`, or skip it "
                "into the meta schema's `dead_letter` table and go on."
            ),
        ),
        Key(
            "copy_ddl",
            "`pt-osc` or `blocking`",
            (
                "A downstream ALTER the server can make neither instantly nor in place: by "
                "pt-online-schema-change while rows go on, or by the server, holding the table's writes "
                "until done."
            ),
        ),
        Key(
            "lease_ttl",
            "seconds, more than 0, at most 600",
            "A standby daemon of the task takes over that long after the active one died.",
        ),
        Key(
            "park_limit",
            "bytes, 0 to 2^40",
            (
                "Compressed changes a paused shard parks in the meta schema so that its source reads on; "
                "past it the shard holds its source's binlog (0: no parking)."
            ),
        ),
        Key(
            "spark_master",
            "Spark master URL",
            "Where `task_mode` `all` and `full` backfill.",
            default="`local[*]`",
        ),
        Key(
            "spark_conf",
            "mapping of Spark settings to values",
            (
                "Spark settings of backfill and verify, as spark-submit's `--conf`; the command line's "
                "`--spark-conf` wins."
            ),
        ),
        Key(
            "backfill_rows_per_split",
            "integer, 1 to 100000000",
            "Rows of a shard per backfill chunk (one Spark task, one downstream transaction).",
        ),
    ),
    model="Options",
)

ADMIN = Section(
    "admin",
    (
        "The daemon's admin API (HTTP, JSON). Without this section it listens on 127.0.0.1:8080, and a "
        "second task on the same machine needs another port."
    ),
    (
        Key(
            "host",
            "host or address",
            (
                "Where it listens. Beyond localhost clients must send a bearer token: `token_env` is "
                "required then."
            ),
        ),
        Key(
            "port",
            "integer, 0 to 65535",
            "Its port; 0 turns the API off.",
        ),
        Key(
            "token_env",
            "environment variable name",
            "The variable holding the bearer token; `shardctl --config` reads the token from it too.",
        ),
    ),
    model="AdminConfig",
)

SECTIONS = (
    TOP,
    SOURCES,
    START,
    TLS,
    TARGET,
    ROUTES,
    EXTRACT,
    EXTRACT_COLUMN,
    FILTERS,
    EVENT_FILTER,
    ROW_FILTER,
    ONLINE_DDL,
    VALIDATOR,
    OPTIONS,
    ADMIN,
)
