"""Which column of which shard holds which data, across renames: P3's "never loses
data of columns still present in some shard (under its current name)".

A *lineage* is one column's data through its names. Each shard maps its written
(not generated) columns to lineages; a rename keeps the lineage under the new name,
a drop forgets it on that shard, and an added column joins the lineage of that name
on another shard (the same downstream column, as the coordinator accepted the shards),
or starts a new one; so does the old name of the shard's own rename added again while
the shard still holds that data under the new name. A row written
downstream remembers its values by lineage; while a lineage is still in some shard's
accepted schema, the row's value must be in one of the lineage's current names
downstream (the old name while a rename is partial, the new one once it finished:
the procedure, docs/design.md "Renaming columns").

Blocked shards count with the schema the coordinator accepted (their rows are
paused), which is why `accept` snapshots a shard's map when it is not blocked.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable

from tests.fuzz.model import Table, key

# read from the statement's text, not through the product's DDL parser (MariaDB manual,
# ALTER TABLE: RENAME COLUMN old TO new, CHANGE [COLUMN] old new definition); a name is
# backquoted (as the generator writes them) or a plain word (as a hand-written story may)
_NAME = r"(`(?:[^`]|``)+`|\w+)"
_RENAMES = re.compile(rf"\bRENAME\s+COLUMN\s+{_NAME}\s+TO\s+{_NAME}|\bCHANGE\s+(?:COLUMN\s+)?{_NAME}\s+{_NAME}", re.I)


def renames_in(ddl: str) -> list[tuple[str, str]]:
    """The column renames of a story's ALTER TABLE (RENAME COLUMN, CHANGE to another name)."""
    out = []
    for m in _RENAMES.finditer(ddl):
        renamed = m.group(1) is not None  # RENAME COLUMN: a rename even to its own name in other case
        old, new = (_unquoted(n) for n in (m.group(1, 2) if renamed else m.group(3, 4)))
        if renamed or key(old) != key(new):
            out.append((old, new))
    return out


def _unquoted(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def written(table: Table) -> list[str]:
    return [c.key for c in table.columns if c.generated is None]


class Lineages:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self.current: dict[str, dict[str, int]] = {}
        self.accepted: dict[str, dict[str, int]] = {}
        self.renamed_away: dict[str, set[tuple[int, str]]] = {}  # (lineage, old name) per shard
        # per shard, a renamed-away name added again: its lineage -> (the one it was not, name)
        self.apart: dict[str, dict[int, tuple[int, str]]] = {}
        # per shard, the names its own renames gave their data (a column it added that
        # joined another shard's lineage is not one: seed 881553)
        self.carried: dict[str, set[str]] = {}
        self._alias: dict[int, int] = {}  # a lineage that turned out to be another one
        # per shard, the names whose renames move data downstream: the accepted ones,
        # renamed on since (replicator/schema/coordinator.py `_moving_rows`)
        self.moving: dict[str, set[str]] = {}
        self._seen: dict[int, set[str]] = {}  # every name a lineage had on any shard
        # per shard, names that joined another shard's lineage since it was last accepted
        self.joined: dict[str, set[str]] = {}
        # per shard, names it added (or was created with) while no accepted shard had them:
        # a paused shard accepted together with another that has one too shares its column
        self.unmatched: dict[str, set[str]] = {}

    def _of_name(
        self, name: str, exclude: str | None = None, accepted: dict[str, dict[str, int]] | None = None
    ) -> int | None:
        # the downstream column of that name, as the coordinator accepted the shards: a
        # paused shard's own column added again is not it yet (seed 250045), nor the new
        # name of its rename the coordinator refused (seed 310581); a shard not accepted
        # yet (the story's first tables) counts as it is
        accepted = self.accepted if accepted is None else accepted
        for shard, names in sorted(self.current.items()):
            names = accepted.get(shard, names)
            if shard != exclude and name in names:
                return names[name]
        return None

    def create(self, shard: str, table: Table) -> None:
        self.current[shard] = {n: self._of_name(n, shard) or next(self._ids) for n in written(table)}
        self.moving[shard] = set()
        self.joined[shard] = {n for n in written(table) if self._of_name(n, shard) is not None}
        self.unmatched[shard] = {n for n in written(table) if n not in self.joined[shard]}
        self._see(self.current[shard])

    def drop(self, shard: str) -> None:
        self.current.pop(shard, None)
        self.accepted.pop(shard, None)
        self.renamed_away.pop(shard, None)
        self.apart.pop(shard, None)
        self.carried.pop(shard, None)
        self.moving.pop(shard, None)
        self.joined.pop(shard, None)
        self.unmatched.pop(shard, None)

    def alter(self, shard: str, renames: Iterable[tuple[str, str]], after: Table) -> None:
        old = self.current.get(shard, {})
        renamed = {key(new): key(was) for was, new in renames}
        moved_away = set(renamed.values())
        moving = self.moving.setdefault(shard, set())
        names = {}
        for n in written(after):
            if n in renamed and renamed[n] in old and renamed[n] in moving:
                names[n] = old[renamed[n]]
                moving.discard(renamed[n])
                moving.add(n)
            elif n in old and n not in moved_away:
                names[n] = old[n]
            else:
                # (a rename of a name the coordinator never had of the shard, added while it
                # was paused, adds the new name: seed 300329)
                # joins the other shards' column of that name, unless the shard renamed that
                # data away from this name itself and holds it still: the old name of its own
                # rename, added again, is another column (docs/design.md: the shard pauses for it; seed
                # 221086). Once it dropped the new name, it is that downstream column (240017)
                found = self._of_name(n, shard)
                again = (found, n) in self.renamed_away.get(shard, set()) and found in old.values()
                names[n] = found if found is not None and not again else next(self._ids)
                if found is not None and again:
                    self.apart.setdefault(shard, {})[names[n]] = (found, n)
                elif found is not None:
                    self.joined.setdefault(shard, set()).add(n)
                else:
                    self.unmatched.setdefault(shard, set()).add(n)
        self.renamed_away.setdefault(shard, set()).update((old[w], w) for w in moved_away if w in old)
        carried = self.carried.get(shard, set()) - moved_away
        carried |= {n for n, w in renamed.items() if w in old and names.get(n) == old[w]}
        self.carried[shard] = {n for n in carried if n in names}
        self._rejoin(shard, names)
        self.current[shard] = names
        self._see(names)

    def _see(self, names: dict[str, int]) -> None:
        for n, lineage in names.items():
            self._seen.setdefault(lineage, set()).add(n)

    def _rejoin(self, shard: str, names: dict[str, int]) -> None:
        """A name added again is the downstream column after all once the shard dropped
        the new name while it still has it: the rename is cancelled and its values are
        copied back into that column, which other shards have (seed 280014). Only the
        names its renames carried the data to count: a column of the rename's new name it
        added itself, which joined the others' downstream column, is not the data it
        renamed away (replicator/schema/coordinator.py `_holds_old`; seed 881553)."""
        apart = self.apart.get(shard, {})
        carried = self.carried.get(shard, set())
        for lineage, (was, n) in list(apart.items()):
            if names.get(n) != lineage:
                del apart[lineage]  # dropped or renamed on: the shard's own column for good
            elif all(names.get(m) != was for m in carried) and self._of_name(n, shard) == was:
                names[n] = was
                self._alias[lineage] = was
                del apart[lineage]

    def _resolve(self, lineage: int) -> int:
        while lineage in self._alias:
            lineage = self._alias[lineage]
        return lineage

    def accept(
        self,
        shard: str,
        before: dict[str, dict[str, int]] | None = None,
        ended: frozenset[str] = frozenset(),
        pending: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        """The coordinator has the shard's current schema in the join. `before`: the
        accepted maps as the decision found them: a name the shard added while paused
        joins the downstream column of that name then, even where another shard the
        same decision accepts renamed it away (the rename stays pending, the shard holds
        its old name: seed 490375). `ended`: the new names of the renames the decision
        ended; one no other shard has now was cancelled (its values went back to the old
        name), and the shard's column of that name is its own (seed 641176). `pending`:
        the renames (old, new) pending after the decision; a name the shard added while
        paused that is the old name of one, joined while another shard had it, is the
        column the rename waits for, though every accepted shard has renamed it away
        since (replicator/schema/coordinator.py `_paused_holder`; seed 740066)."""
        if shard in self.current:
            names = self.current[shard]
            prior = (self.accepted if before is None else before).get(shard, {})
            for n in self._kept_going(shard, names, prior, pending):
                # the shard has the new name of a pending rename it had accepted: the
                # coordinator takes it as that downstream column and keeps the rename
                # going (docs/design.md "A rename undone": a paused shard keeps it going while it
                # has the new name), whatever the shard did with the name while paused
                # (dropped it and renamed its own old name, re-added, to it: seed 1105994)
                names[n] = prior[n]
            for n in self.joined.pop(shard, set()) & names.keys():
                # added while the shard was paused: the downstream column of that name is
                # the one there now, if any (another shard may have renamed the one it
                # joined away meanwhile: seed 320324)
                cancelled = self._cancelled(n, shard, ended)
                now = None if cancelled else self._of_name(n, shard, before)
                if now is None and self._awaited_old(n, names[n], before, pending):
                    now = names[n]
                if now is None and not cancelled:
                    # none was, but a shard this decision accepted already has it: one
                    # downstream column, as for `unmatched` below (seed 999243: both added
                    # the new name of a rename the decision cancelled)
                    now = self._of_name(n, shard)
                if now != names[n]:
                    names[n] = now if now is not None else next(self._ids)
            for n in self.unmatched.pop(shard, set()) & names.keys():
                # two paused shards that added a column of one name, accepted in one
                # decision: one downstream column, one lineage (seed 391348)
                now = None if self._cancelled(n, shard, ended) else self._of_name(n, shard)
                if now is not None and now != names[n]:
                    names[n] = now
            self._gave_up(shard, names, before, pending)
            self._see(names)
            self.accepted[shard] = dict(names)
            self.moving[shard] = set(names)

    def _gave_up(
        self, shard: str, names: dict[str, int], before: dict[str, dict[str, int]] | None, pending: frozenset[tuple[str, str]]
    ) -> None:
        """A shard that made a rename still pending, and has the old name again but not
        the new one, has given it up: its old name is the column the rename waits for,
        by name, as a shard's that never renamed (replicator/schema/rename_rules.py
        `holds_old`, F109), even where no accepted shard had that name when it added it
        back (another holder was paused: F173)."""
        maps = [*(self.accepted if before is None else before).values(), *self.accepted.values()]
        away = self.renamed_away.get(shard, set())
        for old, new in pending:
            if old not in names or new in names:
                continue
            was = next((w for w, n in sorted(away) if n == old and any(m.get(new) == w for m in maps)), None)
            if was is not None and names[old] != was:
                self._alias[names[old]] = was
                names[old] = was

    def _kept_going(
        self, shard: str, names: dict[str, int], prior: dict[str, int], pending: frozenset[tuple[str, str]]
    ) -> list[str]:
        """Names of the shard that are the new name of a rename pending after the decision,
        which its accepted map had under another lineage its own renames did not carry."""
        carried = self.carried.get(shard, set())
        return [
            n
            for _, n in pending
            if n in names and n in prior and names[n] != prior[n] and n not in carried
        ]

    def _awaited_old(
        self, name: str, lineage: int, before: dict[str, dict[str, int]] | None, pending: frozenset[tuple[str, str]]
    ) -> bool:
        """The lineage is an accepted shard's under the new name of a pending rename of `name`."""
        maps = (self.accepted if before is None else before).values()
        return any(old == name and names.get(new) == lineage for old, new in pending for names in maps)

    def _cancelled(self, name: str, shard: str, ended: frozenset[str]) -> bool:
        """The name was the new one of a rename the decision ended, and no other shard
        has it now: the rename was cancelled, whatever the accepted maps still say."""
        return name in ended and self._of_name(name, shard, self.current) is None

    def live(self) -> set[int]:
        ids = {lineage for names in self.accepted.values() for lineage in names.values()}
        return ids | {a for a in self._alias if self._resolve(a) in ids}

    def names_once(self, lineage: int) -> set[str]:
        """Its names now, or, for a lineage no shard has any more, every name it had."""
        return self.names_of(once=True)(lineage)

    def names(self, lineage: int) -> set[str]:
        return self.names_of()(lineage)

    def names_of(self, once: bool = False) -> Callable[[int], set[str]]:
        """`names` (or `names_once`) of many lineages, while the maps stay as they are:
        one pass over every shard's map, not one per lineage (P3 asks for each value of
        each row after every step)."""
        index: dict[int, set[str]] = {}
        for maps in (self.accepted, self.current):
            for names in maps.values():
                for n, i in names.items():
                    index.setdefault(i, set()).add(n)

        def names_now(lineage: int) -> set[str]:
            lineage = self._resolve(lineage)
            found = set(index.get(lineage, ()))
            return found or (set(self._seen.get(lineage, ())) if once else found)

        return names_now
