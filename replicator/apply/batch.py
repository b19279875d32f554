"""A batch of changes on its way to one partition (`Batch`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from replicator.source.messages import Change, RowEvent


@dataclass(frozen=True)
class Batch:
    """A value: the daemon's thread makes it, one partition's thread commits it. Every
    batch remembers the version of each target table it was built for; at commit, under
    the table's schema lock, a batch built for an older major version is rebuilt for the
    current table rather than committed as is (docs/design.md "Batches checked at commit")."""

    part: int
    changes: list[Change | RowEvent]  # (nothing changes the list once the batch is made)
    majors: Mapping[str, int]  # target -> major version the batch was built for
    seq: int = 0  # (which batch it is in `Pending`: what it holds in flight)
    as_is: bool = True  # row events may go as they are (False once the server refused the batch)
