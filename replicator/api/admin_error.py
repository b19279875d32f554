"""The admin API's error: what a request cannot get, with the HTTP status that says so."""

from __future__ import annotations


class AdminError(Exception):
    """A request that cannot be done: the HTTP status and a message that says why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
