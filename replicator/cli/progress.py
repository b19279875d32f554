"""How far a long job is, per table, wherever it runs: a bar per table on a terminal;
off one (a log, a CI job, a container), a line every few seconds with the rows done,
the rate and the time left; with --json, one JSON event per line on stdout for
scripts (`started`, `chunks`, `progress`, `done`, `note`). A job that works in
chunks (the backfill) says how many are done of how many, and those an interrupted
run did before: they count in the rows done, not in the rate."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any


@dataclass
class _Table:
    total: int | None
    started: float
    rows: int = 0
    said: float = 0.0  # when its last line or event went out
    chunks: int | None = None  # how many, for a job that works in chunks
    chunks_done: int = 0
    chunks_before: int = 0  # done by an interrupted run, before this one
    rows_before: int = 0  # their rows
    bar: Any = field(default=None, repr=False)

    def chunk_text(self) -> str:
        return f", {self.chunks_done:,} of {self.chunks:,} chunks" if self.chunks is not None else ""


class Progress:
    def __init__(
        self,
        what: str,
        stream: IO[str] | None = None,
        *,
        json_events: bool = False,
        every: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        """`what` the rows are ("copied", "checked"); lines and bars go to `stream`
        (stderr), JSON events to stdout; `every`: seconds between two lines of a table."""
        self.what = what
        self.stream = stream or sys.stderr
        self.json = json_events
        self.every = every
        self.clock = clock
        self.tty = not json_events and self.stream.isatty()
        self.tables: dict[str, _Table] = {}

    def table_started(self, target: str, estimated_rows: int | None) -> None:
        now = self.clock()
        table = self.tables[target] = _Table(estimated_rows, now, said=now)
        if self.json:
            self._event("started", target, total=estimated_rows)
        elif self.tty:
            from tqdm import tqdm

            table.bar = tqdm(
                total=estimated_rows, desc=target, unit=" rows", unit_scale=True, file=self.stream
            )
        else:
            about = f"about {estimated_rows:,} rows" if estimated_rows is not None else "rows"
            self._line(f"{target}: started, {about} to be {self.what}")

    def note(self, text: str) -> None:
        """A sentence about the job as a whole."""
        if self.json:
            print(json.dumps({"event": "note", "text": text}), file=sys.stdout, flush=True)
        elif any(t.bar is not None for t in self.tables.values()):
            from tqdm import tqdm

            tqdm.write(text, file=self.stream)
        else:
            self._line(text)

    def table_chunks(self, target: str, total: int, done: int = 0, rows_done: int = 0) -> None:
        """The table's chunks: how many, and how many (with their rows) an interrupted
        run copied before this one."""
        table = self.tables.get(target)
        if table is None:
            return
        table.chunks, table.chunks_done, table.chunks_before = total, done, done
        table.rows = table.rows_before = rows_done
        if self.json:
            self._event("chunks", target, total=total, done=done, rows=rows_done)
        elif table.bar is not None:
            # done before: not counted as this run's pace
            table.bar.n = table.bar.last_print_n = rows_done
            table.bar.set_postfix_str(table.chunk_text().lstrip(", "))
        elif done:
            self._line(f"{target}: {done:,} of {total:,} chunks ({rows_done:,} rows) were {self.what} before")

    def table_progress(self, target: str, rows: int, chunks_done: int | None = None) -> None:
        table = self.tables.get(target)
        if table is None:
            return
        if chunks_done is not None:
            table.chunks_done = chunks_done
        if table.total is not None:
            rows = min(rows, table.total)  # estimates run short of a table that grew
        table.rows = max(table.rows, rows)
        if table.bar is not None:
            table.bar.update(table.rows - table.bar.n)
            if table.chunks is not None:
                table.bar.set_postfix_str(table.chunk_text().lstrip(", "))
            return
        now = self.clock()
        if now - table.said < self.every:
            return
        table.said = now
        rate, left = self._pace(table, now)
        if self.json:
            chunks = (
                {"chunks_done": table.chunks_done, "chunks": table.chunks} if table.chunks is not None else {}
            )
            self._event(
                "progress",
                target,
                rows=table.rows,
                total=table.total,
                **chunks,
                rows_per_s=round(rate),
                eta_s=None if left is None else round(left),
            )
            return
        done = f"{table.rows:,}" + (f" of about {table.total:,}" if table.total is not None else "")
        eta = f", about {_duration(left)} left" if left is not None else ""
        self._line(f"{target}: {done} rows {self.what}{table.chunk_text()}, {rate:,.0f} rows/s{eta}")

    def table_done(self, target: str, rows: int) -> None:
        table = self.tables.pop(target, None)
        if table is None:
            return
        seconds = self.clock() - table.started
        if table.bar is not None:
            table.bar.total = max(table.bar.total or 0, rows)
            table.bar.update(rows - table.bar.n)
            table.bar.close()
        elif self.json:
            chunks = {"chunks": table.chunks, "chunks_before": table.chunks_before} if table.chunks else {}
            self._event("done", target, rows=rows, seconds=round(seconds, 1), **chunks)
        else:
            rate = (rows - table.rows_before) / seconds if seconds > 0 else 0.0
            took = f"in {_duration(seconds)} ({rate:,.0f} rows/s)"
            chunks = ""
            if table.chunks is not None:
                chunks = f", {table.chunks:,} chunks"
                if table.chunks_before:
                    chunks += (
                        f" ({table.chunks_before:,} of them, {table.rows_before:,} rows, before this run)"
                    )
            self._line(f"{target}: done, {rows:,} rows {self.what} {took}{chunks}")

    @staticmethod
    def _pace(table: _Table, now: float) -> tuple[float, float | None]:
        elapsed = max(now - table.started, 1e-9)
        rate = (table.rows - table.rows_before) / elapsed
        if table.total is None or rate <= 0:
            return rate, None
        return rate, max(0.0, (table.total - table.rows) / rate)

    def _line(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def _event(self, event: str, target: str, **values: Any) -> None:
        print(json.dumps({"event": event, "table": target, **values}), file=sys.stdout, flush=True)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
