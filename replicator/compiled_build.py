"""`make compiled`: the row path's modules (`replicator.compiled.MODULES`) compiled by Cython
into `.compiled/`, each stamped with the digest of the source it was built from. Incremental:
a module whose source is the one stamped is left as it is.

Cython compiles the source as it is (no type declarations of ours). Its annotation typing is
off: an annotation is no check here, and compiled it would be one (a `dict` annotation refused
a `defaultdict`). Without Cython or a C compiler nothing is built, the run says why, and the
modules run as Python."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from replicator.compiled import (
    DIR,
    MODULES,
    ROOT,
    built,
    built_with,
    digest,
    extension_path,
    fresh,
    source_path,
)

DIRECTIVES = {"language_level": 3, "annotation_typing": False, "binding": True}


def compiler() -> str:
    """What the extensions are built with: another Cython, or other settings, builds them all
    again (Cython 3.0.11 compiled `isinstance(x, str | bytes)` as always false; 3.3 does not)."""
    import Cython

    return f"Cython {Cython.__version__} {json.dumps(DIRECTIVES, sort_keys=True)}"


def build(modules: list[str], jobs: int, root: Path = ROOT, out: Path = DIR) -> None:
    """Compile those of `modules` not built from their source as it is, from `root` into
    `out`, and stamp each with the digest of its source as it was compiled (an edit made
    meanwhile is then seen as one)."""
    made_by = compiler()
    stamps = built(out) if built_with(out) == made_by else {}
    todo = [m for m in modules if not fresh(m, stamps, root, out)]
    if not todo:
        return
    out.mkdir(parents=True, exist_ok=True)
    print(f"compiling {len(todo)} modules into {out} ...", flush=True)
    stamps.update(_compiled(todo, jobs, root, out))
    partial = out / "stamp.tmp"
    partial.write_text(json.dumps({"compiler": made_by, "modules": stamps}, indent=1, sort_keys=True))
    os.replace(partial, out / "stamp.json")


def _compiled(modules: list[str], jobs: int, root: Path, out: Path) -> dict[str, str]:
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    stamps = {m: digest(source_path(m, root)) for m in modules}
    with tempfile.TemporaryDirectory(prefix="compiled-", dir=out) as work:
        extensions = cythonize(
            [Extension(m, [str(source_path(m, root))]) for m in modules],
            build_dir=str(Path(work) / "c"),
            compiler_directives=DIRECTIVES,
            nthreads=jobs,
            quiet=True,
        )
        command = build_ext(Distribution({"ext_modules": extensions}))
        command.build_lib = str(Path(work) / "lib")
        command.build_temp = str(Path(work) / "tmp")
        command.parallel = jobs
        command.ensure_finalized()
        command.run()
        for m in modules:
            target = extension_path(m, out)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(extension_path(m, Path(work)), target)
    return stamps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--clean", action="store_true", help="remove what was built (run as Python)")
    args = parser.parse_args(argv)
    if args.clean:
        shutil.rmtree(DIR, ignore_errors=True)
        return 0
    try:
        import Cython  # noqa: F401
    except ImportError:
        print("no compiled modules: no Cython (`make setup` installs it); the row path runs as Python")
        return 0
    try:
        build(list(MODULES), args.jobs)
    except Exception as exc:  # (no compiler, no Python headers: it runs as Python, and says so)
        why = f"{type(exc).__name__}: {exc}"
        print(f"no compiled modules ({why}); the row path runs as Python", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
