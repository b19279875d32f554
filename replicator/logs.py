"""The daemon's log lines: every line names the task; a line about an event also
names its source, shard and binlog position (given as `extra=` by the caller).
Text for people, one JSON object per line for log shippers."""

from __future__ import annotations

import json
import logging
import time

CONTEXT = ("source", "shard", "position")


class _Context(logging.Filter):
    def __init__(self, task: str):
        super().__init__()
        self.task = task

    def filter(self, record: logging.LogRecord) -> bool:
        record.task = self.task
        record.context = "".join(
            f" {k}={getattr(record, k)}" for k in CONTEXT if getattr(record, k, None) is not None
        )
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "task": getattr(record, "task", None),
            "message": record.getMessage(),
        }
        for key in CONTEXT:
            if getattr(record, key, None) is not None:
                data[key] = getattr(record, key)
        if record.exc_info:
            data["traceback"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


def configure(task: str, level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler()
    handler.addFilter(_Context(task))
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s task=%(task)s %(name)s: %(message)s%(context)s")
        )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
