"""The live view at the admin API's `/` (issue 73) against a live daemon with a token: one
shard paused by the operator, a rename made on one shard of four (under way), rows flowing.
- Over HTTP: no credentials shows the form; a wrong token is refused; the right one sets an
  HttpOnly, SameSite=Strict session cookie that opens the page and its live part, and no other
  endpoint; the token shows in no log.
- In headless Chromium: the token typed into the form, the page as the browser shows it once
  its script refreshed it: the matrix with the rename and the paused shard, the pause's way out,
  the chart drawn, no error in the console, and a screenshot."""

from __future__ import annotations

import http.client
import json
import os
import struct
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from replicator.schema.way_out import WAY_OUT
from tests.browser import Browser
from tests.replication import ReplicationTask, free_port
from tests.unit.test_live_view import Page

pytestmark = pytest.mark.timeout(420)

TOKEN = "live-view-token-8842"
CREATE = "CREATE TABLE {table} (id INT NOT NULL PRIMARY KEY, a INT NULL, `note<x>` VARCHAR(20) NULL)"


def request(task, method: str, path: str, headers: dict | None = None, body: str | None = None):
    """One request, its redirects not followed: (status, headers, text)."""
    conn = http.client.HTTPConnection("127.0.0.1", task.port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, answer.headers, answer.read().decode()
    finally:
        conn.close()


def api(task, path: str, body: dict | None = None):
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    if body is None:
        status, _, text = request(task, "GET", path, headers)
    else:
        status, _, text = request(task, "POST", path, headers, json.dumps(body))
    assert status == 200, text
    return json.loads(text)


@pytest.fixture(scope="module")
def task(sandbox, tmp_path_factory):
    """A daemon with a token, one shard of four paused, another's rename under way."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SM_VIEW_TOKEN", TOKEN)
        port = free_port()
        t = ReplicationTask(sandbox, tmp_path_factory.mktemp("live"), CREATE,
                            admin=f"  port: {port}\n  token_env: SM_VIEW_TOKEN\n")
        t.port, t.addr = port, f"http://127.0.0.1:{port}"
        t.target = f"{t.target_db}.orders"
        t.renamer, t.paused = t.shard_id(t.shards[0]), t.shard_id(t.shards[2])
        try:
            t.start()
            for n, shard in enumerate(t.shards):
                t.sql(shard, "INSERT INTO {t} (id, a, `note<x>`) VALUES "
                      + ",".join(f"({n * 1000 + i}, {i}, 'n<{i}>')" for i in range(20)))
            t.wait_in_sync()
            t.sql(t.shards[0], "ALTER TABLE {t} RENAME COLUMN a TO amount")
            ddl = f"/api/v1/groups/{quote(t.target)}/ddl"
            t.wait_for(lambda: api(t, ddl)["columns"].get("a", "").startswith("partial: renaming to amount"),
                       timeout=60, what="the rename to be under way")
            api(t, "/api/v1/pause", {"shard": str(t.paused)})
            for n, shard in enumerate(t.shards):  # (rows for the rate, the paused shard's parked)
                column = "amount" if n == 0 else "a"
                t.sql(shard, f"INSERT INTO {{t}} (id, {column}) VALUES "
                      + ",".join(f"({n * 1000 + 500 + i}, {i})" for i in range(30)))
            t.wait_for(lambda: len(api(t, "/api/v1/samples")["samples"]) >= 3, timeout=90,
                       what="three samples of the lag and rows applied")
            yield t
        finally:
            if t.process is not None:
                t.stop()
            t.cleanup()


def test_the_token_opens_the_page_through_a_session_cookie_and_nothing_else(task):
    status, headers, text = request(task, "GET", "/")
    assert status == 200 and 'name="token"' in text and 'id="live"' not in text
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert request(task, "GET", "/view/live")[0] == 401
    assert request(task, "GET", "/api/v1/status")[0] == 401

    form = {"Content-Type": "application/x-www-form-urlencoded"}
    status, headers, text = request(task, "POST", "/login", form, urlencode({"token": TOKEN + "x"}))
    assert status == 401 and "not this daemon's admin token" in text and headers["Set-Cookie"] is None

    status, headers, _ = request(task, "POST", "/login", form, urlencode({"token": TOKEN}))
    assert status == 303 and headers["Location"] == "/"
    cookie = headers["Set-Cookie"]
    attributes = {part.strip().split("=")[0] for part in cookie.split(";")}
    assert {"HttpOnly", "SameSite", "Path", "Max-Age"} <= attributes and "SameSite=Strict" in cookie
    session = cookie.split(";")[0]
    assert TOKEN not in session

    status, _, text = request(task, "GET", "/", {"Cookie": session})
    assert status == 200 and 'id="live"' in text
    page = Page(text)
    assert page.rows[str(task.paused)]["class"] == "shard-paused"
    status, _, text = request(task, "GET", "/view/live", {"Cookie": session})
    assert status == 200 and f'data-shard="{task.renamer}"' in text and "<html" not in text
    # the cookie opens the page, not the API (nor a changed one: its MAC is the token's)
    assert request(task, "GET", "/api/v1/status", {"Cookie": session})[0] == 401
    forged = session[:-4] + ("0000" if not session.endswith("0000") else "1111")
    assert 'name="token"' in request(task, "GET", "/", {"Cookie": forged})[2]
    # a script's client sends the token itself
    status, _, text = request(task, "GET", "/", {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and 'id="live"' in text

    status, headers, _ = request(task, "POST", "/logout", {"Cookie": session})
    assert status == 303 and "Max-Age=0" in headers["Set-Cookie"]
    assert TOKEN not in task.log_text()


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_the_page_in_a_browser_shows_the_rename_the_pause_and_the_chart(task, tmp_path):
    browser = Browser(tmp_path / "profile")
    try:
        browser.open(task.addr + "/")
        assert browser.evaluate("document.querySelectorAll('input[name=token]').length") == 1
        browser.submit("form", {"token": "not-the-token"})
        assert "not this daemon's admin token" in browser.evaluate("document.body.innerText")
        browser.submit("form", {"token": TOKEN})
        since = len(browser.events)  # (the refused login's 401 is logged as an error: not this page's)
        assert browser.evaluate("location.pathname") == "/"
        assert browser.evaluate("document.cookie") == ""  # HttpOnly: no script reads the session
        # the script refreshed the live part at least once (every few seconds)
        refreshed = browser.evaluate(
            "new Promise((done) => { const t0 = Date.now(); (function look() {"
            " if (Number(document.body.dataset.refreshes || 0) >= 1 || Date.now() - t0 > 60000)"
            " done(Number(document.body.dataset.refreshes || 0)); else setTimeout(look, 200); })(); })",
            timeout=90,
        )
        assert refreshed >= 1
        page = Page(browser.dom())
        shot = browser.screenshot(tmp_path / "live-view.png")
        errors = browser.errors(since)
        charts = browser.evaluate("document.querySelectorAll('#chart svg').length")
        lines = browser.evaluate("document.querySelectorAll('#chart polyline').length")
    finally:
        browser.close()

    # the rename under way: shard 0 holds `a` as `amount`, the three others `amount` as `a`
    assert page.cells[(str(task.renamer), "a")] == ("renamed", "as amount (renamed here)")
    for shard in task.shards[1:]:
        assert page.cells[(str(task.shard_id(shard)), "amount")] == ("renamed", "as a (not renamed here yet)")
    assert "partial: renaming to amount, 1 of 4 shards made it" in page.words
    # the paused shard, its row and its way out as the status has it
    assert page.rows[str(task.paused)]["class"] == "shard-paused"
    assert page.rows[str(task.renamer)]["class"] == "shard-streaming"
    reason = api(task, "/api/v1/status")["paused"][str(task.paused)]["reason"]
    assert " ".join(reason.split(WAY_OUT)[1].split()) in page.words
    # a column name that needs escaping is text, not a tag
    assert "note<x>" in page.words and "x" not in page.tags
    # the chart: two panels, a lag line for each source at least
    assert charts == 2 and lines >= 2
    assert errors == []
    width, height = _png_size(shot)
    assert width >= 800 and height >= 800 and shot.stat().st_size > 20_000
    if os.environ.get("LIVE_VIEW_SHOT"):  # (to look at it: where to copy it)
        Path(os.environ["LIVE_VIEW_SHOT"]).write_bytes(shot.read_bytes())
