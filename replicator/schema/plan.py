"""`shardmerge plan SCENARIO.yaml`: replay a schema story offline and show what
would run downstream at every step.

    flavor: mariadb            # mysql | mariadb | tidb
    target: shop.orders        # name used in the emitted DDL
    extract: {source: _source, schema: _schema, table: _table}   # optional: DM's extract columns
    charset: utf8mb4 utf8mb4_general_ci   # optional: the shards' databases' default character set
                                          # [and collation], what a CREATE TABLE naming none takes
    shards:                    # initial CREATE TABLE of each shard; key = "source.schema.table"
      s1.db1.t1: CREATE TABLE t1 (id INT PRIMARY KEY, a INT NOT NULL)
    steps:
      - shard: s1.db1.t1
        ddl: ALTER TABLE t1 ADD COLUMN b INT
      - set_schema: s1.db1.t1
        create: CREATE TABLE t1 (id INT PRIMARY KEY, a INT NOT NULL, b INT)
      - skip: s1.db1.t1             # drop the blocked DDL of a shard (binlog skip)
      - disable_ddl_propagation: true
      - enable_ddl_propagation: true

Steps count from 0, as in `steps[N]` of an error: the output's step N is that one. A
step names a shard the scenario has (in `shards:`, or joined by an earlier step), or a
new one whose table it creates (its CREATE TABLE, a RENAME TABLE into its name, or
`set_schema`); any other step on an unknown shard is refused as a mistake.

A step may carry `expect:` (result, downstream, blocked), which `plan` ignores and
the scenario tests check; `expect_final:` at the top is the final CREATE TABLE.

Exit status: 0 when no shard is blocked after the last step; 4 when some are (the
report ends with each and why, as `join` exits 4 on a conflict); 2 for a scenario
`plan` cannot read or play (the message names the file and the step).

`plan --follow` takes a scenario one line at a time on stdin, for a program that picks
the next step from the last answer (the schema fuzzer): each line is a JSON object, and
each gets one JSON line back at once. A line with `target` (the file's fields but
`steps`) starts a scenario: `{"initial", "initial_downstream", "paused", "state"}`;
any other line is its next step, in the file's step forms: `{"step", "state"}`, the step
as `--json` shows it. A line it cannot read or play gets `{"error"}`, and ends that
scenario. It exits 0 at the end of its input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

import yaml

from lattice import (
    CreateTable,
    DDLSyntaxError,
    Flavor,
    SchemaError,
    Table,
    build_table,
    parse,
    render_table,
)
from replicator.errors import CliError, ExitCode
from replicator.schema.coordinator import Block, Coordinator, CoordinatorError, Decision
from replicator.schema.group import Result
from replicator.shard_id import ShardId
from replicator.source.schema_change import ChangeKind, SchemaChange
from replicator.source.tracker import Tracker
from replicator.usage import command


class ScenarioError(ValueError):
    """A scenario file that is not what `plan` reads; names the field."""


@dataclass
class Step:
    index: int  # from 0, as `steps[N]` in errors
    kind: str  # ddl | set_schema | skip | disable | enable
    shard: ShardId | None = None
    text: str = ""  # the DDL or the CREATE TABLE


@dataclass
class Scenario:
    flavor: Flavor
    target: str
    shards: dict[ShardId, str]  # shard -> its initial CREATE TABLE
    steps: list[Step] = field(default_factory=list)
    extract: dict[str, str] = field(default_factory=dict)
    schema_charset: tuple[str, str | None] | None = None  # the databases' (None: not known)
    where: str = "scenario"  # the file, for errors found while playing it


def load_scenario(path: Path | str, flavor: str | None = None) -> Scenario:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ScenarioError(f"cannot read {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}{_yaml_where(exc)}: not YAML: {_yaml_problem(exc)}") from None
    return parse_scenario(data, flavor, where=str(path))


def _yaml_where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's own text spans lines and quotes a "<unicode string>": one line of it."""
    problem = getattr(exc, "problem", None)
    context = getattr(exc, "context", None)
    return ": ".join(filter(None, [context, problem])) or " ".join(str(exc).split())


def parse_scenario(data: Any, flavor: str | None = None, where: str = "scenario") -> Scenario:
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: expected a mapping with flavor, target, shards and steps")
    fields = {"flavor", "target", "shards", "steps", "description", "expect_final", "extract", "charset"}
    unknown = set(data) - fields
    if unknown:
        raise ScenarioError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    try:
        chosen = Flavor.parse(flavor or data.get("flavor", "mariadb"))
    except ValueError as exc:
        raise ScenarioError(f"{where}: flavor: {exc}") from None
    target = data.get("target")
    if not isinstance(target, str) or not target:
        raise ScenarioError(f"{where}: target: expected the downstream table name, like shop.orders")
    shards = data.get("shards")
    if not isinstance(shards, dict) or not shards:
        raise ScenarioError(f"{where}: shards: expected a mapping of source.schema.table to CREATE TABLE")
    initial: dict[ShardId, str] = {}
    for text, create in shards.items():
        shard = _shard_id(text, f"{where}: shards")
        if not isinstance(create, str):
            raise ScenarioError(f"{where}: shards.{shard}: expected a CREATE TABLE statement")
        initial[shard] = create
    steps = [_step(i, raw, where) for i, raw in enumerate(data.get("steps") or [])]
    extract = data.get("extract") or {}
    if not isinstance(extract, dict) or not set(extract) <= {"source", "schema", "table"}:
        raise ScenarioError(f"{where}: extract: expected a mapping of source, schema, table to column names")
    charset = _charset(data.get("charset"), where)
    return Scenario(chosen, target, initial, steps, dict(extract), charset, where)


def _charset(value: Any, where: str) -> tuple[str, str | None] | None:
    if value is None:
        return None
    words = value.split() if isinstance(value, str) else []
    if len(words) not in (1, 2):
        raise ScenarioError(f"{where}: charset: expected a character set and, optionally, a collation")
    return words[0].lower(), (words[1].lower() if len(words) == 2 else None)


def _shard_id(value: Any, where: str) -> ShardId:
    try:
        return ShardId.parse(value)
    except ValueError as exc:
        raise ScenarioError(f"{where}: {exc}") from None


def _step(index: int, raw: Any, where: str) -> Step:
    here = f"{where}: steps[{index}]"
    if not isinstance(raw, dict):
        raise ScenarioError(f"{here}: expected a mapping")
    keys = set(raw) - {"expect"}
    if keys == {"shard", "ddl"}:
        if not isinstance(raw["ddl"], str):
            raise ScenarioError(f"{here}.ddl: expected a DDL statement")
        return Step(index, "ddl", _shard_id(raw["shard"], f"{here}.shard"), raw["ddl"])
    if keys == {"set_schema", "create"}:
        if not isinstance(raw["create"], str):
            raise ScenarioError(f"{here}.create: expected a CREATE TABLE statement")
        return Step(index, "set_schema", _shard_id(raw["set_schema"], f"{here}.set_schema"), raw["create"])
    if keys == {"skip"}:
        return Step(index, "skip", _shard_id(raw["skip"], f"{here}.skip"))
    if keys == {"disable_ddl_propagation"} and raw["disable_ddl_propagation"] is True:
        return Step(index, "disable")
    if keys == {"enable_ddl_propagation"} and raw["enable_ddl_propagation"] is True:
        return Step(index, "enable")
    raise ScenarioError(
        f"{here}: expected one of {{shard, ddl}}, {{set_schema, create}}, {{skip}}, "
        f"{{disable_ddl_propagation: true}}, {{enable_ddl_propagation: true}}; got {sorted(keys)}"
    )


class Player:
    """A scenario's shard group, played one step at a time through the daemon's own
    path: each shard's DDL goes to its source's tracker, which makes the typed schema
    changes the coordinator takes (`Tracker.apply`, `TrackedDDL.changes`,
    `Coordinator.apply`, as in the worker and the DDL executor). A table is a shard
    when a scenario names it as one; `start` adds the initial shards, `play` takes
    one step. The fuzzer drives it step by step; `replay` runs a whole scenario."""

    def __init__(
        self,
        target: str,
        flavor: Flavor | str = Flavor.MARIADB,
        shards: Iterable[ShardId] = (),
        *,
        coordinator: Coordinator | None = None,
        schema_charset: tuple[str, str | None] | None = None,
    ):
        """`coordinator`: go on with one restored from its store (its shards' current
        schemas are what the trackers start from). `schema_charset`: the databases'
        default character set and collation (None: unknown, as in most scenarios)."""
        self.coordinator = coordinator or Coordinator(target, flavor)
        self.schema_charset = schema_charset
        self.trackers: dict[str, Tracker] = {}
        self.known: dict[tuple[str, str], ShardId] = {}  # (source, tracker key) -> shard
        for shard in shards:
            self._know(shard)
        for shard, state in self.coordinator.shards.items():
            if state.current is not None:
                self._track(shard, state.current)

    def start(self, shards: dict[ShardId, str]) -> list[Decision]:
        decisions = []
        for shard, create in shards.items():
            table = _table(create, f"shards.{shard}", self.schema_charset)
            try:
                self._track(shard, table)
                decisions.append(self.coordinator.add_shard(shard, table))
            except CoordinatorError as exc:
                raise ScenarioError(f"shards.{shard}: {exc}") from None
        return decisions

    def play(self, step: Step) -> Decision:
        try:
            return self._play(step)
        except CoordinatorError as exc:
            raise ScenarioError(f"steps[{step.index}]: {exc}") from None

    def _play(self, step: Step) -> Decision:
        c = self.coordinator
        if step.kind == "ddl":
            return self.ddl(step.shard, step.text)
        if step.kind == "set_schema":
            table = _table(step.text, f"steps[{step.index}].create", self.schema_charset)
            self._track(step.shard, table)
            return c.set_schema(step.shard, table)
        if step.kind == "skip":
            return c.skip_ddl(step.shard)
        if step.kind == "disable":
            return c.disable_ddl_propagation()
        return c.enable_ddl_propagation()

    def ddl(self, shard: ShardId, sql: str) -> Decision:
        """A DDL run on `shard`'s source with the shard's schema as default database."""
        self._know(shard)
        tracked = self._tracker(shard.source).apply(sql, shard.schema)
        changes = tracked.changes(lambda k: self.known.get((shard.source, k)))
        if not changes:
            return self.coordinator.apply(SchemaChange(shard, ChangeKind.NONE, sql))
        decisions = [self.coordinator.apply(change) for _, change in changes]
        # one statement may change several shards (DROP TABLE t1, t2): one decision for it
        last = decisions[-1]
        return replace(
            last,
            steps=tuple(s for d in decisions for s in d.steps),
            unblocked=tuple(dict.fromkeys(s for d in decisions for s in d.unblocked)),
        )

    def has_table(self, shard: ShardId) -> bool:
        """Whether the shard's table exists upstream, as its source's tracker follows it."""
        tracker = self.trackers.get(shard.source)
        return tracker is not None and shard.table_key in tracker.tables

    def _track(self, shard: ShardId, table: Table) -> None:
        self._tracker(shard.source).tables[shard.table_key] = table
        self._know(shard)

    def _know(self, shard: ShardId) -> None:
        self.known[shard.source, shard.table_key] = shard

    def _tracker(self, source: str) -> Tracker:
        tracker = self.trackers.get(source)
        if tracker is None:
            tracker = self.trackers[source] = Tracker(
                {}, upstream=self.coordinator.upstream, schema_charset=lambda schema: self.schema_charset
            )
        return tracker


def _table(create: str, where: str, schema_charset: tuple[str, str | None] | None = None) -> Table:
    try:
        statement = parse(create)
        if not isinstance(statement, CreateTable) or statement.like is not None:
            raise ValueError(getattr(statement, "message", "expected CREATE TABLE with column definitions"))
        return build_table(statement, schema_charset=schema_charset)
    except (DDLSyntaxError, SchemaError, ValueError) as exc:
        raise ScenarioError(f"{where}: not a CREATE TABLE we can read: {exc}") from None


def replay(scenario: Scenario) -> Iterator[tuple[Step | None, Decision, Coordinator]]:
    """Yields each decision as it is made (None as step for the initial shards)."""
    player = _player(scenario, [*scenario.shards, *(s.shard for s in scenario.steps if s.shard)])
    for shard, create in scenario.shards.items():
        with _in_file(scenario.where):
            (decision,) = player.start({shard: create})
        yield None, decision, player.coordinator
    had = dict.fromkeys(scenario.shards)  # every shard the scenario has had so far, in order
    for step in scenario.steps:
        yield step, _played(player, step, had, scenario.where), player.coordinator


def _player(scenario: Scenario, named: Iterable[ShardId]) -> Player:
    coordinator = Coordinator(scenario.target, scenario.flavor, extract_columns=scenario.extract)
    charset = scenario.schema_charset
    return Player(scenario.target, scenario.flavor, named, coordinator=coordinator, schema_charset=charset)


def _played(player: Player, step: Step, had: dict[ShardId, None], where: str) -> Decision:
    """The step played, refused if it names a shard the scenario never had; `had` then
    holds every shard the scenario has had so far, in order."""
    with _in_file(where):
        decision = player.play(step)
        _check_shard(step, had, player)
    had.update(dict.fromkeys(player.coordinator.shards))
    return decision


def _joined(coordinator: Coordinator, flavor: Flavor, target: str) -> str | None:
    return render_table(coordinator.target, flavor, name=target) if coordinator.target else None


@contextmanager
def _in_file(where: str) -> Iterator[None]:
    """Errors of playing a scenario name its file: the player knows only the step."""
    try:
        yield
    except ScenarioError as exc:
        raise ScenarioError(f"{where}: {exc}") from None


def _check_shard(step: Step, had: dict[ShardId, None], player: Player) -> None:
    """A step on a shard the scenario never had is a mistake (a typo in the shard id, an
    ALTER of a table it never created), unless the step brings the shard's table into
    being: played as the daemon would, it is ignored or pauses a shard nobody named,
    and the story goes on, silently not the one written."""
    if step.shard is None or step.shard in had or player.has_table(step.shard):
        return
    raise ScenarioError(
        f"steps[{step.index}]: the scenario has no shard {step.shard} (its shards: "
        f"{', '.join(map(str, had))}); name one of them, or create the new shard's table first "
        "(CREATE TABLE, or RENAME TABLE into its name)"
    )


def plan_report(scenario: Scenario) -> dict[str, Any]:
    """The JSON document of `plan --json`."""
    flavor, target = scenario.flavor, scenario.target
    initial = None
    initial_downstream: list[str] = []  # the statements that make the downstream table
    paused: dict[str, str] = {}  # initial shards the join could not take, with why
    since: dict[ShardId, int | None] = {}  # blocked shard -> the step it is blocked since (None: the start)
    steps = []
    final = None
    for step, decision, coordinator in replay(scenario):
        joined = _joined(coordinator, flavor, target)
        since = {s: since.get(s, None if step is None else step.index) for s in coordinator.blocked}
        if step is None:
            initial = joined
            initial_downstream += decision.downstream
            if decision.result != Result.APPLIED:
                paused[str(decision.shard)] = decision.message
            continue
        steps.append(_step_entry(step, decision, joined))
        final = joined
    blocked = {str(s): _why_blocked(block, since[s]) for s, block in coordinator.blocked.items()}
    return {
        "initial": initial,
        "initial_downstream": initial_downstream,
        "paused": paused,
        "steps": steps,
        "final": final if steps else initial,
        "blocked": blocked,
        "state": _state(coordinator, flavor, target),
    }


def _step_entry(step: Step, decision: Decision, joined: str | None) -> dict[str, Any]:
    return {
        "index": step.index,
        "shard": str(step.shard) if step.shard is not None else None,
        "ddl": step.text if step.kind in ("ddl", "set_schema") else decision.ddl,
        "result": decision.result,
        "message": decision.message,
        "downstream": list(decision.downstream),
        "joined": joined,
        "version": str(decision.version),
        "blocked": list(map(str, decision.blocked)),
    }


class _Following:
    """One scenario of `plan --follow`, played a step at a time as `replay` plays a file
    (a shard is one from the step that names it: no later step is known yet)."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.player = _player(scenario, scenario.shards)
        self.had: dict[ShardId, None] = dict.fromkeys(scenario.shards)
        self.steps = 0

    def start(self) -> dict[str, Any]:
        downstream: list[str] = []
        paused: dict[str, str] = {}
        for shard, create in self.scenario.shards.items():
            (decision,) = self.player.start({shard: create})
            downstream += decision.downstream
            if decision.result != Result.APPLIED:
                paused[str(decision.shard)] = decision.message
        return {
            "initial": self._joined(),
            "initial_downstream": downstream,
            "paused": paused,
            "state": self._state(),
        }

    def play(self, raw: Any, where: str) -> dict[str, Any]:
        step = _step(self.steps, raw, where)
        decision = _played(self.player, step, self.had, where)
        self.steps += 1
        return {"step": _step_entry(step, decision, self._joined()), "state": self._state()}

    def _joined(self) -> str | None:
        return _joined(self.player.coordinator, self.scenario.flavor, self.scenario.target)

    def _state(self) -> dict[str, Any]:
        return _state(self.player.coordinator, self.scenario.flavor, self.scenario.target)


def follow(lines: IO[str], out: IO[str], flavor: str | None = None) -> int:
    """`plan --follow` (see the module docstring)."""
    following: _Following | None = None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"stdin line {number}"
        try:
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ScenarioError(f"{where}: not JSON: {exc.msg}") from None
            if isinstance(data, dict) and "target" in data:
                following = None
                if "steps" in data:
                    raise ScenarioError(f"{where}: a scenario's steps come one per line after it, not in it")
                following = _Following(parse_scenario({**data, "steps": []}, flavor, where=where))
                reply = following.start()
            elif following is None:
                raise ScenarioError(f"{where}: a step with no scenario to play it in (a target line first)")
            else:
                reply = following.play(data, where)
        except (ScenarioError, CoordinatorError) as exc:
            following = None
            reply = {"error": str(exc)}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return ExitCode.OK


def _state(coordinator: Coordinator, flavor: Flavor, target: str) -> dict[str, Any]:
    """What the coordinator holds after the last step, as the daemon's status shows it:
    the downstream table as the DDL emitted left it (`propagated`: behind `final` while
    propagation is off), each shard's table as its tracker follows it and as it was
    accepted, why it is paused, the pending renames and the columns each shard's rows
    set NULL while they are pending (docs/design.md "While a rename is pending")."""

    def text(table: Table | None, name: str) -> str | None:
        return render_table(table, flavor, name=name) if table is not None else None

    def pause(block: Block | None) -> dict[str, Any] | None:
        if block is None:
            return None
        return {
            "kind": str(block.kind),
            "reason": block.reason,
            "dropped": list(block.dropped),
            "renames": [list(pair) for pair in block.renames],
        }

    return {
        "version": str(coordinator.version),
        "propagated": text(coordinator.propagated, target),
        "shards": {
            str(shard): {
                "table": text(st.current, shard.table),
                "accepted": text(st.accepted, shard.table),
                "paused": pause(st.block),
            }
            for shard, st in coordinator.shards.items()
        },
        "renames": [
            {"old": r.old, "new": r.new, "shards": sorted(map(str, r.shards)), "started": r.started}
            for r in coordinator.renames
        ],
        "cleared": {str(s): list(names) for s, names in coordinator.group.cleared().items() if names},
    }


def _why_blocked(block: Block, since: int | None) -> str:
    when = "from the start" if since is None else f"since step {since}"
    return f"{block.kind} {when}: {block.reason}"


def render_report(report: dict[str, Any]) -> str:
    lines = ["initial downstream table:", _indent(report["initial"] or "(none)"), ""]
    lines += [f"paused from the start: {why}" for why in report["paused"].values()]
    lines += [""] if report["paused"] else []
    for s in report["steps"]:
        who = f"{s['shard']}: " if s["shard"] else ""
        lines.append(f"#{s['index']} {who}{' '.join(s['ddl'].split())}")
        lines.append(
            f"   -> {s['result']} (version {s['version']})"
            + (f": {s['message']}" if s["result"] not in ("applied",) else "")
        )
        lines += [f"      {stmt};" for stmt in s["downstream"]]
        if s["blocked"]:
            lines.append(f"   blocked: {', '.join(s['blocked'])}")
    lines += ["", "final downstream table:", _indent(report["final"] or "(none)")]
    # last, as the reason of the exit status 4
    lines += [f"blocked after the last step: {shard}, {why}" for shard, why in report["blocked"].items()]
    return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = command(
        subparsers,
        "plan",
        help="replay a schema scenario offline and show the downstream DDL",
        example="shardmerge plan tests/scenarios/rename_column.yaml --json",
        description=__doc__,
    )
    parser.add_argument("scenario", nargs="?", help="scenario YAML file (none with --follow)")
    parser.add_argument("--flavor", choices=[f.value for f in Flavor], help="override the scenario's flavor")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument(
        "--follow", action="store_true", help="read the scenario a line at a time on stdin, answering each"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.follow:
        if args.scenario is not None:
            raise CliError("--follow reads the scenario on stdin: name no file")
        return follow(sys.stdin, sys.stdout, args.flavor)
    if args.scenario is None:
        raise CliError("name a scenario file (or give --follow and the scenario on stdin)")
    try:
        report = plan_report(load_scenario(args.scenario, args.flavor))
    except ScenarioError as exc:
        raise CliError(str(exc)) from exc
    print(json.dumps(report, indent=2) if args.json else render_report(report))
    return ExitCode.WAITING if report["blocked"] else ExitCode.OK
