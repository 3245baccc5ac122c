"""What the server's guard (api/guard.py: Host, Origin, token, body counting) costs per request,
in process: a trivial ASGI app called directly and behind the guard, with a token and without.

    .venv/bin/python benchmarks/api_guard_cost.py [--requests 200000]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from servecap.api.guard import Guard, GuardSettings

TOKEN = "a-token-for-the-benchmark-0123"


async def _app(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


def _scope(token: bool) -> dict[str, Any]:
    headers = [
        (b"host", b"127.0.0.1:8080"),
        (b"content-type", b"application/json"),
        (b"content-length", b"45"),
        (b"origin", b"http://127.0.0.1:8080"),
    ]
    if token:
        headers.append((b"authorization", f"Bearer {TOKEN}".encode()))
    return {"type": "http", "method": "POST", "path": "/api/v1/plan", "query_string": b"", "headers": headers}


async def _per_request_us(app: Any, scope: dict[str, Any], n: int) -> float:
    body = {"type": "http.request", "body": b'{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}'[:45]}

    async def receive() -> dict[str, Any]:
        return body

    async def send(_message: dict[str, Any]) -> None:
        return None

    started = time.perf_counter()
    for _ in range(n):
        await app(scope, receive, send)
    return (time.perf_counter() - started) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200_000)
    n = ap.parse_args().requests
    bare = asyncio.run(_per_request_us(_app, _scope(False), n))
    open_ = asyncio.run(_per_request_us(Guard(_app, GuardSettings()), _scope(False), n))
    tokened = asyncio.run(_per_request_us(Guard(_app, GuardSettings(token=TOKEN)), _scope(True), n))
    print(f"bare app: {bare:.2f} us/request")
    print(f"guard, loopback (Host, Origin, Content-Length, counting): {open_:.2f} us (+{open_ - bare:.2f})")
    print(f"guard with a token (Bearer header): {tokened:.2f} us (+{tokened - bare:.2f})")


if __name__ == "__main__":
    main()
