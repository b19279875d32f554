"""Which requests the admin API refuses for where they come from: a web page of another
site in the operator's browser must not drive it.

- Without a token the API listens on the loopback only (`AdminConfig`), and anything that
  can reach the port may call it. A page of another site can still reach it through the
  browser: by renaming its own host to 127.0.0.1 (DNS rebinding) it reads the answers, and
  a plain POST of it (no question asked first) runs an operation. So without a token a
  request must name the API by a loopback address or `localhost` (`Host`), and a POST to
  the API must say its body is JSON, which a browser sends another site's page only after
  asking the server, which never agrees.
- With a token or without, a request a browser marks as sent by a page of another origin
  (`Origin`) is refused: the live view's own page sends its own origin.

The probes (`/healthz`, `/readyz`) are not asked: they change nothing and say little."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

LOOPBACK_NAMES = frozenset({"localhost"})


def refusal(
    host: str | None, origin: str | None, method: str, content_type: str | None, token: bool, api: bool
) -> tuple[int, str] | None:
    """(status, error) for a request to refuse, None to serve it. `host`, `origin`,
    `content_type`: its headers (None: absent); `token`: the API has one; `api`: the
    request is to the API (not the live view's page or its login)."""
    if origin is not None and _netloc(origin) != (host or "").lower():  # ("null": a sandboxed page)
        return 403, (
            f"a request from a page of {origin} is refused: the admin API answers its own "
            "page and clients such as shardctl, not other sites' pages"
        )
    if not token:
        if not _loopback(host):
            return 403, (
                f"the admin API has no token, so it answers only requests to 127.0.0.1, ::1 or "
                f"localhost (this one names {host or 'no host'}): use one of those, or set "
                "admin.token (docs/operations/shardctl.md, 'Pages of other sites')"
            )
        media = (content_type or "").split(";")[0].strip().lower()
        if api and method == "POST" and media != "application/json":
            return 415, "a POST to the admin API sends JSON (Content-Type: application/json, as shardctl)"
    return None


def _netloc(origin: str) -> str:
    return urlsplit(origin).netloc.lower()


def _loopback(host: str | None) -> bool:
    """Whether a Host header names a loopback address or `localhost`, with or without a port."""
    if not host:
        return False
    name = host.strip().lower()
    if name.startswith("["):  # [::1]:8080
        name = name[1 : name.find("]")] if "]" in name else name
    elif name.count(":") == 1:  # 127.0.0.1:8080, localhost:8080
        name = name.split(":", 1)[0]
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
