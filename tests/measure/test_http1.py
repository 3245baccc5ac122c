"""The HTTP/1.1 client's response handling (httptools): every body framing, interim responses,
connection reuse, and malformed input as a protocol error."""

from __future__ import annotations

import asyncio

import pytest

from servecap.measure.http1 import ProtocolError, RawClient, _Conn


class _Wire:
    def write(self, data: bytes) -> None:
        pass

    def abort(self) -> None:
        pass


async def _feed(*parts: bytes, close: bool = False) -> tuple[int, bytes, _Conn, BaseException | None]:
    conn = _Conn(asyncio.get_running_loop())
    conn.connection_made(_Wire())  # type: ignore[arg-type]
    status: list[int] = []
    got: list[bytes] = []
    done = conn.begin(b"POST / HTTP/1.1\r\n\r\n", status.append, got.append, 5.0)
    for p in parts:
        conn.data_received(p)
    if close:
        conn.connection_lost(None)
    err = None
    try:
        await asyncio.wait_for(done, 1.0)
    except ProtocolError as e:
        err = e
    return (status[-1] if status else 0), b"".join(got), conn, err


async def test_content_length_body_and_reuse() -> None:
    status, body, conn, err = await _feed(b"HTTP/1.1 404 Not Found\r\ncontent-length: 5\r\n\r\nno", b"pe!")
    assert (status, body, err) == (404, b"nope!", None) and conn.reusable


async def test_connection_close_and_http_1_0_are_not_reused() -> None:
    _, _, conn, _ = await _feed(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
    assert not conn.reusable
    _, body, conn, _ = await _feed(b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok")
    assert body == b"ok" and not conn.reusable


async def test_body_until_the_connection_closes() -> None:
    status, body, conn, err = await _feed(b"HTTP/1.1 200 OK\r\n\r\ndata: 1\n\n", b"data: 2\n\n", close=True)
    assert (status, body, err) == (200, b"data: 1\n\ndata: 2\n\n", None) and not conn.reusable


async def test_interim_response_then_the_real_one() -> None:
    status, body, _, err = await _feed(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi")
    assert (status, body, err) == (200, b"hi", None)


async def test_pieces_of_one_read_come_as_one_callback() -> None:
    """Several chunks in one read are handed over once (one timestamp per read)."""
    conn = _Conn(asyncio.get_running_loop())
    conn.connection_made(_Wire())  # type: ignore[arg-type]
    got: list[bytes] = []
    done = conn.begin(b"x", lambda s: None, got.append, 5.0)
    conn.data_received(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n3\r\ncde\r\n")
    conn.data_received(b"1\r\nf\r\n0\r\n\r\n")
    await asyncio.wait_for(done, 1.0)
    assert got == [b"abcde", b"f"]


@pytest.mark.parametrize(
    "wire",
    [
        b"SMTP ready\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
    ],
)
async def test_malformed_responses_are_protocol_errors(wire: bytes) -> None:
    _, _, conn, err = await _feed(wire)
    assert isinstance(err, ProtocolError) and not conn.reusable


async def test_early_close_is_a_protocol_error() -> None:
    _, _, _, err = await _feed(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc", close=True)
    assert isinstance(err, ProtocolError) and "closed by the server" in str(err)


async def test_a_real_server_over_keep_alive() -> None:
    """Two requests on one connection to a real socket server (content-length, then chunked)."""
    conns = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal conns
        conns += 1
        for answer in (
            b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\none",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\ntwo\r\n0\r\n\r\n",
        ):
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(
                next(line for line in head.split(b"\r\n") if line.startswith(b"content-length")).split(b":")[1]
            )
            await reader.readexactly(length)
            writer.write(answer)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/completions"
    async with server, RawClient() as client:
        bodies = []
        for _ in range(2):
            got: list[bytes] = []
            await client.stream(client.prepare("POST", url, b"{}", {}), lambda s: None, got.append, stall_timeout_s=5.0)
            bodies.append(b"".join(got))
    assert bodies == [b"one", b"two"] and conns == 1
