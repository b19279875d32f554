"""The daemon's admin API: HTTP with JSON, for `shardctl` and scripts.

Bound to 127.0.0.1 by default; anywhere else a bearer token is required (the config
refuses to start without one). Requests are served by the daemon's main thread
(handed over through a queue), so they see and change its state between two steps
of its loop, never in the middle of one.

    GET  /api/v1/status                         task, sources, groups, pauses
    GET  /api/v1/groups/{target}/ddl            the DDL state of a shard group
    GET  /api/v1/groups/{target}/history        the joined schema's history
    GET  /api/v1/samples                        the last hour's lag and rows applied, every 10 s
    POST /api/v1/pause      {"source": S?}      pause the task, or one source
                            {"shard": S.db.t}   or one shard (the others stream on)
    POST /api/v1/resume     {"source": S?}      ({"shard": S.db.t}: as /api/v1/shards/resume)
    POST /api/v1/binlog/skip     {"shard"?, "source"?, "table"?, "target"?, "position"?}
    POST /api/v1/binlog/replace  {... as skip, "sql"}
    POST /api/v1/binlog/inject   {... as skip, "sql"}
    GET  /api/v1/binlog                         the held DDLs, the operations done
    GET  /api/v1/shard-ddl-locks                shard groups with held shards (DM's locks)
    POST /api/v1/shard-ddl-locks/unlock {... as skip, "action": "skip"}
    POST /api/v1/stop                           stop the daemon cleanly (as SIGTERM)
    POST /api/v1/set-schema      {"shard", "create_table"}
    POST /api/v1/ddl-propagation {"target"?, "enabled": bool}
    GET  /                                      the live view, for browsers (view_http.py; with a
                                                token: POST /login sets a session cookie for it)
    GET  /metrics                               Prometheus text
    GET  /healthz                               200 while the process serves (no token), with its
                                                role: active, or standby (waiting for the lease)
    GET  /readyz                                200 when every source and the target are
                                                connected and the daemon answers, else 503
                                                with what is not (no token); a standby: 503

A standby serves /healthz, /readyz, /metrics and /api/v1/status (who runs the task) from
its HTTP thread: its main thread waits for the lease, and nothing else of it runs yet.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from replicator.api import request_origin, view_http
from replicator.api.admin_error import AdminError
from replicator.api.view_model import LivePage
from replicator.config import AdminConfig
from replicator.transient import transient

log = logging.getLogger("shardmerge.admin")
CALL_TIMEOUT = 30.0
READY_TIMEOUT = 5.0  # a main loop that does not answer in this is stuck: not ready
POLL = 0.05  # seconds between the HTTP loop's looks for a shutdown


class Calls:
    """Functions the HTTP threads hand to the daemon's main thread."""

    def __init__(self) -> None:
        self.queue: queue.Queue[tuple[Callable[[], Any], Future]] = queue.Queue()
        self.reads: queue.Queue[tuple[Callable[[], Any], Future]] = queue.Queue()

    def call(self, fn: Callable[[], Any], timeout: float = CALL_TIMEOUT) -> Any:
        return self._wait(self.queue, fn, timeout)

    def read(self, fn: Callable[[], Any], timeout: float = CALL_TIMEOUT) -> Any:
        """A call that only reads (status, metrics, readiness): served also while the main
        thread waits for the applier (`serve_reads`), so an operator sees what it waits on."""
        return self._wait(self.reads, fn, timeout)

    def _wait(self, into: queue.Queue, fn: Callable[[], Any], timeout: float) -> Any:
        future: Future = Future()
        into.put((fn, future))
        try:
            return future.result(timeout=timeout)
        except TimeoutError as exc:
            raise AdminError(503, "the daemon did not answer in time (busy, or stopping)") from exc

    def serve_pending(self) -> None:
        """Run what is waiting; called by the main thread in its loop. A call that changes
        the daemon's state and loses the downstream (a transient error) is answered 503,
        and the error goes on to the loop: what the call changed in memory may not be
        saved, and the daemon starts again from what is (`StartAgain`)."""
        self.serve_reads()
        self._serve(self.queue, writes=True)

    def serve_reads(self) -> None:
        """Run the reads waiting; the main thread calls it where it waits, too."""
        self._serve(self.reads)

    def refuse_pending(self, why: str) -> None:
        """Answer every call still waiting 503 (`why`): nothing will serve them."""
        for calls in (self.queue, self.reads):
            while True:
                try:
                    _, future = calls.get_nowait()
                except queue.Empty:
                    break
                if future.set_running_or_notify_cancel():
                    future.set_exception(AdminError(503, why))

    @staticmethod
    def _serve(calls: queue.Queue, writes: bool = False) -> None:
        while True:
            try:
                fn, future = calls.get_nowait()
            except queue.Empty:
                return
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:
                if writes and transient(exc):
                    future.set_exception(AdminError(503, f"the downstream was lost during the call ({exc}); "
                                                         "the daemon starts again: ask again in a while"))
                    raise
                future.set_exception(exc)


Route = Callable[[dict[str, Any], list[str]], Any]


class AdminServer:
    def __init__(
        self,
        config: AdminConfig,
        routes: dict[tuple[str, str], Route],
        metrics: Callable[[], str],
        ready: Callable[[], dict[str, str]] = dict,
        role: str = "active",
        page: Callable[[], LivePage] | None = None,
    ):
        """`ready`: what is not ready, by part (`source s1`, `target`), with why; empty when
        all is (it raises AdminError when the daemon does not answer). `role`: "active" (it
        runs the task) or "standby" (it waits for the task's lease), said by both probes.
        `page`: what the live view at `/` shows (view_http.py; None: no live view)."""
        self.config = config
        self.role = role
        self.routes = routes
        self.metrics = metrics
        self.ready = ready
        self.page = page
        self.httpd: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None
        # why every request but the liveness probe is answered 503 now (None: served); a
        # member's process keeps its address listening while it starts again (`between`)
        self.starting: str | None = None

    @property
    def address(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> None:
        server = self

        class Handler(_Handler):
            admin = server

        self.httpd = ThreadingHTTPServer((self.config.host, self.config.port), Handler)
        self.httpd.daemon_threads = True
        # (its loop looks for a shutdown every poll: at the default half second, a standby's API
        # handed over on taking the lease and every stop waited that long for it)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": POLL}, name="admin-api", daemon=True
        )
        self.thread.start()
        log.info(
            "admin API on %s%s", self.address, "" if self.config.token is None else " (bearer token required)"
        )

    def between(self, why: str) -> None:
        """Answered 503 with `why` till `serve` (a member starting again: a tool asking now is
        told to ask again, not refused a connection)."""
        self.starting = why

    def serve(self, other: AdminServer) -> None:
        """Answered with `other`'s handlers from now on, on this one's address (the next start
        of the member's daemon). Each is one reference the HTTP thread reads per request
        (none is changed in place); `starting` goes last: till then requests are told to
        ask again."""
        self.routes, self.metrics, self.ready = other.routes, other.metrics, other.ready
        self.page, self.role = other.page, other.role
        self.starting = None

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    admin: AdminServer
    server_version = "shardmerge-admin"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        try:
            path = self.path.split("?", 1)[0].rstrip("/")
            if method == "GET" and path in ("/healthz", "/readyz"):
                self._probe(path)  # for supervisors and orchestrators: no token
                return
            starting = self.admin.starting
            if starting is not None:  # (a tool asks again after the second Retry-After says)
                self._answer_error(503, starting, 1)
                return
            view = self.admin.page is not None and path in view_http.PATHS
            refused = request_origin.refusal(
                self.headers.get("Host"),
                self.headers.get("Origin"),
                method,
                self.headers.get("Content-Type"),
                self.admin.config.token is not None,
                api=not view,
            )
            if refused is not None:
                raise AdminError(*refused)
            if view:
                # (for browsers: a form asks for the token, a session cookie keeps it)
                view_http.ViewRequest(self, self.admin.config.token, self.admin.page).serve(method, path)
                return
            self._authorize()
            if method == "GET" and path == "/metrics":
                self._send(200, self.admin.metrics().encode(), "text/plain; version=0.0.4")
                return
            body = self._body() if method == "POST" else {}
            route, params = self._route(method, path)
            self._json(200, route(body, params))
        except ConnectionError as exc:
            # the client gave up before the answer (a probe's timeout while the downstream is
            # away): nothing failed here, and nobody is left to tell (issue 70)
            log.debug("admin request %s %s: the client went away (%s)", method, self.path, exc)
        except AdminError as exc:
            # (a call the loop dropped as the member started again: asked again, it is served)
            again = 1 if exc.status == 503 and self.admin.starting is not None else None
            self._answer_error(exc.status, str(exc), again)
        except Exception as exc:
            log.exception("admin request %s %s failed", method, self.path)
            self._answer_error(500, f"{type(exc).__name__}: {exc}")

    def _answer_error(self, status: int, error: str, retry_after: int | None = None) -> None:
        with contextlib.suppress(ConnectionError):  # (the client went away meanwhile)
            payload = json.dumps({"error": error}, indent=2).encode()
            self._send(status, payload, "application/json", retry_after)

    def _probe(self, path: str) -> None:
        """Liveness answers from this thread; readiness asks the daemon's loop, and says
        which parts are not ready (the reasons need the token: `/api/v1/status`)."""
        role = self.admin.role
        if path == "/healthz":
            self._json(200, {"status": "alive", "role": role})
            return
        try:
            starting = self.admin.starting
            waiting = {"daemon": starting} if starting is not None else self.admin.ready()
        except AdminError:
            waiting = {"daemon": "its loop did not answer"}
        self._json(
            503 if waiting else 200, {"ready": not waiting, "not_ready": sorted(waiting), "role": role}
        )

    def _authorize(self) -> None:
        token = self.admin.config.token
        if token is None:
            return
        given = self.headers.get("Authorization", "")
        if not given.startswith("Bearer ") or not hmac.compare_digest(given[7:].encode(), token.encode()):
            raise AdminError(401, "a valid bearer token is required (Authorization: Bearer ...)")

    def _route(self, method: str, path: str) -> tuple[Route, list[str]]:
        parts = [unquote(p) for p in path.split("/") if p]
        for (m, pattern), route in self.admin.routes.items():
            want = [p for p in pattern.split("/") if p]
            if m != method or len(want) != len(parts):
                continue
            params = []
            for w, p in zip(want, parts, strict=True):
                if w == "*":
                    params.append(p)
                elif w != p:
                    break
            else:
                return route, params
        raise AdminError(404, f"no {method} {path}; see `shardctl --help` for what the admin API answers")

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return {}
        try:
            data = json.loads(self.rfile.read(length))
        except (ValueError, UnicodeDecodeError) as exc:
            raise AdminError(400, f"the request body is not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise AdminError(400, "the request body must be a JSON object")
        return data

    def _json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data, indent=2, default=str).encode(), "application/json")

    def _send(self, status: int, payload: bytes, content_type: str, retry_after: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if retry_after is not None:
            self.send_header("Retry-After", str(retry_after))
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
