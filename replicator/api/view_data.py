"""What the live view at the admin API's `/` shows, gathered in one read of the daemon's
state (on its main thread, through `Calls.read`): the same answers as query-status,
show-ddl-state (with its matrix) and show-history, and the samples of the last hour.

The values made here go to the HTTP thread that asked, which renders them (`view_html.py`)
and drops them: no other thread ever holds them."""

from __future__ import annotations

import time

from replicator.api.daemon_api import Daemon
from replicator.api.operations import ddl_state
from replicator.api.view_model import GroupPage, LivePage

HISTORY_SHOWN = 12  # versions of each group's history on the page, the newest


def live_page(daemon: Daemon) -> LivePage:
    """Run on the daemon's main thread."""
    store = daemon.meta.groups
    groups = tuple(
        GroupPage(
            ddl_state(daemon, target),
            tuple(store.recent_history(target, HISTORY_SHOWN)),
            store.history_count(target),
        )
        for target in sorted(daemon.views())
    )
    samples = daemon.samples
    return LivePage(daemon.status(), groups, samples.taken, samples.every, time.time())
