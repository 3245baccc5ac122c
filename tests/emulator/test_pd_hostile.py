"""The P/D emulator as a target: a decode server fetches only from a validated peer (never a URL a
body builds), refuses bad bootstrap fields in one line without exception text, the bootstrap
endpoints need the pair's secret, and waits are bounded so never-answering peers starve no one."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from emulator_helpers import small_plan

from servecap.emulator.server import ServerThread, engine_state

PROMPT = "x" * 4 * 1000  # about 1,000 tokens: 63 blocks of 16


class Listener:
    """A TCP listener on 127.0.0.1 that records what arrives and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = int(self.sock.getsockname()[1])
        self.received: list[bytes] = []
        self.conns: list[socket.socket] = []
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.conns.append(conn)
            conn.settimeout(0.5)
            try:
                data = conn.recv(4096)
                if data:
                    self.received.append(data)
            except OSError:
                pass

    def close(self) -> None:
        self._stop = True
        self.thread.join(timeout=5)
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.fixture()
def listener() -> Iterator[Listener]:
    lst = Listener()
    yield lst
    lst.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _body(host: object, port: object, room: object = 1, **extra: object) -> dict[str, object]:
    body: dict[str, object] = {"model": "m", "prompt": PROMPT, "max_tokens": 4, "bootstrap_room": room}
    if host is not None:
        body["bootstrap_host"] = host
    if port is not None:
        body["bootstrap_port"] = port
    return {**body, **extra}


def _one_line_refusal(r: httpx.Response, status: int) -> str:
    assert r.status_code == status, (r.status_code, r.text)
    message = str(r.json()["error"]["message"])
    assert "\n" not in message and "Error" not in message and "Traceback" not in message, message
    return message


def test_a_body_cannot_aim_the_decode_server_at_a_url(listener: Listener) -> None:
    p = small_plan(num_blocks=400)
    with ServerThread(engine_state(p, model_name="m", role="decode", kv_link="tcp")) as dec:
        for host in (
            f"127.0.0.1:{listener.port}/injected/path?x=",
            f"127.0.0.1:{listener.port}",
            "http://127.0.0.1",
            "127.0.0.1/x",
            "user@127.0.0.1",
            "127.0.0.1#x",
            "",
            ["127.0.0.1"],
        ):
            r = httpx.post(dec.url + "/v1/completions", json=_body(host, listener.port), timeout=10)
            _one_line_refusal(r, 400)
        time.sleep(0.6)
        assert listener.received == [], listener.received  # nothing reached the listener


def test_a_decode_server_with_peers_fetches_from_them_alone(listener: Listener) -> None:
    p = small_plan(num_blocks=400)
    state = engine_state(p, model_name="m", role="decode", kv_link="tcp", bootstrap_peers=("127.0.0.1:1",))
    with ServerThread(state) as dec:
        r = httpx.post(dec.url + "/v1/completions", json=_body("127.0.0.1", listener.port), timeout=10)
        assert "bootstrap-peer" in _one_line_refusal(r, 400)
        time.sleep(0.6)
        assert listener.received == []


@pytest.mark.parametrize(
    ("host", "port", "room", "status"),
    [
        ("127.0.0.1", None, 1, 400),  # bootstrap_port missing
        ("127.0.0.1", "abc", 1, 400),
        ("127.0.0.1", "8998", 1, 400),  # a string is not a port
        ("127.0.0.1", 70000, 1, 400),
        ("127.0.0.1", 0, 1, 400),
        ("127.0.0.1", -1, 1, 400),
        ("127.0.0.1", True, 1, 400),
        ("127.0.0.1", 1.5, 1, 400),
        ("127.0.0.1", 8998, -1, 400),
        ("127.0.0.1", 8998, 2**70, 400),
        (None, 8998, 1, 400),
        ("127.0.0.1", "closed", 1, 400),  # nobody listens there
    ],
)
def test_bad_bootstrap_fields_get_one_line_without_exception_text(
    host: object, port: object, room: object, status: int
) -> None:
    p = small_plan(num_blocks=400)
    with ServerThread(engine_state(p, model_name="m", role="decode", kv_link="tcp")) as dec:
        port = _closed_port() if port == "closed" else port
        t0 = time.monotonic()
        r = httpx.post(dec.url + "/v1/completions", json=_body(host, port, room), timeout=30)
        _one_line_refusal(r, status)
        assert time.monotonic() - t0 < 5.0


def test_the_bootstrap_endpoints_need_the_secret_and_valid_fields() -> None:
    from servecap.emulator.pd import PROCESS_SECRET

    p = small_plan(num_blocks=400)
    with ServerThread(engine_state(p, model_name="m", role="prefill", kv_link="tcp", pd_secret="a" * 20)) as pre:
        for path in ("/servecap/pd/kv/1", "/servecap/pd/ready/1"):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {PROCESS_SECRET}"}):
                _one_line_refusal(httpx.get(pre.url + path, headers=headers, timeout=5), 401)
        auth = {"Authorization": "Bearer " + "a" * 20}
        for tp in ("0", "-4", "abc", "100000"):
            r = httpx.get(pre.url + "/servecap/pd/kv/1", params={"tp": tp}, headers=auth, timeout=5)
            _one_line_refusal(r, 400)
        for query in ({"hbm": "nan"}, {"hbm": "-1"}, {"bytes_per_token_per_gpu": "-1"}):
            _one_line_refusal(httpx.get(pre.url + "/servecap/pd/kv/1", params=query, headers=auth, timeout=5), 400)
        _one_line_refusal(httpx.get(pre.url + "/servecap/pd/kv/-5", headers=auth, timeout=5), 400)


def test_rooms_nobody_prefilled_are_bounded_in_count_and_time() -> None:
    from servecap.emulator.pd import PROCESS_SECRET

    p = small_plan(num_blocks=400)
    with ServerThread(engine_state(p, model_name="m", role="prefill", kv_link="tcp")) as pre:
        assert pre.state.pd is not None
        pre.state.pd.max_waiting, pre.state.pd.wait_s = 3, 1.0
        auth = {"Authorization": f"Bearer {PROCESS_SECRET}"}

        async def waits() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=10) as c:
                first = [
                    asyncio.ensure_future(c.get(f"{pre.url}/servecap/pd/ready/{room}", headers=auth))
                    for room in range(3)
                ]
                await asyncio.sleep(0.3)
                t0 = time.monotonic()
                fourth = await c.get(f"{pre.url}/servecap/pd/ready/99", headers=auth)
                assert time.monotonic() - t0 < 0.5  # refused at once, not queued
                return [fourth, *await asyncio.gather(*first)]

        fourth, *timed_out = asyncio.run(waits())
        _one_line_refusal(fourth, 503)
        for r in timed_out:
            _one_line_refusal(r, 504)
        assert pre.state.pd._rooms == {}  # forgotten when their wait ended


def test_never_answering_bootstraps_do_not_starve_the_next_request(listener: Listener) -> None:
    """Six requests whose bootstrap accepts and never answers would reserve 6 x 63 of the decode
    server's 400 blocks while they wait; they hold none, so the seventh, a real pair, is served."""
    p = small_plan(num_blocks=400)
    with (
        ServerThread(engine_state(p, model_name="m", role="prefill", kv_link="tcp")) as pre,
        ServerThread(engine_state(p, model_name="m", role="decode", kv_link="tcp")) as dec,
    ):
        assert dec.state.pd is not None
        dec.state.pd.wait_s = 6.0

        async def run() -> tuple[list[httpx.Response], httpx.Response, float]:
            async with httpx.AsyncClient(timeout=30) as c:
                stuck = [
                    asyncio.ensure_future(
                        c.post(dec.url + "/v1/completions", json=_body("127.0.0.1", listener.port, room))
                    )
                    for room in range(100, 106)
                ]
                await asyncio.sleep(0.5)
                t0 = time.perf_counter()
                _rp, rd = await asyncio.gather(
                    c.post(pre.url + "/v1/completions", json=_body("127.0.0.1", pre.port, 7)),
                    c.post(dec.url + "/v1/completions", json=_body("127.0.0.1", pre.port, 7)),
                )
                served_s = time.perf_counter() - t0
                return list(await asyncio.gather(*stuck)), rd, served_s

        stuck, rd, served_s = asyncio.run(run())
        assert rd.status_code == 200, rd.text
        assert served_s < 3.0, served_s  # not behind the six stuck ones (each waits 6 s)
        for r in stuck:
            _one_line_refusal(r, 504)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--role", "prefill"], "pd_secret"),  # no shared secret
        (["--role", "decode", "--pd-secret", "short"], "pd_secret"),
        (["--role", "decode", "--pd-secret", "sixteen chars and spaces"], "pd_secret"),
        (["--role", "prefill", "--pd-secret", "a" * 20, "--bootstrap-peer", "127.0.0.1:8998"], "bootstrap_peer"),
        (["--role", "decode", "--pd-secret", "a" * 20, "--bootstrap-peer", "127.0.0.1:99999"], "bootstrap_peer"),
        (["--role", "decode", "--pd-secret", "a" * 20, "--bootstrap-peer", "http://x/y:1"], "bootstrap_peer"),
        (["--pd-secret", "a" * 20], "role"),
    ],
)
def test_emulate_checks_the_pd_flags_before_serving(args: list[str], field: str) -> None:
    from click.testing import CliRunner

    from servecap.cli.main import cli

    env = {"SERVECAP_PD_SECRET": ""} if "--pd-secret" not in args else {}
    out = CliRunner().invoke(
        cli, ["emulate", "-m", "meta-llama/Llama-3.1-8B", "-g", "H100", "--port", str(_closed_port()), *args], env=env
    )
    assert out.exit_code != 0
    text = str(out.exception) + out.output
    assert field in text and "Traceback" not in text, text
