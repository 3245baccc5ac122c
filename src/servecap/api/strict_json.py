"""Request bodies read strictly: UTF-8 JSON with a JSON content type, every key once.

Python's ``json.loads`` of bytes guesses UTF-16 or UTF-32 from the first bytes and keeps the last
of two equal keys, so ``{"rate": 1, "rate": 1e9}`` would reach the work sizing as one thing and
the job as another reader's. RFC 8259 section 8.1 makes UTF-8 the only encoding of JSON between
systems (and forbids a byte order mark); section 4 says names SHOULD be unique and that readers
differ on duplicates: here they are refused, naming the key.

:class:`StrictJsonRoute` is the app's route class: before FastAPI reads a body it checks the
content type (``application/json``, a ``charset`` of ``utf-8`` at most: else 415), decodes it as
UTF-8 (else 400) and parses it once with the duplicate check; FastAPI then takes the parsed value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from email.message import Message
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from servecap.errors import ServecapError

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class BadBody(ServecapError):
    """A body that is not UTF-8 JSON of the right type: ``status`` 400 or 415."""

    def __init__(self, status: int, field: str, value: object, problem: str) -> None:
        super().__init__(field, value, problem)
        self.status = status


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BadBody(400, "body", key, "this key comes twice in one object (RFC 8259 4: names are unique)")
        out[key] = value
    return out


def check_content_type(value: str | None) -> None:
    """Refuse (415) a body whose type is not JSON, or whose charset is not UTF-8."""
    if not value:
        raise BadBody(415, "content-type", None, "send the body as 'Content-Type: application/json'")
    message = Message()
    message["content-type"] = value
    subtype = message.get_content_subtype()
    if message.get_content_maintype() != "application" or not (subtype == "json" or subtype.endswith("+json")):
        raise BadBody(415, "content-type", value, "the body must be JSON ('Content-Type: application/json')")
    charset = message.get_param("charset")
    if charset is not None and str(charset).lower() not in ("utf-8", "utf8"):
        raise BadBody(415, "content-type", value, "JSON is UTF-8 (RFC 8259 8.1): no other charset is read")


def parse_json_body(raw: bytes) -> Any:
    """``raw`` as UTF-8 JSON (no byte order mark), every object's keys unique."""
    if raw.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        raise BadBody(400, "body", None, "starts with a byte order mark: JSON is UTF-8 without one (RFC 8259 8.1)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadBody(400, "body", None, f"not UTF-8 (byte {err.start}): JSON is UTF-8 (RFC 8259 8.1)") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as err:
        raise BadBody(400, "body", None, f"not valid JSON ({err.msg} at character {err.pos})") from None
    except RecursionError:
        raise BadBody(400, "body", None, "nested too deeply") from None


class StrictJsonRoute(APIRoute):
    """An APIRoute whose body is read by :func:`parse_json_body` (see the module)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler

        async def strict(request: Request) -> Response:
            if request.method in _BODY_METHODS:
                raw = await request.body()
                if raw:
                    check_content_type(request.headers.get("content-type"))
                    request._json = parse_json_body(raw)  # FastAPI's request.json() returns it
            return await handler(request)

        return strict
