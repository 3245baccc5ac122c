"""bench against hostile servers and stores: nothing is sent to a server while the store is
unusable, answers of the wrong shape are one line or a warning, and a run that cannot be stored
is kept in a side file."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from click.testing import CliRunner

from servecap.app.bench import check_base_url, first_model, save_or_keep, server_deployment
from servecap.cli.main import cli
from servecap.errors import ServecapError
from servecap.results import MeasuredRequest, summarize
from servecap.results.store import RunStore


class _Answers(BaseHTTPRequestHandler):
    answers: ClassVar[dict[str, bytes]] = {}
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        type(self).seen.append(self.path)
        body = self.answers.get(self.path, b'{"error": "no"}')
        self.send_response(200 if self.path in self.answers else 404)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Answers]]]:
    handler = type("H", (_Answers,), {"answers": {}, "seen": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def _run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(cli, args)
    if isinstance(result.exception, ServecapError):
        return 2, f"error: {result.exception}"
    return result.exit_code, result.output


def test_a_damaged_store_is_refused_before_any_request(server: tuple[str, type[_Answers]], tmp_path: Path) -> None:
    url, handler = server
    handler.answers["/v1/models"] = b'{"data": [{"id": "m"}]}'
    db = tmp_path / "runs.sqlite"
    db.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    before = db.read_bytes()
    code, out = _run(["bench", url, "--rate", "5", "--num-requests", "3", "--db", str(db)])
    assert code == 2 and out.startswith("error: db=") and len(out.strip().splitlines()) == 1, out
    assert handler.seen == []  # not one request sent
    assert db.read_bytes() == before


def test_a_foreign_store_is_refused_before_any_request(server: tuple[str, type[_Answers]], tmp_path: Path) -> None:
    import sqlite3

    url, handler = server
    db = tmp_path / "app.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE accounts (id INTEGER)")
    code, out = _run(["bench", url, "--rate", "5", "--num-requests", "3", "--db", str(db), "--model", "m"])
    assert code == 2 and "not a servecap run store" in out and handler.seen == []


@pytest.mark.parametrize(
    "body", [b'{"data": "abc"}', b'{"data": [1]}', b'{"data": [{"id": 5}]}', b"[]", b"not json", b'{"data": []}']
)
def test_models_answers_of_the_wrong_shape_are_one_line(server: tuple[str, type[_Answers]], body: bytes) -> None:
    url, handler = server
    handler.answers["/v1/models"] = body
    with pytest.raises(ServecapError, match=r"^model=None: not given and .*/v1/models did not name one"):
        first_model(url, None)


@pytest.mark.parametrize(
    "answer",
    [
        {"gpu": 5},
        {"gpu": "H100", "model": 7},
        {"gpu": "nope", "model": "meta-llama/Llama-3.1-8B"},
        {"gpu": "H100", "model": "meta-llama/Llama-3.1-8B", "tp": "x"},
        {"gpu": ["H100"], "model": None},
    ],
)
def test_a_garbage_deployment_is_dropped_with_a_warning(server: tuple[str, type[_Answers]], answer: object) -> None:
    url, handler = server
    handler.answers["/servecap/deployment"] = json.dumps(answer).encode()
    warnings: list[str] = []
    assert server_deployment(url, None, warnings) is None
    assert len(warnings) == 1 and "not valid" in warnings[0] and "\n" not in warnings[0]


def test_a_good_deployment_is_kept(server: tuple[str, type[_Answers]]) -> None:
    url, handler = server
    good = {"gpu": "H100", "model": "meta-llama/Llama-3.1-8B"}
    handler.answers["/servecap/deployment"] = json.dumps(good).encode()
    warnings: list[str] = []
    assert server_deployment(url, None, warnings) == good and warnings == []


@pytest.mark.parametrize("url", ["http://[::1", "http://", "ftp://x", "http://h:99999", "http://h:x/"])
def test_bad_urls_are_one_line(url: str) -> None:
    with pytest.raises(ServecapError, match=r"^url="):
        check_base_url(url)


def test_a_run_that_cannot_be_stored_is_kept_in_a_side_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = RunStore(tmp_path / "runs.sqlite")
    store.path.write_bytes(b"damaged during the run" * 100)
    req = MeasuredRequest("0", 0.0, 10, 2, sent_s=0.0, first_token_s=0.1, end_s=0.2, token_times_s=(0.1, 0.2))
    warnings: list[str] = []
    run_id = save_or_keep(
        store,
        warnings,
        run_id="r-side",
        url="http://x",
        model="m",
        mode="open",
        settings={"seed": 0},
        requests=[req],
        summary=summarize([req.to_record(0)], duration_s=0.2),
        wall_duration_s=0.2,
    )
    assert run_id is None and len(warnings) == 1
    side = tmp_path / "servecap-run-r-side.json"
    assert str(side) in warnings[0]
    kept = json.loads(side.read_text())
    assert kept["run_id"] == "r-side" and kept["requests"][0]["token_times_s"] == [0.1, 0.2]
