"""A server's table as our model, read from information_schema (not from SHOW
CREATE TABLE), so a check that downstream DDL did what it should does not trust
the same text round trip it is checking. MariaDB and MySQL spell a few things
differently in information_schema (defaults, check levels); both are handled."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import replace

from lattice import Table, is_old_name_index, parse_table, quote_identifier, quote_string, render_table
from replicator.server_rules import server_rules
from replicator.servers import server_flavor


def _rows(conn, sql: str, args: tuple) -> list[dict]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        names = [d[0].lower() for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def table_exists(conn, schema: str, table: str) -> bool:
    rows = _rows(
        conn,
        "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s",
        (schema, table),
    )
    return bool(rows)


def read_table(conn, schema: str, table: str) -> Table:
    """The table `schema.table` as the server describes it in information_schema."""
    rules = server_rules(server_flavor(conn))
    info = _rows(
        conn,
        "SELECT ENGINE, TABLE_COLLATION, TABLE_COMMENT FROM information_schema.TABLES "
        "WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s",
        (schema, table),
    )
    if not info:
        raise LookupError(f"table {schema}.{table} does not exist")
    columns = _rows(
        conn,
        "SELECT * FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s "
        "ORDER BY ORDINAL_POSITION",
        (schema, table),
    )
    stats = _rows(
        conn,
        "SELECT INDEX_NAME, NON_UNIQUE, SEQ_IN_INDEX, COLUMN_NAME, SUB_PART, INDEX_TYPE, "
        "COLLATION, INDEX_COMMENT FROM information_schema.STATISTICS WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s "
        "ORDER BY INDEX_NAME, SEQ_IN_INDEX",
        (schema, table),
    )
    checks = _checks(conn, schema, table, rules.catalog_checks_by_table)
    inline: dict[str, list[str]] = defaultdict(list)  # a column's own checks, by column key
    table_checks = []
    for check in checks:
        owner = _json_valid_column(check) if check.get("level") == "Column" else None
        if owner is not None:
            inline[owner.lower()].append(check["check_clause"])
        elif check.get("level") != "Column":
            table_checks.append(check)
    if any(check.get("level") == "Column" for check in checks):
        # which column holds a check information_schema does not say (its name is the
        # column's when it was made): SHOW CREATE TABLE writes it in the column's definition
        for owned in _shown(conn, schema, table).checks:
            if owned.column is not None:
                inline[owned.column].append(owned.expression)
    sql_defaults = rules.catalog_defaults_as_sql
    lines = [_column(c, sql_defaults, inline.get(c["column_name"].lower(), [])) for c in columns]
    lines += _indexes(stats)
    lines += [_constraint(check) for check in table_checks]
    engine, collation, comment = info[0]["engine"], info[0]["table_collation"], info[0]["table_comment"]
    options = f" ENGINE={engine}" if engine else ""
    if collation:
        options += f" COLLATE={collation}"
    if comment:
        options += f" COMMENT={quote_string(comment)}"
    sql = f"CREATE TABLE {quote_identifier(table)} (\n  " + ",\n  ".join(lines) + "\n)" + options
    return parse_table(sql, upstream=rules.read_as)


def _shown(conn, schema: str, table: str) -> Table:
    with conn.cursor() as cur:
        cur.execute(f"SHOW CREATE TABLE {quote_identifier(schema)}.{quote_identifier(table)}")
        return parse_table(cur.fetchone()[1], upstream="mariadb", shown=True)


def _json_valid_column(check: dict) -> str | None:
    """The column a MariaDB column-level `json_valid(`c`)` check is about (what makes a
    LONGTEXT column JSON), read from its clause: its CONSTRAINT_NAME is the column's
    name when the check was made and stays so after the column is renamed."""
    match = _JSON_VALID.fullmatch(check["check_clause"].strip())
    return match[1].replace("``", "`") if match else None


_JSON_VALID = re.compile(r"json_valid\(`((?:[^`]|``)+)`\)", re.IGNORECASE)


def _constraint(check: dict) -> str:
    # Any other column-level check reads as a table check of the same name and clause,
    # which is what the model makes of it; by name it may belong to no column left.
    text = f"CONSTRAINT {quote_identifier(check['constraint_name'])} CHECK ({check['check_clause']})"
    if check.get("enforced") == "NO":
        text += " NOT ENFORCED"
    return text


def _checks(conn, schema: str, table: str, by_table: bool) -> list[dict]:
    if by_table:  # (CHECK_CONSTRAINTS names each check's table and level)
        return _rows(
            conn,
            "SELECT CONSTRAINT_NAME, CHECK_CLAUSE, LEVEL FROM information_schema.CHECK_CONSTRAINTS "
            "WHERE CONSTRAINT_SCHEMA=%s AND TABLE_NAME=%s",
            (schema, table),
        )
    return _rows(
        conn,
        "SELECT c.CONSTRAINT_NAME, c.CHECK_CLAUSE, t.ENFORCED FROM "
        "information_schema.CHECK_CONSTRAINTS c JOIN information_schema.TABLE_CONSTRAINTS t "
        "ON t.CONSTRAINT_SCHEMA = c.CONSTRAINT_SCHEMA AND t.CONSTRAINT_NAME = c.CONSTRAINT_NAME "
        "WHERE t.TABLE_SCHEMA=%s AND t.TABLE_NAME=%s AND t.CONSTRAINT_TYPE='CHECK'",
        (schema, table),
    )


def _column(c: dict, sql_defaults: bool, checks: list[str]) -> str:
    parts = [quote_identifier(c["column_name"]), c["column_type"]]
    if c.get("character_set_name"):
        parts.append(f"CHARACTER SET {c['character_set_name']}")
    if c.get("collation_name"):
        parts.append(f"COLLATE {c['collation_name']}")
    extra = (c.get("extra") or "").lower()
    generated = "generated" in extra
    if generated:
        kind = "STORED" if "stored" in extra or "persistent" in extra else "VIRTUAL"
        parts.append(f"GENERATED ALWAYS AS ({c['generation_expression']}) {kind}")
    if not generated:
        parts.append("NULL" if c["is_nullable"] == "YES" else "NOT NULL")
    default = c.get("column_default")
    if default is not None and not generated:
        parts.append("DEFAULT " + _default(default, c, sql_defaults))
    if "on update" in extra:
        parts.append("ON UPDATE " + extra.split("on update", 1)[1].strip().split(" ")[0])
    if "auto_increment" in extra:
        parts.append("AUTO_INCREMENT")
    if c.get("column_comment"):
        parts.append("COMMENT " + quote_string(c["column_comment"]))
    parts += [f"CHECK ({clause})" for clause in checks]
    return " ".join(parts)


def _default(value: str, c: dict, sql_defaults: bool) -> str:
    """MariaDB reports defaults as SQL (quoted literals, NULL, expressions); MySQL
    as bare values, with DEFAULT_GENERATED marking expressions."""
    if sql_defaults:
        return value if not value.startswith("(") and _looks_sql(value) else f"({value})"
    if "default_generated" in (c.get("extra") or "").lower():
        return value if value.lower().startswith("current_timestamp") else f"({value})"
    if c["data_type"] in ("bit",) or value.startswith("b'"):
        return value
    return quote_string(value)


def _looks_sql(value: str) -> bool:
    v = value.strip()
    return (
        v.startswith("'")
        or v.upper() == "NULL"
        or v.lower().startswith("current_timestamp")
        or v.startswith("b'")
        or v.startswith("x'")
        or _number(v)
    )


def _number(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True


def _indexes(stats: list[dict]) -> list[str]:
    grouped: dict[str, list[dict]] = defaultdict(list)
    for row in stats:
        grouped[row["index_name"]].append(row)
    lines = []
    for name, parts in grouped.items():
        if is_old_name_index(name):
            continue  # no part of the schema (lattice/old_name_index.py)
        first = parts[0]
        cols = []
        for p in sorted(parts, key=lambda r: r["seq_in_index"]):
            text = quote_identifier(p["column_name"])
            # MariaDB reports a SUB_PART of 32 for spatial keys, which take no prefix
            if p["sub_part"] is not None and p["index_type"] != "SPATIAL":
                text += f"({p['sub_part']})"
            if p.get("collation") == "D":
                text += " DESC"
            cols.append(text)
        body = "(" + ",".join(cols) + ")"
        if first.get("index_comment"):
            body += f" COMMENT {quote_string(first['index_comment'])}"
        if name == "PRIMARY":
            lines.append(f"PRIMARY KEY {body}")
        elif first["index_type"] == "FULLTEXT":
            lines.append(f"FULLTEXT KEY {quote_identifier(name)} {body}")
        elif first["index_type"] == "SPATIAL":
            lines.append(f"SPATIAL KEY {quote_identifier(name)} {body}")
        elif str(first["non_unique"]) == "0":
            lines.append(f"UNIQUE KEY {quote_identifier(name)} {body}")
        else:
            lines.append(f"KEY {quote_identifier(name)} {body}")
    return lines


def not_the_join(name: str, existing: Table, wanted: Table, flavor) -> str | None:
    """Why an existing downstream table cannot serve as the join `wanted` (materialized
    for `flavor`) of its shards; None when it is that table, up to the server's choices."""
    if existing == with_server_choices(wanted, existing):
        return None
    return (
        f"downstream table {name} exists with another schema than the join of its shards; "
        f"drop it, or make it:\n{render_table(wanted, flavor, name=name)}"
    )


def with_server_choices(expected: Table, actual: Table) -> Table:
    """`expected` where it leaves character sets, collations or the engine to the
    server (None), filled in with what the server chose in `actual`; so the two
    compare equal exactly when they differ in nothing the expected table says."""
    columns = []
    for c in expected.columns:
        got = actual.column(c.name)
        if got is not None and c.type.is_character and c.type.charset is None:
            c = replace(c, type=replace(c.type, charset=got.type.charset, collation=got.type.collation))
        columns.append(c)
    o = expected.options
    options = replace(
        o,
        engine=o.engine or actual.options.engine,
        charset=o.charset or actual.options.charset,
        collation=o.collation or actual.options.collation,
    )
    return replace(expected, columns=tuple(columns), options=options)
