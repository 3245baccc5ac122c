"""The server's front door: Host and Origin allow-lists, a token beyond loopback, a body limit.

One ASGI middleware, outermost, so nothing behind it (routes, pages, the OpenAPI document) is
reached by a request it refuses:

- **Host** (DNS rebinding): a page on another site that rebinds its name to 127.0.0.1 sends
  ``Host: rebind.attacker.example``; only loopback names, the bound address, IP literals when
  bound to every interface, and ``--allowed-host`` names are served (else 403).
- **Origin** (cross-site requests): a state-changing request (POST, PUT, PATCH, DELETE) from a
  browser page of another origin (one not served by this server, nor named with
  ``--allowed-host``) is refused (403); requests without ``Origin`` (scripts, curl) and the
  server's own pages pass.
- **Token** (binds beyond loopback): ``Authorization: Bearer <token>``, the ``servecap_token``
  cookie, or ``?token=<token>`` (which sets the cookie, as Jupyter does, so the pages' own
  requests carry it); else 401. ``GET /api/v1/health`` needs none.
- **Body size**: a ``Content-Length`` over the limit is refused before a byte is read; a body
  without one (chunked) is counted as it arrives and cut off at the limit (413), so a 1 GB
  upload costs the server at most the limit, never the gigabyte.

Refusals come in the API's one error shape.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.exceptions import HTTPException

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "localhost.localdomain", "ip6-localhost"})
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})
COOKIE = "servecap_token"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
OPEN_PATHS = frozenset({"/api/v1/health"})


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a body passes the limit (FastAPI lets HTTPExceptions through
    its body parsing; the error handler turns it into the one error shape)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than the limit of {limit:,} bytes")
        self.limit = limit


@dataclass(frozen=True, slots=True)
class GuardSettings:
    bind_host: str = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()  # extra names (``--allowed-host``); "*" allows any
    token: str | None = None  # required on every request but OPEN_PATHS when set
    max_body_bytes: int = 2 * 1024 * 1024


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves only this machine."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    return secrets.token_urlsafe(24)


def _hostname(host_header: str) -> str:
    """``example.com:8080`` -> ``example.com``; ``[::1]:80`` -> ``::1``."""
    text = host_header.strip().lower()
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class Guard:
    """The ASGI middleware (see the module)."""

    def __init__(self, app: ASGIApp, settings: GuardSettings) -> None:
        self.app = app
        self.settings = settings
        bind = settings.bind_host.strip("[]").lower()
        self.any_ip = bind in WILDCARD_BINDS
        names = {n.lower().strip("[]") for n in (*LOOPBACK_NAMES, *settings.allowed_hosts)}
        if not self.any_ip:
            names.add(bind)
        self.allowed = frozenset(names)
        self.extra = frozenset(n.lower().strip("[]") for n in settings.allowed_hosts)
        self.any_host = "*" in names

    def host_allowed(self, hostname: str) -> bool:
        if self.any_host or hostname in self.allowed:
            return True
        if _is_ip(hostname):
            return self.any_ip or ipaddress.ip_address(hostname).is_loopback
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        host = headers.get("host", "")
        if not self.host_allowed(_hostname(host)):
            await _refuse(
                send, 403, "host", host, "this server does not answer to that Host name (add it with --allowed-host)"
            )
            return
        origin = headers.get("origin")
        if scope["method"] in UNSAFE_METHODS and origin is not None and not self._same_site(origin, host):
            await _refuse(send, 403, "origin", origin, "cross-site requests are refused")
            return
        if headers.get("sec-fetch-site") == "cross-site" and scope["method"] in UNSAFE_METHODS:
            await _refuse(send, 403, "origin", origin or "cross-site", "cross-site requests are refused")
            return
        if self.settings.token is not None and scope["path"] not in OPEN_PATHS:
            query_token = _query_token(scope)
            if query_token is not None and _same(query_token, self.settings.token):
                if scope["method"] == "GET" and not scope["path"].startswith("/api/"):
                    # a page opened from the start-up URL: set the cookie, drop the token from the URL
                    await _redirect_with_cookie(send, scope, self.settings.token)
                    return
            elif not self._authorized(headers):
                await _refuse(
                    send,
                    401,
                    "token",
                    None,
                    "this server needs its token: open the URL it printed at start-up, or send "
                    "'Authorization: Bearer <token>'",
                    extra_headers=[(b"www-authenticate", b"Bearer")],
                )
                return
        limit = self.settings.max_body_bytes
        length = headers.get("content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                await _refuse(send, 400, "content-length", length, "not a number")
                return
            if declared > limit:
                await _refuse(send, 413, "body", f"{declared:,} bytes", f"is larger than the limit of {limit:,} bytes")
                return
        await self.app(scope, _counting(receive, limit), send)

    def _same_site(self, origin: str, host: str) -> bool:
        try:
            parts = urlsplit(origin)
            hostname = (parts.hostname or "").lower()
        except ValueError:  # "http://[" and the like
            return False
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False  # "null" (a sandboxed frame, a file:// page) and the like
        # the pages are served from this origin; another origin only when named with --allowed-host
        return parts.netloc.lower() == host.lower() or hostname in self.extra

    def _authorized(self, headers: dict[str, str]) -> bool:
        token = self.settings.token
        assert token is not None
        auth = headers.get("authorization", "")
        if auth[:7].lower() == "bearer " and _same(auth[7:].strip(), token):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header is no token
            return False
        morsel = cookie.get(COOKIE)
        return morsel is not None and _same(morsel.value, token)


def _same(given: str, token: str) -> bool:
    """A constant-time comparison that takes any text (``compare_digest`` refuses non-ASCII str)."""
    return secrets.compare_digest(given.encode("utf-8", "surrogatepass"), token.encode("utf-8"))


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in scope.get("headers", ()):
        out.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
    return out


def _query_token(scope: Scope) -> str | None:
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key == "token":
            return str(value)
    return None


def _counting(receive: Receive, limit: int) -> Receive:
    """``receive`` that counts body bytes and raises :class:`BodyTooLarge` past ``limit``."""
    seen = 0

    async def wrapped() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise BodyTooLarge(limit)
        return message

    return wrapped


async def _refuse(
    send: Send,
    status: int,
    field: str,
    value: object,
    problem: str,
    extra_headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    shown = value if isinstance(value, str | int | float | bool) or value is None else str(value)
    if isinstance(shown, str) and len(shown) > 120:
        shown = shown[:117] + "..."
    message = f"{field}={shown!r}: {problem}" if isinstance(shown, str) else f"{field}={shown}: {problem}"
    body = json.dumps({"error": {"message": message, "field": field, "value": shown}}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *extra_headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _redirect_with_cookie(send: Send, scope: Scope, token: str) -> None:
    query = [(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1")) if k != "token"]
    location = scope["path"] + (f"?{urlencode(query)}" if query else "")
    cookie = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
    headers = [
        (b"location", location.encode("latin-1")),
        (b"set-cookie", cookie.encode("latin-1")),
        (b"content-length", b"0"),
        (b"cache-control", b"no-store"),
    ]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})
