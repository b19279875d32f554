"""Downstream flavors: which engine receives the merged table decides how far the
lattice may widen a type and how DDL is spelled."""

from __future__ import annotations

from enum import StrEnum


class Flavor(StrEnum):
    MYSQL = "mysql"
    MARIADB = "mariadb"
    TIDB = "tidb"

    @classmethod
    def parse(cls, value: str | Flavor) -> Flavor:
        try:
            return cls(str(value).lower())
        except ValueError:
            names = ", ".join(f.value for f in cls)
            raise ValueError(f"unknown flavor {value!r}: expected one of {names}") from None
