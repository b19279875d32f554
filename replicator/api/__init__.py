"""The admin API, below the daemon: its HTTP server (`admin.py`), the operations an
operator asks of a running daemon (`operations.py`, `binlog_ops.py`, `blocked.py`) and what
they may ask of it (`daemon_api.py`, a protocol the daemon meets: nothing here imports it)."""
