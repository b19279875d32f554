"""What the import of a DM task did with one DM field: a note, printed for the operator to
review, and kept as comments in the file it writes."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class NoteKind(StrEnum):
    MAPPED = "mapped"  # set in our config, or our behaviour already; the message says how it differs
    NOT_NEEDED = "not needed"  # DM's own machinery (relay log, dump files, heartbeat table): nothing lost
    OPERATOR = "operator"  # mapped, but the operator must act before `run` (a password variable)
    NOT_MAPPED = "not mapped"  # dropped or a placeholder: the task behaves unlike DM's until fixed


@dataclass(frozen=True)
class Note:
    """`file`: the DM file the field is in; `field`: its path there (list indexes from 0)."""

    file: str
    field: str
    kind: NoteKind
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "field": self.field, "kind": str(self.kind), "message": self.message}

    def line(self, task_file: str) -> str:
        """One line: the file named only when it is not the task file (a source file's)."""
        where = self.field if self.file == task_file else f"{self.file}: {self.field}"
        return f"{self.kind}: {where}: {self.message}"


Notes = tuple[Note, ...]
