"""One story on the servers: generated from a seed (each proposal kept only if the
upstream MariaDB takes it), or replayed from a scenario (steps MariaDB refuses now are
left out, which is what lets the shrinker drop steps freely). Each story has its own
database on both servers, dropped at the end."""

from __future__ import annotations

import itertools
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from pymysql.constants import CLIENT

from lattice.sqltext import quote_identifier
from replicator.sandbox import Instance
from tests.fuzz.generator import StoryGenerator, table_of
from tests.fuzz.oracle import Inconclusive, Oracle, Violated, Violation
from tests.fuzz.rows import run
from tests.fuzz.story import Story, new_story
from tests.tables import show_create

PROPOSALS_PER_STEP = 8
_databases = itertools.count()


@dataclass(frozen=True)
class Servers:
    up: Instance
    down: Instance


@dataclass
class StoryResult:
    seed: int | None
    story: Story  # as run: the start and the steps MariaDB took
    steps: int = 0
    rows: int = 0
    violations: list[Violation] = field(default_factory=list)
    inconclusive: str | None = None
    error: str | None = None  # the fuzzer's own failure (a bug here, or a server gone)
    seconds: float = 0.0
    moves: dict[str, int] = field(default_factory=dict)


def run_story(
    servers: Servers,
    *,
    seed: int | None = None,
    story: Story | None = None,
    log: Callable[[str], None] | None = None,
) -> StoryResult:
    """Generate the story of `seed`, or replay `story`, checking every property."""
    if (seed is None) == (story is None):
        raise ValueError("give a seed or a story")
    started = time.monotonic()
    db = f"fz_{seed if seed is not None else 'r'}_{os.getpid()}_{next(_databases)}"
    # over the servers' sockets: a story makes thousands of round trips, a third cheaper so
    # and several statements in one (`rows.run_all`)
    up, down = (
        inst.connect(unix_socket=str(inst.socket_path), client_flag=CLIENT.MULTI_STATEMENTS)
        for inst in (servers.up, servers.down)
    )
    result = StoryResult(seed, new_story({}, []))
    try:
        for conn in (up, down):
            run(conn, f"CREATE DATABASE {quote_identifier(db)}")
        run(up, f"USE {quote_identifier(db)}")
        if story is not None:
            _replay(up, down, db, story, result, log)
        else:
            _generate(up, down, db, seed, result, log)
    except Violated:
        pass  # the oracle has it in its list
    except Inconclusive as exc:
        result.inconclusive = str(exc)
    except Exception as exc:  # the run goes on; the report counts and shows these
        result.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
    finally:
        for inst, conn in ((servers.up, up), (servers.down, down)):
            _drop(inst, conn, db, result)
        result.seconds = time.monotonic() - started
    return result


def _drop(inst: Instance, conn, db: str, result: StoryResult) -> None:
    """Drop the story's database, on a new connection if the story's one is gone; a
    failure here is reported with the story, never raised past it."""
    for attempt in range(2):
        try:
            if attempt:
                conn = inst.connect()
            run(conn, f"DROP DATABASE IF EXISTS {quote_identifier(db)}")
            break
        except Exception as exc:
            if attempt:
                result.error = (result.error or "") + f"\ncould not drop {db}: {type(exc).__name__}: {exc}"
        finally:
            conn.close()


def _replay(up, down, db: str, story: Story, result: StoryResult, log) -> None:
    oracle = Oracle(up, down, db, log)
    result.story = new_story({}, [], story.get("description"))
    try:
        result.story["shards"] = oracle.start(story["shards"])
    finally:
        _count(oracle, result)
    if not result.story["shards"]:
        raise Inconclusive("MariaDB took none of the shards' tables")
    for raw in story.get("steps") or []:
        raw = {k: v for k, v in raw.items() if k != "expect"}
        if not oracle.try_upstream(raw):
            continue
        result.story["steps"].append(raw)
        result.steps += 1
        try:
            oracle.step(raw)
        finally:
            _count(oracle, result)


def _generate(up, down, db: str, seed: int, result: StoryResult, log) -> None:
    generator = StoryGenerator(seed)
    start = generator.start()
    oracle = Oracle(up, down, db, log)
    try:
        result.story["shards"] = oracle.start(start)
    finally:
        _count(oracle, result)
    if not result.story["shards"]:
        raise Inconclusive("MariaDB took none of the shards' tables")
    while not generator.done(tables := _as_written(up, db, oracle.tables)):
        for attempt in range(PROPOSALS_PER_STEP):
            proposal = generator.propose(tables, attempt)
            if proposal is None or not oracle.try_upstream(proposal.step):
                continue
            generator.accepted(proposal)
            result.moves[proposal.kind] = result.moves.get(proposal.kind, 0) + 1
            result.story["steps"].append(proposal.step)
            result.steps += 1
            try:
                oracle.step(proposal.step)
            finally:
                _count(oracle, result)
            break
        else:
            generator.skipped()


def _as_written(up, db: str, shards: dict) -> dict:
    """The shards' tables in the model the generator writes its DDL with (the product's
    renderer), read back from SHOW CREATE TABLE: the oracle's own are the server's
    descriptions, which it writes no DDL from."""
    return {shard: show_create(up, db, table_of(shard)) for shard in shards}


def _count(oracle: Oracle, result: StoryResult) -> None:
    result.rows = oracle.rows_checked
    result.violations = list(oracle.violations)
