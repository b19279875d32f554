"""The shape of `replicator/`: every module sits in the folder of its stage (state,
source, schema, apply, spark, the admin API, the daemon, and the commands on top) or is one of
the few the stages share; its modules
import each other without a cycle (imports inside functions count too); and one
module opens connections and tells servers apart."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.unit.test_lattice_structure import ROOT, _imports, _module_name, _parse, find_cycle

REPLICATOR = ROOT / "replicator"
# the stages, lowest first: a module imports from its own stage and those below it only
STAGES = ("state", "source", "schema", "apply", "spark", "api", "daemon", "cli")

# Modules outside the stage folders, each with its reason.
SHARED = {
    "replicator": "the package",
    "replicator.config": "the task config, read by every stage",
    "replicator.config_keys": "the task config's keys, which replicator.config checks fields against",
    "replicator.shard_id": "the shard's name, in every stage",
    "replicator.shard_flow": "each shard's live state in the daemon, across the stages",
    "replicator.servers": "the one way to connect to a server",
    "replicator.lazy_rsa": "pymysql imported without what only an RSA login needs, for every process's start",
    "replicator.compiled": "which modules of the row path run compiled, found as `import replicator` runs",
    "replicator.compiled_build": "`make compiled`: the build of those modules, beside the list of them",
    "replicator.errors": "errors and exit codes the command line reports",
    "replicator.usage": "the help every command ends with: an example and the exit codes",
    "replicator.faults": "crash points for the recovery tests, in every stage",
    "replicator.logs": "log lines of every stage",
    "replicator.heap": "the daemon's long-lived state out of the collector's way",
    "replicator.identity_memo": "answers kept by their arguments' identity, on hot paths of the source, schema and apply stages",
    "replicator.sandbox": "local MariaDB servers for the demo and the tests",
    "replicator.metrics": "the counters every stage keeps, below them all",
    "replicator.row_condition": "a row filter's condition, read with the config and evaluated by the worker and the copies",
    "replicator.row_values": "MariaDB's values, conversions and comparisons, as row_condition evaluates them",
    "replicator.compare": "a shard's rows against its rows downstream (the origin filter), below the stages",
    "replicator.transient": "which server errors a retry cures and how long to wait, for every stage's retries",
    "replicator.server_rules": "what differs by the kind of server read or written, as flags every stage asks",
}


def modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(REPLICATOR.rglob("*.py"))}


def replicator_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {m: set() for m in known}
    for name, path in known.items():
        for module, names in _imports(_parse(path)):
            if module.split(".")[0] != "replicator":
                continue
            # `from replicator.source import worker` names a submodule
            targets = {f"{module}.{n}" if f"{module}.{n}" in known else module for n in names} or {module}
            graph[name] |= targets - {name}
    return graph


def shared(module: str) -> bool:
    """A module SHARED names, or one of a package SHARED names (its parts share its reason)."""
    parts = module.split(".")
    return any(".".join(parts[:n]) in SHARED for n in range(2, len(parts) + 1)) or module in SHARED


def test_every_module_is_in_its_stage_folder_or_shared_for_a_reason():
    stray = [m for m in modules() if not shared(m) and m.split(".")[1] not in STAGES]
    assert not stray, "put these in a stage folder, or say in SHARED why the stages share them: " + ", ".join(stray)
    assert all(m in modules() for m in SHARED), "SHARED names a module that is gone"


def test_the_stages_import_downwards_only():
    """Issue 44: a stage never imports from a stage above it (state, source, schema,
    apply, spark, api, daemon, cli), and the modules below the stages (metrics, the comparison)
    import none of them. Every import counts, a package's too (`from replicator.daemon import
    Daemon` is an import of the daemon stage: issue 72 found the command line's run that way
    in the control stage, below the daemon it starts)."""
    level = {stage: n for n, stage in enumerate(STAGES)}
    upward = []
    for name, targets in replicator_graph().items():
        parts = name.split(".")
        for target in targets:
            to = target.split(".")
            if len(to) < 2 or to[1] not in level:
                continue
            below = name in ("replicator.metrics", "replicator.compare")
            if below or (len(parts) > 2 and parts[1] in level and level[to[1]] > level[parts[1]]):
                upward.append(f"{name} -> {target}")
    assert not upward, "imports from a higher stage: " + ", ".join(sorted(upward))


def test_the_replicator_modules_import_each_other_without_a_cycle():
    graph = replicator_graph()
    assert "replicator.api.operations" in graph["replicator.daemon.main_loop"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle in replicator/: " + " -> ".join(cycle or ())


def _calls(tree: ast.AST, dotted: str) -> int:
    owner, attr = dotted.split(".")
    return sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == attr
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == owner
    )


def _makes_pymysql_connection(tree: ast.AST) -> bool:
    """pymysql's Connection class called or subclassed (not only named in a hint)."""
    names = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "pymysql.connections"
        for alias in node.names
        if alias.name == "Connection"
    }
    return any(
        (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names)
        or (isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id in names for b in node.bases))
        for node in ast.walk(tree)
    )


def test_only_servers_opens_connections():
    """Every connection is made by replicator.servers (the binlog library's too: the
    worker hands it the servers' connection class)."""
    opening = {
        m
        for m, p in modules().items()
        if _calls(_parse(p), "pymysql.connect") or _makes_pymysql_connection(_parse(p))
    }
    assert opening == {"replicator.servers"}


def _tells_flavor(tree: ast.AST) -> bool:
    """`"mariadb" in version`: a server's kind told from its version text."""
    return any(
        isinstance(node, ast.Compare)
        and isinstance(node.ops[0], ast.In)
        and isinstance(node.left, ast.Constant)
        and str(node.left.value).lower() in ("mariadb", "tidb")
        for node in ast.walk(tree)
    )


def test_only_servers_tells_the_flavor_from_a_version():
    assert _tells_flavor(ast.parse('"mariadb" in version.lower()'))
    telling = {m for m, p in modules().items() if _tells_flavor(_parse(p))}
    assert telling == {"replicator.servers"}


ENGINES = {"mariadb", "mysql", "tidb"}
# Modules that may name a server's kind: where the rules are written, and where a kind is told
# from a version.
NAMES_ENGINES = {"replicator.server_rules", "replicator.servers"}


def _engine(node: ast.AST) -> bool:
    """`Flavor.MARIADB`, or the literal "mariadb" (any kind's name)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Flavor":
        return node.attr.lower() in ENGINES
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.lower() in ENGINES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_engine(e) for e in node.elts)
    return False


def _asks_an_engine(tree: ast.AST) -> list[int]:
    """Lines comparing something with a server kind's name (`flavor == "mariadb"`,
    `upstream != Flavor.MARIADB`, `flavor in ("mysql", "tidb")`)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare) and any(_engine(n) for n in (node.left, *node.comparators))
    ]


def test_the_replicator_asks_a_servers_rules_never_its_engine_name():
    """Issue 72: what differs by server kind is a flag of `replicator.server_rules` (the
    schema's, of lattice's `Rules`); nothing else compares a flavor with an engine's name."""
    assert _asks_an_engine(ast.parse('if flavor == "mariadb": pass\nif f != Flavor.TIDB: pass'))
    asking = {
        name: lines
        for name, path in modules().items()
        if name not in NAMES_ENGINES and (lines := _asks_an_engine(_parse(path)))
    }
    assert not asking, "ask a flag of replicator.server_rules instead: " + ", ".join(
        f"{name} (lines {', '.join(map(str, lines))})" for name, lines in sorted(asking.items())
    )


def test_every_table_of_the_meta_schema_is_read_and_written_by_state_alone():
    """A table of the meta schema is made, read and written by its store under `state/`
    (issue 72): a statement naming one (`{q}.pause`, any quoted schema before it) elsewhere
    fails this."""
    from replicator.apply.meta import SCHEMA_SQL

    tables = {m.group(1) for sql in SCHEMA_SQL for m in [re.search(r"EXISTS \{m\}\.(\w+)", sql)] if m}
    assert {"checkpoint", "watermark", "lease", "park", "pause", "ddl_journal"} <= tables, tables
    named = re.compile(r"\}\.(" + "|".join(sorted(tables)) + r")\b")
    outside = [
        f"{name}: {m.group(1)}"
        for name, path in modules().items()
        if not name.startswith("replicator.state.")
        for m in named.finditer(path.read_text())
    ]
    assert not outside, outside


def _writes_history(tree: ast.AST) -> bool:
    """A call of `<anything>.history.sql(...)`: a statement writing schema history rows."""
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "sql"
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "history"
        for node in ast.walk(tree)
    )


def test_the_schema_history_is_written_by_one_module():
    """Which schema history rows are written, and in which transaction, is one module's
    rule (issue 72): a DDL's rows with its decision or as it is read, a source's where its
    reading starts."""
    writing = {m for m, p in modules().items() if _writes_history(_parse(p))}
    assert writing == {"replicator.apply.schema_history"}, writing


MAX_CLASS_LINES, MAX_CLASS_METHODS = 400, 25  # (issue 72: the god classes one stage down)


def test_no_class_of_the_replicator_or_the_lattice_is_a_god_class():
    """Every class of `replicator/` and `lattice/` stays under ~400 lines and ~25 methods:
    one over it has taken on a second job (the applier had partitioning, threads, retries and
    15 SQL builders; `Meta` every stage's tables)."""
    big = []
    for path in sorted([*REPLICATOR.rglob("*.py"), *(ROOT / "lattice").rglob("*.py")]):
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.ClassDef):
                lines = node.end_lineno - node.lineno + 1
                methods = sum(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) for b in node.body)
                if lines > MAX_CLASS_LINES or methods > MAX_CLASS_METHODS:
                    big.append(f"{path.relative_to(ROOT)}: {node.name} ({lines} lines, {methods} methods)")
    assert not big, big
