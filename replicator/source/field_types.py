"""The binlog's column type codes (a table map's, a row event's): pymysql's, and the three
of the temporal types since MySQL 5.6 that only the binlog gives.

Not pymysqlreplication's copy: importing it imports that whole package (its stream, events
and rows), 20-40 ms of the daemon's start, which decodes no event itself."""

from pymysql.constants.FIELD_TYPE import *  # noqa: F403 (the codes, as MySQL numbers them)

TIMESTAMP2 = 17
DATETIME2 = 18
TIME2 = 19
