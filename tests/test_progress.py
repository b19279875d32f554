"""What long jobs show of their progress, by a clock we turn: lines every few seconds
with the rate and the time left off a terminal, JSON events for scripts."""

from __future__ import annotations

import io
import json

from replicator.control.progress import Progress


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
