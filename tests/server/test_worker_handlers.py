"""The source worker's handlers, each driven by itself on events the sandbox's binlog
recorded, with no worker process and no pipe: what the rows handler puts in the batch
(decoded rows, the rows a filter ignores counted instead, the rows of a table whose schema
is not known sent as `Dropped` after one report), and how the DDL handler follows an ALTER
so that the rows after it are read with the column it added."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pymysqlreplication.constants.BINLOG import TABLE_MAP_EVENT, XID_EVENT
from pymysqlreplication.event import FormatDescriptionEvent, QueryEvent
from pymysqlreplication.row_event import RowsEvent

from lattice import Flavor, parse_table
from replicator.config import Filters, Route, RowFilter
from replicator.row_condition import parse_condition
from replicator.shard_id import ShardId
from replicator.source import binlog_compat
from replicator.source.binlog_compat import LightEvent, name_text
from replicator.source.ddl import DdlHandler, SchemaCharsets
from replicator.source.messages import Change, Changes, DDLEvent, Dropped, Pin
from replicator.source.outbox import Outbox
from replicator.source.pins import Pins
from replicator.source.problems import Problems
from replicator.source.read_state import ReadState
from replicator.source.routing import Router
from replicator.source.row_events import ROWS_OPS, row_shape
from replicator.source.rows import EXTEND_MIN_ROWS, EXTEND_PROBE_BYTES, RowsHandler
from replicator.source.schema_change import ChangeKind
from replicator.source.source_state import PIN, SourceState
from replicator.source.stream import EVENTS, StreamHandler
from replicator.source.table_maps import TableMapHandler
from replicator.source.tracker import Tracker
from replicator.source.versions import Versions
from replicator.source.worker_setup import WorkerContext
from replicator.state.positions import Position, event_end, file_sequence, row_index


@dataclass
class Handlers:
    read: ReadState
    sent: list
    stream: StreamHandler
    table_maps: TableMapHandler
    rows: RowsHandler
    ddl: DdlHandler


def handlers(
    up, routes: list[Route], filters: Filters, schemas: dict[str, str], start: Position, pinned: tuple[Pin, ...] = ()
) -> Handlers:
    """The handlers a worker of `up` makes, reading from `start`, its messages kept in `sent`;
    `schemas`: the tables its tracker knows there ("schema.table" -> CREATE TABLE)."""
    connection = {"host": up.host, "port": up.port, "user": up.user, "password": up.password}
    context = WorkerContext(source="up1", connection=connection, server_id=9912, router=Router(routes, filters))
    read, sent, versions = ReadState(start, None), [], Versions()
    outbox = Outbox(context.source, read, sent.append)
    charsets = SchemaCharsets(connection)
    tables = {k: parse_table(sql, shown=True) for k, sql in schemas.items()}
    tracker = Tracker(tables, watches=context.router.watches_schema, schema_charset=charsets)
    problems = Problems(context, read, outbox)
    pins = Pins(context, read, tracker, problems, versions, outbox, pinned)
    table_maps = TableMapHandler(context, tracker, pins, problems, versions)
    rows = RowsHandler(context, read, outbox, table_maps, pins, problems, versions, {})
    ddl = DdlHandler(context, read, outbox, tracker, pins, problems, versions, charsets)
    return Handlers(read, sent, StreamHandler(context, read, outbox), table_maps, rows, ddl)


def replay(up, db: str, start: Position, end: int, h: Handlers, then: dict | None = None) -> None:
    """The binlog of `up` from `start` to `end` read as the worker's stream reads it, each
    event handed to its handler (the other tests' statements in between: their own schemas');
    `then`: what to do once the event ending at a position is handled (position -> call)."""
    stream = binlog_compat.Stream(
        {"host": up.host, "port": up.port, "user": up.user, "passwd": up.password},
        server_id=9912, resume_stream=True, log_file=start.file, log_pos=start.pos, blocking=False,
        only_events=EVENTS,
    )
    try:
        for event in stream:
            if isinstance(event, FormatDescriptionEvent):
                h.stream.format_description(event)
                continue
            light = isinstance(event, LightEvent)
            at = event.log_pos if light else event.packet.log_pos
            if not at:
                continue  # (the rotate event a resumed stream starts with)
            h.read.seen(at, event.timestamp)
            if event.event_type == TABLE_MAP_EVENT:
                h.table_maps.table_map(event, stream.library_tables)
            elif light and event.event_type in ROWS_OPS:
                names = h.table_maps.table_ids.get(event.table_id)
                if names is not None:
                    h.rows.rows(event, *names)
            elif isinstance(event, RowsEvent):
                h.rows.rows(event, name_text(event.schema), name_text(event.table))
            elif event.event_type == XID_EVENT:
                h.stream.transaction_end(at)
            elif isinstance(event, QueryEvent) and name_text(event.schema) == db and event.query != "BEGIN":
                h.ddl.ddl(event.query.strip(), db, at)
            if then and at in then:
                then[at]()
            if at >= end:
                break
    finally:
        stream.close()


def items(h: Handlers) -> list:
    """Everything the handlers put in the batch: sent, then still there."""
    return [i for m in h.sent if isinstance(m, Changes) for i in m.items] + h.read.batch


def filtered(h: Handlers) -> dict:
    counts: dict = {}
    for found in [m.filtered for m in h.sent if isinstance(m, Changes)] + [h.read.filtered]:
        for k, n in found.items():
            counts[k] = counts.get(k, 0) + n
    return counts


def text(value: str) -> str:
    """A VARCHAR's value as the worker's codec writes it (a literal of its bytes)."""
    return f"_utf8mb4 x'{value.encode().hex()}'"


def here(up) -> Position:
    file, pos = up.execute("SHOW MASTER STATUS")[0][:2]
    return Position(file, int(pos))


@pytest.fixture
def up(sandbox):
    return sandbox.upstreams[0]


def test_the_rows_handler_reads_recorded_rows_less_those_a_filter_ignores_and_drops_an_untracked_tables(
    up, scratch_db
):
    db = scratch_db
    up.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, name VARCHAR(20), n INT)")
    up.execute(f"CREATE TABLE `{db}`.u (id INT PRIMARY KEY)")
    schemas = {f"{db}.t": up.execute(f"SHOW CREATE TABLE `{db}`.t")[0][1]}
    start = here(up)
    up.execute(
        [
            f"INSERT INTO `{db}`.t VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30)",
            f"UPDATE `{db}`.t SET n = n + 1 WHERE id = 2",
            f"DELETE FROM `{db}`.t WHERE id = 1",
            f"BEGIN; INSERT INTO `{db}`.u VALUES (1); INSERT INTO `{db}`.u VALUES (2); COMMIT",
            f"INSERT INTO `{db}`.u VALUES (3)",
        ]
    )
    end = here(up).pos
    routes = [Route(db, "t", "m", "t", {"source": "_source"}), Route(db, "u", "m", "u")]
    ignore = RowFilter((f"{db}.t",), ignore_insert=parse_condition("n > 25"))
    h = handlers(up, routes, Filters(rows=(ignore,)), schemas, start)  # (u: not tracked)

    replay(up, db, start, end, h)

    got = items(h)
    t = ShardId("up1", db, "t")
    rows = [(c.op, c.columns, c.values, c.before) for c in got if isinstance(c, Change)]
    columns, a, b = ("id", "name", "n", "_source"), text("a"), text("b")
    assert rows == [
        ("I", columns, ("1", a, "10", "'up1'"), None),
        ("I", columns, ("2", b, "20", "'up1'"), None),
        # (3, 'c', 30): an insert the filter ignores
        ("U", columns, ("2", b, "21", "'up1'"), ("2", b, "20", "'up1'")),
        ("D", columns, None, ("1", a, "10", "'up1'")),
    ]
    assert all(c.shard is t and c.target == "m.t" for c in got if isinstance(c, Change))
    assert filtered(h) == {(t, "insert"): 1}
    # u's rows, whose schema the tracker does not have: one report, then its row events of
    # each transaction in one Dropped, in their place
    reports = [m for m in h.sent if isinstance(m, DDLEvent)]
    assert [(m.change.kind, m.change.shard.table, m.target) for m in reports] == [(ChangeKind.UNREADABLE, "u", "m.u")]
    dropped = [(d.shard.table, d.events) for d in got if isinstance(d, Dropped)]
    assert dropped == [("u", 2), ("u", 1)]
    assert got[-2:] == [d for d in got if isinstance(d, Dropped)]


def test_the_ddl_handler_follows_a_recorded_alter_and_the_rows_after_it_hold_its_column(up, scratch_db):
    db = scratch_db
    up.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, n INT)")
    schemas = {f"{db}.t": up.execute(f"SHOW CREATE TABLE `{db}`.t")[0][1]}
    start = here(up)
    up.execute("INSERT INTO t VALUES (1, 10)", db)
    up.execute("ALTER TABLE t ADD COLUMN note VARCHAR(10) NOT NULL DEFAULT 'x'", db)
    after_alter = here(up)
    up.execute("INSERT INTO t VALUES (2, 20, 'y')", db)
    end = here(up).pos
    h = handlers(up, [Route(db, "t", "m", "t")], Filters(), schemas, start)

    replay(up, db, start, end, h)

    ddl = [m for m in h.sent if isinstance(m, DDLEvent)]
    assert len(ddl) == 1, ddl
    event = ddl[0]
    assert (event.change.kind, event.target, event.change.shard.table) == (ChangeKind.ALTER, "m.t", "t")
    assert [c.name for c in event.change.after.columns] == ["id", "n", "note"]
    assert "`note` varchar(10)" in event.tables[f"{db}.t"]
    # a DDL is a transaction of its own: the next one starts where its event ends
    assert Position.parse(event.next_position) == after_alter
    assert Position.parse(event.position) < after_alter
    # the rows before it were sent before it, with the columns of then; those after, with its column
    before_ddl = h.sent.index(event)
    sent_before = [c for m in h.sent[:before_ddl] if isinstance(m, Changes) for c in m.items]
    assert [(c.columns, c.values) for c in sent_before] == [(("id", "n"), ("1", "10"))]
    after = [(c.columns, c.values) for c in items(h) if c not in sent_before]
    assert after == [(("id", "n", "note"), ("2", "20", text("y")))]
    assert h.read.position == Position(after_alter.file, end)


def test_the_rows_handler_decides_a_tables_events_again_when_what_it_decided_from_changes(up, scratch_db):
    """Each table id's decision (`EventPlan`) is taken again for its next events only while
    it holds: the table's rows found unreadable, and the daemon's targets that take events
    as they are, each make it decide anew from the next event on, in one stream."""
    db = scratch_db
    up.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, n INT)")
    create = up.execute(f"SHOW CREATE TABLE `{db}`.t")[0][1]
    marks = [here(up)]
    for pair in range(4):
        for i in (2 * pair + 1, 2 * pair + 2):
            up.execute(f"INSERT INTO `{db}`.t VALUES ({i}, {10 * i})")
        marks.append(here(up))
    h = handlers(up, [Route(db, "t", "m", "t")], Filters(), {f"{db}.t": create}, marks[0])
    h.rows.retarget({"m.t": row_shape(parse_table(create, shown=True))})
    key = f"{db}.t"
    then = {
        marks[1].pos: lambda: h.rows.problems.mark([key], "a DDL it could not follow"),
        marks[2].pos: lambda: h.rows.problems.clear(key),
        marks[3].pos: lambda: h.rows.retarget({}),
    }

    replay(up, db, marks[0], marks[4].pos, h, then)

    got = items(h)
    assert [type(i).__name__ for i in got] == ["RowEvent"] * 2 + ["Dropped"] * 2 + ["RowEvent"] * 2 + ["Change"] * 2
    assert [e.rows for e in got[:2] + got[4:6]] == [1, 1, 1, 1]  # (as the binlog holds them, counted)
    assert [(c.op, c.values) for c in got[6:]] == [("I", ("7", "70")), ("I", ("8", "80"))]


def test_a_routes_events_of_fewer_rows_than_the_least_go_decoded_and_the_others_extended(up, scratch_db):
    """With extract columns, an event of at least `EXTEND_MIN_ROWS` rows goes as the binlog
    holds it, their values appended; one of fewer goes as its rows, whether it is small (then
    decoded first) or big (extended first). Each has the id it would have had either way: a
    table's events count up within their transaction."""
    db = scratch_db
    up.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, n INT NOT NULL, s VARCHAR(1000) NOT NULL)")
    create = up.execute(f"SHOW CREATE TABLE `{db}`.t")[0][1]
    least = EXTEND_MIN_ROWS
    start = here(up)
    values = lambda ids: ", ".join(f"({i}, {i}, '')" for i in ids)  # noqa: E731
    many = range(1000, 1000 + EXTEND_PROBE_BYTES // 4)  # (more bytes than the probe's)
    big = "x" * (EXTEND_PROBE_BYTES // 2 + 1)
    up.execute(
        [
            f"INSERT INTO `{db}`.t VALUES {values(range(1, least))}",
            f"BEGIN; INSERT INTO `{db}`.t VALUES {values(range(100, 100 + least))}; "
            f"INSERT INTO `{db}`.t VALUES (200, 200, ''); COMMIT",
            f"INSERT INTO `{db}`.t VALUES (300, 300, '{big}'), (301, 301, '{big}')",
            f"INSERT INTO `{db}`.t VALUES {values(many)}",
        ]
    )
    end = here(up).pos
    h = handlers(up, [Route(db, "t", "m", "t", {"source": "_source"})], Filters(), {f"{db}.t": create}, start)
    merged = parse_table(
        "CREATE TABLE t (id INT NOT NULL, n INT NOT NULL, s VARCHAR(1000) NOT NULL, "
        "_source VARCHAR(64) NOT NULL, PRIMARY KEY (id, _source)) DEFAULT CHARSET=utf8mb4",
        shown=True,
    )
    h.rows.retarget({"m.t": row_shape(merged)})

    replay(up, db, start, end, h)

    got = items(h)
    kinds = [type(i).__name__ for i in got]
    assert kinds == ["Change"] * (least - 1) + ["RowEvent", "Change"] + ["Change"] * 2 + ["RowEvent"]
    first, wide, last = got[: least - 1], got[least - 1], got[least]
    row = lambda i, s="": (str(i), str(i), text(s), "'up1'")  # noqa: E731
    assert [c.values for c in first] == [row(i) for i in range(1, least)]
    assert [c.id[2] for c in first] == [row_index(1, r) for r in range(1, least)]
    assert (wide.rows, wide.id[2]) == (least, event_end(1))
    assert [r.values for r in wide.codec.changes(wide)] == [row(i) for i in range(100, 100 + least)]
    # (the second event of its table in that transaction)
    assert (last.values, last.id[2], last.id[:2]) == (row(200), row_index(2, 1), wide.id[:2])
    # a big event of two rows: decoded; a big one of many: extended
    assert [c.values for c in got[least + 1 : least + 3]] == [row(300, big), row(301, big)]
    assert (got[-1].rows, [r.values[0] for r in got[-1].codec.changes(got[-1])]) == (len(many), [str(i) for i in many])


def test_a_table_the_library_decodes_is_its_again_in_each_stream_its_maps_are_read_in(up, scratch_db):
    """A table map seen before (`TableMapHandler.steady`) is handled at once only within the
    stream it was handled in: a stream opened again has its own set of tables whose rows the
    library decodes (an INET6 column: our codec leaves it to the library), and its rows must go
    that way there too, not be read without it."""
    db = scratch_db
    up.execute(f"CREATE TABLE `{db}`.g (id INT PRIMARY KEY, a INET6 NOT NULL)")
    create = up.execute(f"SHOW CREATE TABLE `{db}`.g")[0][1]
    marks = [here(up)]
    for i in (1, 2, 3, 4):
        up.execute(f"INSERT INTO `{db}`.g VALUES ({i}, '::{i}')")
        marks.append(here(up))
    h = handlers(up, [Route(db, "g", "m", "g")], Filters(), {f"{db}.g": create}, marks[0])

    replay(up, db, marks[0], marks[2].pos, h)  # (two transactions: the second map seen before)
    replay(up, db, marks[2], marks[4].pos, h)  # (another stream: its maps parsed before, too)

    assert [m for m in h.sent if isinstance(m, DDLEvent)] == []  # (no table reported unreadable)
    assert h.table_maps.codecs and set(h.table_maps.codecs.values()) == {None}  # (the library's)
    got = items(h)
    assert [(type(c).__name__, c.op, c.values[0]) for c in got] == [("Change", "I", str(i)) for i in (1, 2, 3, 4)]


def test_a_table_a_decision_set_from_a_row_on_is_said_there_as_a_pinned_ddl_before_its_rows(up, scratch_db):
    """A pin (set-schema's table) reached at a row event, not at a DDL: the worker takes the
    table there and says so as a pinned DDL of the shard, where the pin holds from, after the
    rows before it and before the transaction's rows, which hold the new column. A resumed
    shard's scratch table of its paused time is reshaped by it (live stories 610888: without
    it, a column set-schema gave the shard lost its values of then)."""
    db = scratch_db
    up.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, n INT)")
    old = up.execute(f"SHOW CREATE TABLE `{db}`.t")[0][1]
    up.execute("ALTER TABLE t ADD COLUMN b INT NULL FIRST", db)  # (the DDL skipped: not read)
    new = up.execute(f"SHOW CREATE TABLE `{db}`.t")[0][1]
    start = here(up)
    up.execute("INSERT INTO t (id, n) VALUES (1, 10)", db)
    pinned_at = here(up)
    up.execute("INSERT INTO t VALUES (7, 2, 20)", db)
    end = here(up).pos
    pin = Pin((file_sequence(pinned_at.file), pinned_at.pos, PIN), f"{db}.t", new)
    h = handlers(up, [Route(db, "t", "m", "t")], Filters(), {f"{db}.t": old}, start, (pin,))

    replay(up, db, start, end, h)

    # (the row before the pin has b too, which the table of then lacks: unreadable, said so)
    ddls = [m for m in h.sent if isinstance(m, DDLEvent)]
    assert [m.change.kind for m in ddls] == [ChangeKind.UNREADABLE, ChangeKind.PINNED]
    said = ddls[1]
    assert said.target == "m.t"
    assert said.id == (file_sequence(pinned_at.file), pinned_at.pos, 0)
    assert Position.parse(said.position) == pinned_at
    assert [c.name for c in said.change.before.columns] == ["id", "n"]
    assert [c.name for c in said.change.after.columns] == ["b", "id", "n"]
    after = [(c.columns, c.values) for c in items(h) if c.id > said.id]
    assert after == [(("b", "id", "n"), ("7", "2", "20"))]
    assert all(c.id < said.id for m in h.sent[: h.sent.index(said)] if isinstance(m, Changes) for c in m.items)


@pytest.mark.parametrize("entry", ["a way out's pin", "a first start's"])
def test_a_worker_started_at_a_ddl_it_cannot_follow_says_it_as_the_table_its_way_out_gave(up, scratch_db, entry):
    """L75: a shard paused by a conflict ran a DDL its worker cannot follow (its park ended
    there), and `binlog replace` gave its table, pinned at that DDL. The daemon, started
    again, read its source from that DDL, with the pin's table (`SourceState.schemas_at`)
    but not the pin ahead (`pins_from`): the worker said the DDL as one it cannot follow,
    and the shard's window of its paused time could not replay its rows. It says it as the
    pinned table now, and the rows after it are read with that table. A first start's entry
    there, at the same index, stands for the table before the DDL, which its shard has not
    decided on: the DDL is said as one it cannot follow (`SourceState.pins_from`)."""
    db = scratch_db
    up.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, n INT)")
    old = up.execute(f"SHOW CREATE TABLE `{db}`.t")[0][1]
    start = here(up)
    up.execute("SET STATEMENT div_precision_increment=6 FOR ALTER TABLE t ADD COLUMN b INT NULL", db)
    given = up.execute(f"SHOW CREATE TABLE `{db}`.t")[0][1]
    up.execute("INSERT INTO t VALUES (1, 10, 5)", db)
    end = here(up).pos
    state = SourceState("up1", Flavor.MARIADB)
    at = (file_sequence(start.file), start.pos, PIN)
    if entry == "a way out's pin":
        state.record((file_sequence(start.file), 1, 0), {f"{db}.t": old})
        state.pin(Pin(at, f"{db}.t", given))
    else:
        state.record(at, {f"{db}.t": old})
    decided = {f"{db}.t": at} if entry == "a way out's pin" else {}
    h = handlers(up, [Route(db, "t", "m", "t")], Filters(), state.schemas_at(start), start,
                 state.pins_from(start, decided))

    replay(up, db, start, end, h)

    ddls = [m for m in h.sent if isinstance(m, DDLEvent)]
    if entry == "a first start's":
        assert [m.change.kind for m in ddls] == [ChangeKind.UNSUPPORTED]
        # (its rows cannot be read: its schema is not known)
        assert [type(c) for c in items(h)] == [Dropped]
        return
    assert [m.change.kind for m in ddls] == [ChangeKind.PINNED]
    assert [c.name for c in ddls[0].change.after.columns] == ["id", "n", "b"]
    assert [(c.columns, c.values) for c in items(h)] == [(("id", "n", "b"), ("1", "10", "5"))]
