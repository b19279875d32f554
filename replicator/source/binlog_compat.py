"""Make python-mysql-replication 1.0.17 survive what newer servers write.

MariaDB writes optional table-map metadata types the library does not know (for
example 20, for compressed columns); its parser raises and the stream would stop
for every table of the source. Our worker does not need that metadata: the schema
tracker supplies names, signedness and character sets. So when it cannot be read,
the rest of it is skipped and the table map goes on without it.

And when the server connection drops, the library reconnects by itself, at once,
from the event after the last one it read: mid-transaction, out of our sight, with
no backoff and no count. Our worker reconnects instead, from the start of the
transaction it was reading, after a backoff, and says so in status and metrics.
"""

from __future__ import annotations

import logging

from pymysqlreplication import binlogstream
from pymysqlreplication.constants import BINLOG
from pymysqlreplication.row_event import OptionalMetaData, TableMapEvent

log = logging.getLogger("shardmerge.binlog")
_original = TableMapEvent._get_optional_meta_data


def _tolerant(self: TableMapEvent) -> OptionalMetaData:
    try:
        return _original(self)
    except (ValueError, IndexError, KeyError) as exc:
        remaining = self.packet.bytes_to_read() - BINLOG.BINLOG_CHECKSUM_LEN
        if remaining > 0:
            self.packet.read(remaining)
        log.debug("table map of %s.%s: optional metadata skipped (%s)", self.schema, self.table, exc)
        return OptionalMetaData()


def install() -> None:
    TableMapEvent._get_optional_meta_data = _tolerant
    # the error codes after which the library reconnects by itself (2013 lost, 2006 gone)
    binlogstream.MYSQL_EXPECTED_ERROR_CODES[:] = []
