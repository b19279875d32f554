"""What the fork server of the source workers (`replicator.source.spawn`) makes once,
before it forks them: importing this module is its job. The worker module (the SQL
parser and all), and the TLS context of the preferred mode, which every worker's
binlog connections use and would each make otherwise (30 ms of CPU per worker)."""

from __future__ import annotations

import replicator.source.worker  # noqa: F401 (imported for the workers forked after)
from replicator.servers import preferred_tls_context

preferred_tls_context()
