"""The seeded story generator. A story is a scenario in the `plan` YAML format:

    {"flavor": "mariadb", "target": "fuzz.t",
     "shards": {"s1.db.t1": "CREATE TABLE t1 (...)", ...},
     "steps": [{"shard": "s1.db.t1", "ddl": "ALTER TABLE t1 ..."}, ...]}

Shards start from one random table with small differences (an extra nullable
column, AUTO_INCREMENT, a generated column's expression, a wider VARCHAR, a missing
index, table options). Steps are per-shard DDLs proposed from the shards' tables as
they are now; the caller runs each proposal on a real server and keeps it only if
the server takes it (`accepted`), so every step is valid there. A quarter of the
proposals copy a difference from another shard (the same ADD, MODIFY, rename, index)
so shards often converge; and half of the stories end with a convergence phase in
which every shard copies one shard's table, for the "all shards equal" property.
Some moves aim at known defect classes: an ENUM NOT NULL without DEFAULT, rename
then drop on one shard, an indexed VARCHAR widened to 1000, narrowing, charsets.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from lattice import render_table
from lattice.model import (
    PRIMARY,
    Column,
    ColumnType,
    Family,
    Index,
    IndexKind,
    IndexPart,
    Table,
    TableOptions,
)
from lattice.render import render_column, render_index
from lattice.sqltext import quote_identifier, quote_string
from tests.fuzz import columns as cols

TARGET = "fuzz.t"
MAX_SHARDS = 6


@dataclass(frozen=True)
class Proposal:
    """One step to try: the scenario step and what kind of move it is (for --verbose
    and the generator's own bookkeeping)."""

    step: dict[str, str]
    kind: str
    renames: tuple[tuple[str, str], ...] = ()


def shard_id(n: int) -> str:
    return f"s{1 + n % 2}.db.t{n}"


def table_of(shard: str) -> str:
    return shard.split(".")[2]


class StoryGenerator:
    """Proposes a story's start and its steps, one at a time, from `random.Random(seed)`:
    the same seed and the same answers from the server give the same story."""

    def __init__(self, seed: int):
        self.seed = seed
        self.r = random.Random(seed)
        self.shard_count = self.r.randint(2, MAX_SHARDS)
        self.length = self.r.randint(5, 22)
        self.converge = self.r.random() < 0.5
        self.converge_budget = 0
        self.model_shard: str | None = None
        self.steps_done = 0
        self._fresh = itertools.count(1)
        self._next_shard = self.shard_count + 1
        self.rename_history: list[tuple[str, str, str]] = []  # (shard, old, new)
        self.left: list[str] = []  # shards that left and may come back

    # -- the start -------------------------------------------------------------------------
    def start(self) -> dict[str, str]:
        base = self._base_table()
        return {shard_id(n): self._variant(base, n) for n in range(1, self.shard_count + 1)}

    def _base_table(self) -> Table:
        r = self.r
        id_type = ColumnType(Family.INTEGER, r.choice(("smallint", "mediumint", "int", "bigint")),
                             unsigned=r.random() < 0.3)
        columns = [Column("id", id_type, nullable=False, auto_increment=r.random() < 0.4)]
        for i in range(1, r.randint(3, 7) + 1):
            columns.append(cols.random_column(r, f"c{i}"))
        if r.random() < 0.35:
            sources = [c for c in columns[1:] if c.type.family in (Family.INTEGER, Family.STRING)
                       and not c.type.is_text_kind]
            if sources:
                generated = cols.generated_over(r, r.choice(sources), "g")
                if generated is not None:
                    columns.append(generated)
        indexes = [Index(PRIMARY, IndexKind.PRIMARY, (IndexPart("id"),))]
        keyable = [c for c in columns[1:] if cols.keyable(c) and c.generated is None]
        for i, c in enumerate(r.sample(keyable, min(len(keyable), r.randint(0, 2)))):
            kind = IndexKind.UNIQUE if cols.unique_worthy(c) and r.random() < 0.4 else IndexKind.PLAIN
            indexes.append(Index(f"k{i}", kind, (IndexPart(c.name),)))
        cs, coll = cols.charset(r)
        return Table("t", tuple(columns), tuple(indexes), (), TableOptions("InnoDB", cs, coll))

    def _variant(self, base: Table, n: int) -> str:
        """Shard n's start: the base with a few differences of the kinds shards have."""
        r = self.r
        t = base
        if r.random() < 0.2:  # an extra nullable column on one shard: comparable, minor
            extra = replace(cols.random_column(r, f"x{n}"), nullable=True, default=None)
            t = t.with_columns([*t.columns, replace(extra, default=cols.NULL_DEFAULT)])
        if r.random() < 0.15:
            first = t.columns[0]
            t = t.with_columns([replace(first, auto_increment=not first.auto_increment), *t.columns[1:]])
        g = t.column("g")
        if g is not None and g.generated is not None and r.random() < 0.2:
            source = next(c for c in t.columns if quote_identifier(c.name) in g.generated.expression)
            other = cols.generated_over(r, source, "g", variant=r.randint(1, 2))
            if other is not None:
                t = t.with_columns([other if c.name == "g" else c for c in t.columns])
        if r.random() < 0.1:
            t = t.with_columns([
                replace(c, type=replace(c.type, length=(c.type.length or 1) + 10))
                if c.type.name == "varchar" else c for c in t.columns
            ])
        if r.random() < 0.1 and len(t.indexes) > 1:
            t = replace(t, indexes=t.indexes[:-1])
        if r.random() < 0.03:  # (rare: clearing it again takes COMMENT='', a known P0 finding)
            t = replace(t, options=replace(t.options, comment=f"shard {n}"))
        sql = render_table(t, "mariadb", name=f"t{n}")
        if r.random() < 0.1:
            sql += " AUTO_INCREMENT=1000"
        return sql

    # -- steps -----------------------------------------------------------------------------
    def done(self, tables: dict[str, Table]) -> bool:
        if self.steps_done < self.length:
            return False
        if not self.converge:
            return True
        if self.model_shard is None or self.model_shard not in tables:
            present = sorted(tables)
            if not present:
                return True
            self.model_shard = self.r.choice(present)
            self.converge_budget = 6 * len(present) + 6
        model = tables[self.model_shard]
        return self.converge_budget <= 0 or all(t == model for t in tables.values())

    def propose(self, tables: dict[str, Table], attempt: int = 0) -> Proposal | None:
        """A step to try on the shards' `tables` (present shards only). `attempt`
        counts the refused proposals for this step, to widen the choice after some."""
        if self.steps_done >= self.length and self.model_shard is not None and attempt < 6:
            proposal = self._converge_step(tables)
            if proposal is not None:
                return proposal
        for _ in range(30):
            proposal = self._pick_op(tables)(tables)
            if proposal is not None:
                return proposal
        return None

    def accepted(self, proposal: Proposal) -> None:
        """The server took the proposal: it is a step of the story."""
        self.steps_done += 1
        if self.steps_done > self.length:
            self.converge_budget -= 1
        shard = proposal.step.get("shard", "")
        for old, new in proposal.renames:
            self.rename_history.append((shard, old, new))
        ddl = proposal.step.get("ddl", "")
        if ddl.startswith("DROP TABLE"):
            self.left.append(shard)
        elif ddl.startswith("CREATE TABLE") and shard in self.left:
            self.left.remove(shard)

    def skipped(self) -> None:
        """No proposal for this step was taken: it counts as a step all the same, so
        a story always ends."""
        self.steps_done += 1
        if self.steps_done > self.length:
            self.converge_budget -= 1

    # -- choosing ----------------------------------------------------------------------------
    def _pick_op(self, tables: dict[str, Table]) -> Callable[[dict[str, Table]], Proposal | None]:
        ops: list[tuple[str, float, Callable]] = [
            ("add", 8, self._add_fresh),
            ("copy", 22, self._copy_from_other),
            ("drop", 5, self._drop),
            ("widen", 6, self._widen),
            ("narrow", 3, self._narrow),
            ("nullability", 4, self._nullability),
            ("default", 4, self._default),
            ("retype", 2, self._retype),
            ("rename", 4, self._rename),
            ("add_index", 4, self._add_index),
            ("drop_index", 3, self._drop_index),
            ("options", 3, self._options),
            ("auto_increment", 2, self._toggle_auto_increment),
            ("generated", 2, self._generated),
            ("combined", 3, self._combined),
            ("join", 2 if len(tables) < MAX_SHARDS else 0, self._join),
            ("leave", 2 if len(tables) > 1 else 0, self._leave),
        ]
        if self._renamed_here(tables):
            ops.append(("drop_renamed", 1.5, self._drop_renamed))
        total = sum(w for _, w, _ in ops)
        x = self.r.uniform(0, total)
        for _, weight, fn in ops:
            x -= weight
            if x <= 0 and weight > 0:
                return fn
        return ops[0][2]

    def _shard(self, tables: dict[str, Table]) -> tuple[str, Table]:
        shard = self.r.choice(sorted(tables))
        return shard, tables[shard]

    def _alter(self, shard: str, body: str, kind: str, renames=()) -> Proposal:
        return Proposal({"shard": shard, "ddl": f"ALTER TABLE {table_of(shard)} {body}"}, kind, tuple(renames))

    def _fresh_name(self, prefix: str = "n") -> str:
        return f"{prefix}{next(self._fresh)}"

    def _position(self, t: Table) -> str:
        x = self.r.random()
        if x < 0.1:
            return " FIRST"
        if x < 0.35:
            return " AFTER " + quote_identifier(self.r.choice(t.columns).name)
        return ""

    def _non_key(self, t: Table) -> list[Column]:
        pk = set(t.primary_key.columns) if t.primary_key else set()
        return [c for c in t.columns if c.key not in pk]

    # -- moves -------------------------------------------------------------------------------
    def _add_fresh(self, tables) -> Proposal | None:
        shard, t = self._shard(tables)
        name = self._fresh_name()
        column = cols.enum_not_null(name) if self.r.random() < 0.2 else cols.random_column(self.r, name)
        return self._alter(shard, f"ADD COLUMN {render_column(column)}{self._position(t)}", "add")

    def _drop(self, tables) -> Proposal | None:
        shard, t = self._shard(tables)
        victims = self._non_key(t)
        if not victims:
            return None
        return self._alter(shard, f"DROP COLUMN {quote_identifier(self.r.choice(victims).name)}", "drop")

    def _renamed_here(self, tables) -> list[tuple[str, str]]:
        return [(s, new) for s, _, new in self.rename_history if s in tables and tables[s].column(new)]

    def _drop_renamed(self, tables) -> Proposal | None:
        """Rename a to b, then drop b on the same shard: a known defect class."""
        shard, new = self.r.choice(self._renamed_here(tables))
        return self._alter(shard, f"DROP COLUMN {quote_identifier(new)}", "drop_renamed")

    def _modify(self, shard: str, column: Column, kind: str) -> Proposal:
        return self._alter(shard, f"MODIFY COLUMN {render_column(column)}", kind)

    def _pick_column(self, t: Table, generated: bool = False) -> Column | None:
        choices = [c for c in self._non_key(t) if (c.generated is not None) == generated]
        return self.r.choice(choices) if choices else None

    def _indexed(self, t: Table, column: Column) -> bool:
        return any(column.key in ix.columns for ix in t.indexes)

    def _widen(self, tables) -> Proposal | None:
        shard, t = self._shard(tables)
        c = self._pick_column(t)
        wider = cols.widen(self.r, c, self._indexed(t, c)) if c else None
        return self._modify(shard, wider, "widen") if wider else None

    def _narrow(self, tables) -> Proposal | None:
        shard, t = self._shard(tables)
        c = self._pick_column(t)
        narrower = cols.narrow(self.r, c) if c else None
        return self._modify(shard, narrower, "narrow") if narrower else None

    def _nullability(self, tables) -> Proposal | None:
        shard, t = self._shard(tables)
        c = self._pick_column(t)
        if c is None:
            return None
        if c.nullable:
            default = None if c.default is not None and c.default.is_null else c.default
            return self._modify(shard, replace(c, nullable=False, default=default), "not_null")
        default = c.default or cols.NULL_DEFAULT
        return self._modify(shard, replace(c, nullable=True, default=default), "null")

    def _default(self, tables) -> Proposal | None:
        shard, t = self._shard(tables)
        c = self._pick_column(t)
        if c is None:
            return None
        q = quote_identifier(c.name)
        x = self.r.random()
        if x < 0.3 and c.default is not None:
            return self._alter(shard, f"ALTER COLUMN {q} DROP DEFAULT", "drop_default")
        default = cols.literal_default(self.r, c.type)
        if default is None:
            return None
        if x < 0.65:
            value = default.sql if not default.is_expression else f"({default.sql})"
            return self._alter(shard, f"ALTER COLUMN {q} SET DEFAULT {value}", "set_default")
        return self._modify(shard, replace(c, default=default), "modify_default")

    def _retype(self, tables) -> Proposal | None:
        shard, t = self._shard(tables)
        c = self._pick_column(t)
        return self._modify(shard, cols.retype(self.r, c), "retype") if c else None

    def _rename(self, tables) -> Proposal | None:
        shard, t = self._shard(tables)
        c = self._pick_column(t)
        if c is None:
            return None
        # follow a rename another shard made, or start one (a fresh name)
        done = [(old, new) for s, old, new in self.rename_history
                if s != shard and t.column(old) is not None and t.column(new) is None]
        old, new = self.r.choice(done) if done and self.r.random() < 0.7 else (c.name, self._fresh_name("r"))
        column = t.column(old)
        return self._rename_column(shard, column, new)

    def _rename_column(self, shard: str, column: Column, new: str) -> Proposal:
        if self.r.random() < 0.5:
            body = f"RENAME COLUMN {quote_identifier(column.name)} TO {quote_identifier(new)}"
        else:
            body = f"CHANGE COLUMN {quote_identifier(column.name)} {render_column(replace(column, name=new))}"
        return self._alter(shard, body, "rename", [(column.name, new)])

    def _add_index(self, tables) -> Proposal | None:
        shard, t = self._shard(tables)
        keyable = [c for c in t.columns if cols.keyable(c)]
        if not keyable:
            return None
        chosen = self.r.sample(keyable, min(len(keyable), self.r.choice((1, 1, 2))))
        unique = all(cols.unique_worthy(c) for c in chosen) and self.r.random() < 0.3
        parts = tuple(IndexPart(c.name) for c in chosen)
        index = Index(self._fresh_name("k"), IndexKind.UNIQUE if unique else IndexKind.PLAIN, parts)
        return self._alter(shard, f"ADD {render_index(index)}", "add_index")

    def _drop_index(self, tables) -> Proposal | None:
        shard, t = self._shard(tables)
        secondary = [ix for ix in t.indexes if ix.kind != IndexKind.PRIMARY]
        if not secondary:
            return None
        return self._alter(shard, f"DROP INDEX {quote_identifier(self.r.choice(secondary).name)}", "drop_index")

    def _options(self, tables) -> Proposal | None:
        shard, _ = self._shard(tables)
        x = self.r.random()
        if x < 0.35:
            return self._alter(shard, f"COMMENT={quote_string(self.r.choice(('a', 'b') * 4 + ('',)))}", "comment")
        if x < 0.6:
            cs, coll = cols.charset(self.r)
            return self._alter(shard, f"DEFAULT CHARSET={cs} COLLATE={coll}", "table_charset")
        if x < 0.8:
            return self._alter(shard, f"AUTO_INCREMENT={self.r.choice((1, 500, 10000))}", "auto_increment_option")
        return self._alter(shard, "ENGINE=InnoDB", "engine")

    def _toggle_auto_increment(self, tables) -> Proposal | None:
        shard, t = self._shard(tables)
        first = t.column("id")
        if first is None:
            return None
        return self._modify(shard, replace(first, auto_increment=not first.auto_increment), "auto_increment")

    def _generated(self, tables) -> Proposal | None:
        shard, t = self._shard(tables)
        sources = [c for c in t.columns[1:] if c.generated is None
                   and c.type.family in (Family.INTEGER, Family.STRING) and not c.type.is_text_kind]
        if not sources:
            return None
        g = self._pick_column(t, generated=True)
        if g is not None and self.r.random() < 0.3:
            return self._alter(shard, f"DROP COLUMN {quote_identifier(g.name)}", "drop_generated")
        name = g.name if g is not None else "g"
        column = cols.generated_over(self.r, self.r.choice(sources), name, variant=self.r.randint(0, 2))
        if column is None:
            return None
        verb = "MODIFY COLUMN" if g is not None else "ADD COLUMN"
        return self._alter(shard, f"{verb} {render_column(column)}", "generated")

    def _combined(self, tables) -> Proposal | None:
        """Two changes of one shard in one ALTER TABLE."""
        first = self._add_fresh(tables) if self.r.random() < 0.5 else self._widen(tables)
        if first is None:
            return None
        shard = first.step["shard"]
        second = self.r.choice((self._drop, self._nullability, self._add_index, self._default))({shard: tables[shard]})
        if second is None or ("ALTER COLUMN" in second.step["ddl"] and "ALTER COLUMN" in first.step["ddl"]):
            return None
        prefix = f"ALTER TABLE {table_of(shard)} "
        body = first.step["ddl"][len(prefix):] + ", " + second.step["ddl"][len(prefix):]
        return self._alter(shard, body, "combined", first.renames + second.renames)

    def _join(self, tables) -> Proposal | None:
        if self.left and self.r.random() < 0.4:
            shard = self.r.choice(self.left)
        else:
            shard = shard_id(self._next_shard)
            self._next_shard += 1
        model = tables[self.r.choice(sorted(tables))] if tables else None
        if model is None:
            return None
        create = render_table(model, "mariadb", name=table_of(shard))
        return Proposal({"shard": shard, "ddl": create}, "join")

    def _leave(self, tables) -> Proposal | None:
        shard, _ = self._shard(tables)
        return Proposal({"shard": shard, "ddl": f"DROP TABLE {table_of(shard)}"}, "leave")

    # -- copying a difference from another shard ---------------------------------------------
    def _copy_from_other(self, tables) -> Proposal | None:
        if len(tables) < 2:
            return None
        shard, other = self.r.sample(sorted(tables), 2)
        return self._copy(shard, tables[shard], tables[other])

    def _converge_step(self, tables) -> Proposal | None:
        model = tables.get(self.model_shard or "")
        if model is None:
            return None
        differing = [s for s, t in sorted(tables.items()) if t != model]
        if not differing:
            return None
        shard = self.r.choice(differing)
        return self._copy(shard, tables[shard], model)

    def _copy(self, shard: str, t: Table, model: Table) -> Proposal | None:
        """One DDL that makes shard's table `t` more like `model`: the first of its
        differences in a random order."""
        moves = self._differences(shard, t, model)
        self.r.shuffle(moves)
        return moves[0] if moves else None

    def _differences(self, shard: str, t: Table, model: Table) -> list[Proposal]:
        moves: list[Proposal] = []
        # a list, not a set: a set of strings iterates in a per-process order, and the
        # story of a seed must be the same in every process
        renamed_to = list(dict.fromkeys((old.lower(), new.lower()) for _, old, new in self.rename_history))
        for c in model.columns:
            mine = t.column(c.name)
            if mine is None:
                sources = [o for o, n in renamed_to if n == c.key and t.column(o) is not None
                           and model.column(o) is None]
                if sources:
                    moves.append(self._rename_column(shard, t.column(sources[0]), c.name))
                    continue
                after = self._after_in(model, c, t)
                moves.append(self._alter(shard, f"ADD COLUMN {render_column(c)}{after}", "copy_add"))
            elif mine != c:
                moves.append(self._modify(shard, c, "copy_modify"))
        for c in t.columns:
            renamed_away = any(o == c.key and model.column(n) is not None for o, n in renamed_to)
            if model.column(c.name) is None and not renamed_away:
                moves.append(self._alter(shard, f"DROP COLUMN {quote_identifier(c.name)}", "copy_drop"))
        for ix in model.indexes:
            mine = t.index(ix.name)
            if mine is None:
                moves.append(self._alter(shard, f"ADD {render_index(ix)}", "copy_add_index"))
            elif mine != ix:
                drop = "DROP PRIMARY KEY" if ix.kind == IndexKind.PRIMARY else f"DROP INDEX {quote_identifier(ix.name)}"
                moves.append(self._alter(shard, f"{drop}, ADD {render_index(ix)}", "copy_index"))
        for ix in t.indexes:
            if model.index(ix.name) is None and ix.kind != IndexKind.PRIMARY:
                moves.append(self._alter(shard, f"DROP INDEX {quote_identifier(ix.name)}", "copy_drop_index"))
        if t.options != model.options:
            o = model.options
            body = []
            if o.charset and (o.charset, o.collation) != (t.options.charset, t.options.collation):
                body.append(f"DEFAULT CHARSET={o.charset}" + (f" COLLATE={o.collation}" if o.collation else ""))
            if (o.comment or "") != (t.options.comment or ""):
                body.append(f"COMMENT={quote_string(o.comment or '')}")
            if o.engine and o.engine != t.options.engine:
                body.append(f"ENGINE={o.engine}")
            if body:
                moves.append(self._alter(shard, " ".join(body), "copy_options"))
        return moves

    @staticmethod
    def _after_in(model: Table, c: Column, t: Table) -> str:
        names = [x.name for x in model.columns]
        i = names.index(c.name)
        if i == 0:
            return " FIRST"
        before = names[i - 1]
        return f" AFTER {quote_identifier(before)}" if t.column(before) is not None else ""
