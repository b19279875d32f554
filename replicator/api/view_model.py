"""The values the live view at the admin API's `/` is rendered from (`view_html.py`),
gathered on the daemon's main thread (`view_data.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from replicator.api.samples import Sample


@dataclass(frozen=True)
class GroupPage:
    ddl: Mapping[str, Any]  # show-ddl-state's answer (`operations.ddl_state`), its matrix too
    history: tuple[Mapping[str, Any], ...]  # its newest entries first
    versions: int  # entries in its whole history


@dataclass(frozen=True)
class LivePage:
    status: Mapping[str, Any]  # query-status's answer (`status.status`)
    groups: tuple[GroupPage, ...]  # by target
    samples: tuple[Sample, ...]  # oldest first
    every: float  # seconds between two samples
    now: float  # when gathered (seconds since the epoch)
