"""The downstream side of the differential DDL corpus (issue 43, item 1): each statement our
tracker follows (the upstream side's `agree`) goes through the coordinator as `shardmerge
plan` plays it (`Player`: the shard's tracker, its typed change, `Coordinator.apply`), the
downstream DDL of each decision runs on the sandbox's downstream server, and the result is
judged after every statement, in two setups:

- one shard: the sequence's table on source s1;
- two identical shards: the same table on sources s1 and s2, which run each statement one
  after the other (a shard's DDL that pauses it until the other shard runs it too is fine:
  `interim` counts those).

Every table a sequence names is a shard of the group (a route taking them all), so a RENAME
TABLE is a shard leaving and one joining, as in the daemon.

After each decision the downstream table (SHOW CREATE TABLE, parsed as the upstream side
reads it) must be the coordinator's propagated table as the oracle of the fuzzer settles it
(tests/fuzz/oracle.py: the server's choices filled in, without the indexes of pending
renames). After the last shard ran the statement the join must be the upstream server's
table and no shard may be paused. `read_table` (information_schema), which the journal's
recovery trusts, is checked against SHOW CREATE TABLE on the way (`inspect`; not a verdict).

Outcomes (CLASSES): agree; differ (downstream is not the propagated table, or the join is not
the upstream table); downstream-refused (the server refused a statement we emitted, with its
code); paused (a shard is still blocked after every shard ran the statement: a conflict, an
unsupported change ...); crash (our code raised).

Resets. A setup whose statement did not agree, and both setups after a statement the upstream
side did not agree on (the server took it but our tracker refused it, read it otherwise or
crashed), start again from the server's tables: a new coordinator whose shards join with
SHOW CREATE TABLE of their table, on an empty downstream database. So each statement is
judged from a state every side agrees on, as the upstream side resets our tables to the
server's; a pause or a wrong table would otherwise make every later statement of the
sequence a finding of the first. A statement the server refused never reaches a binlog: it
goes through neither setup.
"""

from __future__ import annotations

import time
import traceback
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pymysql

from lattice import Table, is_old_name_index, parse_table, render_table
from lattice.render import materialize
from replicator.apply.inspect import read_table, with_server_choices
from replicator.sandbox import Instance
from replicator.schema.coordinator import Decision
from replicator.schema.plan import Player
from replicator.servers import DOWNSTREAM_SESSION
from replicator.shard_id import ShardId
from tests.fuzz.oracle import statement_shape
from tests.tables import differences

if TYPE_CHECKING:
    from tests.server.test_ddl_against_mariadb import Replay

def settled(expected: Table, actual: Table) -> Table:
    """`expected` as MariaDB would make it, with what it leaves to the server as in `actual`."""
    return with_server_choices(materialize(expected, "mariadb"), actual)


ONE_SHARD = "one shard"
TWO_SHARDS = "two shards"
SETUPS: dict[str, tuple[str, ...]] = {ONE_SHARD: ("s1",), TWO_SHARDS: ("s1", "s2")}

AGREE = "agree"
DIFFER = "differ"
REFUSED = "downstream-refused"
PAUSED = "paused"
CRASH = "crash"
CLASSES = (AGREE, DIFFER, REFUSED, PAUSED, CRASH)

TARGET = "t"  # the downstream table's name in each setup's database
NO_SUCH_TABLE = 1146


@dataclass(frozen=True)
class Verdict:
    """One statement in one setup. `sequence` and `step` are the upstream side's."""

    setup: str
    sequence: Any
    step: Any
    outcome: str  # one of CLASSES
    reason: str = ""  # what alike verdicts share: the error, the kind of difference, the block
    detail: str = ""  # the whole difference, message or traceback
    before: tuple[str, ...] = ()  # the upstream table(s) before the statement, as CREATE TABLE
    emitted: tuple[str, ...] = ()  # the downstream statements we emitted for it, in order


@dataclass(frozen=True)
class Note:
    """Something seen on the way that is not a statement's verdict (a reset that failed,
    read_table reading the downstream table otherwise than SHOW CREATE TABLE)."""

    setup: str
    sequence: Any
    step: Any
    reason: str
    detail: str = ""


@dataclass
class DownstreamRun:
    verdicts: list[Verdict] = field(default_factory=list)
    resets: Counter[str] = field(default_factory=Counter)  # why setups started again
    broken: list[Note] = field(default_factory=list)  # resets that failed: the setup stopped there
    not_judged: int = 0  # statements a stopped setup did not play
    interim: Counter[str] = field(default_factory=Counter)  # pauses the second shard resolved
    inspect: list[Note] = field(default_factory=list)  # read_table differs from SHOW CREATE TABLE
    seconds: float = 0.0  # spent on this side

    def counts(self, setup: str) -> Counter[str]:
        return Counter(v.outcome for v in self.verdicts if v.setup == setup)


class _Stop(Exception):
    """A statement's verdict is settled before its last check."""

    def __init__(self, outcome: str, reason: str, detail: str = ""):
        super().__init__(reason)
        self.outcome, self.reason, self.detail = outcome, reason, detail


class _Setup:
    """One setup: its downstream database (one for the whole run, emptied for every
    sequence) and, per sequence, its coordinator (through a Player)."""

    def __init__(self, name: str, downstream: Instance, db: str):
        self.name = name
        self.sources = SETUPS[name]
        self.db = db
        downstream.execute(f"CREATE DATABASE `{db}`")
        self.downstream = downstream
        self.conn = downstream.connect(db, read_timeout=120)
        # SHOW CREATE TABLE as bytes: a binary column's default is raw inside its quotes
        self.raw = downstream.connect(db, read_timeout=120, use_unicode=False)
        with self.conn.cursor() as cur:
            for statement in DOWNSTREAM_SESSION:
                cur.execute(statement)
        self.upstream_db = ""
        self.names: tuple[str, ...] = ()
        self.replay: Replay | None = None
        self.player: Player | None = None
        self.stopped: str | None = None  # why the setup plays no more of this sequence
        self.shown: Table | None = None  # the downstream table as last read
        self.unread = True  # statements ran since

    def close(self) -> None:
        self.conn.close()
        self.raw.close()
        self.downstream.execute(f"DROP DATABASE IF EXISTS `{self.db}`")

    def begin(self, upstream_db: str, names: Iterable[str], replay: Replay) -> None:
        """A new sequence: every table it names is a shard of each source."""
        self.upstream_db, self.names, self.replay = upstream_db, tuple(dict.fromkeys(names)), replay
        self.stopped = None
        self._empty()
        self.player = self._player()

    def _empty(self) -> None:
        with self.conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS `{TARGET}`")
        self.shown, self.unread = None, False

    def _player(self) -> Player:
        shards = [self._shard(source, name) for source in self.sources for name in self.names]
        return Player(f"{self.db}.{TARGET}", "mariadb", shards, schema_charset=self.replay.schema_charset)

    def _shard(self, source: str, table: str) -> ShardId:
        return ShardId(source, self.upstream_db, table)

    # -- a statement ------------------------------------------------------------------------
    def play(self, sql: str, table: str) -> tuple[str, str, str, tuple[str, ...], list[str]]:
        """(outcome, reason, detail, emitted, interim pauses) of `sql` run on `table` by
        every shard of the setup in turn."""
        emitted: list[str] = []
        paused_between: list[str] = []
        try:
            for index, source in enumerate(self.sources):
                decision = self._decide(self._shard(source, table), sql)
                self._run(decision, emitted)
                self._check_downstream()
                if index < len(self.sources) - 1:
                    paused_between += self._blocks()
            still = self._blocks()
            if still:
                raise _Stop(PAUSED, still[0], "\n".join(still))
            self._check_join()
        except _Stop as stop:
            return stop.outcome, stop.reason, stop.detail, tuple(emitted), []
        return AGREE, "", "", tuple(emitted), paused_between

    def _decide(self, shard: ShardId, sql: str) -> Decision:
        try:
            return self.player.ddl(shard, sql)
        except Exception as exc:  # anything the coordinator raises is what this side looks for
            where = traceback.extract_tb(exc.__traceback__)[-1]
            reason = f"{type(exc).__name__} at {Path(where.filename).name}:{where.lineno} in {where.name}"
            raise _Stop(CRASH, reason, _short_traceback()) from exc

    def _run(self, decision: Decision, emitted: list[str]) -> None:
        before = decision.before
        for index, step in enumerate(decision.steps):
            emitted.append(step.sql)
            self.unread = True
            try:
                with self.conn.cursor() as cur:
                    cur.execute(step.sql)
            except pymysql.MySQLError as exc:
                code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else -1
                message = str(exc.args[1] if len(exc.args) > 1 else exc)
                shape = statement_shape(step.sql, before, step.after)
                emitted += [f"(not run) {later.sql}" for later in decision.steps[index + 1 :]]
                raise _Stop(
                    REFUSED, f"ERROR {code} [{shape}]: {message}", f"ERROR {code}: {message}"
                ) from exc
            before = step.after if step.after is not None else before

    def _check_downstream(self) -> None:
        propagated = self.player.coordinator.propagated
        actual = self.downstream_table()
        if propagated is None or actual is None:
            if (propagated is None) != (actual is None):
                raise _Stop(
                    DIFFER,
                    "downstream ≠ join: a table on one side only",
                    f"downstream: {actual is not None}, propagated: {propagated is not None}",
                )
            return
        if self.player.coordinator.renames:  # the old names' helper indexes of pending renames
            actual = replace(
                actual, indexes=tuple(i for i in actual.indexes if not is_old_name_index(i.name))
            )
        expected = settled(propagated, actual)
        if actual != expected:
            shown = differences(actual, expected)
            raise _Stop(DIFFER, f"downstream ≠ join: {_first(shown)}", f"downstream / join: {shown}")

    def _check_join(self) -> None:
        """After every shard ran the statement the join is the shards' table, which is the
        upstream server's (as the upstream side read it when it compared our tracker's)."""
        coordinator = self.player.coordinator
        theirs = self.replay.shown
        if len(theirs) > 1:
            return  # tables of the test's that the sequence does not follow
        upstream = next(iter(theirs.values()), None)
        joined = coordinator.target
        if upstream is None or joined is None:
            if upstream is not None or coordinator.shards:
                raise _Stop(
                    DIFFER,
                    "join ≠ upstream: a table on one side only",
                    f"upstream: {upstream is not None}, shards: {list(map(str, coordinator.shards))}",
                )
            return
        ours = replace(settled(joined, upstream), name=upstream.name)
        upstream = self.replay._engine_as_ours(upstream, ours)
        if ours != upstream:
            shown = differences(upstream, ours)
            raise _Stop(DIFFER, f"join ≠ upstream: {_first(shown)}", f"upstream / join: {shown}")

    def _blocks(self) -> list[str]:
        return [f"{b.kind}: {b.reason}" for b in self.player.coordinator.blocked.values()]

    # -- the downstream table ---------------------------------------------------------------
    def downstream_table(self) -> Table | None:
        """SHOW CREATE TABLE, read again only when statements ran since."""
        if not self.unread:
            return self.shown
        self.unread = False
        self.shown = None
        try:
            with self.raw.cursor() as cur:
                cur.execute(f"SHOW CREATE TABLE `{TARGET}`")
                text = cur.fetchone()[1].decode("utf-8", errors="surrogateescape")
        except pymysql.MySQLError as exc:
            if exc.args and exc.args[0] == NO_SUCH_TABLE:
                return None
            raise
        self.shown = parse_table(text, upstream="mariadb")
        return self.shown

    def inspected(self) -> str | None:
        """How read_table reads the downstream table otherwise than SHOW CREATE TABLE, if it does."""
        try:
            shown = self.downstream_table()
            if shown is None:
                return None
            inspected = read_table(self.conn, self.db, TARGET)
        except Exception as exc:  # read_table's own failure is the finding
            return f"{type(exc).__name__}: {_first_line(exc)}"
        return None if inspected == shown else differences(inspected, shown)

    # -- starting again ---------------------------------------------------------------------
    def reset(self, creates: dict[str, str]) -> None:
        """A new coordinator whose shards are the server's tables, on an empty downstream
        database; `stopped` says why when it cannot start."""
        self._empty()
        self.player = self._player()
        shards = {
            self._shard(source, name): text for source in self.sources for name, text in creates.items()
        }
        try:
            decisions = self.player.start(shards)
            emitted: list[str] = []
            for decision in decisions:
                self._run(decision, emitted)
            self._check_downstream()
        except _Stop as stop:
            self.stopped = f"{stop.outcome}: {stop.reason}"
        except Exception as exc:  # the server's table is not one we read, or we crashed
            self.stopped = f"{type(exc).__name__}: {_first_line(exc)}"


class Downstream:
    """Both setups, for a whole run: `begin` each sequence, then `follow` the upstream
    side's verdict on each of its statements."""

    def __init__(self, downstream: Instance, run: DownstreamRun):
        self.run = run
        self.replay: Replay | None = None
        self.setups: list[_Setup] = []
        prefix = f"corpus_down_{uuid.uuid4().hex[:8]}"
        try:
            for index, name in enumerate(SETUPS, start=1):
                self.setups.append(_Setup(name, downstream, f"{prefix}_{index}"))
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Downstream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        for setup in self.setups:
            setup.close()

    def begin(self, upstream_db: str, names: Iterable[str], replay: Replay) -> None:
        started = time.monotonic()
        self.replay = replay
        for setup in self.setups:
            setup.begin(upstream_db, names, replay)
        self.run.seconds += time.monotonic() - started

    def follow(
        self, sequence: Any, step: Any, outcome: str, names: Sequence[str], before: dict[str, Table]
    ) -> None:
        """The upstream side's `outcome` for `step`: agree plays it, a statement the
        server took that we did not follow resets, one the server refused does nothing."""
        started = time.monotonic()
        try:
            self._follow(sequence, step, outcome, names, before)
        finally:
            self.run.seconds += time.monotonic() - started

    def _follow(
        self, sequence: Any, step: Any, outcome: str, names: Sequence[str], before: dict[str, Table]
    ) -> None:
        if outcome in ("refused-both", "accepted-by-us-only", "not-logged"):
            return
        if outcome != "agree" or not names:
            self._reset_all(sequence, step, f"upstream side: {outcome}")
            return
        shown = tuple(render_table(t, "mariadb") for t in before.values())
        for setup in self.setups:
            if setup.stopped is not None:
                self.run.not_judged += 1
                continue
            verdict_of, reason, detail, emitted, interim = setup.play(step.sql, names[0])
            self.run.verdicts.append(
                Verdict(setup.name, sequence, step, verdict_of, reason, detail, shown, emitted)
            )
            self.run.interim.update(interim)
            if emitted and verdict_of != CRASH:  # (information_schema is slow: a table that changed)
                self._inspect(setup, sequence, step)
            if verdict_of != AGREE:
                self._reset(setup, sequence, step, f"{setup.name}: {verdict_of}")

    def _inspect(self, setup: _Setup, sequence: Any, step: Any) -> None:
        problem = setup.inspected()
        if problem is not None:
            self.run.inspect.append(Note(setup.name, sequence, step, _first(problem), problem))

    def _reset_all(self, sequence: Any, step: Any, why: str) -> None:
        for setup in self.setups:
            if setup.stopped is None:
                self._reset(setup, sequence, step, why)

    def _reset(self, setup: _Setup, sequence: Any, step: Any, why: str) -> None:
        self.run.resets[why] += 1
        try:
            creates = self._server_creates()
        except pymysql.MySQLError as exc:  # (a MERGE table over tables not there)
            setup.stopped = f"the server cannot show its tables: {_first_line(exc)}"
        else:
            setup.reset(creates)
        if setup.stopped is not None:
            self.run.broken.append(Note(setup.name, sequence, step, setup.stopped))

    def _server_creates(self) -> dict[str, str]:
        shown = self.replay.upstream.execute(
            "SHOW FULL TABLES WHERE Table_type = 'BASE TABLE'", database=self.replay.database
        )
        return {row[0]: self.replay.server_table(row[0]) for row in shown}


def _first(differences_text: str) -> str:
    return differences_text.split("; ")[0]


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def _short_traceback() -> str:
    lines = traceback.format_exc().strip().splitlines()
    return "\n".join(lines[-7:])
