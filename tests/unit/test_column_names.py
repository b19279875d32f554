"""The names a worker gives the values of the rows it decodes (replicator/source/column_names.py):
each table version's own, also for a version made after another was dropped (after a DDL
or a rewind), which CPython may put at the freed one's address. Keyed by id(), rows read
again after a rewind took a later version's names, one column off (L50)."""

from __future__ import annotations

from replicator.source.column_names import ColumnNames


class Version:
    """A table version as ColumnNames reads it: the names of its columns."""

    def __init__(self, names: tuple[str, ...]):
        self.names = names

    def columns_of(self, present):
        return tuple(self.names[i] for i in present)


def test_each_version_gets_its_own_names_also_at_a_freed_ones_address():
    names = ColumnNames()
    first = Version(("n1", "id", "c2", "c3", "c4", "c5", "n3"))
    assert names.of(first, (0, 1, 2), ("_source",)) == ("n1", "id", "c2", "_source")
    del first  # (dropped, as a worker drops its codecs at a rewind)
    for _ in range(100):  # (CPython gives one of these the address `first` had, if it was freed)
        later = Version(("n1", "id", "c1", "c2", "c3", "c4", "c5"))
        assert names.of(later, (0, 1, 2), ("_source",)) == ("n1", "id", "c1", "_source")


def test_the_same_version_and_columns_share_one_tuple():
    names = ColumnNames()
    version = Version(("a", "b"))
    assert names.of(version, [0, 1], ()) is names.of(version, (0, 1), ())  # pickled once per batch
    assert names.of(version, (1,), ("x",)) == ("b", "x")
