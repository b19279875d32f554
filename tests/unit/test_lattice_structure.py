"""The shape of `lattice/`: its modules import each other without a cycle (imports
inside functions count too), code outside it goes through the front door
(`lattice/__init__.py`), and it does no I/O."""

from __future__ import annotations

import ast
from pathlib import Path

import lattice

ROOT = Path(__file__).resolve().parents[2]
LATTICE = ROOT / "lattice"

# Modules that reach the network, the disk or other processes; lattice is pure.
IO_MODULES = {
    "asyncio",
    "http",
    "io",
    "logging",
    "mmap",
    "multiprocessing",
    "os",
    "pathlib",
    "pymysql",
    "pymysqlreplication",
    "pyspark",
    "requests",
    "select",
    "shutil",
    "socket",
    "sqlite3",
    "ssl",
    "subprocess",
    "sys",
    "tempfile",
    "threading",
    "urllib",
    "yaml",
}

# Modules outside lattice that may import a lattice submodule, each with its reason.
# Empty: everything they need is in `lattice.__all__`.
INTERNAL_IMPORTS_ALLOWED: dict[str, str] = {}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[tuple[str, list[str]]]:
    """(module, names) of every import, at any depth, outside `if TYPE_CHECKING:`."""
    found: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, [alias.name for alias in node.names]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _parse(path: Path) -> ast.AST:
    text = path.read_text()
    try:
        return ast.parse(text, filename=str(path))
    except SystemError:
        # CPython 3.11's "AST constructor recursion depth mismatch": a worker whose Spark
        # session's threads were closing met it once in make test; the same text parses
        # the next time (a fault of the interpreter's counter, not of the file)
        return ast.parse(text, filename=str(path))


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def lattice_graph() -> dict[str, set[str]]:
    """module → the lattice modules it imports (`lattice` is the package itself)."""
    modules = {_module_name(p): p for p in sorted(LATTICE.glob("*.py"))}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for module, names in _imports(_parse(path)):
            if module != "lattice" and not module.startswith("lattice."):
                continue
            targets = {module}
            if module == "lattice":  # `from lattice import ddl` names a submodule
                targets = {f"lattice.{n}" if f"lattice.{n}" in modules else "lattice" for n in names}
            graph[name] |= targets - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_imports_inside_functions_count_and_type_checking_does_not():
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from lattice.render import x\n"
        "def f():\n    from lattice.ddl import y\n"
    )
    assert [m for m, _ in _imports(tree)] == ["typing", "lattice.ddl"]


def test_the_lattice_modules_import_each_other_without_a_cycle():
    graph = lattice_graph()
    assert "lattice.model" in graph and "lattice.join" in graph
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle in lattice/: " + " -> ".join(cycle or ())


def test_the_model_knows_neither_parsing_nor_rendering():
    assert lattice_graph()["lattice.model"] == set()


def test_code_outside_lattice_uses_the_front_door_only():
    offenders = []
    for folder in ("replicator", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if _module_name(path) in INTERNAL_IMPORTS_ALLOWED:
                continue
            for module, names in _imports(_parse(path)):
                if module.startswith("lattice."):
                    offenders.append(f"{path.relative_to(ROOT)}: {module}")
                elif module == "lattice":
                    offenders += [f"{path.relative_to(ROOT)}: lattice.{n}" for n in names if n not in lattice.__all__]
    assert not offenders, "import these from `lattice` (add them to lattice.__all__ if missing):\n" + "\n".join(
        offenders
    )


def test_the_front_door_exports_what_it_lists():
    missing = [n for n in lattice.__all__ if not hasattr(lattice, n)]
    assert not missing
    assert callable(lattice.join) and callable(lattice.diff) and callable(lattice.apply)


def test_lattice_does_no_io():
    used = []
    for path in sorted(LATTICE.glob("*.py")):
        for module, _ in _imports(_parse(path)):
            if module.split(".")[0] in IO_MODULES:
                used.append(f"{path.name}: {module}")
        if "open(" in path.read_text():
            used.append(f"{path.name}: open()")
    assert not used, "lattice/ must stay free of I/O:\n" + "\n".join(used)
