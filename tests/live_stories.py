"""Live stories (issue 43, item 3): the schema fuzzer's stories (`tests/fuzz/generator.py`)
played by the live daemon, with rows flowing and SIGKILLs.

Each story's shards are tables `t<n>` on the sandbox's two upstream servers (the generator's
shard `s1.db.t3` is table `t3` of the first server's schema, `s2.…` the second's), merged by a
real daemon (`ReplicationTask`, its process group SIGKILLed at random moments and started
again), with or without extract columns (seeded). While the story's DDLs run on the shards
(each proposal kept only if the upstream MariaDB takes it, as the fuzzer's runner does; a
shard joins with CREATE TABLE and leaves with DROP TABLE), one writer per shard runs random
transactions (`tests/traffic.py`: inserts, updates, key-moving updates, deletes) of rows that
fit the shard's table as it is now (`tests/fuzz/live_rows.py`). Then the writers stop, the
daemon catches up with no more kills, and:

- every shard's rows equal its rows downstream, by key (lost, extra, different); a shard's
  rows are told apart downstream by the extract columns and by its ids (each life of a shard,
  from its CREATE to its DROP, writes ids of its own); a shard that left has the rows it had
  when it left downstream (a copy of them is taken before its DROP), as docs/design.md says;
- the downstream table is the coordinator's joined table, and that one takes every row of the
  join of the shards' tables now (equal to it, or wider: the documented outcome of shards that
  dropped, narrowed or left a column while their rows stay);
- the daemon never crashed: no exit of its own, no traceback in its log, a clean stop at the end.

A shard a conflict leaves blocked at the end (no later DDL of any shard made its table join
again) is what an operator is told about and decides on (`binlog skip` discards its rows since
the pause, `set-schema`, or a DDL upstream that gives way): the run does not decide for them.
It checks what a production engineer relies on meanwhile: the daemon reports the shard
blocked with its DDL, the reason and the binlog position (`shardmerge status`, read with
`saved_status`), no other shard is held back (all compared), and the blocked shard's rows
downstream are its rows just before the blocked DDL (a copy is taken before each DDL). A shard
paused by a row the downstream refused is a failure, but for rows of two shards meeting in a
UNIQUE key without extract columns, which is no bug (counted as a collision).

Some ALTERs run as the daemon cannot follow them (`Knobs.unfollowed`): the operator of
`tests/live_operator.py` takes each such shard back by a printed way out chosen at random
(issue 76), and the run fails where a way out run as printed is not taken or the shard is not
running once the story's DDLs are over.

    python -m tests.live_stories --seed 5 --count 20          # `make live-stories SEED=5 COUNT=20`
    python -m tests.live_stories --replay live-out/live-seed5.yaml

A failing story is written to --out (default live-out/): its YAML (the shards and the steps
MariaDB took, in `plan`'s format, with the seed and the extract choice) and the daemon's log.
Its replay plays those steps with new rows and kills: it shows the bug again when the bug
does not hang on a moment.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path

import pymysql
import yaml

from lattice import (
    Column,
    ColumnType,
    Family,
    IndexKind,
    JoinConflict,
    Table,
    converts_through,
    holding,
    join,
    join_all,
    key,
    materialize,
    quote_identifier,
    render_table,
    without_generated_reading,
)
from replicator.cli.status import saved_status
from replicator.compare import KeyedComparison, holds_text, origin_filter
from replicator.daemon.row_path import UNEXPLAINED_DROP
from replicator.sandbox import Sandbox
from replicator.schema.coordinator import Coordinator
from replicator.schema.group import ShardState
from replicator.source.routing import Router
from replicator.spark.shards import groups, snapshot
from replicator.state.coordinator_store import MetaStore
from replicator.state.positions import Position
from tests import ram_dir
from tests.fuzz.generator import StoryGenerator, table_of
from tests.fuzz.live_rows import keyed_by_id, row_literals
from tests.fuzz.oracle import UPSTREAM_SESSION
from tests.fuzz.runner import PROPOSALS_PER_STEP
from tests.fuzz.story import Story, new_story, renames_in, scenario, write_story
from tests.live_operator import Held, Operator, inner, unfollowed
from tests.replication import ReplicationTask, free_port
from tests.tables import show_create
from tests.traffic import (
    Counts,
    Kills,
    RowTotals,
    ShardTraffic,
    caught_up,
    combined,
    compare_rows,
    downstream_problem,
    kill_at,
    merged_table,
    unexplained_drops,
)

EXTRACT = {"source": "_source", "schema": "_schema", "table": "_table"}
SLOT = 800  # ids of one life of a shard: 40 lives stay under SMALLINT's 32767
Shard = tuple[str, str, str]  # (instance, schema, table), as ReplicationTask has them


@dataclass(frozen=True)
class Knobs:
    """How a story is played: kills spread over its DDL phase, seconds between two DDL
    steps, at most this many steps (None: the generator's own end), seconds to catch up."""

    kills: int = 3
    pace: tuple[float, float] = (0.3, 1.2)
    max_steps: int | None = None
    catch_up: float = 120.0
    # the chance that a step's ALTER runs as a DDL the daemon cannot follow (at most two a
    # story), for the operator's way out (`tests/live_operator.py`)
    unfollowed: float = 0.06
    way_out: str | None = None  # the operator's choice where printed (else at random)
    # the operator also takes back a shard it let go that pauses again at rows it cannot read
    # (`Operator.retake`), by this way out where printed ("any": at random): the story's DDLs
    # over, it waits for one such pause, and for its way out
    retake: str | None = None


# the daemon's word for a shard that left while paused (replicator/daemon/pauses.py `Pauses.left`)
_DECIDED = re.compile(r"shardmerge\.ddl: \S+: (?P<shard>\S+) (?P<ddl>.*?) -> \w+ \(version .* position=(?P<position>\S+)")
_DROPPED = re.compile(r"DROP COLUMN `([^`]+)`")
_LEFT_PAUSED = re.compile(r"shard (?P<shard>\S+) left its group while paused .*: the rows it wrote since (?P<position>\S+) are")


@dataclass(frozen=True)
class Life:
    """A shard from its CREATE to its DROP (or the end): its ids, and the copy of its rows
    taken before its DROP (a table of the story's copy schema on its server)."""

    story_shard: str
    shard: Shard
    first_id: int
    gone: str | None = None
    since: Position | None = None  # its server's binlog before its CREATE
    until: Position | None = None  # and after its DROP
    left_out: frozenset[str] = frozenset()  # gone: the columns of its rows not compared (`_left_out`)
    table: Table | None = None  # gone: its table when it left

    @property
    def last_id(self) -> int:
        return self.first_id + SLOT - 1

    def lived_at(self, position: Position) -> bool:
        """The position is of this life, not of another of its table under the same name."""
        return (self.since is None or self.since <= position) and (self.until is None or position <= self.until)


@dataclass(frozen=True)
class Before:
    """A DDL a shard took, or another shard of its server (a decision on it may pause this
    one): where the server's binlog stood before and after it (the DDL is between; a shard
    it blocks is paused at the DDL's end, where its rows are read again from), and the copy
    of the shard's rows just before it (its server's writers wait meanwhile)."""

    start: Position
    end: Position
    ddl: str
    copy: str
    # the columns of its rows left out of a comparison then (`Story.added`, `Story.rendered`):
    # a rename since may have moved them (seed 26523: the old name added again, renamed again)
    left_out: frozenset[str] = frozenset()
    tx: int = 0  # its writer's transactions committed before it
    # the rows whose values an ALTER converted in place then, and in which columns (as named
    # then: a rename since moves them, seed 122031)
    converted: dict[int, frozenset[str]] | None = None
    of: str | None = None  # the shard whose DDL it is, where another shard's of its server


@dataclass(frozen=True)
class Paused:
    """A shard the daemon left paused at the end, as it reports it."""

    shard: str
    kind: str  # blocked (a DDL: conflict, unsupported, waiting) | row (a refused row) | other
    reason: str
    ddl: str | None = None
    position: str | None = None
    rows_before: KeyedComparison | None = None  # its rows downstream vs its rows before the DDL
    problem: str | None = None  # what is wrong with it (None: as documented)

    def describe(self) -> str:
        what = f"{self.shard} paused ({self.kind}): {self.reason[:200]}"
        if self.rows_before is not None:
            what += f"; its rows before the DDL: {self.rows_before.describe()}"
        return what + (f" -- {self.problem}" if self.problem else "")


@dataclass
class StoryReport(RowTotals):
    seed: int
    extract: bool
    story: Story
    steps: int = 0
    counts: Counts = field(default_factory=Counts)
    kills: Kills = field(default_factory=Kills)
    shards: list[KeyedComparison] = field(default_factory=list)
    paused: list[Paused] = field(default_factory=list)
    collisions: int = 0  # shards paused by rows of two shards in one UNIQUE key (no extract columns)
    schema_problem: str | None = None
    wider: bool = False  # the coordinator's table is wider than the join now (documented)
    renames_pending: int = 0  # column renames some shards made and others not yet, at the end
    caught_up: bool = False
    tracebacks: list[str] = field(default_factory=list)
    unexplained: int = 0  # row events a worker dropped unexplained (`unexplained_drops`)
    ways_out: list[str] = field(default_factory=list)  # the operator's, as taken (`Operator.taken`)
    retaken: list[str] = field(default_factory=list)  # shards it held again (`Operator.retaken`)
    operator_problems: list[str] = field(default_factory=list)
    discarded: int = 0  # ids left out of the compare, touched after a statement `binlog skip` dropped
    stop_status: int | None = None
    error: str | None = None  # the run's own failure
    seconds: float = 0.0

    @property
    def rows(self) -> int:
        c = self.counts
        return c.inserts + c.updates + c.key_moves + c.deletes

    @property
    def crashes(self) -> list[str]:
        stopped = [] if self.stop_status in (0, None) else [f"exit status {self.stop_status} at the clean stop"]
        return (self.kills.crashes or []) + stopped + [f"traceback: {t}" for t in self.tracebacks]

    @property
    def ok(self) -> bool:
        return (self.error is None and self.caught_up and self.schema_problem is None and not self.crashes
                and all(s.equal for s in self.shards) and all(p.problem is None for p in self.paused)
                and self.unexplained == 0 and not self.operator_problems)

    def line(self) -> str:
        paused = f" paused={len(self.paused)}" if self.paused else ""
        paused += f" ways-out=[{'; '.join(self.ways_out)}]" if self.ways_out else ""
        result = "OK" if self.ok else "FAILED"
        return (f"seed {self.seed}: extract={'yes' if self.extract else 'no'} steps={self.steps} "
                f"rows={self.rows} (refused {self.counts.refused}) kills={self.kills.kills}{paused} "
                f"lost={self.lost} extra={self.extra} different={self.different} "
                f"schema={'equal' if self.schema_problem is None else 'DIFFERENT'}{' (wider)' if self.wider else ''} "
                f"{result} {self.seconds:.0f}s")

    def details(self) -> list[str]:
        out = [s.describe() for s in self.shards if not s.equal]
        out += [p.describe() for p in self.paused]
        out += [f"crash: {c}" for c in self.crashes]
        if not self.caught_up:
            out.append("the daemon did not catch up")
        out += [f"operator: {p}" for p in self.operator_problems]
        if self.unexplained:
            out.append(f"{self.unexplained} unexplained row event drops (the daemon log: {UNEXPLAINED_DROP})")
        if self.schema_problem:
            out.append(self.schema_problem)
        if self.error:
            out.append(f"error: {self.error}")
        return out


def as_laid_out(table: Table, like: Table) -> Table:
    """`table` with the columns `like` has in its order (the others after them) and its
    table options: a join's column order is the order its shards came in, and table options
    pass through as the last shard's DDL set them (docs/design.md "The join")."""
    order = {c.key: i for i, c in enumerate(like.columns)}
    columns = sorted(table.columns, key=lambda c: order.get(c.key, len(order)))
    return replace(table.with_columns(columns), options=like.options)


# -- a shard's writer ------------------------------------------------------------------------------
class LiveWriter(ShardTraffic):
    """A shard's traffic with rows that fit its table now (`table`, kept current by whoever
    changes it, under `guard`). The shard may refuse a transaction (a UNIQUE key added
    meanwhile over values that were apart only by luck): it is left out and counted."""

    refusals_allowed = True

    def __init__(self, task: ReplicationTask, life: Life, table: Table, seed: int, counts: Counts,
                 lock: threading.Lock):
        inst = task.sandbox.instance(life.shard[0])

        def connect():
            conn = inst.connect(life.shard[1], autocommit=False)
            with conn.cursor() as cur:
                for statement in UPSTREAM_SESSION:
                    cur.execute(statement)
            return conn

        super().__init__(f"writer-{life.story_shard}", quote_identifier(life.shard[2]), connect,
                         random.Random(seed), counts, lock, threading.Event(), life.first_id, life.last_id)
        self.model = table

    def step(self, conn) -> bool:
        if keyed_by_id(self.model):  # (else: rows it could not tell apart; it waits)
            self.transaction(conn)
        return True

    def values(self, row_id: int | None) -> dict[str, str]:
        return row_literals(self.random, self.model, row_id)


# -- the story on the servers ------------------------------------------------------------------------
def _as_key(value):
    """A value as a UNIQUE key compares it across shards of other types (a DECIMAL(3,2)'s 1.50
    and another's 1.5; text without trailing spaces or case, as most collations)."""
    if isinstance(value, int | float | Decimal):
        return Decimal(str(value)).normalize()
    if isinstance(value, str):
        return value.rstrip(" ").lower()
    return value


def _exact(value: str, column: Column) -> str:
    """A value compared as it is: text without its collation's PAD SPACE and case rules
    (a VARCHAR narrowed cuts trailing spaces off a value, and its old and new texts compare
    equal; seed 9604)."""
    if column.type.family in (Family.STRING, Family.ENUM, Family.SET) and column.type.charset != "binary":
        return f"CONVERT({value} USING utf8mb4) COLLATE utf8mb4_nopad_bin"
    return value


class LiveStory:
    """One story: its shards on the sandbox, the daemon, the writers, the DDL steps."""

    def __init__(self, sandbox: Sandbox, workdir: Path, seed: int, knobs: Knobs, story: Story | None = None,
                 log: Callable[[str], None] = print):
        self.seed, self.knobs, self.log = seed, knobs, log
        self.rng = random.Random(seed)
        extract = self.rng.random() < 0.5  # drawn first either way: a replay keeps the rest of the seed
        if story and "extract" in story.get("live", {}):
            extract = story["live"]["extract"]
        self.replay = story
        port = free_port()  # (the operator's shardctl finds the daemon there across its restarts)
        self.task = ReplicationTask(sandbox, workdir, "", shards_per_server=0, extract=extract, table_glob="t*",
                                    admin=f"  port: {port}\n")
        self.task.addr = f"http://127.0.0.1:{port}"
        # its `held`: shards an unfollowed DDL paused, till it has them running (no DDL of theirs meanwhile)
        self.operator = Operator(self.task, {}, threading.Lock(), lambda s: self.writers[s],
                                 random.Random(seed * 7919 + 1), knobs.way_out, self._story_shard)
        self.operator.table_at = self._table_at
        if knobs.retake:
            self.operator.retake = self._retake
        self.copies = f"{self.task.name}_copies"  # not routed: the route takes `<name>_db*`
        self.counts, self.lock = Counts(), threading.Lock()
        self.lives: list[Life] = []
        self.writers: dict[str, LiveWriter] = {}
        self.tables: dict[str, Table] = {}  # present shards, as MariaDB reports them
        self.before: dict[str, list[Before]] = {}  # shard -> its DDLs, each with a copy of its rows before it
        self.report = StoryReport(seed, extract, new_story({}, []))
        self.conns: dict[str, pymysql.Connection] = {}
        self.quiet: dict[str, pymysql.Connection] = {}  # copies of rows, kept out of the binlog
        self._copies = 0
        # columns each shard added in its life: without extract columns its rows from before keep
        # what the downstream column gave them, where the column was there already (docs/design.md "A shard adding a column the downstream table has already"): those columns are not compared
        self.added: dict[str, set[str]] = {}
        self.view: str | None = None
        self.view_table: Table | None = None  # the merged table as the view holds it (`_renames_view`)
        self.colliding: dict[str, set[int]] = {}  # shard -> its rows left out (`_colliding`)
        self.converted: dict[str, dict[int, set[str]]] = {}  # shard -> id -> columns an ALTER converted
        # without extract columns: shard -> columns whose values a downstream conversion through
        # a wider type gave another text (`_note_rendered`); the join they were held in, and the
        # shards' tables then
        self.rendered: dict[str, set[str]] = {}
        # shard -> the old names of pending renames whose values may read otherwise (`_renames_view`)
        self.held_renamed: dict[str, set[str]] = {}
        # with extract columns: a gone life (by its first id) -> the columns whose values a later
        # life of its table set or converted in its rows too (docs/design.md "Values an ALTER converts in place": a table created again under the same name is the same shard downstream)
        self.overwritten: dict[int, set[str]] = {}
        self.held: tuple[Table, dict[str, Table]] | None = None
        self.writing = False

    # -- places -----------------------------------------------------------------------------------
    def place(self, story_shard: str) -> Shard:
        server = int(story_shard.split(".")[0][1:])  # s1 / s2
        inst = self.task.sandbox.upstreams[server - 1]
        return (inst.name, f"{self.task.name}_db{server}", table_of(story_shard))

    def _story_shard(self, name: str) -> str | None:
        """The present shard the daemon names `name`, as the story names it."""
        return next((x.story_shard for x in reversed(self.lives)
                     if x.gone is None and str(self.task.shard_id(x.shard)) == name), None)

    def _retake(self, name: str, block: dict, pause: dict | None) -> Held | None:
        """A shard paused again at rows it cannot read, held again for the operator: its table
        as it was at the pause (the copy taken before its next DDL; else as it is now), its
        writer's transactions before the DDL before the pause."""
        story_shard = self._story_shard(name)
        if story_shard is None or story_shard not in self.writers:
            return None
        shard = self.place(story_shard)
        at = Position.parse((pause or block)["position"])
        prior = next((b for b in reversed(self.before.get(story_shard, [])) if b.start <= at), None)
        create = self._table_at(story_shard, str(at), after=False)
        ddl = block.get("ddl") or ""
        self.log(f"retake {story_shard} at {at}: {block.get('reason', '')[:400]}")
        prefer = None if self.knobs.retake == "any" else self.knobs.retake
        return Held(story_shard, shard, inner(ddl) or ddl, create, prior.tx if prior else 0, prefer=prefer)

    def _table_at(self, story_shard: str, position: str, after: bool = True) -> str:
        """The shard's table as it was at `position`: the copy taken before its next DDL (its
        own, `after` a DDL there; else the first copy from there on); else its table now."""
        shard, at = self.place(story_shard), Position.parse(position)
        following = next((b for b in self.before.get(story_shard, [])
                          if (b.of is None and b.start > at if after else b.start >= at)), None)
        if following is None:
            return self.task.sql(shard, "SHOW CREATE TABLE {t}")[0][1]
        with self.quiet[shard[0]].cursor() as cur:
            cur.execute(f"SHOW CREATE TABLE {quote_identifier(self.copies)}.{quote_identifier(following.copy)}")
            return re.sub(r"^CREATE TABLE `[^`]+`", f"CREATE TABLE {quote_identifier(shard[2])}", cur.fetchone()[1])

    def _latest(self, story_shard: str) -> Life:
        return next(x for x in reversed(self.lives) if x.story_shard == story_shard)

    def life(self, story_shard: str) -> Life | None:
        return next((x for x in reversed(self.lives) if x.story_shard == story_shard and x.gone is None), None)

    def _connections(self) -> None:
        for i, inst in enumerate(self.task.sandbox.upstreams, start=1):
            conn = inst.connect(f"{self.task.name}_db{i}", autocommit=True)
            with conn.cursor() as cur:
                for statement in UPSTREAM_SESSION:
                    cur.execute(statement)
            self.conns[inst.name] = conn
            quiet = inst.connect(autocommit=True)
            with quiet.cursor() as cur:
                cur.execute("SET SESSION sql_log_bin = 0")
                # a shard's rows may break its own CHECKs (MariaDB gives the rows an ADD COLUMN
                # ... JSON NOT NULL finds '', which json_valid refuses): the copy takes them as they are
                cur.execute("SET SESSION check_constraint_checks = 0")
                cur.execute(f"CREATE DATABASE {quote_identifier(self.copies)}")
            self.quiet[inst.name] = quiet

    def _run(self, shard: Shard, sql: str) -> bool:
        try:
            with self.conns[shard[0]].cursor() as cur:
                cur.execute(sql)
        except pymysql.err.MySQLError:
            return False
        return True

    def _binlog_end(self, shard: Shard) -> Position:
        with self.conns[shard[0]].cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
        return Position(file, int(pos))

    def _read(self, shard: Shard) -> Table:
        return show_create(self.conns[shard[0]], shard[1], shard[2])

    def _copy_rows(self, shard: Shard, label: str) -> str:
        """A copy of the shard's rows (its written columns) in the copy schema, its name."""
        self._copies += 1
        name = f"{shard[2]}_{label}{self._copies}"
        source = f"{quote_identifier(shard[1])}.{quote_identifier(shard[2])}"
        target = f"{quote_identifier(self.copies)}.{quote_identifier(name)}"
        columns = ", ".join(quote_identifier(c.name) for c in self.tables_of(shard).columns if c.generated is None)
        with self.quiet[shard[0]].cursor() as cur:
            cur.execute(f"CREATE TABLE {target} LIKE {source}")
            cur.execute(f"INSERT INTO {target} ({columns}) SELECT {columns} FROM {source}")
        return name

    def tables_of(self, shard: Shard) -> Table:
        return next(t for s, t in self.tables.items() if self.place(s) == shard)

    # -- steps ---------------------------------------------------------------------------------------
    def try_step(self, step: dict[str, str]) -> bool:
        """Run a story step on its shard's server; False when MariaDB refuses it."""
        story_shard, ddl = step["shard"], step["ddl"]
        shard = self.place(story_shard)
        verb = ddl.lstrip().split(None, 1)[0].upper()
        if verb == "CREATE":
            return story_shard not in self.tables and self._join(story_shard, shard, ddl)
        if story_shard not in self.tables or story_shard in self.operator.held:
            return False
        if verb == "DROP":
            return self._leave(story_shard, shard, ddl)
        writer = self.writers[story_shard]
        # the other shards of its server are copied too: a decision on this DDL may pause one
        # of them (its rows read again from the DDL's end)
        neighbours = [s for s in self.writers if s != story_shard and self.place(s)[0] == shard[0]]
        with ExitStack() as quiet:
            quiet.enter_context(writer.guard)  # between two of its transactions: its next one sees the new table
            for neighbour in neighbours:
                quiet.enter_context(self.writers[neighbour].guard)
            copy = self._copy_rows(shard, "before")
            copies = {s: self._copy_rows(self.place(s), "at") for s in neighbours}
            start = self._binlog_end(shard)
            if not self._run(shard, ddl):
                with self.quiet[shard[0]].cursor() as cur:
                    for name in (copy, *copies.values()):
                        cur.execute(f"DROP TABLE {quote_identifier(self.copies)}.{quote_identifier(name)}")
                return False
            end = self._binlog_end(shard)
            self.before.setdefault(story_shard, []).append(
                Before(start, end, ddl, copy, self._left_out(story_shard), len(writer.history),
                       self._converted_now(story_shard)))
            for neighbour, its_copy in copies.items():
                self.before.setdefault(neighbour, []).append(
                    Before(start, end, f"{ddl} (of {story_shard})", its_copy, self._left_out(neighbour),
                           len(self.writers[neighbour].history), self._converted_now(neighbour), of=story_shard))
            was, writer.model = writer.model, self._read(shard)
            self.tables[story_shard] = writer.model
            if inner(ddl) is not None:  # (its writer waits: its transactions before it are these)
                self._held(story_shard, shard, ddl, was, writer)
            self._note_converted(story_shard, shard, copy, was, writer.model)
            self._note_rendered()
            self._note_overwritten(story_shard, was, writer.model)
            renames = renames_in(inner(ddl) or ddl)
            rendered = self.rendered.get(story_shard, set())
            rendered |= {key(new) for old, new in renames if key(old) in rendered}
            rendered -= {key(old) for old, _ in renames}
            # values an ALTER converted stay so under the name a rename gives their column (seed 9953)
            for columns in self.converted.get(story_shard, {}).values():
                moved = {key(new) for old, new in renames if key(old) in columns}
                columns -= {key(old) for old, _ in renames}
                columns |= moved
            with self.operator.lock:  # (the columns a skip kept go on under a rename's new name: 123035)
                kept = self.operator.kept.get(story_shard)
                if kept is not None:
                    self.operator.kept[story_shard] = frozenset(
                        (kept - {key(old) for old, _ in renames}) | {key(new) for old, new in renames if key(old) in kept}
                    )
            added = self.added[story_shard]
            # a column it added goes on as one it added under the name a rename gives it (seed 9739)
            added |= {key(new) for old, new in renames if key(old) in added}
            added -= {key(old) for old, _ in renames}
            renamed = {key(new) for _, new in renames}
            added |= writer.model.column_map.keys() - was.column_map.keys() - renamed
        return True

    def _held(self, story_shard: str, shard: Shard, ddl: str, was: Table, writer: LiveWriter) -> None:
        """A shard an unfollowed DDL pauses, for the operator: its table right after the DDL,
        and the columns whose type it changed (a skip keeps them as they were)."""
        with self.conns[shard[0]].cursor() as cur:
            cur.execute(f"SHOW CREATE TABLE {quote_identifier(shard[1])}.{quote_identifier(shard[2])}")
            create = cur.fetchone()[1]
        changed = frozenset(c.key for c in writer.model.columns
                            if (old := was.column(c.name)) is not None and old.type != c.type)
        # the values the statement gave the rows it found in the columns it added or changed: no
        # way out can tell them (docs/operations/shardctl.md "A paused shard's ways out"): those rows are not compared there
        added = {c.key for c in writer.model.columns if was.column(c.name) is None}
        with self.quiet[shard[0]].cursor() as cur:
            copy = self.before[story_shard][-1].copy
            cur.execute(f"SELECT id FROM {quote_identifier(self.copies)}.{quote_identifier(copy)}")
            for (row_id,) in cur.fetchall():
                self.converted.setdefault(story_shard, {}).setdefault(row_id, set()).update(added | changed)
        unique = {i.columns for i in writer.model.indexes if i.kind == IndexKind.UNIQUE}
        dropped = tuple(i.columns for i in was.indexes if i.kind == IndexKind.UNIQUE and i.columns not in unique)
        with self.operator.lock:
            self.operator.held[story_shard] = Held(story_shard, shard, inner(ddl), create, len(writer.history),
                                                   changed=changed, keys=dropped)

    def _note_converted(self, story_shard: str, shard: Shard, copy: str, was: Table, now: Table) -> None:
        """The rows whose values an ALTER changed in place (a NULL in a TIMESTAMP made NOT NULL
        became the time of the ALTER, fractions cut, ...), and in which columns: no row event
        carries that, and where the downstream column does not change the rows keep their
        values there (docs/design.md "Values an ALTER converts in place")."""
        common = [c.name for c in now.columns if c.generated is None and c.key != "id"
                  and (old := was.column(c.name)) is not None and old.generated is None]
        # a JSON NOT NULL column added without a default: MariaDB gives the rows '', no JSON,
        # downstream JSON null (docs/design.md "Values an ALTER converts in place")
        filled = {c.key for c in now.columns if was.column(c.name) is None and c.type.family == Family.JSON
                      and not c.nullable and c.default is None and c.generated is None}
        # a column added with CURRENT_TIMESTAMP: its rows get the time of the ALTER, downstream
        # of the downstream DDL (docs/design.md "Values an ALTER converts in place"; seed 9832)
        filled |= {c.key for c in now.columns if was.column(c.name) is None and c.generated is None
                       and c.default is not None and c.default.is_expression}
        if filled:
            with self.conns[shard[0]].cursor() as cur:
                cur.execute(f"SELECT id FROM {quote_identifier(self.copies)}.{quote_identifier(copy)}")
                for (row_id,) in cur.fetchall():
                    self.converted.setdefault(story_shard, {}).setdefault(row_id, set()).update(filled)
        if not common:
            return
        # with extract columns the shard's rows are converted downstream as upstream (docs/design.md
        # "Values an ALTER converts in place"), but where the conversion depends on the moment:
        # a NULL in a TIMESTAMP made NOT NULL is the time of the ALTER (seed 24250)
        def differs(n: str) -> str:
            b, a = f"b.{quote_identifier(n)}", f"a.{quote_identifier(n)}"
            if self.task.extract and was.column(n).type != now.column(n).type:
                return f"({b} IS NULL AND {a} IS NOT NULL)"
            if was.column(n).type.family != now.column(n).type.family or (
                    not self.task.extract and was.column(n).type != now.column(n).type):
                # values of two families compare as one of them: a SET's '' made a BIGINT's 0
                # is equal as a number, and is not downstream, where the column holds ''
                # (seed 24359); a DATE's 2024-02-29 made a BIGINT's 20240229 equal as a date
                # (seed 27096): as text they differ, as they do downstream. So do a DECIMAL(12,4)'s
                # 1.5000 made a DECIMAL(14,5)'s 1.50000, where a string downstream keeps the old
                # text, and without extract columns the rows keep it (L76)
                b, a = (f"CONVERT(CAST({v} AS CHAR) USING utf8mb4)" for v in (b, a))
                return f"NOT ({b} COLLATE utf8mb4_nopad_bin <=> {a} COLLATE utf8mb4_nopad_bin)"
            return f"NOT ({_exact(b, was.column(n))} <=> {_exact(a, now.column(n))})"

        changed = ", ".join(differs(n) for n in common)
        with self.conns[shard[0]].cursor() as cur:
            cur.execute(f"SELECT b.id, {changed} FROM {quote_identifier(self.copies)}.{quote_identifier(copy)} b "
                        f"JOIN {quote_identifier(shard[1])}.{quote_identifier(shard[2])} a ON a.id = b.id")
            for row_id, *flags in cur.fetchall():
                columns = {key(n) for n, flag in zip(common, flags, strict=True) if flag}
                if columns:
                    self.converted.setdefault(story_shard, {}).setdefault(row_id, set()).update(columns)

    def _note_overwritten(self, story_shard: str, was: Table, now: Table) -> None:
        if not self.task.extract:
            return
        touched = {c.key for c in now.columns if (old := was.column(c.name)) is None or old.type != c.type}
        for life in self.lives:
            if life.story_shard == story_shard and life.gone is not None and touched:
                self.overwritten.setdefault(life.first_id, set()).update(touched)

    def _note_rendered(self) -> None:
        """Where the join's column changes type, the rows whose own type its old type held
        with another text (a DECIMAL(13,3)'s 1.500 as 1.5000) have their values converted
        downstream from that text, made a VARCHAR '1.5000' where upstream reads '1.500'
        (docs/design.md "Values an ALTER converts in place"): the column is not compared for them.
        Those are, without extract columns, the present shards' rows (seed 22159), and with or
        without, the rows of a shard that left, which no upstream reads any more: they are
        held in the join's type (a TIMESTAMP's 12:30:45 as TIMESTAMP(6), made a CHAR
        '12:30:45.000000', seed 52781), and converted by the server with it. (The join of the shards' tables as the downstream
        table's model: a conflict leaves it as it was.)"""
        if not self.tables:
            return
        joined = join_all(self.tables.values())
        if isinstance(joined, JoinConflict):
            return
        held, self.held = self.held, (joined, dict(self.tables))
        if held is None:
            return
        last, tables = held
        for column in joined.columns:
            was = last.column(column.name)
            if was is None or was.type == column.type:
                continue
            if not self.task.extract:
                for story_shard, table in tables.items():
                    own = table.column(column.name)
                    if own is not None and converts_through(own.type, was.type, column.type):
                        self.rendered.setdefault(story_shard, set()).add(column.key)
            for life in self.lives:
                own = life.table.column(column.name) if life.gone is not None and life.table else None
                # (or converted into another family: a DATE made a DATETIME is its midnight,
                # which its copy's DATE does not compare equal to; seed 53577)
                if own is not None and (
                    converts_through(own.type, was.type, column.type) or own.type.family != column.type.family
                ):
                    self.overwritten.setdefault(life.first_id, set()).add(column.key)

    def _join(self, story_shard: str, shard: Shard, create: str) -> bool:
        start = self._binlog_end(shard)
        if not self._run(shard, create):
            return False
        # a conflict may pause it at its CREATE: downstream it then has no rows
        self._copies += 1
        empty = f"{shard[2]}_created{self._copies}"
        with self.quiet[shard[0]].cursor() as cur:
            cur.execute(f"CREATE TABLE {quote_identifier(self.copies)}.{quote_identifier(empty)} "
                        f"LIKE {quote_identifier(shard[1])}.{quote_identifier(shard[2])}")
        self.before.setdefault(story_shard, []).append(Before(start, self._binlog_end(shard), create, empty))
        life = Life(story_shard, shard, 1 + len(self.lives) * SLOT, since=start)
        self.lives.append(life)
        self.added[story_shard] = set()
        self.tables[story_shard] = self._read(shard)
        self._note_rendered()
        if shard not in self.task.shards:
            self.task.shards.append(shard)
        if self.writing:  # (the first shards begin writing once the daemon runs)
            self._start_writer(life)
        return True

    def _leave(self, story_shard: str, shard: Shard, drop: str) -> bool:
        writer = self.writers.pop(story_shard)
        writer.stop_event.set()
        writer.join()
        self._writer_failed(writer)
        life = self.life(story_shard)
        assert life is not None
        copy = self._copy_rows(shard, "gone")
        if not self._run(shard, drop):
            raise RuntimeError(f"MariaDB refused {drop!r}")
        # (what is left out of its rows is as of now: a table of that name created again is
        # another life, and starts afresh; seed 46273)
        self.lives[self.lives.index(life)] = replace(
            life, gone=copy, until=self._binlog_end(shard), left_out=self._left_out(story_shard),
            table=self.tables[story_shard],
        )
        del self.tables[story_shard]
        return True

    def _start_writer(self, life: Life) -> None:
        writer = LiveWriter(self.task, life, self.tables[life.story_shard], self.rng.randrange(2**32),
                            self.counts, self.lock)
        self.writers[life.story_shard] = writer
        writer.start()

    def _writer_failed(self, writer: LiveWriter) -> None:
        if writer.error:
            raise RuntimeError(f"a writer failed: {writer.error}")

    # -- the run -------------------------------------------------------------------------------------
    def run(self) -> StoryReport:
        started = time.monotonic()
        stop_kills = threading.Event()
        killer: threading.Thread | None = None
        try:
            self._connections()
            generator = StoryGenerator(self.seed)
            start = self.replay["shards"] if self.replay else generator.start()
            for story_shard, create in start.items():
                if self._join(story_shard, self.place(story_shard), create):
                    self.report.story["shards"][story_shard] = create
            self.task.start(group=True)
            for life in self.lives:
                self._start_writer(life)
            self.writing = True
            expected = len(self.replay["steps"]) if self.replay else generator.length
            if self.knobs.max_steps is not None:
                expected = min(expected, self.knobs.max_steps)
            span = expected * sum(self.knobs.pace) / 2
            moments = sorted(self.rng.uniform(0.1, 0.9) * span for _ in range(self.knobs.kills))
            killer = threading.Thread(target=kill_at, args=(self.task, moments, self.report.kills, stop_kills),
                                      name="killer", daemon=True)
            killer.start()
            self.operator.start()
            self._steps(generator)
            stop_kills.set()
            killer.join()
            self.operator.wait_done(self.knobs.catch_up)  # (its writers still writing)
            if self.knobs.retake:
                self.operator.wait_retaken(self.knobs.catch_up)
                self.operator.wait_done(self.knobs.catch_up)
            self.operator.stop.set()
            self.operator.join()
            self._stop_writers()
            self.task.kill(group=True)
            self.task.start(group=True)  # and no more kills: let it catch up
            self._check()
        except Exception as exc:  # reported with the story; the next story goes on
            self.report.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        finally:
            stop_kills.set()
            if killer is not None:
                killer.join()
            self.operator.stop.set()
            if self.operator.is_alive():
                self.operator.join()
            self.report.ways_out = list(self.operator.taken)
            self.report.retaken = list(self.operator.retaken)
            self.report.operator_problems = list(self.operator.problems)
            self.report.discarded = sum(map(len, self.operator.discarded.values()))
            for writer in self.writers.values():
                writer.stop_event.set()
            if self.task.process is not None:
                self.task.kill(group=True)
            self.report.counts = self.counts
            self.report.seconds = time.monotonic() - started
            self._close()
        return self.report

    def _steps(self, generator: StoryGenerator) -> None:
        """The story's DDL steps, paced: the replayed ones, or the generator's."""
        def pause() -> None:
            time.sleep(self.rng.uniform(*self.knobs.pace))

        limit = self.knobs.max_steps
        if self.replay:
            for step in self.replay["steps"][:limit]:
                pause()
                self._until_taken_back(step["shard"])
                if self.try_step(step):
                    self._took(step)
            return
        unfollowed_left = 2
        while not generator.done(self.tables) and (limit is None or self.report.steps < limit):
            pause()
            for attempt in range(PROPOSALS_PER_STEP):
                proposal = generator.propose(self.tables, attempt)
                if proposal is None:
                    continue
                step = proposal.step
                if (unfollowed_left and step["ddl"].lstrip().upper().startswith("ALTER")
                        and not renames_in(step["ddl"]) and self.operator.rng.random() < self.knobs.unfollowed):
                    step = {**step, "ddl": unfollowed(step["ddl"], self.operator.rng)}
                if not self.try_step(step):
                    continue
                unfollowed_left -= step is not proposal.step
                generator.accepted(proposal)
                self._took(step)
                break
            else:
                generator.skipped()

    def _until_taken_back(self, story_shard: str) -> None:
        """A replayed step of a shard the operator has not taken back yet waits for it (the
        story ran it after)."""
        deadline = time.monotonic() + self.knobs.catch_up
        while story_shard in self.operator.held and time.monotonic() < deadline:
            time.sleep(0.5)

    def _took(self, step: dict[str, str]) -> None:
        self.report.story["steps"].append(step)
        self.report.steps += 1
        with self.lock:
            self.counts.ddls += 1

    def _stop_writers(self) -> None:
        for writer in self.writers.values():
            writer.stop_event.set()
        for writer in self.writers.values():
            writer.join()
            self._writer_failed(writer)

    def _close(self) -> None:
        for conn in [*self.conns.values(), *self.quiet.values()]:
            conn.close()

    # -- the checks ----------------------------------------------------------------------------------
    def _check(self) -> None:
        report = self.report
        paused = self._settle()
        report.caught_up = paused is not None
        if paused is None:
            # (a shard that differs keeps the paused ones from settling: they are still compared
            # as paused, so the report names the shard that differs, not theirs as lost)
            try:
                paused = self._reported_paused()
            except pymysql.err.MySQLError:  # (the status unreadable: every shard as a running one)
                paused = {}
        merged = merged_table(self.task)
        self.view = self._renames_view(merged)
        self.colliding = self._colliding(merged)
        for life in self.lives:
            # (a paused shard's rows count too: they may collide with no running shard's, L43)
            report.collisions += bool(self._colliding_in(life))
            name = str(self.task.shard_id(life.shard))
            if name in paused and life is self._latest(life.story_shard):
                report.paused.append(self._paused(life, paused[name], merged))
                continue
            report.shards.append(self._compare(life, self._rows_left(life), merged))
        report.schema_problem = downstream_problem(self.task) or self._join_problem(set(paused))
        if report.collisions and any("journal entry" in p.reason for p in report.paused):
            report.schema_problem = None  # the key that collided is not downstream: as documented
        report.stop_status = self.task.stop()
        report.tracebacks = self._tracebacks()
        report.unexplained = unexplained_drops(self.task)
        if report.ok:
            self.cleanup()

    def _rows_left(self, life: Life) -> tuple[str, str] | None:
        """The copy of a shard's rows it left downstream: None while it is there; its rows
        before its DROP; or, when it left while paused, before the DDL its pause stands at
        (the daemon says so in its log: what it wrote since goes with its table)."""
        if life.gone is None:
            return None
        name = str(self.task.shard_id(life.shard))
        for match in _LEFT_PAUSED.finditer(self.task.log_text()):
            at = Position.parse(match["position"])
            if match["shard"] != name or not life.lived_at(at):
                # (a table created again after it left while paused is another life, its
                # rows all downstream: seed 34281)
                continue
            # (paused again at a row after a `binlog skip`, it left: its rows before the
            # skipped statement, L71)
            before = self._before_pause(life.story_shard, at)
            if before is not None:
                return (self.copies, before.copy)
        return (self.copies, life.gone)

    def _left_out(self, story_shard: str) -> frozenset[str]:
        """The columns of the shard's rows not compared, as of now: see `_compare`."""
        added = set() if self.task.extract else self.added.get(story_shard, set())
        rendered = self.rendered.get(story_shard, set()) | self.held_renamed.get(story_shard, set())
        # and those whose type a DDL the operator skipped changed: read and written as the
        # table the daemon kept has them (docs/operations/schema-changes.md "A shard's key change, its TRUNCATE, and the way out of every pause")
        kept = self.operator.kept.get(story_shard, frozenset())
        return frozenset(added | rendered | kept)

    def _compare(
        self, life: Life, copy: tuple[str, str] | None, merged: Table, before: Before | None = None
    ) -> KeyedComparison:
        """The life's rows (or a copy of them) against its rows downstream, through the view of
        pending renames; leaving out what docs/design.md says may differ: without extract columns
        the columns it added; the values an ALTER converted in place (in the rows not written
        since: a row event carries the whole row), as of `before` (the DDL a paused shard's
        pause stands at) when given; for a shard that left, the columns no shard has any more
        and those its leaving dropped (dropped downstream)."""
        if before is not None:
            leave_out = set(before.left_out)
        else:
            leave_out = set(life.left_out if life.gone is not None else self._left_out(life.story_shard))
        if before is not None:
            # a shard paused by the CREATE it came back with (its table joins not) has no schema
            # downstream: its columns may be none of the table's (live stories seeds 20175, 21075)
            leave_out |= {c.key for c in self._copy_table(life, copy).columns if merged.column(c.name) is None}
        if life.gone is not None:
            leave_out |= self.overwritten.get(life.first_id, set()) | self._dropped_by_leaving(life)
            # and the names a rename took away: the values of a shard that left went with the
            # rename (which its leaving may finish), and a column of that name now may be
            # another one (a shard added it again); the fuzzer's lineages follow that offline
            renamed = {key(old) for step in self.report.story["steps"] for old, _ in renames_in(step["ddl"])}
            leave_out |= {c.key for c in self._copy_table(life, copy).columns
                          if merged.column(c.name) is None or c.key in renamed}
        where = self._where(life)
        colliding = self._colliding_in(life) | self._discarded_in(life)
        apart = f" AND `id` NOT IN ({', '.join(map(str, sorted(colliding)))})" if colliding else ""
        known = self.converted.get(life.story_shard, {})
        if before is not None and before.converted is not None:
            known = before.converted
        converted = {i: cs for i, cs in known.items() if life.first_id <= i <= life.last_id and i not in colliding}
        if not converted:
            return compare_rows(self.task, life.shard, where, copy, self.view_table, self.view, leave_out,
                                f"1{apart}" if apart else None)
        ids = ", ".join(map(str, sorted(converted)))
        rest = compare_rows(self.task, life.shard, where, copy, self.view_table, self.view, leave_out,
                            f"`id` NOT IN ({ids}){apart}")
        those = compare_rows(self.task, life.shard, where, copy, self.view_table, self.view,
                             leave_out | set().union(*converted.values()), f"`id` IN ({ids})")
        return combined(rest, those)

    def _converted_now(self, story_shard: str) -> dict[int, frozenset[str]]:
        return {i: frozenset(cs) for i, cs in self.converted.get(story_shard, {}).items()}

    def _colliding_in(self, life: Life) -> set[int]:
        return {i for i in set(self.colliding.get(life.story_shard, ())) | self._kept_colliding(life)
                if life.first_id <= i <= life.last_id}

    def _kept_colliding(self, life: Life) -> set[int]:
        """A UNIQUE key a DDL the operator skipped dropped stays downstream (docs/operations/schema-changes.md "A shard's key change, its TRUNCATE, and the way out of every pause"): the shard's rows that share a value there replace each other in safe mode (or
        are refused); those rows are left out."""
        keys = self.operator.kept_keys.get(life.story_shard, ()) if life.gone is None else ()
        out: set[int] = set()
        table = f"{quote_identifier(life.shard[1])}.{quote_identifier(life.shard[2])}"
        for columns in keys:
            names = ", ".join(map(quote_identifier, columns))
            with self.conns[life.shard[0]].cursor() as cur:
                try:
                    cur.execute(f"SELECT id, {names} FROM {table} WHERE id BETWEEN {life.first_id} AND {life.last_id}")
                except pymysql.err.MySQLError:  # (a column of the key gone since)
                    continue
                seen: dict[tuple, list[int]] = {}
                for row_id, *values in cur.fetchall():
                    if None not in values:
                        seen.setdefault(tuple(map(_as_key, values)), []).append(row_id)
            out |= {i for ids in seen.values() if len(ids) > 1 for i in ids}
        return out

    def _discarded_in(self, life: Life) -> set[int]:
        """The ids the life's writer touched while a `binlog skip` discarded its rows (from the
        pause to the skip): downstream they are as the skip left them, whatever came before;
        and those of its rows the operator left out (`handle-error skip`, into the dead-letter
        table)."""
        ids = set(self.operator.discarded.get(life.story_shard, ()))
        if any(t.startswith("handle-error skip") for t in self.operator.taken):
            for letter in self.task.meta().dead_letters.list(self.task.shard_id(life.shard), "skipped"):
                # (the key it had, and any it was to take: a key-moving UPDATE left out whole)
                ids |= set(map(int, re.findall(r"-?\d+", f"{letter['key'] or ''} {letter['statement'] or ''}")))
        return {i for i in ids if life.first_id <= i <= life.last_id}

    def _dropped_by_leaving(self, life: Life) -> set[str]:
        """The columns (keys) dropped downstream from the life's DROP on, as no shard there
        had them: by its DROP, or by any later decision (the last other shard having one
        left or dropped it: seed 240014, t1 left while t4 still had `n1`, t4 left, then t2
        added `n1` afresh). Their values went with them, though another shard may add one
        again later (or, on another server, earlier: the daemon reads servers apart; seed
        46568)."""
        name = str(self.task.shard_id(life.shard))
        out, gone = set(), False
        for line in self.task.log_text().splitlines():
            decided = _DECIDED.search(line)
            if decided is not None:
                gone = gone or (decided["shard"] == name and decided["ddl"].startswith("DROP TABLE")
                                and life.lived_at(Position.parse(decided["position"])))
            elif gone and " ran " in line:
                out |= {key(c) for c in _DROPPED.findall(line)}
        return out

    def _colliding(self, merged: Table) -> dict[str, set[int]]:
        """Without extract columns: the ids of the rows of present shards whose values in a
        UNIQUE key of the merged table another shard's rows have too. Keys are to be unique
        across shards then (docs/design.md): of such rows downstream keeps one (a safe-mode REPLACE
        of one removes the other; seed 9808), which is no bug; they are left out."""
        if self.task.extract or not any(i.kind == IndexKind.UNIQUE for i in merged.indexes):
            return {}
        out: dict[str, set[int]] = {}
        # (a shard that left: its rows as they were when it left)
        places = {id(life): (self.copies, life.gone) if life.gone is not None else life.shard[1:] for life in self.lives}
        tables = {id(life): show_create(self.quiet[life.shard[0]], *places[id(life)]) for life in self.lives}
        for index in merged.indexes:
            if index.kind != IndexKind.UNIQUE:
                continue
            seen: dict[tuple, set[tuple[str, int]]] = {}
            for life in self.lives:
                (schema, name), table = places[id(life)], tables[id(life)]
                if not all(table.column(c) for c in index.columns):
                    continue
                columns = ", ".join(quote_identifier(table.column(c).name) for c in index.columns)
                with self.conns[life.shard[0]].cursor() as cur:
                    cur.execute(f"SELECT id, {columns} FROM {quote_identifier(schema)}.{quote_identifier(name)} "
                                f"WHERE id BETWEEN {life.first_id} AND {life.last_id}")
                    for row_id, *values in cur.fetchall():
                        if None not in values:
                            seen.setdefault(tuple(map(_as_key, values)), set()).add((life.story_shard, row_id))
            for members in seen.values():
                if len({shard for shard, _ in members}) > 1:
                    for shard, row_id in members:
                        out.setdefault(shard, set()).add(row_id)
        return out

    def _copy_table(self, life: Life, copy: tuple[str, str] | None) -> Table:
        schema, table = copy or life.shard[1:]
        return show_create(self.quiet[life.shard[0]], schema, table)

    def _renames_view(self, merged: Table) -> str | None:
        """While a rename is pending, a row's value is under the old name or the new one
        downstream (moved by the first shard's CHANGE, or written since under either), and
        the last shard's copy (`SET new = old WHERE old IS NOT NULL`) makes it
        COALESCE(old, new): a view of the target with that in both columns, or None when no
        rename is pending."""
        pairs = [(r.old, r.new) for r in self._coordinator().renames
                 if r.started and merged.column(r.old) is not None and merged.column(r.new) is not None]
        self.report.renames_pending = len(pairs)
        self.view_table = merged
        self.held_renamed = self._held_renamed(merged, pairs)
        if not pairs:
            return None
        value = {key(c.name): quote_identifier(c.name) for c in merged.columns}
        typed = {c.key: c for c in merged.columns}
        for old, new in pairs:
            both = f"COALESCE({quote_identifier(old)}, {quote_identifier(new)})"
            value[key(old)] = value[key(new)] = both
            # (COALESCE of a number and a text is a text: the shard's numbers compare as text;
            # MariaDB's JSON is a text too, seed 47887)
            text = next((c for c in (typed[key(old)], typed[key(new)]) if holds_text(c.type)), None)
            # but a new name of a date type reads text under the old name as its dates: the
            # renamers' values there are those of their own type, not its text with the
            # fraction of the column holding them (seed 24045)
            cast = _date_cast(typed[key(new)].type)
            if text is not None and typed[key(old)].type.is_character and cast is not None:
                value[key(new)] = f"COALESCE({quote_identifier(new)}, CAST({quote_identifier(old)} AS {cast}))"
                typed[key(old)] = replace(typed[key(old)], type=text.type)
            elif text is not None:
                typed[key(old)] = replace(typed[key(old)], type=text.type)
                typed[key(new)] = replace(typed[key(new)], type=text.type)
        self.view_table = merged.with_columns(typed[c.key] for c in merged.columns)
        columns = ", ".join(f"{value[key(c.name)]} AS {quote_identifier(c.name)}" for c in merged.columns)
        view = f"{quote_identifier(self.task.target_db + '_view')}.`orders`"
        self.task.sandbox.downstream.execute([
            f"CREATE DATABASE IF NOT EXISTS {quote_identifier(self.task.target_db + '_view')}",
            f"CREATE OR REPLACE VIEW {view} AS SELECT {columns} FROM "
            f"{quote_identifier(self.task.target_db)}.`orders`",
        ])
        return view

    def _held_renamed(self, merged: Table, pairs: list[tuple[str, str]]) -> dict[str, set[str]]:
        """The shards keeping the old name of a pending rename that made it a text since: the
        first renamer's CHANGE moved their rows' values to the new name, where the rows they
        have not written since keep them, and the view reads them as the new name's type
        renders them, not as their own conversion to text did (seed 53061: a TIMESTAMP(3)
        made a CHAR upstream reads '12:30:45.123', held in a TIMESTAMP(6) '12:30:45.123000').
        (Had their column been a text when the values moved, the new name would be one too:
        it holds them.)"""
        held: dict[str, set[str]] = {}
        for old, new in pairs:
            if holds_text(merged.column(new).type):
                continue
            for story_shard, table in self.tables.items():
                own = table.column(old)
                if own is not None and table.column(new) is None and holds_text(own.type):
                    held.setdefault(story_shard, set()).add(key(old))
        return held

    def _coordinator(self) -> Coordinator:
        target = f"{self.task.target_db}.orders"
        return Coordinator(target, "mariadb", MetaStore(self.task.meta(), target))

    def _where(self, life: Life) -> str:
        origin = origin_filter(EXTRACT, self.task.shard_id(life.shard)) if self.task.extract else "1"
        return f"{origin} AND `id` BETWEEN {life.first_id} AND {life.last_id}"

    def _settle(self) -> dict[str, dict] | None:
        """Wait until everything read is applied (every watermark at the end of its binlog),
        or, with shards paused (which hold their source's watermark back), until every other
        present shard equals its rows downstream. The paused shards as the daemon reports
        them (blocked ones with their block); None when it did not catch up in time."""
        deadline = time.monotonic() + self.knobs.catch_up
        while time.monotonic() < deadline:
            if self.task.process is not None and self.task.process.poll() is not None:
                self.report.kills.crashes = [*(self.report.kills.crashes or []),
                                             f"exit status {self.task.process.poll()} while catching up"]
                return None
            if caught_up(self.task):
                return self._reported_paused()
            paused = self._reported_paused()
            if paused and self._others_equal(paused):
                time.sleep(1.0)  # and they stay so
                if self._reported_paused() == paused and self._others_equal(paused):
                    return paused
            time.sleep(0.5)
        return None

    def _reported_paused(self) -> dict[str, dict]:
        """Shard -> what `shardmerge status` says of it: `paused` (the pause: where its rows
        are read again from, why) and, for a blocked one, `block` (kind, reason, DDL, position)."""
        status = saved_status(self.task.config)
        out: dict[str, dict] = {shard: {"paused": p} for shard, p in status["paused"].items()}
        for group in status["groups"].values():
            for shard, block in group["blocked"].items():
                out.setdefault(shard, {})["block"] = block
        return out

    def _others_equal(self, paused: dict[str, dict]) -> bool:
        try:
            merged = merged_table(self.task)
        except LookupError:
            return False
        self.view = self._renames_view(merged)
        # (rows of two shards in one UNIQUE key are left out here too, as at the end: a
        # safe-mode REPLACE of one shard's row removes the other's downstream, and that shard
        # would never compare equal; L58)
        self.colliding = self._colliding(merged)
        return all(
            self._compare(life, None, merged).equal
            for life in self.lives
            if life.gone is None and str(self.task.shard_id(life.shard)) not in paused
        )

    def _paused(self, life: Life, reported: dict, merged: Table) -> Paused:
        """What the daemon says of a shard paused at the end, and whether it is what the
        the docs say: a blocked shard with its DDL, reason and position, its rows
        downstream those it had before the DDL its pause stands at."""
        name = str(self.task.shard_id(life.shard))
        pause, block = reported.get("paused"), reported.get("block")
        if block is None:
            reason = pause["reason"] if pause else ""
            if life.story_shard in self.operator.kept and ("handle-error" in reason or "not be replayed" in reason):
                # a row the table a `binlog skip` kept does not hold, refused downstream (docs/operations/schema-changes.md)
                return Paused(name, "row", reason)
            if not self.task.extract and "Duplicate entry" in reason:
                # rows of two shards in one UNIQUE key (a row, or a key a DDL adds over them):
                # without extract columns keys must be unique across shards (docs/operations/schema-changes.md), no bug
                self.report.collisions += 1
                return Paused(name, "row", reason)
            if self.task.extract and "Duplicate entry" in reason and "for key 'PRIMARY'" not in reason and any(
                x.story_shard == life.story_shard and x.gone is not None for x in self.lives
            ):
                # a table created again under a dropped one's name: its rows share the extract
                # values of the rows that one left downstream, which a UNIQUE key meets (its
                # ids are of their own: not the primary key) (docs/design.md, L80), no bug
                self.report.collisions += 1
                return Paused(name, "row", reason)
            if life.gone is not None:
                return Paused(name, "left", reason, problem="it left the group, and stays paused")
            return Paused(name, "row", reason, problem="paused by its rows: not documented for this story")
        reason, ddl, position = block.get("reason"), block.get("ddl"), block.get("position")
        found = Paused(name, f"blocked, {block.get('kind')}", reason or "", ddl, position)
        if not (reason and ddl and position):
            return replace(found, problem="reported without its DDL, reason or position")
        paused_by = pause["reason"] if pause else ""
        if life.story_shard in self.operator.kept and ("handle-error" in paused_by or "not be replayed" in paused_by):
            # paused by a row the table a `binlog skip` kept does not hold (docs/operations/schema-changes.md) before this
            # DDL came: its rows since that pause are not downstream, nor expected to be
            return found
        at = Position.parse(pause["position"] if pause else position)
        before = self._before_pause(life.story_shard, at)
        if before is None:
            windows = ", ".join(f"{b.start.pos}-{b.end.pos}" for b in self.before.get(life.story_shard, []))
            return replace(found, problem=f"its pause at {at} is at none of its DDLs ({windows})")
        before = replace(before, left_out=before.left_out | self._never_written(name, life, before),
                         converted=self._converted_at_resume(name, life, before))
        rows = self._compare(life, (self.copies, before.copy), merged, before)
        problem = None if rows.equal else f"its rows downstream are not its rows before {before.ddl}"
        return replace(found, rows_before=rows, problem=problem)

    def _before_pause(self, story_shard: str, at: Position) -> Before | None:
        """The DDL a shard's pause at `at` stands at, with the copy of its rows before it; or,
        paused again after a `binlog skip` (a row that did not fit the table it kept), the
        skipped statement: its rows downstream are those before it, less the discarded. Its own
        statement, the last before the pause (not another shard's of its server, skipped later:
        its rows copied then are rows the pause holds back, L68)."""
        befores = self.before.get(story_shard, [])
        before = next((b for b in befores if b.start <= at <= b.end), None)
        if before is None and story_shard in self.operator.discarded:
            before = next((b for b in reversed(befores) if inner(b.ddl) and b.of is None and b.start <= at), None)
        return before

    def _never_written(self, name: str, life: Life, before: Before) -> frozenset[str]:
        """The columns of the shard's table at its pause that none of its accepted tables had
        (`ShardState.wrote`): its rows downstream hold there what the rows of a shard lacking
        a column hold (docs/design.md "Values an ALTER converts in place": a paused shard's rows
        are converted as it resumes, to the table it resumes at). That differs from its table
        at the pause only where a decision resumed it at a later DDL of its own, and its rows,
        read again, paused it before it: a column it added in conflict and dropped later holds
        the default downstream, where its ADD gave its rows upstream its own (L01, seed 610027)."""
        state = self._state(name)
        if state is None or state.accepted is None:
            return frozenset()
        table = self._copy_table(life, (self.copies, before.copy))
        return frozenset(c.key for c in table.columns if c.key not in state.wrote)

    def _converted_at_resume(self, name: str, life: Life, before: Before) -> dict[int, frozenset[str]]:
        """The values an ALTER converted in place as of `before` (the DDL the shard's pause
        stands at), and those its later DDLs converted in the columns its accepted table has
        otherwise than its table at the pause: a decision that resumed it at a later DDL of its
        own converted its rows downstream to the table it resumed at, also while a row it cannot
        read pauses it again before that DDL (docs/design.md "Values an ALTER converts in place";
        `_never_written` is the same for the columns it added). Where such a conversion depends on
        the moment, its rows hold the downstream DDL's: a NULL in a TIMESTAMP made NOT NULL is the
        time the decision's MODIFY ran downstream, not of the shard's own ALTER (L66)."""
        known = before.converted if before.converted is not None else self._converted_now(life.story_shard)
        state = self._state(name)
        if state is None or state.accepted is None:
            return known
        table = self._copy_table(life, (self.copies, before.copy))
        moved = frozenset(c.key for c in table.columns
                          if (a := state.accepted.column(c.name)) is not None
                          and (a.type, a.nullable) != (c.type, c.nullable))
        out = dict(known)
        for row_id, columns in self.converted.get(life.story_shard, {}).items():
            if columns & moved:
                out[row_id] = out.get(row_id, frozenset()) | (columns & moved)
        # and its rows touched after `before`: its later DDLs met them upstream in states other
        # than the copy's, which the decision converted downstream (a NULL there made the time
        # of the decision's MODIFY, where the shard's own MODIFY met a value written since)
        writer = self.writers.get(life.story_shard)
        if moved and writer is not None and len(writer.history) > before.tx:
            for row_id in set().union(*writer.history[before.tx:]):
                out[row_id] = out.get(row_id, frozenset()) | moved
        return out

    def _state(self, name: str) -> ShardState | None:
        return next((s for sid, s in self._coordinator().shards.items() if str(sid) == name), None)

    def _join_problem(self, paused: set[str]) -> str | None:
        """The coordinator's table takes every row of the join of the shards now, a paused
        shard taken as its accepted table (equal: the join; wider: columns kept for rows that
        stay, `report.wider`). The columns of a pending rename are the rename's (the new name
        nullable, the old one back empty: docs/design.md "The join"), which no join of the
        tables alone gives: they are taken as the coordinator has them."""
        coordinator = self._coordinator()
        # (a shard whose DDL the operator skipped is as the daemon keeps it: docs/operations/schema-changes.md "A shard's key change, its TRUNCATE, and the way out of every pause")
        paused = paused | {str(self.task.shard_id(self.place(s))) for s in self.operator.kept if s in self.tables}
        present = {f"{s[1]}.{s[2]}": s for s in map(self.place, self.tables)}
        accepted = {f"{s.schema}.{s.table}": render_table(state.accepted, "mariadb", name=s.table)
                    for s, state in coordinator.shards.items() if str(s) in paused and state.accepted is not None}
        router = Router.from_config(self.task.config)
        snaps = [snapshot(s, router) for s in self.task.config.sources]
        snaps = [replace(s, schemas={k: accepted.get(k, v) for k, v in s.schemas.items()
                                     if k in present and (k in accepted or str(self.task.shard_id(present[k])) not in paused)})
                 for s in snaps]
        (group,) = groups(self.task.config, router, [s for s in snaps if s.schemas])
        believed = self.task.coordinator_table()
        if believed is None:
            return "the coordinator has no joined table"
        held = materialize(believed, "mariadb")
        renamed = {key(n) for r in coordinator.renames if r.started for n in (r.old, r.new)}
        joined = as_laid_out(materialize(group.joined, "mariadb"), held)
        joined = joined.with_columns(held.column(c.name) if c.key in renamed and held.column(c.name) else c
                                     for c in joined.columns)
        # a generated column reading a column held in another family than the shards have
        # it joins as absent (docs/design.md "Generated columns that differ", F141): its values would differ
        recast = {c.key for c in joined.columns
                  if (there := held.column(c.name)) is not None and there.type.family != c.type.family}
        joined = without_generated_reading(joined, recast) if recast else joined
        if joined == held:
            return None
        both = join(joined, held, "mariadb")
        if not isinstance(both, JoinConflict) and as_laid_out(materialize(both, "mariadb"), held) == held:
            self.report.wider = True  # it takes every row of the join: the join adds nothing to it
            return None
        if self._holds_every_column(joined, held):
            self.report.wider = True
            return None
        return (f"the coordinator's table does not take every row of the join of the shards now:\n"
                f"{render_table(held)}\nvs\n{render_table(joined)}")

    @staticmethod
    def _holds_every_column(joined: Table, held: Table) -> bool:
        """Each of the join's columns is held downstream as it is, wider, or in a type holding
        the values of both where rows that stay need one the shards' cannot join (docs/design.md
        "Rows no shard vouches for": a departed shard's text beside a shard's new INT)."""
        for column in joined.columns:
            there = held.column(column.name)
            if there is None or (column.nullable and not there.nullable):
                return False
            taken = there.type == column.type or holding(column.type, there.type, "mariadb") == there.type
            # a DATE is its midnight in the DATETIME a TIMESTAMP of rows that stay needs
            # (docs/design.md "Rows no shard vouches for"; seed 58642)
            midnight = column.type.family == Family.DATE and there.type.family == Family.DATETIME
            if not (taken or midnight):
                return False
        return {c.key for c in held.columns} >= {c.key for c in joined.columns}

    def _tracebacks(self) -> list[str]:
        """The last line (the exception) of every traceback in the daemon's log."""
        lines = self.task.log_text().splitlines()
        out = []
        for i, line in enumerate(lines):
            if line.startswith("Traceback"):
                end = next((j for j in range(i + 1, len(lines)) if not lines[j].startswith(" ")), len(lines) - 1)
                out.append(lines[end])
        return out

    def cleanup(self) -> None:
        self.task.sandbox.downstream.execute(f"DROP DATABASE IF EXISTS {quote_identifier(self.task.target_db + '_view')}")
        self.task.cleanup()
        for inst in self.task.sandbox.upstreams:
            inst.execute(f"DROP DATABASE IF EXISTS {quote_identifier(self.copies)}")


# -- many stories ------------------------------------------------------------------------------------
@dataclass
class Totals:
    stories: int = 0
    failed: list[int] = field(default_factory=list)
    steps: int = 0
    rows: int = 0
    kills: int = 0
    lost: int = 0
    extra: int = 0
    different: int = 0
    schema_mismatches: int = 0
    crashes: int = 0
    paused: int = 0  # shards left blocked at the end, reported as documented
    collisions: int = 0
    wider: int = 0
    errors: int = 0
    ways_out: dict[str, int] = field(default_factory=dict)  # the operator's, by verb

    def add(self, r: StoryReport) -> None:
        self.stories += 1
        self.steps += r.steps
        self.rows += r.rows
        self.kills += r.kills.kills
        self.lost += r.lost
        self.extra += r.extra
        self.different += r.different
        self.schema_mismatches += r.schema_problem is not None
        self.crashes += len(r.crashes)
        self.paused += sum(p.problem is None for p in r.paused)
        self.collisions += r.collisions
        self.wider += r.wider
        self.errors += r.error is not None
        for taken in r.ways_out:
            verb = taken.rsplit(" ", 1)[0]
            self.ways_out[verb] = self.ways_out.get(verb, 0) + 1
        if not r.ok:
            self.failed.append(r.seed)

    def summary(self, wall: float) -> str:
        return (f"live stories: {self.stories}, failed {len(self.failed)}"
                f"{' (seeds ' + ', '.join(map(str, self.failed)) + ')' if self.failed else ''}; "
                f"steps {self.steps}, rows written {self.rows}, kills {self.kills}; "
                f"lost {self.lost}, extra {self.extra}, different {self.different}, "
                f"schema mismatches {self.schema_mismatches}, crashes {self.crashes}, run errors {self.errors}; "
                f"shards left blocked (reported) {self.paused}, UNIQUE collisions {self.collisions}, "
                f"coordinator wider than the join {self.wider}; "
                f"ways out taken {sum(self.ways_out.values())} "
                f"({', '.join(f'{v} {n}' for v, n in sorted(self.ways_out.items())) or 'none'}); wall {wall:.0f}s")


def write_finding(report: StoryReport, out: Path, log: Path) -> Path:
    """The failing story as a scenario YAML `plan` reads (with the seed and the extract choice
    under `live`, which `--replay` takes), and the daemon's log beside it."""
    story = {
        "description": f"live story seed {report.seed}: " + "; ".join(d.splitlines()[0] for d in report.details())[:2000],
        **{k: v for k, v in report.story.items() if k != "description"},
        "live": {"seed": report.seed, "extract": report.extract},
    }
    path = write_story(story, out / f"live-seed{report.seed}.yaml")
    if log.exists():
        shutil.copyfile(log, out / f"live-seed{report.seed}.log")
    return path


def read_finding(path: Path) -> Story:
    story = yaml.safe_load(path.read_text())
    live = story.pop("live", {})
    scenario(story)  # a file `plan` cannot read is refused here, with the field named
    return {**story, "live": live}


def run_stories(sandbox: Sandbox, workdir: Path, seeds: list[int], knobs: Knobs, out: Path | None,
                log: Callable[[str], None] = print, story: Story | None = None) -> tuple[Totals, list[StoryReport]]:
    totals, reports = Totals(), []
    for seed in seeds:
        live = LiveStory(sandbox, workdir, seed, knobs, story, log)
        report = live.run()
        if report.ok:
            pass
        elif out is not None:
            log(f"  written: {write_finding(report, out, live.task.log)}")
        totals.add(report)
        reports.append(report)
        log(report.line())
        for detail in report.details():
            log("  " + detail.replace("\n", "\n    "))
    return totals, reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.live_stories", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    parser.add_argument("--count", type=int, default=10, help="stories (default 10); story i has seed SEED+i")
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs per story (default 3)")
    parser.add_argument("--max-steps", type=int, default=None, help="at most this many DDL steps a story")
    parser.add_argument("--unfollowed", type=float, default=Knobs.unfollowed,
                        help=f"the chance a step's ALTER runs unfollowed, for the operator (default {Knobs.unfollowed})")
    parser.add_argument("--replay", type=Path, help="play this story (a written finding) instead")
    parser.add_argument("--out", type=Path, default=Path("live-out"), help="failing stories (default live-out/)")
    parser.add_argument("--dir", type=Path, default=None, help="sandbox and logs (default: a new temporary folder)")
    parser.add_argument("--hash-seed", type=int, default=0,
                        help="PYTHONHASHSEED of the daemons (default 0), as the fuzzer pins it")
    parser.add_argument("--way-out", default=None,
                        help="the operator's way out where printed (`set-schema`, `binlog skip`, ...; default: at random)")
    args = parser.parse_args(argv)
    os.environ["PYTHONHASHSEED"] = str(args.hash_seed)  # the daemons inherit it
    # (its servers' data in memory where there is room: a story is mostly DDL, tests/ram_dir.py)
    prefix = "shardmerge-live-"
    root = args.dir or ram_dir.make(prefix) or Path(tempfile.mkdtemp(prefix=f"{prefix}{args.seed}-"))
    root.mkdir(parents=True, exist_ok=True)
    story = read_finding(args.replay) if args.replay else None
    seeds = [story["live"].get("seed", args.seed)] if story else list(range(args.seed, args.seed + args.count))
    knobs = Knobs(kills=args.kills, max_steps=args.max_steps, unfollowed=args.unfollowed, way_out=args.way_out)
    print(f"live stories: seeds {seeds[0]}..{seeds[-1]}, {knobs.kills} kills each, in {root}", flush=True)
    sandbox = Sandbox(root / "sandbox", upstreams=2, watchdog=True)
    sandbox.up()
    started = time.monotonic()
    try:
        totals, _ = run_stories(sandbox, root, seeds, knobs, args.out, lambda m: print(m, flush=True), story)
    finally:
        sandbox.down()
    print(totals.summary(time.monotonic() - started))
    if not totals.failed and args.dir is None:
        shutil.rmtree(root, ignore_errors=True)  # a failing story's log is in --out
    return 1 if totals.failed else 0


def _date_cast(t: ColumnType) -> str | None:
    """The CAST type reading a text as a column of date type `t` holds it, or None."""
    if t.family in (Family.DATETIME, Family.TIMESTAMP):
        return f"DATETIME({t.fsp or 0})"
    if t.family == Family.TIME:
        return f"TIME({t.fsp or 0})"
    return "DATE" if t.family == Family.DATE else None


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())

