"""The operator of the live stories (issue 76): a story runs some of its DDLs as the daemon
cannot follow them (`unfollowed`: the generator's ALTER under a `SET STATEMENT` variable
that may change the table), and the operator takes the shard back with the way out the
daemon prints, chosen at random: `set-schema` (F: the shard's SHOW CREATE TABLE right after
the statement, as docs/operations/schema-changes.md says), `binlog replace` (the ALTER without the variable),
`binlog skip` (the shard's rows since the statement read with the table it keeps: their ids
are left out of the compare), or `resume-shard` where one is printed. Now and then it first runs what does not
apply to a shard held at a DDL (`handle-error`, and `resume-shard` where not printed), which
must refuse, naming the way out, and change nothing.

Every command runs as printed, through `shardctl` against the live daemon (SIGKILLed at
random meanwhile: a command the dead daemon did not take is run again once the shard still
shows paused). Until the shard runs again its story runs no other DDL on it: the operator's
team waits for the fix, as an operator would ask.

What must hold, besides the story's own checks: every printed way out run as printed is
taken (exit 0), the refusals refuse, and every shard held so is running when the story's
DDLs are over (`Operator.problems`)."""

from __future__ import annotations

import random
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pymysql

from replicator.cli.status import saved_status
from tests.replication import ReplicationTask

Shard = tuple[str, str, str]
REPO = Path(__file__).resolve().parents[1]
# variables no DDL of ours needs (not among `lattice.ddl`'s harmless ones): the daemon cannot
# tell that they leave the table as it would be without them, and pauses the shard
VARIABLES = ("sort_buffer_size=1048576", "tmp_table_size=16777216", "div_precision_increment=6")
UNFOLLOWED = re.compile(r"^SET STATEMENT \S+ FOR (?P<ddl>.*)$", re.S)
_COMMAND = re.compile(r"`(shardctl [^`]*)`")


def unfollowed(ddl: str, rng: random.Random) -> str:
    return f"SET STATEMENT {rng.choice(VARIABLES)} FOR {ddl}"


def inner(ddl: str) -> str | None:
    """The DDL an unfollowed one wraps, or None for any other DDL."""
    match = UNFOLLOWED.match(ddl.strip())
    return match["ddl"] if match else None


@dataclass(frozen=True)
class Held:
    """A shard an unfollowed DDL paused, till the operator's way out has it running."""

    story_shard: str
    shard: Shard
    ddl: str  # the DDL without the variable (what binlog replace takes)
    create: str  # its SHOW CREATE TABLE right after the statement (set-schema's F)
    tx: int  # its writer's transactions committed before the statement
    acted: float | None = None  # when a way out was last taken (monotonic)
    seen: float | None = None  # when it was first seen paused
    skipped: bool = False  # a skip was taken (or its answer lost): its rows that do not fit its table pause it again
    skip_unanswered_at: str | None = None  # the pause's position a skip's answer was lost at (a kill)
    changed: frozenset[str] = frozenset()  # the columns (keys) whose type the statement changed
    keys: tuple[tuple[str, ...], ...] = ()  # the UNIQUE keys (their columns) it dropped
    prefer: str | None = None  # its way out where printed (else the operator's `prefer`)


@dataclass
class Operator(threading.Thread):
    """Takes the held shards (`held`, story shard -> Held, shared with the story under
    `lock`) back as above. `writer(story_shard)`: the shard's writer (its `guard` held
    through a skip, so the rows it discards are those of the transactions before it)."""

    task: ReplicationTask
    held: dict[str, Held]
    lock: threading.Lock
    writer: Callable[[str], object]
    rng: random.Random
    prefer: str | None = None  # this way out where it is printed (`set-schema`, `binlog skip`, ...)
    # shard name (`str(ShardId)`) -> its story shard, or None: the shards whose refused rows
    # (two shards' rows in one UNIQUE key, without extract columns) it takes back too
    story_of: Callable[[str], str | None] = lambda _name: None
    stop: threading.Event = field(default_factory=threading.Event)
    discarded: dict[str, set[int]] = field(default_factory=dict)  # story shard -> ids left out
    taken: list[str] = field(default_factory=list)  # each way out taken, as `verb shard`
    # story shard -> the columns whose type a DDL its last way out skipped changed: the daemon
    # keeps its table from before that DDL (its rows read with it where the binlog reads them
    # alike: else it pauses again), whatever it runs later
    kept: dict[str, frozenset[str]] = field(default_factory=dict)
    kept_keys: dict[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)  # ... its UNIQUE keys dropped
    problems: list[str] = field(default_factory=list)
    # (name, block, pause) -> the shard to hold again, or None: a shard it let go that pauses
    # again, blocked at rows its tracked schema cannot read (a way out or a decision resumed it
    # past DDLs of its own), is held again and taken back by the way out printed there
    retake: Callable[[str, dict, dict | None], Held | None] | None = None
    # (story shard, position) -> its SHOW CREATE TABLE as it was there (set-schema's F where
    # the way out asks for that: DDLs stacked on the pause)
    table_at: Callable[[str, str], str] | None = None
    retaken: list[str] = field(default_factory=list)  # `story shard at position`, each shard held again
    _calm: dict[str, int] = field(default_factory=dict)
    _rows: dict[str, tuple[int, float]] = field(default_factory=dict)  # shard -> (actions, when last)

    def __post_init__(self) -> None:
        threading.Thread.__init__(self, name="operator", daemon=True)

    def __hash__(self) -> int:  # (a Thread is hashable by identity; the dataclass would not be)
        return id(self)

    def run(self) -> None:
        while not self.stop.wait(1.0):
            try:
                status = saved_status(self.task.config)
            except pymysql.err.MySQLError:
                continue
            with self.lock:
                held = list(self.held.values())
            for h in held:
                try:
                    self._tend(h, status)
                except Exception as exc:  # reported with the story
                    self.problems.append(f"the operator failed on {h.story_shard}: {type(exc).__name__}: {exc}")
                    self._release(h)
            self._refused_rows(status, {str(self.task.shard_id(h.shard)) for h in held})
            if self.retake is not None:
                self._retake(status, {h.story_shard for h in held})

    def wait_done(self, timeout: float) -> None:
        """Until no shard is held (the story's DDLs are over), or the time is up: each one
        still held then is a problem."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if not self.held:
                    return
            time.sleep(0.5)
        with self.lock:
            for h in self.held.values():
                self.problems.append(f"{h.story_shard} still paused {timeout:.0f}s after its DDLs were over "
                                     f"(ways out taken: {', '.join(self.taken) or 'none'})")

    def wait_retaken(self, timeout: float) -> None:
        """Until a shard it let go is held again (`retake`), or the time is up."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.retaken:
            time.sleep(0.5)

    def _retake(self, status: dict, held: set[str]) -> None:
        for group in status["groups"].values():
            for name, block in group["blocked"].items():
                story_shard = self.story_of(name)
                pause = status["paused"].get(name)
                at = f"{story_shard} at {(pause or block).get('position')}"
                if (block.get("kind") != "unsupported" or story_shard is None or story_shard in held
                        or at in self.retaken):
                    continue
                h = self.retake(name, block, pause)
                if h is not None:
                    with self.lock:
                        self.held[story_shard] = h
                    self.retaken.append(at)

    # -- one held shard ------------------------------------------------------------------------
    def _tend(self, h: Held, status: dict) -> None:
        name = str(self.task.shard_id(h.shard))
        pause = status["paused"].get(name)
        block = next((g["blocked"][name] for g in status["groups"].values() if name in g["blocked"]), None)
        now = time.monotonic()
        if pause is None and block is None:
            # running: once a way out was taken and it stays so (a kill may bring back a pause)
            if h.acted is not None and now - h.acted > 3:
                self._calm[h.story_shard] = self._calm.get(h.story_shard, 0) + 1
                if self._calm[h.story_shard] >= 2:
                    self._release(h)
            return
        self._calm.pop(h.story_shard, None)
        if block is not None and block.get("kind") == "conflict":
            # its table joins not with the others': a shard held as any conflict (the story's
            # own checks take it from here)
            self.taken.append(f"left in conflict {h.story_shard}")
            self._release(h)
            return
        if h.seen is None:
            self._update(replace(h, seen=now))
            return
        if now - h.seen < self.rng.uniform(0.5, 3.0) or (h.acted is not None and now - h.acted < 5):
            return
        reason = (block or {}).get("reason") or (pause or {}).get("reason") or ""
        printed = {c.split()[1]: c for c in _COMMAND.findall(reason) if len(c.split()) > 1}
        if not printed:
            self.problems.append(f"{name} paused with no way out printed: {reason[:300]}")
            self._release(h)
            return
        # (only where it is held at a DDL: paused by a row refused after a skip, `handle-error`
        # is its way out, and taken as it should be; live stories seed 610164)
        if block is not None and self.rng.random() < 0.25:
            self._refused(h, name, printed, block is not None)
        verbs = [v for v in ("set-schema", "resume-shard") if v in printed]
        # (binlog replace takes another DDL for the unfollowed statement: a pause of rows that
        # cannot be read has none)
        verbs += [f"binlog {k}" for k in re.findall(r"`shardctl binlog (skip|replace) ", reason)
                  if k == "skip" or _same(block)]
        if not verbs and "shardctl handle-error " in reason and h.story_shard in self.kept:
            # a row the table kept by a skip does not hold (a longer text): refused downstream,
            # as docs/operations/schema-changes.md says; the refused rows' way out takes it from here
            self.taken.append(f"row refused after the skip {h.story_shard}")
            self._release(h)
            return
        if not verbs and block is None and _collided(reason, self.task.extract):
            # paused at a row of its before the DDL it is held for, refused by another shard's
            # row in a UNIQUE key: the refused rows' way out takes that pause (`_refused_rows`),
            # the DDL's comes after it (L74)
            return
        if not verbs:
            self.problems.append(f"{name} paused with no way out the operator knows: {reason[:300]}")
            self._release(h)
            return
        position = (pause or {}).get("position")
        if h.skipped and len(verbs) > 1 and not (position and position == h.skip_unanswered_at):
            # (skipping again would discard more and pause again; where the skip's answer was
            # lost and the shard stands at the same pause, it was not taken: the operator runs
            # it again)
            verbs = [v for v in verbs if v != "binlog skip"]
        prefer = h.prefer or self.prefer
        verb = prefer if prefer in verbs else self.rng.choice(verbs)
        self._take(h, name, verb, reason, position, block)

    def _take(self, h: Held, name: str, verb: str, reason: str, position: str | None, block: dict | None) -> None:
        command = next(c for c in _COMMAND.findall(reason) if c.startswith(f"shardctl {verb} ")).split()[1:]
        flags = command[len(verb.split()):]
        if verb == "set-schema":
            path = self.task.workdir / f"create-{h.story_shard}.sql"
            # F: its table right after the statement, where the pause is the statement's; a
            # later pause (rows its tracked table cannot read) asks for the table as it is now
            create = h.create
            stands = (block or {}).get("ddl") or ""
            if "as it was right here" in reason and (inner(stands) or stands) != h.ddl and self.table_at is not None:
                # (DDLs stacked on its pause, which stands at a statement before the one it
                # holds the shard for: its table right after that one, L72)
                create = self.table_at(h.story_shard, block.get("position") or position)
            elif "unsupported DDL" not in reason and "as it was right here" not in reason:
                create = self.task.sql(h.shard, "SHOW CREATE TABLE {t}")[0][1]
            path.write_text(create)
            args = [*command[:-1], str(path)]  # (F)
        elif verb == "binlog replace":
            cut = flags.index("--sql")
            args = [*verb.split(), *flags[:cut], "--sql", h.ddl]
        else:
            args = command
        if verb == "binlog skip":
            self._skip(h, name, args, position)
            return
        result = self.shardctl(*args)
        self._answered(h, verb, result)

    def _skip(self, h: Held, name: str, args: list[str], position: str | None) -> None:
        """Its writer waits through the skip (till the shard resumes, or is held by the conflict
        under it again): the rows it touched since the statement are left out of the compare."""
        writer = self.writer(h.story_shard)
        with writer.guard:
            result = self.shardctl(*args)
            if result.returncode == 0:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:  # (till it resumed: its discard's end is read then)
                    try:
                        status = saved_status(self.task.config)
                    except pymysql.err.MySQLError:
                        break
                    pause = status["paused"].get(name)
                    if pause is None or pause["position"] != position:
                        break
                    time.sleep(0.3)
                time.sleep(0.5)
            # (its rows since the statement are read with the table it keeps, columns it lacks
            # left out, and a row that does not fit pauses it again: left out of the compare.
            # Those before it, of a pause by a conflict it was stacked on, wait with the
            # conflict and go downstream as written (docs/operations/schema-changes.md): compared)
            since = h.tx
            touched = set().union(*writer.history[since:]) if len(writer.history) > since else set()
            self.discarded.setdefault(h.story_shard, set()).update(touched)
        h = replace(h, skipped=True, skip_unanswered_at=None if result.returncode == 0 else position)
        self._update(h)
        self._answered(h, "binlog skip", result)

    def _answered(self, h: Held, verb: str, result: subprocess.CompletedProcess) -> None:
        self._update(replace(h, acted=time.monotonic()))
        if result.returncode == 0:
            self.taken.append(f"{verb} {h.story_shard}")
            if verb == "binlog skip":
                self._kept(h)
            elif verb != "resume-shard":
                self.kept.pop(h.story_shard, None)
                self.kept_keys.pop(h.story_shard, None)
            return
        text = (result.stdout + result.stderr).strip()
        lost = _daemon_gone(text)  # (killed meanwhile: run again while it shows paused)
        if lost or "not paused" in text:  # (or a kill lost its answer)
            self.taken.append(f"unanswered {verb} {h.story_shard}")
            if verb == "binlog skip":  # (taken or not: a set-schema after it takes the kept table back)
                self._kept(h)
            return
        self.problems.append(f"the printed way out `shardctl {verb}` for {h.story_shard} failed "
                             f"(exit {result.returncode}): {text[-500:]}")

    def _kept(self, h: Held) -> None:
        self.kept[h.story_shard] = self.kept.get(h.story_shard, frozenset()) | h.changed
        self.kept_keys[h.story_shard] = (*self.kept_keys.get(h.story_shard, ()), *h.keys)

    def _refused(self, h: Held, name: str, printed: dict[str, str], blocked: bool) -> None:
        """What does not apply to a shard held at a DDL: it must refuse, naming a way out."""
        options = [["handle-error", "skip"]]
        if "resume-shard" not in printed:
            options.append(["resume-shard"])
        verb = self.rng.choice(options)
        source, table = self.task.source_of(h.shard[0]), f"{h.shard[1]}.{h.shard[2]}"
        result = self.shardctl(*verb, "--source", source, "--table", table)
        text = (result.stdout + result.stderr).strip()
        if _daemon_gone(text):
            return
        if result.returncode == 0:
            self.problems.append(f"`shardctl {' '.join(verb)}` of {name}, held at a DDL, was taken: {text[-300:]}")
        elif not any(w in text for w in ("set-schema", "binlog", "not paused")):
            self.problems.append(f"`shardctl {' '.join(verb)}` of {name} refused without naming a way out: "
                                 f"{text[-300:]}")
        else:
            self.taken.append(f"{' '.join(verb)} refused {h.story_shard}")

    # -- a shard paused by a row the downstream refused -------------------------------------------
    def _refused_rows(self, status: dict, held: set[str]) -> None:
        """DM's handle-error on a shard paused by a row the downstream refused (rows of two
        shards in one UNIQUE key, without extract columns: documented, no bug), at most six
        times a shard: `skip` (the row into the dead-letter table, left out downstream: the
        story leaves its id out of the compare), `retry` or `resume-shard` (read again:
        refused again while the key still collides). Each must be taken (exit 0)."""
        blocked = {name for g in status["groups"].values() for name in g["blocked"]}
        for name, pause in status["paused"].items():
            story_shard = self.story_of(name)
            kept = story_shard in self.kept  # (a row the table a skip kept does not hold)
            collided = _collided(pause.get("reason", ""), self.task.extract)
            # (a held shard too, paused at such a row before the DDL it is held for: L74)
            if (name in held and not collided) or name in blocked or not ("Duplicate entry" in pause.get("reason", "") or kept):
                continue
            done, when = self._rows.get(name, (0, 0.0))
            if story_shard is None or done >= 6 or time.monotonic() - when < 3 or self.rng.random() < 0.5:
                continue
            self._rows[name] = (done + 1, time.monotonic())
            printed = next((c for c in _COMMAND.findall(pause["reason"]) if c.startswith("shardctl handle-error ")),
                           None)
            if printed is None and kept:
                continue  # (its rows that the kept table does not hold, not replayed: left paused)
            if printed is None:
                self.problems.append(f"{name} paused by a refused row with no handle-error printed: "
                                     f"{pause['reason'][:300]}")
                continue
            action = self.rng.choice(("skip", "skip", "retry", "resume-shard"))
            args = printed.split()[1:]
            args = ["resume-shard", *args[1:-1]] if action == "resume-shard" else [*args[:-1], action]
            result = self.shardctl(*args)
            text = (result.stdout + result.stderr).strip()
            if result.returncode == 0:
                self.taken.append(f"{'resume-shard' if action == 'resume-shard' else 'handle-error ' + action} "
                                  f"{story_shard}")
            elif not _daemon_gone(text) and "not paused" not in text and "no refused row" not in text:
                self.problems.append(f"`shardctl {' '.join(args)}` for {name}'s refused row failed "
                                     f"(exit {result.returncode}): {text[-400:]}")

    # -- plumbing ----------------------------------------------------------------------------
    def shardctl(self, *args: str) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(
                [sys.executable, "-m", "replicator.cli.shardctl", "--addr", self.task.addr, *args],
                capture_output=True, text=True, cwd=REPO, timeout=60,
            )
        except subprocess.TimeoutExpired as exc:
            return subprocess.CompletedProcess(exc.cmd, 124, "", "timed out (daemon gone)")

    def _update(self, h: Held) -> None:
        with self.lock:
            if h.story_shard in self.held:
                self.held[h.story_shard] = h

    def _release(self, h: Held) -> None:
        with self.lock:
            self.held.pop(h.story_shard, None)
        self._calm.pop(h.story_shard, None)


def _same(block: dict | None) -> bool:
    """The block stands at the unfollowed statement itself (binlog replace takes another DDL
    for that statement; a pause of rows that cannot be read has none to replace)."""
    return block is not None and inner(block.get("ddl") or "") is not None


def _collided(reason: str, extract: bool) -> bool:
    """A pause by a row the downstream refused for another shard's in a UNIQUE key: without
    extract columns keys must be unique across shards (docs/operations/schema-changes.md)."""
    return not extract and "Duplicate entry" in reason and "shardctl handle-error " in reason


def _daemon_gone(text: str) -> bool:
    return any(w in text for w in ("no shardmerge daemon answers", "timed out", "daemon gone", "HTTP 503"))
