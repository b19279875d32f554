"""Pure schema algebra for shard merging: the MySQL schema model, DDL parsing and
application, and the lattice of schema compatibility (docs/design.md "The lattice of compatibility"). No
I/O here.

This module is the front door; code outside `lattice/` imports from it only.

Parsing and applying DDL
    parse(sql, default_schema=None)     one statement → CreateTable, AlterTable, DropTables,
                                        RenameTables, TruncateTable, DropDatabase,
                                        OtherStatement or UnsupportedDDL (never raises)
    parse_table(sql, upstream=...)      CREATE TABLE text → Table (raises DDLSyntaxError)
    build_table(create, upstream=...)   a parsed CreateTable → Table
    apply(table, changes, upstream=...) a parsed ALTER's changes applied → Table (SchemaError)
    split_statements(sql)               a script → its statements

The lattice (docs/design.md "The lattice of compatibility")
    join(a, b, flavor) / join_all(tables, flavor)   → Table, or JoinConflict
    compare(a, b, flavor)               -1, 0, 1 or INCOMPARABLE (compatibility order)
    keeps_rows(old, new, flavor)        every row old takes, new takes and reads back the same (minor)
    holding(a, b, flavor)               a column type taking every value of both, or None
    converts_values(before, after, flavor)  an ALTER between the types may give a value other text
    converts_through(value, held, to)  a value held in a wider type converts otherwise
    without_generated_reading(t, names) t without the generated columns reading those names
    without_stray_auto_increment(cs, ixs)  the columns, AUTO_INCREMENT only where a key leads with it
    loses_key(before, after)            why a join would lose the merged table's primary key (the
                                        key is the union of the shards' keys: lattice/keys.py)
    settled_prefixes(index, columns)    the key prefixes MariaDB gives an index on these columns
    fitted_prefixes(index, columns)     and a downstream key's cut till the key fits
    key_problem(index, columns)         why the server would refuse a key on these columns
    hash_keys(table) / row_image(table) MariaDB's hash-kept UNIQUE keys; the table as its
                                        row events hold it (a hidden column per hash key)
    recast_default(default, type, flavor) a default as a column of another type holds it
    least_type(value, type)             the least type of a type's kind holding one of its values
    holds_number(type, sql)             whether a type holds an INTEGER's or DECIMAL's value as it is
    takes_literal(type, default)        whether strict mode stores a recast default in that type
    IncrementalJoin                     the join of many shards, re-joined per change
    ColumnTypes(flavor)                 the lattice of column types (join, compare, leq)
    Conflict                            what a lattice piece raises where no join exists
    diff(old, new, flavor=, target=, renames=)   DDL from one joined table to the next, as
                                        DownstreamSteps (each statement with the table after it)
    old_name_index(column)              the index a pending rename's old column gets downstream;
    is_old_name_index(name), is_old_name_index_statement(sql)   no part of the schema
    create(new, flavor=, target=)       the DownstreamStep creating the table when there is none

Rendering
    render_table(table, flavor, name=None)   CREATE TABLE text as the flavor will hold it
    render_type(column_type, flavor)    a column type as SQL
    render_index(index)                 an index as in CREATE TABLE / ALTER TABLE ADD
    materialize(table, flavor)          the table a flavor really holds (fillers settled)
    filler_default(column_type)         the default of a column some shard lacks
    render_default(default)             a default as SQL
    qualified_name, quote_identifier, quote_string
    mbmaxlen(charset)                   the most bytes a character of the set takes
    python_codec(charset)               Python's codec for the set's bytes

The model and the rest
    Table, Column, ColumnType, Family (DAYS: those holding a calendar day), Generated,
    Index, IndexKind, IndexPart, Check,
    Default, NULL_DEFAULT, TableOptions, OptionsSpec (table options an ALTER sets),
    key (case-insensitive names); Flavor;
    table_to_data / table_from_data (JSON-ready form); DDLSyntaxError, SchemaError.

The functions `apply`, `join` and `diff` share their names with the modules that
define them, so `lattice.join` is the function; the modules stay importable as
`from lattice.join import ...` for lattice's own tests.
"""

from lattice.algebra import INCOMPARABLE, Conflict
from lattice.apply import SchemaError, build_table, parse_table
from lattice.apply import apply_changes as apply
from lattice.charsets import mbmaxlen, python_codec
from lattice.ddl import (
    AddColumn,
    AlterTable,
    Change,
    CreateTable,
    DropColumn,
    DropDatabase,
    DropTables,
    ModifyColumn,
    OtherStatement,
    ParsedDDL,
    RenameColumn,
    RenameTables,
    RenameTo,
    SetOptions,
    TableName,
    TruncateTable,
    UnsupportedDDL,
)
from lattice.ddl import parse_ddl as parse
from lattice.definitions import OptionsSpec
from lattice.diff import create, diff
from lattice.diff_plan import RenameStep
from lattice.diff_steps import DownstreamStep
from lattice.fillers import filler_default
from lattice.flavor import Flavor
from lattice.hash_keys import hash_keys, row_image
from lattice.incremental import IncrementalJoin
from lattice.join import (
    JoinConflict,
    compare,
    converts_through,
    converts_values,
    holding,
    join,
    join_all,
    keeps_rows,
    without_generated_reading,
    without_stray_auto_increment,
)
from lattice.keys import LOSES_KEY, loses_key
from lattice.limits import fitted_prefixes, key_problem, settled_prefixes
from lattice.literals import holds_number, least_type, recast_default, takes_literal
from lattice.model import (
    DAYS,
    NULL_DEFAULT,
    Check,
    Column,
    ColumnType,
    Default,
    Family,
    Generated,
    Index,
    IndexKind,
    IndexPart,
    Table,
    TableOptions,
    key,
)
from lattice.old_name_index import is_old_name_index, is_old_name_index_statement, old_name_index
from lattice.render import materialize, qualified_name, render_default, render_index, render_table
from lattice.serde import table_from_data, table_to_data
from lattice.sqltext import DDLSyntaxError, quote_identifier, quote_string, split_statements
from lattice.typejoin import ColumnTypes
from lattice.typetext import render_type

__all__ = [  # grouped by purpose in the docstring above
    "DAYS",
    "INCOMPARABLE",
    "LOSES_KEY",
    "NULL_DEFAULT",
    "AddColumn",
    "AlterTable",
    "Change",
    "Check",
    "Column",
    "ColumnType",
    "ColumnTypes",
    "Conflict",
    "CreateTable",
    "DDLSyntaxError",
    "Default",
    "DownstreamStep",
    "DropColumn",
    "DropDatabase",
    "DropTables",
    "Family",
    "Flavor",
    "Generated",
    "IncrementalJoin",
    "Index",
    "IndexKind",
    "IndexPart",
    "JoinConflict",
    "ModifyColumn",
    "OptionsSpec",
    "OtherStatement",
    "ParsedDDL",
    "RenameColumn",
    "RenameStep",
    "RenameTables",
    "RenameTo",
    "SchemaError",
    "SetOptions",
    "Table",
    "TableName",
    "TableOptions",
    "TruncateTable",
    "UnsupportedDDL",
    "apply",
    "build_table",
    "compare",
    "converts_through",
    "converts_values",
    "create",
    "diff",
    "filler_default",
    "fitted_prefixes",
    "hash_keys",
    "holding",
    "holds_number",
    "is_old_name_index",
    "is_old_name_index_statement",
    "join",
    "join_all",
    "keeps_rows",
    "key",
    "key_problem",
    "least_type",
    "loses_key",
    "materialize",
    "mbmaxlen",
    "old_name_index",
    "parse",
    "parse_table",
    "python_codec",
    "qualified_name",
    "quote_identifier",
    "quote_string",
    "recast_default",
    "render_default",
    "render_index",
    "render_table",
    "render_type",
    "row_image",
    "settled_prefixes",
    "split_statements",
    "table_from_data",
    "table_to_data",
    "takes_literal",
    "without_generated_reading",
    "without_stray_auto_increment",
]
