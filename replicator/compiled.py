"""The modules of the row path run compiled, where `make setup` built them (`make compiled`,
`replicator/compiled_build.py`): the same source, compiled by Cython into C extensions. A
source worker spends about a quarter less CPU per event compiled, the daemon about a tenth
(docs/design.md "Performance").

The extensions are kept out of the tree (`.compiled/`), each with the digest of the source it
was built from. A module is imported compiled only while its source is still that one: an
edited module runs as Python until it is built again, never as a stale extension (next to
its source, an extension is taken before it, edited or not). `SHARDMERGE_PURE=1` runs them
all as Python (a comparison, a doubt). `import replicator` installs the finder; importing
this module must cost next to nothing, as every process imports it (the daemon, its
workers, Spark's Python workers, the CLI)."""

from __future__ import annotations

import hashlib
import json
import os
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader, ModuleSpec, PathFinder
from pathlib import Path

# the row path: a worker's loop over the binlog (read, decode, hand over), the daemon's over
# its workers' changes (route, batch, build the statements, commit). Chosen by profile: each
# is run per event or per row.
MODULES = (
    "replicator.source.binlog_compat",
    "replicator.source.worker",
    "replicator.source.rows",
    "replicator.source.stream",
    "replicator.source.outbox",
    "replicator.source.read_state",
    "replicator.source.gtid",
    "replicator.source.rowcodec",
    "replicator.source.row_events",
    "replicator.source.row_extend",
    "replicator.source.table_maps",
    "replicator.source.messages",
    "replicator.source.source_state",
    "replicator.daemon.dispatch",
    "replicator.daemon.row_path",
    "replicator.daemon.workers",
    "replicator.apply.buffers",
    "replicator.apply.statements",
    "replicator.apply.net",
    "replicator.apply.partitioner",
    "replicator.apply.commit",
    "replicator.apply.checkpoints",
    "replicator.apply.pending",
    "replicator.apply.tally",
    "replicator.shard_flow",
    "replicator.row_values",
)

ROOT = Path(__file__).resolve().parent.parent  # (where `lattice` and `replicator` are)
DIR = ROOT / ".compiled"  # the extensions under lib/, and stamp.json
PURE = "SHARDMERGE_PURE"


def digest(source: Path) -> str:
    return hashlib.sha256(source.read_bytes()).hexdigest()


def source_path(module: str, root: Path = ROOT) -> Path:
    return root / (module.replace(".", "/") + ".py")


def extension_path(module: str, out: Path = DIR) -> Path:
    return out / "lib" / (module.replace(".", "/") + EXTENSION_SUFFIXES[0])


def built(out: Path = DIR) -> dict[str, str]:
    """What `make compiled` built: module -> the digest of the source its extension was
    built from (none: nothing built)."""
    modules = _stamp(out).get("modules")
    return {str(k): str(v) for k, v in modules.items()} if isinstance(modules, dict) else {}


def built_with(out: Path = DIR) -> str | None:
    """The compiler and settings the extensions were built with (`compiled_build.COMPILER`)."""
    compiler = _stamp(out).get("compiler")
    return compiler if isinstance(compiler, str) else None


def _stamp(out: Path) -> dict:
    try:
        data = json.loads((out / "stamp.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def fresh(module: str, stamps: dict[str, str], root: Path = ROOT, out: Path = DIR) -> bool:
    """Built, from the source as it is now."""
    return (
        module in stamps
        and extension_path(module, out).is_file()
        and digest(source_path(module, root)) == stamps[module]
    )


class CompiledFinder:
    """Finds a built module's extension while its source is the one it was built from;
    else (None) the next finder imports the source. (A meta path finder by its `find_spec`
    alone: `importlib.abc` would cost every process's start 9 ms of imports.)"""

    def __init__(self, stamps: dict[str, str], out: Path = DIR):
        self.stamps = stamps
        self.out = out

    def find_spec(self, name, path, target=None):
        want = self.stamps.get(name)
        if want is None:
            return None
        source = PathFinder.find_spec(name, path)
        if source is None or source.origin is None or not source.origin.endswith(".py"):
            return None
        extension = extension_path(name, self.out)
        if not extension.is_file() or digest(Path(source.origin)) != want:
            return None
        return ModuleSpec(name, ExtensionFileLoader(name, str(extension)), origin=str(extension))


_INSTALLED: list[CompiledFinder] = []


def install() -> None:
    """The finder first in `sys.meta_path`, once per process (none where nothing is
    built, or with `PURE` set)."""
    if _INSTALLED or os.environ.get(PURE):
        return
    stamps = built()
    if not stamps:
        return
    finder = CompiledFinder(stamps)
    _INSTALLED.append(finder)
    import sys

    sys.meta_path.insert(0, finder)


def status() -> str:
    """One line for the logs and the benches: whether the row path runs compiled."""
    if os.environ.get(PURE):
        return f"row path as Python ({PURE} set)"
    stamps = built()
    compiled = [m for m in MODULES if fresh(m, stamps)]
    if not compiled:
        return "row path as Python (nothing compiled: `make compiled` builds it)"
    text = f"row path compiled: {len(compiled)} of {len(MODULES)} modules"
    if len(compiled) < len(MODULES):
        left = ", ".join(m for m in MODULES if m not in compiled)
        text += f"; as Python, edited since built or not built: {left} (`make compiled`)"
    return text
