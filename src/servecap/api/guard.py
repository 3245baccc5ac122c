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
import re
import secrets
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

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


MIN_TOKEN_CHARS = 16
_COOKIE_UNSAFE = frozenset('",;\\')


def token_problem(token: str) -> str | None:
    """Why ``token`` cannot guard the server, or None. A token is at least 16 visible ASCII
    characters (RFC 5234 VCHAR, 0x21-0x7E: no space, tab or newline, which headers trim or
    split) and none of ``" , ; \\``, which a cookie value cannot carry unquoted (RFC 6265 4.1.1)."""
    if len(token) < MIN_TOKEN_CHARS:
        return f"must be at least {MIN_TOKEN_CHARS} characters"
    bad = next((c for c in token if not "\x21" <= c <= "\x7e" or c in _COOKIE_UNSAFE), None)
    if bad is not None:
        return f'must be visible ASCII characters, no whitespace and none of " , ; \\ (found {bad!r})'
    return None


_AUTHORITY = re.compile(r"(\[[^\[\]]*\]|[^:\[\]]*)(?::([0-9]{1,5}))?")
_REG_NAME = re.compile(r"[a-z0-9_](?:[a-z0-9_.\-]{0,252})")
_ORIGIN = re.compile(r"(https?)://(.*)")
_MAX_HOST_CHARS = 300


def parse_authority(text: str) -> tuple[str, int | None] | None:
    """``Host``'s value as RFC 9110 section 7.2 reads it (``uri-host [ ":" port ]``, RFC 3986's
    grammar): ``(hostname, port)``, lower-cased, brackets gone, or None when it is not exactly that.

    Narrower than RFC 3986 where browsers never go further: a name is a DNS name (letters,
    digits, ``-``, ``.``, ``_``; no percent-encoding, no sub-delims), an IP literal is an IPv6
    address (no zone, no IPvFuture), and a port is 1-65535 (an empty port is refused). Nothing may
    follow: ``localhost:80@evil.example`` and ``[::1]evil.example`` are not a host and a port.
    """
    if len(text) > _MAX_HOST_CHARS:
        return None
    found = _AUTHORITY.fullmatch(text.lower())
    if found is None:
        return None
    host, port_text = found.group(1), found.group(2)
    port = None
    if port_text is not None:
        port = int(port_text)
        if not 1 <= port <= 65535:
            return None
    if host.startswith("["):
        inner = host[1:-1]
        if "%" in inner:  # a zone id (RFC 6874) names an interface of the client, not this server
            return None
        try:
            ipaddress.IPv6Address(inner)
        except ValueError:
            return None
        return inner, port
    if _REG_NAME.fullmatch(host) is None:
        return None
    return host, port


def parse_origin(text: str) -> tuple[str, str, int | None] | None:
    """``Origin``'s value as RFC 6454 section 7 serialises it (``scheme "://" host [ ":" port ]``,
    nothing after, not even ``/``): ``(scheme, hostname, port)``, or None (``null`` included)."""
    found = _ORIGIN.fullmatch(text.lower())
    if found is None:
        return None
    authority = parse_authority(found.group(2))
    if authority is None:
        return None
    return found.group(1), authority[0], authority[1]


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
        send = _secured(send, scope["path"])
        headers, counts = _headers(scope)
        host = headers.get("host", "")
        if counts.get("host", 0) != 1:
            await _refuse(send, 400, "host", f"{counts.get('host', 0)} Host headers", "a request carries exactly one")
            return
        authority = parse_authority(host)
        if authority is None:
            await _refuse(
                send, 400, "host", host, "not a host name or IP address with an optional port 1-65535 (RFC 9110 7.2)"
            )
            return
        if not self.host_allowed(authority[0]):
            await _refuse(
                send, 403, "host", host, "this server does not answer to that Host name (add it with --allowed-host)"
            )
            return
        origin = headers.get("origin")
        if counts.get("origin", 0) > 1:
            await _refuse(send, 400, "origin", f"{counts['origin']} Origin headers", "a request carries at most one")
            return
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
        """Whether ``origin`` is this server's own (exactly the origin its pages were served from:
        the scheme's ``//`` and the request's ``Host``, nothing else), or a --allowed-host name."""
        parsed = parse_origin(origin)
        if parsed is None:  # "null" (a sandboxed frame, a file:// page), a path, userinfo, ...
            return False
        _scheme, hostname, _port = parsed
        own = origin.lower().split("://", 1)[1] == host.lower()
        return own or hostname in self.extra

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


def _headers(scope: Scope) -> tuple[dict[str, str], dict[str, int]]:
    """The request's headers (the first of each name) and how many times each name came."""
    out: dict[str, str] = {}
    counts: dict[str, int] = {}
    for key, value in scope.get("headers", ()):
        name = key.decode("latin-1").lower()
        out.setdefault(name, value.decode("latin-1"))
        counts[name] = counts.get(name, 0) + 1
    return out, counts


def _query_token(scope: Scope) -> str | None:
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key == "token":
            return str(value)
    return None


PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "connect-src 'self'; font-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
"""The pages' Content-Security-Policy: every script, request and frame from this server alone (no
inline script), never framed by another page. Inline styles are allowed: plotly.js sets them on
the elements it draws (a ``style`` attribute is no script)."""

DOCS_CSP = "frame-ancestors 'none'; object-src 'none'; base-uri 'none'"
"""FastAPI's /docs and /redoc load their viewers from a CDN with an inline script: never framed."""

_DOCS_PATHS = ("/docs", "/redoc")


def _secured(send: Send, path: str) -> Send:
    """``send`` that adds the security headers to every response (refusals included) and keeps a
    ``Location`` to a relative path of the app."""
    csp = DOCS_CSP if path.startswith(_DOCS_PATHS) else PAGE_CSP
    added = [
        (b"x-frame-options", b"DENY"),
        (b"content-security-policy", csp.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
    ]

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = []
            for key, value in message.get("headers", ()):
                if bytes(key).lower() == b"location":
                    value = _relative_location(bytes(value))
                headers.append((key, value))
            message = {**message, "headers": [*headers, *added]}
        await send(message)

    return wrapped


def _relative_location(value: bytes) -> bytes:
    """A redirect leaves only for a path of this app: an absolute or protocol-relative URL (``//``,
    ``/\\``) is cut to its path."""
    text = value.decode("latin-1")
    if text.startswith("/") and not text.startswith(("//", "/\\")):
        return value
    rest = text.split("://", 1)[1] if "://" in text else text.lstrip("/\\")
    if "://" in text:  # drop the authority
        rest = rest[rest.find("/") :] if "/" in rest else ""
    path, _, query = rest.partition("?")
    return (app_path(path) + (f"?{query}" if query else "")).encode("latin-1")


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


def app_path(path: str) -> str:
    """``path`` as a relative path of this app: one leading ``/``, every byte outside RFC 3986's
    path characters percent-encoded, so ``//evil.example/`` (protocol-relative, another site) or
    ``/\\evil.example`` (read as ``//`` by browsers) becomes ``/evil.example/``, a path here."""
    return "/" + quote(path, safe="/-._~!$&'()*+,;=:@").lstrip("/")


async def _redirect_with_cookie(send: Send, scope: Scope, token: str) -> None:
    query = [(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1")) if k != "token"]
    location = app_path(scope["path"]) + (f"?{urlencode(query)}" if query else "")
    cookie = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
    headers = [
        (b"location", location.encode("latin-1")),
        (b"set-cookie", cookie.encode("latin-1")),
        (b"content-length", b"0"),
        (b"cache-control", b"no-store"),
    ]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})
