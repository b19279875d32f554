"""The rows resumed shards wrote while paused, replayed through scratch tables: one
`PausedWindow` per shard (paused_window.py), opened when a decision resumes it, fed its
changes and DDLs of that time as its source reads them again, and merged into the
target, with its checkpoints and the end of its pause, once the source is past them.
`Windows` owns that for the daemon (which routes the changes) and the shards' flows."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

import pymysql

from lattice import parse_table
from replicator.apply.applier import Applier
from replicator.apply.meta import Meta
from replicator.apply.paused_window import PausedWindow, WindowFailed
from replicator.apply.target import TargetInfo
from replicator.faults import crash_point, fault_point
from replicator.schema import way_out
from replicator.schema.way_out import with_way_out
from replicator.servers import connect_downstream
from replicator.shard_flow import ShardFlow, ShardFlows
from replicator.shard_id import ShardId
from replicator.source.decode import literal
from replicator.source.messages import Change, DDLEvent, RowEvent
from replicator.source.routing import Router
from replicator.source.schema_change import ChangeKind
from replicator.state.pauses import Pause
from replicator.state.positions import Position, file_sequence

log = logging.getLogger("shardmerge.daemon")

# statements a resumed shard's paused rows gather before they go to its scratch table
WINDOW_FLUSH = 1000


class Source(Protocol):
    """What a window asks of the source its shard is read from (the daemon's `SourceState`)."""

    flavor: str
    position: Position | None
    rewinding: int
    files: dict[int, str]

    def schemas_at(self, position: Position) -> dict[str, str]: ...


class Windows:
    def __init__(
        self,
        flows: ShardFlows,
        sources: Mapping[str, Source],
        meta: Meta,
        down: dict[str, Any],
        router: Router,
        infos: Mapping[str, TargetInfo],
        flavor: str,
        pause: Callable[..., None],
    ):
        """`flavor`: the target's; `pause(pause, also=[...])`: pauses a shard again, saved
        with `also`."""
        self.flows, self.sources, self.meta, self.down = flows, sources, meta, down
        self.router, self.infos, self.flavor, self.pause = router, infos, flavor, pause
        self.applier: Applier | None = None  # (made after the windows a start reopens)

    def open(self, pause: Pause, until: tuple[int, int]) -> PausedWindow | None:
        """A scratch table for the rows the shard wrote while paused, as its table was at the
        pause; None where it cannot have one (no primary key, no table then)."""
        state = self.sources[pause.source]
        sql = state.schemas_at(pause.position).get(pause.shard.table_key)
        if sql is None:
            return None
        try:
            window = PausedWindow(
                pause.shard,
                parse_table(sql, upstream=state.flavor, shown=True),
                pause.first,
                until,
                self.meta.schema,
                self.flavor,
            )
            with contextlib.closing(connect_downstream(self.down)) as conn, conn.cursor() as cur:
                for statement in window.create_sql():
                    cur.execute(statement)
        except WindowFailed as exc:
            log.info(
                "shard %s: its rows since %s are read again row by row (%s)", pause.shard, pause.position, exc
            )
            return None
        return window

    def reopen(self, shard: ShardId, until: tuple[int, int]) -> None:
        """At a start: a shard that resumed, its paused rows not merged before the stop: they
        are read again (its source starts at its pause) into a new scratch table."""
        flow = self.flows[shard]
        pause, flow.pause = flow.pause, None
        state = self.sources[pause.source]
        state.files.setdefault(file_sequence(pause.position.file), pause.position.file)
        flow.window = self.open(pause, until)
        if flow.window is None:  # (read again row by row)
            flow.replay_to = until
        pauses = self.meta.pauses
        kept = pauses.sql_resuming(shard) if flow.window is not None else pauses.sql_unpause(shard)
        self.meta.execute([kept])
        first = pause.first
        flow.routed = (first[0], first[1], first[2] - 1)

    def take(self, flow: ShardFlow, change: Change | RowEvent) -> bool:
        """Put a change of a shard whose paused rows are replayed in its scratch table; False
        when it comes after them (they are merged first)."""
        window = flow.window
        if window.covers(change.id):
            for row in change.codec.changes(change) if isinstance(change, RowEvent) else [change]:
                window.row(row)
            if len(window.statements) >= WINDOW_FLUSH:
                self._flush(flow)
            return True
        self.merge(flow)
        return False

    def take_ddl(self, flow: ShardFlow, message: DDLEvent) -> bool:
        """A DDL of a shard whose paused rows are replayed: run on its scratch table when it is
        of that time (True), else the rows merged first (False)."""
        window = flow.window
        change = message.change
        decided = change.kind == ChangeKind.PINNED or flow.decided_before(message.id)
        if not window.covers(message.id) or not decided:
            # (one not decided while it was paused came after it resumed: a window whose end
            # a restart did not know reads on to the binlog's end, L39)
            self.merge(flow)
            return False
        if message.id < window.hold or (window.last_ddl is not None and message.id <= window.last_ddl):
            return True  # its table at the pause has it (a rewind reads from before), or read again
        if change.kind in (ChangeKind.DROP, ChangeKind.UNREADABLE):
            # it left: its rows up to its DROP go downstream as they were when it left, and
            # what comes after (a CREATE of it again) is a new table's, read the usual way;
            # or its rows from here on cannot be read (a row of a column a skipped DDL added):
            # those before go downstream, and it pauses here, as a running shard would
            self.merge(flow)
            return False
        try:
            if change.kind == ChangeKind.NONE:
                return True
            if change.kind not in (ChangeKind.ALTER, ChangeKind.PINNED) or change.after is None:
                raise WindowFailed(f"it ran {change.statement!r} meanwhile")
            window.alter(
                change.after, tuple((r.old, r.new) for r in change.renames), change.recreated, message.id
            )
        except WindowFailed as exc:
            self._failed(flow, str(exc))
        return True

    def _flush(self, flow: ShardFlow) -> None:
        """The window's statements to its scratch table now (a long pause: not all in memory)."""
        try:
            with contextlib.closing(connect_downstream(self.down)) as conn:
                flow.window.flush(conn)
        except pymysql.err.MySQLError as exc:
            self._failed(flow, f"{type(exc).__name__}: {exc}")

    def merge_ready(self) -> None:
        """Windows whose source has been read past the point their shard resumed at."""
        for flow in [f for f in self.flows if f.window is not None]:
            state = self.sources.get(flow.shard.source)
            if state is None or state.position is None or state.rewinding:
                continue
            if (file_sequence(state.position.file), state.position.pos) >= flow.window.until:
                self.merge(flow)

    def merge(self, flow: ShardFlow) -> None:
        """The scratch rows into the target, with the shard's checkpoints and the end of its
        pause, in one transaction. Not while a DDL changes the target: the rows go into the
        table as its last DDL left it, clearing what the shard clears as of that DDL. The
        shard's flow learns that only once the main loop takes the DDL's result, later than a
        merge may come (L51: merged between a rename's downstream statements and its result,
        the rows of a shard keeping the old name left the new one its default, not NULL)."""
        crash_point("window_merge")
        if fault_point("window_fails"):  # (rows that cannot be replayed: tests of the way out)
            self._failed(flow, "a fault the test injected")
            return
        window, shard, applier = flow.window, flow.shard, self.applier
        route = self.router.route(shard.schema, shard.table)
        target = route.target
        info = self.infos[target]
        extract = dict(
            zip(route.extract.values(), map(literal, route.extract_values(shard.parts())), strict=True)
        )
        checkpoints = (
            [(shard, part, window.last) for part in range(applier.partitions)] if window.last else []
        )
        try:
            with contextlib.closing(connect_downstream(self.down)) as conn:
                window.flush(conn)  # (the scratch table's: no DDL of the target waits for it)
                # paused again meanwhile (its next DDL read before the window's end was merged):
                # that pause is saved now, which the window's kept till here (`sql_pause` keeps
                # a saved pause's position); without it a restart would take the position of
                # its last DDL since, and lose the rows before (L22, L26)
                again = [self.meta.pauses.sql_pause(flow.pause)] if flow.pause is not None else []
                with info.lock.reading():
                    merge = window.merge_sql(target, info.columns, extract, info.clears(shard), info.sole_key)
                    self.meta.execute(
                        [
                            *merge,
                            self.meta.pauses.sql_unpause(shard),
                            *again,
                            self.meta.pauses.sql_replayed(shard),
                            *([self.meta.checkpoints.sql(checkpoints)] if checkpoints else []),
                        ]
                    )
                with conn.cursor() as cur:
                    cur.execute(window.drop_sql())
        except pymysql.err.MySQLError as exc:
            self._failed(flow, f"{type(exc).__name__}: {exc}")
            return
        flow.window = None
        if window.last is not None:
            applier.settle(shard, window.last)
        log.info(
            "shard %s: its rows of the time it was paused are applied (replayed with its DDLs on scratch)",
            shard,
            extra={"shard": shard, "source": shard.source},
        )

    def _failed(self, flow: ShardFlow, reason: str) -> None:
        """The paused rows cannot be replayed: the shard pauses again where it was (its pause
        is still saved), for the operator."""
        window, flow.window = flow.window, None
        pause = self.meta.pauses.load().get(flow.shard)
        message = with_way_out(
            f"its rows written while paused could not be replayed ({reason})", way_out.unreplayed(flow.shard)
        )
        log.error(
            "shard %s: %s", flow.shard, message, extra={"shard": flow.shard, "source": flow.shard.source}
        )
        if pause is None:
            return
        # (its replay forgotten: the next start leaves it paused, for the operator)
        self.pause(replace(pause, reason=message), also=[self.meta.pauses.sql_replayed(flow.shard)])
        with (
            contextlib.suppress(pymysql.err.MySQLError),
            contextlib.closing(connect_downstream(self.down)) as conn,
            conn.cursor() as cur,
        ):
            cur.execute(window.drop_sql())
