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

from pymysqlreplication import binlogstream
from pymysqlreplication.constants import BINLOG
from pymysqlreplication.event import BinLogEvent
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
