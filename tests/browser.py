"""Headless Chromium for the tests, driven through its DevTools protocol over a pipe
(`--remote-debugging-pipe`: the browser reads commands on its fd 3 and answers on its fd 4,
JSON messages each ended by a NUL byte), so no port, no client library: a page is opened,
its forms filled and posted, its DOM read after its script ran, its console's errors
collected and a screenshot taken, as a person's browser would show them.

Debian's `chromium` package (`make setup` installs it); as root it runs with `--no-sandbox`."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import itertools
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

CHROMIUM = "chromium"


class BrowserError(Exception):
    pass


class Browser:
    def __init__(self, profile: Path, width: int = 1400, height: int = 1800):
        if shutil.which(CHROMIUM) is None:
            raise BrowserError("chromium is not installed: `make setup` installs it (Debian's chromium package)")
        to_browser = os.pipe()  # (read end: the browser's fd 3)
        from_browser = os.pipe()  # (write end: the browser's fd 4)
        # above 4, so that placing them at 3 and 4 in the child overwrites neither; closed on exec
        # (only the copies at 3 and 4 go to the browser: `dup2` makes them inheritable)
        theirs = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser[0], from_browser[1])]

        def place() -> None:
            os.dup2(theirs[0], 3)
            os.dup2(theirs[1], 4)

        self.process = subprocess.Popen(
            [
                CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                f"--user-data-dir={profile}", f"--window-size={width},{height}", "--no-first-run",
                "--disable-extensions", "--disable-background-networking", "--disable-sync",
                "--disable-component-update", "--disable-default-apps", "about:blank",
            ],
            # (close_fds would close 3 and 4 after `place`: what else this process has open is not
            # inheritable, as Python opens it)
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=False, preexec_fn=place,
        )
        for fd in (*theirs, to_browser[0], from_browser[1]):
            os.close(fd)
        self._out, self._in = to_browser[1], from_browser[0]
        self._buffer = b""
        self._ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []  # every event seen, in order
        self.session = ""
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=None)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True}, session=None)[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")

    # -- the protocol ------------------------------------------------------------------------------
    def call(self, method: str, params: dict | None = None, session: str | None = "", timeout: float = 60) -> dict:
        """Send a command (to the page's session unless `session` is None) and wait for its answer."""
        n = next(self._ids)
        message: dict[str, Any] = {"id": n, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session or self.session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._next(deadline)
            if answer.get("id") == n:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def _next(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise BrowserError("chromium did not answer in time")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise BrowserError(f"chromium closed its pipe (exit {self.process.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def wait_event(self, method: str, since: int, timeout: float = 60) -> dict[str, Any]:
        """The first event `method` from the `since`-th event on (answers read meanwhile count)."""
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events[since:]:
                if event.get("method") == method:
                    return event
            self.events.append(self._next(deadline))

    # -- what a test does -------------------------------------------------------------------------
    def open(self, url: str) -> None:
        since = len(self.events)
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", since)

    def evaluate(self, expression: str, timeout: float = 60) -> Any:
        """The value of a JavaScript expression in the page (a promise: awaited)."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            timeout=timeout,
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def submit(self, form: str, fields: dict[str, str]) -> None:
        """Fill a form's fields and post it as a person would (its button), then wait for the page
        it leads to."""
        since = len(self.events)
        fill = "".join(f"f.elements[{json.dumps(k)}].value = {json.dumps(v)};" for k, v in fields.items())
        self.evaluate(f"(() => {{ const f = document.querySelector({json.dumps(form)}); {fill} "
                      "f.querySelector('button').click(); return true; })()")
        self.wait_event("Page.loadEventFired", since)

    def dom(self) -> str:
        return self.evaluate("document.documentElement.outerHTML")

    def errors(self, since: int = 0) -> list[str]:
        """The console's errors from the `since`-th event on: a script's exception, a console.error,
        and what the browser logs as an error (a refused resource, a blocked script)."""
        out = []
        for event in self.events[since:]:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                out.append(json.dumps(params["exceptionDetails"])[:500])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                out.append(f"{params['entry'].get('url', '')}: {params['entry']['text']}")
        return out

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.call("Browser.close", session=None, timeout=10)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=20)
        for fd in (self._out, self._in):
            with contextlib.suppress(OSError):
                os.close(fd)
