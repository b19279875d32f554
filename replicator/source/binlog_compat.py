"""Make python-mysql-replication 1.0.17 survive what newer servers write.

MariaDB writes optional table-map metadata types the library does not know (for
example 20, for compressed columns); its parser raises and the stream would stop
for every table of the source. Our worker does not need that metadata: the schema
tracker supplies names, signedness and character sets. So when it cannot be read,
the rest of it is skipped and the table map goes on without it.

A table map precedes every transaction's rows, the same bytes each time until the
table changes; the library parses it afresh each time (a third of a worker's CPU
on single-row transactions). A map whose bytes were seen before takes the parse of
those bytes: the same bytes mean the same table id, names, types and metadata.

And when the server connection drops, the library reconnects by itself, at once,
from the event after the last one it read: mid-transaction, out of our sight, with
no backoff and no count. Our worker reconnects instead, from the start of the
transaction it was reading, after a backoff, and says so in status and metrics.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator

from pymysql import err
from pymysql.constants import CR
from pymysql.protocol import MysqlPacket
from pymysqlreplication import binlogstream
from pymysqlreplication.constants import BINLOG
from pymysqlreplication.event import BinLogEvent
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import OptionalMetaData, TableMapEvent

log = logging.getLogger("shardmerge.binlog")
_original = TableMapEvent._get_optional_meta_data
_parse = TableMapEvent.__init__
_PARSED_MAX = 8192  # table maps kept (a source's tables, each in a version or two)
_parsed: dict[bytes, dict] = {}
# what belongs to the event read now, not to the table map's bytes
_PER_EVENT = frozenset(
    ("packet", "table_map", "event_type", "timestamp", "event_size", "_ctl_connection", "_is_event_valid")
)


def _tolerant(self: TableMapEvent) -> OptionalMetaData:
    try:
        return _original(self)
    except (ValueError, IndexError, KeyError) as exc:
        remaining = self.packet.bytes_to_read() - BINLOG.BINLOG_CHECKSUM_LEN
        if remaining > 0:
            self.packet.read(remaining)
        log.debug("table map of %s.%s: optional metadata skipped (%s)", self.schema, self.table, exc)
        return OptionalMetaData()


def _parsed_once(self: TableMapEvent, from_packet, event_size, table_map, ctl_connection, **kwargs) -> None:
    inner = from_packet.packet  # the server's packet; the wrapper has read the event header
    body = bytes(inner._data[inner._position : inner._position + event_size])
    known = _parsed.get(body)
    if known is None:
        _parse(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
        if self._processed and getattr(self, "table_obj", None) is not None:
            if len(_parsed) >= _PARSED_MAX:
                _parsed.clear()
            _parsed[body] = {k: v for k, v in self.__dict__.items() if k not in _PER_EVENT}
        return
    BinLogEvent.__init__(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
    self.__dict__.update(known)
    table_map[self.table_id] = self.table_obj


def install() -> None:
    TableMapEvent._get_optional_meta_data = _tolerant
    TableMapEvent.__init__ = _parsed_once
    # the error codes after which the library reconnects by itself (2013 lost, 2006 gone)
    binlogstream.MYSQL_EXPECTED_ERROR_CODES[:] = []


# -- the events of every transaction, from their bytes ----------------------------------------
ROWS_V1 = frozenset((BINLOG.WRITE_ROWS_EVENT_V1, BINLOG.UPDATE_ROWS_EVENT_V1, BINLOG.DELETE_ROWS_EVENT_V1))
LIGHT = ROWS_V1 | {BINLOG.XID_EVENT, BINLOG.MARIADB_GTID_EVENT, BINLOG.HEARTBEAT_LOG_EVENT}
# what the worker reads through the library: the rest is skipped unread
LIBRARY = frozenset(
    (
        BINLOG.QUERY_EVENT,
        BINLOG.ROTATE_EVENT,
        BINLOG.FORMAT_DESCRIPTION_EVENT,
        BINLOG.TABLE_MAP_EVENT,
        BINLOG.GTID_LOG_EVENT,
        BINLOG.WRITE_ROWS_EVENT_V2,
        BINLOG.UPDATE_ROWS_EVENT_V2,
        BINLOG.DELETE_ROWS_EVENT_V2,
        *ROWS_V1,
    )
)
TABLE_MAP = BINLOG.TABLE_MAP_EVENT
_HEADER = struct.Struct("<IBIIIH")  # timestamp, type, server id, size, next position, flags
_GTID = struct.Struct("<QI")  # MariaDB's: sequence number, domain
_SIZE = struct.Struct("<I")


class LightEvent:
    """An event as its bytes say: its type, time and where the next event starts, the
    bytes themselves (header to checksum), the table of a rows event, the GTID of a
    GTID event."""

    __slots__ = ("event_type", "log_pos", "raw", "server_id", "table_id", "timestamp")

    def __init__(self, raw: bytes) -> None:
        self.timestamp, self.event_type, self.server_id, _, self.log_pos, _ = _HEADER.unpack_from(raw, 0)
        self.raw = raw
        self.table_id = int.from_bytes(raw[19:25], "little") if self.event_type in ROWS_V1 else None

    @property
    def gtid(self) -> str:
        seq, domain = _GTID.unpack_from(self.raw, 19)
        return f"{domain}-{self.server_id}-{seq}"


class LightTableMap(LightEvent):
    """A table map whose bytes the library parsed before (`_parsed_once`): the parse
    again, with this event's bytes and position (and its bitmap of the columns that take
    NULL, which the worker compares with the tracked table: without it a table map read
    again, after a rewind, passed a column a skipped DDL made NULL-able; live stories 230031)."""

    __slots__ = ("columns", "null_bitmask", "schema", "table", "table_obj")

    def __init__(self, raw: bytes, known: dict) -> None:
        super().__init__(raw)
        self.table_id = known["table_id"]
        self.schema, self.table = known["schema"], known["table"]
        self.columns, self.table_obj = known["columns"], known["table_obj"]
        self.null_bitmask = known.get("null_bitmask")


def event_bytes(event) -> bytes:
    """An event's bytes as the binlog holds them (the packet's, past its OK byte)."""
    if isinstance(event, LightEvent):
        return event.raw
    return bytes(event.packet.packet._data[1:])


def name_text(value) -> str | None:
    """A schema or table name an event holds, as text."""
    if value is None:
        return None
    text = value.decode() if isinstance(value, bytes) else str(value)
    return text or None  # a query run with no default database


class Stream(binlogstream.BinLogStreamReader):
    """The library's stream (its connection, registration and table maps), read by
    our loop: `LightEvent`s where the bytes are enough, the library's events for the
    rest. `library_tables`: table ids whose rows the library decodes (our codec
    cannot), which go its way."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.library_tables: set[int] = set()

    def __iter__(self):
        return self._events()

    def fetchone(self):
        return next(self._events(), None)

    def _events(self):
        """The stream's events, as the library's `fetchone` reads them one call at a time:
        one generator for them all (a single-row transaction is four events, and a call per
        event, with its look-ups, was a tenth of a worker's CPU)."""
        if not self._BinLogStreamReader__connected_stream:
            self._BinLogStreamReader__connect_to_stream()
        if not self._BinLogStreamReader__connected_ctl:
            self._BinLogStreamReader__connect_to_ctl()
        checksum = BINLOG.BINLOG_CHECKSUM_LEN if self._BinLogStreamReader__use_checksum else 0
        library_tables, parsed = self.library_tables, _parsed
        light, rows_v1, library = LIGHT, ROWS_V1, LIBRARY
        for data in packets(self._stream_connection):
            first = data[0]
            if first == 0xFE and len(data) < 9:  # EOF: the dump ended (non-blocking)
                self.close()
                return
            if first != 0 or len(data) < 7:  # (not an event)
                continue
            kind = data[5]
            if kind == TABLE_MAP:
                size = _SIZE.unpack_from(data, 10)[0]
                known = parsed.get(data[20 : 1 + size - checksum])
                if known is not None:
                    event = LightTableMap(data[1:], known)
                    self.table_map[event.table_id] = event.table_obj  # as the library keeps it
                    yield event
                    continue
            if kind in light and (kind not in rows_v1 or _table_id(data) not in library_tables):
                # (the library's `log_pos`, where it would connect again, is left: a stream is
                # never connected again, our worker opens another)
                yield LightEvent(data[1:])
                continue
            if kind not in library:
                continue
            event = self._library_event(MysqlPacket(data, self._stream_connection.encoding))
            if event is not None:
                yield event

    def _library_event(self, packet):
        """One packet the library's way (its `fetchone` after the read)."""
        private = "_BinLogStreamReader__"
        wrapper = BinLogPacketWrapper(
            packet,
            self.table_map,
            self._ctl_connection,
            self.mysql_version,
            getattr(self, private + "use_checksum"),
            getattr(self, private + "allowed_events_in_packet"),
            getattr(self, private + "only_tables"),
            getattr(self, private + "ignored_tables"),
            getattr(self, private + "only_schemas"),
            getattr(self, private + "ignored_schemas"),
            getattr(self, private + "freeze_schema"),
            getattr(self, private + "ignore_decode_errors"),
            getattr(self, private + "verify_checksum"),
            getattr(self, private + "optional_meta_data"),
            getattr(self, private + "enable_logging"),
            getattr(self, private + "use_column_name_cache"),
            getattr(self, private + "post_header_lengths"),
        )
        kind = wrapper.event_type
        if kind == BINLOG.ROTATE_EVENT:
            self.log_pos = wrapper.event.position
            self.log_file = wrapper.event.next_binlog
            if wrapper.timestamp != 0:  # a server restart may reuse table ids (the library's reason)
                self.table_map = {}
        elif wrapper.log_pos:
            self.log_pos = wrapper.log_pos
        if kind == BINLOG.FORMAT_DESCRIPTION_EVENT and wrapper.event is not None:
            self.mysql_version = wrapper.event.mysql_version
            setattr(self, private + "post_header_lengths", wrapper.event.post_header_len)
        if kind == BINLOG.TABLE_MAP_EVENT and wrapper.event is not None:
            self.table_map[wrapper.event.table_id] = wrapper.event.get_table()
        event = wrapper.event
        if event is None or event.__class__ not in getattr(self, private + "allowed_events"):
            return None
        return event


def packets(conn) -> Iterator[bytes]:
    """The dump connection's packets' payloads, as pymysql's `_read_packet` reads each but
    with no packet object made (the library's events get one: `MysqlPacket`): a single-row
    transaction is four events, and the object, its checks and its reads a packet were a
    tenth of a worker's CPU. A lost connection or an error packet raises as pymysql does."""
    if conn._current_timeout != conn._read_timeout:
        conn._sock.settimeout(conn._read_timeout)
        conn._current_timeout = conn._read_timeout
    read = conn._rfile.read
    lost = "Lost connection to MySQL server during query"
    while True:
        parts = []
        while True:
            try:  # (an interrupted read is retried by Python itself: PEP 475)
                head = read(4)
                size = head[0] | head[1] << 8 | head[2] << 16 if len(head) == 4 else -1
                data = read(size) if size > 0 else b""
            except OSError as exc:
                conn._force_close()
                raise err.OperationalError(CR.CR_SERVER_LOST, f"{lost} ({exc})") from exc
            if size < 0 or len(data) < size:
                conn._force_close()
                raise err.OperationalError(CR.CR_SERVER_LOST, lost)
            if head[3] != conn._next_seq_id:
                conn._force_close()
                if head[3] == 0:  # (MariaDB's error packet at a shutdown)
                    raise err.OperationalError(CR.CR_SERVER_LOST, lost)
                wanted = conn._next_seq_id
                raise err.InternalError(f"Packet sequence number wrong - got {head[3]} expected {wanted}")
            conn._next_seq_id = (head[3] + 1) % 256
            if size < 0xFFFFFF and not parts:  # (the one packet of most payloads)
                break
            parts.append(data)
            if size < 0xFFFFFF:  # (a longer payload goes on in the next packet)
                data = b"".join(parts)
                break
        if data and data[0] == 0xFF:
            MysqlPacket(data, conn.encoding).raise_for_error()
        yield data


def _table_id(data: bytes) -> int:
    return int.from_bytes(data[20:26], "little")  # past the OK byte and the header
