"""Throwaway local MariaDB servers for demos and tests: N upstreams that write ROW binlogs
the way the shards we replicate from must, and one downstream to merge into.

Everything about a running sandbox (ports, pids, datadirs) is kept in `<root>/sandbox.json`,
so a later process (`shardmerge sandbox status|down`, or a test run after a crash) can find
and stop the servers without having started them.

- `lifecycle`: `Sandbox`, what demos, tests and benches use (up, down, status, one server
  stopped, started or restarted);
- `state`: its servers as the state file records them, and the lock their changes hold;
- `process`: one server's process, installed, started, waited for and stopped;
- `commands`: mariadb-install-db's and mariadbd's command lines and options;
- `instance`: how to reach one server, and its status;
- `pids`, `ports`: mariadbd processes by pid, and free ports;
- `watchdog` (its loop in `__main__`): the sandbox torn down once its creator is gone."""

from replicator.sandbox.instance import Instance, InstanceStatus, Role, SandboxError
from replicator.sandbox.lifecycle import Sandbox
from replicator.sandbox.ports import free_ports
from replicator.sandbox.process import START_TIMEOUT, STOP_TIMEOUT
from replicator.sandbox.state import DOWNSTREAM_NAME, STATE_FILE

__all__ = [
    "DOWNSTREAM_NAME",
    "START_TIMEOUT",
    "STATE_FILE",
    "STOP_TIMEOUT",
    "Instance",
    "InstanceStatus",
    "Role",
    "Sandbox",
    "SandboxError",
    "free_ports",
]
