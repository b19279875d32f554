"""A value of a parsed DM file with its field path, so that a refusal names the file and the
field (`task.yaml: mysql-instances[1].meta.binlog-pos: expected an integer ...`) as our own
config's errors do. Unlike the config's walker, an unknown field is no error here but a note:
DM files carry many fields we have no use for, and a DM version newer than this import may
add more."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from replicator.cli.dm.notes import Note, NoteKind, Notes
from replicator.config import ConfigError, check_name

_MISSING: Any = object()
# Documentation templates ("${host}") and DM's test harness ("binlog-name-placeholder-1",
# "pos-holder") leave values to fill in; the harness's are caught by the value checks.
_TEMPLATE = re.compile(r"\$\{[^}]*\}")


@dataclass(frozen=True)
class Field:
    where: str  # the file
    path: str
    value: Any = _MISSING

    @property
    def given(self) -> bool:
        """Set to something: DM writes unset fields as null, "", [] or {} (`dmctl get-config`)."""
        if self.value is _MISSING or self.value is None:
            return False
        return not (isinstance(self.value, str | list | dict) and not self.value)

    def child(self, key: str) -> Field:
        path = f"{self.path}.{key}" if self.path else key
        if isinstance(self.value, dict) and key in self.value:
            return Field(self.where, path, self.value[key])
        return Field(self.where, path)

    def error(self, message: str) -> ConfigError:
        return ConfigError(
            f"{self.where}: {self.path}: {message}" if self.path else f"{self.where}: {message}"
        )

    def note(self, kind: NoteKind, message: str) -> Note:
        return Note(self.where, self.path, kind, message)

    def mapping(self) -> dict[Any, Any]:
        if not self.given:
            return {}
        if not isinstance(self.value, dict):
            raise self.error(f"expected a mapping, got {_shown(self.value)}")
        return self.value

    def entries(self) -> list[tuple[str, Field]]:
        """A mapping's keys and values (rule name -> rule)."""
        return [(str(key), self.child(key)) for key in self.mapping()]

    def items(self) -> list[Field]:
        if not self.given:
            return []
        if not isinstance(self.value, list):
            raise self.error(f"expected a list, got {_shown(self.value)}")
        return [Field(self.where, f"{self.path}[{i}]", item) for i, item in enumerate(self.value)]

    def text(self, *, required: bool = False) -> str | None:
        """A string (a number is read as its digits: `db-name: 2024`), None when unset."""
        if not self.given:
            if required:
                raise self.error("missing; DM requires it")
            return None
        if isinstance(self.value, bool) or not isinstance(self.value, str | int | float):
            raise self.error(f"expected a string, got {_shown(self.value)}")
        text = str(self.value)
        if _TEMPLATE.search(text):
            raise self.error(f"{text!r} is a template placeholder: fill in the value, then import again")
        return text

    def texts(self) -> list[str]:
        return [t for t in (item.text() for item in self.items()) if t is not None]

    def flag(self) -> bool | None:
        if not self.given:
            return None
        if not isinstance(self.value, bool):
            raise self.error(f"expected true or false, got {_shown(self.value)}")
        return self.value

    def check(self, convert: Callable[[Any], Any]) -> Any:
        """The value through one of replicator.config's checks; its complaint names this field."""
        try:
            return convert(self.value)
        except ConfigError:
            raise  # already names its field
        except ValueError as exc:
            raise self.error(str(exc)) from None

    def unknown(self, known: Iterable[str]) -> Notes:
        """A note for each key of this mapping that the import does not read."""
        names = tuple(known)
        notes = []
        for key, child in self.entries():
            if key in names:
                continue
            close = difflib.get_close_matches(key, names, n=1, cutoff=0.75)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            notes.append(child.note(NoteKind.NOT_MAPPED, f"unknown DM field{hint}: not read"))
        return tuple(notes)


def safe_name(field: Field, what: str) -> tuple[str, Notes]:
    """A DM name as a task or source id here (letters, digits, '-' and '_': it is part of
    shard ids and meta rows), other characters made '_', noted."""
    text = field.text(required=True) or ""
    try:
        return check_name(text), ()
    except ValueError:
        pass
    name = re.sub(r"[^A-Za-z0-9_-]", "_", text)[:64]
    return name, (field.note(NoteKind.MAPPED, f"{what} {name!r}: ids here are letters, digits, '-' and '_'"),)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
