"""The row path compiled (replicator/compiled.py, replicator/compiled_build.py): a module is
imported from its extension only while its source is the one the extension was built from,
and `make compiled` builds again only what was edited. Real Cython, a real C compiler; each
import in a process of its own (an extension module loads once per process)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from replicator.compiled import MODULES, ROOT, built, extension_path, fresh, source_path
from replicator.compiled_build import build

SOURCE = textwrap.dedent(
    '''
    from collections import defaultdict
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Point:
        x: int
        names: dict

    def size(p: Point) -> int:
        return p.x + len(p.names)

    ANSWER = size(Point(40, defaultdict(int, a=1, b=2)))  # (a defaultdict where a dict is annotated)
    '''
)

IMPORT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from replicator.compiled import CompiledFinder, built
    out = Path(sys.argv[1])
    sys.path.insert(0, str(out.parent))
    sys.meta_path.insert(0, CompiledFinder(built(out), out))
    import cpkg_compiled.mod as mod
    print(Path(mod.__file__).suffix, mod.ANSWER)
    """
)


def imported(out) -> tuple[str, int]:
    """(the suffix of the file `cpkg_compiled.mod` came from, its ANSWER), in a new process."""
    got = subprocess.run(
        [sys.executable, "-c", IMPORT, str(out)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    suffix, answer = got.stdout.split()
    return suffix, int(answer)


def test_a_module_runs_compiled_while_its_source_is_the_one_built_and_as_python_once_edited(tmp_path):
    package = tmp_path / "cpkg_compiled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    module = package / "mod.py"
    module.write_text(SOURCE)
    out = tmp_path / ".compiled"
    modules = ["cpkg_compiled.mod"]

    build(modules, 1, root=tmp_path, out=out)
    assert fresh("cpkg_compiled.mod", built(out), tmp_path, out)
    assert imported(out) == (".so", 42)

    module.write_text(SOURCE.replace("p.x + len", "p.x * len"))  # edited: its extension is stale
    assert not fresh("cpkg_compiled.mod", built(out), tmp_path, out)
    assert imported(out) == (".py", 80)

    before = extension_path("cpkg_compiled.mod", out).stat().st_mtime_ns
    build(modules, 1, root=tmp_path, out=out)  # built again: only what was edited
    assert extension_path("cpkg_compiled.mod", out).stat().st_mtime_ns != before
    assert imported(out) == (".so", 80)
    stamp = json.loads((out / "stamp.json").read_text())
    assert list(stamp["modules"]) == ["cpkg_compiled.mod"] and stamp["compiler"].startswith("Cython 3.")

    mtime = extension_path("cpkg_compiled.mod", out).stat().st_mtime_ns
    build(modules, 1, root=tmp_path, out=out)  # nothing edited: nothing built
    assert extension_path("cpkg_compiled.mod", out).stat().st_mtime_ns == mtime


def test_the_row_path_modules_exist_and_make_setup_built_them():
    """Every module named is one of ours, and `make setup` (`make compiled`) compiled them:
    a machine that cannot (no Cython, no compiler) runs them as Python, and this says so."""
    assert all(source_path(m).is_file() for m in MODULES)
    stamps = built()
    assert stamps, "nothing compiled: run `make compiled` (make setup does), which says why it cannot"
    assert set(stamps) <= set(MODULES)
