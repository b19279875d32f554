"""The oracle: a story's shards as real tables on an upstream MariaDB, the product read
through `shardmerge plan --json` (`product.py`: it never calls the coordinator), the
downstream table on a downstream MariaDB, and the properties of issue 12 checked after
every step. A table the product names is compared as MariaDB makes it (`seen.py`):

- P0 the coordinator's schema of the shard that changed is what MariaDB reports for
  it (tracker fidelity), and no DDL MariaDB took is "unsupported";
- P1 sample rows (extremes of every type, NULLs) valid in an unblocked shard's table,
  and the story's own rows, go downstream by column name and read back equal;
- P2 the downstream table (SHOW CREATE TABLE parsed back) is the coordinator's
  propagated table;
- P3 every downstream statement is accepted, and rows already downstream keep the
  values of the columns still in some shard (see `lineage`);
- P4 the version's major part goes up exactly when a row valid downstream before the
  statements is not valid (or reads back otherwise) after them;
- P5 when every shard has the same table and none is blocked, downstream is that table;
- P6 a DDL pauses no shard but its own, and a shard paused by a conflict is resumed once
  its table plainly joins with the others' again (`plainly_joins`), or is the one it was
  accepted with (a join with a table it holds is that join). While renames are pending a
  paused shard may wait for them (docs/design.md "While a rename is pending"): not judged then.

A violation of P0, P2, a refused DDL (P3) or a crash (`plan` failing) ends
the story (`Violated`): what follows would be checked against a wrong state. P1, P4,
P5, P6 and lost data (P3, whose values are then forgotten) leave the state as it should be, so the story goes on and each kind of them counts
once (`violations`), which keeps a frequent one from hiding the others.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import traceback
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymysql

from replicator.servers import DOWNSTREAM_SESSION as APPLIER_SESSION
from tests.fuzz import model
from tests.fuzz.floors import Floors, Holds
from tests.fuzz.lineage import Lineages, renames_in, written
from tests.fuzz.model import TEXT_CAPACITY, Column, Family, Index, IndexKind, Table, key, table_of
from tests.fuzz.product import Product, Reply, State
from tests.fuzz.rows import (
    LONG_TEXT,
    RowRefused,
    check_rows,
    copy_row,
    run,
    run_all,
    same_kind,
    same_value,
    sample_rows,
    sample_values,
    store_row,
    store_statements,
    text_chars,
    varied_row,
)
from tests.fuzz.seen import Refused, Seen, as_chosen, named
from tests.fuzz.sql import quote_identifier

PROPERTIES = ("P0", "P1", "P2", "P3", "P4", "P5", "P6", "crash")
# kinds (by prefix) after which the story goes on (see the module docstring)
SOFT = ("P1", "P4", "P5", "P6", "P3:row-lost", "P3:data-lost", "P0:inspect")
UPSTREAM_SESSION = (
    "SET SESSION time_zone = '+00:00'",
    "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'",
)
DUPLICATE_KEY = 1062


@dataclass(frozen=True)
class Violation:
    prop: str  # P0..P6 or crash
    kind: str  # what exactly, to tell violations apart: "P3:refused-1265[MODIFY COLUMN size varchar]"
    step: int  # 0: the start
    message: str


class Violated(Exception):
    def __init__(self, violation: Violation):
        super().__init__(violation.message)
        self.violation = violation


class Inconclusive(Exception):
    """The story reached a state the properties do not speak about (rows of two
    shards colliding in a UNIQUE key downstream): neither a pass nor a violation."""


@dataclass(frozen=True)
class Kept:
    """A story row downstream: its shard and its values by lineage."""

    shard: str
    values: tuple[tuple[int, Any], ...]


class Oracle:
    def __init__(self, up, down, db: str, log: Callable[[str], None] | None = None):
        self.up, self.down, self.db = up, down, db
        self.target = f"{quote_identifier(db)}.`t`"
        self.product = Product(f"{db}.t", "mariadb")
        self.seen_up, self.seen_down = Seen(up, db), Seen(down, db)
        self.holds = Holds(down, db)
        self.log = log or (lambda _m: None)
        self.tables: dict[str, Table] = {}  # the present shards, as MariaDB reports them
        self.lineages = Lineages()
        self.floors = Floors()
        self.kept: dict[int, Kept] = {}
        # a kept row's values as its shard has them after its own ALTERs converted them
        # (a narrower DATETIME fraction, ...): downstream may hold either
        self.converted: dict[int, dict[int, Any]] = {}
        self.ids = itertools.count(1)
        self.probed: set[tuple[Table, Table]] = set()
        self.downstream: Table | None = None
        # for each shard that left, the column sets its rows are unique on (its table's
        # unique keys then, and the downstream table's): a unique key on none of them may
        # stay away downstream, its rows may repeat values there (L09)
        self.left_unique: list[set[frozenset[str]]] = []
        self.previous: Table | None = None  # downstream before the step's statements
        self.index = 0  # the step being checked
        self.step_kind = "start"  # alter | join | leave | other: tells P3 findings apart
        self.rows_checked = 0
        self.untracked: set[str] = set()  # shards whose schema a skip made differ from upstream
        self.violations: list[Violation] = []
        for statement in UPSTREAM_SESSION:
            run(up, statement)
        for statement in APPLIER_SESSION:
            run(down, statement)

    @property
    def state(self) -> State:
        """What the product holds after the last step (`shardmerge plan --json`)."""
        return self.product.state

    def seen(self, create: str, where: str, down: bool = False) -> Table:
        """The product's table `create` as MariaDB makes it (upstream: a shard's; `down`:
        the downstream table); one MariaDB refuses ends the story (P0 or P2)."""
        try:
            return (self.seen_down if down else self.seen_up)(create)
        except Refused as exc:
            self.fail("P2" if down else "P0", "refused-table", f"{where}: {exc}")

    def fail(self, prop: str, what: str, message: str, step: int | None = None) -> None:
        violation = Violation(prop, f"{prop}:{what}", self.index if step is None else step, message)
        if not violation.kind.startswith(SOFT):
            self.violations.append(violation)
            raise Violated(violation)
        if all(v.kind != violation.kind for v in self.violations):
            self.violations.append(violation)

    def accepted(self, shard: str) -> Table:
        """The table the product accepted the shard with, as MariaDB makes it: the shard's
        own table where the product says it accepted the one it tracks and P0 found that
        one to be MariaDB's (most steps: nothing to make)."""
        state = self.state.shards[shard]
        if state.accepted == state.table and shard in self.tables and shard not in self.untracked:
            return self.tables[shard]
        return self.seen(state.accepted, f"{shard}'s accepted table")

    def upstream_name(self, shard: str) -> str:
        return f"{quote_identifier(self.db)}.{quote_identifier(table_of(shard))}"

    # -- upstream ------------------------------------------------------------------------------
    def try_upstream(self, step: dict[str, str]) -> bool:
        """Run the step on the shard's real table; False when MariaDB refuses it (the
        step is then not part of the story). Keeps `tables` and the lineages current."""
        shard = step.get("shard") or step.get("set_schema")
        if "ddl" in step:
            ddl = step["ddl"]
            try:
                run(self.up, ddl)
            except pymysql.err.MySQLError:
                return False
            verb = ddl.lstrip().split(None, 1)[0].upper()
            if verb == "DROP":
                self.left_unique.append(_unique_on(self.tables.get(shard), self.downstream))
                self.tables.pop(shard, None)
                self.lineages.drop(shard)
                self.floors.let_go(shard)
                return True
            self.tables[shard] = self.read_shard(shard)
            if verb == "CREATE":
                self.lineages.create(shard, self.tables[shard])
            else:
                before = dict(self.lineages.current.get(shard, {}))
                renames = renames_in(ddl)
                self.lineages.alter(shard, renames, self.tables[shard])
                # a column dropped lets its lineage go, though the shard may hold it under
                # another name still: one it added that joined it (the old name of its own
                # rename, F45) vouches for no value the dropped one held
                renamed_away = {key(old) for old, _ in renames}
                now = self.lineages.current[shard]
                dropped = {lin for n, lin in before.items() if n not in now and n not in renamed_away}
                self.floors.let_go(shard, set(now.values()) - dropped)
                self.refresh_kept(shard)
            return True
        if "set_schema" in step:
            create = named(step["create"], quote_identifier(table_of(shard)))
            try:
                run(self.up, f"DROP TABLE IF EXISTS {quote_identifier(table_of(shard))}")
                run(self.up, create)
            except pymysql.err.MySQLError:
                return False
            self.tables[shard] = self.read_shard(shard)
            self.lineages.create(shard, self.tables[shard])
            return True
        if "skip" in step:
            self.untracked.add(step["skip"])
        return True

    def read_shard(self, shard: str) -> Table:
        """The shard's table as MariaDB reports it (SHOW CREATE TABLE)."""
        return model.read(self.up, self.db, table_of(shard))

    # -- the start and the steps ------------------------------------------------------------------
    def start(self, shards: dict[str, str]) -> dict[str, str]:
        """Create the shards' tables (those MariaDB takes), give them to the product,
        check. Returns the start as taken."""
        taken = {s: sql for s, sql in shards.items() if self.try_upstream({"shard": s, "ddl": sql})}
        if not taken:
            return taken
        try:
            statements = self.product.start(taken)
        except Exception as exc:
            self.fail("crash", type(exc).__name__, f"`shardmerge plan` failed on the start: {exc}")
        self.accept_lineages()
        for shard in taken:
            self.check_tracker(shard)
        self.run_downstream(statements)
        self.check_downstream()
        self.after(list(taken))
        return taken

    def step(self, raw: dict[str, str]) -> Reply:
        self.index += 1
        before_version = self.state.version
        before_blocked = set(self.state.blocked)
        pending = list(self.state.renames)
        shard = raw.get("shard") or raw.get("set_schema") or raw.get("skip")
        verb = (raw.get("ddl") or "").lstrip().split(None, 1)[0].upper() if raw.get("ddl") else ""
        self.step_kind = {"DROP": "leave", "CREATE": "join", "ALTER": "alter"}.get(verb, "other")
        try:
            decision = self.product.play(raw)
        except Exception as exc:
            where = traceback.extract_tb(exc.__traceback__)[-1]
            self.fail(
                "crash",
                type(exc).__name__,
                f"`shardmerge plan` failed: {type(exc).__name__}: {exc} "
                f"(at {Path(where.filename).name}:{where.lineno} in {where.name})",
            )
        self.log(
            f"  #{self.index} {shard}: {raw.get('ddl') or raw} -> {decision.result} {decision.version}"
            + "".join(f"\n      {s}" for s in decision.downstream)
        )
        self.accept_lineages(pending)
        if decision.result == "unsupported" and "ddl" in raw:
            self.fail("P0", "unsupported", f"MariaDB took `{raw['ddl']}`, the product did not: {decision.message}")
        if shard is not None:
            self.check_tracker(shard)
        old = self.previous = self.downstream
        units = self.p4_units(old) if decision.downstream and old is not None else []
        before = self.probe_units(units) if units else []
        self.run_downstream(decision.downstream)
        self.check_downstream()
        self.moved_by_renames(old, pending, decision.downstream)
        self.check_version(old, units, before, before_version, decision)
        self.check_kept_rows()
        self.check_pauses(shard, before_blocked)
        # the shard writes rows, and one other shard picked by the step itself (not by
        # the story around it, so a shrunk story writes the rows its original wrote)
        others = sorted(s for s in self.tables if s != shard)
        other = others[zlib.crc32(str(raw).encode()) % len(others)] if others else None
        self.after([shard, other], key=str(raw))
        return decision

    def moved_by_renames(self, old: Table | None, pending: list, statements: tuple[str, ...]) -> None:
        """The documented rule (docs/design.md "Rows no shard vouches for"): a rename's new name
        keeps the old column's width downstream, for the values it moved there, whose
        shards' later changes of the old name reach only the old name (F56).
        `pending`: the renames pending before the step, which it may finish: the last
        copy moves the old name's values as the step found them (F80).
        `statements`: the step's downstream ones, whose CHANGE COLUMN moves what rows
        got from a default too."""
        for statement in statements:
            for was, now in _CHANGED_NAME.findall(statement):
                if key(was) != key(now):
                    self.floors.renamed(key(was.replace("``", "`")), key(now.replace("``", "`")))
        records = [*pending, *(r for r in self.state.renames if r not in pending)]
        for record in records:
            pair = (key(record.old), key(record.new))
            if old is None or old.column(record.old) is None:
                continue
            # every definition the old name has downstream while the rename is pending: the
            # last copy moves its values as they are then, which a shard that changed its own
            # column upstream since (while paused) checked there only (F68)
            lineage = next((m[pair[1]] for m in self.lineages.current.values() if pair[1] in m), None)
            if lineage is not None:
                self.floors.while_pending(pair, lineage, old.column(record.old))
        still = {(key(r.old), key(r.new)) for r in self.state.renames}
        for record in pending:
            pair = (key(record.old), key(record.new))
            if pair not in still:
                # cancelled: the old name stays downstream and the new one is gone (its values
                # went back, F185); a chain's next rename takes the new name on, and the old
                # one is dropped
                now = self.downstream
                cancelled = now is not None and now.column(record.old) is not None and now.column(record.new) is None
                self.floors.rename_ended(pair, cancelled=cancelled)

    def accept_lineages(self, pending: list | None = None) -> None:
        """`pending`: the renames pending before the step; those it ended are passed on."""
        before = {shard: dict(names) for shard, names in self.lineages.accepted.items()}
        now = self.state.renames
        # (a rename's record as the product shows it: one still pending is the same value)
        ended = frozenset(key(r.new) for r in pending or () if (r.old, r.new) not in {(n.old, n.new) for n in now})
        waiting = frozenset((key(r.old), key(r.new)) for r in now)
        for shard, state in self.state.shards.items():
            if state.paused is None:
                self.lineages.accept(shard, before, ended, waiting)
                if state.accepted is not None and shard in self.lineages.current:
                    accepted = self.accepted(shard)
                    self.floors.held(shard, accepted, self.lineages.current[shard])

    def after(self, writers: list[str | None], key: str = "start") -> None:
        """After a step's checks: new rows, P1, P5."""
        for shard in writers:
            if shard is not None:
                self.write_rows(shard, key)
        self.check_rows()
        self.check_converged()

    # -- P0 ------------------------------------------------------------------------------------
    def check_tracker(self, shard: str) -> None:
        state = self.state.shards.get(shard)
        if shard not in self.tables:
            if state is not None:
                self.fail("P0", "left", f"{shard} left upstream but the product still has it")
            return
        if shard in self.untracked:
            return
        if state is None or state.table is None:
            self.fail("P0", "unknown", f"the product does not know {shard}'s schema")
        actual = self.tables[shard]
        expected = as_chosen(state.table, self.seen(state.table, f"{shard}'s table"), actual)
        if actual != expected:
            self.fail(
                "P0", "schema",
                f"{shard}: MariaDB has / the coordinator believes: {differences(actual, expected)}",
            )

    # -- P2, P3 (statements accepted) --------------------------------------------------------
    def run_downstream(self, statements) -> None:
        for statement in statements:
            try:
                run(self.down, statement)
            except pymysql.err.MySQLError as exc:
                code = exc.args[0] if exc.args else 0
                if code == DUPLICATE_KEY:
                    raise Inconclusive(f"rows of two shards collide in a key: {statement}: {exc.args}") from exc
                old, new = self.downstream, self.state.propagated
                shape = statement_shape(statement, old, self.seen_down(new) if old and new else None)
                self.fail("P3", f"refused-{code}[{shape}]", f"downstream refused `{statement}`: {exc.args}")

    def check_downstream(self) -> None:
        propagated = self.state.propagated
        if propagated is None:
            return
        try:
            actual = model.read(self.down, self.db, "t")
        except (pymysql.err.MySQLError, LookupError) as exc:
            self.fail("P2", "missing", f"no downstream table: {exc.args}")
        actual = self.without_old_name_indexes(actual)
        expected = as_chosen(propagated, self.seen(propagated, "the downstream table", down=True), actual)
        if actual != expected:
            self.fail("P2", "schema", f"downstream is / the coordinator believes: {differences(actual, expected)}")
        self.floors.appeared(self.downstream, actual)
        # a paused shard lacks what its accepted table lacks, though it added the column back
        # (docs/design.md "Rows no shard vouches for", F147)
        accepted = [
            self.accepted(s)
            for s, st in self.state.shards.items()
            if st.accepted is not None
        ]
        self.floors.lacking(actual, [*self.tables.values(), *accepted])
        self.floors.cleared(actual, [n for names in self.state.cleared.values() for n in names])
        self.downstream = actual

    def without_old_name_indexes(self, actual: Table) -> Table:
        """The table without the indexes of pending renames' old columns, which no schema
        holds (docs/design.md "While a rename is pending": the old name comes back downstream empty
        and indexed, by an index named `__shardmerge_was_...`); one on any other column,
        or on none, lingers."""
        pending = {key(r.old) for r in self.state.renames if r.started}
        helpers = [i for i in actual.indexes if i.key.startswith(OLD_NAME_INDEX)]
        for index in helpers:
            if len(index.columns) != 1 or index.columns[0] not in pending:
                self.fail("P2", "old-name-index", f"{index.name} on {index.columns} lingers: pending {pending}")
        return replace(actual, indexes=frozenset(i for i in actual.indexes if i not in helpers))

    # -- P4 --------------------------------------------------------------------------------------
    def p4_units(self, table: Table) -> list[list[dict[str, Any]]]:
        """Rows the downstream table takes now: the sample rows, a row that gives only
        the columns without a default (a shard lacking the others writes such rows),
        and two rows equal but for the key and the table's unique keys (a new UNIQUE
        key refuses the pair). An ENUM NOT
        NULL has a default without a DEFAULT clause: MariaDB fills in its first member."""
        rows = [r for r in sample_rows(table) if "id" in r]
        if not rows:
            return []
        read = {n for c in table.columns if c.generated for n in c.generated.reads}
        if read & rows[-1].keys():
            # the extremes again with what generated columns read as in the NULL row: 'abc'
            # under a STORED `c % 97` refuses the row and hides its other extremes (F77)
            calm = {n: v for n, v in rows[-1].items() if n in read}
            rows = rows[:-1] + [dict(r, **calm) for r in rows[1:-1]] + rows[-1:]
        required = {
            c.name for c in table.columns
            if c.generated is None and not c.nullable and c.default is None and c.type.family != Family.ENUM
        } | {"id"}
        omitting = {n: v for n, v in rows[0].items() if n in required}
        twin = dict(rows[0], id=rows[1]["id"] if len(rows) > 1 and rows[1]["id"] != rows[0]["id"] else 1)
        if len(rows) > 1:
            # apart in the table's own unique keys, so only a new one refuses the pair (F46);
            # a key they are apart in already (it has the id) takes nothing (F101)
            for index in table.indexes:
                if index.kind != IndexKind.UNIQUE:
                    continue
                parts = [c.name for c in table.columns if c.key in index.columns and c.name in rows[1]]
                if all(twin.get(n) == rows[0].get(n) for n in parts):
                    twin.update({n: rows[1][n] for n in parts})
        units = [[r] for r in rows] + [[omitting], [rows[0], twin]]
        units += [[rows[0], t] for t in _case_twins(table, rows[0], twin)]
        if len(rows) > 1:
            units += [[rows[0], t] for t in _part_twins(table, rows[0], rows[1], twin["id"])]
        if read - required and rows[-1].keys() >= read:
            # and again with what generated columns read as in the NULL row: a default 'd'
            # under a STORED `c % 97` refuses the row, and hides a default dropped (F130)
            units.append([dict(omitting, **{n: rows[-1][n] for n in read})])
        return units

    def probe_units(self, units: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]] | None]:
        """Each unit's rows written into the emptied downstream table and read back
        (all columns), or None when the table refuses one; nothing is kept."""
        table = self.downstream
        names = [c.name for c in table.columns]
        out: list[list[dict[str, Any]] | None] = []
        run(self.down, "START TRANSACTION")
        try:
            run(self.down, f"DELETE FROM {self.target}")
            for unit in units:
                statements = [("SAVEPOINT unit", None)]
                for row in unit:
                    statements += store_statements(self.target, row, names, key=("id",))
                try:
                    results = run_all(self.down, [*statements, ("ROLLBACK TO SAVEPOINT unit", None)])
                except pymysql.err.MySQLError:
                    run(self.down, "ROLLBACK TO SAVEPOINT unit")
                    out.append(None)
                    continue
                # each row's SELECT, after its INSERT: one row, by its id
                out.append([dict(zip(names, results[2 + 2 * i][0], strict=True)) for i in range(len(unit))])
        finally:
            run(self.down, "ROLLBACK")
        return out

    def check_version(self, old: Table | None, units, before, before_version, decision: Reply) -> None:
        major = decision.version.major > before_version.major
        broken = None
        tried = False  # some sample row was valid before: else P4 has nothing to judge by
        if units and old is not None:
            # again as stored before: rows replicated from a shard carry stored values
            valid = [
                ([{n: b[n] for n in row} for row, b in zip(unit, got, strict=True)], got)
                for unit, got in zip(units, before, strict=True)
                if got is not None
            ]
            after = self.probe_units([u for u, _ in valid])
            broken = self._broken(old, valid, after)
            # a new UNIQUE key is judged by two rows only: where no pair was valid before (a
            # STORED `c % 97` over a TEXT refuses the twins), P4 has nothing to judge it by
            # (F156)
            paired = any(len(unit) > 1 for unit, _ in valid)
            tried = bool(valid) and (paired or not (self.downstream and _uniques_added(old, self.downstream)))
        change = change_signature(old, self.downstream) if old is not None and self.downstream else "none"
        if broken and not major:
            self.fail("P4", f"minor-but-broke[{change}]",
                      f"version {before_version} -> {decision.version}, yet a row valid before is not after: {broken}")
        if major and tried and not broken and not any(
            exempt(old, self.downstream)
            for exempt in (_generated_changed, _past_samples, _unique_over_generated, _unique_over_a_time_default)
        ):
            # (a generated column's expression may fail for rows no sample has, docs/design.md "Generated columns"
            # "Generated columns": a major version there is the lattice being careful; so
            # may a value longer than any sample; and where a STORED `c % 97` reads a
            # VARCHAR, MariaDB refuses every sample row, 'abc' being no number: F61;
            # a new UNIQUE key over `c % 97` refuses two rows apart in c's own key, which
            # the twin rows are: F97; a new UNIQUE key over a new column whose
            # default is the statement's time: F111)
            self.fail("P4", f"major-unbroken[{change if decision.downstream else 'no DDL'}]",
                      f"version {before_version} -> {decision.version} (major), yet every sample row valid "
                      f"before is valid after (downstream {list(decision.downstream)})")

    def _broken(self, old: Table, valid, after) -> str | None:
        new = self.downstream
        common = [c.name for c in old.columns if new.column(c.name) is not None]
        for (unit, before), again in zip(valid, after, strict=True):
            if again is None:
                return f"refused now: {_show(unit[0])}"
            for row, b, a in zip(unit, before, again, strict=True):
                for name in common:
                    c = old.column(name)
                    if name not in row and c.default is not None and c.default.is_expression:
                        # a CURRENT_TIMESTAMP default: the time moved on, so compare defaults
                        if new.column(name).default != c.default:
                            return f"column {name}: default {c.default.sql} before, {new.column(name).default} after"
                        continue
                    if not same_value(same_kind(b[name], c.type), same_kind(a[name], new.column(name).type)):
                        return f"column {name} read back {b[name]!r} before, {a[name]!r} after, for {_show(row)}"
        return None

    # -- P3 (data kept) --------------------------------------------------------------------------
    def check_kept_rows(self) -> None:
        if not self.kept or self.downstream is None:
            return
        names = [c.name for c in self.downstream.columns]
        rows = run(self.down, f"SELECT {', '.join(quote_identifier(n) for n in names)} FROM {self.target}")
        found = {row[names.index("id")] if "id" in names else None: dict(zip(names, row, strict=True)) for row in rows}
        columns = {c.key: c.name for c in self.downstream.columns}
        live = self.lineages.live()
        names, names_once = self.lineages.names_of(), self.lineages.names_of(once=True)
        # a pending rename's first CHANGE moved the old name's values into the new name,
        # which keeps them though the shard that renamed has dropped it and added a column
        # of that name again, the rename kept by a paused shard that made it too (F163)
        moved_to = {key(r.old): key(r.new) for r in self.state.renames if r.started}
        # and while it is pending, the rows a shard that renamed wrote before its rename keep
        # their values under the old name, which the copy that ends it moves (docs/design.md
        # "Renaming columns"), though no shard the coordinator accepted has that name now, a
        # shard paused since its CREATE with it, counted as a column of its own (F184)
        held_at = {key(r.new): key(r.old) for r in self.state.renames if r.started}
        lost: list[str] = []
        for row_id, kept in sorted(self.kept.items()):
            got = found.get(row_id)
            if got is None:
                self.fail("P3", "row-lost", f"row id={row_id} of {kept.shard} is gone downstream")
                continue
            values = []
            converted = self.converted.get(row_id, {})
            # a column two of the row's values now share (a shard that had both names of a
            # rename, or had the new name as a column of its own and left): it holds one of
            # them, the row's own (F70, F81, F82)
            shared = Counter(n for lineage, _ in kept.values for n in names_once(lineage) if n in columns)
            for i, (lineage, value) in enumerate(kept.values):
                now = names(lineage)
                now |= {moved_to[n] for n in now if n in moved_to} | {held_at[n] for n in now if n in held_at}
                homes = [columns[n] for n in sorted(now) if n in columns]
                if homes and all(shared[h.lower()] > 1 for h in homes) and any(
                    same_value(v, got[h]) for j, (_, v) in enumerate(kept.values) if j != i for h in homes
                ):
                    continue  # the other one's value is there: this one is no longer tracked
                candidates = [value, converted[lineage]] if lineage in converted else [value]
                if lineage not in live:
                    values.append((lineage, value))
                    continue
                matched = next((v for v in candidates for h in homes if same_value(v, got[h])), _NONE)
                if matched is not _NONE:
                    # the value as it is now: a shard's ALTER may convert it again later while
                    # downstream keeps it (DATETIME(6) to (3) on both, then (0) upstream only)
                    values.append((lineage, matched))
                    continue
                by_modify = next((got[h] for h in homes if self.converts(value, h, got[h])), _NONE)
                if by_modify is not _NONE:
                    values.append((lineage, by_modify))  # MariaDB's conversion is the value now
                    continue
                where = ", ".join(f"{h}={_short(got[h])}" for h in homes) or "no column of it is left"
                lost.append(
                    f"row id={row_id} of {kept.shard}: its value {_short(value)} of the column now named "
                    f"{'/'.join(sorted(names(lineage)))} is lost downstream ({where})"
                )
            # reported once: the story goes on without the lost values
            self.kept[row_id] = Kept(kept.shard, tuple(values))
        if lost:
            more = f" (and {len(lost) - 1} more)" if len(lost) > 1 else ""
            self.fail("P3", f"data-lost[{self.step_kind}]", lost[0] + more)

    def converts(self, value: Any, name: str, got: Any) -> bool:
        """The step's statements changed the column's type and MariaDB converted `value`
        into `got` (rows no shard's ALTER converted upstream: a departed shard's); or
        they copied it from a column they dropped (docs/design.md "Rows no shard vouches for": the
        shards' type wins where no type holds both, F71, and the type holding both takes it
        in its own form, a TIMESTAMP(6) in a TEXT has its six digits of fraction, F114)."""
        after = self.downstream.column(name) if self.downstream is not None else None
        if self.previous is None or after is None or after.generated:
            return False
        before = self.previous.column(name)
        changed = before is not None and (before.type, before.nullable) != (after.type, after.nullable)
        if changed and not before.generated and self._converted(value, before, after, got):
            return True
        dropped = [c for c in self.previous.columns if self.downstream.column(c.name) is None and not c.generated]
        return any(self._converted(value, c, after, got) for c in dropped)

    def _converted(self, value: Any, before: Column, after: Column, got: Any) -> bool:
        """MariaDB converts `value` of column `before` into `got` when it becomes `after`."""
        probe = f"{quote_identifier(self.db)}.fz_convert"
        try:
            run(self.down, f"DROP TEMPORARY TABLE IF EXISTS {probe}")
            run(self.down, f"CREATE TEMPORARY TABLE {probe} ({_probe_column(before)})")
            run(self.down, f"INSERT INTO {probe} (v) VALUES (%s)", [value])
            run(self.down, f"ALTER TABLE {probe} MODIFY {_probe_column(after)}")
            ((now,),) = run(self.down, f"SELECT v FROM {probe}")
        except pymysql.err.MySQLError:
            return False
        finally:
            run(self.down, f"DROP TEMPORARY TABLE IF EXISTS {probe}")
        if value is None and isinstance(now, dt.datetime) and isinstance(got, dt.datetime):
            # NULL into a TIMESTAMP NOT NULL is the time of the ALTER: the probe's is later
            return abs(now - got) < _A_STORY
        return same_value(now, got)

    def refresh_kept(self, shard: str) -> None:
        """The shard's ALTER may have converted its rows upstream (no row event says so):
        note their values now, which downstream may follow."""
        ids = [i for i, k in self.kept.items() if k.shard == shard]
        names = self.lineages.current.get(shard, {})
        if not ids or not names:
            return
        columns = [n for n in written_names(self.tables[shard]) if key(n) in names]
        if "id" not in columns:
            return
        rows = run(self.up, f"SELECT {', '.join(quote_identifier(n) for n in columns)} "
                            f"FROM {self.upstream_name(shard)}")
        for row in rows:
            values = dict(zip(columns, row, strict=True))
            if values["id"] in ids:
                now = {names[key(n)]: v for n, v in values.items()}
                self.converted.setdefault(values["id"], {}).update(now)

    # -- P6 --------------------------------------------------------------------------------------
    def check_pauses(self, shard: str | None, before: set[str]) -> None:
        blocked = self.state.blocked
        others = set(blocked) - before - {shard}
        if others:
            self.fail("P6", "other-paused", f"a DDL of {shard} paused {', '.join(sorted(others))}")
            return
        if self.state.renames:
            return  # a paused shard may wait for a pending rename (see the module docstring)
        shards = self.state.shards
        for name, pause in sorted(blocked.items()):
            state = shards[name]
            if pause.kind != "conflict" or pause.renames or state.table is None or name in self.untracked:
                continue
            mine = self.seen(state.table, f"{name}'s table")
            own = self.accepted(name) if state.accepted else None
            peers = [
                self.accepted(s)
                for s, st in sorted(shards.items())
                if s != name and st.accepted is not None
            ]
            if (own is not None and mine == own) or plainly_joins(mine, peers):
                self.fail("P6", "not-resumed",
                          f"{name} stays paused ({pause.reason}) though its table joins with the others' now")
                return

    # -- rows: P1 ----------------------------------------------------------------------------------
    def unblocked(self, shard: str) -> bool:
        state = self.state.shards.get(shard)
        return state is not None and state.paused is None and state.accepted is not None and shard in self.tables

    def write_rows(self, shard: str, key: str) -> None:
        """Some of the shard's sample rows: into its table upstream, read back, downstream
        by column name (as the applier writes them), kept for P3. The typical row always,
        each other one (an extreme, the NULLs) one time in four, chosen by a hash of the
        step (`key`) so a shrunk story writes the rows its original wrote; not all of
        them, or no shard could narrow a column any more."""
        if not self.unblocked(shard) or self.downstream is None:
            return
        table = self.tables[shard]
        for i, sample in enumerate(sample_rows(table)):
            if i == 0:
                # its columns of one type hold different values: one copied into another shows
                sample = varied_row(table, sample)
            if i == 0 or zlib.crc32(f"{key}|{shard}|{i}".encode()) % 4 == 0:
                self.write_row(shard, table, self.story_row(table, sample, next(self.ids)))

    def write_row(self, shard: str, table: Table, row: dict[str, Any]) -> None:
        try:
            stored = store_row(self.up, self.upstream_name(shard), row, written_names(table), key=("id",))
        except pymysql.err.MySQLError:
            return  # not a row of this shard (a value out of its range, a key taken)
        clear = self.state.cleared.get(shard, ())
        try:
            copied = copy_row(self.down, self.target, stored, self.downstream, table, clear, key=("id",))
        except RowRefused as exc:
            if exc.code == DUPLICATE_KEY:
                raise Inconclusive(f"rows of two shards collide in a key: {exc}") from exc
            self.fail("P1", "row", f"{shard}: {exc}")
            return
        self.rows_checked += 1
        names = self.lineages.current.get(shard, {})
        self.floors.wrote(shard, table, names, self.downstream)
        values = tuple((names[key(n)], copied.downstream[n]) for n in stored if key(n) in names)
        self.kept[row["id"]] = Kept(shard, values)

    def story_row(self, table: Table, sample: dict[str, Any], row_id: int) -> dict[str, Any]:
        """A sample row with the story's next id, and values of its own in the columns of
        UNIQUE keys (of the shard or downstream), so rows of all shards can coexist."""
        unique = {c for ix in table.indexes if ix.kind == IndexKind.UNIQUE for c in ix.columns}
        if self.downstream is not None:
            unique |= {c for ix in self.downstream.indexes if ix.kind == IndexKind.UNIQUE for c in ix.columns}
        row = dict(sample)
        for c in table.columns:
            if c.key == "id":
                row[c.name] = row_id
            elif c.key in unique and c.name in row:
                row[c.name] = distinct_value(c.type, row_id)
        return row

    def check_rows(self) -> None:
        """P1: the sample rows of every unblocked shard, once per pair of shard table and
        downstream table."""
        if self.downstream is None:
            return
        for shard, table in sorted(self.tables.items()):
            if not self.unblocked(shard) or (table, self.downstream) in self.probed:
                continue
            try:
                self.rows_checked += check_rows(
                    self.up, self.down, self.upstream_name(shard), table, self.target, self.downstream
                )
            except RowRefused as exc:
                self.fail("P1", "sample", f"{shard}: {exc}")
            self.probed.add((table, self.downstream))

    # -- P5 --------------------------------------------------------------------------------------
    def _unique_may_stay_away(self, index: Index) -> bool:
        if index.kind != IndexKind.UNIQUE:
            return False
        on = set(index.columns)
        if any(not any(sets <= on for sets in unique) for unique in self.left_unique):
            return True
        return bool(on & self.floors.filled_with_values())

    def check_converged(self) -> None:
        if not self.tables or self.downstream is None or self.state.blocked:
            return
        first = next(iter(self.tables.values()))
        if any(t != first for t in self.tables.values()):
            return
        expected = first
        # a column rows already downstream need wider may stay so (see `floors`)
        columns = []
        names_once = self.lineages.names_of(once=True)
        recast = set()
        for column in self.downstream.columns:
            theirs = expected.column(column.name)
            if theirs is not None and self.floors.allows(theirs, column, names_once, self.lineages.current, self.holds):
                if column.type.family != theirs.type.family:
                    recast.add(column.key)
                column = theirs
            columns.append(column)
        # a generated column over a column held in another family is not downstream: it
        # would compute over other values (docs/design.md "Generated columns that differ", F141)
        expected = without_generated_reading(expected, recast)
        # a unique key the rows of a shard that left may repeat, or over the default rows of
        # shards lacking the column got, may stay away (the coordinator cannot add it over them)
        expected = replace(
            expected,
            indexes=frozenset(
                ix
                for ix in expected.indexes
                if self.downstream.index(ix.name) is not None or not self._unique_may_stay_away(ix)
            ),
        )
        # a key on a column held wider takes the prefix MariaDB gives it there (F100)
        wider = {c.key for c in self.downstream.columns if (e := expected.column(c.name)) and e.type != c.type}
        expected = replace(expected, indexes=frozenset(_unprefixed(ix, wider) for ix in expected.indexes))
        actual = replace(
            self.downstream,
            columns=tuple(columns),
            indexes=frozenset(_unprefixed(ix, wider) for ix in self.downstream.indexes),
        )
        if _by_name(actual) != _by_name(expected):
            self.fail("P5", "not-equal",
                      f"every shard is the same, downstream differs (shards / downstream): "
                      f"{differences(expected, self.downstream)}")


OLD_NAME_INDEX = "__shardmerge_was_"


def _by_name(table: Table) -> Table:
    """The table with its columns in the order of their names: where the downstream table
    has a column (a rename's new name, added last) is no part of P5."""
    return replace(table, columns=tuple(sorted(table.columns, key=lambda c: c.key)))


def _unprefixed(index: Index, columns: set[str]) -> Index:
    """The key without the prefix lengths of its parts on `columns`."""
    return replace(index, parts=tuple((c, None if c in columns else n) for c, n in index.parts))


def without_generated_reading(table: Table, inputs: set[str]) -> Table:
    """`table` without the generated columns that read any of `inputs` (keys), directly or
    through another one so left out, nor the keys and checks over them (docs/design.md "Generated columns that differ": a generated column over a column held in another family is not downstream)."""
    columns = {c.key: c for c in table.columns}
    while True:
        gone = [k for k, c in columns.items() if c.generated and (c.generated.reads & inputs or not c.generated.reads <= columns.keys())]
        if not gone:
            break
        for k in gone:
            del columns[k]
    if len(columns) == len(table.columns):
        return table
    indexes = frozenset(ix for ix in table.indexes if set(ix.columns) <= columns.keys())
    checks = frozenset(ch for ch in table.checks if _reads(ch[1]) <= columns.keys())
    return replace(table, columns=tuple(columns.values()), indexes=indexes, checks=checks)


def _reads(clause: str) -> set[str]:
    return {m.replace("``", "`").lower() for m in re.findall(r"`((?:[^`]|``)+)`", clause)}


def plainly_joins(mine: Table, others: list[Table]) -> bool:
    """The tables join by the plain cases of docs/design.md "The lattice of compatibility", which need no type lattice: one primary
    key in all (the merged key is the union of the shards' keys, issue 46, and a table
    without one is judged by that rule, not here), one set of table options and checks,
    every column of one name defined alike and every key of one name alike. A column some
    lack is partial downstream (docs/design.md "Adding and dropping columns"), a key some lack is
    kept or left out by the rules of docs/design.md for partial keys: neither is a conflict."""
    key_ = _primary(mine)
    if key_ is None or not others:
        return False
    for table in others:
        if _primary(table) != key_ or table.options != mine.options or table.checks != mine.checks:
            return False
        if any(table.column(c.name) not in (None, c) for c in mine.columns):
            return False
        if any(table.index(ix.name) not in (None, ix) for ix in mine.indexes):
            return False
    return True


def _primary(table: Table) -> tuple[str, ...] | None:
    return next((ix.columns for ix in table.indexes if ix.kind == IndexKind.PRIMARY), None)


def _unique_on(*tables: Table | None) -> set[frozenset[str]]:
    return {
        frozenset(ix.columns)
        for table in tables
        if table is not None
        for ix in table.indexes
        if ix.kind in (IndexKind.PRIMARY, IndexKind.UNIQUE)
    }


def differences(a: Table, b: Table, column_sql=None, index_sql=None) -> str:
    """What differs between two tables, one item per column, index, check or option
    (`column_sql`, `index_sql`: how to show them, for tables of another model)."""
    _column_sql, _index_sql = column_sql or _own_column_sql, index_sql or _own_index_sql
    out = []
    for c in a.columns:
        other = b.column(c.name)
        if other != c:
            shown = (_column_sql(c), _column_sql(other))
            out.append(f"column {c.name}: {shown[0]} / {shown[1]}" if shown[0] != shown[1] else f"column {c.name}: {c!r} / {other!r}")
    out += [f"column {c.name}: (none) / {_column_sql(c)}" for c in b.columns if a.column(c.name) is None]
    for ix in a.indexes:
        if b.index(ix.name) != ix:
            out.append(f"index {ix.name}: {_index_sql(ix)} / {_index_sql(b.index(ix.name))}")
    out += [f"index {ix.name}: (none) / {_index_sql(ix)}" for ix in b.indexes if a.index(ix.name) is None]
    if set(a.checks) != set(b.checks):
        out.append(f"checks: {list(a.checks)} / {list(b.checks)}")
    order = ([c.key for c in a.columns], [c.key for c in b.columns])
    if not out and order[0] != order[1]:
        out.append(f"column order: {order[0]} / {order[1]}")
    if a.options != b.options:
        out.append(f"options: {a.options} / {b.options}")
    return "; ".join(out) or "(equal as rendered)"


_NONE = object()
_A_STORY = dt.timedelta(minutes=10)  # longer than any story runs


def _probe_column(c: Column) -> str:
    return c.sql("v")


def _own_column_sql(c) -> str:
    return "(none)" if c is None else c.sql()


def _own_index_sql(ix) -> str:
    return "(none)" if ix is None else ix.sql()


def change_signature(old: Table, new: Table) -> str:
    """What kind of change the downstream table went through, without names: the key
    that tells one P4 finding from another."""
    out = set()
    for c in new.columns:
        was = old.column(c.name)
        if was is None:
            out.add("+column" + (" generated" if c.generated else " NOT NULL" if not c.nullable else ""))
            continue
        a, b = was.type, c.type
        if a.name != b.name:
            out.add(f"type {a.name}->{b.name}")
        elif a != b:
            if (a.charset, a.collation) != (b.charset, b.collation):
                out.add(f"charset {a.collation}->{b.collation}")
            if a.members != b.members:
                out.add("members")
            if (a.length, a.precision, a.scale, a.fsp, a.unsigned) != (b.length, b.precision, b.scale, b.fsp, b.unsigned):
                out.add(f"size {a.name}")
        if was.nullable != c.nullable:
            out.add("->NULL" if c.nullable else "->NOT NULL")
        if was.default != c.default:
            out.add("default " + ("dropped" if c.default is None else "added" if was.default is None else "changed"))
        if was.auto_increment != c.auto_increment:
            out.add("+AUTO_INCREMENT" if c.auto_increment else "-AUTO_INCREMENT")
        if was.generated != c.generated:
            out.add("generated")
    out |= {"-column" for c in old.columns if new.column(c.name) is None}
    out |= {f"+{ix.kind} index" for ix in new.indexes if old.index(ix.name) != ix}
    out |= {f"-{ix.kind} index" for ix in old.indexes if new.index(ix.name) is None}
    if old.options != new.options:
        out.add("options")
    return ", ".join(sorted(out)) or "none"


_CHANGED_NAME = re.compile(r"CHANGE COLUMN `((?:[^`]|``)+)` `((?:[^`]|``)+)`")
_CLAUSE = re.compile(
    r"^(UPDATE|ALTER TABLE \S+ (ADD (UNIQUE )?KEY|ADD COLUMN|DROP COLUMN|DROP INDEX|MODIFY COLUMN|CHANGE COLUMN"
    r"|ALTER COLUMN \S+ (SET|DROP) DEFAULT)|CREATE TABLE)( `([^`]+)`)?( `([^`]+)`)?"
)


def statement_shape(statement: str, old: Table | None, new: Table | None) -> str:
    """A refused statement without names: its clause, and how the column it touches
    changes (`CHANGE COLUMN ->NOT NULL, size varchar`)."""
    m = _CLAUSE.match(statement)
    if m is None:
        return statement.split("`", 1)[0].strip()
    clause = re.sub(r"^ALTER TABLE \S+ ", "", m.group(1))
    clause = re.sub(r"^ALTER COLUMN \S+ ", "ALTER COLUMN ", clause)
    was = m.group(6)
    now = m.group(8) or was
    if old is None or new is None or was is None or old.column(was) is None or new.column(now) is None:
        return clause
    column = change_signature(replace(old, columns=(old.column(was),), indexes=frozenset(), options=new.options),
                              replace(new, columns=(replace(new.column(now), name=was),), indexes=frozenset()))
    return f"{clause} {column}"


def _generated_changed(old: Table | None, new: Table | None) -> bool:
    """A generated column is new or changed, or a column it reads changes its type: the
    product does not evaluate an expression over converted values (SMALLINT to VARCHAR
    under `c % 97`, F61; another character set, which `CHARSET(c)` shows, F65), and the
    oracle has no type order to tell a harmless widening from these."""
    if old is None or new is None:
        return False
    for c in new.columns:
        if c.generated is None:
            continue
        if old.column(c.name) != c:
            return True
        for name in c.generated.reads:
            before, after = old.column(name), new.column(name)
            if before is not None and after is not None and before.type != after.type:
                return True
    return False


def _case_twins(table: Table, row: dict[str, Any], twin: dict[str, Any]) -> list[dict[str, Any]]:
    """For each UNIQUE key with a text part, `twin` but for that key, where it has `row`'s
    values with the ASCII letters' case swapped: apart under a case-sensitive collation,
    equal under a case-insensitive one, so the pair shows a key's text turning
    case-insensitive (utf8mb4_bin to utf8mb4_general_ci, F140)."""
    out = []
    for index in table.indexes:
        if index.kind != IndexKind.UNIQUE:
            continue
        parts = [c for c in table.columns if c.key in index.columns and c.name in row and c.name in twin]
        texts = [c.name for c in parts if c.type.family == Family.STRING and isinstance(row[c.name], str)]
        if not texts:
            continue
        same = dict(twin, **{c.name: row[c.name] for c in parts})
        swapped = dict(same, **{n: "".join(ch.swapcase() if ch.isascii() else ch for ch in row[n]) for n in texts})
        if swapped != same:  # (a key's text without letters: no pair to show)
            out.append(swapped)
    return out


def _part_twins(table: Table, row: dict[str, Any], other: dict[str, Any], twin_id: Any) -> list[dict[str, Any]]:
    """`row` again (another id) apart from it in one part of a UNIQUE key only, each such
    part in turn: the twin apart in every part of the table's own keys is apart in a new key
    on any of them too, and so is taken by it (F162: UNIQUE (n2, c1), then a new UNIQUE
    (c1) refuses two rows with one c1 and two n2, which no sample pair had). A twin some key
    refuses before is no sample."""
    parts = {c.name for ix in table.indexes if ix.kind == IndexKind.UNIQUE
             for c in table.columns if c.key in ix.columns}
    return [dict(row, id=twin_id, **{n: other[n]}) for n in sorted(parts)
            if n != "id" and n in row and n in other and other[n] != row[n]]


def _uniques_added(old: Table, new: Table) -> list[Index]:
    return [ix for ix in new.indexes if ix.kind == IndexKind.UNIQUE and old.index(ix.name) != ix]


def _unique_over_generated(old: Table | None, new: Table | None) -> bool:
    """A UNIQUE key new downstream covers a generated column; or shares a column with a
    UNIQUE key there already that covers one: the twin rows are apart in that key by its
    written columns, as they cannot be by what a generated column reads (F139)."""
    if old is None or new is None:
        return False
    generated = {c.key for c in new.columns if c.generated is not None}
    added = _uniques_added(old, new)
    over = [ix for ix in old.indexes if ix.kind == IndexKind.UNIQUE and generated & set(ix.columns)]
    return any(
        generated & set(ix.columns) or any(set(ix.columns) & set(o.columns) - generated for o in over)
        for ix in added
    )


def _unique_over_a_time_default(old: Table | None, new: Table | None) -> bool:
    """A UNIQUE key new downstream covers a column new there whose default is an
    expression (CURRENT_TIMESTAMP): the old rows leave it out and take the statement's
    time, which the probe's rows, one statement each, never share; two rows of one
    INSERT do, and the key refuses the second (F111)."""
    if old is None or new is None:
        return False
    timed = {c.key for c in new.columns if old.column(c.name) is None and c.default and c.default.is_expression}
    return any(timed & set(ix.columns) for ix in _uniques_added(old, new))


def _past_samples(old: Table | None, new: Table | None) -> bool:
    """A TEXT column holding more than LONG_TEXT of its widest characters changes its
    character set, a JSON one becomes a TEXT, or a TEXT one a VARCHAR or CHAR of
    LONG_TEXT characters or more: the value that no longer fits (64K latin1 'é' take
    128 KB in utf8mb4, F144; a document past 64 KB; text past VARCHAR(513):
    F126) is longer than any sample row."""
    if old is None or new is None:
        return False
    for c in old.columns:
        after = new.column(c.name)
        if after is None:
            continue
        if text_chars(c.type) > LONG_TEXT and after.type.charset != c.type.charset:
            return True
        if c.type.family == Family.JSON and after.type.family == Family.STRING and after.type.name in TEXT_CAPACITY:
            return True
        if c.type.family == Family.STRING and c.type.name in TEXT_CAPACITY and after.type.name in ("varchar", "char") and (
            after.type.length or 0
        ) >= LONG_TEXT:
            return True
    return False


def written_names(table: Table) -> list[str]:
    keys = set(written(table))
    return [c.name for c in table.columns if c.key in keys]


def distinct_value(t, n: int) -> Any:
    """A value of the type that no other row of the story has (for UNIQUE keys), when
    the type has room for it."""
    f = t.family.value
    if f == "integer":
        return n
    if f == "decimal":
        return Decimal(n)
    if f == "string":
        return f"u{n}"
    if f == "date":
        return dt.date(2000, 1, 1) + dt.timedelta(days=n)
    if f in ("datetime", "timestamp"):
        return dt.datetime(2001, 1, 1) + dt.timedelta(seconds=n)
    values = sample_values(t)
    return values[n % len(values)]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 30 else text[:27] + "..."


def _show(row: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in row.items()) + "}"

