"""What long jobs show of their progress, by a clock we turn: lines every few seconds
with the rate and the time left off a terminal, JSON events for scripts."""

from __future__ import annotations

import io
import json

from replicator.cli.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_a_line_every_few_seconds_with_the_rate_and_the_time_left():
    clock, out = Clock(), io.StringIO()
    progress = Progress("copied", out, every=5, clock=clock)
    progress.table_started("shop.orders", 1_000_000)
    for seconds, rows in ((1, 10_000), (5, 250_000), (7, 300_000), (10, 500_000)):
        clock.now = 100.0 + seconds
        progress.table_progress("shop.orders", rows)
    clock.now = 120.0
    progress.table_done("shop.orders", 1_000_000)
    assert out.getvalue().splitlines() == [
        "shop.orders: started, about 1,000,000 rows to be copied",
        "shop.orders: 250,000 of about 1,000,000 rows copied, 50,000 rows/s, about 15 s left",
        "shop.orders: 500,000 of about 1,000,000 rows copied, 50,000 rows/s, about 10 s left",
        "shop.orders: done, 1,000,000 rows copied in 20 s (50,000 rows/s)",
    ]


def test_a_table_without_an_estimate_shows_rows_and_rate(capsys):
    clock, out = Clock(), io.StringIO()
    progress = Progress("checked", out, every=5, clock=clock)
    progress.table_started("shop.orders", None)
    clock.now = 106.0
    progress.table_progress("shop.orders", 1_200)
    assert out.getvalue().splitlines()[1] == "shop.orders: 1,200 rows checked, 200 rows/s"


def test_json_events_for_scripts(capsys):
    clock = Clock()
    progress = Progress("copied", io.StringIO(), json_events=True, every=5, clock=clock)
    progress.table_started("shop.orders", 100)
    clock.now = 110.0
    progress.table_progress("shop.orders", 40)
    clock.now = 125.0
    progress.table_done("shop.orders", 100)
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert events == [
        {"event": "started", "table": "shop.orders", "total": 100},
        {"event": "progress", "table": "shop.orders", "rows": 40, "total": 100, "rows_per_s": 4, "eta_s": 15},
        {"event": "done", "table": "shop.orders", "rows": 100, "seconds": 25.0},
    ]


def test_a_job_in_chunks_says_them_and_counts_an_interrupted_runs_rows_out_of_the_rate():
    clock, out = Clock(), io.StringIO()
    progress = Progress("copied", out, every=5, clock=clock)
    progress.table_started("shop.orders", 1_000_000)
    progress.table_chunks("shop.orders", 40, done=10, rows_done=250_000)
    for seconds, rows, chunks in ((1, 260_000, 11), (5, 500_000, 20), (10, 750_000, 30)):
        clock.now = 100.0 + seconds
        progress.table_progress("shop.orders", rows, chunks_done=chunks)
    clock.now = 120.0
    progress.table_done("shop.orders", 1_000_000)
    assert out.getvalue().splitlines() == [
        "shop.orders: started, about 1,000,000 rows to be copied",
        "shop.orders: 10 of 40 chunks (250,000 rows) were copied before",
        # 250,000 rows in 5 s: this run's pace, not the 500,000 the table holds
        "shop.orders: 500,000 of about 1,000,000 rows copied, 20 of 40 chunks, 50,000 rows/s, about 10 s left",
        "shop.orders: 750,000 of about 1,000,000 rows copied, 30 of 40 chunks, 50,000 rows/s, about 5 s left",
        "shop.orders: done, 1,000,000 rows copied in 20 s (37,500 rows/s), 40 chunks "
        "(10 of them, 250,000 rows, before this run)",
    ]


def test_a_fresh_job_in_chunks_has_no_line_for_them_until_it_progresses():
    clock, out = Clock(), io.StringIO()
    progress = Progress("copied", out, every=5, clock=clock)
    progress.table_started("shop.orders", 100)
    progress.table_chunks("shop.orders", 4)
    progress.note("continuing nothing")
    clock.now = 105.0
    progress.table_progress("shop.orders", 50, chunks_done=2)
    progress.table_done("shop.orders", 100)
    assert out.getvalue().splitlines() == [
        "shop.orders: started, about 100 rows to be copied",
        "continuing nothing",
        "shop.orders: 50 of about 100 rows copied, 2 of 4 chunks, 10 rows/s, about 5 s left",
        "shop.orders: done, 100 rows copied in 5 s (20 rows/s), 4 chunks",
    ]


def test_json_events_of_a_job_in_chunks(capsys):
    clock = Clock()
    progress = Progress("copied", io.StringIO(), json_events=True, every=5, clock=clock)
    progress.note("continuing the interrupted backfill")
    progress.table_started("shop.orders", 100)
    progress.table_chunks("shop.orders", 4, done=1, rows_done=25)
    clock.now = 110.0
    progress.table_progress("shop.orders", 75, chunks_done=3)
    clock.now = 125.0
    progress.table_done("shop.orders", 100)
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert events == [
        {"event": "note", "text": "continuing the interrupted backfill"},
        {"event": "started", "table": "shop.orders", "total": 100},
        {"event": "chunks", "table": "shop.orders", "total": 4, "done": 1, "rows": 25},
        {"event": "progress", "table": "shop.orders", "rows": 75, "total": 100, "chunks_done": 3, "chunks": 4,
         "rows_per_s": 5, "eta_s": 5},
        {"event": "done", "table": "shop.orders", "rows": 100, "seconds": 25.0, "chunks": 4, "chunks_before": 1},
    ]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_live_bar_per_table_with_its_chunks():
    out = Terminal()
    progress = Progress("copied", out, clock=Clock())
    progress.table_started("shop.orders", 1_000)
    progress.table_chunks("shop.orders", 8, done=2, rows_done=250)
    progress.note("a note between bars")
    progress.table_progress("shop.orders", 500, chunks_done=4)
    bar = progress.tables["shop.orders"].bar
    assert (bar.n, bar.total) == (500, 1_000)
    progress.table_done("shop.orders", 1_000)
    text = out.getvalue()
    assert "shop.orders" in text and "4 of 8 chunks" in text and "a note between bars" in text
    assert "\r" in text  # redrawn in place
