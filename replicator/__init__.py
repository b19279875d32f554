"""Everything that talks to servers: sandbox, workers, coordinator, applier, CLI."""

from replicator.compiled import install as _install_compiled
from replicator.lazy_rsa import install as _install_lazy_rsa

_install_lazy_rsa()  # (before any of ours imports pymysql: see the module)
_install_compiled()  # (before any of ours imports a module of the row path: see the module)
