"""Where a source's saved positions are in another server's binlog (issue 45, docs/operations/failover.md).

Positions are one server's; when a source's server is another one than the saved
positions were read on (its primary failed over to a replica, or the operator pointed
the source elsewhere), the daemon reads the new server's binlog from the GTID state
of the source's watermark and finds each saved transaction there by its GTID
(`NewBinlog`); `replicator.apply.rebase` then rewrites the saved positions. MariaDB
servers with GTIDs, one GTID domain: the order of transactions of several domains
may differ from server to server, so one position cannot stand for the same point
on both."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pymysql

from replicator.errors import CliError
from replicator.servers import Connection as ServerConnection
from replicator.source.gtid import Gtid, GtidState
from replicator.state.positions import Position

HEARTBEAT = 0.5  # seconds: how soon the new server says its binlog has no more


class FailoverError(CliError):
    """A source's saved positions cannot be found on its new server."""


@dataclass
class NewBinlog:
    """The transactions after GTID state `state` in a server's binlog: where each starts
    and where the one after it starts (`ends`)."""

    state: GtidState
    start: Position  # where the first transaction after `state` starts (or the binlog's end)
    starts: dict[Gtid, Position] = field(default_factory=dict)
    ends: dict[Gtid, Position] = field(default_factory=dict)

    def start_of(self, gtid: Gtid) -> Position | None:
        """Where transaction `gtid` starts; None: it is not in this binlog."""
        return self.starts.get(gtid)

    def after(self, state: GtidState) -> Position | None:
        """Where a reader at GTID state `state` stands: at the watermark's state the
        first transaction after it, else where the one after its last GTID starts."""
        if state == self.state:
            return self.start
        return self.ends.get(state.last[0]) if len(state.last) == 1 else None


def server_id(conn: Any) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT @@server_id")
        return int(cur.fetchone()[0])


def read_new_binlog(
    source: str,
    connection: dict[str, Any],
    reader_id: int,
    state: GtidState,
    wanted: set[Gtid],
    end: Position,
) -> NewBinlog:
    """Read the server's binlog from GTID state `state` (up to its end)
    till every transaction of `wanted` has ended there. `reader_id`: the server id the
    source reads with; `end`: the binlog's end before reading (where the watermark is
    when nothing came after `state`)."""
    if len(state.domains) > 1 or any(g.domain not in (state.domains or (g.domain,)) for g in wanted):
        raise FailoverError(
            f"source {source}: its binlog has more than one GTID domain "
            f"({', '.join(map(str, sorted({*state.domains, *(g.domain for g in wanted)})))}); a failover by "
            "GTID follows one domain only. Point the source back at its old server, or copy its shards "
            "again (backfill)"
        )
    # (imported here: a daemon's start imports this module, and reads no binlog itself)
    from pymysqlreplication.constants.BINLOG import HEARTBEAT_LOG_EVENT, MARIADB_GTID_EVENT
    from pymysqlreplication.event import HeartbeatLogEvent, QueryEvent, RotateEvent, XidEvent

    from replicator.source import binlog_compat
    from replicator.source.binlog_compat import LightEvent

    settings = dict(connection)
    settings["passwd"] = settings.pop("password", "")
    stream = binlog_compat.Stream(
        connection_settings=settings,
        server_id=reader_id,
        # (not BINLOG_DUMP_NON_BLOCK: MariaDB 10.11 drops a non-blocking GTID dump midway;
        # its end is where the server sends a heartbeat, having nothing more)
        blocking=True,
        slave_heartbeat=HEARTBEAT,
        auto_position=str(state),
        is_mariadb=True,
        only_events=[RotateEvent, QueryEvent, XidEvent, HeartbeatLogEvent],
        enable_logging=False,
        pymysql_wrapper=ServerConnection,
    )
    found = NewBinlog(state, end)
    last = max((g.seq for g in wanted), default=0)
    file, current, first = end.file, None, True
    try:
        for event in stream:
            if isinstance(event, LightEvent) and event.event_type == HEARTBEAT_LOG_EVENT:
                break
            if isinstance(event, RotateEvent):
                file = event.next_binlog
                continue
            if isinstance(event, LightEvent):
                log_pos, size = event.log_pos, int.from_bytes(event.raw[9:13], "little")
                if event.event_type == MARIADB_GTID_EVENT:
                    if current is not None and current.seq >= last:
                        break  # (the last one wanted has ended)
                    current = Gtid.parse(event.gtid)
                    found.starts[current] = Position(file, log_pos - size)
                    if first:
                        found.start, first = found.starts[current], False
                    continue
            else:
                log_pos = event.packet.log_pos
            if current is not None and log_pos:
                found.ends[current] = Position(file, log_pos)
    except pymysql.err.MySQLError as exc:
        raise FailoverError(
            f"source {source}: its new server cannot send its binlog from GTID {state or '(none)'}: {exc}. "
            "If it lacks transactions its old server sent, the rows they wrote downstream are not on it: "
            "copy the source's shards again (backfill), or point the source back at its old server"
        ) from exc
    finally:
        stream.close()
    return found
