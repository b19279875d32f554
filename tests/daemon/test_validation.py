"""Continuous validation (DM's validator) on live servers: the rows the daemon applies
are read back from downstream. Rows applied as row events and as statements validate;
a row a downstream trigger changes on its way in is an error in `full` mode (its
column named), none in `fast` (it is there); errors are listed and cleared with
shardctl, and counted in the metrics and status."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from replicator.apply.target import TargetInfo
from replicator.apply.validator import Expected, check_query, expectations, problem_of
from replicator.shard_id import ShardId
from replicator.source.messages import Change
from tests.daemon.test_operator import shardctl
from tests.replication import admin_task

CREATE = (
    "CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, note VARCHAR(20) NULL, "
    "ratio FLOAT NULL, at DATETIME(3) NULL)"
)
SHARD = ShardId("s1", "shop_01", "orders_001")
INFO = TargetInfo("shop.orders", "`shop`.`orders`", {"id": "id", "note": "note", "n": "N"}, ("id",), 1)


# -- pure ------------------------------------------------------------------------------------
def change(op, values=None, before=None, columns=("id", "note")) -> Change:
    return Change((1, 4, 0), SHARD, "shop.orders", op, columns, values, before)


def test_a_row_change_is_what_its_keys_rows_are_after_it() -> None:
    (insert,) = expectations(change("I", ("1", "'a'")), INFO, 5.0)
    assert (insert.key, insert.values) == (("1",), {"id": "1", "note": "'a'"})
    (update,) = expectations(change("U", ("1", "'b'"), ("1", "'a'")), INFO, 5.0)
    assert update.values == {"id": "1", "note": "'b'"}
    gone, moved = expectations(change("U", ("2", "'b'"), ("1", "'a'")), INFO, 5.0)
    assert (gone.key, gone.values, moved.key) == (("1",), None, ("2",))
    (delete,) = expectations(change("D", None, ("1", "'a'")), INFO, 5.0)
    assert (delete.key, delete.values) == (("1",), None)
    # a column downstream under its own spelling; one it has not is not compared
    (spelt,) = expectations(change("I", ("1", "2", "3"), columns=("id", "n", "gone")), INFO, 5.0)
    assert spelt.values == {"id": "1", "N": "2"}
    assert expectations(change("I", ("1", "'a'")), TargetInfo("t", "`t`", {}, None, 1), 5.0) == []


@pytest.mark.parametrize(
    ("values", "found", "problem"),
    [
        ({"id": "1"}, "", None),
        ({"id": "1"}, None, "missing downstream"),
        ({"id": "1"}, "note,N", "differs downstream in note,N"),
        (None, None, None),
        (None, "", "still downstream after its delete"),
    ],
)
def test_what_a_row_read_back_says(values, found, problem) -> None:
    assert problem_of(Expected(SHARD, (1, 4, 0), ("1",), values, 0.0), found) == problem


def test_the_check_reads_each_row_by_its_key_and_compares_on_the_server() -> None:
    expected = Expected(SHARD, (1, 4, 0), ("1",), {"id": "1", "note": "'a'"}, 0.0)
    full = check_query(INFO, [(0, expected)], full=True)
    assert full == (
        "(SELECT 0, CONCAT_WS(',', IF(`id` <=> 1, NULL, 'id'), IF(`note` <=> 'a', NULL, 'note')) "
        "FROM `shop`.`orders` WHERE `id` <=> 1 LIMIT 1)"
    )
    assert check_query(INFO, [(0, expected)], full=False) == (
        "(SELECT 0, '' FROM `shop`.`orders` WHERE `id` <=> 1 LIMIT 1)"
    )


# -- live ------------------------------------------------------------------------------------
def task_with(sandbox, tmp_path, mode: str, options: str = ""):
    t = admin_task(sandbox, tmp_path, CREATE, options=options)
    t.config_path.write_text(t.config_path.read_text() + f"validator:\n  mode: {mode}\n  error_delay: 2\n")
    return t


def write_rows(task) -> int:
    """Inserts, updates (one moving its key) and deletes on every shard; how many keys."""
    for shard in task.shards:
        values = ",".join(f"({i}, {i}.25, 'n{i}', {i}.1, '2026-11-25 10:00:0{i % 10}.123')" for i in range(1, 41))
        task.sql(shard, f"INSERT INTO {{t}} (id, amount, note, ratio, at) VALUES {values}")
        task.sql(shard, "UPDATE {t} SET amount = amount + 1, note = NULL WHERE id <= 10")
        task.sql(shard, "UPDATE {t} SET id = 100 WHERE id = 11")
        task.sql(shard, "DELETE FROM {t} WHERE id BETWEEN 30 AND 35")
    return 41 * len(task.shards)


def validation(task) -> dict:
    return json.loads(shardctl(task, "--json", "validation", "status").stdout)


def settled(task) -> dict:
    state = {}

    def done() -> bool:
        state.update(validation(task))
        return all(c["pending"] == 0 for c in state["targets"].values()) and bool(state["targets"])

    task.wait_for(done, timeout=60, what="validation to catch up")
    return state


@pytest.mark.parametrize("row_events", [True, False], ids=["row events", "rows as statements"])
def test_every_row_applied_validates(sandbox, tmp_path, row_events):
    task = task_with(sandbox, tmp_path, "full", "" if row_events else "  row_events: false\n")
    try:
        task.start()
        keys = write_rows(task)
        task.wait_in_sync(timeout=60)
        (counts,) = settled(task)["targets"].values()
        assert counts["failed"] == 0 and counts["unchecked"] == 0
        changes = keys + 10 * len(task.shards) + 6 * len(task.shards)
        assert keys <= counts["validated"] <= changes
        assert "validated (full)" in shardctl(task, "query-status").stdout
    finally:
        task.cleanup()


TAMPER = (
    "CREATE TRIGGER `{db}`.tamper_{event} BEFORE {event} ON `{db}`.orders FOR EACH ROW "
    "IF NEW.id = 7 THEN SET NEW.note = 'tampered'; END IF"
)


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_a_row_changed_on_its_way_in_is_an_error_in_full_mode(sandbox, tmp_path, mode):
    # rows as statements: a BINLOG statement's rows fire no trigger
    task = task_with(sandbox, tmp_path, mode, "  row_events: false\n")
    try:
        task.start()
        first = task.shards[0]
        task.sql(first, "INSERT INTO {t} (id, amount) VALUES (1000, 1)")
        task.wait_in_sync(timeout=60)
        db = task.target_db
        for event in ("INSERT", "UPDATE"):
            task.sandbox.downstream.execute(TAMPER.format(db=db, event=event))
        write_rows(task)
        task.wait_for(lambda: task.sandbox.downstream.execute(
            f"SELECT COUNT(*) FROM `{db}`.orders WHERE id = 100")[0][0] == len(task.shards), timeout=60)
        state = settled(task)
        (counts,) = state["targets"].values()
        errors = json.loads(shardctl(task, "--json", "validation", "show-errors").stdout)
        if mode == "fast":
            assert counts["failed"] == 0 and errors == []
            return
        assert counts["failed"] == len(task.shards) == state["open_errors"]
        assert {e["shard"] for e in errors} == {str(task.shard_id(s)) for s in task.shards}
        assert all(e["problem"] == "differs downstream in note" and e["key"].endswith(",7)") for e in errors), errors
        assert "differs downstream in note" in shardctl(task, "validation", "show-errors").stdout
        metrics = {f.name: f for f in text_string_to_metric_families(shardctl(task, "metrics").stdout)}
        failed = [s.value for s in metrics["shardmerge_validator_rows"].samples
                  if s.name.endswith("_total") and s.labels["result"] == "failed"]
        assert failed == [len(task.shards)]
        assert shardctl(task, "validation", "clear-errors").stdout.strip() == f"{len(task.shards)} errors cleared"
        assert validation(task)["open_errors"] == 0
    finally:
        task.cleanup()


def test_validation_commands_say_how_to_turn_it_on(sandbox, tmp_path):
    task = admin_task(sandbox, tmp_path, CREATE)
    try:
        task.start()
        result = shardctl(task, "validation", "status")
        assert result.returncode == 2
        assert "continuous validation is off: set validator: {mode: fast}" in result.stderr + result.stdout
    finally:
        task.cleanup()
