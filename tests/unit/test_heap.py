"""replicator.heap: the collector paused while the start imports, and the fork server's
heap frozen for the workers forked from it."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from replicator.heap import collector_paused


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_paused_inside_and_as_it_was_after(enabled):
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        with collector_paused():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        assert gc.get_freeze_count() > 0  # (what it made is out of the next collection's way)
    finally:
        gc.unfreeze()
        gc.enable() if was else gc.disable()


def test_the_collector_runs_again_after_an_import_that_failed():
    assert gc.isenabled()
    try:
        with pytest.raises(ImportError), collector_paused():
            import replicator.no_such_module  # noqa: F401
        assert gc.isenabled()
    finally:
        gc.unfreeze()


def test_the_fork_server_freezes_what_it_preloads_and_collects_after():
    # (a process of its own: freezing this one's heap would change every later test's)
    probe = "import gc, replicator.source.preload; print(gc.isenabled(), gc.get_freeze_count())"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    enabled, frozen = out.stdout.split()
    assert enabled == "True"  # (the workers forked from it collect their own garbage)
    assert int(frozen) > 20_000  # the worker module, the parser and all (48,000 objects)
