"""Our DDL application agrees with a real MariaDB: each script of the corpus runs on an
upstream and, in parallel, through lattice.parse + lattice.apply; after every statement
the table MariaDB shows (SHOW CREATE TABLE, read back with lattice.parse_table) must equal
ours. The tables we hold must also create on MariaDB as we render them and read back
equal, and the statements we refuse must be the ones MariaDB refuses, with its code.

Scripts MariaDB refuses although we accept them on purpose (dropping a column of a
multi-column key, CONVERT TO widening a VARCHAR, MySQL's DROP CHECK ...) are not in
the corpus; tests/unit/test_ddl_apply.py covers them."""

from __future__ import annotations

from dataclasses import replace

import pymysql
import pytest

from lattice import (
    AlterTable,
    CreateTable,
    DropTables,
    Index,
    IndexKind,
    IndexPart,
    ParsedDDL,
    RenameTables,
    RenameTo,
    SchemaError,
    Table,
    TruncateTable,
    apply,
    build_table,
    fitted_prefixes,
    hash_keys,
    parse,
    parse_table,
    render_table,
)
from replicator.apply.inspect import read_table
from replicator.sandbox import Instance, Sandbox
from tests.unit.test_ddl_apply import ERRORS, RICH

UTF8MB4 = " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
LATIN1 = " ENGINE=InnoDB DEFAULT CHARSET=latin1"

# (what, statements): a CREATE TABLE, then what changes it.
CORPUS: list[tuple[str, list[str]]] = [
    (
        "hash keys: UNIQUE keys too long for a B-tree, or written USING HASH, until the next ALTER "
        "(live stories seed 9627)",
        [
            "create table t (id int primary key, a varchar(768), b varchar(769), c text, d varbinary(3073),"
            " e datetime(6), f decimal(10,2), unique key (a), unique key (b), unique key (c), unique key (d),"
            " unique key ea (e, a), unique key fb (f, b(767)), unique key c10 (c(10)), key kb (b))" + UTF8MB4,
            "create table h (id int primary key, a int, b int, unique key (a) using hash,"
            " unique key using hash (b), unique key ab (a, b) using btree)" + UTF8MB4,
            "alter table h comment 'any alter forgets a written USING HASH'",
            "create unique index hb using hash on h (b)",
            "rename table h to h2",
            "alter table h2 add unique key hab (a, b) using hash, add column c int",
            "create unique index hc on h2 (c) using hash",
            "alter table t modify b varchar(10)",
            "alter table t modify a varchar(2000)",
            "alter table t add column g json, add unique key (g)",
            "alter table t add column p varchar(800) character set latin1, add unique key pp (p, e, f)",
        ],
    ),
    (
        "idempotent migrations: IF [NOT] EXISTS where the thing is and where it is not (issue 43)",
        [
            "create table t (id int primary key, i int, a int, key i (i))" + UTF8MB4,
            "alter table t add key if not exists (i)",  # a key `i` is there: nothing
            "alter table t add key if not exists (a)",
            "alter table t add key if not exists i (a)",
            "alter table t add unique index if not exists u (a)",
            "alter table t add unique index if not exists u (i)",
            "alter table t add primary key if not exists (i)",
            "alter table t add constraint c unique key if not exists (i)",
            "alter table t add constraint c2 unique if not exists (i)",
            "alter table t rename key if exists i to j",
            "alter table t rename key if exists zz to j2",
            "alter table t rename column if exists zz to yy",
            "alter table t rename column if exists a to b",
            "alter table t alter column if exists zz set default 1",
            "alter table t alter column if exists b set default 1",
            "alter table t alter column if exists zz drop default",
            "alter table t add if not exists zz int",
            "alter table t add column if not exists zz bigint",
            "create or replace index j on t (id, b)",
            "alter table t convert to character set 'latin1' collate 'latin1_bin'",
            "alter table t order by b, i",
        ],
    ),
    (
        "typed time literals and TIMESTAMP() in default expressions (issue 43, from MariaDB's test suite)",
        [
            "create table t (id int primary key, a int)" + UTF8MB4,
            "alter table t add b date not null default if(unix_timestamp()>1,TIMESTAMP'2001-01-01 10:20:30',0)",
            "alter table t add c time not null default if(unix_timestamp()>1,TIMESTAMP'2001-01-01 10:20:30',0)",
            "alter table t add d datetime default (timestamp('2001-01-01'))",
            "alter table t add e datetime default (TIMESTAMP'2001-01-01 10:20:30' + interval 1 day)",
            "alter table t add f date default (if(a > 1, DATE'2001-01-01', 0))",
        ],
    ),
    (
        "column-level checks: part of the column's definition (issue 43, from MariaDB's test suite)",
        [
            "create table t (id int primary key, a int, b int check (b > 0), c int check (c > 1),"
            " d int check (d > a), constraint t1 check (a < 100))" + UTF8MB4,
            "alter table t modify c bigint",  # the new definition has no check: it goes
            "alter table t modify b int check (b > 5)",
            "alter table t rename column b to b2",  # it follows the rename, keeping its name
            "alter table t change b2 b3 int",  # and goes with a definition without one
            "alter table t add e int check (e <> 0), add constraint t2 check (e < 7)",
            "alter table t drop column d",
            "alter table t change e e2 int check (e2 < 5)",
        ],
    ),
    (
        "index comments (issue 43, from MariaDB's test suite)",
        [
            "create table t (id int, a int, b int, primary key (id) comment 'pk', key k (a) comment 'kc')"
            + UTF8MB4,
            "create index i1 on t (a) comment 'x'",
            "create index i2 on t (b) using btree comment 'y' algorithm=inplace",
            "alter table t add unique key u (b) comment 'z', add key k2 (a, b) comment ''",
            "alter table t drop index k, add index k (a) comment 'changed'",
            "alter table t rename index i1 to i3",
        ],
    ),
    (
        "a default naming another column, without parentheses (issue 43)",
        [
            "create table t (id int primary key, d1 int, d2 int default d1, d3 int default `d1`)" + UTF8MB4,
            "alter table t add d4 varchar(10) default d2",
            "alter table t alter column d4 set default d3",
            "alter table t rename column d1 to e1",
        ],
    ),
    (
        "a conversion and a default character set in one statement (issue 43)",
        [
            "create table t (id int primary key, v varchar(10), w text)" + LATIN1,
            "alter table t convert to character set utf8mb3, character set latin1",
            "alter table t character set utf8mb4, convert to character set latin1",
        ],
    ),
    (
        "integer types and attributes",
        [
            "create table t (a tinyint, b smallint(5) unsigned, c mediumint zerofill, d int(11) not null default -3,"
            " e bigint unsigned not null auto_increment primary key, f bool default true, g integer default '7')"
            + UTF8MB4,
            "alter table t modify a tinyint unsigned not null default 1, modify c mediumint unsigned zerofill first",
        ],
    ),
    (
        "decimal, float, double, bit",
        [
            "create table t (a decimal(10,2) default 1.5, b numeric, c float, d double precision, e real default -0.25,"
            " f float(7,3) unsigned, g double(10,2), h bit(5) default b'101', i bit)" + UTF8MB4,
            "alter table t alter column a set default '2.345', alter column h set default 3, modify b decimal(12,4) not null",
        ],
    ),
    (
        "character types, charsets, collations, BINARY attribute",
        [
            "create table t (a char(5) default 'it''s', b varchar(20) binary default 'a\\nb',"
            " c varchar(5) character set latin1 collate latin1_bin, d char(4) character set binary,"
            " e varchar(10) charset utf8 default 'x', f nchar(3), g varchar(7) collate utf8mb4_unicode_ci)"
            + UTF8MB4,
            "alter table t modify e varchar(12) character set utf8mb3 collate utf8mb3_bin not null default 'y'",
            'alter table t add h varchar(3) default "q", add i char(2) character set latin1',
        ],
    ),
    (
        "binary, text and blob types",
        [
            "create table t (a binary(3) default x'414243', b varbinary(10) default x'00ff', c tinytext, d text,"
            " e mediumtext, f longtext, g tinyblob, h blob, i mediumblob, j longblob, k text(100), l blob(300))"
            + UTF8MB4,
            "alter table t modify c text, modify h longblob, add m text default 'x'",
        ],
    ),
    (
        "enum, set, temporal types",
        [
            "create table t (a enum('x','y','z') default 'y', b set('a','b','c') default 'c,a', c year default 2020,"
            " d date default '2020-1-2', e time(2) default '12:34:56.70', f datetime default '2020-01-01',"
            " g timestamp(3) not null default current_timestamp(3) on update current_timestamp(3),"
            " h datetime(6) default now(6), i time default '-12:00:00', j timestamp null default null)"
            + UTF8MB4,
            "alter table t modify a enum('x','y','z','w') not null default 'w', alter b drop default",
            "alter table t modify g timestamp(3) null default null",
        ],
    ),
    (
        "json and spatial types",
        [
            "create table t (id int primary key, doc json, p point not null, g geometry, l linestring, pg polygon,"
            " mp multipoint, ml multilinestring, mpg multipolygon, gc geometrycollection, spatial key (p))"
            + UTF8MB4,
            "alter table t add doc2 json not null, drop column gc, modify pg polygon not null, add spatial index sg (pg)",
        ],
    ),
    (
        "other types: inet6, uuid",
        [
            "create table t (a inet6, b uuid default '00000000-0000-0000-0000-000000000000', c int)"
            + UTF8MB4,
            "alter table t add d inet4",
        ],
    ),
    (
        "expression defaults and escaped strings",
        [
            "create table t (a int default (1 + 2), b varchar(30) default 'a\\tb\\\\c', c varchar(10) default 'it\\'s',"
            " d date default (curdate()), e varchar(10) default (concat('a', 'b')))" + UTF8MB4,
            "alter table t alter column b set default 'x''y', alter column a set default (4 * 2)",
        ],
    ),
    (
        "generated columns",
        [
            "create table t (a int, b int, s int as (a + b) stored, v int generated always as (a * 2) virtual,"
            " w varchar(10) as (concat(a, '-')) virtual)" + UTF8MB4,
            "alter table t add p int as (b - 1) persistent, modify v int as (a * 3) virtual",
            "alter table t change a z int",
        ],
    ),
    (
        "checks and generated columns as MariaDB rewrites them",
        [
            "create table t (a int, b varchar(20), d datetime, g int as ((a + 1) * 2) virtual,"
            " h int as (not (a > 5)) virtual, i int as (a - (a - 1)) stored,"
            " constraint c1 check ((a > 1) and (b < 'x')), constraint c2 check (not (a > 5 and b < 'x')),"
            " constraint c3 check (a in (7) or a not in (8) or not a),"
            " constraint c4 check (b not regexp '^z' and not (b like 'q%')),"
            " constraint c5 check (a between 1 and 9 or a is null), constraint c6 check (((a)) <> -(a)))"
            + UTF8MB4,
            "alter table t add constraint c7 check (not (d is null) or (a = (1))), add j int as (not a) virtual",
            "alter table t change a a2 int",
        ],
    ),
    (
        "CURRENT_TIMESTAMP precision and parenthesised defaults",
        [
            "create table t (a datetime(3) default current_timestamp on update current_timestamp,"
            " b timestamp(6) not null default now(), c datetime default current_timestamp(3),"
            " d datetime(2) default (now()), e varchar(5) default ('x'), f int default (-1),"
            " g datetime default (now() + interval 1 day), h timestamp(3) null default current_timestamp(2))"
            + UTF8MB4,
            "alter table t modify c datetime(4) default current_timestamp(2) on update localtimestamp,"
            " alter column e set default ('y'), alter column f set default (2 * 3)",
        ],
    ),
    (
        "CURRENT_TIMESTAMP as the default of a column of another type (L52)",
        [
            "create table t (id int primary key, a varchar(60) default current_timestamp(3),"
            " b int not null default current_timestamp, c char(30) default now(6), d varchar(40) not null default '')"
            + UTF8MB4,
            "alter table t alter column d set default current_timestamp(2)",
            "alter table t modify d datetime(3) not null default current_timestamp(3)",
            "alter table t modify d varchar(60) not null default current_timestamp(3), modify b bigint default now()",
        ],
    ),
    (
        "defaults MariaDB normalises",
        [
            "create table t (a year default 99, b year default '0', c float(5,2) default 3.145, d binary(4) default 'ab',"
            " e time default 120, f time default '1 10:00', g time(1) default '12:34:56.789', h date default 20200102,"
            " i date default '70/1/2', j datetime default '200102030405', k datetime(1) default '2020-01-02T03:04:05.96',"
            " l timestamp(6) null default '2020-01-02 03:04:05.1', m varbinary(5) default x'00ff', n bit(8) default 255,"
            " o set('x','Y') default 'y,X', p enum('A','b') default 'a', q char(4) default ' a ')" + UTF8MB4,
            "alter table t alter column a set default 5, alter column e set default -120, alter column d set default x'01'",
        ],
    ),
    (
        "comments and column options",
        [
            "create table t (a int comment 'the a', b varchar(10) not null default '' comment 'it''s b')"
            " comment 'table'" + UTF8MB4,
            "alter table t modify a int comment 'new', comment = 'other'",
        ],
    ),
    (
        "ADD COLUMN FIRST / AFTER / at the end",
        [
            "create table t (a int, b int)" + UTF8MB4,
            "alter table t add column c int first, add column d varchar(3) not null after a, add e datetime",
            "alter table t add column f int after e",
        ],
    ),
    (
        "ADD COLUMN (a, b) and IF NOT EXISTS",
        [
            "create table t (a int)" + UTF8MB4,
            "alter table t add column (b int not null default 1, c text)",
            "alter table t add column if not exists a bigint, add column if not exists d int",
        ],
    ),
    (
        "ADD COLUMN with inline keys and checks",
        [
            "create table t (a int)" + UTF8MB4,
            "alter table t add b int unique, add c int primary key, add d int check (d > 0)",
            "alter table t add e int unique key, add f int check (f < 10)",
        ],
    ),
    (
        "DROP COLUMN drops single-column keys and its own checks",
        [
            "create table t (a int, b int, c int, key (a), key bc (b, c), unique key (c),"
            " constraint ca check (a > 0))" + UTF8MB4,
            "alter table t drop column a",
            "alter table t drop column if exists zz, drop c, drop b, add d int",
        ],
    ),
    (
        "DROP COLUMN together with what reads it",
        [
            "create table t (a int, b int, c int, g int as (a + b) virtual, key (a), key kb (b),"
            " constraint cab check (a < b))" + UTF8MB4,
            "alter table t drop column a, drop column g, drop constraint cab",
            "alter table t drop column b, drop index kb",
        ],
    ),
    (
        "DROP every column a check reads drops the check",
        [
            "create table t (id int, a int, b int, constraint cab check (a < b), check (id > 0))" + UTF8MB4,
            "alter table t drop column a, drop column b",
        ],
    ),
    (
        "DROP and re-ADD a column: its keys follow",
        [
            "create table t (a int, b int, key (a), key ab (a, b), constraint ca check (a > 0))" + UTF8MB4,
            "alter table t drop column a, add column a int",
        ],
    ),
    (
        "MODIFY type, nullability, default, position",
        [
            "create table t (a int, b varchar(10), c int not null)" + UTF8MB4,
            "alter table t modify a bigint unsigned not null default 5, modify b varchar(20) first",
            "alter table t modify column c int null after a, modify if exists zz int",
        ],
    ),
    (
        "CHANGE renames in keys, checks and generated columns",
        [
            "create table t (a int, b int, g int as (a + b) virtual, key ka (a), key kab (a, b),"
            " constraint ca check (a > 0), constraint cab check (a < b))" + UTF8MB4,
            "alter table t change a z bigint",
            "alter table t change column b y int not null after g, change if exists qq q int",
        ],
    ),
    (
        "RENAME COLUMN",
        [
            "create table t (a int, b int, g int as (a * 2) stored, key kab (a, b), constraint ca check (a > 0))"
            + UTF8MB4,
            "alter table t rename column a to x",
            "alter table t rename column x to `X`",
        ],
    ),
    (
        "CHANGE a b, CHANGE b a swaps",
        [
            "create table t (a int not null, b varchar(5), g int as (a + 1) virtual, key ka (a), key kb (b),"
            " constraint ca check (a > 0))" + UTF8MB4,
            "alter table t change a b int not null, change b a varchar(5)",
        ],
    ),
    (
        "RENAME COLUMN a TO b, b TO a swaps",
        [
            "create table t (a int, b int, c int, key kab (a, b), constraint cab check (a < b))" + UTF8MB4,
            "alter table t rename column a to b, rename column b to a",
            "alter table t rename column a to c2, rename column c to a",
        ],
    ),
    (
        "positions name the new columns",
        [
            "create table t (a int, b int, c int)" + UTF8MB4,
            "alter table t add column z int after a3, change a a3 int first",
            "alter table t modify a3 int after c, modify c int first",
        ],
    ),
    (
        "MODIFY a column added earlier in the statement",
        [
            "create table t (a int)" + UTF8MB4,
            "alter table t add column b int, modify b bigint not null",
        ],
    ),
    (
        "ALTER COLUMN SET / DROP DEFAULT",
        [
            "create table t (a int, b int not null default 3, c varchar(5) default 'x', d datetime)"
            + UTF8MB4,
            "alter table t alter column a set default 5, alter b drop default, alter column c set default ''",
            "alter table t alter column d set default '2020-01-01 10:00:00', alter a drop default",
        ],
    ),
    (
        "ADD INDEX, KEY, UNIQUE, FULLTEXT with naming",
        [
            "create table t (a int, b varchar(50), c text, d int)" + UTF8MB4,
            "alter table t add index (a), add key (a, d), add unique (b), add fulltext (c), add index ib (b(10) desc)",
            "alter table t add unique key (a), add key (d), add fulltext key ft (b, c)",
        ],
    ),
    (
        "PRIMARY KEY makes columns NOT NULL",
        [
            "create table t (a int default null, b int default 5, c int)" + UTF8MB4,
            "alter table t add primary key (a, b)",
            "alter table t drop primary key, add primary key (c)",
        ],
    ),
    (
        "DROP and RENAME INDEX",
        [
            "create table t (a int, b int, key ka (a), unique key ub (b), key kab (a, b))" + UTF8MB4,
            "alter table t drop index ka, rename index ub to ub2, rename key kab to kab2",
            "alter table t drop key kab2, add index kab2 (b), drop index if exists nope",
            "alter table t add index if not exists kab2 (a), add index if not exists kb (a)",
        ],
    ),
    (
        "DROP INDEX then ADD one of the same name",
        [
            "create table t (a int, b int, key k (a))" + UTF8MB4,
            "alter table t drop index k, add index k (b)",
        ],
    ),
    (
        "key names in written order, inline and table keys",
        [
            "create table t (a int, key (b), b int unique, c int, unique (c), d int unique)" + UTF8MB4,
            "alter table t add key (c), modify a int unique",
        ],
    ),
    (
        "a key on a column called primary",
        [
            "create table t (`primary` int, b int)" + UTF8MB4,
            "alter table t add key (`primary`), add unique (`primary`, b)",
        ],
    ),
    (
        "CREATE INDEX and DROP INDEX statements",
        [
            "create table t (a int, b varchar(50), c text, g point not null)" + UTF8MB4,
            "create index ia on t (a)",
            "create unique index ub on t (b, a) algorithm=inplace",
            "create fulltext index fc on t (c)",
            "create spatial index sg on t (g)",
            "create index if not exists ia on t (b)",
            "create index ib using btree on t (b(10))",
            "drop index ia on t",
            "drop index if exists nope on t",
        ],
    ),
    (
        "checks: unnamed CONSTRAINT_n, named, column-level",
        [
            "create table t (a int check (a > 0), b int, constraint CONSTRAINT_2 check (b > 0), check (a < 100))"
            + UTF8MB4,
            "alter table t add check (b < 100), add constraint lt check (a < b), add check (a <> 5)",
            "alter table t drop constraint CONSTRAINT_1, add check (b <> 7)",
        ],
    ),
    (
        "MODIFY ... CHECK adds a check named after the column",
        [
            "create table t (a int, b int)" + UTF8MB4,
            "alter table t modify a int check (a > 1)",
        ],
    ),
    (
        "DROP CONSTRAINT of a check and of a unique key",
        [
            "create table t (a int, b int, unique key ua (a), constraint cb check (b > 0))" + UTF8MB4,
            "alter table t drop constraint cb, drop constraint ua",
        ],
    ),
    (
        "table options: charset, collation, comment, engine, auto_increment",
        [
            "create table t (a int, b varchar(5)) engine=InnoDB default charset=utf8mb4 collate=utf8mb4_unicode_ci",
            "alter table t default charset utf8mb4",
            "alter table t add c varchar(5), modify b varchar(5), character set latin1",
            "alter table t collate latin1_bin, comment 'x', engine MyISAM, auto_increment = 100",
            "alter table t engine = InnoDB, default character set = utf8mb3",
        ],
    ),
    (
        "CONVERT TO CHARACTER SET promotes TEXT types",
        [
            "create table t (a tinytext, b text, c mediumtext, d varchar(100), e char(10) not null default 'x',"
            " f enum('p','q'), h varbinary(10), i int, j longtext)" + LATIN1,
            "alter table t convert to character set utf8mb4",
            "alter table t convert to charset latin1 collate latin1_bin",
        ],
    ),
    (
        "CONVERT TO with columns of the same statement",
        [
            "create table t (a int, b text, c varchar(5) charset utf8mb4)" + LATIN1,
            "alter table t add d text, add e tinytext charset utf8mb4, convert to charset utf8mb4 collate utf8mb4_bin",
            "alter table t convert to character set utf8mb3, add f varchar(3) charset latin1",
        ],
    ),
    (
        "CONVERT TO CHARACTER SET binary",
        [
            "create table t (a varchar(10), b text, c char(3), d enum('x'), e int)" + UTF8MB4,
            "alter table t convert to character set binary",
        ],
    ),
    (
        "execution options change nothing",
        [
            "create table t (a int, b int)" + UTF8MB4,
            "alter table t algorithm=inplace, lock=none, add column c int",
            "alter table t force",
            "alter online table t add column d int, algorithm=copy, lock=shared",
        ],
    ),
    (
        "foreign keys: ignored, their indexes kept",
        [
            "create table t (id int primary key, p int, q int, r int references t (id),"
            " foreign key (p) references t (id), constraint fq foreign key (q) references t (id),"
            " foreign key (id) references t (id))" + UTF8MB4,
            "alter table t add s int, add t int, add foreign key (s) references t (id),"
            " add constraint ft foreign key ift (t) references t (id)",
            "alter table t add u int, add foreign key (u) references t (id), add key uq (u, q)",
            "alter table t drop foreign key ft, drop constraint fq",
        ],
    ),
    (
        "foreign keys: the index the server made for one is replaced by a later key that starts with "
        "its columns, even after the foreign key is dropped, till RENAME INDEX; names and numbers of "
        "foreign keys; a foreign key's index cut to the engine's longest key (MariaDB test suite)",
        [
            "create table f (id int primary key, a int, b int, c int)" + UTF8MB4,
            "alter table f add constraint fa foreign key (a) references f (id)",
            "alter table f drop foreign key fa",
            "alter table f add foreign key (a) references f (id)",
            "alter table f add foreign key if not exists f_ibfk_1 (a) references f (id)",
            "alter table f add key k (a, b)",
            "alter table f add foreign key fb (b) references f (id)",
            "alter table f rename index fb to kb",
            "alter table f add key kbc (b, c)",
            "alter table f add constraint c2 foreign key i2 (c) references f (id)",
            "alter table f add constraint zz foreign key if not exists i2 (c) references f (id)",
            "alter table f add constraint c3 foreign key (c) references f (id), add foreign key (b) references f (id)",
            "rename table f to g",
            "alter table g add foreign key (b) references g (id), drop foreign key g_ibfk_1",
            "alter table g add foreign key if not exists (b) references g (id)",
            "create table ab (id int primary key, b blob, key k (b(2300))) engine=aria default charset=utf8mb4",
            "alter table ab add foreign key (b) references ab (id)",
            "create table ab2 (id int primary key, b blob, key k (b(2000))) engine=aria default charset=utf8mb4",
            "alter table ab2 add foreign key (b) references ab2 (id)",
            "create table m (b blob, v varchar(1000), key (b), key (v)) engine=myisam default charset=utf8mb4",
            "create table ap (a point, b point, key (a)) engine=aria default charset=utf8mb4",
            "alter table ap add foreign key (a) references ap (b)",
        ],
    ),
    (
        "other spellings MariaDB takes (its test suite): a column named with its table, names starting with "
        "digits, NCHAR VARCHAR, "
        "ENUM members written as bytes, a named PRIMARY KEY, DROP CONSTRAINT PRIMARY KEY, a CHECK's IF NOT "
        "EXISTS, RENAME INDEX after the drops and all at once, an engine's own option read back",
        [
            "create table q (q.index int, q.b int, .c int, d nchar varchar(10), e national char varying(5),"
            " f enum(0xFFFF, 0x61, x'62', b'1100011'), g int, h int, i int,"
            " key i1 (g), key i2 (h), key i3 (i))" + UTF8MB4,
            "create table q1 (e enum(0xE9, 'b '))" + LATIN1,
            "create table 1ea10 (1a20 int, 1e int)" + UTF8MB4,
            "drop table 1ea10",
            "alter table q add primary key if not exists pk (g)",
            "alter table q drop constraint primary key",
            "alter table q add primary key if not exists pk (g, h)",
            "alter table q add constraint if not exists `min` check (g + h > 100)",
            "alter table q add constraint if not exists `min` check (g + h > 200)",
            "alter table q rename index i1 to i2, rename index i2 to i1",
            "alter table q add index i1 (d), rename index i1 to i2, drop index i2",
            "alter table q drop index i3, rename index i1 to i3",
            "alter table q page_compressed=1",
        ],
    ),
    (
        "two foreign keys on one column share the later's index",
        [
            "create table t (id int primary key, p int, key (id, p))" + UTF8MB4,
            "alter table t add foreign key (p) references t (id), add constraint fp foreign key (p) references t (id)",
        ],
    ),
    (
        "RENAME TABLE and ALTER ... RENAME TO",
        [
            "create table t (a int, b int)" + UTF8MB4,
            "rename table t to u",
            "alter table u add column c int, rename to v",
            "rename table v to w, w to x",
            "alter table x rename as t",
        ],
    ),
    (
        "DROP TABLE and TRUNCATE",
        [
            "create table t (a int, b int)" + UTF8MB4,
            "create table u (c int primary key)" + UTF8MB4,
            "truncate table t",
            "drop table if exists u, nope",
            "truncate t",
        ],
    ),
    (
        "AUTO_INCREMENT columns",
        [
            "create table t (a int null auto_increment, b int, key (a))" + UTF8MB4,
            "alter table t modify a bigint unsigned auto_increment default null, add primary key (b)",
        ],
    ),
    (
        "partitioned table: partitioning is ignored",
        [
            "create table t (id int not null, a int, primary key (id)) engine=InnoDB default charset=utf8mb4"
            " partition by hash (id) partitions 3",
            "alter table t add column b int, add key (a)",
        ],
    ),
    (
        "system-versioned table",
        [
            "create table t (id int, a int)" + UTF8MB4 + " with system versioning",
            "rename table t to u",
        ],
    ),
    (
        "keywords as names",
        [
            "create table t (period int, date date, text text, comment int, first int, after int, status int,"
            " `key` int, `order` int, key `index` (`key`), constraint `check` check (`order` > 0))" + UTF8MB4,
            "alter table t modify first bigint first, drop after, change date period2 date, add column period3 int",
            "alter table t rename column `key` to `group`, add column `after` int after first",
        ],
    ),
    (
        "quoted names, comments and a trailing semicolon",
        [
            "create table `T 1` (`a b` int, `c``d` varchar(3), key `k 1` (`a b`)) /* x */" + UTF8MB4 + ";",
            "alter table `T 1` change `a b` `e f` int -- why\n, add `g.h` int;",
            "rename table `T 1` to `T 2`;",
        ],
    ),
    (
        "executable comments count, TiDB's and plain ones do not",
        [
            "create table t (a int /*!50100 , b int */ /* , c int */)" + UTF8MB4,
            "alter table t /*!50100 add column d int */",
            "alter table t /*M!100500 add column e int */",
            "alter table t /*!add column f int*/ /*T! SHARD_ROW_ID_BITS = 4 */",
            "alter table t add column g varchar(8) default '/*!x*/' # /*!, add column h int */",
        ],
    ),
    (
        "a plain index grown past a key keeps a prefix (note 1071), as MariaDB makes it",
        [
            "create table t (id int primary key, v varchar(255), w varchar(10), key kv (v), key kw (w))"
            + UTF8MB4,
            "alter table t modify v varchar(1000)",
            "alter table t modify w varchar(2000), add key kw2 (w)",
        ],
    ),
    (
        "a plain key on a BLOB/TEXT/JSON column takes the longest prefix it holds",
        [
            "create table t (id int primary key, a decimal(12,1), b int, c int, d text, key ka (a), key kb (b, c),"
            " key kd (d)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb3",
            "alter table t modify a tinytext character set latin1",
            "alter table t modify b tinytext character set utf8mb4, add column g json, add key kg (g)",
            "alter table t add column e blob, add column f longtext, add key ke (e), add key kf (f(2000)),"
            " add key kb2 (b(300))",
        ],
    ),
    (
        "a prefix the column's new type does not take goes",
        [
            "create table t (id int primary key, a tinytext, b text, c varchar(10), d tinytext,"
            " key ka (a), key kb (b(200)), key kc (c(10)), key kd (d)) ENGINE=InnoDB DEFAULT CHARSET=latin1",
            "alter table t modify a varchar(100), modify b varchar(2000), modify d int",
            "alter table t modify a tinytext, modify b varchar(100), modify c varchar(20)",
            "alter table t modify a varchar(300)",
        ],
    ),
    (
        "CREATE OR REPLACE and IF NOT EXISTS",
        [
            "create table if not exists t (a int)" + UTF8MB4,
            "create or replace table t (a int, b varchar(3) default 'x')" + UTF8MB4,
        ],
    ),
]


class Replay:
    """Runs a script on a MariaDB upstream and through our model side by side.

    `schema_charset` is the database's default character set and collation, which a CREATE
    TABLE naming none takes; `default_engine` is the server's default_storage_engine, which
    it shows for a table created without ENGINE (our model keeps None: the tracker cannot
    know the session's default). The corpus of tests/server/test_ddl_corpus.py needs both; the scripts
    here name them."""

    def __init__(
        self,
        upstream: Instance,
        database: str,
        *,
        schema_charset: tuple[str, str | None] | None = None,
        default_engine: str | None = None,
    ):
        self.upstream = upstream
        self.database = database
        self.schema_charset = schema_charset
        self.default_engine = default_engine
        self.tables: dict[str, Table] = {}
        self.shown: dict[str, Table] = {}  # the server's tables as `differing` last read them

    def run(self, sql: str) -> None:
        self.upstream.execute(sql, database=self.database)
        self.follow(parse(sql))

    def follow(self, statement: ParsedDDL) -> None:
        """Our tables after the statement; they stay as they were when it raises
        SchemaError (as MariaDB's do when it refuses)."""
        tables = dict(self.tables)
        match statement:
            case CreateTable(name=name) if name.name in tables and statement.if_not_exists:
                pass  # MariaDB keeps the table there (a note)
            case CreateTable(name=name, like=like) if like is not None:
                tables[name.name] = _held(tables, like.name).copied(name.name)
            case CreateTable(name=name):
                tables[name.name] = build_table(
                    statement, upstream="mariadb", schema_charset=self.schema_charset
                )
            case AlterTable(name=name, changes=changes, if_exists=True) if name.name not in tables:
                pass
            case AlterTable(name=name, changes=changes):
                table = apply(
                    _held(tables, name.name), changes, upstream="mariadb", schema_charset=self.schema_charset
                )
                del tables[name.name]
                tables[table.name] = table
                assert not any(isinstance(c, RenameTo) for c in changes) or table.name != name.name
            case RenameTables(pairs=pairs):
                for old, new in pairs:
                    tables[new.name] = _held(tables, old.name).renamed(new.name)
                    del tables[old.name]
            case DropTables(names=names):
                for name in names:
                    tables.pop(name.name, None)
            case TruncateTable():
                pass  # rows only
            case _:
                raise AssertionError(f"not a table statement: {statement}")
        self.tables = tables

    def server_table(self, name: str) -> str:
        """SHOW CREATE TABLE. Read as bytes: MariaDB writes a binary column's default raw
        inside the quotes, which need not be UTF-8; surrogateescape keeps those bytes."""
        conn = self.upstream.connect(self.database, use_unicode=False)
        try:
            with conn.cursor() as cur:
                cur.execute(f"SHOW CREATE TABLE `{name.replace('`', '``')}`")
                row = cur.fetchone()
        finally:
            conn.close()
        return row[1].decode("utf-8", errors="surrogateescape")

    def server_tables(self) -> dict[str, Table]:
        """The database's base tables as MariaDB shows them, read with parse_table."""
        shown = self.upstream.execute(
            "SHOW FULL TABLES WHERE Table_type = 'BASE TABLE'", database=self.database
        )
        return {
            row[0]: parse_table(self.server_table(row[0]), upstream="mariadb", shown=True) for row in shown
        }

    def differing(self) -> list[tuple[str, Table | None, Table | None]]:
        """The tables MariaDB and we hold differently: (name, MariaDB's, ours), None
        where one side has no such table."""
        theirs_all = self.shown = self.server_tables()
        differing = []
        for name in sorted(set(theirs_all) | set(self.tables)):
            theirs, ours = theirs_all.get(name), self.tables.get(name)
            if theirs is not None and ours is not None:
                theirs = self._engine_as_ours(theirs, ours)
                if theirs == ours and _hidden(theirs) == _hidden(ours):
                    continue
            differing.append((name, theirs, ours))
        return differing

    def _engine_as_ours(self, theirs: Table, ours: Table) -> Table:
        """MariaDB's table with its engine as we spell it where that is the same engine:
        MariaDB shows an engine's own name (`engine=myisam` shows MyISAM) and its default
        engine for a table created without one."""
        engine = theirs.options.engine
        if ours.options.engine is None and engine == self.default_engine:
            engine = None
        elif (
            ours.options.engine is not None
            and engine is not None
            and engine.lower() == ours.options.engine.lower()
        ):
            engine = ours.options.engine
        return replace(theirs, options=replace(theirs.options, engine=engine))

    def assert_agrees(self, after: str) -> None:
        for _, theirs, ours in self.differing():
            assert theirs is not None and ours is not None, (
                f"after {after!r}: MariaDB holds {theirs and theirs.name}, we hold {ours and ours.name}"
            )
            assert theirs == ours, (
                f"after {after!r}\nMariaDB: {render_table(theirs, 'mariadb')}\nours:    {render_table(ours, 'mariadb')}"
            )
            assert _hidden(theirs) == _hidden(ours), f"after {after!r}: hash keys, foreign keys"


def _hidden(table: Table) -> tuple[set[str], set[str]]:
    """What table equality leaves out: the keys kept as hashes and the foreign keys' names."""
    return _hash_key_names(table), {f.lower() for f in table.foreign_keys}


def _hash_key_names(table: Table) -> set[str]:
    """The keys kept as hashes: each a hidden column in the binlog's rows. MariaDB shows
    USING HASH on every one (`parse_table` reads it), so its table's are all written."""
    return {i.key for i in hash_keys(table)}


def _held(tables: dict[str, Table], name: str) -> Table:
    """The table of that name, or MariaDB's error when there is none."""
    if name not in tables:
        raise SchemaError(1146, f"Table '{name}' doesn't exist")
    return tables[name]


@pytest.mark.parametrize("statements", [r[1] for r in CORPUS], ids=[r[0] for r in CORPUS])
def test_agrees_with_mariadb(sandbox: Sandbox, scratch_db: str, statements: list[str]) -> None:
    replay = Replay(sandbox.upstreams[0], scratch_db)
    for sql in statements:
        replay.run(sql)
        replay.assert_agrees(sql)
    # What we hold also creates on MariaDB as we render it, and reads back equal.
    for name, ours in replay.tables.items():
        copy = f"copy_{name}"
        sandbox.upstreams[0].execute(render_table(ours, "mariadb", name=copy), database=scratch_db)
        assert parse_table(replay.server_table(copy)) == ours


@pytest.mark.parametrize(
    "statement",
    [
        "alter table t character set default",
        "alter table t default character set = default",
        "alter table t convert to character set default",
        "alter table t convert to character set default collate latin1_bin",
        "alter table t character set utf8mb4 collate default",
    ],
)
def test_character_set_default_is_the_databases(sandbox: Sandbox, scratch_db: str, statement: str) -> None:
    """CHARACTER SET DEFAULT of a table names its database's (issue 43): the tracker asks
    the server for it (the binlog does not carry it)."""
    upstream = sandbox.upstreams[0]
    upstream.execute(f"ALTER DATABASE `{scratch_db}` CHARACTER SET latin1 COLLATE latin1_german1_ci")
    replay = Replay(upstream, scratch_db, schema_charset=("latin1", "latin1_german1_ci"))
    replay.run(
        "create table t (id int primary key, a varchar(5)) engine=InnoDB character set utf8mb4 collate utf8mb4_bin"
    )
    replay.run(statement)
    replay.assert_agrees(statement)


def test_character_set_default_without_the_database_is_not_guessed() -> None:
    table = parse_table("CREATE TABLE t (a VARCHAR(5)) CHARACTER SET utf8mb4")
    statement = parse("ALTER TABLE t CONVERT TO CHARACTER SET DEFAULT")
    with pytest.raises(SchemaError, match="database's character set"):
        apply(table, statement.changes)


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 40
    assert all(s[0].lower().startswith("create table") for _, s in CORPUS)


RICH_TABLES = [
    ("every column kind, key kind and a check", RICH),
    (
        "latin1 table with a json column and prefix keys",
        "create table l (a varchar(300), b json, c text, key (a(100)), unique key (a(10), c(5)))" + LATIN1,
    ),
    (
        "MariaDB's JSON spelled as longtext with json_valid",
        "create table j (a longtext charset utf8mb4 collate utf8mb4_bin check (json_valid(a)), b int)"
        + UTF8MB4,
    ),
    (
        "checks MariaDB rewrites, and REGEXP",
        "create table r (a int, b varchar(20), constraint c1 check (b regexp '^[a-z]+$'),"
        " constraint c2 check (not (a in (1,2))), constraint c3 check (a between 1 and 5 and b not like 'x%'),"
        " constraint c4 check (not (a > 1 or b <=> 'y')))" + UTF8MB4,
    ),
    (
        "binary strings, zerofill, generated stored and virtual",
        "create table z (a char(3) charset binary, b int zerofill, c int as (b + 1) stored,"
        " d varchar(20) as (concat(a, 'x')) virtual)" + UTF8MB4,
    ),
]


@pytest.mark.parametrize("sql", [r[1] for r in RICH_TABLES], ids=[r[0] for r in RICH_TABLES])
def test_rendered_table_creates_on_mariadb(sandbox: Sandbox, scratch_db: str, sql: str) -> None:
    upstream = sandbox.upstreams[0]
    ours = parse_table(sql, upstream="mariadb")
    upstream.execute(sql, database=scratch_db)
    replay = Replay(upstream, scratch_db)
    # the table MariaDB creates from the statement is the one we read from it ...
    assert parse_table(replay.server_table(ours.name), upstream="mariadb") == ours
    # ... and what we render for MariaDB creates that table again.
    upstream.execute(render_table(ours, "mariadb", name="rendered"), database=scratch_db)
    assert parse_table(replay.server_table("rendered"), upstream="mariadb") == ours


# MariaDB keeps a column-level check's CONSTRAINT_NAME when its column is renamed, so
# two checks of one table may share a name (F02).
RENAMED_CHECKED_COLUMNS = [
    "create table t (id int primary key, c1 json not null, c2 json, c4 int check (c4 > 0))" + UTF8MB4,
    "alter table t rename column c1 to r2, rename column c4 to r4",
    "alter table t add column c1 json",
    "alter table t change c2 x2 json not null",
]


def test_read_table_follows_renamed_checked_columns(sandbox: Sandbox, scratch_db: str) -> None:
    """read_table (information_schema) sees what our model does: a renamed JSON column
    is JSON, not LONGTEXT, and a renamed column's own check is named after the column, as
    SHOW CREATE TABLE writes it (information_schema keeps the name it was made with)."""
    replay = Replay(sandbox.upstreams[0], scratch_db)
    for sql in RENAMED_CHECKED_COLUMNS:
        replay.run(sql)
        conn = sandbox.upstreams[0].connect()
        try:
            inspected = read_table(conn, scratch_db, "t")
        finally:
            conn.close()
        ours = replay.tables["t"]
        assert inspected == ours, f"after {sql!r}\n{render_table(inspected)}\n!=\n{render_table(ours)}"


# Our error codes are MariaDB's: ERRORS of test_ddl_apply, except MySQL-only syntax.
MARIADB_ERRORS = [row for row in ERRORS if "(MySQL syntax)" not in row[0]]


@pytest.mark.parametrize(
    ("before", "statement", "code"), [r[1:] for r in MARIADB_ERRORS], ids=[r[0] for r in MARIADB_ERRORS]
)
def test_refuses_what_mariadb_refuses(
    sandbox: Sandbox, scratch_db: str, before: str, statement: str, code: int
) -> None:
    upstream = sandbox.upstreams[0]
    upstream.execute(before + " ENGINE=InnoDB", database=scratch_db)
    with pytest.raises(pymysql.MySQLError) as server:
        upstream.execute(statement, database=scratch_db)
    assert server.value.args[0] == code
    parsed = parse(statement)
    assert isinstance(parsed, AlterTable)
    with pytest.raises(SchemaError) as ours:
        apply(parse_table(before), parsed.changes, upstream="mariadb")
    assert ours.value.code == code


# A plain key over a column held wider downstream than any shard has it (a LONGTEXT for
# the shards' VARCHAR) beside other parts: `fitted_prefixes` cuts it to the longest key
# MariaDB takes; it refuses, rather than cuts, a key of several parts that is too long
# (fuzz seed 921861).
FITTED_KEYS = [
    ("a DATETIME(6), b LONGTEXT CHARACTER SET utf8mb4", ["a", "b"]),
    ("a INT, b VARCHAR(1000) CHARACTER SET utf8mb4, c TEXT CHARACTER SET latin1", ["a", "b", "c"]),
    ("a TEXT CHARACTER SET utf8mb3, b MEDIUMTEXT CHARACTER SET utf8mb4", ["a", "b"]),
    ("a JSON, b DATE", ["b", "a"]),
]


@pytest.mark.parametrize(("columns", "parts"), FITTED_KEYS)
def test_a_fitted_key_is_the_longest_mariadb_takes(
    sandbox: Sandbox, scratch_db: str, columns: str, parts: list[str]
) -> None:
    upstream = sandbox.upstreams[0]
    table = parse_table(f"CREATE TABLE t (id INT PRIMARY KEY, {columns})", upstream="mariadb")
    index = fitted_prefixes(Index("k", IndexKind.PLAIN, tuple(IndexPart(p) for p in parts)), table.column_map)
    upstream.execute(
        render_table(replace(table, indexes=(*table.indexes, index)), "mariadb"), database=scratch_db
    )
    assert (
        parse_table(Replay(upstream, scratch_db).server_table("t"), upstream="mariadb").indexes[-1] == index
    )
    upstream.execute("DROP TABLE t", database=scratch_db)
    cut = next(i for i in reversed(range(len(parts))) if index.parts[i].length is not None)
    longer = replace(index.parts[cut], length=index.parts[cut].length + 1)
    wider = replace(index, parts=(*index.parts[:cut], longer, *index.parts[cut + 1 :]))
    with pytest.raises(pymysql.err.OperationalError) as refused:
        upstream.execute(
            render_table(replace(table, indexes=(*table.indexes, wider)), "mariadb"), database=scratch_db
        )
    assert refused.value.args[0] == 1071
