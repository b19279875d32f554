"""The live view at the admin API's `/` (issue 73), rendered from values alone: the shard
group's matrix from a real coordinator's view (a rename under way, a paused shard, names that
need escaping), an empty group, no group at all; the session cookie; the samples' history."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import logging
import re
from html.parser import HTMLParser
from types import SimpleNamespace

import pymysql

from replicator.api.admin import AdminServer
from replicator.api.matrix import shard_matrix
from replicator.api.operations import ddl_state
from replicator.api.samples import Sample, Samples, measure
from replicator.api.view_assets import CSP
from replicator.api.view_html import live_html, login_html, page_html
from replicator.api.view_http import SESSION_SECONDS, session_value, valid_session
from replicator.api.view_model import GroupPage, LivePage
from replicator.config import AdminConfig
from replicator.schema import way_out
from replicator.schema.coordinator import Coordinator
from replicator.schema.plan import Player
from replicator.schema.way_out import with_way_out
from replicator.shard_id import ShardId
from replicator.state.coordinator_store import InMemoryStore
from tests.replication import free_port

TARGET = "shop.<orders>&"
BASE = "CREATE TABLE t (id INT PRIMARY KEY, `a<b>` INT NOT NULL, `c&d` INT NULL)"
RENAMER = ShardId("s1", "db", "t<1>")
PAUSED = ShardId("s2", "db", "t2")
OTHER = ShardId("s2", "db", "t3")
PAUSE_REASON = with_way_out("paused by the operator (pause-task)", way_out.operator_paused(PAUSED))


class Page(HTMLParser):
    """The page as a browser reads it: the tags, the text, the matrix's cells by shard and
    column, the chart's attributes, and every script's text."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []
        self.cells: dict[tuple[str, str], tuple[str, str]] = {}  # (shard, column) -> state, text
        self.rows: dict[str, dict[str, str]] = {}  # the matrix's rows' attributes, by shard
        self.chart: dict[str, str] = {}
        self.scripts: list[str] = []
        self._shard: str | None = None
        self._cell: tuple[str, str, list[str]] | None = None
        self._script: list[str] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        a = {k: v or "" for k, v in attrs}
        if tag == "tr" and "data-shard" in a:
            self._shard = a["data-shard"]
            self.rows[self._shard] = a
        if tag == "td" and "data-column" in a:
            self._cell = (a["data-column"], a["data-state"], [])
        if tag == "div" and a.get("id") == "chart":
            self.chart = a
        if tag == "script":
            self._script = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            column, state, text = self._cell
            self.cells[(self._shard, column)] = (state, "".join(text).strip())
            self._cell = None
        if tag == "tr":
            self._shard = None
        if tag == "script" and self._script is not None:
            self.scripts.append("".join(self._script))
            self._script = None

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self._script.append(data)
            return
        self.text.append(data)
        if self._cell is not None:
            self._cell[2].append(data)

    @property
    def words(self) -> str:
        return " ".join(" ".join(self.text).split())


def _group(*shards: ShardId) -> Player:
    player = Player(TARGET, coordinator=Coordinator(TARGET, "mariadb", InMemoryStore(), clock=lambda: 1.7e9))
    player.start({shard: BASE for shard in shards})
    return player


def _ddl(player: Player, paused: dict[ShardId, str] | None = None) -> dict:
    """show-ddl-state's answer, as the daemon's admin API makes it."""
    paused = paused or {}
    flows = {s: SimpleNamespace(pause=SimpleNamespace(position="mysql-bin.000004:880", reason=r))
             for s, r in paused.items()}
    view = player.coordinator.view()
    daemon = SimpleNamespace(
        views=lambda: {TARGET: view},
        flows=flows,
        flavor=player.coordinator.flavor,
        meta=SimpleNamespace(journal=SimpleNamespace(pending=lambda target: [])),
    )
    return ddl_state(daemon, TARGET)


def _status(paused: dict[ShardId, str]) -> dict:
    source = {"state": "running", "position": "mysql-bin.000004:1200", "lag": 0.25, "events_per_s": 3.0,
              "behind_bytes": 0, "behind_transactions": 0, "error": None}
    return {
        "task": "task<&>",
        "stage": "sync",
        "synced": False,
        "applied": 42,
        "sources": {"s1": dict(source), "s2": {**source, "lag": 1.5}},
        "groups": {},
        "paused": {str(s): {"position": "mysql-bin.000004:880", "reason": r} for s, r in paused.items()},
    }


def _page(groups: tuple[GroupPage, ...], status: dict, samples: tuple[Sample, ...] = ()) -> LivePage:
    return LivePage(status, groups, samples, 10.0, 1.7e9)


def test_a_rename_under_way_and_a_paused_shard_in_the_matrix_with_every_name_escaped():
    player = _group(RENAMER, PAUSED, OTHER)
    player.ddl(RENAMER, "ALTER TABLE `t<1>` RENAME COLUMN `a<b>` TO `x\"y'`")
    player.ddl(OTHER, "ALTER TABLE t3 MODIFY `c&d` BIGINT NULL")
    paused = {PAUSED: PAUSE_REASON}
    history = tuple(reversed(player.coordinator.group.history))
    page = _page((GroupPage(_ddl(player, paused), history, len(history)),), _status(paused))
    text = page_html(page, logout=True)
    parsed = Page(text)

    # nothing a name holds became markup: the only tags are the page's own
    assert set(parsed.tags) <= {
        "html", "head", "meta", "link", "title", "style", "body", "h1", "h2", "h3", "p", "span", "code",
        "form", "button", "main", "div", "table", "thead", "tbody", "tr", "th", "td", "section", "details",
        "summary", "pre", "script",
    }
    assert len(parsed.scripts) == 1 and "<b>" not in text and "<1>" not in text and "<orders>" not in text
    words = parsed.words
    for name in ("task<&>", TARGET, "a<b>", "c&d", "x\"y'", str(RENAMER)):
        assert name in words, name
    # the rename: the shard that made it holds the old column under the new name, the others
    # hold the new one under the old; the header says it as show-ddl-state does
    assert parsed.cells[(str(RENAMER), "a<b>")] == ("renamed", "as x\"y' (renamed here)")
    assert parsed.cells[(str(PAUSED), "x\"y'")] == ("renamed", "as a<b> (not renamed here yet)")
    assert parsed.cells[(str(RENAMER), "x\"y'")][0] == "has"
    assert "partial: renaming to x\"y', 1 of 3 shards made it: s1.db.t<1>" in words
    # another type: the join widened `c&d` to BIGINT for t3; the other two still hold INT
    assert parsed.cells[(str(OTHER), "c&d")][0] == "has"
    assert parsed.cells[(str(PAUSED), "c&d")] == ("type", "int here")
    # the paused shard: its row says so, where it waits, and the paused table its way out
    assert "shard-paused" in parsed.rows[str(PAUSED)]["class"]
    assert "shard-streaming" in parsed.rows[str(OTHER)]["class"]
    assert "resumes it, its rows since read again" in words
    assert f"shardctl resume-task {way_out.flags(PAUSED)}" in words
    # the joined CREATE TABLE and the history, newest first
    assert "CREATE TABLE" in words and "RENAME COLUMN" in words
    versions = re.findall(r"<tr><td>([0-9.]+)</td>", text.split('<table class="history">')[1])
    assert versions == [e["version"] for e in history] == ["1.2", "1.1", "1.0", "1.0", "1.0"]


def test_the_matrix_reads_the_renames_from_the_groups_view():
    player = _group(RENAMER, PAUSED)
    player.ddl(RENAMER, "ALTER TABLE `t<1>` RENAME COLUMN `a<b>` TO n")
    view = player.coordinator.view()
    assert [(r.old, r.new, r.made) for r in view.renames] == [("a<b>", "n", (RENAMER,))]
    matrix = shard_matrix(view)
    assert [c["name"] for c in matrix["columns"]] == [c.name for c in view.target.columns]
    player.ddl(PAUSED, "ALTER TABLE t2 RENAME COLUMN `a<b>` TO n")  # the last shard: it ends
    view = player.coordinator.view()
    assert view.renames == ()
    cells = shard_matrix(view)["shards"]
    assert {c["state"] for s in cells.values() for c in s["cells"]} == {"has"}


def test_an_empty_group_and_no_group_at_all():
    empty = Player(TARGET, coordinator=Coordinator(TARGET, "mariadb", InMemoryStore()))
    page = _page((GroupPage(_ddl(empty), (), 0),), _status({}))
    words = Page(live_html(page)).words
    assert "No shard in this group yet." in words and "None yet." in words
    assert "None: every shard streams." in words
    assert "No shard group yet." in Page(live_html(_page((), _status({})))).words


def test_the_chart_gets_the_samples_as_json_in_an_attribute():
    samples = (Sample(1.7e9 - 10, 100, (("s<1>", 0.5), ("s2", None))), Sample(1.7e9, 250, (("s<1>", 1.25),)))
    parsed = Page(live_html(_page((), _status({}), samples)))
    assert json.loads(parsed.chart["data-samples"]) == [s.to_data() for s in samples]
    assert parsed.chart["data-every"] == "10"


def test_the_csp_lets_the_pages_own_script_and_style_run_and_nothing_else():
    parsed = Page(page_html(_page((), _status({}))))
    (script,) = parsed.scripts
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}';" in CSP
    assert "default-src 'none'" in CSP and "unsafe" not in CSP
    assert re.search(r"src=|href=\"http", page_html(_page((), _status({})))) is None  # nothing loaded


def test_the_login_form_posts_the_token_and_escapes_its_message():
    text = login_html("bad <token> & more")
    parsed = Page(text)
    assert "bad <token> & more" in parsed.words and "<token>" not in text
    assert '<form method="post" action="login">' in text and 'type="password" name="token"' in text
    assert parsed.scripts == []  # (the form runs no script: it works with none)


def test_a_session_holds_for_its_token_and_its_time_only():
    issued = 1_700_000_000
    value = session_value("tok-1", issued)
    assert "tok-1" not in value
    assert valid_session("tok-1", value, issued + 5)
    assert not valid_session("tok-2", value, issued + 5)  # a new token ends it
    assert not valid_session("tok-1", value, issued + SESSION_SECONDS)  # expired
    assert not valid_session("tok-1", value, issued - 60)  # issued ahead
    assert not valid_session("tok-1", f"{issued + 1}.{value.split('.')[1]}", issued + 5)  # time changed
    assert not valid_session("tok-1", "garbage", issued)


def test_samples_keep_the_last_hour_as_a_tuple_replaced_each_time():
    samples = Samples(keep=3, every=10.0)
    assert samples.due(0.0)
    held = []
    for n in range(5):
        samples.add(Sample(float(n), n * 10, ()), monotonic=n * 10.0)
        held.append(samples.taken)
    assert [s.applied for s in samples.taken] == [20, 30, 40]
    assert [s.applied for s in held[1]] == [0, 10]  # what a reader got never changes
    assert not samples.due(45.0) and samples.due(50.0)
    sources = [SimpleNamespace(id="s2", event_time=95.0), SimpleNamespace(id="s1", event_time=0.0)]
    assert measure(sources, 7, 100.0) == Sample(100.0, 7, (("s1", None), ("s2", 5.0)))


def _ask(server, method: str, path: str, headers: dict | None = None, body: str | None = None):
    conn = http.client.HTTPConnection(*server.httpd.server_address[:2], timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    finally:
        conn.close()


def test_the_view_server_answers_bad_input_and_a_downstream_away_with_a_message(caplog):
    """A real admin API server: a login with a Content-Length that is no number, a page that
    cannot be made (the meta schema not answering), a method the page does not take."""

    def away() -> LivePage:
        raise pymysql.err.OperationalError(2013, "Lost connection to server during query")

    server = AdminServer(AdminConfig(port=free_port(), token="tok-9"), {}, lambda: "", page=away)
    server.start()
    try:
        with caplog.at_level(logging.DEBUG, logger="shardmerge"):
            status, text = _ask(server, "POST", "/login", {"Content-Length": "x1"}, None)
            assert status == 400 and "is not a byte count" in text
            status, text = _ask(server, "GET", "/view/live", {"Authorization": "Bearer tok-9"})
            assert status == 503 and "the downstream did not answer" in text and "Lost connection" in text
            status, text = _ask(server, "GET", "/login")
            assert status == 405 and "open / in a browser" in text
            status, text = _ask(server, "GET", "/api/v1/status")  # (the API still wants the token)
            assert status == 401
    finally:
        server.stop()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
