"""Downstream flavors: which engine receives the merged table decides how far the
lattice may widen a type and how DDL is spelled. What one engine does differently is a
commented flag of its `Rules` (sqlglot's dialects are the model): the code that asks
names the flag, not the engine."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Flavor(StrEnum):
    MYSQL = "mysql"
    MARIADB = "mariadb"
    TIDB = "tidb"

    @classmethod
    def parse(cls, value: str | Flavor) -> Flavor:
        # (asked for every column a schema is rendered or read with: hundreds of thousands
        # of times in a big group's DDL, where the enum's own lookup would show)
        if value.__class__ is cls:
            return value  # type: ignore[return-value]
        try:
            return cls(str(value).lower())
        except ValueError:
            names = ", ".join(f.value for f in cls)
            raise ValueError(f"unknown flavor {value!r}: expected one of {names}") from None

    @property
    def rules(self) -> Rules:
        return _RULES[self]


@dataclass(frozen=True)
class Rules:
    # -- types: what an ALTER may make of a column in place (lattice/join.py, typejoin.py) --
    # a column's type may change family in place, converting its values (INT to VARCHAR);
    # TiDB changes a type only within its family, and only widening
    converts_families: bool = True
    # an integer or a float may change signedness; a decimal its precision and scale
    changes_signedness: bool = True
    changes_decimal_shape: bool = True
    # with a multi-byte charset, CHAR/VARCHAR and TEXT join (as TEXT), and a VARCHAR may be
    # made longer than the row allows by becoming a TEXT (docs/design.md "Character types": not on TiDB)
    joins_multibyte_text: bool = True
    # -- values the server gives rows (lattice/join.py, diff_columns.py, limits.py) --
    # an ENUM NOT NULL without a default takes its first member (checked on MariaDB 10.11
    # under STRICT_TRANS_TABLES; MySQL refuses the row)
    enum_takes_first_member: bool = False
    # a VIRTUAL column not in an index is computed on read, cut to its type: no row is
    # refused when it is added or changed
    virtual_cut_on_read: bool = False
    # a JSON NOT NULL column added without a default gives existing rows '' (no JSON):
    # the diff fills them and holds the column's CHECK off for them
    blank_json_on_add: bool = False
    # a UNIQUE key longer than the key limit is kept as a hidden hash (no length limit)
    hashes_long_unique_keys: bool = False
    # CURRENT_TIMESTAMP is a default of a column of any type, its value converted (a
    # VARCHAR gets the text, an INT the number): MariaDB; MySQL and TiDB take it only for
    # DATETIME and TIMESTAMP (L52)
    now_default_any_type: bool = False
    # -- DDL (lattice/diff_*.py, render.py, old_name_index.py) --
    # a normal column can be made STORED generated in place (else dropped and added)
    generates_in_place: bool = True
    # a MODIFY that converts values may run without strict mode's check of the conversion,
    # which copying tables refuse (the prefix of the statement), else None
    lenient_prefix: str | None = None
    # a MODIFY of a string column to BIGINT UNSIGNED reads each value as a signed 64-bit
    # integer: values above 2**63 - 1 become 2**63 - 1 (MariaDB 10.11; an UPDATE, and a
    # MODIFY from a DECIMAL, convert them exactly): the diff goes by a DECIMAL(20,0) (L47)
    clips_unsigned_from_strings: bool = False
    # a CHECK is dropped with DROP CONSTRAINT (else DROP CHECK)
    drops_check_as_constraint: bool = False
    # a CHECK ... NOT ENFORCED exists in the table (MariaDB takes the clause and drops the check)
    keeps_unenforced_checks: bool = True
    # a generated column takes a NOT NULL clause (MariaDB accepts no NULL clause on one)
    not_null_on_generated: bool = True
    # a BLOB/TEXT/JSON default: written as a literal, as an expression (MySQL 8), or not
    # at all (TiDB: the column is nullable instead)
    blob_default: str = "literal"
    # ADD INDEX IF NOT EXISTS, for the index a pending rename's old column gets
    index_if_not_exists: bool = False
    # the name utf8mb3 is spelled with (TiDB knows it as utf8)
    utf8mb3: str = "utf8mb3"
    # -- what a statement made of a table on the server it ran on (lattice/apply.py,
    # definitions.py, charsets.py, sqltext.py): a shard's upstream, or a table read back --
    # its executable comments /*M! ... */ run (other servers take them as comments)
    runs_mariadb_comments: bool = False
    # the collation utf8mb4 gets where a statement names none
    utf8mb4_collation: str = "utf8mb4_general_ci"
    # a CHECK without a name is named after its column if it is a column's, else
    # CONSTRAINT_n (MySQL: <table>_chk_n for both)
    names_checks_by_column: bool = False
    # the error two checks of one name give (MySQL: ER_CHECK_CONSTRAINT_DUP_NAME)
    duplicate_check_error: int = 3822
    # a column's inline REFERENCES makes a foreign key and its index (MySQL 8 ignores it)
    inline_references: bool = False
    # JSON is a LONGTEXT with a json_valid() check, and a check of its own on a JSON
    # column takes that one's place: what is left is the LONGTEXT
    json_is_checked_longtext: bool = False


_RULES = {
    Flavor.MARIADB: Rules(
        enum_takes_first_member=True,
        virtual_cut_on_read=True,
        blank_json_on_add=True,
        hashes_long_unique_keys=True,
        now_default_any_type=True,
        lenient_prefix="SET STATEMENT sql_mode = 'NO_ENGINE_SUBSTITUTION' FOR ",
        clips_unsigned_from_strings=True,
        drops_check_as_constraint=True,
        keeps_unenforced_checks=False,
        not_null_on_generated=False,
        index_if_not_exists=True,
        runs_mariadb_comments=True,
        names_checks_by_column=True,
        duplicate_check_error=1826,
        inline_references=True,
        json_is_checked_longtext=True,
    ),
    Flavor.MYSQL: Rules(blob_default="expression", utf8mb4_collation="utf8mb4_0900_ai_ci"),
    Flavor.TIDB: Rules(
        converts_families=False,
        changes_signedness=False,
        changes_decimal_shape=False,
        joins_multibyte_text=False,
        generates_in_place=False,
        blob_default="none",
        utf8mb3="utf8",
        utf8mb4_collation="utf8mb4_bin",
    ),
}
