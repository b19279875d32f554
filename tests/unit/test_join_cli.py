"""`shardmerge join`: files and stdin in, the joined CREATE TABLE or the conflict out."""

from __future__ import annotations

import io

import pytest

from lattice import join_all, parse_table, render_table
from replicator.cli.shardmerge import main


def run(argv, capsys, stdin: str = "", monkeypatch=None):
    if monkeypatch is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(["join", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_prints_the_join_of_files_and_stdin(tmp_path, capsys, monkeypatch):
    a = "CREATE TABLE t1 (id INT PRIMARY KEY, a INT NOT NULL, b FLOAT NOT NULL)"
    b = "CREATE TABLE t2 (id INT PRIMARY KEY, a BIGINT)"
    c = "CREATE TABLE t3 (id INT PRIMARY KEY, b DOUBLE NOT NULL DEFAULT 1.5)"
    (tmp_path / "ab.sql").write_text(f"{a};\n{b};\n")
    code, out, _ = run([str(tmp_path / "ab.sql"), "-", "--flavor", "mysql", "--name", "shop.orders"],
                       capsys, c, monkeypatch)
    assert code == 0
    assert out.startswith("CREATE TABLE `shop`.`orders`")
    expected = join_all([parse_table(s) for s in (a, b, c)], "mysql")
    assert parse_table(out.rstrip().rstrip(";")) == parse_table(render_table(expected, "mysql"))


def test_a_conflict_exits_4_and_names_the_column(tmp_path, capsys):
    (tmp_path / "s.sql").write_text("create table a (b float not null); create table b (b datetime not null);")
    code, out, _ = run([str(tmp_path / "s.sql")], capsys)
    assert code == 4
    assert out.strip() == "conflict: column b: cannot join float with datetime"


@pytest.mark.parametrize(("content", "message"), [
    ("create table a (id int); create table b (id intt)", "s.sql, statement 2: unknown data type INTT at line 1, column 20"),
    ("create table a (id int)", "need at least two CREATE TABLE statements, got 1"),
])
def test_bad_input_is_a_clear_error(tmp_path, capsys, content, message):
    (tmp_path / "s.sql").write_text(content)
    code, _, err = run([str(tmp_path / "s.sql")], capsys)
    assert code == 2
    assert message in err


def test_missing_file(capsys):
    code, _, err = run(["/no/such/file.sql", "/no/such/other.sql"], capsys)
    assert code == 2 and "cannot read /no/such/file.sql" in err
