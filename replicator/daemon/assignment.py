"""Which member of a task reads each source (issue 75: a shard group bigger than one
machine), decided from a value: the task's sources, its live members and who reads what now.

The rules, in order:
0. a source the operator moved to a live member (`shardctl members move`) is that member's,
   and the balance never moves it (moved to a member gone, the rules below take it);
1. each source goes to exactly one live member; none while no member lives;
2. a source whose member is live stays with it (a move costs a drain and a start);
3. a source with no live member (its member died, left or is new to the task's config) goes to
   the member reading the fewest sources;
4. then, while one member reads two sources more than another (a member added reads none), the
   busiest gives one to the least busy.

Ties go by name, so every member computes the same assignment from the same value. Sources
count alike: a busier source is not yet weighed by its rows."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence


def assign(
    sources: Sequence[str],
    members: Collection[str],
    owners: Mapping[str, str],
    moved: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """source -> member, by the rules above (`owners`: source -> member now; `moved`: source
    -> the member the operator moved it to)."""
    live = sorted(set(members))
    if not live:
        return {}
    pinned = {s: m for s, m in (moved or {}).items() if s in sources and m in live}
    out = {s: owners[s] for s in sorted(sources) if owners.get(s) in live}
    out.update(pinned)
    reads: dict[str, list[str]] = {m: [] for m in live}
    for source, member in out.items():
        reads[member].append(source)
    for source in sorted(s for s in set(sources) if s not in out):
        member = _least(reads)
        out[source] = member
        reads[member].append(source)
    while True:
        movable = {m: [s for s in reads[m] if s not in pinned] for m in live}
        busiest = max((m for m in live if movable[m]), key=lambda m: (len(reads[m]), m), default=None)
        least = _least(reads)
        if busiest is None or len(reads[busiest]) - len(reads[least]) <= 1:
            return out
        source = max(movable[busiest])
        reads[busiest].remove(source)
        reads[least].append(source)
        out[source] = least


def _least(reads: Mapping[str, list[str]]) -> str:
    return min(reads, key=lambda m: (len(reads[m]), m))


def moves(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, tuple[str | None, str | None]]:
    """The sources whose member changes: source -> (its member before, after; None: none)."""
    named = sorted(set(before) | set(after))
    return {s: (before.get(s), after.get(s)) for s in named if before.get(s) != after.get(s)}
