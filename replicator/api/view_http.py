"""The live view's side of the admin API's HTTP server: `GET /` (the page), `GET /view/live`
(its live part, which the page's script fetches), `POST /login` and `POST /logout`.

With a token configured every other endpoint wants `Authorization: Bearer`, which a browser
does not send when it opens a page. So `/` without it shows a form; the token posted to
`/login` (never in an address, so never in a log or a browser's history) sets a session
cookie: HttpOnly (no script reads it), SameSite=Strict (no other site's page sends it), for
12 hours. The cookie is not the token: it is the time it was issued and a MAC of that time
keyed by the token, checked again at each request, so no session is kept anywhere (no state
shared between the HTTP threads), and a new token ends every session. It opens the page and
its live part only, read-only: every other endpoint still wants the bearer token.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Callable
from http.cookies import CookieError, SimpleCookie
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

import pymysql

from replicator.api.admin_error import AdminError
from replicator.api.view_assets import CSP
from replicator.api.view_html import error_html, live_html, login_html, page_html
from replicator.api.view_model import LivePage

if TYPE_CHECKING:
    from http.server import BaseHTTPRequestHandler

log = logging.getLogger("shardmerge.admin")
COOKIE = "shardmerge_view"
SESSION_SECONDS = 12 * 3600
LOGIN_LIMIT = 4096  # bytes of a login form: a token is far shorter
PATHS = frozenset({"", "/view/live", "/login", "/logout"})  # (the handler strips the last "/")


def session_value(token: str, issued: int) -> str:
    mac = hmac.new(token.encode(), f"shardmerge live view {issued}".encode(), hashlib.sha256).hexdigest()
    return f"{issued}.{mac}"


def valid_session(token: str, value: str, now: float) -> bool:
    issued, _, _ = value.partition(".")
    if not issued.isdigit() or not 0 <= now - int(issued) < SESSION_SECONDS:
        return False
    return hmac.compare_digest(session_value(token, int(issued)).encode(), value.encode())


class ViewRequest:
    """One request to the live view, answered on the handler's thread."""

    def __init__(self, handler: BaseHTTPRequestHandler, token: str | None, page: Callable[[], LivePage]):
        self.handler, self.token, self.page = handler, token, page

    def serve(self, method: str, path: str) -> None:
        if method == "POST" and path == "/login":
            self._login()
        elif method == "POST" and path == "/logout":
            self._redirect(self._cookie("", 0))
        elif method == "GET" and path in ("", "/view/live"):
            self._view(path)
        else:
            self._html(405, error_html(f"{method} {path or '/'} is not served: open / in a browser"))

    # -- the page -------------------------------------------------------------------------------
    def _view(self, path: str) -> None:
        live = path == "/view/live"
        if not self._allowed():
            if live:  # (the script reloads the page, which asks for the token)
                self._html(401, "the session ended")
            else:
                self._html(200, login_html())
            return
        try:
            page = self.page()
        except AdminError as exc:
            self._html(exc.status, str(exc) if live else error_html(str(exc)))
            return
        except pymysql.err.MySQLError as exc:
            # (the meta schema's history or journal not read: the downstream is away; its state
            # is in /readyz and the log already, and the page asks again in a few seconds)
            log.debug("live view not made: %s", exc)
            why = f"the downstream did not answer ({exc}); the page tries again"
            self._html(503, why if live else error_html(why))
            return
        self._html(200, live_html(page) if live else page_html(page, logout=self.token is not None))

    def _allowed(self) -> bool:
        if self.token is None:
            return True
        given = self.handler.headers.get("Authorization", "")
        if given.startswith("Bearer ") and hmac.compare_digest(given[7:].encode(), self.token.encode()):
            return True
        session = self._session()
        return session is not None and valid_session(self.token, session, time.time())

    def _session(self) -> str | None:
        try:
            cookies = SimpleCookie(self.handler.headers.get("Cookie", ""))
        except CookieError:
            return None
        morsel = cookies.get(COOKIE)
        return morsel.value if morsel is not None else None

    # -- the token --------------------------------------------------------------------------------
    def _login(self) -> None:
        if self.token is None:  # (no token to ask: the page is open)
            self._redirect()
            return
        length_text = self.handler.headers.get("Content-Length") or "0"
        if not length_text.isdigit():
            why = f"Content-Length {length_text!r} is not a byte count: post the form again"
            self._html(400, login_html(why))
            return
        length = int(length_text)
        if length > LOGIN_LIMIT:
            self._html(413, login_html(f"the form is over {LOGIN_LIMIT} bytes: give the token alone"))
            return
        form = parse_qs(self.handler.rfile.read(length).decode("utf-8", "replace")) if length else {}
        given = (form.get("token") or [""])[0].strip()
        if not given or not hmac.compare_digest(given.encode(), self.token.encode()):
            self._html(401, login_html("That is not this daemon's admin token."))
            return
        issued = int(time.time())
        self._redirect(self._cookie(session_value(self.token, issued), SESSION_SECONDS))

    @staticmethod
    def _cookie(value: str, seconds: int) -> str:
        return f"{COOKIE}={value}; Path=/; Max-Age={seconds}; HttpOnly; SameSite=Strict"

    # -- answers ----------------------------------------------------------------------------------
    def _redirect(self, cookie: str | None = None) -> None:
        """To the page (303: the browser asks for it with GET, and a reload posts nothing again)."""
        h = self.handler
        h.send_response(303)
        h.send_header("Location", "/")
        if cookie is not None:
            h.send_header("Set-Cookie", cookie)
        h.send_header("Content-Length", "0")
        h.send_header("Cache-Control", "no-store")
        h.end_headers()

    def _html(self, status: int, text: str) -> None:
        payload = text.encode()
        h = self.handler
        h.send_response(status)
        h.send_header("Content-Type", "text/html; charset=utf-8")
        h.send_header("Content-Length", str(len(payload)))
        h.send_header("Content-Security-Policy", CSP)
        h.send_header("X-Content-Type-Options", "nosniff")
        h.send_header("Referrer-Policy", "same-origin")  # (no-referrer: its form's origin "null")
        h.send_header("Cache-Control", "no-store")
        h.end_headers()
        h.wfile.write(payload)
