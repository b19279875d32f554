"""A member of a task (issue 75): a daemon under its name, in the epoch it joined with (a
daemon started again under the same name is another epoch: what the one before still had
under way must not commit)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Member:
    name: str
    epoch: int
