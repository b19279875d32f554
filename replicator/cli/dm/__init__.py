"""The import of TiDB DM task files (`shardmerge import-dm`): DM's task and source files as
our task config, with a note for each DM field that does not map one to one.

One module per part of DM's format: `servers` (target-database, mysql-instances and the
source files, meta), `tables` (routes, block-allow-lists, online DDL), `events` (binlog event
filters), `units` (syncers, validators, mydumpers, loaders); `rules` tracks which source names
which rule, `patterns` turns DM's patterns into ours, `task` puts the config together."""

from replicator.cli.dm.notes import Note, NoteKind
from replicator.cli.dm.task import Imported, convert, import_dm

__all__ = ["Imported", "Note", "NoteKind", "convert", "import_dm"]
